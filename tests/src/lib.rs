//! The end-to-end harness: a real kube-apiserver and etcd on loopback, the `edgegate`
//! binary in front of them, and kubectl to drive both.
//!
//! # Layout
//! - [`toolchain`]: finds (and on first use provisions) etcd, kube-apiserver and kubectl.
//! - [`pki`]: the cluster's certificates and keys.
//! - [`cluster`]: etcd and kube-apiserver processes, kubeconfigs, kubectl.
//! - [`gateway`]: the edgegate process pointed at a cluster.
//! - [`filters`]: the built filter components, built on first use.
//! - [`flapping`]: a flapping link's reflectors, the cloud's churn, the checks after it.
//! - [`process`]: child processes that die with the harness; free ports; polling.
//! - [`http`]: a blocking raw HTTP/1.1 client for probes and malformed-request tests.
//! - [`relay`]: a TCP relay to cut the gateway off from a running apiserver.
//! - [`sockets`]: the connections a process holds, read from `/proc`.
//! - [`netns`]: a node's network namespace and its cloud link (cut; a LAN or a WAN).
//! - [`wan`]: the WAN emulator: TUN devices, delay, loss, a rate limit.
//! - [`controller_manager`]: kube-controller-manager for a cluster (CSR signing, …).
//! - [`bootstrap`]: what kubeadm sets up for nodes joining with a bootstrap token.
//! - [`cloud`]: a node's cloud: etcd, kube-apiserver and kube-controller-manager.
//! - [`image`]: the node's busybox OCI image, made without a registry.
//! - [`registry`]: a docker-registry on loopback with TLS from its own CA and htpasswd auth.
//! - [`containerd`]: the node's container runtime and its cleanup.
//! - [`deploy`]: the image and static pod manifest of `deploy/`, fitted to a test node.
//! - [`node`]: containerd, edgegate, kubelet and kube-proxy in the node's namespace.
//! - [`node_watch`]: a watch through the gateway from inside the node, its events timed.
//! - [`testbed`]: a node, its cloud and the link between them.
//! - [`scenario`]: steps the node scenarios and `cargo dev --node --trials` share.
//! - [`sweep`]: what a harness killed outright left behind, removed by the next one.
//! - [`standin`]: what a 1.21+ apiserver serves of `discovery.k8s.io/v1` EndpointSlices,
//!   made from the real 1.20 apiserver's `v1beta1` answers; its requests (`standin_proxy`),
//!   discovery (`standin_discovery`), JSON ([`standin_json`]) and protobuf (`standin_proto`).
// The harness is synchronous by design: it drives processes, not a runtime.
#![allow(clippy::disallowed_methods)]

pub mod bootstrap;
pub mod cloud;
pub mod cluster;
pub mod containerd;
pub mod controller_manager;
pub mod deploy;
pub mod filters;
pub mod flapping;
pub mod gateway;
pub mod http;
pub mod image;
pub mod lan;
pub mod netns;
pub mod node;
pub mod node_watch;
pub mod pki;
pub mod pool;
pub mod process;
pub mod registry;
pub mod relay;
pub mod scenario;
pub mod served;
pub mod sockets;
pub mod standin;
mod standin_discovery;
pub mod standin_json;
mod standin_proto;
mod standin_proxy;
#[cfg(test)]
mod standin_tests;
pub mod sweep;
pub mod testbed;
pub mod toolchain;
pub mod wan;

pub use cluster::{ADMIN_TOKEN, Cluster, Etcd, NOBODY_TOKEN, User};
pub use gateway::Gateway;
pub use relay::Relay;
pub use standin::StandIn;
pub use testbed::Testbed;
pub use toolchain::Toolchain;
