//! Pulling a filter image pinned by digest: its manifest, checked against the digest, then
//! the one component layer it names, checked against the manifest's digest and size.

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, header};
use serde::Deserialize;

use super::client::{Registries, read_capped};
use super::error::RegistryError;
use super::reference::{Digest, Reference};

/// The media type of a component layer (the Wasm OCI artifact layout).
pub const WASM_LAYER: &str = "application/wasm";
/// Component layer types of earlier Wasm artifact tools, read as well.
const OTHER_WASM_LAYERS: [&str; 2] = [
    "application/vnd.wasm.content.layer.v1+wasm",
    "application/vnd.module.wasm.content.layer.v1+wasm",
];
/// The manifest types asked for.
pub(super) const MANIFEST_TYPES: &str = "application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json";
/// Largest manifest read.
const MAX_MANIFEST_BYTES: usize = 4 << 20;
/// Largest component read (the filter directory's own cap).
pub const MAX_COMPONENT_BYTES: u64 = 64 << 20;

/// A pulled image: its manifest and its component, both checked.
#[derive(Clone, Debug)]
pub struct Pulled {
    /// The manifest's bytes, which hash to the reference's digest.
    pub manifest: Bytes,
    /// The component's bytes, which hash to the layer's digest.
    pub component: Bytes,
    /// The layer's digest.
    pub component_digest: Digest,
}

#[derive(Deserialize)]
struct Manifest {
    #[serde(default)]
    layers: Vec<Descriptor>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Descriptor {
    media_type: String,
    digest: String,
    size: u64,
}

/// The component layer's digest and size in the manifest `bytes` of `image`.
pub(crate) fn component_layer(image: &str, bytes: &[u8]) -> Result<(Digest, u64), RegistryError> {
    let content = |message: String| RegistryError::Content {
        what: image.to_owned(),
        message,
    };
    let manifest: Manifest = serde_json::from_slice(bytes)
        .map_err(|e| content(format!("not an image manifest: {e}")))?;
    let mut layers = manifest.layers.iter().filter(|l| {
        l.media_type == WASM_LAYER || OTHER_WASM_LAYERS.contains(&l.media_type.as_str())
    });
    let layer = layers
        .next()
        .ok_or_else(|| content(format!("no {WASM_LAYER} layer: not a filter image")))?;
    if layers.next().is_some() {
        return Err(content("more than one component layer".into()));
    }
    if layer.size > MAX_COMPONENT_BYTES {
        return Err(content(format!(
            "the component is {} bytes, over {MAX_COMPONENT_BYTES}",
            layer.size
        )));
    }
    Ok((Digest::parse(&layer.digest)?, layer.size))
}

/// Fails unless `bytes` hash to `want`.
pub(crate) fn check_digest(what: &str, want: &Digest, bytes: &[u8]) -> Result<(), RegistryError> {
    let got = Digest::of(bytes);
    if &got == want {
        Ok(())
    } else {
        Err(RegistryError::DigestMismatch {
            what: what.to_owned(),
            want: want.to_string(),
            got: got.to_string(),
        })
    }
}

impl Registries {
    /// Pulls `image`, which must be pinned by digest.
    pub async fn pull(&self, image: &Reference) -> Result<Pulled, RegistryError> {
        let digest = image.pinned()?;
        let base = format!("https://{}/v2/{}", image.api_host(), image.repository);
        let mut accept = HeaderMap::new();
        accept.insert(header::ACCEPT, HeaderValue::from_static(MANIFEST_TYPES));
        let url = format!("{base}/manifests/{digest}");
        let response = self
            .send(image, "pull", Method::GET, &url, accept, Bytes::new())
            .await?;
        let manifest = read_capped(&url, response, MAX_MANIFEST_BYTES).await?;
        let name = image.to_string();
        check_digest(&format!("{name} manifest"), digest, &manifest)?;
        let (layer, size) = component_layer(&name, &manifest)?;
        let url = format!("{base}/blobs/{layer}");
        let response = self
            .send(
                image,
                "pull",
                Method::GET,
                &url,
                HeaderMap::new(),
                Bytes::new(),
            )
            .await?;
        // A byte over the declared size is enough to know the blob is not the layer.
        let cap = usize::try_from(size + 1).unwrap_or(usize::MAX);
        let component = read_capped(&url, response, cap).await?;
        check_digest(&format!("{name} component {layer}"), &layer, &component)?;
        Ok(Pulled {
            manifest,
            component,
            component_digest: layer,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(layers: &str) -> String {
        format!(
            r#"{{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",
                "config":{{"mediaType":"application/vnd.wasm.config.v0+json","digest":"sha256:{z}","size":2}},
                "layers":[{layers}]}}"#,
            z = "0".repeat(64)
        )
    }

    #[test]
    fn the_one_component_layer_is_found() {
        let layer = format!(
            r#"{{"mediaType":"application/wasm","digest":"sha256:{}","size":300}}"#,
            "a".repeat(64)
        );
        let (digest, size) = component_layer("i", manifest(&layer).as_bytes()).unwrap();
        assert_eq!((digest.hex(), size), ("a".repeat(64).as_str(), 300));
        let two = format!("{layer},{layer}");
        assert!(component_layer("i", manifest(&two).as_bytes()).is_err());
        let tar = layer.replace(
            "application/wasm",
            "application/vnd.oci.image.layer.v1.tar+gzip",
        );
        assert!(component_layer("i", manifest(&tar).as_bytes()).is_err());
        let huge = layer.replace("300", "99999999999");
        assert!(component_layer("i", manifest(&huge).as_bytes()).is_err());
        assert!(component_layer("i", b"<html>").is_err());
    }

    #[test]
    fn content_that_does_not_hash_to_its_digest_is_refused() {
        let digest = Digest::of(b"component");
        assert!(check_digest("c", &digest, b"component").is_ok());
        let error = check_digest("c", &digest, b"c0mponent").unwrap_err();
        assert!(error.to_string().contains("not sha256:"), "{error}");
    }
}
