//! Token discovery, as kubeadm's: the cluster CA from the `kube-public/cluster-info`
//! ConfigMap, read anonymously over TLS that trusts nothing yet, believed once the bootstrap
//! token's signature on it checks out and, with pins, once the CA's public key is pinned and
//! a second read over TLS trusting that CA returns the same kubeconfig.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;

use super::error::CertificateError;
use super::pins::{CaPins, JoinToken};

/// The cluster CA (PEM) that `server` publishes, checked by `token`'s signature and `pins`
/// (no pins only with `skip_ca_verification`).
pub async fn cluster_ca(
    server: &http::Uri,
    token: &JoinToken,
    pins: &CaPins,
    skip_ca_verification: bool,
) -> Result<Vec<u8>, CertificateError> {
    if pins.is_empty() && !skip_ca_verification {
        return Err(CertificateError::NoPins);
    }
    let mut insecure = kube::Config::new(server.clone());
    // Nothing to verify the server with yet: what is read is checked below. No roots either
    // (else the system's are loaded, which a node's image may not have).
    insecure.accept_invalid_certs = true;
    insecure.root_cert = Some(Vec::new());
    let kubeconfig = signed_kubeconfig(insecure, token).await?;
    let ca = ca_of(&kubeconfig)?;
    if pins.is_empty() {
        tracing::warn!(%server, "the cluster CA is trusted without a pin (--discovery-token-unsafe-skip-ca-verification)");
        return Ok(ca);
    }
    pins.check(&ca)?;
    let mut secure = kube::Config::new(server.clone());
    secure.root_cert = Some(super::pem::parse_pem_certificates(&ca)?);
    let again = signed_kubeconfig(secure, token).await?;
    if again != kubeconfig {
        return Err(CertificateError::Discovery(
            "cluster-info changed between the reads".to_owned(),
        ));
    }
    Ok(ca)
}

/// The kubeconfig of cluster-info, its signature by `token` checked.
async fn signed_kubeconfig(
    config: kube::Config,
    token: &JoinToken,
) -> Result<String, CertificateError> {
    let client = kube::Client::try_from(config).map_err(CertificateError::Api)?;
    let api: Api<ConfigMap> = Api::namespaced(client, "kube-public");
    let map = api
        .get("cluster-info")
        .await
        .map_err(CertificateError::Api)?;
    let data = map.data.unwrap_or_default();
    let kubeconfig = data.get("kubeconfig").ok_or_else(|| {
        CertificateError::Discovery("kube-public/cluster-info has no kubeconfig".to_owned())
    })?;
    let signature = data
        .get(&token.signature_key())
        .ok_or_else(|| CertificateError::Unsigned(token.id.clone()))?;
    token.verify_signature(kubeconfig, signature)?;
    Ok(kubeconfig.clone())
}

/// The CA data of the first cluster of a kubeconfig (PEM).
pub fn ca_of(kubeconfig: &str) -> Result<Vec<u8>, CertificateError> {
    use base64::Engine;
    let config = kube::config::Kubeconfig::from_yaml(kubeconfig)
        .map_err(|e| CertificateError::Discovery(format!("cluster-info kubeconfig: {e}")))?;
    let data = config
        .clusters
        .first()
        .and_then(|c| c.cluster.as_ref())
        .and_then(|c| c.certificate_authority_data.as_ref())
        .ok_or_else(|| {
            CertificateError::Discovery("cluster-info kubeconfig has no CA data".to_owned())
        })?;
    base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .map_err(|_| CertificateError::Discovery("cluster-info CA data is not base64".to_owned()))
}
