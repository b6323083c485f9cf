//! How requests are spread over several apiservers: a plain value the configuration makes.

/// How requests are spread over several servers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LbMode {
    /// Round-robin over the healthy servers.
    Rr,
    /// The first healthy server, in the order given.
    Priority,
}
