//! [`Keys`]: a dot-separated path split into its keys, held on the stack for paths of up to
//! eight keys, so that a filter's reads and edits by path allocate nothing to find their way.

use std::ops::Deref;

use smallvec::SmallVec;

/// The keys of a path, after an optional first key (`spec` for [`super::Object::spec`]); a
/// path of more than eight keys spills to the heap.
pub(crate) struct Keys<'a>(SmallVec<[&'a str; 8]>);

impl<'a> Keys<'a> {
    /// `first` (if any), then the keys of `path`.
    pub(crate) fn of(first: Option<&'a str>, path: &'a str) -> Keys<'a> {
        let mut keys = Keys(first.into_iter().collect());
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
        self.0.push(key);
    }
}

impl<'a> Deref for Keys<'a> {
    type Target = [&'a str];

    fn deref(&self) -> &[&'a str] {
        &self.0
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
