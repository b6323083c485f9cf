//! One object of a shared state: its key, namespace and version read once from its JSON,
//! and the bytes the apiserver sent.

use bytes::Bytes;

use crate::stream::Meta;

/// One object as the apiserver last sent it.
#[derive(Debug)]
pub struct Object {
    /// `namespace/name`, or `name` when cluster-scoped.
    pub key: String,
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.resourceVersion`.
    pub version: u64,
    /// The object's JSON, with its `kind` and `apiVersion`.
    pub bytes: Bytes,
}

/// Why an object cannot be held.
#[derive(Debug, thiserror::Error)]
pub enum ObjectError {
    /// Its metadata cannot be read.
    #[error("an object without readable metadata")]
    Unreadable,
    /// Its resourceVersion is not a number (etcd's are): changes could not be ordered.
    #[error("object {key} has resourceVersion {version:?}, not a number")]
    Version {
        /// The object.
        key: String,
        /// Its resourceVersion.
        version: String,
    },
}

impl Object {
    /// Reads an object's identity and version from its JSON.
    pub fn parse(bytes: Bytes) -> Result<Object, ObjectError> {
        let meta = Meta::parse_checked(&bytes).map_err(|_| ObjectError::Unreadable)?;
        if meta.name.is_empty() {
            return Err(ObjectError::Unreadable);
        }
        let version = meta
            .resource_version
            .parse()
            .map_err(|_| ObjectError::Version {
                key: meta.key(),
                version: meta.resource_version.to_string(),
            })?;
        let (key, namespace) = (meta.key(), meta.namespace.into_owned());
        Ok(Object {
            key,
            namespace,
            version,
            bytes,
        })
    }

    /// The object as it would read at `version`: what a DELETED event carries when a
    /// change takes the object out of a client's sight, so the client's version never goes
    /// back; its other bytes as they are. (Its own bytes when it has no resourceVersion to
    /// set, which [`Object::parse`] rules out.)
    pub fn at(&self, version: u64) -> Bytes {
        if version == self.version {
            return self.bytes.clone();
        }
        crate::stream::with_version(&self.bytes, &version.to_string())
            .unwrap_or_else(|| self.bytes.clone())
    }
}
