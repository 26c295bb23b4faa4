//! One request's exchange during a flood or on a kept connection: the
//! request built for HTTP/1.1 or HTTP/2, and how it ended.

use http_body_util::BodyExt;
use hyper::{Request, StatusCode};
use serde_json::Value;

/// How a request of a flood ended.
#[derive(Debug)]
pub enum Ended {
    /// 200 with an AdmissionReview echoing the uid.
    Answered,
    /// 503, with its one-line reason.
    Unavailable(String),
    /// Any other status.
    Other(StatusCode, String),
    /// A transport error: reset, closed, or no answer in time.
    Failed(String),
}

impl std::fmt::Display for Ended {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Answered => write!(f, "200"),
            Self::Unavailable(text) => write!(f, "503: {}", text.trim_end()),
            Self::Other(status, text) => write!(f, "{status}: {}", text.trim_end()),
            Self::Failed(why) => write!(f, "failed: {why}"),
        }
    }
}

/// How `response` to `request` ended: answered with its uid, 503, or else.
pub async fn ended(
    response: Result<hyper::Response<hyper::body::Incoming>, hyper::Error>,
    request: &Value,
) -> Ended {
    let response = match response {
        Ok(r) => r,
        Err(e) => return Ended::Failed(format!("{e:?}")),
    };
    let status = response.status();
    let body = match response.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => return Ended::Failed(format!("answer body: {e:?}")),
    };
    let text = String::from_utf8_lossy(&body).into_owned();
    match status {
        StatusCode::OK => {
            let review: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            if review["response"]["uid"] == request["request"]["uid"] {
                Ended::Answered
            } else {
                Ended::Other(status, text)
            }
        }
        StatusCode::SERVICE_UNAVAILABLE => Ended::Unavailable(text),
        other => Ended::Other(other, text),
    }
}

/// A JSON POST of `body` to `path`, with the headers HTTP/1.1 or HTTP/2
/// wants.
pub fn post<B>(path: &str, body: B, http2: bool) -> Request<B> {
    let builder = Request::post(path).header("content-type", "application/json");
    let builder = if http2 {
        builder.uri(format!("https://localhost{path}"))
    } else {
        builder.header("host", "localhost")
    };
    builder.body(body).expect("request")
}
