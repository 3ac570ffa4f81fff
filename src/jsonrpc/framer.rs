//! A read buffer that cuts a byte stream into lines, scanning each byte once.
//!
//! The framer owns the buffer the relay reads into. Complete lines are
//! handed out as ranges of that buffer, so the relay writes the very bytes it
//! read. A line that grows past the limit stops being buffered: its bytes are
//! scanned (to learn its id and size) and dropped as they arrive, so memory
//! stays bounded however large a message is.

use std::io::{self, Read};
use std::ops::Range;

use super::scan::{LineScanner, LineSummary};

/// The least free space the framer offers the OS per read. A pipe holds
/// 64 KiB.
const READ_CHUNK: usize = 64 * 1024;
/// Above this, an idle buffer is released instead of kept for reuse, so one
/// huge message does not pin memory for the rest of the session. Below it,
/// the buffer is reused as is: no re-allocation, no re-zeroing, no page
/// faults for the next message of a similar size.
const KEEP_CAPACITY: usize = 16 * 1024 * 1024;

/// The summary of a complete line whose `id` or `method` was too long for
/// the streaming scanner's capture: read again with no capture limit (the
/// line is in the buffer; only such lines take this path), so a call with
/// a long id is paired and recorded like any other.
fn whole_captures(line: &[u8], summary: LineSummary) -> LineSummary {
    if !summary.capture_overflow {
        return summary;
    }
    super::scan::summarize(line)
}

/// One unit the relay acts on.
#[derive(Debug)]
pub(crate) enum Frame {
    /// A complete line: `buf[range]` includes the trailing `\n` (absent only
    /// for a final line cut off by end of stream).
    Line {
        range: Range<usize>,
        summary: LineSummary,
    },
    /// A line longer than the limit. Its bytes are gone; the summary says
    /// what it was and how long (`summary.len`).
    Oversized { summary: LineSummary },
}

pub(crate) struct Framer {
    /// Storage; `buf[..end]` holds data, the rest is zeroed spare room (so
    /// reads need no per-read initialisation).
    buf: Vec<u8>,
    end: usize,
    /// Start of the line not yet complete.
    line_start: usize,
    /// Bytes of `buf` already fed to the scanner.
    scanned: usize,
    scanner: LineScanner,
    limit: u64,
    /// The current line passed the limit and is being skipped.
    skipping: bool,
}

impl Framer {
    /// `limit`: the longest line (without its `\n`) delivered whole.
    pub(crate) fn new(limit: u64) -> Self {
        Framer {
            buf: vec![0; READ_CHUNK],
            end: 0,
            line_start: 0,
            scanned: 0,
            scanner: LineScanner::new(),
            limit,
            skipping: false,
        }
    }

    /// Reads once from `source` into the buffer. `Ok(0)` is end of stream.
    pub(crate) fn fill(&mut self, source: &mut impl Read) -> io::Result<usize> {
        self.compact();
        if self.buf.len() - self.end < READ_CHUNK {
            // Grow geometrically; only the new part is zeroed, once. Never
            // past what the longest deliverable line needs (a line over the
            // limit is skipped, not held): doubling would otherwise reserve,
            // and touch, up to twice the limit for one large message.
            let ceiling = usize::try_from(self.limit)
                .unwrap_or(usize::MAX)
                .saturating_add(2 * READ_CHUNK);
            let want = (self.buf.len() * 2).min(ceiling).max(self.end + READ_CHUNK);
            self.buf.resize(want, 0);
        }
        loop {
            match source.read(&mut self.buf[self.end..]) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Ok(n) => {
                    self.end += n;
                    return Ok(n);
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// The bytes of a frame's range.
    pub(crate) fn bytes(&self, range: Range<usize>) -> &[u8] {
        &self.buf[range]
    }

    /// The next complete frame in what has been read so far.
    pub(crate) fn next_frame(&mut self) -> Option<Frame> {
        match self.scanner.scan(&self.buf[self.scanned..self.end]) {
            Some(n) => {
                let end = self.scanned + n;
                let summary = self.scanner.end_line();
                if self.skipping || summary.len > self.limit {
                    self.skipping = false;
                    // Nothing of the line is kept (if it ended in this very
                    // chunk, part of it is still in the buffer: drop it).
                    self.buf.copy_within(end..self.end, self.line_start);
                    self.end -= end - self.line_start;
                    self.scanned = self.line_start;
                    return Some(Frame::Oversized { summary });
                }
                let range = self.line_start..end;
                let summary = whole_captures(&self.buf[range.clone()], summary);
                let frame = Frame::Line { range, summary };
                self.line_start = end;
                self.scanned = end;
                Some(frame)
            }
            None => {
                self.scanned = self.end;
                let held = (self.end - self.line_start) as u64;
                if self.skipping || held > self.limit {
                    self.skipping = true;
                    self.end = self.line_start;
                    self.scanned = self.line_start;
                }
                None
            }
        }
    }

    /// The next frame; once the stream has ended (`eof`), also the final
    /// line that had no `\n`. Returns `None` when nothing is left.
    pub(crate) fn next_frame_or_final(&mut self, eof: bool) -> Option<Frame> {
        match self.next_frame() {
            Some(frame) => Some(frame),
            None if eof => self.finish(),
            None => None,
        }
    }

    /// At end of stream: the final line that had no `\n`, if any.
    pub(crate) fn finish(&mut self) -> Option<Frame> {
        if self.end == self.line_start && !self.skipping {
            return None;
        }
        let summary = self.scanner.end_line();
        if self.skipping {
            self.skipping = false;
            return Some(Frame::Oversized { summary });
        }
        let range = self.line_start..self.end;
        self.line_start = self.end;
        self.scanned = self.end;
        let summary = whole_captures(&self.buf[range.clone()], summary);
        Some(Frame::Line { range, summary })
    }

    /// Drops the lines already handed out, keeping the incomplete tail.
    fn compact(&mut self) {
        if self.line_start == self.end && self.buf.len() > KEEP_CAPACITY {
            self.buf = vec![0; READ_CHUNK];
        } else if self.line_start > 0 {
            self.buf.copy_within(self.line_start..self.end, 0);
        } else {
            return;
        }
        self.end -= self.line_start;
        self.scanned -= self.line_start;
        self.line_start = 0;
    }

    /// Memory held by the buffer (for tests).
    #[cfg(test)]
    fn capacity(&self) -> usize {
        self.buf.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonrpc::scan::Shape;

    /// A reader that returns the input in pieces of the given sizes.
    struct Chunked<'a> {
        data: &'a [u8],
        sizes: Vec<usize>,
        at: usize,
    }

    impl Read for Chunked<'_> {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            if self.data.is_empty() {
                return Ok(0);
            }
            let want = self.sizes[self.at % self.sizes.len()].max(1);
            self.at += 1;
            let n = want.min(out.len()).min(self.data.len());
            out[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    /// Runs the framer to the end; lines as (bytes or None-if-oversized, len).
    fn frames(input: &[u8], sizes: Vec<usize>, limit: u64) -> Vec<(Option<Vec<u8>>, u64, Shape)> {
        let mut f = Framer::new(limit);
        let mut src = Chunked {
            data: input,
            sizes,
            at: 0,
        };
        let mut out = Vec::new();
        loop {
            let n = f.fill(&mut src).expect("read");
            while let Some(frame) = f.next_frame() {
                out.push(match frame {
                    Frame::Line { range, summary } => {
                        (Some(f.bytes(range).to_vec()), summary.len, summary.shape)
                    }
                    Frame::Oversized { summary } => (None, summary.len, summary.shape),
                });
            }
            if n == 0 {
                if let Some(frame) = f.finish() {
                    out.push(match frame {
                        Frame::Line { range, summary } => {
                            (Some(f.bytes(range).to_vec()), summary.len, summary.shape)
                        }
                        Frame::Oversized { summary } => (None, summary.len, summary.shape),
                    });
                }
                return out;
            }
        }
    }

    #[test]
    fn lines_are_cut_exactly() {
        let input = b"{\"id\":1}\r\n\n{\"a\":[1,2]}\nnot json\n{\"tail\":true}";
        let got = frames(input, vec![3], 1000);
        let joined: Vec<u8> = got
            .iter()
            .flat_map(|(b, _, _)| b.clone().unwrap_or_default())
            .collect();
        assert_eq!(
            joined,
            input.to_vec(),
            "every byte handed out once, in order"
        );
        assert_eq!(got.len(), 5);
        assert_eq!(got[3].2, Shape::Invalid);
        assert_eq!(got[4].0.as_deref(), Some(&b"{\"tail\":true}"[..]));
    }

    #[test]
    fn oversized_lines_are_skipped_with_their_size_and_id() {
        let big = format!(
            "{{\"result\":{{\"t\":\"{}\"}},\"id\":42}}",
            "x".repeat(5000)
        );
        let input = format!("{{\"id\":1}}\n{big}\n{{\"id\":2}}\n");
        for sizes in [vec![7], vec![100], vec![65536]] {
            let got = frames(input.as_bytes(), sizes, 1000);
            assert_eq!(got.len(), 3);
            assert_eq!(got[1].0, None);
            assert_eq!(got[1].1, big.len() as u64);
            assert_eq!(got[2].0.as_deref(), Some(&b"{\"id\":2}\n"[..]));
        }
    }

    #[test]
    fn oversized_summary_keeps_id() {
        let mut f = Framer::new(10);
        let line = b"{\"result\":\"xxxxxxxxxxxxxxxxxxxxxxxx\",\"id\":\"abc\"}\n";
        let mut src = &line[..];
        f.fill(&mut src).expect("read");
        match f.next_frame() {
            Some(Frame::Oversized { summary }) => {
                assert_eq!(summary.id.as_deref(), Some(&b"\"abc\""[..]));
                assert!(summary.has_result);
            }
            other => panic!("expected oversized, got {other:?}"),
        }
    }

    #[test]
    fn memory_stays_bounded_while_skipping() {
        struct Endless(usize);
        impl Read for Endless {
            fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
                if self.0 == 0 {
                    return Ok(0);
                }
                self.0 -= 1;
                out.fill(b'x');
                if self.0 == 0 {
                    out[0] = b'\n';
                }
                Ok(out.len())
            }
        }
        let mut f = Framer::new(1024);
        let mut src = Endless(2000); // ~128 MiB
        let mut max_cap = 0;
        loop {
            let n = f.fill(&mut src).expect("read");
            while f.next_frame().is_some() {}
            max_cap = max_cap.max(f.capacity());
            if n == 0 {
                break;
            }
        }
        assert!(max_cap <= 4 * READ_CHUNK, "capacity {max_cap}");
    }

    /// A line longer than the limit never makes the buffer grow much past
    /// the limit (doubling took it to twice the limit).
    #[test]
    fn the_buffer_grows_to_the_limit_not_past_it() {
        let limit = 40 * READ_CHUNK + 123;
        let mut line = vec![b'x'; 3 * limit];
        line.push(b'\n');
        line.extend_from_slice(b"{\"id\":1}\n");
        let mut f = Framer::new(limit as u64);
        let mut src = Chunked {
            data: &line,
            sizes: vec![READ_CHUNK],
            at: 0,
        };
        let mut max_cap = 0;
        let mut frames = Vec::new();
        loop {
            let n = f.fill(&mut src).expect("read");
            while let Some(frame) = f.next_frame() {
                frames.push(frame);
            }
            max_cap = max_cap.max(f.capacity());
            if n == 0 {
                break;
            }
        }
        assert!(matches!(frames.first(), Some(Frame::Oversized { .. })));
        assert!(matches!(frames.get(1), Some(Frame::Line { .. })));
        assert!(
            max_cap <= limit + 3 * READ_CHUNK,
            "capacity {max_cap} for a limit of {limit}"
        );
    }
}
