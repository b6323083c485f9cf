//! `edgegate filter test`: a filter run on one object or a list, and what the client would
//! receive.

use bytes::Bytes;
use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};
use serde_json::value::RawValue;

use super::harness::{TestRequest, failed, kind_of, open, parse_verb};
use super::input::Input;
use crate::filter::error::FilterError;
use crate::stream::{Transform, Verdict};

/// Runs a component on one object or a `…List` (JSON in `input`) and describes the result.
/// The filter is given each object as written, and the output keeps the order of the fields
/// of what it was given and of what it returned.
pub fn test(request: &TestRequest, input: &[u8]) -> Result<String, FilterError> {
    let verb = parse_verb(&request.verb)?;
    let input = Input::read(input)?;
    let mut session = open(request, verb)?;
    let described = match &input {
        Input::Object(object) => {
            let verdict = session
                .apply(&Bytes::copy_from_slice(object.get().as_bytes()))
                .map_err(failed)?;
            let shown = Shown::of(&verdict, object);
            serde_json::to_vec(&Described::Object {
                decision: kind_of(&verdict),
                output: shown,
            })
        }
        Input::List { fields, items } => {
            let objects: Vec<Bytes> = items
                .iter()
                .map(|item| Bytes::copy_from_slice(item.get().as_bytes()))
                .collect();
            let verdicts = session.apply_batch(&objects).map_err(failed)?;
            let kept = verdicts
                .iter()
                .zip(items)
                .filter_map(|(verdict, item)| Shown::of(verdict, item))
                .collect();
            serde_json::to_vec(&Described::List {
                decisions: verdicts.iter().map(kind_of).collect(),
                output: ListOutput { fields, kept },
            })
        }
    };
    // Serialising strings and JSON already checked cannot fail.
    let described = described.unwrap_or_default();
    Ok(crate::json::indent(&described).unwrap_or_default())
}

/// What `edgegate filter test` prints.
#[derive(Serialize)]
#[serde(untagged)]
enum Described<'a> {
    Object {
        decision: &'static str,
        output: Option<Shown<'a>>,
    },
    List {
        decisions: Vec<&'static str>,
        output: ListOutput<'a>,
    },
}

/// What the client would receive for one object: its bytes, or a replacement's; a
/// replacement that is not JSON is shown as a string.
#[derive(Serialize)]
#[serde(untagged)]
enum Shown<'a> {
    Json(&'a RawValue),
    Text(String),
}

impl<'a> Shown<'a> {
    /// The object shown for `verdict` on `original`; none when it is dropped.
    fn of(verdict: &'a Verdict, original: &'a RawValue) -> Option<Shown<'a>> {
        match verdict {
            Verdict::Keep => Some(Shown::Json(original)),
            Verdict::Drop => None,
            Verdict::Replace(bytes) => Some(match serde_json::from_slice(bytes) {
                Ok(json) => Shown::Json(json),
                Err(_) => Shown::Text(String::from_utf8_lossy(bytes).into_owned()),
            }),
        }
    }
}

/// The list the client would receive: its fields in order, `items` the objects kept.
struct ListOutput<'a> {
    fields: &'a [(String, &'a RawValue)],
    kept: Vec<Shown<'a>>,
}

impl Serialize for ListOutput<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.fields.len()))?;
        for (key, value) in self.fields {
            if key == "items" {
                map.serialize_entry(key, &self.kept)?;
            } else {
                map.serialize_entry(key, value)?;
            }
        }
        map.end()
    }
}
