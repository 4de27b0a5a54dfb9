//! How a control plane is started.

/// How to start a [`ControlPlane`](crate::ControlPlane).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Options {
    /// Whether the API server runs its watch cache (default `true`, as real clusters).
    pub watch_cache: bool,
    /// Extra kube-apiserver flags, appended after testenv's own.
    pub apiserver_args: Vec<String>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            watch_cache: true,
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

    /// Adds a kube-apiserver flag, e.g. `--feature-gates=...`.
    #[must_use]
    pub fn apiserver_arg(mut self, arg: impl Into<String>) -> Self {
        self.apiserver_args.push(arg.into());
        self
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
    }
}
