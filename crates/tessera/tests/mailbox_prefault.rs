//! A team's mailbox pages are mapped when the team is made, not by its first messages:
//! the first message into a page of a ring would otherwise pay the page's first touch,
//! which on a virtual machine made the first thousand barriers of a 16-rank job 3-5×
//! slower than the rest (and online tuning choose by it). Counted as minor page faults of
//! this process (`/proc/self/stat`) while every rank runs barriers; this runs as a test
//! binary of its own, with transparent huge pages off for the process (a huge page would
//! hide the 4 KiB pages the rings span).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use tessera::coll::Barrier;
use tessera::{Algorithm, Blocking, Collective, Job, Team};

/// Minor page faults of this process so far: field 10 of `/proc/self/stat` (after the
/// command name, which is in parentheses and may hold spaces).
fn minor_faults() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("Linux's /proc/self/stat");
    let after_name = &stat[stat.rfind(')').expect("the command name ends with ')'") + 2..];
    after_name
        .split(' ')
        .nth(7)
        .and_then(|field| field.parse().ok())
        .expect("minflt is the 10th field")
}

/// The tests run one at a time: pages are mapped ahead only where each rank thread of the
/// process has a core, so two 2-rank jobs at once would turn it off.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

#[test]
fn barriers_through_a_fresh_team_touch_no_new_page() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // Prefaulted only where each rank has a core (see `model/team/channel.rs`).
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert!(cores >= 2, "this test needs 2 cores (the host has {cores})");
    nix::sys::prctl::set_thp_disable(true).expect("prctl(PR_SET_THP_DISABLE)");
    // 1,500 dissemination barriers at 2 ranks put 1,500 64-byte messages into each rank's
    // ring: more than a ring's 64 KiB, so every page of the rings is reached.
    let rank0_faults = AtomicU64::new(u64::MAX);
    Job::threads(2)
        .segment(16 << 20)
        .run(|ctx| {
            let world = Team::world(ctx)?;
            let team = world.with_algorithm(Collective::Barrier, Algorithm::DISSEMINATION)?;
            team.run(Barrier, Blocking)?;
            let before = minor_faults();
            for _ in 0..1500 {
                team.run(Barrier, Blocking)?;
            }
            let after = minor_faults();
            team.run(Barrier, Blocking)?;
            if ctx.rank() == 0 {
                rank0_faults.store(after - before, Ordering::Relaxed);
            }
            Ok(())
        })
        .expect("the job runs");
    let faults = rank0_faults.load(Ordering::Relaxed);
    // Rank 0's count spans (nearly) both ranks' loops. Without the prefault it is about
    // 2 rings x 17 pages, each faulted by its writer and its reader.
    assert!(
        faults < 12,
        "{faults} minor page faults during the barriers (the mailbox rings were not mapped ahead)"
    );
}

/// Mapping the pages ahead is the runtime's own business, not the program's
/// communication: a job that makes a team and passes one barrier counts the barrier's
/// messages and no collective read (the peers' pages are touched uncounted; counted, they
/// were 18 reads per member and team).
#[test]
fn the_touches_are_not_counted_as_communication() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().expect("a private directory");
    let file = dir.path().join("stats.json");
    Job::threads(2)
        .segment(16 << 20)
        .stats(&file)
        .run(|ctx| {
            let world = Team::world(ctx)?;
            world.run(Barrier, Blocking)?;
            Ok(())
        })
        .expect("the job runs");
    let stats = std::fs::read_to_string(&file).expect("the statistics file");
    assert!(stats.contains("\"collective\""), "{stats}");
    assert!(!stats.contains("collective_read"), "{stats}");
}
