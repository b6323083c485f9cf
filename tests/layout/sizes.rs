//! Sizes and boundaries, checked: no product file over 450 lines (its inline test module
//! aside), no function over 120 lines, the request path's shape (one door, the plan built
//! once), and the store's write half named only where it is implemented and by its writer.

use std::fs;
use std::path::{Path, PathBuf};

/// Most lines of a product file, its inline `#[cfg(test)] mod … { }` left out.
const FILE_LIMIT: usize = 450;
/// Most lines of a function, its signature and closing brace counted.
const FUNCTION_LIMIT: usize = 120;
/// The product's sources: what the gateway, the SDK and the filters ship.
const PRODUCT: &[&str] = &["gateway/src", "filters-sdk/src", "json-scan/src", "filters"];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The `.rs` files under `dirs` that are not test files (`tests.rs`, under `tests/`).
fn product_files(dirs: &[&str]) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut pending: Vec<PathBuf> = dirs.iter().map(|dir| workspace().join(dir)).collect();
    while let Some(dir) = pending.pop() {
        for entry in fs::read_dir(&dir).expect("read a folder") {
            let path = entry.expect("a folder entry").path();
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            if path.is_dir() {
                if name != "tests" && name != "target" {
                    pending.push(path);
                }
            } else if name.ends_with(".rs") && name != "tests.rs" {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// The lines of `source` outside its `#[cfg(test)] mod name { … }` blocks.
fn product_lines(source: &str) -> Vec<&str> {
    let lines: Vec<&str> = source.lines().collect();
    let mut kept = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let opens_test_module = lines[i].trim() == "#[cfg(test)]"
            && lines.get(i + 1).is_some_and(|next| {
                let next = next.trim_start();
                next.starts_with("mod ") && next.trim_end().ends_with('{')
            });
        if opens_test_module {
            let mut depth = 0i64;
            i += 1;
            while i < lines.len() {
                depth += braces(lines[i]);
                i += 1;
                if depth <= 0 {
                    break;
                }
            }
            continue;
        }
        kept.push(lines[i]);
        i += 1;
    }
    kept
}

/// `{` less `}` in `line`, outside strings, characters and comments.
fn braces(line: &str) -> i64 {
    let mut depth = 0;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'/') => break,
            '"' => {
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => {
                            chars.next();
                        }
                        '"' => break,
                        _ => {}
                    }
                }
            }
            '\'' => {
                // A character literal ('{', '\''), or a lifetime: skip a literal whole.
                let mut ahead = chars.clone();
                let literal = match ahead.next() {
                    Some('\\') => ahead.nth(1) == Some('\''),
                    Some(_) => ahead.next() == Some('\''),
                    None => false,
                };
                if literal {
                    while chars.next().is_some_and(|c| c != '\'') {}
                    if chars.peek() == Some(&'\'') {
                        chars.next();
                    }
                }
            }
            '{' => depth += 1,
            '}' => depth -= 1,
            _ => {}
        }
    }
    depth
}

/// Each function of `lines` whose body starts on its line: its name and its length.
fn functions(lines: &[&str]) -> Vec<(String, usize)> {
    let mut found = Vec::new();
    for (start, line) in lines.iter().enumerate() {
        let Some(name) = function_name(line) else {
            continue;
        };
        let mut depth = 0;
        let mut opened = false;
        for (end, body) in lines.iter().enumerate().skip(start) {
            let code = body.split("//").next().unwrap_or_default();
            if !opened && code.contains(';') && !code.contains('{') {
                break;
            }
            depth += braces(body);
            opened |= code.contains('{');
            if opened && depth <= 0 {
                found.push((name.clone(), end - start + 1));
                break;
            }
        }
    }
    found
}

/// The name of the function `line` declares, if it declares one.
fn function_name(line: &str) -> Option<String> {
    let mut words = line.split_whitespace().peekable();
    while let Some(word) = words.next() {
        let qualifier = word.starts_with("pub")
            || ["const", "async", "unsafe", "extern", "\"C\"", "default"].contains(&word);
        if word == "fn" {
            let name: String = words
                .next()?
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            return (!name.is_empty()).then_some(name);
        }
        if !qualifier {
            return None;
        }
    }
    None
}

#[test]
fn no_product_file_is_over_450_lines() {
    let long: Vec<String> = product_files(PRODUCT)
        .iter()
        .filter_map(|path| {
            let source = fs::read_to_string(path).expect("read");
            let lines = product_lines(&source).len();
            (lines > FILE_LIMIT).then(|| format!("{}: {lines}", path.display()))
        })
        .collect();
    assert!(
        long.is_empty(),
        "product files over {FILE_LIMIT} lines (inline tests aside):\n{}",
        long.join("\n")
    );
}

#[test]
fn no_function_is_over_120_lines() {
    let mut long = Vec::new();
    for path in product_files(PRODUCT) {
        let source = fs::read_to_string(&path).expect("read");
        for (name, lines) in functions(&product_lines(&source)) {
            if lines > FUNCTION_LIMIT {
                long.push(format!("{}: {name}: {lines}", path.display()));
            }
        }
    }
    assert!(
        long.is_empty(),
        "functions over {FUNCTION_LIMIT} lines:\n{}",
        long.join("\n")
    );
}

#[test]
fn a_request_passes_one_door_and_its_plan_is_made_once() {
    let gateway = product_files(&["gateway/src"]);
    let sources: Vec<(PathBuf, String)> = gateway
        .into_iter()
        .map(|path| {
            let source = fs::read_to_string(&path).expect("read");
            (path, product_lines(&source).join("\n"))
        })
        .collect();
    let plans: Vec<String> = sources
        .iter()
        .filter(|(_, source)| source.contains("Plan::of("))
        .map(|(path, _)| path.display().to_string())
        .collect();
    assert_eq!(plans.len(), 1, "Plan::of is built at: {plans:?}");
    assert!(
        plans[0].ends_with("server/proxy.rs"),
        "the plan is built at the door: {plans:?}"
    );
    let forwards: Vec<String> = sources
        .iter()
        .filter(|(path, source)| {
            path.to_string_lossy().contains("/server")
                && functions(&source.lines().collect::<Vec<_>>())
                    .iter()
                    .any(|(name, _)| name == "forward")
        })
        .map(|(path, _)| path.display().to_string())
        .collect();
    assert!(
        forwards.is_empty(),
        "the route table answers requests, not a forward function: {forwards:?}"
    );
}

#[test]
fn only_the_cache_writer_holds_the_stores_write_half() {
    // Where the write half is defined, implemented, re-exported, handed to the writer by
    // the facade that starts it, and used by the writer; the fuzz fixture seeds its store.
    let allowed = [
        "cache.rs",
        "cache/store.rs",
        "cache/redb_store.rs",
        "cache/guard.rs",
        "cache/hooked.rs",
        "cache/facade.rs",
        "cache/writer.rs",
        "server/fuzz_hub.rs",
    ];
    let naming: Vec<String> = product_files(&["gateway/src"])
        .iter()
        .filter(|path| {
            let source = fs::read_to_string(path).expect("read");
            product_lines(&source)
                .iter()
                .any(|line| line.contains("StoreWriter"))
        })
        .map(|path| path.display().to_string())
        .filter(|path| !allowed.iter().any(|allowed| path.ends_with(allowed)))
        .collect();
    assert!(
        naming.is_empty(),
        "only the cache writer writes the store; these name its write half: {naming:?}"
    );
}

#[test]
fn the_configuration_is_plain_data() {
    // What the flags say, checked: no live handle, no I/O, no task. Credentials, TLS and
    // renewals are built from it by the server's identity.
    let source = fs::read_to_string(workspace().join("gateway/src/config.rs")).expect("read");
    let live = [
        "async fn",
        ".await",
        "Arc<",
        "rustls",
        "Renewal",
        "Credentials",
        "fn()",
        "Box<dyn",
        "tokio::",
        "std::fs",
        "File::",
    ];
    let found: Vec<&str> = product_lines(&source)
        .into_iter()
        .filter(|line| live.iter().any(|word| line.contains(word)))
        .collect();
    assert!(
        found.is_empty(),
        "config.rs holds live objects or does I/O: {found:?}"
    );
}

#[test]
fn the_counts_read_what_they_mean() {
    let source = "/// x\npub(crate) async fn long(a: u8) -> u8 {\n    let s = \"{\";\n    let c = '}';\n    if a > 0 {\n        a\n    } else {\n        0\n    }\n}\nfn short();\n#[cfg(test)]\nmod tests {\n    fn t() {}\n}\n";
    let lines = product_lines(source);
    assert_eq!(lines.len(), 11, "the test module left out: {lines:?}");
    assert_eq!(functions(&lines), [("long".to_owned(), 9)]);
}
