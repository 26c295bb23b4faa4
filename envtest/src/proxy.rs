//! A TCP forwarder on loopback that a test can cut, to take the API server
//! away from one process while the others still reach it: a network
//! partition, as far as that process can tell.

use std::io::{Read as _, Write as _};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;

#[derive(Debug, Default)]
struct State {
    cut: bool,
    /// Both ends of every forwarded connection, to close them on a cut.
    open: Vec<TcpStream>,
    /// Connections accepted while cut: held open, never answered.
    held: Vec<TcpStream>,
}

/// Forwards connections on its own loopback port to a target until
/// [`Proxy::cut`]; from then on, until [`Proxy::restore`], every
/// connection it forwarded is closed and new ones are accepted but never
/// answered (a client's requests hang until its own timeouts). It runs as
/// long as the test process does.
#[derive(Debug)]
pub struct Proxy {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    stopping: Arc<AtomicBool>,
}

fn locked(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Proxy {
    /// Starts forwarding a fresh loopback port to `target`.
    pub fn start(target: SocketAddr) -> Result<Self, String> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .map_err(|e| format!("cannot bind a proxy port on 127.0.0.1: {e}"))?;
        let addr = listener
            .local_addr()
            .map_err(|e| format!("proxy address: {e}"))?;
        let state = Arc::new(Mutex::new(State::default()));
        let stopping = Arc::new(AtomicBool::new(false));
        let (accept_state, accept_stopping) = (Arc::clone(&state), Arc::clone(&stopping));
        thread::spawn(move || {
            for client in listener.incoming() {
                if accept_stopping.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(client) = client else { continue };
                if locked(&accept_state).cut {
                    locked(&accept_state).held.push(client);
                    continue;
                }
                let Ok(server) = TcpStream::connect(target) else {
                    continue;
                };
                forward(&accept_state, client, server);
            }
        });
        Ok(Self {
            addr,
            state,
            stopping,
        })
    }

    /// Where clients connect (an `https://` URL for the API server).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Closes every forwarded connection and answers no new one.
    pub fn cut(&self) {
        let mut state = locked(&self.state);
        state.cut = true;
        for stream in state.open.drain(..) {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }

    /// Forwards new connections again (those held during the cut are
    /// closed; their clients reconnect).
    pub fn restore(&self) {
        let mut state = locked(&self.state);
        state.cut = false;
        for stream in state.held.drain(..) {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stopping.store(true, Ordering::SeqCst);
        self.cut();
        self.restore();
        // Wakes the accept loop so that it sees `stopping`.
        let _ = TcpStream::connect(self.addr);
    }
}

/// Copies both ways between `client` and `server` on two threads, keeping
/// clones in `state` so that a cut can close them.
fn forward(state: &Arc<Mutex<State>>, client: TcpStream, server: TcpStream) {
    let clones = (client.try_clone(), server.try_clone());
    let (Ok(client_back), Ok(server_back)) = clones else {
        return;
    };
    {
        let mut state = locked(state);
        for stream in [&client, &server] {
            if let Ok(clone) = stream.try_clone() {
                state.open.push(clone);
            }
        }
    }
    thread::spawn(move || copy(client, server));
    thread::spawn(move || copy(server_back, client_back));
}

fn copy(mut from: TcpStream, mut to: TcpStream) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn forwards_until_cut_then_hangs_until_restored() {
        let echo = TcpListener::bind("127.0.0.1:0").expect("bind");
        let target = echo.local_addr().expect("addr");
        thread::spawn(move || {
            for stream in echo.incoming().flatten() {
                thread::spawn(move || {
                    let mut stream = stream;
                    let mut buf = [0u8; 64];
                    while let Ok(n) = stream.read(&mut buf) {
                        if n == 0 || stream.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                });
            }
        });
        let proxy = Proxy::start(target).expect("proxy");
        let roundtrip = |stream: &mut TcpStream| -> std::io::Result<Vec<u8>> {
            stream.write_all(b"ping")?;
            let mut buf = [0u8; 4];
            stream.read_exact(&mut buf)?;
            Ok(buf.to_vec())
        };
        let mut before = TcpStream::connect(proxy.addr()).expect("connect");
        before
            .set_read_timeout(Some(Duration::from_millis(500)))
            .expect("timeout");
        assert_eq!(roundtrip(&mut before).expect("forwarded"), b"ping");

        proxy.cut();
        assert!(
            roundtrip(&mut before).is_err(),
            "the open connection is closed"
        );
        let mut during = TcpStream::connect(proxy.addr()).expect("accepted while cut");
        during
            .set_read_timeout(Some(Duration::from_millis(300)))
            .expect("timeout");
        assert!(roundtrip(&mut during).is_err(), "no answer while cut");

        proxy.restore();
        let mut after = TcpStream::connect(proxy.addr()).expect("connect");
        after
            .set_read_timeout(Some(Duration::from_millis(500)))
            .expect("timeout");
        assert_eq!(roundtrip(&mut after).expect("forwarded again"), b"ping");
    }
}
