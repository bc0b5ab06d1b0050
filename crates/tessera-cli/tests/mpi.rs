//! The mpi conduit (built only with `--features mpi`; needs Open MPI's `mpirun`):
//! - the conformance suite, unchanged, at 2, 3 and 4 ranks, with the shared-memory bypass
//!   (one host: everything through shared memory) and without it (`TESSERA_MPI_BYPASS=0`:
//!   every peer through MPI windows and two-sided messages, as across hosts);
//! - every NPB kernel at class S (and W) at 2 and 4 ranks;
//! - a program started by `mpirun` directly picks the mpi conduit;
//! - a failing rank ends the job, named, without a hang.
#![cfg(feature = "mpi")]

mod common;

use std::process::Command;

fn selftest(ranks: u32, bypass: bool) {
    let f = common::run(
        common::tessera()
            .env("TESSERA_MPI_BYPASS", if bypass { "1" } else { "0" })
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
        "selftest at {ranks} ranks (bypass {bypass}):\n{}\n{}",
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

#[test]
fn a_failing_rank_ends_the_job_and_is_named() {
    let f = common::run(
        common::tessera()
            .args([
                "run",
                "-n",
                "4",
                "--conduit",
                "mpi",
                "--timeout",
                "60",
                "--",
            ])
            .arg(common::example("failure_demo"))
            .args(["--error-rank", "3", "--forever"]),
        90,
    );
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
