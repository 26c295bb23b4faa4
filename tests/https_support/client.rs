//! The HTTPS client that verifies the test server's certificate (one
//! connection per request, or a kept-alive one) and the plain HTTP/1.1 GET
//! of the admin server.

use std::net::SocketAddr;
use std::sync::Arc;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use pipelinerollout_webhook::server::tls;
use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use serde_json::Value;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// GETs a path over plain HTTP/1.1: status, Content-Type and body.
pub async fn admin_get(addr: SocketAddr, path: &str) -> (StatusCode, String, String) {
    let tcp = TcpStream::connect(addr).await.expect("connect admin");
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .expect("http1 handshake");
    tokio::spawn(conn);
    let request = Request::builder()
        .uri(path)
        .header("host", "localhost")
        .body(Full::new(Bytes::new()))
        .expect("request");
    let response = sender.send_request(request).await.expect("admin request");
    let (status, content_type, body) = read_response(response).await;
    (
        status,
        content_type,
        String::from_utf8_lossy(&body).into_owned(),
    )
}

/// An HTTP answer.
#[derive(Debug)]
pub struct Answer {
    /// The status code.
    pub status: StatusCode,
    /// The Content-Type header.
    pub content_type: String,
    /// The body.
    pub body: Bytes,
    /// The HTTP version spoken.
    pub version: hyper::Version,
}

impl Answer {
    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "body is not JSON ({e}): {}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// A minimal HTTPS client: one connection per request, HTTP/1.1 or HTTP/2
/// as ALPN chooses.
#[derive(Clone)]
pub struct Client {
    addr: SocketAddr,
    connector: TlsConnector,
    http2: bool,
}

impl Client {
    /// A client that trusts only `ca_pem`.
    pub(super) fn new(addr: SocketAddr, ca_pem: &str) -> Self {
        Self::build(addr, &[ca_pem], None)
    }

    /// A client that trusts every CA in `ca_pems` and, when given, presents
    /// the client certificate `identity` (certificate PEM, key PEM).
    pub fn build(addr: SocketAddr, ca_pems: &[&str], identity: Option<(&str, &str)>) -> Self {
        let mut roots = RootCertStore::empty();
        for pem in ca_pems {
            for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
                roots.add(cert.expect("CA PEM")).expect("add CA");
            }
        }
        let builder = rustls::ClientConfig::builder_with_provider(tls::provider())
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_root_certificates(roots);
        let mut config = match identity {
            None => builder.with_no_client_auth(),
            Some((cert, key)) => {
                let chain = CertificateDer::pem_slice_iter(cert.as_bytes())
                    .collect::<Result<Vec<_>, _>>()
                    .expect("client cert");
                let key = rustls_pki_types::PrivateKeyDer::from_pem_slice(key.as_bytes())
                    .expect("client key");
                builder
                    .with_client_auth_cert(chain, key)
                    .expect("client auth")
            }
        };
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Self {
            addr,
            connector: TlsConnector::from(Arc::new(config)),
            http2: false,
        }
    }

    /// Opens a TLS connection: the stream and the certificate the server
    /// presented (DER).
    pub async fn connect_tls(
        &self,
    ) -> std::io::Result<(tokio_rustls::client::TlsStream<TcpStream>, Vec<u8>)> {
        let tcp = TcpStream::connect(self.addr).await?;
        let tls = self
            .connector
            .connect(ServerName::try_from("localhost").expect("name"), tcp)
            .await?;
        let peer = tls
            .get_ref()
            .1
            .peer_certificates()
            .and_then(|c| c.first())
            .map(|c| c.as_ref().to_vec())
            .unwrap_or_default();
        Ok((tls, peer))
    }

    /// Opens a kept-alive HTTP/1.1 connection.
    pub async fn connect(&self) -> Conn {
        let (tls, peer_cert) = self.connect_tls().await.expect("TLS connection");
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .expect("http1 handshake");
        tokio::spawn(conn);
        Conn { sender, peer_cert }
    }

    /// A client that offers only HTTP/2 (`h2`) in ALPN.
    pub fn http2(&self) -> Self {
        Self {
            http2: true,
            ..self.clone()
        }
    }

    /// POSTs `body` to `path` with Content-Type application/json.
    pub async fn post(&self, path: &str, body: impl Into<Bytes>) -> Answer {
        self.request(Method::POST, path, "application/json", body.into())
            .await
    }

    /// Sends one request on a new TLS connection.
    pub async fn request(
        &self,
        method: Method,
        path: &str,
        content_type: &str,
        body: Bytes,
    ) -> Answer {
        let tcp = TcpStream::connect(self.addr).await.expect("connect");
        let tls = self
            .connector
            .connect(ServerName::try_from("localhost").expect("name"), tcp)
            .await
            .expect("TLS handshake with a verified certificate");
        let alpn_h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
        let request = Request::builder()
            .method(method)
            .uri(format!("https://localhost:{}{path}", self.addr.port()))
            .header("content-type", content_type)
            .body(Full::new(body))
            .expect("request");
        let response = if self.http2 {
            assert!(alpn_h2, "server did not choose h2 in ALPN");
            let (mut sender, conn) =
                hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
                    .await
                    .expect("h2 handshake");
            tokio::spawn(conn);
            sender.send_request(request).await.expect("h2 request")
        } else {
            let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
                .await
                .expect("http1 handshake");
            tokio::spawn(conn);
            let mut request = request;
            *request.uri_mut() = path.parse().expect("path");
            request
                .headers_mut()
                .insert("host", "localhost".parse().expect("host"));
            sender.send_request(request).await.expect("http1 request")
        };
        let version = response.version();
        let (status, content_type, body) = read_response(response).await;
        Answer {
            status,
            content_type,
            body,
            version,
        }
    }
}

/// A kept-alive HTTP/1.1 connection.
pub struct Conn {
    sender: hyper::client::conn::http1::SendRequest<Full<Bytes>>,
    /// The certificate the server presented on this connection (DER).
    pub peer_cert: Vec<u8>,
}

impl Conn {
    /// POSTs `body` to `path` on this connection.
    pub async fn post(
        &mut self,
        path: &str,
        body: impl Into<Bytes>,
    ) -> Result<(StatusCode, Bytes), hyper::Error> {
        self.sender.ready().await?;
        let request = Request::builder()
            .method(Method::POST)
            .uri(path)
            .header("host", "localhost")
            .header("content-type", "application/json")
            .body(Full::new(body.into()))
            .expect("request");
        let response = self.sender.send_request(request).await?;
        let status = response.status();
        let body = response.into_body().collect().await?.to_bytes();
        Ok((status, body))
    }
}

/// Status, Content-Type and body of a response.
async fn read_response(
    response: hyper::Response<hyper::body::Incoming>,
) -> (StatusCode, String, Bytes) {
    let status = response.status();
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let body = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    (status, content_type, body)
}
