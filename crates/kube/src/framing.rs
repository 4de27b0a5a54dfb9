//! Splitting a watch response body into events: one JSON document per line, or one
//! length-delimited protobuf frame each.

use kinformer_core::ErrorChain;
use std::io;

use futures::io::AsyncBufReadExt;
use futures::{AsyncBufRead, Stream, StreamExt};
use kinformer_protobuf::FrameDecoder;

use kinformer_reflector::{Error, WatchEvent, WatchStream};

/// Whether an I/O error while reading a watch means the connection went away (the
/// server closed it, a proxy cut it, the peer reset it): the watch simply ended, as
/// client-go's `IsProbableEOF` decides.
fn is_probable_eof(e: &io::Error) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(io) = err.downcast_ref::<io::Error>()
            && matches!(
                io.kind(),
                io::ErrorKind::UnexpectedEof
                    | io::ErrorKind::ConnectionReset
                    | io::ErrorKind::ConnectionAborted
                    | io::ErrorKind::BrokenPipe
                    | io::ErrorKind::TimedOut
            )
        {
            return true;
        }
        let msg = err.to_string().to_ascii_lowercase();
        if [
            "unexpected eof",
            "connection reset",
            "connection closed",
            "broken pipe",
            "close_notify",
            "end of file",
            "error reading a body from connection",
        ]
        .iter()
        .any(|p| msg.contains(p))
        {
            return true;
        }
        // `io::Error::source` skips the error it wraps: look inside first.
        cur = match err.downcast_ref::<io::Error>().and_then(io::Error::get_ref) {
            Some(inner) => Some(inner as &(dyn std::error::Error + 'static)),
            None => err.source(),
        };
    }
    false
}

/// What a failure to read a watch body means: nothing when the connection went away (the
/// watch simply ended), else the stream's last item.
fn read_failure(e: io::Error) -> Option<Error> {
    if is_probable_eof(&e) {
        tracing::debug!(error = %ErrorChain(&e), "watch connection closed");
        None
    } else {
        Some(Error::unreachable(e))
    }
}

/// Turns a watch response body of newline-delimited documents into a stream of events:
/// `decode` gets each line (without its newline) and says what it is, or `None` for a
/// line to skip. A connection that ends mid-line, or that the peer cuts, ends the stream
/// cleanly; any other read failure is its last item.
pub(super) fn watch_lines<K, R, D>(body: R, decode: D) -> WatchStream<K>
where
    K: Send + 'static,
    R: AsyncBufRead + Send + 'static,
    D: FnMut(&[u8]) -> Option<Result<WatchEvent<K>, Error>> + Send + 'static,
{
    struct State<R, D> {
        body: std::pin::Pin<Box<R>>,
        buf: Vec<u8>,
        decode: D,
        done: bool,
    }
    let state = State {
        body: Box::pin(body),
        buf: Vec::with_capacity(8 * 1024),
        decode,
        done: false,
    };
    futures::stream::unfold(state, |mut st| async move {
        loop {
            if st.done {
                return None;
            }
            st.buf.clear();
            match st.body.as_mut().read_until(b'\n', &mut st.buf).await {
                Ok(0) => return None,
                Ok(_) if st.buf.last() != Some(&b'\n') => {
                    // The connection ended mid-line: a cut, not a malformed event.
                    tracing::debug!(bytes = st.buf.len(), "watch connection ended mid-event");
                    return None;
                }
                Ok(n) => match (st.decode)(&st.buf[..n - 1]) {
                    Some(ev) => return Some((ev, st)),
                    None => continue,
                },
                Err(e) => {
                    st.done = true;
                    return read_failure(e).map(|e| (Err(e), st));
                }
            }
        }
    })
    .boxed()
}

/// Cuts a watch body into its events as its chunks arrive: protobuf's length-delimited
/// frames ([`FrameDecoder`]) or a CBOR sequence's data items
/// ([`Sequence`](crate::cbor::Sequence)).
pub(super) trait Frames: Send + 'static {
    /// Appends a chunk of the body.
    fn push(&mut self, bytes: &[u8]);
    /// The next whole event, `None` until all of it is in.
    ///
    /// # Errors
    /// When the stream cannot go on (a malformed or oversized event).
    fn next_frame(&mut self) -> Result<Option<&[u8]>, Error>;
    /// Bytes of an event not all in (what a cut mid-event leaves).
    fn unfinished(&self) -> usize;
}

impl Frames for FrameDecoder {
    fn push(&mut self, bytes: &[u8]) {
        FrameDecoder::push(self, bytes);
    }
    fn next_frame(&mut self) -> Result<Option<&[u8]>, Error> {
        FrameDecoder::next_frame(self).map_err(|e| Error::decode("watch stream", e.to_string()))
    }
    fn unfinished(&self) -> usize {
        self.buffered()
    }
}

impl Frames for crate::cbor::Sequence {
    fn push(&mut self, bytes: &[u8]) {
        crate::cbor::Sequence::push(self, bytes);
    }
    fn next_frame(&mut self) -> Result<Option<&[u8]>, Error> {
        self.next_item()
    }
    fn unfinished(&self) -> usize {
        self.buffered()
    }
}

/// Turns a watch response body of events that `frames` cuts out (protobuf's
/// length-delimited frames, `application/vnd.kubernetes.protobuf;stream=watch`; a CBOR
/// sequence, `application/cbor-seq`) into a stream of events: `decode` gets each and says
/// what it is. A connection that ends mid-event, or that the peer cuts, ends the stream
/// cleanly; an event longer than client-go's limit (16 MiB) or malformed framing is a
/// decode error and the last item (the stream cannot be resynchronised), as is any other
/// read failure.
pub(super) fn watch_frames<K, S, B, F, D>(body: S, frames: F, decode: D) -> WatchStream<K>
where
    K: Send + 'static,
    S: Stream<Item = Result<B, io::Error>> + Send + 'static,
    B: AsRef<[u8]>,
    F: Frames,
    D: FnMut(&[u8]) -> Result<WatchEvent<K>, Error> + Send + 'static,
{
    struct State<S, F, D> {
        body: std::pin::Pin<Box<S>>,
        frames: F,
        decode: D,
        done: bool,
    }
    let state = State {
        body: Box::pin(body),
        frames,
        decode,
        done: false,
    };
    futures::stream::unfold(state, |mut st| async move {
        loop {
            if st.done {
                return None;
            }
            match st.frames.next_frame() {
                Ok(Some(frame)) => {
                    let ev = (st.decode)(frame);
                    return Some((ev, st));
                }
                Ok(None) => {}
                Err(e) => {
                    st.done = true;
                    return Some((Err(e), st));
                }
            }
            match st.body.next().await {
                Some(Ok(chunk)) => st.frames.push(chunk.as_ref()),
                None => {
                    let unfinished = st.frames.unfinished();
                    if unfinished > 0 {
                        // A cut, not a malformed event.
                        tracing::debug!(unfinished, "watch connection ended mid-event");
                    }
                    return None;
                }
                Some(Err(e)) => {
                    st.done = true;
                    return read_failure(e).map(|e| (Err(e), st));
                }
            }
        }
    })
    .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kinformer_reflector::Bookmark;

    #[test]
    fn probable_eof_covers_cuts_and_resets_but_not_other_io_errors() {
        assert!(is_probable_eof(&io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "x"
        )));
        assert!(is_probable_eof(&io::Error::other(
            "peer closed connection without sending TLS close_notify"
        )));
        assert!(is_probable_eof(&io::Error::other(io::Error::new(
            io::ErrorKind::ConnectionReset,
            "reset"
        ))));
        assert!(!is_probable_eof(&io::Error::other("invalid certificate")));
    }

    #[tokio::test]
    async fn lines_are_handed_out_without_newlines_and_a_cut_line_ends_the_stream() {
        let body: &[u8] = b"3\n\n4\n5";
        let stream: WatchStream<String> = watch_lines(futures::io::Cursor::new(body), |line| {
            let s = std::str::from_utf8(line).ok()?;
            (!s.is_empty()).then(|| Ok(WatchEvent::Bookmark(Bookmark::new(s, false))))
        });
        let got: Vec<String> = stream
            .map(|e| match e {
                Ok(WatchEvent::Bookmark(b)) => b.resource_version,
                other => format!("{other:?}"),
            })
            .collect()
            .await;
        assert_eq!(
            got,
            ["3", "4"],
            "the blank line skipped, the cut \"5\" dropped"
        );
    }
}

#[cfg(test)]
mod frame_tests {
    use super::*;
    use kinformer_reflector::Bookmark;

    fn framed(payloads: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        for p in payloads {
            out.extend_from_slice(&u32::try_from(p.len()).unwrap().to_be_bytes());
            out.extend_from_slice(p);
        }
        out
    }

    /// The frames of `body` delivered in chunks of `chunk` bytes, then `tail` (an error or
    /// nothing), as bookmark RVs or error texts.
    async fn events(body: &[u8], chunk: usize, tail: Option<io::Error>) -> Vec<String> {
        let mut chunks: Vec<Result<Vec<u8>, io::Error>> =
            body.chunks(chunk).map(|c| Ok(c.to_vec())).collect();
        chunks.extend(tail.map(Err));
        let stream: WatchStream<String> = watch_frames(
            futures::stream::iter(chunks),
            FrameDecoder::new(),
            |frame: &[u8]| match std::str::from_utf8(frame) {
                Ok(s) => Ok(WatchEvent::Bookmark(Bookmark::new(s, false))),
                Err(_) => Err(Error::decode("frame", "not UTF-8")),
            },
        );
        stream
            .map(|e| match e {
                Ok(WatchEvent::Bookmark(b)) => b.resource_version,
                Ok(other) => format!("{other:?}"),
                Err(e) => format!("error: {e}"),
            })
            .collect()
            .await
    }

    #[tokio::test]
    async fn frames_come_out_whatever_the_chunking_and_a_cut_frame_ends_the_stream() {
        let body = framed(&[b"3", b"", b"45", b"\xff", b"6"]);
        for chunk in [1, 2, 3, 7, body.len()] {
            let got = events(&body, chunk, None).await;
            assert_eq!(
                got,
                ["3", "", "45", "error: cannot decode frame: not UTF-8", "6"],
                "chunks of {chunk}"
            );
        }
        // The connection ends inside the last frame, or inside its prefix: the frames
        // before it, then the end, no error.
        for cut in [body.len() - 1, body.len() - 3] {
            assert_eq!(events(&body[..cut], 4, None).await.len(), 4, "cut at {cut}");
        }
        // A reset is the end of the watch too; another failure is its last item.
        let reset = io::Error::new(io::ErrorKind::ConnectionReset, "reset");
        assert_eq!(events(&body, 4, Some(reset)).await.len(), 5);
        let tls = io::Error::other("invalid certificate");
        let got = events(&body, 4, Some(tls)).await;
        assert_eq!(got.last().unwrap(), "error: cannot reach the API server");
    }

    #[tokio::test]
    async fn an_oversized_frame_is_a_decode_error_and_ends_the_stream() {
        let mut body = framed(&[b"1"]);
        body.extend_from_slice(&u32::MAX.to_be_bytes());
        body.extend_from_slice(&framed(&[b"2"]));
        let got = events(&body, 3, None).await;
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[0], "1");
        assert!(
            got[1]
                .starts_with("error: cannot decode watch stream: watch frame of 4294967295 bytes"),
            "{got:?}"
        );
    }
}
