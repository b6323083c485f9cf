//! Filter components in OCI registries: image references and digests, credentials, a
//! client of the distribution API (pull pinned by digest, push), and the on-disk store of
//! what was pulled.
//!
//! A filter image is the Wasm OCI artifact layout (CNCF TAG Runtime's): an OCI image
//! manifest whose config is `application/vnd.wasm.config.v0+json` and whose one layer is
//! the component, `application/wasm`.
//!
//! # Layout
//! - `reference`: image references, content digests.
//! - `auth`: Docker `config.json` logins, `WWW-Authenticate` challenges.
//! - `client`: HTTPS to a registry, with its CA; challenges answered; bodies capped.
//! - `pull`: a manifest and its component by digest, each checked.
//! - `push`: a component as an artifact (for `edgegate filter push`).
//! - `store`: pulled images kept on disk, checked again when read.

mod auth;
mod client;
mod error;
mod pull;
mod push;
mod reference;
mod store;
#[cfg(test)]
mod tests;

pub use client::{Registries, RegistrySettings};
pub use error::RegistryError;
pub use reference::{Digest, Reference};
pub use store::ImageStore;
