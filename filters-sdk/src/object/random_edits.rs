//! Random edits and removals by path of random objects, spaced as any writer may space them: what the
//! object writes (edited parts encoded, the rest copied from its bytes) must parse to
//! the value it answers with, and read back as the same object.

use serde_json::Value;

use super::*;

/// Keys that repeat, one of them escaped in the text, so that edits meet duplicates.
const KEYS: [&str; 5] = ["a", "b", "type", "t\\u0079pe", "ports"];

/// Spaces, or none, as a writer may put them between tokens.
fn space(rng: &mut fastrand::Rng, out: &mut String) {
    out.push_str([" ", "", "", "\n  ", "\t"][rng.usize(..5)]);
}

/// A random JSON value of at most `depth` levels of objects and arrays.
fn value(rng: &mut fastrand::Rng, depth: usize, out: &mut String) {
    match if depth == 0 { rng.u8(..3) } else { rng.u8(..5) } {
        0 => out.push_str(&rng.u16(..1000).to_string()),
        1 => out.push_str(["\"x\"", "\"a,b\"", "\"q\\\"}\"", "true", "null"][rng.usize(..5)]),
        2 => out.push_str("1.50"),
        3 => {
            out.push('{');
            for index in 0..rng.usize(..4) {
                if index > 0 {
                    out.push(',');
                }
                space(rng, out);
                out.push('"');
                out.push_str(KEYS[rng.usize(..KEYS.len())]);
                out.push('"');
                space(rng, out);
                out.push(':');
                space(rng, out);
                value(rng, depth - 1, out);
                space(rng, out);
            }
            out.push('}');
        }
        _ => {
            out.push('[');
            for index in 0..rng.usize(..5) {
                if index > 0 {
                    out.push(',');
                }
                space(rng, out);
                value(rng, depth - 1, out);
                space(rng, out);
            }
            out.push(']');
        }
    }
}

/// A random path below `spec`: keys and item numbers.
fn path(rng: &mut fastrand::Rng) -> String {
    let mut path = String::from("spec");
    for _ in 0..rng.usize(1..4) {
        path.push('.');
        match rng.u8(..3) {
            0 => path.push_str(&rng.usize(..3).to_string()),
            _ => path.push_str(["a", "b", "type", "ports"][rng.usize(..4)]),
        }
    }
    path
}

#[test]
fn what_an_edited_object_writes_parses_to_its_value() {
    let mut rng = fastrand::Rng::with_seed(0x510e_527f_ade6_82d1);
    for _ in 0..5_000 {
        let mut text = String::from(r#"{"metadata": {"name": "o"}, "spec":"#);
        space(&mut rng, &mut text);
        value(&mut rng, 3, &mut text);
        // A top-level key escaped, or not: written back as it came, or encoded.
        text.push_str(
            [r#", "status": {"a": [1, 2]} }"#, r#", "st\u0061tus": [] }"#][rng.usize(..2)],
        );
        let mut object = Object::from_slice(text.as_bytes()).unwrap();
        for _ in 0..rng.usize(1..4) {
            let path = path(&mut rng);
            let new = Value::from(rng.u16(..1000));
            match rng.u8(..4) {
                0 => {
                    object.set(&path, new);
                }
                1 => {
                    object.update(&path, new);
                }
                2 => {
                    if object.remove(&path).is_some() {
                        assert_eq!(object.get(&path), None, "{text}: {path} removed");
                    }
                }
                _ => {
                    if let Some(value) = object.get_mut(&path) {
                        *value = new;
                    }
                }
            }
        }
        let written = object.to_vec();
        let parsed: Value = serde_json::from_slice(&written)
            .unwrap_or_else(|e| panic!("{e}: {text} wrote {}", String::from_utf8_lossy(&written)));
        assert_eq!(&parsed, object.value(), "{text}");
        assert_eq!(Object::from_slice(&written).unwrap(), object, "{text}");
    }
}
