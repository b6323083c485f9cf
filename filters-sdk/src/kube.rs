//! What filters know about Kubernetes and OpenYurt objects beyond plain JSON, written once
//! here so that every filter reads an annotation, finds a Service or a node pool's members,
//! and prunes endpoints the same way.
//!
//! # Layout
//! - [`annotations`]: flag and comma-list values, and label values fit for a selector.
//! - [`topology`]: the `openyurt.io/topologyKeys` annotation of a Service.
//! - [`listen`]: the `nodeport.openyurt.io/listen` annotation of a Service.
//! - [`hub`]: [`HubAddress`], the host and port that filters point node clients at, with its
//!   config schema.
//! - [`endpoints`]: the endpoints of slices (v1, v1beta1) and of v1 Endpoints, pruned by node.
//! - [`service`]: the Service behind endpoints, looked up; Service types.
//! - [`pool`]: the member nodes of a node pool, looked up.

pub mod annotations;
pub mod endpoints;
pub mod hub;
pub mod listen;
pub mod pool;
pub mod service;
pub mod topology;

pub use endpoints::EndpointsKind;
pub use hub::{HubAddress, HubConfigError};
pub use listen::ListenPools;
pub use service::ServiceType;
pub use topology::Topology;
