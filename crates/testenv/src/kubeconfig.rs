//! The kubeconfig testenv writes: one cluster that trusts the API server's self-signed
//! serving certificate, the two users with their tokens, a context for each.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use kube::Config;
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::error::Error;
use crate::users::{ADMIN_USER, RESTRICTED_USER, Tokens};
use crate::workdir::write_private;

/// Writes `dir/file_name`, a kubeconfig for the API server (or a proxy in front of it) at
/// `addr` whose certificate is `ca`, and returns its path.
pub(crate) fn write(
    dir: &Path,
    file_name: &str,
    addr: SocketAddr,
    ca: &Path,
    tokens: &Tokens,
) -> Result<PathBuf, Error> {
    let path = dir.join(file_name);
    write_private(
        &path,
        &kubeconfig_yaml(addr, ca, &tokens.admin, &tokens.restricted),
    )?;
    Ok(path)
}

/// The client config of one of the kubeconfig's contexts (`admin` or `restricted`).
pub(crate) async fn load(kubeconfig: &Path, context: &str) -> Result<Config, Error> {
    let kc = Kubeconfig::read_from(kubeconfig).map_err(|e| Error::Kubeconfig(e.to_string()))?;
    let opts = KubeConfigOptions {
        context: Some(context.into()),
        ..Default::default()
    };
    Config::from_custom_kubeconfig(kc, &opts)
        .await
        .map_err(|e| Error::Kubeconfig(e.to_string()))
}

fn kubeconfig_yaml(
    addr: SocketAddr,
    ca: &Path,
    admin_token: &str,
    restricted_token: &str,
) -> String {
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: kinformer-testenv
  cluster:
    server: https://{addr}
    certificate-authority: {ca}
users:
- name: {ADMIN_USER}
  user:
    token: {admin_token}
- name: {RESTRICTED_USER}
  user:
    token: {restricted_token}
contexts:
- name: admin
  context:
    cluster: kinformer-testenv
    user: {ADMIN_USER}
    namespace: default
- name: restricted
  context:
    cluster: kinformer-testenv
    user: {RESTRICTED_USER}
    namespace: default
current-context: admin
",
        ca = ca.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubeconfig_has_both_users_and_trusts_the_serving_cert() {
        let yaml = kubeconfig_yaml(
            "127.0.0.1:6443".parse().unwrap(),
            Path::new("/d/apiserver.crt"),
            "A",
            "R",
        );
        let kc = Kubeconfig::from_yaml(&yaml).unwrap();
        assert_eq!(kc.current_context.as_deref(), Some("admin"));
        let names: Vec<_> = kc.contexts.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["admin", "restricted"]);
        let cluster = kc.clusters[0].cluster.as_ref().unwrap();
        assert_eq!(cluster.server.as_deref(), Some("https://127.0.0.1:6443"));
        assert_eq!(
            cluster.certificate_authority.as_deref(),
            Some("/d/apiserver.crt")
        );
    }
}
