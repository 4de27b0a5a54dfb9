//! Splitting a watch response body into events: one JSON document per line.

use kinformer_core::ErrorChain;
use std::io;

use futures::io::AsyncBufReadExt;
use futures::{AsyncBufRead, StreamExt};

use crate::{Error, WatchEvent, WatchStream};

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
                Err(e) if is_probable_eof(&e) => {
                    tracing::debug!(error = %ErrorChain(&e), "watch connection closed");
                    return None;
                }
                Err(e) => {
                    st.done = true;
                    return Some((Err(Error::unreachable(e)), st));
                }
            }
        }
    })
    .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Bookmark;

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
