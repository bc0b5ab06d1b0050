//! `tessera config`: every setting with its value and where it came from, refusals named
//! with exit status 2, JSON for scripts, and the README's table generated from the one
//! table of variables.

mod common;

use std::process::Command;

/// `tessera config ARGS` in an environment holding only `vars` of Tessera's.
fn config(args: &[&str], vars: &[(&str, &str)]) -> common::Finished {
    let mut cmd: Command = common::tessera();
    cmd.arg("config").args(args);
    for name in tessera::config::names_set() {
        if name.to_string_lossy().starts_with("TESSERA_") {
            cmd.env_remove(name);
        }
    }
    cmd.envs(vars.iter().copied());
    common::run(&mut cmd, 30)
}

/// The line `tessera config` prints for `name`.
fn line<'a>(out: &'a str, name: &str) -> &'a str {
    out.lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("no line for {name} in:\n{out}"))
}

#[test]
fn every_setting_shows_its_value_and_where_it_came_from() {
    let f = config(&[], &[]);
    assert!(f.status.success(), "{}", f.stderr);
    for var in tessera::config::VARIABLES {
        line(&f.stdout, var.name);
    }
    assert!(line(&f.stdout, "TESSERA_SEGMENT").ends_with("2G  (default)"));
    assert!(line(&f.stdout, "TESSERA_RANK").contains("set by the launcher"));

    let f = config(
        &[],
        &[
            ("TESSERA_SEGMENT", "512M"),
            ("TESSERA_COLL_ALLREDUCE", "ring"),
            ("TESSERA_WAIT_TIMEOUT", ""),
        ],
    );
    assert!(f.status.success(), "{}", f.stderr);
    assert!(line(&f.stdout, "TESSERA_SEGMENT").ends_with("512M  (environment)"));
    assert!(line(&f.stdout, "TESSERA_COLL_ALLREDUCE").ends_with("ring  (environment)"));
    // Empty is unset.
    assert!(line(&f.stdout, "TESSERA_WAIT_TIMEOUT").ends_with("(default)"));
}

#[test]
fn refused_values_and_names_are_listed_with_status_2() {
    let f = config(
        &[],
        &[
            ("TESSERA_SEGMENT", "12Q"),
            ("TESSERA_SIMD", "avx9"),
            ("TESSERA_COLL_ALLREDUCE", "bogus"),
            ("TESSERA_CHEK", "1"),
        ],
    );
    assert_eq!(f.status.code(), Some(2), "{}\n{}", f.stdout, f.stderr);
    for part in [
        "refused: environment variable TESSERA_SEGMENT=\"12Q\" is invalid",
        "TESSERA_SIMD=\"avx9\" is invalid: one of avx512, avx2, scalar, native",
        "TESSERA_CHEK is not one Tessera knows; did you mean TESSERA_CHECK?",
    ] {
        assert!(
            f.stdout.contains(part),
            "expected {part:?} in:\n{}",
            f.stdout
        );
    }
    // The team layer's check runs too once the others pass.
    let f = config(&[], &[("TESSERA_COLL_ALLREDUCE", "bogus")]);
    assert_eq!(f.status.code(), Some(2), "{}", f.stdout);
    assert!(
        f.stdout.contains("unknown collective algorithm \"bogus\""),
        "{}",
        f.stdout
    );
}

#[test]
fn json_for_scripts_and_markdown_for_the_readme() {
    let f = config(&["--json"], &[("TESSERA_BOOT_TIMEOUT", "0")]);
    assert_eq!(f.status.code(), Some(2), "{}", f.stderr);
    let doc: serde_json::Value = serde_json::from_str(&f.stdout).unwrap();
    let rows = doc["settings"].as_array().unwrap();
    assert_eq!(rows.len(), tessera::config::VARIABLES.len());
    let boot = rows
        .iter()
        .find(|r| r["name"] == "TESSERA_BOOT_TIMEOUT")
        .unwrap();
    assert_eq!(boot["value"], "0");
    assert_eq!(boot["source"], "environment");
    assert!(boot["problem"].as_str().unwrap().contains("positive"));
    assert_eq!(doc["problems"].as_array().unwrap().len(), 1);

    let f = config(&["--markdown"], &[]);
    assert!(f.status.success());
    assert_eq!(f.stdout, tessera::config::markdown_table());
}

#[test]
fn the_tuning_in_force_without_a_setting_is_named() {
    let dir = common::temp_dir("config-tuning");
    let home = dir.path().to_str().unwrap();
    let f = config(&[], &[("XDG_CONFIG_HOME", home)]);
    assert!(f.status.success(), "{}", f.stderr);
    assert!(
        line(&f.stdout, "TESSERA_TUNING").contains("online trials"),
        "{}",
        f.stdout
    );
    std::fs::create_dir_all(dir.path().join("tessera")).unwrap();
    let table = dir.path().join("tessera").join("tuning.json");
    std::fs::write(&table, r#"{"entries":[]}"#).unwrap();
    let f = config(&[], &[("XDG_CONFIG_HOME", home)]);
    assert!(f.status.success(), "{}", f.stdout);
    assert!(
        line(&f.stdout, "TESSERA_TUNING").contains(&format!("the table {}", table.display())),
        "{}",
        f.stdout
    );
}
