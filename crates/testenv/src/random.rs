//! Random hex strings from the kernel: the users' tokens and unique name suffixes.

use std::fs;
use std::io::Read;

use crate::error::{Error, io};

/// `bytes` random bytes from `/dev/urandom`, as lowercase hex.
pub(crate) fn random_hex(bytes: usize) -> Result<String, Error> {
    let mut buf = vec![0u8; bytes];
    fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut buf))
        .map_err(io("reading /dev/urandom"))?;
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}
