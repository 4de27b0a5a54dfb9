//! The length-delimited framing of a protobuf watch stream: each frame is a 4-byte
//! big-endian length, then that many bytes.

use crate::error::Error;

/// Splits a watch stream into frames, without doing any I/O: push the bytes as they arrive,
/// take out the frames that are complete.
///
/// A length prefix larger than the limit ([`FrameDecoder::DEFAULT_MAX_FRAME_LEN`], 16 MiB,
/// client-go's limit for one watch event, unless set with
/// [`with_max_frame_len`](FrameDecoder::with_max_frame_len)) is an
/// [`Error::FrameTooLarge`] as soon as the prefix arrives: the decoder never reserves
/// memory for a length it was told, it only holds the bytes it was given, and never more
/// than one frame (plus the chunk that completed it) at a time.
///
/// ```
/// use kinformer_protobuf::{Error, FrameDecoder};
///
/// let mut frames = FrameDecoder::new();
/// frames.push(&[0, 0, 0, 3, b'a']); // a 3-byte frame, cut after its first byte
/// assert_eq!(frames.next_frame()?, None);
/// frames.push(&[b'b', b'c', 0, 0]);
/// assert_eq!(frames.next_frame()?, Some(&b"abc"[..]));
/// assert_eq!(frames.next_frame()?, None);
/// // The connection ends two bytes into the next prefix.
/// assert!(matches!(frames.finish(), Err(Error::CutMidFrame { have: 2, want: 4 })));
///
/// let mut hostile = FrameDecoder::with_max_frame_len(1024);
/// hostile.push(&[0xff, 0xff, 0xff, 0xff]);
/// assert!(matches!(hostile.next_frame(), Err(Error::FrameTooLarge { .. })));
/// # Ok::<(), kinformer_protobuf::Error>(())
/// ```
#[derive(Debug)]
pub struct FrameDecoder {
    buf: Vec<u8>,
    /// Where the next frame's prefix starts in `buf` (the bytes before it are consumed).
    start: usize,
    max_frame_len: usize,
}

impl Default for FrameDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl FrameDecoder {
    /// client-go's limit on one watch event (its streaming decoder's `maxBytes`).
    pub const DEFAULT_MAX_FRAME_LEN: usize = 16 * 1024 * 1024;

    /// A decoder with the default limit of 16 MiB per frame.
    pub fn new() -> Self {
        Self::with_max_frame_len(Self::DEFAULT_MAX_FRAME_LEN)
    }

    /// A decoder that refuses frames longer than `max` bytes (without the prefix).
    pub fn with_max_frame_len(max: usize) -> Self {
        FrameDecoder {
            buf: Vec::new(),
            start: 0,
            max_frame_len: max,
        }
    }

    /// The longest frame this decoder accepts.
    pub fn max_frame_len(&self) -> usize {
        self.max_frame_len
    }

    /// Adds bytes that arrived.
    pub fn push(&mut self, bytes: &[u8]) {
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// The next complete frame, or `None` until more bytes are pushed. After an
    /// [`Error::FrameTooLarge`] every call returns that error again: the stream cannot be
    /// resynchronised.
    pub fn next_frame(&mut self) -> Result<Option<&[u8]>, Error> {
        let avail = self.buf.get(self.start..).unwrap_or_default();
        let Some(&[a, b, c, d]) = avail.get(..4) else {
            return Ok(None);
        };
        let len = u32::from_be_bytes([a, b, c, d]);
        if u64::from(len) > self.max_frame_len as u64 {
            return Err(Error::FrameTooLarge {
                len: u64::from(len),
                max: self.max_frame_len,
            });
        }
        let len = len as usize;
        if avail.len() - 4 < len {
            return Ok(None);
        }
        let begin = self.start + 4;
        self.start = begin + len;
        Ok(self.buf.get(begin..begin + len))
    }

    /// Bytes pushed but not yet handed out as a frame.
    pub fn buffered(&self) -> usize {
        self.buf.len().saturating_sub(self.start)
    }

    /// Call when the stream ended: `Ok` if it ended between frames, else
    /// [`Error::CutMidFrame`] (a cut connection: the frames before it were whole).
    pub fn finish(&self) -> Result<(), Error> {
        let have = self.buffered();
        if have == 0 {
            return Ok(());
        }
        let avail = self.buf.get(self.start..).unwrap_or_default();
        let want = match avail.get(..4) {
            Some(&[a, b, c, d]) => 4 + u32::from_be_bytes([a, b, c, d]) as usize,
            _ => 4,
        };
        Err(Error::CutMidFrame { have, want })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(payload: &[u8]) -> Vec<u8> {
        let mut f = (payload.len() as u32).to_be_bytes().to_vec();
        f.extend_from_slice(payload);
        f
    }

    #[test]
    fn frames_come_out_whatever_the_chunking() {
        let mut stream = frame(b"first");
        stream.extend(frame(b""));
        stream.extend(frame(&[7u8; 300]));
        for chunk in [1, 2, 3, 5, 64, stream.len()] {
            let mut d = FrameDecoder::new();
            let mut got: Vec<Vec<u8>> = Vec::new();
            for c in stream.chunks(chunk) {
                d.push(c);
                while let Some(f) = d.next_frame().expect("within the limit") {
                    got.push(f.to_vec());
                }
            }
            assert_eq!(
                got,
                [b"first".to_vec(), Vec::new(), vec![7u8; 300]],
                "chunk {chunk}"
            );
            assert!(d.finish().is_ok());
            assert_eq!(d.buffered(), 0);
        }
    }

    #[test]
    fn a_cut_inside_the_payload_reports_how_much_arrived() {
        let mut d = FrameDecoder::new();
        d.push(&frame(b"0123456789")[..7]);
        assert_eq!(d.next_frame().ok(), Some(None));
        assert!(matches!(
            d.finish(),
            Err(Error::CutMidFrame { have: 7, want: 14 })
        ));
    }

    #[test]
    fn an_oversized_prefix_fails_at_once_and_stays_failed() {
        let mut d = FrameDecoder::with_max_frame_len(16);
        d.push(&frame(&[0; 16]));
        assert_eq!(d.next_frame().ok().flatten().map(<[u8]>::len), Some(16));
        d.push(&[0, 0, 0, 17]);
        for _ in 0..2 {
            assert!(matches!(
                d.next_frame(),
                Err(Error::FrameTooLarge { len: 17, max: 16 })
            ));
        }
        assert_eq!(
            d.buffered(),
            4,
            "nothing was reserved for the announced length"
        );
    }
}
