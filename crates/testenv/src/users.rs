//! The two users: who they are, how they authenticate (a bearer token each, from the
//! API server's token file) and what the restricted one may do (RBAC).

use std::path::Path;

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule};
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};

use crate::error::{Error, kube_err};
use crate::random::random_hex;
use crate::workdir::write_private;

/// The user name of the admin (member of `system:masters`).
pub const ADMIN_USER: &str = "kinformer-admin";
/// The user name of the restricted user (may only list and watch pods).
pub const RESTRICTED_USER: &str = "kinformer-restricted";

/// The users' bearer tokens, fresh for each control plane.
pub(crate) struct Tokens {
    pub(crate) admin: String,
    pub(crate) restricted: String,
}

impl Tokens {
    /// Makes new tokens and writes them to `dir/tokens.csv`, the API server's
    /// `--token-auth-file`.
    pub(crate) fn write(dir: &Path) -> Result<Self, Error> {
        let tokens = Self {
            admin: random_hex(16)?,
            restricted: random_hex(16)?,
        };
        write_private(
            &dir.join("tokens.csv"),
            &format!(
                "{},{ADMIN_USER},{ADMIN_USER},\"system:masters\"\n\
                 {},{RESTRICTED_USER},{RESTRICTED_USER},\"\"\n",
                tokens.admin, tokens.restricted
            ),
        )?;
        Ok(tokens)
    }
}

/// Lets the restricted user list and watch pods, and nothing else.
pub(crate) async fn grant_restricted_user(client: Client) -> Result<(), Error> {
    let name = "kinformer-testenv:pod-list-watch";
    let role = ClusterRole {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec![String::new()]),
            resources: Some(vec!["pods".into()]),
            verbs: vec!["list".into(), "watch".into()],
            ..Default::default()
        }]),
        ..Default::default()
    };
    // From JSON: `roleRef.apiGroup` and `subjects[].apiGroup` changed type across
    // k8s-openapi's Kubernetes versions, and this crate compiles against all of them.
    let binding: ClusterRoleBinding = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": RESTRICTED_USER}],
    }))
    .map_err(|e| {
        kube_err("building the restricted user's ClusterRoleBinding")(kube::Error::SerdeError(e))
    })?;
    Api::<ClusterRole>::all(client.clone())
        .create(&PostParams::default(), &role)
        .await
        .map_err(kube_err("creating the restricted user's ClusterRole"))?;
    Api::<ClusterRoleBinding>::all(client)
        .create(&PostParams::default(), &binding)
        .await
        .map_err(kube_err(
            "creating the restricted user's ClusterRoleBinding",
        ))?;
    Ok(())
}
