//! [`Node`]: one JSON value kept as a range of an object's bytes, split into its entries
//! (when it is an object) or parsed only as far as a reader reaches. Reading
//! `metadata.annotations.x` splits `metadata` and `annotations` and parses the one string
//! `x`; the other annotations, however large, are skipped, never unescaped or built.
//! Editing `spec.clusterIP` splits `spec` the same way and replaces the one entry: `spec`
//! is then written as its entries, the others copied from the original bytes.

use std::cell::OnceCell;
use std::collections::BTreeMap;
use std::ops::Range;

use serde_json::{Map, Value};

use super::item::{Item, position_in_text, position_in_value};
use super::key::{Build, Key};
use super::split;
use super::value::{
    can_set_value, collect_strings, encode, parse, remove_value, removes_from_value, set_value,
    walk, walk_mut,
};

/// One entry of an object: its key and its value.
pub(super) type Entry = (Key, Node);

/// One value of the original bytes: its range, its parts once split, its value once parsed.
#[derive(Clone, Debug)]
pub(super) struct Node {
    raw: Range<usize>,
    /// An object's entries or an array's items, split on first need.
    parts: OnceCell<Parts>,
    /// The whole value, parsed on first need; it then answers for everything below.
    value: OnceCell<Value>,
    /// Whether an edit reached this value or one below it, so that `raw` no longer holds it:
    /// it is written from its value if it has one, else from its parts.
    edited: bool,
}

impl Build for Node {
    fn value(raw: Range<usize>) -> Node {
        Node::new(raw)
    }

    fn object(raw: Range<usize>, entries: Vec<Entry>) -> Node {
        Node::split(raw, entries)
    }
}

/// What a value splits into.
#[derive(Clone, Debug)]
enum Parts {
    /// An object's entries, in order.
    Entries(Vec<Entry>),
    /// An array's items, in order.
    Items(Vec<Node>),
    /// Nothing: a scalar, or text that does not split (and traps when it is parsed).
    Whole,
}

/// Where one key of a path leads from a node.
enum Step {
    /// To the part at this index: the last entry of that key, or the item of that number.
    Part(usize),
    /// To an entry or item the node does not have.
    Missing,
    /// Into the node's value: it was parsed, or it is neither an object nor an array.
    Value,
}

impl Node {
    /// A value lying at `raw` in the object's bytes.
    pub(super) fn new(raw: Range<usize>) -> Node {
        Node {
            raw,
            parts: OnceCell::new(),
            value: OnceCell::new(),
            edited: false,
        }
    }

    /// An object lying at `raw`, whose entries were split already.
    pub(super) fn split(raw: Range<usize>, children: Vec<Entry>) -> Node {
        Node {
            raw,
            parts: OnceCell::from(Parts::Entries(children)),
            value: OnceCell::new(),
            edited: false,
        }
    }

    /// A value set by an edit: it answers from now on, and is what is written.
    pub(super) fn holding(value: Value) -> Node {
        Node {
            raw: 0..0,
            parts: OnceCell::from(Parts::Whole),
            value: OnceCell::from(value),
            edited: true,
        }
    }

    /// Where the value lies in the object's bytes.
    pub(super) fn raw(&self) -> Range<usize> {
        self.raw.clone()
    }

    /// Whether an edit reached this value or one below it.
    pub(super) fn is_edited(&self) -> bool {
        self.edited
    }

    /// The whole value, parsed from `bytes` (the object's bytes) on first need, or built from
    /// its entries once an edit changed one.
    pub(super) fn value(&self, bytes: &[u8]) -> &Value {
        self.value.get_or_init(|| self.build(bytes))
    }

    /// The whole value, to change: it answers and is written from now on.
    pub(super) fn value_mut(&mut self, bytes: &[u8]) -> &mut Value {
        self.value(bytes);
        self.edited = true;
        self.parts = OnceCell::from(Parts::Whole);
        match self.value.get_mut() {
            Some(value) => value,
            None => unreachable!("the value was just built"),
        }
    }

    /// A copy of the whole value, built (and not kept) if it was not.
    pub(super) fn to_value(&self, bytes: &[u8]) -> Value {
        match self.value.get() {
            Some(value) => value.clone(),
            None => self.build(bytes),
        }
    }

    /// The whole value, built if it was not.
    pub(super) fn into_value(self, bytes: &[u8]) -> Value {
        let Node {
            raw,
            parts,
            value,
            edited,
        } = self;
        match value.into_inner() {
            Some(value) => value,
            None => build(&raw, parts.get(), edited, bytes),
        }
    }

    /// The value, if it was parsed.
    pub(super) fn parsed(&self) -> Option<&Value> {
        self.value.get()
    }

    /// Writes the value as JSON: the original bytes unless an edit reached it, else its value
    /// encoded, or its entries each written in turn.
    pub(super) fn write(&self, out: &mut Vec<u8>, bytes: &[u8]) {
        if self.edited {
            if let Some(value) = self.value.get() {
                return encode(out, value);
            }
            match self.parts.get() {
                Some(Parts::Entries(entries)) => return Node::write_entries(out, bytes, entries),
                Some(Parts::Items(items)) => return Node::write_items(out, bytes, items),
                _ => {}
            }
        }
        out.extend_from_slice(&bytes[self.raw.clone()]);
    }

    /// The value below this one at `keys`, to change. Objects on the way are split, not
    /// parsed, and marked edited; only the value at the end (or the first value on the way
    /// that is not an object, such as an array) is parsed, and written from then on.
    pub(super) fn get_mut(&mut self, bytes: &[u8], keys: &[&str]) -> Option<&mut Value> {
        self.edited = true;
        let Some((key, rest)) = keys.split_first() else {
            return Some(self.value_mut(bytes));
        };
        match self.step(bytes, key) {
            Step::Part(index) => self.part_mut(index).get_mut(bytes, rest),
            Step::Missing => None,
            Step::Value => walk_mut(self.value_mut(bytes), keys),
        }
    }

    /// Whether [`Node::set`] would set the value below this one at `keys`: no scalar on the
    /// way, no array index past its end. Splits as a read does, and changes nothing.
    pub(super) fn can_set(&self, bytes: &[u8], keys: &[&str]) -> bool {
        let Some((key, rest)) = keys.split_first() else {
            return false;
        };
        match self.step(bytes, key) {
            Step::Part(index) => rest.is_empty() || self.part(index).can_set(bytes, rest),
            // An object gains the entry, and the objects below it; an array does not grow.
            Step::Missing => matches!(self.parts.get(), Some(Parts::Entries(_))),
            Step::Value => can_set_value(self.value(bytes), keys),
        }
    }

    /// Sets the value below this one at `keys` (at least one key), splitting the objects on
    /// the way as [`Node::get_mut`] does and adding missing ones. A path [`Node::can_set`]
    /// refuses (a scalar on the way, an index past an array's end) must be refused before:
    /// this marks the nodes on its way edited as it goes.
    pub(super) fn set(&mut self, bytes: &[u8], keys: &[&str], value: Value) -> bool {
        let Some((key, rest)) = keys.split_first() else {
            return false;
        };
        self.edited = true;
        match self.step(bytes, key) {
            Step::Part(index) => {
                let part = self.part_mut(index);
                if rest.is_empty() {
                    *part = Node::holding(value);
                    true
                } else {
                    part.set(bytes, rest, value)
                }
            }
            Step::Missing => {
                // Objects gain the entry; arrays grow only through their values.
                let Some(Parts::Entries(entries)) = self.parts.get_mut() else {
                    return false;
                };
                let added = if rest.is_empty() {
                    value
                } else {
                    let mut added = Value::Object(Map::new());
                    if !set_value(&mut added, rest, value) {
                        return false;
                    }
                    added
                };
                entries.push((Key::Owned((*key).to_owned()), Node::holding(added)));
                true
            }
            Step::Value => set_value(self.value_mut(bytes), keys, value),
        }
    }

    /// Whether [`Node::remove`] would remove something below this one at `keys`: an entry of
    /// the last key in the object the path ends in. Splits as a read does, and changes
    /// nothing.
    pub(super) fn can_remove(&self, bytes: &[u8], keys: &[&str]) -> bool {
        let Some((last, on_the_way)) = keys.split_last() else {
            return false;
        };
        match self.find(bytes, on_the_way) {
            Found::Node(parent) => match parent.parts(bytes) {
                Parts::Entries(entries) => entries.iter().any(|(key, _)| key.is(bytes, last)),
                // Not an object, or text that does not split: its value answers.
                Parts::Whole => removes_from_value(Some(parent.value(bytes)), last),
                Parts::Items(_) => false,
            },
            Found::Value(value) => removes_from_value(value, last),
        }
    }

    /// Removes every entry of the last of `keys` from the object the path ends in, below this
    /// one, returning the value a read found there (the last entry's). The objects on the way
    /// are split, as [`Node::set`] splits them, and only the one it ends in is re-encoded. A
    /// path [`Node::can_remove`] refuses must be refused before: this marks the nodes on
    /// its way edited as it goes.
    pub(super) fn remove(&mut self, bytes: &[u8], keys: &[&str]) -> Option<Value> {
        let (key, rest) = keys.split_first()?;
        self.edited = true;
        if !rest.is_empty() {
            return match self.step(bytes, key) {
                Step::Part(index) => self.part_mut(index).remove(bytes, rest),
                Step::Missing => None,
                Step::Value => remove_value(self.value_mut(bytes), keys),
            };
        }
        if let Some(Parts::Entries(entries)) = self.parts.get_mut()
            && self.value.get().is_none()
        {
            let last = entries.iter().rposition(|(k, _)| k.is(bytes, key))?;
            let (_, node) = entries.remove(last);
            entries.retain(|(k, _)| !k.is(bytes, key));
            return Some(node.into_value(bytes));
        }
        remove_value(self.value_mut(bytes), keys)
    }

    /// Where `key` leads from this node, splitting it if it was not: to its last entry of
    /// that key, or its item of that number, unless its value was parsed.
    fn step(&self, bytes: &[u8], key: &str) -> Step {
        if self.value.get().is_some() {
            return Step::Value;
        }
        let index = match self.parts(bytes) {
            Parts::Entries(entries) => entries.iter().rposition(|(k, _)| k.is(bytes, key)),
            Parts::Items(items) => key.parse::<usize>().ok().filter(|&i| i < items.len()),
            Parts::Whole => return Step::Value,
        };
        index.map_or(Step::Missing, Step::Part)
    }

    /// The part at `index`, which [`Node::step`] found.
    fn part(&self, index: usize) -> &Node {
        match self.parts.get() {
            Some(Parts::Entries(entries)) => &entries[index].1,
            Some(Parts::Items(items)) => &items[index],
            _ => unreachable!("a step into a node's parts follows their split"),
        }
    }

    /// The part at `index`, which [`Node::step`] found, to change.
    fn part_mut(&mut self, index: usize) -> &mut Node {
        match self.parts.get_mut() {
            Some(Parts::Entries(entries)) => &mut entries[index].1,
            Some(Parts::Items(items)) => &mut items[index],
            _ => unreachable!("a step into a node's parts follows their split"),
        }
    }

    /// The parts, split from `bytes` on first need.
    fn parts(&self, bytes: &[u8]) -> &Parts {
        self.parts.get_or_init(|| {
            let raw = self.raw.clone();
            let split = match bytes.get(raw.start) {
                Some(b'{') => split::entries(bytes, raw).map(Parts::Entries),
                Some(b'[') => split::items(bytes, raw).map(Parts::Items),
                _ => None,
            };
            split.unwrap_or(Parts::Whole)
        })
    }

    /// The whole value: from its entries once an edit reached one, else parsed from `raw`.
    fn build(&self, bytes: &[u8]) -> Value {
        build(&self.raw, self.parts.get(), self.edited, bytes)
    }

    /// The value below this one at `keys` (a number indexes an array), parsing only what
    /// lies on the way.
    pub(super) fn lookup<'a>(&'a self, bytes: &[u8], keys: &[&str]) -> Option<&'a Value> {
        match self.find(bytes, keys) {
            Found::Node(node) => Some(node.value(bytes)),
            Found::Value(value) => value,
        }
    }

    /// The string entries of the object below this one at `keys` (empty when it is missing
    /// or not an object); a key given twice keeps its last value.
    pub(super) fn strings_at<'a>(
        &'a self,
        bytes: &'a [u8],
        keys: &[&str],
    ) -> BTreeMap<&'a str, &'a str> {
        match self.find(bytes, keys) {
            Found::Node(node) => match node.parts(bytes) {
                Parts::Entries(entries) => entries
                    .iter()
                    .filter_map(|(key, node)| Some((key.text(bytes)?, node.value(bytes).as_str()?)))
                    .collect(),
                _ => BTreeMap::new(),
            },
            Found::Value(value) => collect_strings(value),
        }
    }

    /// The index of the first item of the array below this one at `keys` that `accept`
    /// accepts: split from the bytes unless an edit reached the array or it was parsed.
    pub(super) fn position(
        &self,
        bytes: &[u8],
        keys: &[&str],
        accept: &mut dyn FnMut(&Item) -> bool,
    ) -> Option<usize> {
        match self.find(bytes, keys) {
            Found::Node(node) if !node.edited => position_in_text(&bytes[node.raw()], accept),
            Found::Node(node) => position_in_value(Some(node.value(bytes)), accept),
            Found::Value(value) => position_in_value(value, accept),
        }
    }

    /// What lies below this one at `keys`: an unparsed node, or a value already parsed (or
    /// none), splitting only the objects and arrays on the way.
    fn find<'a>(&'a self, bytes: &[u8], keys: &[&str]) -> Found<'a> {
        if let Some(value) = self.value.get() {
            return Found::Value(walk(value, keys));
        }
        let Some((key, rest)) = keys.split_first() else {
            return Found::Node(self);
        };
        match self.step(bytes, key) {
            Step::Part(index) => self.part(index).find(bytes, rest),
            Step::Missing => Found::Value(None),
            Step::Value => Found::Value(walk(self.value(bytes), keys)),
        }
    }

    /// Whether the value at `keys` below this one was parsed (or a value above it was).
    #[cfg(test)]
    pub(super) fn is_parsed_at(&self, bytes: &[u8], keys: &[&str]) -> bool {
        let below = |key: &str, rest: &[&str]| {
            self.parts.get().is_some()
                && matches!(self.step(bytes, key), Step::Part(index)
                    if self.part(index).is_parsed_at(bytes, rest))
        };
        match keys.split_first() {
            _ if self.value.get().is_some() => true,
            None => false,
            Some((key, rest)) => below(key, rest),
        }
    }

    /// Whether the entries were split already.
    #[cfg(test)]
    pub(super) fn is_split(&self) -> bool {
        matches!(self.parts.get(), Some(Parts::Entries(_)))
    }
}

/// What a path leads to: a node not parsed yet, or a value in one that was.
enum Found<'a> {
    Node(&'a Node),
    Value(Option<&'a Value>),
}

/// The whole value of a node: from its entries once an edit reached one, else parsed from
/// its range of `bytes`.
fn build(raw: &Range<usize>, parts: Option<&Parts>, edited: bool, bytes: &[u8]) -> Value {
    match parts {
        Some(Parts::Entries(entries)) if edited => Value::Object(
            entries
                .iter()
                .filter_map(|(key, node)| Some((key.text(bytes)?.to_owned(), node.to_value(bytes))))
                .collect(),
        ),
        Some(Parts::Items(items)) if edited => {
            Value::Array(items.iter().map(|node| node.to_value(bytes)).collect())
        }
        _ => parse(&bytes[raw.clone()]),
    }
}

mod write;

#[cfg(test)]
mod tests;
