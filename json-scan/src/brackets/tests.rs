//! The block scan against the byte scan, on text chosen to trip a block-at-a-time scan.

use super::*;
use crate::block::BLOCK;

/// The scan one byte at a time over the whole input: what the block scan must agree with.
fn reference(body: &[u8]) -> (Option<usize>, Brackets) {
    let mut brackets = Brackets::opened();
    (brackets.close_bytes(body, 0), brackets)
}

/// The block scan over `body` pushed in pieces of `chunk` bytes.
fn in_chunks(body: &[u8], chunk: usize) -> (Option<usize>, Brackets) {
    let mut brackets = Brackets::opened();
    let mut from = 0;
    for end in (chunk..body.len()).step_by(chunk).chain([body.len()]) {
        if let Some(at) = brackets.close(&body[..end], from) {
            return (Some(at), brackets);
        }
        from = end;
    }
    (None, brackets)
}

/// The block scan over `body` in pieces of each of `chunks` bytes finds what the byte scan
/// finds, and ends in the same state when the value does not close.
fn agrees_in_chunks(body: &[u8], chunks: &[usize]) {
    let want = reference(body);
    for &chunk in chunks {
        let got = in_chunks(body, chunk);
        let text = String::from_utf8_lossy(body);
        assert_eq!(got.0, want.0, "{text:?} chunk {chunk}");
        if want.0.is_none() {
            assert_eq!(got.1, want.1, "{text:?}");
        }
    }
}

#[test]
fn agrees_with_the_byte_scan_on_random_bodies_in_any_chunks() {
    let alphabet = b"{}[]\"\\a :,";
    let mut rng = fastrand::Rng::with_seed(0x9e37_79b9_7f4a_7c15);
    for _ in 0..20_000 {
        let len = rng.usize(..160);
        let body: Vec<u8> = (0..len)
            .map(|_| alphabet[rng.usize(..alphabet.len())])
            .collect();
        agrees_in_chunks(&body, &[1, 3, 7, 8, 9, 16, 31, 32, 33, 48, 100, 160]);
    }
}

#[test]
fn agrees_with_the_byte_scan_on_random_json_with_escapes_in_strings() {
    let mut rng = fastrand::Rng::with_seed(0x2545_f491_4f6c_dd1d);
    for _ in 0..20_000 {
        let mut body = Vec::new();
        while body.len() < rng.usize(..200) {
            match rng.u8(..6) {
                0 => body.push(b"{}[]:,a "[rng.usize(..8)]),
                _ => {
                    // A string whose text holds quotes, backslashes and brackets, escaped.
                    body.push(b'"');
                    for _ in 0..rng.usize(..12) {
                        match b"a{}[]\\\"n"[rng.usize(..8)] {
                            b'n' => body.extend_from_slice(b"\\n"),
                            byte @ (b'\\' | b'"') => body.extend_from_slice(&[b'\\', byte]),
                            byte => body.push(byte),
                        }
                    }
                    body.push(b'"');
                }
            }
        }
        agrees_in_chunks(&body, &[1, 5, 31, 32, 33, 64, 200]);
    }
}

#[test]
fn skips_brackets_in_strings_and_escaped_quotes() {
    let body = br#""a}]\"}" : {"k":[1,"]"]}, "x\\" } tail"#;
    let close = body.iter().rposition(|&b| b == b'}');
    for chunk in 1..=body.len() {
        assert_eq!(in_chunks(body, chunk).0, close, "chunk {chunk}");
    }
    // Every byte value in every byte of a block, inside and outside a string.
    for byte in 0..=255u8 {
        for lane in 0..BLOCK {
            for prefix in [&b""[..], b"\""] {
                let mut body = prefix.to_vec();
                body.extend_from_slice(&[b'a'; BLOCK]);
                let at = prefix.len() + lane;
                body[at] = byte;
                body.push(b'"');
                body.extend_from_slice(&[b'}'; BLOCK]);
                body.extend_from_slice(&[b'a'; 2 * BLOCK]);
                assert_eq!(in_chunks(&body, 256), reference(&body), "{byte:#x} at {at}");
            }
        }
    }
}

#[test]
fn a_value_cut_short_stays_open() {
    let mut brackets = Brackets::opened();
    assert_eq!(brackets.close(br#"{"a":"}"#, 1), None);
    assert!(brackets.within());
    assert_eq!(brackets.close(br#"{"a":"}"}}"#, 7), Some(8));
    assert!(!brackets.within());
}
