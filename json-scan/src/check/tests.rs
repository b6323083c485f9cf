use serde::de::IgnoredAny;

use super::*;

/// Whether `text` is one JSON value (spaces around it allowed), by the scan.
fn scan_accepts(text: &str) -> bool {
    checked_value_end(text.as_bytes(), 0)
        .is_some_and(|end| space(text.as_bytes(), end) == text.len())
}

/// Whether `text` is one JSON value, by `serde_json`.
fn parser_accepts(text: &str) -> bool {
    serde_json::from_str::<IgnoredAny>(text).is_ok()
}

#[test]
fn json_is_accepted_up_to_its_end() {
    for (text, end) in [
        (r#"{"a":1} x"#, 7),
        (
            r#"  [1, -2.5e+3, 0, 0.0, 1E9, true, false, null, "s", {}, []]"#,
            59,
        ),
        (r#""\"\\\/\b\f\n\r\t\u00e9\uD800" ,"#, 30),
        (r#"{ "a" : { "b" : [ { } ] } , "c" : "" }]"#, 38),
        ("-0", 2),
        ("12,", 2),
        ("\"é\"", 4),
    ] {
        assert_eq!(checked_value_end(text.as_bytes(), 0), Some(end), "{text}");
        assert!(parser_accepts(&text[..end]), "{text}");
    }
}

#[test]
fn what_a_parser_refuses_is_refused() {
    for text in [
        "",
        " ",
        "}",
        "]",
        ",",
        "x",
        "tru",
        "nul",
        "True",
        "-",
        "+1",
        ".5",
        "1.",
        "1e",
        "1e+",
        "\"",
        "\"\\q\"",
        "\"\\u12\"",
        "\"\\u12g4\"",
        "\"a\u{1}\"",
        "\"\t\"",
        "{",
        "[",
        "{\"a\"}",
        "{\"a\":}",
        "{\"a\" 1}",
        "{\"a\":1,}",
        "{,}",
        "{1:2}",
        "{\"a\":1]",
        "[1}",
        "[1,]",
        "[,1]",
        "[1 2]",
        "{\"a\":1 \"b\":2}",
        "[\"a\"\"b\"]",
    ] {
        assert_eq!(checked_value_end(text.as_bytes(), 0), None, "{text:?}");
        assert!(!parser_accepts(text), "{text:?}");
    }
    // A value followed by what cannot follow it ends where the value does; the caller
    // refuses what comes next.
    for (text, end) in [
        ("01", 1),
        ("1x", 1),
        ("truex", 4),
        ("\"a\"b", 3),
        ("{}}", 2),
    ] {
        assert_eq!(checked_value_end(text.as_bytes(), 0), Some(end), "{text}");
        assert!(!parser_accepts(text), "{text}");
    }
}

#[test]
fn depth_costs_no_recursion_and_brackets_must_match_at_every_level() {
    for depth in [1, 63, 64, 65, 128, 129, 10_000] {
        // Objects and arrays alternating, so each level's kind is read back.
        let mut text = String::new();
        for level in 0..depth {
            text.push_str(if level % 2 == 0 { "{\"k\":" } else { "[" });
        }
        text.push('1');
        for level in (0..depth).rev() {
            text.push(if level % 2 == 0 { '}' } else { ']' });
        }
        assert!(scan_accepts(&text), "depth {depth}");
        // Each closing bracket of the wrong kind is refused, at every depth.
        let closing = text.len() - depth;
        for at in [closing, closing + depth / 2, text.len() - 1] {
            let mut wrong = text.clone().into_bytes();
            wrong[at] = if wrong[at] == b'}' { b']' } else { b'}' };
            let wrong = String::from_utf8(wrong).expect("ASCII");
            assert!(!scan_accepts(&wrong), "depth {depth}, at {at}");
        }
        assert!(
            !scan_accepts(&text[..text.len() - 1]),
            "depth {depth} cut short"
        );
    }
}

/// Random edits of an object, and random short texts, are accepted exactly when
/// `serde_json` accepts them.
#[test]
fn the_scan_agrees_with_a_parser_on_random_text() {
    let pod = r#"{"kind":"Pod","metadata":{"name":"p","labels":{"a":"b\u00e9\n"}},"spec":{"containers":[{"name":"c","args":["-v=2","a\"b\\"],"ports":[{"containerPort":80}]}],"priority":-1.5e3,"ratio":0.25,"hostNetwork":false,"x":null,"e":[],"o":{}}}"#;
    let alphabet: Vec<char> = "{}[]\":,\\ \n\t0-1.e+E5truefalsnulbxu\u{1}é"
        .chars()
        .collect();
    let mut rng = fastrand::Rng::with_seed(0x3c6e_f372_fe94_f82b);
    let (mut accepted, mut refused) = (0, 0);
    for round in 0..60_000 {
        let text: String = if round % 2 == 0 {
            let mut edit: Vec<char> = pod.chars().collect();
            for _ in 0..1 + rng.usize(..3) {
                let at = rng.usize(..=edit.len());
                let char = alphabet[rng.usize(..alphabet.len())];
                match rng.usize(..3) {
                    0 if at < edit.len() => edit[at] = char,
                    1 if at < edit.len() => drop(edit.remove(at)),
                    _ => edit.insert(at, char),
                }
            }
            edit.into_iter().collect()
        } else {
            (0..rng.usize(1..12))
                .map(|_| alphabet[rng.usize(..alphabet.len())])
                .collect()
        };
        let parser = parser_accepts(&text);
        assert_eq!(scan_accepts(&text), parser, "{text:?}");
        if parser { accepted += 1 } else { refused += 1 }
    }
    assert!(
        accepted > 5_000 && refused > 5_000,
        "{accepted} accepted, {refused} refused"
    );
}

#[test]
fn a_check_pauses_after_the_commas_asked_for_and_tells_what_it_reads_next() {
    let text = br#"{"a":[1,{"b":2,"c":[3]}],"d":4} "#;
    // Every comma from the start, and what is open after it.
    let mut check = Check::value(0);
    let mut pauses = Vec::new();
    while let Some(Paused::Comma) = check.advance(text, 0) {
        pauses.push((check.at(), check.depth()));
    }
    assert_eq!(pauses, [(8, 2), (15, 3), (25, 1)]);
    assert_eq!(check.at(), 31);
    // A member's value pauses after its object's commas whatever it is asked.
    let mut member = Check::member_value(5);
    assert_eq!(member.advance(text, usize::MAX), Some(Paused::Comma));
    assert_eq!(member.at(), 25);
    assert_eq!(member.advance(text, usize::MAX), Some(Paused::Closed));
    assert_eq!(member.at(), 31);
    // After the same comma of two texts that differ before it, the checks read alike when
    // the same objects and arrays are open, and not when another kind is.
    let paused_after = |text: &[u8], comma: usize| {
        let mut check = Check::value(0);
        while check.at() <= comma {
            assert_eq!(check.advance(text, comma), Some(Paused::Comma));
        }
        check
    };
    let one = paused_after(br#"[{"a":[0,1]}]"#, 8);
    assert!(one.reads_alike(&paused_after(br#"[{"a":[7,1]}]"#, 8)));
    assert!(one.reads_alike(&paused_after(br#"[{"bb":[0,1]}]"#, 9)));
    assert!(!one.reads_alike(&paused_after(br#"[{"a":{"x":0,1]}]"#, 12)));
    assert!(!one.reads_alike(&paused_after(br#"[{"a":[[0,1]}]"#, 9)));
}
