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
}
