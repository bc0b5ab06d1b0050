//! The layering of docs/DESIGN.md, checked on the sources: no module imports a layer
//! above its own (`use crate::…` or a `crate::…` path in code; comments are not read).

use std::path::{Path, PathBuf};

/// Each layer's files and the layers it must never name.
const RULES: &[(&str, &[&str])] = &[
    (
        "src/config.rs",
        &["job", "model", "core", "conduit", "protocol", "board"],
    ),
    (
        "src/board.rs",
        &["job", "model", "core", "conduit", "protocol", "config"],
    ),
    ("src/protocol", &["job", "model", "core", "conduit"]),
    ("src/conduit", &["job", "model", "core"]),
    ("src/core", &["job", "model"]),
    ("src/job", &["model"]),
    ("src/model", &["job"]),
];

fn rust_files(path: &Path) -> Vec<PathBuf> {
    if path.is_file() {
        return vec![path.to_path_buf()];
    }
    let mut files = Vec::new();
    for entry in std::fs::read_dir(path).expect("a layer's directory") {
        files.extend(rust_files(&entry.expect("a directory entry").path()));
    }
    files.retain(|f| f.extension().is_some_and(|e| e == "rs"));
    files
}

/// Every `crate::<layer>` named in code (not in comments) of `text`, with its line.
fn named_layers(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            let after = &rest[at + "crate::".len()..];
            let name: String = after
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            found.push((number + 1, name));
            rest = after;
        }
    }
    found
}

#[test]
fn no_layer_imports_one_above_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut wrong = Vec::new();
    let mut files_read = 0;
    for (layer, forbidden) in RULES {
        for file in rust_files(&root.join(layer)) {
            files_read += 1;
            let text = std::fs::read_to_string(&file).expect("a source file");
            for (line, name) in named_layers(&text) {
                if forbidden.contains(&name.as_str()) {
                    wrong.push(format!("{}:{line} names crate::{name}", file.display()));
                }
            }
        }
    }
    assert!(
        files_read > 40,
        "only {files_read} files read: the layout moved"
    );
    assert!(
        wrong.is_empty(),
        "imports against the layers:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_checker_sees_an_upward_import() {
    let text = "use crate::job::Job; // crate::model in a comment\nlet x = crate::model::Team;";
    let names: Vec<String> = named_layers(text).into_iter().map(|(_, n)| n).collect();
    assert_eq!(names, ["job", "model"]);
}
