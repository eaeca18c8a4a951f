//! Observing an existing cluster (`[cluster] provider = "existing"`): only the Kubernetes API,
//! through the kubeconfig context the config names — no Docker, no k3d, no node image. One
//! LIST of nodes and one per kind, as for k3d: O(kinds) requests, whatever the node count.

use std::path::Path;

use super::{ObserveError, Observed, SCHEMA};

/// The observed/v1 document of an existing cluster: no cluster containers, no node image.
pub async fn observe(
    kubeconfig: &Path,
    context: &str,
    kinds: &crate::compile::ObjectKinds,
) -> Result<Observed, ObserveError> {
    let client = super::kubernetes::context_client(kubeconfig, context).await?;
    let kubernetes = super::kubernetes::observe_context(client, context, kinds).await?;
    Ok(Observed { schema: SCHEMA.into(), cluster: None, kubernetes: Some(kubernetes), node_image: None })
}
