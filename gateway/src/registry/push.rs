//! Pushing a component as a filter image (the Wasm OCI artifact layout): the component and
//! a config blob uploaded unless the registry has them, then the manifest, by tag or by its
//! own digest. The manifest is the same for the same component, so its digest is too.

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, header};
use serde_json::json;

use super::client::Registries;
use super::error::RegistryError;
use super::pull::WASM_LAYER;
use super::reference::{Digest, Reference};

/// The config's media type.
const WASM_CONFIG: &str = "application/vnd.wasm.config.v0+json";
/// The manifest's media type.
const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";

/// The config blob and the manifest of `component`.
fn artifact(component: &[u8]) -> (Bytes, Bytes) {
    let layer = Digest::of(component);
    let config = json!({"architecture": "wasm", "os": "wasip2", "layerDigests": [layer.as_str()]});
    let config = Bytes::from(config.to_string());
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": WASM_CONFIG, "digest": Digest::of(&config).as_str(), "size": config.len()},
        "layers": [{"mediaType": WASM_LAYER, "digest": layer.as_str(), "size": component.len()}],
    });
    (config, Bytes::from(manifest.to_string()))
}

impl Registries {
    /// Pushes `component` to `image` (its tag, if written), returning the manifest's digest.
    pub async fn push(&self, image: &Reference, component: Bytes) -> Result<Digest, RegistryError> {
        let base = format!("https://{}/v2/{}", image.api_host(), image.repository);
        let (config, manifest) = artifact(&component);
        self.upload(image, &base, config).await?;
        self.upload(image, &base, component).await?;
        let digest = Digest::of(&manifest);
        let target = image.tag.clone().unwrap_or_else(|| digest.to_string());
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(OCI_MANIFEST));
        let url = format!("{base}/manifests/{target}");
        self.send(image, "pull,push", Method::PUT, &url, headers, manifest)
            .await?;
        Ok(digest)
    }

    /// Uploads `blob` in one request unless the repository has it.
    async fn upload(
        &self,
        image: &Reference,
        base: &str,
        blob: Bytes,
    ) -> Result<(), RegistryError> {
        let digest = Digest::of(&blob);
        let url = format!("{base}/blobs/{digest}");
        let head = self
            .send(
                image,
                "pull,push",
                Method::HEAD,
                &url,
                HeaderMap::new(),
                Bytes::new(),
            )
            .await;
        if head.is_ok() {
            return Ok(());
        }
        let url = format!("{base}/blobs/uploads/");
        let started = self
            .send(
                image,
                "pull,push",
                Method::POST,
                &url,
                HeaderMap::new(),
                Bytes::new(),
            )
            .await?;
        let location = started
            .headers()
            .get(header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| RegistryError::Content {
                what: url.clone(),
                message: "no Location for the upload".into(),
            })?;
        let location = if location.contains("://") {
            location.to_owned()
        } else {
            format!("https://{}{location}", image.api_host())
        };
        let sep = if location.contains('?') { '&' } else { '?' };
        let url = format!("{location}{sep}digest={digest}");
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/octet-stream"),
        );
        self.send(image, "pull,push", Method::PUT, &url, headers, blob)
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::pull::component_layer;

    #[test]
    fn the_same_component_makes_the_same_manifest_which_names_it() {
        let (config, manifest) = artifact(b"\0asm component");
        assert_eq!(artifact(b"\0asm component").1, manifest);
        let (layer, size) = component_layer("x", &manifest).unwrap();
        assert_eq!((layer, size), (Digest::of(b"\0asm component"), 14));
        let text = String::from_utf8(manifest.to_vec()).unwrap();
        assert!(text.contains(Digest::of(&config).as_str()));
    }
}
