//! `tessera tune` writes a tuning table that covers every operation at every team size it
//! measured, that the runtime loads and follows; a broken table is refused with its name.

mod common;

use std::collections::BTreeSet;

use tessera::model::tuning::TuningTable;
use tessera::{Algorithm, Collective};

#[test]
fn tune_writes_a_table_that_jobs_follow() {
    let dir = std::env::temp_dir().join(format!("tessera-tune-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("nested").join("tuning.json");
    let f = common::run(
        common::tessera()
            .args(["tune", "-n", "3", "--quick", "-o"])
            .arg(&path),
        120,
    );
    assert!(f.status.success(), "stderr: {}", f.stderr);
    // A table written away from the default location takes effect where it is named.
    assert!(
        f.stdout.contains(&format!(
            "collectives follow it where TESSERA_TUNING={} is set",
            path.display()
        )),
        "{}",
        f.stdout
    );
    // What tuning cost: a row of milliseconds per operation, the table's size, the lookup.
    for op in Collective::ALL {
        let row = f
            .stdout
            .lines()
            .find(|l| l.split_whitespace().next() == Some(op.name()) && !l.contains("team of"))
            .unwrap_or_else(|| panic!("no tuning-cost row for {}: {}", op.name(), f.stdout));
        let total: f64 = row.split_whitespace().last().unwrap().parse().unwrap();
        assert!(total > 0.0, "{row}");
    }
    assert!(f.stdout.contains(" rules, "), "{}", f.stdout);
    let lookup = f
        .stdout
        .lines()
        .find(|l| l.starts_with("lookup: "))
        .expect("a lookup cost line");
    let ns: f64 = lookup.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert!(ns > 0.0 && ns < 10_000.0, "{lookup}");
    let table = TuningTable::load(&path).expect("the table loads");
    let covered: BTreeSet<(String, usize)> = table
        .entries
        .iter()
        .map(|e| (e.op.clone(), e.team_size))
        .collect();
    for op in Collective::ALL {
        for size in [2, 3] {
            assert!(
                covered.contains(&(op.name().to_string(), size)),
                "{op:?} at {size}"
            );
            // Every size gets an answer, and it is one of the operation's algorithms
            // (or a k-nomial radix of one).
            for bytes in [0, 8, 5000, 1 << 20] {
                let alg = table.lookup(op, size, bytes).expect("covered");
                let family = |a: Algorithm| a.with_radix(0);
                assert!(
                    op.algorithms().iter().any(|&a| family(a) == family(alg)),
                    "{op:?}: {alg}"
                );
            }
        }
    }
    // A job with the table in force runs collectives correctly (checked against
    // sequential results by the conformance case).
    let f = common::run(
        common::tessera().env("TESSERA_TUNING", &path).args([
            "selftest",
            "-n",
            "3",
            "--case",
            "collectives",
            "--timeout",
            "60",
        ]),
        90,
    );
    assert!(f.status.success(), "{}\n{}", f.stdout, f.stderr);
    // A broken table is refused, naming it.
    std::fs::write(&path, "{\"entries\": [{\"op\": \"gather\"").unwrap();
    let f = common::run(
        common::tessera().env("TESSERA_TUNING", &path).args([
            "selftest",
            "-n",
            "2",
            "--case",
            "collectives",
            "--timeout",
            "60",
        ]),
        90,
    );
    assert!(!f.status.success());
    assert!(
        f.stderr.contains("tuning.json") && f.stderr.contains("rerun `tessera tune`"),
        "{}",
        f.stderr
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn tune_needs_two_ranks() {
    let f = common::run(
        common::tessera().args(["tune", "-n", "1", "-o", "/dev/null"]),
        20,
    );
    assert_eq!(f.status.code(), Some(2));
    assert!(
        f.stderr.contains("tune needs at least 2 ranks"),
        "{}",
        f.stderr
    );
}

/// `tune --calibrate` measures the cost model's parameters at the team size asked for,
/// keeps one entry per size and regime (a second run at a size replaces the first), and
/// a job then reads them: `tessera config` names the file and the team sizes whose long
/// messages go through the mailbox, and a file with a parameter that is not a positive
/// number is refused by name before any rank starts.
#[test]
fn calibrate_keeps_one_entry_per_team_size_that_jobs_read() {
    use tessera::model::team::Calibration;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("calibration.json");
    for n in ["2", "3", "2"] {
        let f = common::run(
            common::tessera()
                .args(["tune", "--calibrate", "-n", n, "-o"])
                .arg(&path),
            // Four short jobs where direct reads work: room for a loaded machine.
            180,
        );
        assert!(f.status.success(), "stderr: {}", f.stderr);
        assert!(
            f.stdout.contains("round") && f.stdout.contains("GB/s"),
            "{}",
            f.stdout
        );
        // The kept way is named; where direct reads work, long messages were timed both
        // ways and both times are given.
        assert!(
            f.stdout.contains("long messages are read directly")
                || f.stdout.contains("long messages go through the mailbox"),
            "{}",
            f.stdout
        );
        assert!(
            f.stdout.contains("µs through the mailbox")
                || f.stdout.contains("direct reads do not work"),
            "{}",
            f.stdout
        );
        // Away from the default location it takes effect where it is named.
        assert!(
            f.stdout.contains(&format!(
                "where TESSERA_CALIBRATION={} is set",
                path.display()
            )),
            "{}",
            f.stdout
        );
    }
    let cal = Calibration::load(&path).expect("the calibration loads");
    let sizes: Vec<usize> = cal.entries.iter().map(|e| e.team_size).collect();
    // 3 ranks on 2 cores share them: an entry of the crowded regime.
    let crowded_3 = cal.entries.iter().any(|e| e.team_size == 3 && e.crowded);
    assert_eq!(sizes.len(), 2, "{sizes:?}");
    assert!(sizes.contains(&2) && sizes.contains(&3), "{sizes:?}");
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 3 {
        assert!(crowded_3, "{:?}", cal.entries);
    }
    for e in &cal.entries {
        assert!(e.params.check().is_ok(), "{e:?}");
    }
    // The file says which way each entry's long messages go.
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text.matches("\"direct_reads\"").count(), 2, "{text}");
    let f = common::run(
        common::tessera()
            .arg("config")
            .env("TESSERA_CALIBRATION", &path),
        30,
    );
    assert!(f.status.success(), "{}", f.stdout);
    // `tessera config` names the team sizes whose long messages go through the mailbox.
    let measured = Calibration::load(&path).unwrap();
    for (mailbox_at, expect) in [
        (Some(3), "through the mailbox for teams nearest 3 ranks"),
        (None, "on  (default; the calibration"),
    ] {
        let mut cal = measured.clone();
        for e in &mut cal.entries {
            e.direct_reads = Some(e.team_size) != mailbox_at;
        }
        let file = dir.path().join("direct-reads.json");
        std::fs::write(&file, serde_json::to_string(&cal).unwrap()).unwrap();
        let f = common::run(
            common::tessera()
                .arg("config")
                .env("TESSERA_CALIBRATION", &file),
            30,
        );
        let line = f
            .stdout
            .lines()
            .find(|l| l.starts_with("TESSERA_DIRECT "))
            .unwrap_or_default();
        assert!(line.contains(expect), "{}", f.stdout);
    }
    let mut text = std::fs::read_to_string(&path).unwrap();
    text = text.replacen("\"round_us\": ", "\"round_us\": -", 1);
    std::fs::write(&path, text).unwrap();
    let f = common::run(
        common::tessera()
            .args(["run", "-n", "2", "--", "true"])
            .env("TESSERA_CALIBRATION", &path),
        30,
    );
    assert_eq!(f.status.code(), Some(2), "{}", f.stderr);
    assert!(
        f.stderr.contains("calibration.json") && f.stderr.contains("round_us is -"),
        "{}",
        f.stderr
    );
    let f = common::run(
        common::tessera().args(["tune", "--calibrate", "-n", "1"]),
        30,
    );
    assert_eq!(f.status.code(), Some(2), "{}", f.stderr);
    assert!(f.stderr.contains("at least 2 ranks"), "{}", f.stderr);
}
