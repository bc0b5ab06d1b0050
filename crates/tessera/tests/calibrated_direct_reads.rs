//! Long messages go the way the calibration in force measured faster
//! (`CalibrationEntry::direct_reads`, written by `tessera tune --calibrate`), and
//! `TESSERA_DIRECT` overrides it. A test binary of its own: a process reads its
//! calibration once, from the environment.

use std::sync::Mutex;

use tessera::coll::Broadcast;
use tessera::model::team::{Calibration, CalibrationEntry, MachineParams};
use tessera::{Blocking, Job, Team};

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

/// An entry that measured the mailbox faster keeps long messages in it; `TESSERA_DIRECT=on`
/// reads them directly all the same (direct reads work wherever the split-copy tests
/// pass), and `off` keeps them in the mailbox.
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
}
