//! The integration tests of kinformer-admin, in one test binary: the metrics a process
//! installs and serves, and the diagnostics page over every layer.

mod diagnostics;
mod metrics;
