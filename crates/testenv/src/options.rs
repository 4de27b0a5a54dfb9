//! How a control plane is started.

use std::collections::BTreeMap;

/// The API server's feature gate for sharded list and watch (KEP-5866; alpha in 1.36, off
/// by default).
pub const SHARDED_LIST_AND_WATCH: &str = "ShardedListAndWatch";

/// How to start a [`ControlPlane`](crate::ControlPlane).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Options {
    /// Whether the API server runs its watch cache (default `true`, as real clusters).
    pub watch_cache: bool,
    /// Feature gates set on the API server, as one `--feature-gates=A=true,B=false` flag
    /// (empty: the release's defaults).
    pub feature_gates: BTreeMap<String, bool>,
    /// Extra kube-apiserver flags, appended after testenv's own.
    pub apiserver_args: Vec<String>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            watch_cache: true,
            feature_gates: BTreeMap::new(),
            apiserver_args: Vec::new(),
        }
    }
}

impl Options {
    /// Turns the API server's watch cache on or off (see the crate docs on `410 Gone`).
    #[must_use]
    pub fn watch_cache(mut self, on: bool) -> Self {
        self.watch_cache = on;
        self
    }

    /// Adds a kube-apiserver flag. Give feature gates to
    /// [`feature_gate`](Self::feature_gate) instead: they are merged into one flag.
    #[must_use]
    pub fn apiserver_arg(mut self, arg: impl Into<String>) -> Self {
        self.apiserver_args.push(arg.into());
        self
    }

    /// Turns the API server's feature gate `name` on or off.
    #[must_use]
    pub fn feature_gate(mut self, name: impl Into<String>, on: bool) -> Self {
        self.feature_gates.insert(name.into(), on);
        self
    }

    /// Turns the API server's sharded list and watch on (the alpha gate
    /// [`SHARDED_LIST_AND_WATCH`]: `shardSelector` is applied to lists and watches, and lists
    /// say so in `metadata.shardInfo`) or off (the 1.36 default: the parameter is ignored).
    #[must_use]
    pub fn sharded_list_and_watch(self, on: bool) -> Self {
        self.feature_gate(SHARDED_LIST_AND_WATCH, on)
    }

    /// The `--feature-gates` flag, if any gate is set.
    pub(crate) fn feature_gates_flag(&self) -> Option<String> {
        if self.feature_gates.is_empty() {
            return None;
        }
        let gates: Vec<String> = self
            .feature_gates
            .iter()
            .map(|(name, on)| format!("{name}={on}"))
            .collect();
        Some(format!("--feature-gates={}", gates.join(",")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_builder_sets_watch_cache_and_extra_args() {
        let opts = Options::default().watch_cache(false).apiserver_arg("--v=2");
        assert!(!opts.watch_cache);
        assert_eq!(opts.apiserver_args, ["--v=2"]);
        assert_eq!(opts.feature_gates_flag(), None);
    }

    #[test]
    fn feature_gates_become_one_flag() {
        let opts = Options::default()
            .sharded_list_and_watch(true)
            .feature_gate("WatchList", false);
        assert_eq!(
            opts.feature_gates_flag().as_deref(),
            Some("--feature-gates=ShardedListAndWatch=true,WatchList=false")
        );
    }
}
