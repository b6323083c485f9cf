//! How a split [`Node`] writes itself back: an object's entries and an array's items, each
//! key as it came and each value as [`Node::write`] writes it.

use super::super::key::Key;
use super::super::value::encode;
use super::{Entry, Node};

impl Node {
    /// Writes an object's entries, each key as it came (or encoded, if it was unescaped) and
    /// each value as [`Node::write`] does.
    pub(super) fn write_entries(out: &mut Vec<u8>, bytes: &[u8], children: &[Entry]) {
        out.push(b'{');
        for (index, (key, node)) in children.iter().enumerate() {
            if index > 0 {
                out.push(b',');
            }
            match key {
                Key::Raw(raw) => {
                    out.push(b'"');
                    out.extend_from_slice(&bytes[raw.clone()]);
                    out.push(b'"');
                }
                Key::Owned(owned) => encode(out, owned),
            }
            out.push(b':');
            node.write(out, bytes);
        }
        out.push(b'}');
    }

    /// Writes an array's items, each as [`Node::write`] does.
    pub(super) fn write_items(out: &mut Vec<u8>, bytes: &[u8], items: &[Node]) {
        out.push(b'[');
        for (index, node) in items.iter().enumerate() {
            if index > 0 {
                out.push(b',');
            }
            node.write(out, bytes);
        }
        out.push(b']');
    }
}
