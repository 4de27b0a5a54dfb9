//! gzip-compressed response bodies: whole list pages, and streaming lists decoded chunk by
//! chunk as they arrive.
//!
//! What the API server compresses, when a request says `Accept-Encoding: gzip`: a list
//! response over 128 KiB (`APIResponseCompression`, on since 1.16), and since 1.37 a
//! streaming list (`WatchListCompression`, beta and on): the whole response, an event of
//! the watch that follows included. Plain watches never are. A streaming list is a
//! sequence of gzip members, one per flush of the server (k8s.io/apiserver's
//! `perFlushGzipWriter` closes its writer at every flush, so that an idle watch holds no
//! compressor): the decoder reads member after member and hands out what each holds as
//! soon as it is in, so an event is never held back waiting for the next one.

use std::io;

use async_compression::futures::bufread::GzipDecoder;
use bytes::Bytes;
use futures::Stream;
use futures::io::{AsyncBufRead, AsyncReadExt};

use kinformer_reflector::Error;

/// The bytes handed on at most at once from a decompressed stream.
const CHUNK: usize = 64 * 1024;

/// Whether a response's `Content-Encoding` says gzip. Any other encoding is not asked for,
/// so it is not expected; the body is then handed on as it is and fails to decode.
pub(super) fn is_gzip(content_encoding: Option<&http::HeaderValue>) -> bool {
    content_encoding.is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"gzip"))
}

/// A whole gzip body (a list page), decompressed.
///
/// # Errors
/// [`Error::Decode`] when it is not gzip or is cut short.
pub(super) async fn gunzip(body: &[u8]) -> Result<Vec<u8>, Error> {
    let mut decoder = GzipDecoder::new(body);
    decoder.multiple_members(true);
    // Most list pages compress between 4x and 10x.
    let mut out = Vec::with_capacity(body.len().saturating_mul(6));
    decoder
        .read_to_end(&mut out)
        .await
        .map_err(|e| Error::decode("list", format!("gzip body: {e}")))?;
    Ok(out)
}

/// A gzip stream of bodies (a streaming list), decompressed as each chunk arrives. A read
/// failure of the body ends the stream as it came (the framing tells a cut from a
/// failure); a malformed member is an [`io::ErrorKind::InvalidData`] error.
pub(super) fn gunzip_stream<R>(body: R) -> impl Stream<Item = io::Result<Bytes>> + Send
where
    R: AsyncBufRead + Send + Unpin + 'static,
{
    let mut decoder = GzipDecoder::new(body);
    decoder.multiple_members(true);
    // One buffer, reused; each chunk is a copy of what one read filled (an event after the
    // initial list is a few KiB, not a buffer's worth).
    let state = Some((decoder, vec![0; CHUNK]));
    futures::stream::unfold(state, |state| async move {
        let (mut decoder, mut buf) = state?;
        match decoder.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                let chunk = Bytes::copy_from_slice(&buf[..n]);
                Some((Ok(chunk), Some((decoder, buf))))
            }
            Err(e) => Some((Err(e), None)),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    use async_compression::futures::write::GzipEncoder;
    use futures::io::AsyncWriteExt;
    use futures::{StreamExt, TryStreamExt};

    async fn gzip(data: &[u8]) -> Vec<u8> {
        let mut enc = GzipEncoder::new(Vec::new());
        enc.write_all(data).await.unwrap();
        enc.close().await.unwrap();
        enc.into_inner()
    }

    #[tokio::test]
    async fn a_body_of_several_members_decompresses_whole() {
        let mut body = gzip(b"first ").await;
        body.extend(gzip(b"second").await);
        assert_eq!(gunzip(&body).await.unwrap(), b"first second");
        let err = gunzip(&body[..body.len() - 4]).await.unwrap_err();
        assert!(matches!(err, Error::Decode { .. }), "{err:?}");
        assert!(gunzip(b"not gzip at all").await.is_err());
    }

    /// What the server sends after the initial events: one member per flush, then nothing
    /// for a while. Each member's bytes come out while the connection stays open.
    #[tokio::test]
    async fn each_member_comes_out_as_soon_as_it_is_in() {
        let (tx, rx) = futures::channel::mpsc::unbounded::<io::Result<Vec<u8>>>();
        let mut out = Box::pin(gunzip_stream(rx.into_async_read()));
        tx.unbounded_send(Ok(gzip(b"event 1\n").await)).unwrap();
        let first = tokio::time::timeout(std::time::Duration::from_secs(5), out.next())
            .await
            .expect("the first member without waiting for a second");
        assert_eq!(first.unwrap().unwrap(), &b"event 1\n"[..]);
        // A member split across chunks.
        let second = gzip(b"event 2\n").await;
        let (a, b) = second.split_at(7);
        tx.unbounded_send(Ok(a.to_vec())).unwrap();
        tx.unbounded_send(Ok(b.to_vec())).unwrap();
        assert_eq!(out.next().await.unwrap().unwrap(), &b"event 2\n"[..]);
        drop(tx);
        assert!(
            out.next().await.is_none(),
            "the end of the body ends the stream"
        );
    }

    #[tokio::test]
    async fn a_stream_cut_mid_member_ends_with_an_eof_and_garbage_is_invalid_data() {
        let whole = gzip(b"event 1\n").await;
        let cut = futures::stream::iter([Ok::<_, io::Error>(whole[..whole.len() - 3].to_vec())]);
        let items: Vec<_> = gunzip_stream(cut.into_async_read()).collect().await;
        let err = items.into_iter().find_map(Result::err).expect("an error");
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof, "{err}");

        let garbage = futures::stream::iter([Ok::<_, io::Error>(b"\x1f\x8bnot a member".to_vec())]);
        let items: Vec<_> = gunzip_stream(garbage.into_async_read()).collect().await;
        let err = items.into_iter().find_map(Result::err).expect("an error");
        assert_ne!(err.kind(), io::ErrorKind::UnexpectedEof, "{err}");
    }
}
