//! The tees into the cache: one per cached response, of the kind its request names, each
//! implementing the stream's sink for that kind and sending what the client received to the
//! writer through its [`TeeLink`].
//!
//! - `list`: [`ListTee`], a list page's items, staged, committed at the last page.
//! - `watch`: [`WatchTee`], a watch's events.
//! - `object`: [`ObjectTee`], a single object.
//! - `link`: [`TeeLink`], what every tee holds: the way to the writer, the budget, counters.

mod link;
mod list;
mod object;
mod watch;

pub(crate) use link::TeeLink;
pub use list::ListTee;
pub use object::ObjectTee;
pub use watch::WatchTee;

/// A tee of the kind its cache target names.
pub enum Tee {
    /// For a list (page).
    List(ListTee),
    /// For a watch.
    Watch(WatchTee),
    /// For a single object.
    Object(ObjectTee),
}

impl Tee {
    /// The list tee, if this is one.
    pub fn into_list(self) -> Option<ListTee> {
        match self {
            Tee::List(tee) => Some(tee),
            _ => None,
        }
    }

    /// The watch tee, if this is one.
    pub fn into_watch(self) -> Option<WatchTee> {
        match self {
            Tee::Watch(tee) => Some(tee),
            _ => None,
        }
    }

    /// The object tee, if this is one.
    pub fn into_object(self) -> Option<ObjectTee> {
        match self {
            Tee::Object(tee) => Some(tee),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests;
