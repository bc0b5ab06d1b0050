//! `tessera tune --calibrate`: measure the cost model's machine parameters on this host
//! (the nine probes of `tessera::model::team::PROBES`, under a second) and keep them per
//! team size in the calibration file teams read (`tessera::model::team::calibration`).
//!
//! This module must never decide an algorithm: it measures and records what the model
//! then uses.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde::{Deserialize, Serialize};
use tessera::model::team::{calibration, Calibration, CalibrationEntry, MachineParams, PROBES};
use tessera::{Algorithm, Collective, Context, RankResult, Team};

use crate::bench::coll::{sweep, Buffers};
use crate::JobArgs;

/// What a calibration job's rank 0 reports.
#[derive(Serialize, Deserialize)]
struct Measured {
    entry: CalibrationEntry,
    /// Each probe's time, µs per call, in [`PROBES`]' order.
    probes_us: Vec<f64>,
}

/// The body of a calibration job: time every probe on the world team, fit the
/// parameters, and (rank 0) write them to `out`.
pub(crate) fn rank_main(ctx: &Context, out: &Path) -> RankResult {
    let world = Team::world(ctx)?;
    let n = world.size();
    let largest = PROBES.iter().map(|p| p.1).max().unwrap_or(8);
    let mut bufs = Buffers::new(&world, largest)?;
    // Every (operation, size) a probe times, once, and per operation the probes'
    // algorithms: a sweep times each point with each of its operation's algorithms.
    let mut points: Vec<(Collective, usize)> = Vec::new();
    for &(op, bytes, _) in &PROBES {
        if !points.contains(&(op, bytes)) {
            points.push((op, bytes));
        }
    }
    let algorithms = |op: Collective| -> Vec<Algorithm> {
        let mut algs: Vec<Algorithm> = Vec::new();
        for &(o, _, alg) in &PROBES {
            if o == op && !algs.contains(&alg) {
                algs.push(alg);
            }
        }
        algs
    };
    let choices = |op| -> tessera::Result<Vec<Team>> {
        algorithms(op)
            .into_iter()
            .map(|alg| world.with_algorithm(op, alg))
            .collect()
    };
    let timed = sweep(&points, &choices, n, false, &mut bufs, &mut |_, _| {})?;
    let probes_us: Vec<f64> = PROBES
        .iter()
        .map(|&(op, bytes, alg)| {
            let point = points
                .iter()
                .position(|&p| p == (op, bytes))
                .expect("a point per probe");
            let choice = algorithms(op)
                .iter()
                .position(|&a| a == alg)
                .expect("its algorithm");
            timed[point][choice] * 1e6
        })
        .collect();
    let params = MachineParams::from_probes(n, world.reads_directly(), &probes_us)?;
    if ctx.rank() == 0 {
        let measured = Measured {
            entry: CalibrationEntry {
                team_size: n,
                crowded: world.shares_cores(),
                params,
            },
            probes_us,
        };
        std::fs::write(out, serde_json::to_string(&measured)?)?;
    }
    Ok(())
}

/// `tessera tune --calibrate`: one job of `job.ranks()` ranks; its parameters replace those
/// of the same team size and regime in the calibration at `output` (default:
/// `calibration::default_path`), which is created if it does not exist.
pub(crate) fn drive(job: &JobArgs, output: Option<&Path>) -> Result<ExitCode, String> {
    if job.ranks() < 2 {
        return Err("tune --calibrate needs at least 2 ranks (-n 2 or more; a team's size, ideally one rank per core)".into());
    }
    let path: PathBuf = match output {
        Some(p) => p.to_path_buf(),
        None => calibration::default_path().ok_or(
            "no default location for the calibration (neither XDG_CONFIG_HOME nor HOME is set); give one with -o FILE",
        )?,
    };
    let text = crate::bench::run_rank_job(job, "calibrate", &[])?;
    let measured: Measured = serde_json::from_str(&text)
        .map_err(|e| format!("parsing the calibration job's result: {e}"))?;
    let mut cal = if path.exists() {
        Calibration::load(&path).map_err(|e| e.to_string())?
    } else {
        Calibration::default()
    };
    let system = crate::bench::system(job.conduit.name());
    cal.machine = format!("{}, {} cores", system.cpu, system.cores);
    let entry = measured.entry;
    println!(
        "calibration: {} ranks on {} ({}), {} conduit",
        entry.team_size,
        cal.machine,
        if entry.crowded {
            "ranks outnumber processors"
        } else {
            "a processor per rank"
        },
        system.conduit
    );
    for (&(op, bytes, alg), us) in PROBES.iter().zip(&measured.probes_us) {
        println!(
            "  probe {:<13} {:>7} B {:<14} {us:>10.3} µs",
            op.name(),
            bytes,
            alg.to_string()
        );
    }
    print_params(&entry.params);
    cal.insert(entry);
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    }
    let text = serde_json::to_string_pretty(&cal).map_err(|e| e.to_string())?;
    std::fs::write(&path, text + "\n").map_err(|e| format!("writing {}: {e}", path.display()))?;
    // Teams read the default location by themselves; a calibration written elsewhere
    // takes effect only where TESSERA_CALIBRATION names it.
    let used = if calibration::default_path().as_deref() == Some(path.as_path()) {
        "teams of the nearest size use it; TESSERA_CALIBRATION=none ignores it".to_string()
    } else {
        format!(
            "teams of the nearest size use it where TESSERA_CALIBRATION={} is set",
            path.display()
        )
    };
    println!("wrote {} ({used})", path.display());
    Ok(ExitCode::SUCCESS)
}

/// The parameters, one per line, beside the built-in set of the same regime.
fn print_params(p: &MachineParams) {
    let rows = [
        ("round", p.round_us, "µs"),
        ("tree round", p.tree_round_us, "µs"),
        ("message", p.message_us, "µs"),
        ("copy, short", p.copy_gbps, "GB/s"),
        ("long messages", p.long_gbps, "GB/s"),
        ("readers at once", p.readers, ""),
        ("put, short", p.put_gbps, "GB/s"),
        ("put, long", p.long_put_gbps, "GB/s"),
        ("block copy", p.block_copy_us, "µs"),
    ];
    for (name, value, unit) in rows {
        println!("  {name:<14} {value:>9.3} {unit}");
    }
}
