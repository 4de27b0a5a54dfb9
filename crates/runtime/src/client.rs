//! [`ClientArgs`]: which cluster, as whom, in which namespace, how fast.

use std::path::PathBuf;

use kube::config::{KubeConfigOptions, Kubeconfig, KubeconfigError};

use crate::Error;

/// Where `--help` lists these flags.
const HEADING: &str = "Kubernetes client";

/// The Kubernetes client's flags: kubectl's names for where the config comes from, and
/// client-go's client-side rate limit.
///
/// | flag | default |
/// |---|---|
/// | `--kubeconfig PATH` | `KUBECONFIG`, else `~/.kube/config`, else the in-cluster service account (kube's `Config::infer`) |
/// | `--context NAME` | the kubeconfig's current context |
/// | `--cluster NAME` | the context's cluster |
/// | `--user NAME` | the context's user |
/// | `--namespace NS` | the context's namespace, else `default`; in a pod, the service account's |
/// | `--kube-api-qps N` | 5 (client-go's) |
/// | `--kube-api-burst N` | 10 (client-go's) |
///
/// ```
/// use clap::Parser;
/// use kinformer_runtime::ClientArgs;
///
/// #[derive(Parser)]
/// struct Cli {
///     #[command(flatten)]
///     client: ClientArgs,
/// }
///
/// let cli = Cli::try_parse_from(["prog", "--context", "kind-dev", "--kube-api-qps", "20"])?;
/// assert_eq!(cli.client.context.as_deref(), Some("kind-dev"));
/// assert_eq!(cli.client.kube_api_qps, 20.0);
/// assert_eq!(cli.client.kube_api_burst, 10);
/// # Ok::<(), clap::Error>(())
/// ```
///
/// With `--kubeconfig`, `--context`, `--cluster` or `--user` the kubeconfig must load: a
/// typo is an error, not a silent fall back to the in-cluster config.
#[derive(Clone, Debug, PartialEq, clap::Args)]
pub struct ClientArgs {
    /// The kubeconfig file (default: $KUBECONFIG, else ~/.kube/config, else the in-cluster
    /// service account)
    #[arg(id = "kubeconfig", help_heading = HEADING, long = "kubeconfig", value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,

    /// The kubeconfig context to use (default: its current context)
    #[arg(id = "context", help_heading = HEADING, long = "context", value_name = "NAME")]
    pub context: Option<String>,

    /// The kubeconfig cluster to use (default: the context's)
    #[arg(id = "cluster", help_heading = HEADING, long = "cluster", value_name = "NAME")]
    pub cluster: Option<String>,

    /// The kubeconfig user to use (default: the context's)
    #[arg(id = "user", help_heading = HEADING, long = "user", value_name = "NAME")]
    pub user: Option<String>,

    /// The namespace to work in (default: the context's namespace, else "default"; in a pod,
    /// the service account's)
    #[arg(id = "namespace", help_heading = HEADING, long = "namespace", value_name = "NS")]
    pub namespace: Option<String>,

    /// Requests a second to the API server, on average (client-go's QPS)
    #[arg(
        id = "kube-api-qps",
        help_heading = HEADING,
        long = "kube-api-qps",
        value_name = "QPS",
        default_value_t = kinformer_client::DEFAULT_QPS,
        value_parser = parse_qps,
    )]
    pub kube_api_qps: f32,

    /// Requests to the API server at once (client-go's burst)
    #[arg(
        id = "kube-api-burst",
        help_heading = HEADING,
        long = "kube-api-burst",
        value_name = "N",
        default_value_t = kinformer_client::DEFAULT_BURST,
        value_parser = clap::value_parser!(u32).range(1..),
    )]
    pub kube_api_burst: u32,
}

impl Default for ClientArgs {
    /// What an empty command line gives.
    fn default() -> Self {
        Self {
            kubeconfig: None,
            context: None,
            cluster: None,
            user: None,
            namespace: None,
            kube_api_qps: kinformer_client::DEFAULT_QPS,
            kube_api_burst: kinformer_client::DEFAULT_BURST,
        }
    }
}

/// kube's error about the kubeconfig at `path` (`None`: `KUBECONFIG`'s or the default),
/// with a syntax error's text left out: it quotes the file, and a kubeconfig holds tokens
/// and keys. Only its line and column are kept.
fn kubeconfig_error(path: Option<&PathBuf>, source: KubeconfigError) -> Error {
    if let KubeconfigError::Parse(_) = source {
        return Error::KubeconfigSyntax {
            path: path.cloned(),
            location: location(&source.to_string()),
        };
    }
    Error::Kubeconfig {
        path: path.cloned(),
        source,
    }
}

/// `line L column C` in a YAML parser's message, as two numbers (nothing else of it).
pub(crate) fn location(message: &str) -> Option<(u64, u64)> {
    let number_after = |text: &str, word: &str| -> Option<(u64, usize)> {
        let at = text.find(word)? + word.len();
        let digits = text[at..].bytes().take_while(u8::is_ascii_digit).count();
        Some((text[at..at + digits].parse().ok()?, at + digits))
    };
    let (line, end) = number_after(message, "line ")?;
    let (column, _) = number_after(&message[end..], "column ")?;
    Some((line, column))
}

/// A QPS that can make a limit: finite and above zero.
fn parse_qps(value: &str) -> Result<f32, String> {
    match value.trim().parse::<f32>() {
        Ok(qps) if qps.is_finite() && qps > 0.0 => Ok(qps),
        Ok(_) => Err("must be a number above zero".into()),
        Err(e) => Err(e.to_string()),
    }
}

impl ClientArgs {
    /// The `kube::Config` the flags name, its `default_namespace` the namespace to work in:
    /// `--namespace`, else the context's (or the service account's), else `default`.
    ///
    /// Where it comes from: `--kubeconfig`'s file; else, with `--context`, `--cluster` or
    /// `--user`, the kubeconfig of `KUBECONFIG` or `~/.kube/config`; else that kubeconfig
    /// if it loads, else the in-cluster service account (kube's `Config::infer`, its
    /// `KUBE_RS_DEBUG_*` overrides included). Nothing is sent to the API server.
    ///
    /// A `--user` that the kubeconfig does not have is an error (as kubectl's); a context's
    /// user that it does not have means no credentials (as client-go and kube).
    ///
    /// # Errors
    /// [`Error::Kubeconfig`] when the kubeconfig cannot be read or lacks the context,
    /// cluster or user named; [`Error::KubeconfigSyntax`] when it is not a kubeconfig in
    /// YAML; [`Error::NoConfig`] when, without those flags, there is neither a kubeconfig
    /// nor an in-cluster service account.
    pub async fn config(&self) -> Result<kube::Config, Error> {
        let mut config = if self.kubeconfig.is_some()
            || self.context.is_some()
            || self.cluster.is_some()
            || self.user.is_some()
        {
            self.load_kubeconfig().await?
        } else {
            match self.load_kubeconfig().await {
                Ok(config) => config,
                Err(kubeconfig) => {
                    let mut config =
                        kube::Config::incluster().map_err(|in_cluster| Error::NoConfig {
                            kubeconfig: Box::new(kubeconfig),
                            in_cluster,
                        })?;
                    config.apply_debug_overrides();
                    config
                }
            }
        };
        if let Some(namespace) = &self.namespace {
            config.default_namespace.clone_from(namespace);
        }
        Ok(config)
    }

    /// The config of `--kubeconfig`'s file, else of `KUBECONFIG` or `~/.kube/config`, as
    /// `--context`, `--cluster` and `--user` select.
    async fn load_kubeconfig(&self) -> Result<kube::Config, Error> {
        let path = self.kubeconfig.as_ref();
        let error = |source| kubeconfig_error(path, source);
        let kubeconfig = match path {
            Some(path) => Kubeconfig::read_from(path),
            None => Kubeconfig::read(),
        }
        .map_err(error)?;
        if let Some(user) = &self.user
            && !kubeconfig
                .auth_infos
                .iter()
                .any(|named| &named.name == user)
        {
            return Err(Error::KubeconfigUser {
                path: path.cloned(),
                user: user.clone(),
            });
        }
        let options = KubeConfigOptions {
            context: self.context.clone(),
            cluster: self.cluster.clone(),
            user: self.user.clone(),
        };
        let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
            .await
            .map_err(error)?;
        config.apply_debug_overrides();
        Ok(config)
    }

    /// A kinformer-client [`ClientBuilder`](kinformer_client::ClientBuilder) on `config`
    /// (from [`config`](Self::config)) with `--kube-api-qps` and `--kube-api-burst`: add
    /// metrics (`.metrics(&mut registry)`) or the reflector's connection
    /// (`.reflector_connection()`, for informers) before `.build()`.
    pub fn client_builder(&self, config: kube::Config) -> kinformer_client::ClientBuilder {
        kinformer_client::ClientBuilder::new(config)
            .qps(self.kube_api_qps)
            .burst(self.kube_api_burst)
    }

    /// A `kube::Client` of [`config`](Self::config), limited to `--kube-api-qps` requests a
    /// second in bursts of `--kube-api-burst` (kinformer-client's rate limit layer), on kube's
    /// own connection. Call it within a Tokio runtime (kube's client starts a task).
    ///
    /// For informers, prefer [`client_builder`](Self::client_builder) with
    /// `.reflector_connection()` (kube's retry off: a reflector backs off on its own).
    ///
    /// # Errors
    /// As [`config`](Self::config); [`Error::Client`] when the limit is invalid (a struct
    /// built by hand; the flags reject one) or kube cannot build a client from the config.
    pub async fn client(&self) -> Result<kube::Client, Error> {
        Ok(self.client_builder(self.config().await?).build()?)
    }
}
