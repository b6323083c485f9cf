//! What a request is, parsed once at the door: its [`RequestInfo`] (verb, group, version,
//! resource, namespace, name, as kube-apiserver derives them) and the component that sent it.

mod component;
mod info;

pub use component::component_of;
pub use info::{RequestInfo, Verb};
