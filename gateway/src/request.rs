//! What a request is, parsed once at the door into a [`RequestContext`]: its [`RequestInfo`]
//! (verb, group, version, resource, namespace, name, as kube-apiserver derives them), the
//! component that sent it and its [`ListQuery`]. Pure: no I/O.

mod accept;
mod component;
mod context;
mod info;
mod list_query;

pub use accept::{Answered, Shape, negotiate};
pub use component::component_of;
pub use context::RequestContext;
pub use info::{RequestInfo, RequestVerb, Verb};
pub use list_query::{ListQuery, with_resource_version};
