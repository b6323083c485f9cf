//! The filter directory as files: `NAME.wasm` and optional `NAME.toml`, read whole and
//! hashed. Dotfiles (including a ConfigMap mount's `..data` machinery) and editor or
//! download temp files are ignored; symlinks are followed.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use crate::filter::error::FilterError;
use crate::filter::runtime::code_store::sha256;

/// Largest `.wasm` read; beyond it the file is refused (filters are tens to hundreds of KiB).
const MAX_WASM_BYTES: u64 = 64 << 20;
/// Largest `.toml` read.
const MAX_TOML_BYTES: u64 = 1 << 20;

/// Name endings of files being written by editors, downloads and copy tools.
const TEMP_SUFFIXES: [&str; 8] = [
    "~",
    ".tmp",
    ".swp",
    ".swx",
    ".part",
    ".partial",
    ".crdownload",
    ".bak",
];

/// One filter's files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FilterFiles {
    /// The component.
    pub(crate) wasm: std::sync::Arc<Vec<u8>>,
    /// SHA-256 of the component, hex.
    pub(crate) hash: String,
    /// The text of `NAME.toml`, if any.
    pub(crate) toml: Option<String>,
}

/// Whether a directory entry is not a filter file.
pub(crate) fn ignored(file_name: &str) -> bool {
    file_name.starts_with('.')
        || file_name.starts_with('#')
        || TEMP_SUFFIXES.iter().any(|s| file_name.ends_with(s))
}

/// Reads the filters in `dir`, by name.
pub(crate) fn scan(dir: &Path) -> Result<BTreeMap<String, FilterFiles>, FilterError> {
    let read_error = |path: &Path| {
        let path = path.to_owned();
        move |source| FilterError::Read { path, source }
    };
    let mut wasm: BTreeMap<String, PathBuf> = BTreeMap::new();
    let mut toml: BTreeMap<String, PathBuf> = BTreeMap::new();
    for entry in fs::read_dir(dir).map_err(read_error(dir))? {
        let entry = entry.map_err(read_error(dir))?;
        let Some(file_name) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        if ignored(&file_name) {
            continue;
        }
        let path = entry.path();
        // `metadata` follows symlinks: a ConfigMap's files are links into `..data/`.
        match fs::metadata(&path) {
            Ok(meta) if meta.is_file() => {}
            _ => continue,
        }
        if let Some(name) = file_name.strip_suffix(".wasm") {
            wasm.insert(name.to_owned(), path);
        } else if let Some(name) = file_name.strip_suffix(".toml") {
            toml.insert(name.to_owned(), path);
        }
    }
    let mut filters = BTreeMap::new();
    for (name, path) in wasm {
        let bytes = read_capped(&path, MAX_WASM_BYTES)?;
        let toml = match toml.get(&name) {
            Some(path) => {
                let bytes = read_capped(path, MAX_TOML_BYTES)?;
                Some(String::from_utf8(bytes).map_err(|_| FilterError::Options {
                    name: name.clone(),
                    message: "NAME.toml is not UTF-8".into(),
                })?)
            }
            None => None,
        };
        let hash = sha256(&bytes);
        filters.insert(
            name,
            FilterFiles {
                wasm: std::sync::Arc::new(bytes),
                hash,
                toml,
            },
        );
    }
    Ok(filters)
}

fn read_capped(path: &Path, cap: u64) -> Result<Vec<u8>, FilterError> {
    let read_error = |source| FilterError::Read {
        path: path.to_owned(),
        source,
    };
    let len = fs::metadata(path).map_err(read_error)?.len();
    if len > cap {
        return Err(FilterError::Read {
            path: path.to_owned(),
            source: std::io::Error::other(format!("{len} bytes is over the limit of {cap}")),
        });
    }
    fs::read(path).map_err(read_error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_and_hidden_files_are_ignored() {
        for name in [
            ".x.wasm",
            "..data",
            "a.wasm~",
            "a.wasm.tmp",
            ".a.wasm.swp",
            "a.wasm.part",
            "#a.wasm#",
        ] {
            assert!(ignored(name), "{name}");
        }
        for name in ["a.wasm", "a.toml", "node-stamp.wasm"] {
            assert!(!ignored(name), "{name}");
        }
    }

    #[test]
    fn scan_pairs_wasm_and_toml_and_follows_symlinks() {
        let temp = tempfile::Builder::new()
            .prefix("edgegate-scan-")
            .tempdir()
            .unwrap();
        let dir = temp.path();
        let data = dir.join("..2026_01_01");
        fs::create_dir_all(&data).unwrap();
        fs::write(data.join("a.wasm"), b"A").unwrap();
        std::os::unix::fs::symlink("..2026_01_01", dir.join("..data")).unwrap();
        std::os::unix::fs::symlink("..data/a.wasm", dir.join("a.wasm")).unwrap();
        fs::write(dir.join("a.toml"), "priority = 1").unwrap();
        fs::write(dir.join("b.wasm"), b"B").unwrap();
        fs::write(dir.join("b.wasm.tmp"), b"junk").unwrap();
        fs::write(dir.join("orphan.toml"), "").unwrap();
        let found = scan(dir).unwrap();
        assert_eq!(found.keys().collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(*found["a"].wasm, b"A");
        assert_eq!(found["a"].toml.as_deref(), Some("priority = 1"));
        assert_eq!(found["b"].toml, None);
        assert_eq!(found["b"].hash, sha256(b"B"));
    }
}
