//! Why the gateway could not start.

use std::net::SocketAddr;

use thiserror::Error;

use crate::cache::StoreError;
use crate::filter::FilterError;

/// Why the gateway could not start.
#[derive(Debug, Error)]
pub enum ServerError {
    /// A listener could not be bound.
    #[error("cannot listen on {addr}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// What went wrong.
        #[source]
        source: std::io::Error,
    },
    /// The gateway has no identity to start with.
    #[error(transparent)]
    Identity(#[from] super::identity::IdentityError),
    /// The cache could not be opened: another process holds it (a damaged one is replaced).
    #[error(transparent)]
    Cache(#[from] StoreError),
    /// The filter runtime could not start.
    #[error(transparent)]
    Filters(#[from] FilterError),
    /// The informers behind filter lookups could not start.
    #[error("cannot start the informers (filter lookups, yurt-hub-cfg)")]
    Informers(#[source] kube::Error),
}
