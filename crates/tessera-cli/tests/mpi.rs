//! The mpi conduit (built only with `--features mpi`; needs Open MPI's `mpirun`):
//! - the conformance suite, unchanged, at 2, 3 and 4 ranks, with the shared-memory bypass
//!   (one host: everything through shared memory) and without it (`TESSERA_MPI_BYPASS=0`:
//!   every peer through MPI windows and two-sided messages, as across hosts);
//! - every NPB kernel at class S (and W) at 2 and 4 ranks;
//! - a program started by `mpirun` directly picks the mpi conduit;
//! - a failing rank ends the job, named, without a hang;
//! - the conformance suite with the progress thread on (`TESSERA_MPI_PROGRESS`);
//! - `bench coll` measures MPI's own collectives (`native`) beside Tessera's;
//! - communication statistics count the same as on one host, and ranks started by
//!   mpirun directly gather theirs at rank 0.
#![cfg(feature = "mpi")]

mod common;

use std::process::Command;

fn selftest(ranks: u32, bypass: bool) {
    selftest_with(ranks, bypass, "0");
}

/// `progress`: TESSERA_MPI_PROGRESS (microseconds between polls; "0": no thread).
fn selftest_with(ranks: u32, bypass: bool, progress: &str) {
    let f = common::run(
        common::tessera()
            .env("TESSERA_MPI_BYPASS", if bypass { "1" } else { "0" })
            .env("TESSERA_MPI_PROGRESS", progress)
            .args([
                "selftest",
                "--conduit",
                "mpi",
                "--segment",
                "64M",
                "--timeout",
                "100",
            ])
            .args(["-n", &ranks.to_string()]),
        120,
    );
    assert!(
        f.status.success(),
        "selftest at {ranks} ranks (bypass {bypass}, progress {progress}):\n{}\n{}",
        f.stdout,
        f.stderr
    );
    let want = format!(
        "{} case(s) passed on {ranks} rank(s) of the mpi conduit",
        tessera::conformance::cases().len()
    );
    assert!(f.stdout.contains(&want), "{}", f.stdout);
}

#[test]
fn conformance_2_3_4_ranks_through_shared_memory() {
    for ranks in [2, 3, 4] {
        selftest(ranks, true);
    }
}

#[test]
fn conformance_2_3_4_ranks_through_mpi_only() {
    for ranks in [2, 3, 4] {
        selftest(ranks, false);
    }
}

#[test]
fn conformance_with_the_progress_thread() {
    // MPI at MPI_THREAD_SERIALIZED, a second thread polling every 20 µs: every call of the
    // conduit must be serialised with it.
    for ranks in [2, 3] {
        selftest_with(ranks, false, "20");
    }
}

#[test]
fn a_bad_progress_period_is_named() {
    let f = failure_demo(
        2,
        &[("TESSERA_MPI_PROGRESS", "fast")],
        &["--barriers", "10"],
    );
    assert!(!f.status.success());
    assert!(
        f.stderr.contains("TESSERA_MPI_PROGRESS") && f.stderr.contains("microseconds"),
        "{}",
        f.stderr
    );
}

#[test]
fn bench_coll_measures_mpi_collectives_beside_tesseras() {
    common::bench_coll_checked(&["--conduit", "mpi"], 2, &["native", "nonblocking"]);
}

fn npb(kernel: &str, class: &str, ranks: u32, bypass: bool) {
    let f = common::run(
        common::tessera()
            .env("TESSERA_MPI_BYPASS", if bypass { "1" } else { "0" })
            .args([
                "npb",
                kernel,
                "--class",
                class,
                "--conduit",
                "mpi",
                "--timeout",
                "200",
            ])
            .args(["-n", &ranks.to_string()]),
        240,
    );
    assert!(
        f.status.success() && f.stdout.contains("SUCCESSFUL"),
        "npb {kernel} {class} at {ranks} ranks (bypass {bypass}):\n{}\n{}",
        f.stdout,
        f.stderr
    );
}

#[test]
fn npb_class_s_verifies_at_2_and_4_ranks_both_ways() {
    for kernel in ["ep", "is", "cg", "mg", "ft"] {
        for ranks in [2, 4] {
            for bypass in [true, false] {
                npb(kernel, "S", ranks, bypass);
            }
        }
    }
}

#[test]
fn npb_class_w_verifies_at_2_and_4_ranks_through_mpi_only() {
    for kernel in ["is", "cg", "mg", "ft"] {
        for ranks in [2, 4] {
            npb(kernel, "W", ranks, false);
        }
    }
}

#[test]
fn a_program_under_mpirun_picks_the_mpi_conduit() {
    let mut cmd = Command::new("mpirun");
    cmd.args(["--oversubscribe", "-np", "3"]);
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        cmd.arg("--allow-run-as-root");
    }
    let f = common::run(
        cmd.arg(common::example("failure_demo"))
            .args(["--barriers", "200"]),
        60,
    );
    assert!(f.status.success(), "{}\n{}", f.stdout, f.stderr);
    assert!(
        f.stdout.contains("mpi conduit") || f.stderr.contains("mpi conduit"),
        "the program did not report the mpi conduit:\n{}\n{}",
        f.stdout,
        f.stderr
    );
}

/// `tessera run --conduit mpi -n RANKS -- failure_demo ARGS` with `env` set, within 90 s.
fn failure_demo(ranks: u32, env: &[(&str, &str)], args: &[&str]) -> common::Finished {
    let mut cmd = common::tessera();
    cmd.envs(env.iter().copied())
        .args(["run", "--conduit", "mpi", "--timeout", "60", "-n"])
        .arg(ranks.to_string())
        .arg("--")
        .arg(common::example("failure_demo"))
        .args(args);
    common::run(&mut cmd, 90)
}

#[test]
fn a_failing_rank_ends_the_job_and_is_named() {
    let f = failure_demo(4, &[], &["--error-rank", "3", "--forever"]);
    assert!(!f.status.success());
    assert!(
        f.stderr.contains("rank 3 failed"),
        "the failing rank is not named:\n{}",
        f.stderr
    );
    assert!(
        f.elapsed.as_secs() < 60,
        "ended by the timeout, not the failure"
    );
}

/// OpenSHMEM C programs over the mpi conduit: installed from this (mpi-enabled) build and
/// started with `oshrun --conduit mpi`, with ranks of a host sharing memory and with every
/// rank reached through MPI (`TESSERA_MPI_BYPASS=0`, as if on separate hosts): globals,
/// heap, RMA, AMOs, waits, locks and active-set collectives.
#[test]
fn openshmem_c_programs_over_mpi() {
    let installed = common::install_shmem("mpi");
    let prefix = installed.path();
    let tests = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tessera-shmem/tests/c");
    let typed = prefix.join("typed_test.c");
    std::fs::write(&typed, sma::header::TYPED_TEST_C).unwrap();
    for (name, src) in [
        ("typed", typed.clone()),
        ("setup", tests.join("setup.c")),
        ("collectives", tests.join("collectives.c")),
    ] {
        let exe = prefix.join(name);
        let f = common::run(
            std::process::Command::new(prefix.join("bin/oshcc"))
                .args(["-O1", "-std=c99"])
                .arg(&src)
                .arg("-o")
                .arg(&exe),
            120,
        );
        assert!(f.status.success(), "oshcc {name}: {}", f.stderr);
        for bypass in ["1", "0"] {
            let f = common::run(
                std::process::Command::new(prefix.join("bin/oshrun"))
                    .args(["--conduit", "mpi", "-np", "3"])
                    .arg(&exe)
                    .env("TESSERA_MPI_BYPASS", bypass),
                240,
            );
            assert!(
                f.status.success(),
                "{name} (bypass {bypass}): {}\n{}",
                f.stdout,
                f.stderr
            );
            assert!(
                f.stdout.contains(&format!("{name}: OK")),
                "{name} (bypass {bypass}): {}",
                f.stdout
            );
        }
    }
}

#[test]
fn ranks_killed_during_start_up_leave_no_named_objects() {
    // A full /dev/shm (a tmpfs of its own in a private mount namespace) kills the ranks
    // with SIGBUS while they touch their regions; their named objects used to stay.
    // Needs root (or an unprivileged user namespace) for the private mount.
    let probe = Command::new("unshare")
        .args(["-m", "true"])
        .status()
        .is_ok_and(|s| s.success());
    if !probe {
        eprintln!("skipped: unshare -m is not permitted here");
        return;
    }
    let tessera = env!("CARGO_BIN_EXE_tessera");
    let script = format!(
        "mount -t tmpfs -o size=64m tmpfs /dev/shm && \
         dd if=/dev/zero of=/dev/shm/filler bs=1M count=64 2>/dev/null; \
         {tessera} npb cg --class S -n 2 --conduit mpi --timeout 60 >/dev/null 2>&1; \
         echo status $?; ls -A /dev/shm"
    );
    let f = common::run(
        Command::new("unshare").args(["-m", "sh", "-c", &script]),
        120,
    );
    assert!(f.status.success(), "{}", f.stderr);
    let mut lines = f.stdout.lines();
    assert_ne!(
        lines.next(),
        Some("status 0"),
        "the job should fail: {}",
        f.stdout
    );
    let left: Vec<&str> = lines.collect();
    assert_eq!(left, vec!["filler"], "left in /dev/shm: {left:?}");
}

/// `--stats` on the mpi conduit: the ring example's signalling puts are counted exactly,
/// through shared memory between the ranks of this host and through MPI alone.
#[test]
fn communication_statistics_count_the_same_over_mpi() {
    let dir = common::temp_dir("mpi-stats");
    let (ranks, laps) = (3usize, 20u64);
    for bypass in ["1", "0"] {
        let file = dir.path().join(format!("ring-{bypass}.json"));
        let env = [("TESSERA_MPI_BYPASS", bypass)];
        let stats = common::ring_stats("mpi", ranks, laps, &file, &env);
        assert_eq!(stats.conduit, "mpi");
        common::check_ring_stats(&stats, ranks, laps);
    }
}

/// Ranks started by `mpirun` itself with `TESSERA_STATS=FILE`: rank 0 gathers every rank's
/// counts over MPI and writes the one file (ranks of other hosts need no shared file
/// system), and no per-rank part is left beside it.
#[test]
fn ranks_started_by_mpirun_gather_their_statistics_at_rank_0() {
    let dir = common::temp_dir("mpirun-stats");
    let file = dir.path().join("ring.json");
    let (ranks, laps) = (3usize, 20u64);
    let mut cmd = Command::new("mpirun");
    cmd.args(["--oversubscribe", "-np", &ranks.to_string()]);
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        cmd.arg("--allow-run-as-root");
    }
    cmd.arg("-x")
        .arg(format!("TESSERA_STATS={}", file.display()));
    let f = common::run(cmd.arg(common::example("ring")).arg(laps.to_string()), 60);
    assert!(f.status.success(), "{}\n{}", f.stdout, f.stderr);
    let stats = tessera::JobStats::read(&file).unwrap();
    assert_eq!(stats.conduit, "mpi");
    common::check_ring_stats(&stats, ranks, laps);
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n.to_string_lossy().starts_with("ring.json."))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}
