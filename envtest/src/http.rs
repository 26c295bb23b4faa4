//! A minimal blocking HTTP/1.1 client, plain or over TLS: GETs for readiness
//! checks and metrics (kubectl would cost a process start per poll), and a
//! POST for requests sent to the webhook without the API server.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, ServerName};

/// How to reach an HTTPS server: the CA to trust and a bearer token.
#[derive(Clone)]
pub struct Tls {
    config: Arc<rustls::ClientConfig>,
    token: Option<String>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tls { .. }")
    }
}

impl Tls {
    /// Trusts only `ca_pem`; sends `token` as a bearer token when given.
    pub fn new(ca_pem: &str, token: Option<&str>) -> Result<Self, String> {
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
            let cert = cert.map_err(|e| format!("CA PEM: {e}"))?;
            roots.add(cert).map_err(|e| format!("CA: {e}"))?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS versions: {e}"))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Self {
            config: Arc::new(config),
            token: token.map(str::to_owned),
        })
    }
}

/// GETs `path` from `addr` (HTTPS when `tls` is given): the status code and
/// the body.
pub fn get(addr: SocketAddr, path: &str, tls: Option<&Tls>) -> Result<(u16, String), String> {
    send(addr, "GET", path, "", tls)
}

/// POSTs the JSON `body` to `path` at `addr`: the status code and the body.
pub fn post_json(
    addr: SocketAddr,
    path: &str,
    body: &str,
    tls: Option<&Tls>,
) -> Result<(u16, String), String> {
    send(addr, "POST", path, body, tls)
}

fn send(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: &str,
    tls: Option<&Tls>,
) -> Result<(u16, String), String> {
    let timeout = Duration::from_secs(10);
    let tcp = TcpStream::connect_timeout(&addr, timeout).map_err(|e| format!("{addr}: {e}"))?;
    tcp.set_read_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    tcp.set_write_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    let auth = tls
        .and_then(|t| t.token.as_deref())
        .map(|token| format!("Authorization: Bearer {token}\r\n"))
        .unwrap_or_default();
    let content = if body.is_empty() {
        String::new()
    } else {
        format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        )
    };
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}{content}Connection: close\r\n\r\n{body}"
    );
    let mut raw = Vec::new();
    match tls {
        None => {
            let mut tcp = tcp;
            tcp.write_all(request.as_bytes())
                .map_err(|e| format!("{addr}: {e}"))?;
            tcp.read_to_end(&mut raw)
                .map_err(|e| format!("{addr}: {e}"))?;
        }
        Some(tls) => {
            let name = ServerName::IpAddress(addr.ip().into());
            let conn = rustls::ClientConnection::new(Arc::clone(&tls.config), name)
                .map_err(|e| format!("TLS: {e}"))?;
            let mut stream = rustls::StreamOwned::new(conn, tcp);
            stream
                .write_all(request.as_bytes())
                .map_err(|e| format!("https://{addr}: {e}"))?;
            // Some servers close without close_notify; what arrived counts.
            if let Err(e) = stream.read_to_end(&mut raw)
                && (e.kind() != std::io::ErrorKind::UnexpectedEof || raw.is_empty())
            {
                return Err(format!("https://{addr}: {e}"));
            }
        }
    }
    parse(&raw).ok_or_else(|| {
        format!(
            "{addr}{path}: not an HTTP answer: {:?}",
            String::from_utf8_lossy(&raw[..raw.len().min(200)])
        )
    })
}

/// Status and body of a raw answer (chunked bodies are decoded).
fn parse(raw: &[u8]) -> Option<(u16, String)> {
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&raw[..split]);
    let body = &raw[split + 4..];
    let status = head.split(' ').nth(1)?.parse().ok()?;
    let chunked = head.lines().any(|l| {
        let l = l.to_ascii_lowercase();
        l.starts_with("transfer-encoding:") && l.contains("chunked")
    });
    let body = if chunked {
        dechunk(body)?
    } else {
        body.to_vec()
    };
    Some((status, String::from_utf8_lossy(&body).into_owned()))
}

fn dechunk(mut body: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = body.windows(2).position(|w| w == b"\r\n")?;
        let size = std::str::from_utf8(&body[..line_end]).ok()?;
        let size = usize::from_str_radix(size.split(';').next()?.trim(), 16).ok()?;
        let rest = &body[line_end + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(rest.get(..size)?);
        body = rest.get(size + 2..)?;
    }
}
