//! The one trait a filter implements.

use crate::object::Object;
use crate::types::{Context, Decision, Manifest};

/// A filter: it says what it is, builds itself from its config, and decides about objects.
///
/// The gateway keeps several instances of a filter (one per response being filtered at a
/// time) and replaces an instance after it traps, so a filter must not rely on state kept
/// between calls.
pub trait Filter: Sized + 'static {
    /// What the filter is and what it applies to; read once when the filter is loaded.
    fn manifest() -> Manifest;

    /// Builds the filter from its config (`{}` when none is given), which the gateway has
    /// already checked against the manifest's schema. An error rejects the generation of
    /// filters being loaded, and the gateway keeps serving the previous one.
    fn configure(config: serde_json::Value) -> Result<Self, String>;

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
