//! kinformer-replay's tests, one binary: recording and replaying (`replay`), the reflector's
//! rules on perturbed replays (`rules`), partitions of the real API server replayed
//! (`partitions`), a restart from a snapshot replayed (`resume`), and wire recordings
//! (`wire`, feature `wire`).

mod common;
mod partitions;
mod replay;
mod resume;
mod rules;
#[cfg(feature = "wire")]
mod wire;
