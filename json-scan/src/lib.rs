//! Scanning JSON text 32 bytes at a time: where a string ends ([`string_end`]) and which
//! bracket closes an object or array ([`Brackets`]), escapes included. The gateway's framers
//! cut list items and watch events out of a response with it; the filter SDK splits an
//! object into its fields with it, inside the filter's sandbox.
//!
//! Each block's quotes, brackets and backslashes come out as `u32` bit masks: from SIMD
//! compares where the target has them (SSE2 on x86-64, NEON on aarch64, simd128 on wasm32
//! when the filter is built with `-C target-feature=+simd128`), else from eight-byte words.
//! The bytes that backslashes escape are found from the backslash mask, so escaped strings
//! (`last-applied-configuration`, a ConfigMap's file) are read as fast as plain ones. The
//! scans find where values end; they do not check that the text is JSON, except
//! [`checked_value_end`] and [`Check`], which refuse what a JSON parser refuses.

mod block;
mod brackets;
mod check;
mod cursor;
mod fields;
mod string;

pub use brackets::Brackets;
pub use check::{Check, Paused, checked_value_end};
pub use cursor::{Cursor, Key};
pub use fields::{KeptFields, Peek, field_range, field_ranges, first_at, kept_fields};
pub use string::string_end;
