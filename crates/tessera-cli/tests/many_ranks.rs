//! Many ranks on one node: a job of 1024 processes on this machine (a few cores) starts,
//! greets, and ends within a bound, and each rank's page tables stay small however many
//! peers it has, because a rank maps its peers' memory without touching it and touches
//! only the peers it talks to. No process is left behind.

mod common;

use std::time::Duration;

use common::{assert_gone, example, finish, spawn, tessera};

#[test]
fn a_thousand_ranks_start_greet_and_end_with_small_page_tables() {
    let ranks = 1024;
    let program = example("page_tables");
    let child = spawn(
        tessera()
            .args(["run", "-n", &ranks.to_string(), "--timeout", "120", "--"])
            .arg(&program),
    );
    let f = finish(child, Duration::from_secs(150));
    assert!(f.status.success(), "{}", f.stderr);
    // 2 s for the release build on 2 cores; the debug build, other tests beside it.
    assert!(
        f.elapsed < Duration::from_secs(60),
        "{ranks} ranks took {:?}",
        f.elapsed
    );
    assert_gone(&program.to_string_lossy());
    let line = f
        .stdout
        .lines()
        .find(|l| l.starts_with(&format!("{ranks} ranks: page tables per rank ")))
        .unwrap_or_else(|| panic!("no summary in {:?}", f.stdout));
    let largest: u64 = line
        .split("per rank ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no figure in {line:?}"));
    // Before peers were mapped untouched, a rank held page tables for every peer's
    // segment: 3 MiB per rank at 256 ranks, 6 MiB at 512.
    assert!(
        (1..=256).contains(&largest),
        "a rank holds {largest} KiB of page tables at {ranks} ranks (at most 256 KiB wanted)"
    );
}
