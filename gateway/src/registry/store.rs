//! Pulled filter images on disk, by digest: the manifest and the component, each written
//! whole (a temporary file, synced, renamed) and checked against its digest again when
//! read, so a torn or damaged file is never loaded. A node that boots cut off from its
//! registry runs from here.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use bytes::Bytes;

use super::error::RegistryError;
use super::pull::{Pulled, check_digest, component_layer};
use super::reference::Digest;

/// The store: a folder of blobs named by digest.
#[derive(Clone, Debug)]
pub struct ImageStore {
    dir: PathBuf,
}

impl ImageStore {
    /// The store in `dir`, created if missing.
    pub fn open(dir: &Path) -> Result<ImageStore, RegistryError> {
        fs::create_dir_all(dir).map_err(|source| RegistryError::Store {
            path: dir.to_owned(),
            source,
        })?;
        Ok(ImageStore {
            dir: dir.to_owned(),
        })
    }

    /// Writes the store's own file `name` (not a blob) whole.
    pub fn write_file(&self, name: &str, bytes: &[u8]) -> Result<(), RegistryError> {
        write_whole(&self.dir.join(name), bytes)
    }

    /// Reads the store's own file `name`, if there.
    pub fn read_file(&self, name: &str) -> Option<Vec<u8>> {
        fs::read(self.dir.join(name)).ok()
    }

    fn blob_path(&self, digest: &Digest) -> PathBuf {
        self.dir.join(format!("sha256-{}", digest.hex()))
    }

    /// Keeps image `manifest_digest`, which `pulled` holds.
    pub fn put(&self, manifest_digest: &Digest, pulled: &Pulled) -> Result<(), RegistryError> {
        self.write(&pulled.component_digest, &pulled.component)?;
        self.write(manifest_digest, &pulled.manifest)
    }

    /// The component of image `manifest_digest`: `None` if the store lacks it or holds it
    /// damaged (the damaged files are removed, to be pulled again).
    pub fn component(&self, manifest_digest: &Digest) -> Option<Bytes> {
        match self.read_checked(manifest_digest) {
            Ok(found) => found,
            Err(error) => {
                tracing::warn!(error = %crate::error::error_chain(&error), "a stored filter image is damaged; it is pulled again");
                let _ = fs::remove_file(self.blob_path(manifest_digest));
                None
            }
        }
    }

    fn read_checked(&self, manifest_digest: &Digest) -> Result<Option<Bytes>, RegistryError> {
        let Some(manifest) = self.read(manifest_digest)? else {
            return Ok(None);
        };
        let what = format!("stored manifest {manifest_digest}");
        check_digest(&what, manifest_digest, &manifest)?;
        let (layer, _) = component_layer(&what, &manifest)?;
        let Some(component) = self.read(&layer)? else {
            return Ok(None);
        };
        if let Err(error) = check_digest(&format!("stored component {layer}"), &layer, &component) {
            let _ = fs::remove_file(self.blob_path(&layer));
            return Err(error);
        }
        Ok(Some(component))
    }

    /// Removes every blob but those of the images `keep` names.
    pub fn keep_only(&self, keep: &BTreeSet<Digest>) {
        let mut wanted: BTreeSet<String> = BTreeSet::new();
        for digest in keep {
            wanted.insert(format!("sha256-{}", digest.hex()));
            if let Ok(Some(manifest)) = self.read(digest)
                && let Ok((layer, _)) = component_layer("", &manifest)
            {
                wanted.insert(format!("sha256-{}", layer.hex()));
            }
        }
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with("sha256-") && !wanted.contains(&name) {
                let _ = fs::remove_file(entry.path());
            }
        }
    }

    fn read(&self, digest: &Digest) -> Result<Option<Bytes>, RegistryError> {
        let path = self.blob_path(digest);
        match fs::read(&path) {
            Ok(bytes) => Ok(Some(Bytes::from(bytes))),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(RegistryError::Store { path, source }),
        }
    }

    fn write(&self, digest: &Digest, bytes: &[u8]) -> Result<(), RegistryError> {
        write_whole(&self.blob_path(digest), bytes)
    }
}

/// Writes `path` whole (`crate::whole_file`).
pub(crate) fn write_whole(path: &Path, bytes: &[u8]) -> Result<(), RegistryError> {
    crate::whole_file::write_whole(path, bytes).map_err(|source| RegistryError::Store {
        path: path.to_owned(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pulled(component: &[u8]) -> (Digest, Pulled) {
        let layer = Digest::of(component);
        let manifest = format!(
            r#"{{"layers":[{{"mediaType":"application/wasm","digest":"{layer}","size":{}}}]}}"#,
            component.len()
        );
        let pulled = Pulled {
            manifest: Bytes::from(manifest),
            component: Bytes::copy_from_slice(component),
            component_digest: layer,
        };
        (Digest::of(&pulled.manifest), pulled)
    }

    #[test]
    fn an_image_is_read_back_and_a_damaged_one_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let store = ImageStore::open(dir.path()).unwrap();
        let (digest, image) = pulled(b"\0asm one");
        assert_eq!(store.component(&digest), None);
        store.put(&digest, &image).unwrap();
        assert_eq!(store.component(&digest).as_deref(), Some(&b"\0asm one"[..]));
        // A flipped byte in the component: not loaded, and removed to be pulled again.
        let layer = store.blob_path(&image.component_digest);
        fs::write(&layer, b"\0asm 0ne").unwrap();
        assert_eq!(store.component(&digest), None);
        assert!(!layer.exists());
    }

    #[test]
    fn only_the_images_kept_stay() {
        let dir = tempfile::tempdir().unwrap();
        let store = ImageStore::open(dir.path()).unwrap();
        let (one, image_one) = pulled(b"\0asm one");
        let (two, image_two) = pulled(b"\0asm two");
        store.put(&one, &image_one).unwrap();
        store.put(&two, &image_two).unwrap();
        store.keep_only(&BTreeSet::from([two.clone()]));
        assert_eq!(store.component(&one), None);
        assert!(store.component(&two).is_some());
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 2);
    }
}
