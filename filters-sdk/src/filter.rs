//! The one trait a filter implements, and how its config builds it.

use serde::de::DeserializeOwned;

use crate::object::Object;
use crate::types::{Context, Decision, Manifest};

/// A filter: it says what it is, builds itself from its config, and decides about objects.
///
/// The gateway keeps several instances of a filter (one per response being filtered at a
/// time) and replaces an instance after it traps, so a filter must not rely on state kept
/// between calls.
pub trait Filter: Sized + 'static {
    /// The config the filter is built from: read from the JSON the gateway has already
    /// checked against the manifest's schema (`{}` when none is given; a unit struct takes
    /// any, the schema refusing what it should), then made into the filter by [`IntoFilter::into_filter`]. A filter that
    /// is its own config names itself (`type Config = Self`) and derives `Deserialize`: a
    /// filter without config is a unit struct, and writes nothing more.
    type Config: IntoFilter<Self>;

    /// What the filter is and what it applies to; read once when the filter is loaded.
    fn manifest() -> Manifest;

    /// Decides about one object: a list item, a watch event's object or a single GET's body.
    /// [`Decision::Keep`] passes the object on as the filter left it: edits made to
    /// `object` are forwarded (encoded once), and an object nothing edited goes on as its
    /// original bytes. A `…_mut` accessor counts as an edit (see [`Object::is_edited`]), so
    /// read first where most objects need no change.
    fn filter(&self, ctx: &Context, object: &mut Object) -> Decision;

    /// Decides about several objects of one response (list items, or the watch events of
    /// one read), in order; by default one at a time.
    fn filter_batch(&self, ctx: &Context, objects: &mut [Object]) -> Vec<Decision> {
        objects
            .iter_mut()
            .map(|object| self.filter(ctx, object))
            .collect()
    }
}

/// A config that builds the filter `F`. Every deserializable type builds itself; a filter
/// that keeps something other than its config (a value worked out once) implements this
/// for its config type. An error rejects the generation of filters being loaded, and the
/// gateway keeps serving the previous one.
pub trait IntoFilter<F>: DeserializeOwned {
    /// Builds the filter.
    fn into_filter(self) -> Result<F, String>;
}

impl<F: DeserializeOwned> IntoFilter<F> for F {
    fn into_filter(self) -> Result<F, String> {
        Ok(self)
    }
}
