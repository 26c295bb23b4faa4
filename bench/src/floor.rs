//! The transport floor: a bare tokio + hyper + rustls server that answers
//! every request with the same small AdmissionReview. No accept-loop
//! bookkeeping, no timeouts, no connection limit, no router: what TLS and
//! HTTP/1.1 alone cost on this machine, so that the webhook and the
//! reference servers on its own stack can be compared with it.

use std::convert::Infallible;
use std::sync::Arc;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use rustls::ServerConfig;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::reference::CONSTANT_REVIEW;

/// Reads the whole body, then answers the constant review.
async fn answer(request: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    // A client that breaks off mid-body gets the same answer; the floor
    // measures the happy path.
    let _ = request.into_body().collect().await;
    let mut response = Response::new(Full::new(Bytes::from_static(CONSTANT_REVIEW)));
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    Ok(response)
}

/// Serves HTTP/1.1 over TLS on `listener` for ever, one task a connection.
pub async fn serve(listener: TcpListener, config: Arc<ServerConfig>) {
    let acceptor = TlsAcceptor::from(config);
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            let _ = stream.set_nodelay(true);
            let Ok(tls) = acceptor.accept(stream).await else {
                return;
            };
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(tls), service_fn(answer))
                .await;
        });
    }
}
