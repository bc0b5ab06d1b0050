//! `tessera tune --calibrate`: measure the cost model's machine parameters on this host
//! (the nine probes of `tessera::model::team::PROBES`, under a second) and keep them per
//! team size in the calibration file teams read (`tessera::model::team::calibration`).
//!
//! Where ranks can read each other's long messages directly (`core::direct`), the probes
//! run in four jobs, two reading them directly and two through the mailbox, in turns; the
//! entry keeps the mailbox where its long probes took less by more than
//! [`MAILBOX_MARGIN`], else direct reads, with the parameters measured that way (each
//! probe's best of its two jobs). How fast the kernel copies between processes, and how
//! fast the mailbox's two copies cross between cores, decide it, and that differs by
//! host: on a 16-core Xeon direct reads made 32 KiB messages 1.1–1.9× faster, on a 2-core
//! AMD EPYC (Zen 2) guest they made every collective of 32 KiB to 1 MiB up to 1.9× slower
//! while its two virtual CPUs sat 40 ns apart, and up to 3.4× faster while they sat
//! 150–190 ns apart (docs/PERFORMANCE.md). A calibration records the host as it was
//! measured: on a guest whose virtual CPUs move, calibrate again when they have.
//!
//! This module must never decide an algorithm: it measures and records what the model
//! then uses.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde::{Deserialize, Serialize};
use tessera::model::team::{
    calibration, Calibration, CalibrationEntry, MachineParams, DIRECT_FROM, PROBES,
};
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
    // Buffers in `Vec`s, as most programs pass them: the verdict on direct reads is the
    // one for such buffers (long messages from huge pages read faster, which a team's
    // online trials of both ways find at run time).
    let mut bufs = Buffers::new(&world, largest, true)?;
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
    let params = MachineParams::from_probes(
        n,
        world.cost_params().cores,
        world.reads_directly(),
        &probes_us,
    )?;
    if ctx.rank() == 0 {
        let measured = Measured {
            entry: CalibrationEntry {
                team_size: n,
                crowded: world.shares_cores(),
                direct_reads: world.reads_directly(),
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
    let (measured, long) = measure_both_ways(job)?;
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
    let how = if entry.direct_reads {
        "are read directly"
    } else {
        "go through the mailbox"
    };
    match long {
        Some((direct, mailbox)) => println!(
            "  long messages {how} (the probes of {} KiB and more, best of two jobs each way: {direct:.1} µs read directly, {mailbox:.1} µs through the mailbox)",
            DIRECT_FROM / 1024
        ),
        None => println!(
            "  long messages {how} (direct reads do not work between this host's ranks: see `tessera config`, TESSERA_DIRECT)"
        ),
    }
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

/// How much faster the mailbox must carry the long probes for the calibration to keep long
/// messages there: on a near tie the entry keeps direct reads, what teams do without a
/// calibration, so that calibrating again does not flip the way with the noise (with 4
/// and 8 ranks on 2 cores the two ways came within 2–3 % of each other).
const MAILBOX_MARGIN: f64 = 1.1;

/// A calibration job's environment: long messages read directly where the host allows.
const READ_DIRECTLY: [(&str, &str); 1] = [("TESSERA_DIRECT", "on")];

/// A calibration job's environment: long messages through the mailbox.
const THROUGH_THE_MAILBOX: [(&str, &str); 1] = [("TESSERA_DIRECT", "off")];

/// One calibration job with `env` in its ranks.
fn measure(job: &JobArgs, env: &[(&str, &str)]) -> Result<Measured, String> {
    let text = crate::bench::run_rank_job(job, "calibrate", &[], env)?;
    serde_json::from_str(&text).map_err(|e| format!("parsing the calibration job's result: {e}"))
}

/// The probes that carry long messages from member to member, which direct reads move
/// (the single-address forms put into their destinations either way).
fn carries_long_messages(probe: &(tessera::Collective, usize, tessera::Algorithm)) -> bool {
    probe.1 >= DIRECT_FROM && !probe.0.is_single_address()
}

/// The calibration of this host: measured with long messages read directly where the
/// host allows it and through the mailbox, two jobs each in turns, keeping the faster way
/// (see the module documentation), with the long probes' total time each way; one job
/// where direct reads do not work here.
fn measure_both_ways(job: &JobArgs) -> Result<(Measured, Option<(f64, f64)>), String> {
    let first = measure(job, &READ_DIRECTLY)?;
    if !first.entry.direct_reads {
        return Ok((first, None));
    }
    // In turns: directly, through the mailbox, directly, through the mailbox.
    let mailbox_first = measure(job, &THROUGH_THE_MAILBOX)?;
    let direct = best_of(&[first, measure(job, &READ_DIRECTLY)?])?;
    let mailbox = best_of(&[mailbox_first, measure(job, &THROUGH_THE_MAILBOX)?])?;
    let long = |m: &Measured| -> f64 {
        PROBES
            .iter()
            .zip(&m.probes_us)
            .filter(|(probe, _)| carries_long_messages(probe))
            .map(|(_, us)| us)
            .sum()
    };
    let times = (long(&direct), long(&mailbox));
    let kept = if times.1 * MAILBOX_MARGIN < times.0 {
        mailbox
    } else {
        direct
    };
    Ok((kept, Some(times)))
}

/// The measurement of several jobs measured alike: each probe's best time, and the
/// parameters fitted to those.
fn best_of(runs: &[Measured]) -> Result<Measured, String> {
    let first = &runs[0];
    let probes_us: Vec<f64> = (0..PROBES.len())
        .map(|i| {
            runs.iter()
                .map(|r| r.probes_us[i])
                .fold(f64::INFINITY, f64::min)
        })
        .collect();
    let entry = &first.entry;
    let params = MachineParams::from_probes(
        entry.team_size,
        entry.params.cores,
        entry.direct_reads,
        &probes_us,
    )
    .map_err(|e| e.to_string())?;
    Ok(Measured {
        entry: CalibrationEntry {
            params,
            ..entry.clone()
        },
        probes_us,
    })
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
        println!("{}", format!("  {name:<14} {value:>9.3} {unit}").trim_end());
    }
    if let Some(cores) = p.cores {
        println!("  {:<14} {cores:>9} (the ranks share them)", "processors");
    }
}
