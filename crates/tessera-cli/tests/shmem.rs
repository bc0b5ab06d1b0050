//! OpenSHMEM for C: `tessera shmem install`, then programs built with the installed
//! `oshcc`/`oshc++` and started with `oshrun`, as a user would. The header compiles
//! cleanly as C99, C11 and C++; the library exports every function the header declares;
//! every typed family passes its checks at 1 to 4 PEs. Each run is bounded in time.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

/// Install into a fresh directory (once per test binary would be faster; each test keeps
/// its own so they can run in parallel).
fn install(name: &str) -> PathBuf {
    let prefix = common::temp_dir(&format!("shmem-{name}"));
    let f = common::run(
        common::tessera()
            .args(["shmem", "install", "--prefix"])
            .arg(&prefix),
        60,
    );
    assert!(f.status.success(), "install: {}", f.stderr);
    prefix
}

fn compile(prefix: &Path, wrapper: &str, source: &Path, out: &Path, flags: &[&str]) {
    let f = common::run(
        Command::new(prefix.join("bin").join(wrapper))
            .args(flags)
            .arg(source)
            .arg("-o")
            .arg(out),
        120,
    );
    assert!(
        f.status.success(),
        "{wrapper} {}: {}",
        source.display(),
        f.stderr
    );
}

#[test]
fn the_header_compiles_cleanly_in_every_mode() {
    let prefix = install("header");
    let dir = prefix.join("src");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("h.c"), "#include <shmem.h>\n#include <mpp/shmem.h>\n#include <shmemx.h>\nint main(void) { return SHMEM_MAJOR_VERSION - 1; }\n").unwrap();
    std::fs::write(
        dir.join("h.cpp"),
        "#include <shmem.h>\nint main() { return SHMEM_MINOR_VERSION - 5; }\n",
    )
    .unwrap();
    let include = format!("-I{}", prefix.join("include").display());
    for (compiler, file, flags) in [
        (
            "cc",
            "h.c",
            vec!["-std=c99", "-Wall", "-Wextra", "-Wundef", "-Werror"],
        ),
        (
            "cc",
            "h.c",
            vec!["-std=c11", "-pedantic", "-Wall", "-Werror"],
        ),
        (
            "c++",
            "h.cpp",
            vec!["-std=c++11", "-pedantic", "-Wall", "-Wextra", "-Werror"],
        ),
    ] {
        let f = common::run(
            Command::new(compiler)
                .args(&flags)
                .arg(&include)
                .arg("-c")
                .arg(dir.join(file))
                .arg("-o")
                .arg(dir.join("h.o")),
            60,
        );
        assert!(f.status.success(), "{compiler} {flags:?}: {}", f.stderr);
    }
}

#[test]
fn the_library_exports_every_function_the_header_declares() {
    let prefix = install("symbols");
    let f = common::run(
        Command::new("nm")
            .args(["-D", "--defined-only"])
            .arg(prefix.join("lib/libsma.so")),
        60,
    );
    assert!(f.status.success(), "nm: {}", f.stderr);
    let exported: std::collections::HashSet<&str> = f
        .stdout
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2))
        .collect();
    let missing: Vec<&str> = sma::header::SYMBOLS
        .lines()
        .filter(|s| !exported.contains(s))
        .collect();
    assert!(missing.is_empty(), "declared but not exported: {missing:?}");
    assert!(sma::header::SYMBOLS.lines().count() > 500);
}

#[test]
fn every_typed_family_at_one_to_four_pes() {
    let prefix = install("typed");
    let src = prefix.join("typed_test.c");
    std::fs::write(&src, sma::header::TYPED_TEST_C).unwrap();
    let exe = prefix.join("typed");
    compile(
        &prefix,
        "oshcc",
        &src,
        &exe,
        &["-std=c99", "-O1", "-Wall", "-Wextra", "-Werror"],
    );
    for pes in 1..=4 {
        let f = common::run(
            Command::new(prefix.join("bin/oshrun"))
                .args(["-np", &pes.to_string()])
                .arg(&exe),
            120,
        );
        assert!(f.status.success(), "{pes} PEs: {}\n{}", f.stdout, f.stderr);
        assert_eq!(f.stdout.trim(), "typed: OK", "{pes} PEs: {}", f.stderr);
    }
}
