//! [`Object`]: one Kubernetes object, parsed once, with typed accessors for what filters
//! touch: identity, labels, annotations, and `spec`/`status` fields by path.
//!
//! Parsing is lazy. Reading a name, a namespace, a label or an annotation of an object made
//! from bytes reads the bytes up to that string and splits nothing (kube-apiserver writes
//! `metadata` before the body, and `managedFields` last in it), so a filter that keeps what it reads
//! by name or label never scans `managedFields` or the body. Any other read splits the
//! object's top-level fields up to `metadata` (and `metadata` into its own) in one scan;
//! the fields after it (`spec`, `endpoints`, `status`…) are split, and `spec` and `status`
//! into their own, when a read or an edit first reaches past `metadata`. Reading a path
//! splits the objects and arrays on the way and parses only the value at its end, so
//! reading `spec.type` never builds `spec.ports`, and reading one annotation never
//! unescapes the others. An edit by path splits its way the same way and re-encodes only
//! the value it ends on, copying the rest of the original bytes. The whole JSON value is
//! built only when a filter asks for it ([`Object::value`]). An object left unchanged
//! encodes back to its original bytes, and pruning a slice's `endpoints` leaves its
//! `metadata` as it came.
//!
//! A path is a dot-separated list of keys, where a number indexes an array:
//! `ports.0.port` is the first port's `port`. Keys that contain a dot are reached through
//! [`Object::value`] or [`Object::value_mut`].

mod accessors;
mod fields;
mod item;
mod key;
mod node;
mod path;
mod split;
mod value;

use std::cell::OnceCell;
use std::collections::BTreeMap;

use edgegate_json_scan::{Peek, first_at};
use serde_json::Value;
use thiserror::Error;

use fields::Fields;
pub use item::Item;
pub(crate) use path::Keys;
use value::{
    as_object, collect_strings, object_entry, parse_whole, plain_string, remove_value, set_value,
    walk, walk_mut,
};

/// Why bytes are not an object.
#[derive(Debug, Error)]
pub enum ObjectError {
    /// The bytes are not JSON.
    #[error("not JSON: {0}")]
    Parse(#[from] serde_json::Error),
    /// The JSON is not an object.
    #[error("not a JSON object")]
    NotAnObject,
}

/// A Kubernetes object: its bytes split into its top-level fields, and its whole JSON value
/// once needed. The value, once built, answers for everything.
#[derive(Clone, Debug)]
pub struct Object {
    /// The bytes it was read from (empty for an object made from a value).
    raw: Vec<u8>,
    /// `raw` split into its top-level fields (only while the value is unbuilt).
    fields: OnceCell<Fields>,
    /// The whole value, built when a filter asks for it; it then answers for everything.
    /// Boxed: most objects never build it, and a batch's objects are moved into place, which
    /// costs a call to `memmove` apiece once an `Object` is over 128 bytes (it is 112).
    value: OnceCell<Box<Value>>,
    /// Whether the value was handed out to change (edits through the fields are marked in
    /// them).
    value_edited: bool,
}

impl PartialEq for Object {
    fn eq(&self, other: &Object) -> bool {
        self.value() == other.value()
    }
}

impl Object {
    /// Reads JSON bytes: checks they begin as a JSON object, and splits nothing until a read
    /// needs it. Bytes that stop being JSON where a read reaches make that read panic, which
    /// in a filter traps the call (the host's failure policy).
    pub fn from_slice(bytes: &[u8]) -> Result<Object, ObjectError> {
        Object::from_vec(bytes.to_vec())
    }

    /// [`Object::from_slice`] on bytes it keeps, without copying them.
    pub fn from_vec(bytes: Vec<u8>) -> Result<Object, ObjectError> {
        if split::opens_object(&bytes) {
            return Ok(Object {
                raw: bytes,
                fields: OnceCell::new(),
                value: OnceCell::new(),
                value_edited: false,
            });
        }
        // Not an object (or not JSON): the whole parse says which.
        Object::from_value(serde_json::from_slice(&bytes)?)
    }

    /// Wraps a JSON value, which must be an object.
    pub fn from_value(value: Value) -> Result<Object, ObjectError> {
        if !value.is_object() {
            return Err(ObjectError::NotAnObject);
        }
        Ok(Object {
            raw: Vec::new(),
            fields: OnceCell::new(),
            value: OnceCell::from(Box::new(value)),
            value_edited: false,
        })
    }

    /// The whole object. Building it parses every field; a filter that needs a few fields
    /// is faster with paths ([`Object::get`], [`Object::spec`]).
    pub fn value(&self) -> &Value {
        self.value.get_or_init(|| {
            Box::new(match self.fields.get() {
                Some(fields) if fields.is_edited() => fields.to_value(&self.raw),
                _ => parse_whole(&self.raw),
            })
        })
    }

    /// The whole object, to change; it is re-encoded whole.
    pub fn value_mut(&mut self) -> &mut Value {
        if self.value.get().is_none() {
            let value = match self.fields.take() {
                Some(fields) => fields.into_value(&self.raw),
                None => parse_whole(&self.raw),
            };
            self.value = OnceCell::from(Box::new(value));
        }
        // The value answers from now on: the fields would only go stale.
        self.fields = OnceCell::new();
        self.value_edited = true;
        match self.value.get_mut() {
            Some(value) => value,
            None => unreachable!("the value was just built"),
        }
    }

    /// The object's JSON value.
    pub fn into_value(self) -> Value {
        let Object {
            raw, fields, value, ..
        } = self;
        match (value.into_inner(), fields.into_inner()) {
            (Some(value), _) => *value,
            (None, Some(fields)) => fields.into_value(&raw),
            (None, None) => parse_whole(&raw),
        }
    }

    /// Whether the object may differ from what it was made from: a setter, a removal or a
    /// retain changed it, or a `…_mut` accessor handed out a part of it to change (counted
    /// as an edit even when nothing was written through it). A setter that finds the value
    /// already there ([`Object::update`]) and a removal that finds nothing edit nothing.
    pub fn is_edited(&self) -> bool {
        self.value_edited || self.fields.get().is_some_and(Fields::is_edited)
    }

    /// The object encoded as JSON if it was edited and no longer encodes to the bytes it was
    /// read from: what a filter's `Keep` forwards.
    pub(crate) fn edits(&self) -> Option<Vec<u8>> {
        if !self.is_edited() {
            return None;
        }
        let bytes = self.to_vec();
        (bytes != self.raw).then_some(bytes)
    }

    /// The object encoded as JSON: its original bytes if nothing was changed, with only the
    /// changed top-level fields re-encoded if only paths changed it.
    pub fn to_vec(&self) -> Vec<u8> {
        match (self.value.get(), self.fields.get()) {
            // Encoding a Value (string keys only) cannot fail.
            (Some(value), _) => serde_json::to_vec(value).unwrap_or_default(),
            (None, Some(fields)) if fields.is_edited() => fields.write(&self.raw),
            _ => self.raw.clone(),
        }
    }

    /// Any field by path from the root (`metadata.ownerReferences.0.kind`).
    pub fn get(&self, path: &str) -> Option<&Value> {
        self.lookup(&Keys::of(None, path))
    }

    /// Any field by path from the root, to change. Objects on the way are split, not
    /// parsed, and only the value at the end is re-encoded when the object is: editing
    /// `spec.clusterIP` copies the rest of `spec` as it came.
    pub fn get_mut(&mut self, path: &str) -> Option<&mut Value> {
        self.get_mut_at(&Keys::of(None, path))
    }

    /// Sets any field by path, creating missing objects on the way (never array items).
    /// Returns false, changing nothing, when the path runs through a scalar or past an
    /// array's end. As with [`Object::get_mut`], only the value set (and any object it
    /// adds) is re-encoded.
    pub fn set(&mut self, path: &str, value: Value) -> bool {
        self.set_at(&Keys::of(None, path), value)
    }

    /// Sets any field by path, as [`Object::set`] does, unless it already holds `value`, in
    /// which case the object is not edited (and, kept, goes on as its original bytes).
    /// Returns whether the object changed.
    pub fn update(&mut self, path: &str, value: Value) -> bool {
        self.update_keys(&Keys::of(None, path), value)
    }

    /// [`Object::update`] on a path given as its keys (for the SDK's own helpers, which
    /// build paths from parts and so need not format them).
    pub(crate) fn update_keys(&mut self, keys: &[&str], value: Value) -> bool {
        self.lookup(keys) != Some(&value) && self.set_at(keys, value)
    }

    /// Removes the field at a path (`spec.externalIPs`), every entry of its key in the object
    /// the path ends in, and returns its value; `None`, changing nothing, when there is none
    /// (a path that ends at an array's item removes nothing). As with [`Object::set`], the
    /// objects on the way are split and only the one it ends in is re-encoded.
    pub fn remove(&mut self, path: &str) -> Option<Value> {
        self.remove_at(&Keys::of(None, path))
    }

    /// Keeps only the items of the array in top-level field `key` (`endpoints`) that `keep`
    /// accepts, handing it each [`Item`] (its text and its fields, unparsed); returns whether
    /// any was removed (`false` when the field is missing or not an array). Unless the field
    /// was already parsed, the items are never built into values: the array and its items'
    /// fields are split in one scan, and the kept items copied as they came.
    pub fn retain_items(&mut self, key: &str, mut keep: impl FnMut(&Item) -> bool) -> bool {
        if self.value.get().is_some() {
            return fields::retain_values(self.value_mut().get_mut(key), &mut keep);
        }
        let (fields, raw) = self.fields_mut();
        fields.retain_items(raw, key, &mut keep)
    }

    /// The index of the first item of the array at `path` that `accept` accepts, handing it
    /// each [`Item`] (its text and its fields, unparsed) as [`Object::retain_items`] does;
    /// `None` when none does or the path leads to no array. Finding the port named `https`
    /// this way reads the names of the ports before it and parses nothing else.
    pub fn position(&self, path: &str, mut accept: impl FnMut(&Item) -> bool) -> Option<usize> {
        let keys = Keys::of(None, path);
        match self.value.get() {
            Some(value) => item::position_in_value(walk(value, &keys), &mut accept),
            None => self.fields().position(&self.raw, &keys, &mut accept),
        }
    }

    /// The value at `keys` from the root: from the whole value if it was built, else from
    /// the fields, parsing only what lies on the way.
    fn lookup(&self, keys: &[&str]) -> Option<&Value> {
        match self.value.get() {
            Some(value) => walk(value, keys),
            None => self.fields().lookup(&self.raw, keys),
        }
    }

    /// The string entries of the object at `keys` from the root.
    fn strings_at(&self, keys: &[&str]) -> BTreeMap<&str, &str> {
        match self.value.get() {
            Some(value) => collect_strings(walk(value, keys)),
            None => self.fields().strings_at(&self.raw, keys),
        }
    }

    /// The string at `keys` from the root. While nothing is split or parsed it is read
    /// straight from the bytes ([`first_at`]), when it is there a plain string (no
    /// escapes): the first of a key given twice, where a split answers with the last, as
    /// it does for `metadata` itself. Otherwise the fields are split and it is looked up.
    fn string_at(&self, keys: &[&str]) -> Option<&str> {
        if self.fields.get().is_none() && self.value.get().is_none() {
            match first_at(&self.raw, keys) {
                Peek::Missing => return None,
                Peek::Found(raw) => {
                    if let Some(text) = plain_string(&self.raw[raw]) {
                        return Some(text);
                    }
                }
                Peek::Unreadable => {}
            }
        }
        self.lookup(keys)?.as_str()
    }

    /// [`Object::get_mut`] on a path already split into its keys.
    fn get_mut_at(&mut self, keys: &[&str]) -> Option<&mut Value> {
        if self.value.get().is_some() {
            return walk_mut(self.value_mut(), keys);
        }
        let (fields, raw) = self.fields_mut();
        fields.get_mut(raw, keys)
    }

    /// [`Object::set`] on a path already split into its keys.
    fn set_at(&mut self, keys: &[&str], value: Value) -> bool {
        if self.value.get().is_some() {
            return set_value(self.value_mut(), keys, value);
        }
        let (fields, raw) = self.fields_mut();
        fields.set(raw, keys, value)
    }

    /// Sets the string at `keys` by path; where something that is not an object lies on the
    /// way (`"labels": null`), the whole value is built and an object put in its place.
    fn set_string(&mut self, keys: &[&str], value: &str) {
        if self.set_at(keys, value.into()) {
            return;
        }
        let Some((last, on_the_way)) = keys.split_last() else {
            return;
        };
        let parent = on_the_way
            .iter()
            .fold(as_object(self.value_mut()), |map, key| {
                object_entry(map, key)
            });
        parent.insert((*last).to_owned(), value.into());
    }

    /// [`Object::remove`] on a path already split into its keys.
    fn remove_at(&mut self, keys: &[&str]) -> Option<Value> {
        if self.value.get().is_some() {
            return remove_value(self.value_mut(), keys);
        }
        let (fields, raw) = self.fields_mut();
        fields.remove(raw, keys)
    }

    /// The split fields to change, with the bytes they were split from.
    fn fields_mut(&mut self) -> (&mut Fields, &[u8]) {
        self.fields();
        match self.fields.get_mut() {
            Some(fields) => (fields, &self.raw),
            None => unreachable!("the fields were just split"),
        }
    }

    /// The top-level fields of `raw`, split on first need (only while the value is unbuilt).
    /// Bytes that do not split as an object make this panic, trapping a filter's call.
    fn fields(&self) -> &Fields {
        self.fields.get_or_init(|| match Fields::split(&self.raw) {
            Some(fields) => fields,
            None => panic!("the object's fields do not split: it is not one JSON object"),
        })
    }
}

#[cfg(test)]
mod random_edits;
#[cfg(test)]
mod tests;
