//! A loopback TCP proxy that can cut its connections: a network partition between the
//! client under test and the API server, while the test keeps writing directly.

use std::collections::HashMap;
use std::io;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;

use crate::error::{Error, io as io_err};

/// A TCP proxy on a free loopback port in front of the API server.
///
/// Clients made by [`ApiProxy::client`](crate::ApiProxy::client) connect through it.
/// [`TcpProxy::partition`] closes every open connection and refuses new ones (they are
/// accepted and closed at once, as a dead network path looks to a TLS client);
/// [`TcpProxy::heal`] lets connections through again. [`TcpProxy::slow_connections`] makes
/// every new connection wait before it reaches the server (a TLS handshake that takes that
/// long, as on a loaded machine). [`TcpProxy::limit_bandwidth`] paces what the server sends
/// each connection (a slow link), and [`TcpProxy::bytes_to_clients`] counts it (what a
/// client received, whatever client it is). Plain threads move the bytes, so
/// the proxy works whatever async runtime (or none) the test uses. Dropping it stops
/// the listener and closes all connections.
#[derive(Debug)]
pub struct TcpProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    target: SocketAddr,
    partitioned: AtomicBool,
    /// How long a new connection waits before it reaches the server, in milliseconds.
    connect_delay_ms: AtomicU64,
    /// Bytes a second the server may send each connection; 0: no limit.
    bandwidth: AtomicU64,
    /// Bytes the server sent clients, through every connection so far.
    to_clients: AtomicU64,
    stopped: AtomicBool,
    next_id: AtomicU64,
    /// Both sockets of every open connection, so `partition` can cut them.
    conns: Mutex<HashMap<u64, [TcpStream; 2]>>,
}

impl Shared {
    fn cut(&self, id: u64) {
        let removed = self
            .conns
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&id);
        if let Some(pair) = removed {
            for s in pair {
                let _ = s.shutdown(Shutdown::Both);
            }
        }
    }

    fn cut_all(&self) {
        let all: Vec<_> = self
            .conns
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .drain()
            .collect();
        for (_, pair) in all {
            for s in pair {
                let _ = s.shutdown(Shutdown::Both);
            }
        }
    }
}

impl TcpProxy {
    /// Starts a proxy to `target` on a free port of 127.0.0.1.
    ///
    /// # Errors
    /// When no loopback port can be bound.
    pub fn start(target: SocketAddr) -> Result<Self, Error> {
        let listener =
            TcpListener::bind("127.0.0.1:0").map_err(io_err("binding the proxy port"))?;
        let addr = listener
            .local_addr()
            .map_err(io_err("reading the proxy address"))?;
        let shared = Arc::new(Shared {
            target,
            partitioned: AtomicBool::new(false),
            connect_delay_ms: AtomicU64::new(0),
            bandwidth: AtomicU64::new(0),
            to_clients: AtomicU64::new(0),
            stopped: AtomicBool::new(false),
            next_id: AtomicU64::new(0),
            conns: Mutex::new(HashMap::new()),
        });
        let s = Arc::clone(&shared);
        thread::Builder::new()
            .name("testenv-proxy".into())
            .spawn(move || accept_loop(&listener, &s))
            .map_err(io_err("starting the proxy thread"))?;
        Ok(Self { addr, shared })
    }

    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Cuts every open connection and refuses new ones until [`TcpProxy::heal`].
    pub fn partition(&self) {
        self.shared.partitioned.store(true, Ordering::SeqCst);
        self.shared.cut_all();
    }

    /// Lets new connections through again.
    pub fn heal(&self) {
        self.shared.partitioned.store(false, Ordering::SeqCst);
    }

    /// Makes each connection opened from now on wait `delay` before the proxy connects it
    /// to the server, so that nothing the client sends (its TLS hello first) is answered
    /// sooner; open connections are left as they are. Zero: no wait.
    pub fn slow_connections(&self, delay: std::time::Duration) {
        let ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
        self.shared.connect_delay_ms.store(ms, Ordering::SeqCst);
    }

    /// Paces what the server sends each connection to `bytes_per_second` from now on, open
    /// connections too (`None`: as fast as loopback goes): a link of that bandwidth per
    /// connection, without the burst an idle connection would have saved up.
    pub fn limit_bandwidth(&self, bytes_per_second: Option<u64>) {
        self.shared
            .bandwidth
            .store(bytes_per_second.unwrap_or(0), Ordering::SeqCst);
    }

    /// Bytes the server has sent clients through this proxy so far (TLS records, HTTP
    /// framing and all): what the clients received, counted the same way for any client.
    pub fn bytes_to_clients(&self) -> u64 {
        self.shared.to_clients.load(Ordering::SeqCst)
    }

    /// Whether the proxy is partitioned.
    pub fn is_partitioned(&self) -> bool {
        self.shared.partitioned.load(Ordering::SeqCst)
    }

    /// How many connections are open through the proxy now.
    pub fn open_connections(&self) -> usize {
        self.shared
            .conns
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

impl Drop for TcpProxy {
    fn drop(&mut self) {
        self.shared.stopped.store(true, Ordering::SeqCst);
        // Wake the blocking accept so the thread sees `stopped` and exits.
        let _ = TcpStream::connect(self.addr);
        self.shared.cut_all();
    }
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) {
    for incoming in listener.incoming() {
        if shared.stopped.load(Ordering::SeqCst) {
            return;
        }
        let Ok(client) = incoming else { continue };
        if shared.partitioned.load(Ordering::SeqCst) {
            let _ = client.shutdown(Shutdown::Both);
            continue;
        }
        let delay = shared.connect_delay_ms.load(Ordering::SeqCst);
        if delay == 0 {
            if let Err(e) = connect_pair(client, shared) {
                tracing::debug!(error = %e, "proxy could not reach the API server");
            }
            continue;
        }
        let s = Arc::clone(shared);
        let slow = thread::Builder::new()
            .name("testenv-proxy-slow".into())
            .spawn(move || {
                thread::sleep(std::time::Duration::from_millis(delay));
                if let Err(e) = connect_pair(client, &s) {
                    tracing::debug!(error = %e, "proxy could not reach the API server");
                }
            });
        if let Err(e) = slow {
            tracing::debug!(error = %e, "proxy could not start a connection's thread");
        }
    }
}

fn connect_pair(client: TcpStream, shared: &Arc<Shared>) -> io::Result<()> {
    let upstream = TcpStream::connect(shared.target)?;
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
    shared
        .conns
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(id, [client.try_clone()?, upstream.try_clone()?]);
    // A partition that raced with this accept must still cut the new connection.
    if shared.partitioned.load(Ordering::SeqCst) {
        shared.cut(id);
        return Ok(());
    }
    for (mut from, mut to, to_client) in [
        (client.try_clone()?, upstream.try_clone()?, false),
        (upstream, client, true),
    ] {
        let s = Arc::clone(shared);
        thread::Builder::new()
            .name("testenv-proxy-copy".into())
            .spawn(move || {
                let _ = if to_client {
                    paced_copy(&mut from, &mut to, &s)
                } else {
                    io::copy(&mut from, &mut to).map(|_| ())
                };
                // Either side ending ends the connection: HTTP clients never half-close.
                s.cut(id);
            })?;
    }
    Ok(())
}

/// Copies what the server sends to the client, counted, at most at the proxy's bandwidth:
/// each chunk leaves when the link would have carried the ones before it (no credit for
/// idle time).
fn paced_copy(from: &mut TcpStream, to: &mut TcpStream, shared: &Shared) -> io::Result<()> {
    use std::io::{Read, Write};
    use std::time::{Duration, Instant};

    let mut buf = vec![0; 16 * 1024];
    let mut link_free = Instant::now();
    loop {
        let n = from.read(&mut buf)?;
        if n == 0 {
            return Ok(());
        }
        let rate = shared.bandwidth.load(Ordering::Relaxed);
        if rate > 0 {
            #[allow(clippy::cast_precision_loss)]
            let busy = Duration::from_secs_f64(n as f64 / rate as f64);
            let now = Instant::now();
            link_free = link_free.max(now) + busy;
            // The chunk is on the wire until `link_free`: it arrives then.
            thread::sleep(link_free.saturating_duration_since(now));
        }
        // Counted before it is written: a client that read it all sees it counted.
        shared.to_clients.fetch_add(n as u64, Ordering::SeqCst);
        to.write_all(&buf[..n])?;
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};

    use super::*;

    /// An echo server on a free port.
    fn echo() -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        thread::spawn(move || {
            for s in l.incoming() {
                let Ok(mut s) = s else { return };
                thread::spawn(move || {
                    let mut r = s.try_clone().unwrap();
                    let _ = io::copy(&mut r, &mut s);
                });
            }
        });
        addr
    }

    fn roundtrip(s: &mut TcpStream) -> io::Result<()> {
        s.write_all(b"ping")?;
        let mut buf = [0; 4];
        s.read_exact(&mut buf)?;
        assert_eq!(&buf, b"ping");
        Ok(())
    }

    #[test]
    fn partition_cuts_open_connections_and_refuses_new_ones_until_heal() {
        let proxy = TcpProxy::start(echo()).unwrap();
        let mut c = TcpStream::connect(proxy.addr()).unwrap();
        roundtrip(&mut c).unwrap();
        assert_eq!(proxy.open_connections(), 1);

        proxy.partition();
        assert!(proxy.is_partitioned());
        assert!(roundtrip(&mut c).is_err(), "an open connection must break");
        let mut during = TcpStream::connect(proxy.addr()).unwrap();
        assert!(
            roundtrip(&mut during).is_err(),
            "a new connection must not get through"
        );

        proxy.heal();
        let mut after = TcpStream::connect(proxy.addr()).unwrap();
        roundtrip(&mut after).unwrap();
    }

    #[test]
    fn a_bandwidth_limit_paces_what_the_server_sends_and_every_byte_is_counted() {
        let proxy = TcpProxy::start(echo()).unwrap();
        let mut c = TcpStream::connect(proxy.addr()).unwrap();
        roundtrip(&mut c).unwrap();
        assert_eq!(proxy.bytes_to_clients(), 4);
        // 64 KiB at 256 KiB/s: a quarter of a second, give or take the first chunk.
        proxy.limit_bandwidth(Some(256 * 1024));
        let data = vec![7u8; 64 * 1024];
        let start = std::time::Instant::now();
        let mut w = c.try_clone().unwrap();
        let writer = thread::spawn(move || w.write_all(&data));
        let mut back = vec![0; 64 * 1024];
        c.read_exact(&mut back).unwrap();
        writer.join().unwrap().unwrap();
        let took = start.elapsed();
        assert!(took >= std::time::Duration::from_millis(180), "{took:?}");
        assert_eq!(proxy.bytes_to_clients(), 4 + 64 * 1024);
        proxy.limit_bandwidth(None);
        let start = std::time::Instant::now();
        roundtrip(&mut c).unwrap();
        assert!(start.elapsed() < std::time::Duration::from_millis(100));
    }

    #[test]
    fn slow_connections_delay_new_connections_only() {
        let proxy = TcpProxy::start(echo()).unwrap();
        let mut open = TcpStream::connect(proxy.addr()).unwrap();
        roundtrip(&mut open).unwrap();
        let delay = std::time::Duration::from_millis(300);
        proxy.slow_connections(delay);
        let start = std::time::Instant::now();
        roundtrip(&mut open).unwrap();
        assert!(start.elapsed() < delay, "an open connection is not slowed");
        let start = std::time::Instant::now();
        let mut new = TcpStream::connect(proxy.addr()).unwrap();
        roundtrip(&mut new).unwrap();
        assert!(start.elapsed() >= delay, "{:?}", start.elapsed());
    }
}
