//! Long messages go the way the calibration in force measured faster
//! (`CalibrationEntry::direct_reads`, written by `tessera tune --calibrate`), and
//! `TESSERA_DIRECT` overrides it; online tuning tries the other way too. A test binary of its own: a process reads its
//! calibration once, from the environment.

use std::sync::Mutex;

use tessera::coll::Broadcast;
use tessera::model::team::{Calibration, CalibrationEntry, MachineParams};
use tessera::{Blocking, Collective, Job, Team, Traffic};

/// Whether a 2-rank world team reads long messages directly with `TESSERA_DIRECT` set to
/// `direct` (unset for `None`), on every rank alike; a 256 KiB broadcast arrives whole
/// either way.
fn world_reads_directly(direct: Option<&str>) -> bool {
    match direct {
        Some(value) => std::env::set_var("TESSERA_DIRECT", value),
        None => std::env::remove_var("TESSERA_DIRECT"),
    }
    let seen = Mutex::new(Vec::new());
    Job::threads(2)
        .segment(16 << 20)
        .run(|ctx| {
            let world = Team::world(ctx)?;
            let mut data = vec![ctx.rank() as u64 + 7; 1 << 15];
            world.run(Broadcast::in_place(0, &mut data), Blocking)?;
            if let Some(i) = data.iter().position(|&x| x != 7) {
                return Err(format!("rank {}: element {i} is {}", ctx.rank(), data[i]).into());
            }
            seen.lock().unwrap().push(world.reads_directly());
            Ok(())
        })
        .unwrap();
    let seen = seen.into_inner().unwrap();
    assert!(seen.len() == 2 && seen[0] == seen[1], "{seen:?}");
    seen[0]
}

/// What one member saw of a 2-rank world team that tunes online, 256 KiB broadcasts
/// (roots in turn) called until the size class is decided.
#[derive(Debug, PartialEq)]
struct Tuned {
    /// Bytes the member read directly during the trials.
    read_in_trials: u64,
    /// The decision: long messages through the mailbox.
    via_mailbox: bool,
    /// Bytes the member read directly in four calls after the decision.
    read_after: u64,
}

/// [`Tuned`] for each member with `TESSERA_DIRECT` set to `direct` (unset for `None`); every
/// broadcast arrives whole, trials of either way included.
fn tune_online(direct: Option<&str>) -> Vec<Tuned> {
    match direct {
        Some(value) => std::env::set_var("TESSERA_DIRECT", value),
        None => std::env::remove_var("TESSERA_DIRECT"),
    }
    let dir = tempfile::tempdir().unwrap();
    let seen = Mutex::new(Vec::new());
    Job::threads(2)
        .segment(16 << 20)
        .stats(dir.path().join("stats.json"))
        .run(|ctx| {
            let world = Team::world(ctx)?.with_online_tuning();
            let peer = 1 - ctx.rank();
            let read = || {
                ctx.stats()
                    .map_or(0, |s| s.to(peer, Traffic::CollectiveRead).1)
            };
            let bytes = 8 << 15;
            let broadcast = |call: usize| -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
                let root = call % 2;
                let mut data = vec![(ctx.rank() * 1000 + call) as u64; 1 << 15];
                world.run(Broadcast::in_place(root, &mut data), Blocking)?;
                let want = (root * 1000 + call) as u64;
                match data.iter().position(|&x| x != want) {
                    Some(i) => Err(format!("call {call}: element {i} is {}", data[i]).into()),
                    None => Ok(()),
                }
            };
            let mut calls = 0;
            while !world.tuning_settled(Collective::Broadcast, bytes) {
                assert!(calls < 2000, "the trials end");
                broadcast(calls)?;
                calls += 1;
            }
            let read_in_trials = read();
            for call in calls..calls + 4 {
                broadcast(call)?;
            }
            seen.lock().unwrap().push(Tuned {
                read_in_trials,
                via_mailbox: world.long_messages_via_mailbox(Collective::Broadcast, bytes),
                read_after: read() - read_in_trials,
            });
            Ok(())
        })
        .unwrap();
    seen.into_inner().unwrap()
}

/// An entry that measured the mailbox faster keeps long messages in it; `TESSERA_DIRECT=on`
/// reads them directly all the same (direct reads work wherever the split-copy tests
/// pass), and `off` keeps them in the mailbox. With online tuning the entry's way is only
/// the first candidate: the members try reading directly too, and go the way that won;
/// `TESSERA_DIRECT` fixes the way. (One test: the variables are the process's.)
#[test]
fn a_calibration_that_measured_the_mailbox_faster_keeps_long_messages_there() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("calibration.json");
    let mut cal = Calibration::default();
    for crowded in [false, true] {
        cal.insert(CalibrationEntry {
            team_size: 2,
            crowded,
            direct_reads: false,
            params: MachineParams::built_in(crowded),
        });
    }
    std::fs::write(&path, serde_json::to_string(&cal).unwrap()).unwrap();
    std::env::set_var("TESSERA_CALIBRATION", &path);
    assert!(!world_reads_directly(None));
    assert!(world_reads_directly(Some("on")));
    assert!(!world_reads_directly(Some("off")));

    let tried = tune_online(None);
    assert_eq!(tried.len(), 2);
    assert_eq!(tried[0].via_mailbox, tried[1].via_mailbox, "{tried:?}");
    for member in &tried {
        assert!(member.read_in_trials >= 8 << 15, "{tried:?}");
        assert_eq!(member.read_after == 0, member.via_mailbox, "{tried:?}");
    }
    for member in tune_online(Some("off")) {
        assert_eq!((member.read_in_trials, member.read_after), (0, 0));
        assert!(member.via_mailbox);
    }
    for member in tune_online(Some("on")) {
        assert!(
            member.read_after >= 8 << 15 && !member.via_mailbox,
            "{member:?}"
        );
    }
}
