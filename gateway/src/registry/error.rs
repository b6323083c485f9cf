//! What can go wrong reaching a registry, each saying where.

use std::path::PathBuf;

/// A registry operation's failure.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// An image reference or digest that cannot be used.
    #[error("image reference {0}")]
    Reference(String),
    /// The credentials file could not be read.
    #[error("registry credentials {path}: {message}")]
    Credentials { path: PathBuf, message: String },
    /// The registry CA file could not be read.
    #[error("registry CA {path}: {message}")]
    Ca { path: PathBuf, message: String },
    /// The registry could not be reached, or the exchange broke off.
    #[error("{url}: {message}")]
    Unreachable { url: String, message: String },
    /// The registry answered with an error status.
    #[error("{url}: HTTP {status}: {message}")]
    Status {
        url: String,
        status: u16,
        message: String,
    },
    /// The registry asked for credentials none were given for, or refused them.
    #[error("{url}: unauthorized ({message})")]
    Unauthorized { url: String, message: String },
    /// What the registry sent does not hash to the digest asked for.
    #[error("{what}: the content's digest is {got}, not {want}")]
    DigestMismatch {
        what: String,
        want: String,
        got: String,
    },
    /// What the registry sent is too large or not what an artifact holds.
    #[error("{what}: {message}")]
    Content { what: String, message: String },
    /// The filter-image store on disk.
    #[error("filter image store {path}: {source}")]
    Store {
        path: PathBuf,
        source: std::io::Error,
    },
}
