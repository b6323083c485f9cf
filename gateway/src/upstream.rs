//! The way to kube-apiserver: the gateway's credentials, pooled TLS clients for both
//! identities, the balancer that picks a healthy server, the health checker, and requests
//! kept to be tried again on another server.

mod balancer;
mod cert_files;
mod credentials;
pub mod health;
pub(crate) mod lb_mode;
mod lease;
mod link;
mod replay;
mod round_trip;
mod transport;

pub use balancer::{Balancer, Server};
pub use cert_files::{CertFiles, CertFilesError};
pub use credentials::{Credentials, CredentialsError};
pub use health::{HealthSettings, HealthWatch};
pub use lb_mode::LbMode;
pub use lease::{KubeletLease, NODE_LEASE_NAMESPACE};
pub use replay::Replayable;
pub use transport::{
    BoxError, CONNECT_TIMEOUT, CallerOnly, RequestBody, Transport, TransportError,
};
