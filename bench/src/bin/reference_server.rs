//! Reference servers for the load benchmark (`bench/load.sh`), on exactly the
//! webhook's TLS/HTTP stack: `tls::load` for the rustls configuration and
//! `server::serve_connections` for the accept loop, TLS handshake and
//! HTTP/1.1 + HTTP/2 serving, an axum `Router` with the same 8 MiB body limit,
//! and the same multi-threaded tokio runtime (`cli::serving_runtime`). Only
//! the handler differs:
//!
//! - `constant`: reads the body and answers every POST with the same small
//!   AdmissionReview. The transport floor: no webhook on this stack can be
//!   faster.
//! - `floor`: the same answer from a bare tokio + hyper + rustls server
//!   (HTTP/1.1 only, no timeouts, no connection limit, no router): what TLS
//!   and HTTP cost before the webhook's stack adds anything.
//! - `parse-all`: parses the whole body into `serde_json::Value` and echoes
//!   `request.uid` in an allowed AdmissionReview. What a naive webhook pays.
//!
//! ```text
//! cargo run --release -p bench --bin reference_server -- --mode constant --listen 127.0.0.1:18444 --certs /tmp/certs
//! ```
//!
//! `--certs DIR` holds `tls.crt` and `tls.key` (and `ca.crt`, for clients);
//! they are generated for localhost/127.0.0.1 when absent. `--generate-only`
//! makes sure they exist and exits.
#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use bench::reference::{Mode, router};
use clap::Parser;
use pipelinerollout_webhook::pki;
use pipelinerollout_webhook::server::tls::{self, TlsFiles, TlsState};
use pipelinerollout_webhook::server::{ConnectionOptions, serve_connections};
use tokio::net::TcpListener;

/// A reference server on the webhook's TLS/HTTP stack, for benchmarks.
#[derive(Debug, Parser)]
struct Args {
    /// The handler.
    #[arg(long, value_enum, default_value_t = Mode::Constant)]
    mode: Mode,
    /// Address to serve on (HTTPS).
    #[arg(long, default_value = "127.0.0.1:18444")]
    listen: SocketAddr,
    /// Directory with tls.crt and tls.key; development certificates for
    /// localhost are generated there when absent.
    #[arg(long, default_value = "certs")]
    certs: PathBuf,
    /// Only make sure the certificates exist, then exit.
    #[arg(long)]
    generate_only: bool,
    /// The most connections served at once (the webhook's default).
    #[arg(long, default_value_t = 1024)]
    max_connections: usize,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (paths, _) = match pki::ensure_dev_certs(&args.certs) {
        Ok(found) => found,
        Err(e) => {
            eprintln!("reference_server: {e}");
            return ExitCode::FAILURE;
        }
    };
    if args.generate_only {
        println!("{}", paths.ca.display());
        return ExitCode::SUCCESS;
    }
    let loaded = match tls::load(&TlsFiles {
        cert: paths.cert,
        key: paths.key,
        client_ca: None,
    }) {
        Ok(loaded) => loaded,
        Err(e) => {
            eprintln!("reference_server: {e}");
            return ExitCode::FAILURE;
        }
    };
    let runtime = match pipelinerollout_webhook::cli::serving_runtime() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("reference_server: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        let listener = match TcpListener::bind(args.listen).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("reference_server: cannot listen on {}: {e}", args.listen);
                return ExitCode::FAILURE;
            }
        };
        eprintln!(
            "reference_server: {:?} serving on https://{}",
            args.mode, args.listen
        );
        if args.mode == Mode::Floor {
            let mut config = (*loaded.config).clone();
            config.alpn_protocols = vec![b"http/1.1".to_vec()];
            bench::floor::serve(listener, Arc::new(config)).await;
            return ExitCode::SUCCESS;
        }
        serve_connections(
            listener,
            Arc::new(TlsState::new(loaded.config)),
            router(args.mode),
            ConnectionOptions::new(args.max_connections),
            Duration::from_secs(1),
            pipelinerollout_webhook::cli::shutdown_signal(),
        )
        .await;
        ExitCode::SUCCESS
    })
}
