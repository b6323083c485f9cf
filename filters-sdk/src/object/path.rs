//! [`Keys`]: a dot-separated path split into its keys, held on the stack for paths of up to
//! eight keys, so that a filter's reads and edits by path allocate nothing to find their way.

use std::ops::Deref;

/// Keys a path holds on the stack; a deeper path is collected into a `Vec`.
const ON_STACK: usize = 8;

/// The keys of a path, after an optional first key (`spec` for [`super::Object::spec`]).
pub(crate) struct Keys<'a> {
    stack: [&'a str; ON_STACK],
    len: usize,
    /// All the keys, when there are more than the stack holds.
    heap: Vec<&'a str>,
}

impl<'a> Keys<'a> {
    /// `first` (if any), then the keys of `path`.
    pub(crate) fn of(first: Option<&'a str>, path: &'a str) -> Keys<'a> {
        let mut keys = Keys {
            stack: [""; ON_STACK],
            len: 0,
            heap: Vec::new(),
        };
        if let Some(first) = first {
            keys.push(first);
        }
        // A byte loop: paths are a few short keys, where `str::split`'s searcher costs more
        // than the search.
        let mut rest = path;
        while let Some(dot) = rest.bytes().position(|byte| byte == b'.') {
            keys.push(&rest[..dot]);
            rest = &rest[dot + 1..];
        }
        keys.push(rest);
        keys
    }

    /// Adds a key at the end.
    pub(crate) fn push(&mut self, key: &'a str) {
        if self.len < ON_STACK {
            self.stack[self.len] = key;
            self.len += 1;
            return;
        }
        if self.heap.is_empty() {
            self.heap.extend_from_slice(&self.stack);
        }
        self.heap.push(key);
    }
}

impl<'a> Deref for Keys<'a> {
    type Target = [&'a str];

    fn deref(&self) -> &[&'a str] {
        if self.heap.is_empty() {
            &self.stack[..self.len]
        } else {
            &self.heap
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_of_any_depth_split_as_split_does() {
        for path in [
            "a",
            "spec.ports.0.port",
            "",
            "a..b",
            "1.2.3.4.5.6.7.8",
            "1.2.3.4.5.6.7.8.9.10",
        ] {
            let split: Vec<&str> = path.split('.').collect();
            assert_eq!(&*Keys::of(None, path), &split[..], "{path}");
            let prefixed: Vec<&str> = ["spec"].into_iter().chain(split).collect();
            assert_eq!(&*Keys::of(Some("spec"), path), &prefixed[..], "spec.{path}");
        }
    }
}
