//! Image references as an operator writes them (`HOST[:PORT]/PATH[:TAG][@sha256:HEX]`), and
//! content digests.

use std::fmt;

use sha2::{Digest as _, Sha256};

use super::error::RegistryError;

/// A `sha256:` content digest, checked: 64 lower-case hex digits.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Digest(String);

impl Digest {
    /// Parses `sha256:HEX`.
    pub fn parse(text: &str) -> Result<Digest, RegistryError> {
        let hex = text
            .strip_prefix("sha256:")
            .ok_or_else(|| RegistryError::Reference(format!("{text}: not a sha256 digest")))?;
        if hex.len() != 64
            || !hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return Err(RegistryError::Reference(format!(
                "{text}: a sha256 digest has 64 lower-case hex digits"
            )));
        }
        Ok(Digest(text.to_owned()))
    }

    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Digest {
        Digest(format!("sha256:{}", hex(&Sha256::digest(bytes))))
    }

    /// The hex digits, without `sha256:`.
    pub fn hex(&self) -> &str {
        &self.0["sha256:".len()..]
    }

    /// The whole digest, `sha256:HEX`.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Lower-case hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// An image reference: the registry's host, the repository, and a tag or a digest or both.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reference {
    /// `HOST[:PORT]` as written (`docker.io` is reached at its API host).
    pub registry: String,
    /// The repository path, e.g. `filters/masterservice`.
    pub repository: String,
    /// The tag, if written.
    pub tag: Option<String>,
    /// The digest, if written.
    pub digest: Option<Digest>,
}

impl Reference {
    /// Parses a reference; the first path segment is always the registry's host (a filter's
    /// image names its registry: no default registry is guessed).
    pub fn parse(text: &str) -> Result<Reference, RegistryError> {
        let bad = |why: &str| RegistryError::Reference(format!("{text}: {why}"));
        let (rest, digest) = match text.split_once('@') {
            Some((rest, digest)) => (rest, Some(Digest::parse(digest)?)),
            None => (text, None),
        };
        let (registry, path) = rest
            .split_once('/')
            .ok_or_else(|| bad("no registry host (HOST[:PORT]/REPOSITORY)"))?;
        if registry.is_empty() || registry.contains(['@', ' ']) {
            return Err(bad("bad registry host"));
        }
        let (repository, tag) = match path.rsplit_once(':') {
            Some((repository, tag)) if !tag.contains('/') => (repository, Some(tag)),
            _ => (path, None),
        };
        let segment_ok = |s: &str| {
            !s.is_empty()
                && s.bytes().all(|b| {
                    b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-')
                })
        };
        if !repository.split('/').all(segment_ok) {
            return Err(bad(
                "a repository is lower-case letters, digits, '.', '_', '-' and '/'",
            ));
        }
        if let Some(tag) = tag
            && (tag.is_empty()
                || tag.len() > 128
                || !tag
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-')))
        {
            return Err(bad("bad tag"));
        }
        Ok(Reference {
            registry: registry.to_owned(),
            repository: repository.to_owned(),
            tag: tag.map(str::to_owned),
            digest,
        })
    }

    /// The host the registry's API is served on (`docker.io` names `registry-1.docker.io`).
    pub fn api_host(&self) -> &str {
        match self.registry.as_str() {
            "docker.io" | "index.docker.io" => "registry-1.docker.io",
            host => host,
        }
    }

    /// The digest, or an error saying a pinned reference is needed.
    pub fn pinned(&self) -> Result<&Digest, RegistryError> {
        self.digest.as_ref().ok_or_else(|| {
            RegistryError::Reference(format!("{self}: not pinned by digest (…@sha256:HEX)"))
        })
    }

    /// This reference pinned at `digest`, without its tag.
    pub fn at(&self, digest: Digest) -> Reference {
        Reference {
            tag: None,
            digest: Some(digest),
            ..self.clone()
        }
    }
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.registry, self.repository)?;
        if let Some(tag) = &self.tag {
            write!(f, ":{tag}")?;
        }
        if let Some(digest) = &self.digest {
            write!(f, "@{digest}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEX: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn references_are_read_as_written() {
        let r = Reference::parse(&format!("127.0.0.1:5000/filters/ms:v1@sha256:{HEX}")).unwrap();
        assert_eq!(r.registry, "127.0.0.1:5000");
        assert_eq!(r.repository, "filters/ms");
        assert_eq!(r.tag.as_deref(), Some("v1"));
        assert_eq!(r.pinned().unwrap().hex(), HEX);
        assert_eq!(
            r.to_string(),
            format!("127.0.0.1:5000/filters/ms:v1@sha256:{HEX}")
        );
        let plain = Reference::parse("registry.example/a/b").unwrap();
        assert_eq!((plain.tag, plain.digest), (None, None));
        assert_eq!(
            Reference::parse("docker.io/x/y:1").unwrap().api_host(),
            "registry-1.docker.io"
        );
    }

    #[test]
    fn bad_references_and_digests_are_refused() {
        for bad in [
            "masterservice",
            "/a",
            "host/UPPER",
            "host/a:",
            "host/a@sha256:00",
            &format!("host/a@sha512:{HEX}"),
            &format!("host/a@sha256:{}", HEX.to_uppercase()),
        ] {
            assert!(Reference::parse(bad).is_err(), "{bad}");
        }
        assert!(Reference::parse("host/a:v1").unwrap().pinned().is_err());
    }

    #[test]
    fn a_digest_is_the_sha256_of_the_bytes() {
        assert_eq!(
            Digest::of(b"").as_str(),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
