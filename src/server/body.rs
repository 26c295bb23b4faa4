//! A reserved request body read into one buffer for the handler.
//!
//! A body that arrives as a single frame (an HTTP/1.1 body that came with
//! its head, an HTTP/2 body in one DATA frame: what the API server sends
//! for an ordinary review) is kept as that frame, a view of the bytes the
//! connection read, without a copy. A body in several frames is copied
//! into one buffer of its announced size as the frames arrive.

use axum::body::{Body, Bytes, HttpBody};

/// Why a reserved body could not be read.
#[derive(Debug, thiserror::Error)]
pub(super) enum ReadError {
    /// Longer than the largest body accepted.
    #[error("request body is larger than the {max}-byte limit")]
    TooLarge {
        /// The largest body accepted.
        max: usize,
    },
    /// Longer than its reservation (its Content-Length).
    #[error("request body is longer than its Content-Length")]
    LongerThanAnnounced,
    /// The connection failed or the client gave up.
    #[error("cannot read the request body: {0}")]
    Failed(axum::Error),
}

/// What has been read so far.
enum Collected {
    Nothing,
    One(Bytes),
    Many(Vec<u8>),
}

impl Collected {
    fn len(&self) -> usize {
        match self {
            Self::Nothing => 0,
            Self::One(bytes) => bytes.len(),
            Self::Many(buffer) => buffer.len(),
        }
    }

    /// Adds a frame; `capacity` is the size to copy into when a second
    /// frame comes.
    fn push(&mut self, data: Bytes, capacity: usize) {
        match self {
            Self::Nothing => *self = Self::One(data),
            Self::One(first) => {
                let mut buffer = Vec::with_capacity(capacity.max(first.len() + data.len()));
                buffer.extend_from_slice(first);
                buffer.extend_from_slice(&data);
                *self = Self::Many(buffer);
            }
            Self::Many(buffer) => buffer.extend_from_slice(&data),
        }
    }

    fn into_bytes(self) -> Bytes {
        match self {
            Self::Nothing => Bytes::new(),
            Self::One(bytes) => bytes,
            Self::Many(buffer) => Bytes::from(buffer),
        }
    }
}

/// Reads `body`, at most `limit` bytes (its reservation) and at most `max`
/// when its length is not announced.
pub(super) async fn read(mut body: Body, limit: usize, max: usize) -> Result<Bytes, ReadError> {
    let announced = body
        .size_hint()
        .exact()
        .and_then(|n| usize::try_from(n).ok());
    let capacity = announced.unwrap_or(0).min(limit);
    let mut collected = Collected::Nothing;
    while let Some(frame) = std::future::poll_fn(|cx| std::pin::Pin::new(&mut body).poll_frame(cx))
        .await
        .transpose()
        .map_err(ReadError::Failed)?
    {
        let Ok(data) = frame.into_data() else {
            continue; // trailers
        };
        if collected.len() + data.len() > limit {
            return Err(if announced.is_some() {
                ReadError::LongerThanAnnounced
            } else {
                ReadError::TooLarge { max }
            });
        }
        collected.push(data, capacity);
    }
    Ok(collected.into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(parts: &[&'static [u8]]) -> Body {
        let parts: Vec<Result<Bytes, std::io::Error>> =
            parts.iter().map(|p| Ok(Bytes::from_static(p))).collect();
        Body::from_stream(futures_util::stream::iter(parts))
    }

    fn run(body: Body, limit: usize) -> Result<Bytes, ReadError> {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .map_err(|e| ReadError::Failed(axum::Error::new(e)))?
            .block_on(read(body, limit, 100))
    }

    #[test]
    fn a_single_frame_is_kept_without_a_copy() {
        let sent = Bytes::from(b"{\"kind\":\"AdmissionReview\"}".to_vec());
        let read = run(Body::from(sent.clone()), 64).expect("within the limit");
        assert_eq!(read, sent);
        assert_eq!(read.as_ptr(), sent.as_ptr(), "the frame itself, not a copy");
    }

    #[test]
    fn frames_are_joined_in_order() {
        let read = run(frames(&[b"ab", b"", b"cd", b"e"]), 100).expect("within the limit");
        assert_eq!(&read[..], b"abcde");
        assert_eq!(&run(frames(&[]), 100).expect("empty")[..], b"");
    }

    #[test]
    fn bodies_over_their_limit_are_refused_with_the_reason() {
        let cases = [
            (
                "unannounced, over the largest body",
                run(frames(&[b"abc", b"def"]), 5),
                "request body is larger than the 100-byte limit",
            ),
            (
                "longer than announced",
                run(Body::from(Bytes::from_static(b"abcdef")), 5),
                "request body is longer than its Content-Length",
            ),
        ];
        for (name, got, want) in cases {
            match got {
                Err(e) => assert_eq!(e.to_string(), want, "{name}"),
                Ok(bytes) => panic!("{name}: read {bytes:?}, want {want:?}"),
            }
        }
    }
}
