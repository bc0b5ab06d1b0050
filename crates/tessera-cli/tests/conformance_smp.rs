//! The conduit conformance suite on the `smp` conduit (real processes over POSIX shared
//! memory) at 1, 2, 3, 4 and 8 ranks, through `tessera selftest`. The same cases run on the
//! `threads` conduit in the library's tests.

mod common;

fn selftest(ranks: u32, conduit: &str) {
    selftest_with(ranks, conduit, &[]);
}

fn selftest_with(ranks: u32, conduit: &str, env: &[(&str, &str)]) {
    let mut command = common::tessera();
    command.envs(env.iter().copied());
    let f = common::run(
        command.args([
            "selftest",
            "-n",
            &ranks.to_string(),
            "--conduit",
            conduit,
            "--segment",
            "64M",
            "--timeout",
            "100",
        ]),
        120,
    );
    assert!(
        f.status.success(),
        "selftest at {ranks} ranks on {conduit} failed:\nstdout: {}\nstderr: {}",
        f.stdout,
        f.stderr
    );
    assert!(
        f.stdout.contains(&format!(
            "{} case(s) passed",
            tessera::conformance::cases().len()
        )),
        "unexpected report: {}",
        f.stdout
    );
}

#[test]
fn smp_1_rank() {
    selftest(1, "smp");
}

#[test]
fn smp_2_ranks() {
    selftest(2, "smp");
}

#[test]
fn smp_3_ranks() {
    selftest(3, "smp");
}

#[test]
fn smp_4_ranks() {
    selftest(4, "smp");
}

#[test]
fn smp_8_ranks() {
    selftest(8, "smp");
}

/// Every peer treated as unmapped (as on another host): data through the conduit's
/// transfer calls, atomics by active-message round trips.
#[test]
fn smp_3_ranks_with_hidden_peers() {
    selftest_with(3, "smp", &[("TESSERA_HIDE_PEERS", "1")]);
}

/// Long collective messages (the suite's are 80 KB) copied half by their receivers and
/// half by their senders (`TESSERA_DIRECT_SPLIT=1`; by default only from 1 MiB), where
/// ranks outnumber the cores: a flat root helps several receivers at once.
#[test]
fn smp_3_ranks_with_split_copies() {
    selftest_with(3, "smp", &[("TESSERA_DIRECT_SPLIT", "1")]);
}

/// The same at 2 ranks, one per core.
#[test]
fn smp_2_ranks_with_split_copies() {
    selftest_with(2, "smp", &[("TESSERA_DIRECT_SPLIT", "1")]);
}

/// Every conduit of the build that `tessera run` starts itself passes the suite at 3 ranks
/// (those started by an MPI launcher run in the mpi tests): a conduit registered in
/// `CONDUITS` is checked without a test of its own.
#[test]
fn every_registered_conduit_passes_at_3_ranks() {
    use tessera::conduit::{Processes, CONDUITS};
    let started_here: Vec<_> = CONDUITS
        .iter()
        .filter(|c| c.processes() != Processes::ByMpiLauncher)
        .collect();
    assert!(started_here.len() >= 2, "{started_here:?}");
    for conduit in started_here {
        selftest(3, conduit.name());
    }
}

#[test]
fn threads_conduit_through_the_launcher() {
    selftest(5, "threads");
}

#[test]
fn unknown_case_names_the_cases() {
    let f = common::run(
        common::tessera().args(["selftest", "-n", "2", "--case", "nosuchcase"]),
        30,
    );
    assert_eq!(f.status.code(), Some(2));
    assert!(
        f.stderr.contains("cases are:") && f.stderr.contains("put_get"),
        "{}",
        f.stderr
    );
}
