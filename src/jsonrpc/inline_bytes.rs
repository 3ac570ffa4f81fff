//! `SmallBytes`: a byte string stored inline when short.
//!
//! Ids and method names are a few bytes long, and the relay handles one of
//! each per message; keeping them out of the allocator is a measurable share
//! of the per-message cost.

use std::ops::Deref;

const INLINE: usize = 30;

#[derive(Clone)]
pub enum SmallBytes {
    Inline { len: u8, buf: [u8; INLINE] },
    Heap(Box<[u8]>),
}

impl SmallBytes {
    pub fn new(bytes: &[u8]) -> SmallBytes {
        if bytes.len() <= INLINE {
            let mut buf = [0u8; INLINE];
            buf[..bytes.len()].copy_from_slice(bytes);
            SmallBytes::Inline {
                len: bytes.len() as u8,
                buf,
            }
        } else {
            SmallBytes::Heap(bytes.into())
        }
    }
}

impl SmallBytes {
    /// Stores `bytes` in `slot`, copying them straight to their place.
    ///
    /// Same result as `*slot = Some(SmallBytes::new(bytes))`, which builds
    /// the value on the stack and then moves it: that move rereads bytes
    /// just written by a short copy with wider loads, which the CPU cannot
    /// forward from its store buffer (a stall of a dozen cycles or more, a
    /// sizeable share of the scanner's per-message cost).
    pub fn store(slot: &mut Option<SmallBytes>, bytes: &[u8]) {
        if bytes.len() > INLINE {
            *slot = Some(SmallBytes::Heap(bytes.into()));
            return;
        }
        *slot = Some(SmallBytes::Inline {
            len: bytes.len() as u8,
            buf: [0; INLINE],
        });
        if let Some(SmallBytes::Inline { buf, .. }) = slot
            && let Some(room) = buf.get_mut(..bytes.len())
        {
            room.copy_from_slice(bytes);
        }
    }
}

impl Default for SmallBytes {
    fn default() -> Self {
        SmallBytes::new(&[])
    }
}

impl Deref for SmallBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            SmallBytes::Inline { len, buf } => &buf[..*len as usize],
            SmallBytes::Heap(b) => b,
        }
    }
}

impl PartialEq for SmallBytes {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl Eq for SmallBytes {}

impl std::fmt::Debug for SmallBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_and_heap() {
        assert_eq!(&*SmallBytes::new(b"12"), b"12");
        let long = vec![b'x'; 100];
        assert_eq!(&*SmallBytes::new(&long), &long[..]);
        assert_eq!(SmallBytes::new(b"a"), SmallBytes::new(b"a"));
    }

    #[test]
    fn store_is_new_in_place() {
        let mut slot = None;
        for bytes in [
            &b"12"[..],
            &[b'x'; 100],
            b"",
            &[b'y'; INLINE],
            &[b'z'; INLINE + 1],
        ] {
            SmallBytes::store(&mut slot, bytes);
            assert_eq!(slot, Some(SmallBytes::new(bytes)));
            assert_eq!(slot.as_deref(), Some(bytes));
        }
    }
}
