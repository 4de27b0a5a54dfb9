//! Free loopback ports, and telling when a process lost the race for one.

use std::net::{SocketAddr, TcpListener};

use crate::error::{Error, io};
use crate::process::{self, Process};

/// How often a process is started on fresh ports after losing its port to another.
pub(crate) const START_ATTEMPTS: usize = 3;

/// A free port on 127.0.0.1. Another process may take it before ours binds it; the
/// start functions retry when a log says the address was in use.
pub(crate) fn free_addr() -> Result<SocketAddr, Error> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(io("finding a free loopback port"))
}

/// Whether `p` failed because its port was taken (its log says so).
pub(crate) fn port_taken(p: &Process) -> bool {
    process::log_tail(&p.log, 50).contains("address already in use")
}
