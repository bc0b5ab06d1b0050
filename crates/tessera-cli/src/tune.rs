//! `tessera tune`: measure every collective algorithm (and tree radix) for every operation
//! over message sizes from 8 B to 1 MiB and team sizes from 2 to N, and write the tuning
//! table the runtime then follows (`tessera::model::tuning`).
//!
//! One job per team size (powers of two up to N, and N itself); rank 0 of each shows a
//! progress bar and writes its measurements, and the driver turns the fastest algorithm
//! per (operation, team size, message size) into size rules. Then it prints what tuning
//! cost (seed 004 Table 2): the time spent per operation and size, the table's size, and
//! what a call pays to look its choice up.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use tessera::model::team::default_algorithm;
use tessera::model::tuning::{self, Entry, Rule, TuningTable};
use tessera::{Collective, Context, Job, RankResult, Team};

use crate::bench::coll::{points, sweep, Buffers, PASSES, QUICK_SIZES, SIZES};
use crate::bench::rma::record;
use crate::bench::{run_part, Part, Record};
use crate::JobArgs;

/// The body of each tuning job.
pub(crate) fn rank_main(ctx: &Context, out_file: &Path, quick: bool) -> RankResult {
    let world = Team::world(ctx)?;
    let n = world.size();
    // Buffers in `Vec`s, as for the calibration (see `calibrate::rank_main`).
    let mut bufs = Buffers::new(&world, SIZES.iter().max().copied().unwrap_or(8), true)?;
    let points = points(if quick { &QUICK_SIZES } else { &SIZES });
    let bar = if ctx.rank() == 0 {
        ProgressBar::new((points.len() * PASSES) as u64)
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(
        ProgressStyle::with_template("tune: {prefix} [{bar:30}] {pos}/{len} {msg} ({elapsed})")
            .expect("the template is valid")
            .progress_chars("=> "),
    );
    bar.set_prefix(format!("{n} ranks"));
    let choices = |op: Collective| -> tessera::Result<Vec<Team>> {
        world
            .candidates(op)
            .into_iter()
            .map(|alg| world.with_algorithm(op, alg))
            .collect()
    };
    // Wall time per point (all its candidates, every pass): what tuning it cost.
    let mut spent: BTreeMap<(&str, usize), f64> = BTreeMap::new();
    let mut current: Option<((&str, usize), Instant)> = None;
    let mut charge = |current: Option<((&'static str, usize), Instant)>, now: Instant| {
        if let Some((key, since)) = current {
            *spent.entry(key).or_default() += (now - since).as_secs_f64();
        }
    };
    let timed = sweep(&points, &choices, n, quick, &mut bufs, &mut |op, bytes| {
        let now = Instant::now();
        charge(current.take(), now);
        current = Some(((op.name(), bytes), now));
        bar.set_message(format!("{} {bytes} B", op.name()));
        bar.inc(1);
    })?;
    charge(current.take(), Instant::now());
    let mut part = Part::default();
    for (&(op, bytes), &secs) in &spent {
        part.results.push(record(op, bytes, n, "tuning_s", secs));
    }
    for (&(op, bytes), times) in points.iter().zip(timed) {
        for (alg, best) in world.candidates(op).into_iter().zip(times) {
            part.results.push(Record {
                algorithm: Some(alg.to_string()),
                ..record(op.name(), bytes, n, "latency_us", best * 1e6)
            });
        }
    }
    bar.finish_and_clear();
    if ctx.rank() == 0 {
        std::fs::write(out_file, serde_json::to_string(&part)?)?;
    }
    Ok(())
}

/// How much faster than the model's choice another algorithm must measure to replace it:
/// differences below this are noise on a shared machine, and following them would only
/// make the rules flap between equivalent algorithms.
const MARGIN: f64 = 1.03;

/// Size rules from measurements: at each measured size the model's choice unless another
/// algorithm beat it by more than [`MARGIN`], neighbours with the same winner merged, each
/// boundary halfway (geometrically) between two sizes.
pub(crate) fn table_from(results: &[Record], machine: String) -> TuningTable {
    // (op, team size) → bytes → algorithm → latency
    let mut by_key: BTreeMap<(String, u64), BTreeMap<u64, BTreeMap<String, f64>>> = BTreeMap::new();
    for r in results {
        let Some(alg) = &r.algorithm else { continue };
        by_key
            .entry((r.op.clone(), r.ranks))
            .or_default()
            .entry(r.bytes)
            .or_default()
            .insert(alg.clone(), r.value);
    }
    let mut entries = Vec::new();
    for ((op, team_size), measured) in by_key {
        let collective = Collective::ALL.into_iter().find(|c| c.name() == op);
        let sizes: Vec<(u64, String)> = measured
            .into_iter()
            .map(|(bytes, times)| {
                let (best, fastest) = times
                    .iter()
                    .min_by(|a, b| a.1.total_cmp(b.1))
                    .map(|(a, &t)| (t, a.clone()))
                    .unwrap_or((f64::INFINITY, String::new()));
                let model = collective
                    .map(|c| default_algorithm(c, team_size as usize, bytes as usize).to_string());
                let choice = match model {
                    Some(m) if times.get(&m).is_some_and(|&t| t <= best * MARGIN) => m,
                    _ => fastest,
                };
                (bytes, choice)
            })
            .collect();
        let mut rules: Vec<Rule> = Vec::new();
        for (i, (bytes, alg)) in sizes.iter().enumerate() {
            let bound = sizes
                .get(i + 1)
                .map(|(next, _)| ((*bytes.max(&1) as f64) * (*next as f64)).sqrt() as u64);
            match rules.last_mut() {
                Some(last) if &last.algorithm == alg => last.up_to_bytes = bound,
                _ => rules.push(Rule {
                    up_to_bytes: bound,
                    algorithm: alg.clone(),
                }),
            }
        }
        entries.push(Entry {
            op,
            team_size: team_size as usize,
            rules,
        });
    }
    TuningTable { machine, entries }
}

/// `tessera tune -n N [-o FILE] [--quick]`.
pub(crate) fn drive(job: &JobArgs, output: Option<&Path>, quick: bool) -> Result<ExitCode, String> {
    if job.ranks() < 2 {
        return Err("tune needs at least 2 ranks (-n 2 or more)".into());
    }
    let path: PathBuf = match output {
        Some(p) => p.to_path_buf(),
        None => tuning::default_path().ok_or(
            "no default location for the tuning table (neither XDG_CONFIG_HOME nor HOME is set); give one with -o FILE",
        )?,
    };
    let started = Instant::now();
    let mut team_sizes: Vec<u32> = (1..)
        .map(|k| 1u32 << k)
        .take_while(|&s| s <= job.ranks())
        .collect();
    if team_sizes.last() != Some(&job.ranks()) {
        team_sizes.push(job.ranks());
    }
    let quick_flag: &[&str] = if quick { &["--quick"] } else { &[] };
    let mut results = Vec::new();
    for &ranks in &team_sizes {
        let sub = job.with_ranks(ranks);
        results.extend(run_part(&sub, "tune", quick_flag)?.results);
    }
    let system = crate::bench::system(job.conduit.name());
    let table = table_from(
        &results,
        format!(
            "{}, {} cores, {} conduit",
            system.cpu, system.cores, system.conduit
        ),
    );
    table
        .check()
        .map_err(|e| format!("the measured table is inconsistent: {e}"))?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    }
    let text = serde_json::to_string_pretty(&table).map_err(|e| e.to_string())?;
    let json_bytes = text.len() + 1;
    std::fs::write(&path, text + "\n").map_err(|e| format!("writing {}: {e}", path.display()))?;
    for e in &table.entries {
        let rules: Vec<String> = e
            .rules
            .iter()
            .map(|r| match r.up_to_bytes {
                Some(b) => format!("≤{b} B {}", r.algorithm),
                None => format!("then {}", r.algorithm),
            })
            .collect();
        println!(
            "{:<10} team of {:<3} {}",
            e.op,
            e.team_size,
            rules.join(", ")
        );
    }
    print_cost(&results, &table, json_bytes)?;
    // Collectives read the default location by themselves; a table written elsewhere
    // takes effect only where TESSERA_TUNING names it.
    let follow = if tuning::default_path().as_deref() == Some(path.as_path()) {
        "collectives now follow it (TESSERA_TUNING=FILE picks another, TESSERA_TUNING=none none)"
            .to_string()
    } else {
        format!(
            "collectives follow it where TESSERA_TUNING={} is set",
            path.display()
        )
    };
    println!(
        "wrote {} in {:.0} s; {follow}",
        path.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(ExitCode::SUCCESS)
}

/// What tuning cost, as seed 004's Table 2 reports it: seconds spent per operation and
/// message size (all team sizes), the table's size, and the time a call takes to look up
/// its algorithm in it (against the model's choice, which needs no table).
fn print_cost(results: &[Record], table: &TuningTable, json_bytes: usize) -> Result<(), String> {
    let mut cost: BTreeMap<&str, BTreeMap<u64, f64>> = BTreeMap::new();
    for r in results.iter().filter(|r| r.metric == "tuning_s") {
        *cost.entry(&r.op).or_default().entry(r.bytes).or_default() += r.value;
    }
    let sizes: Vec<u64> = cost
        .values()
        .flat_map(|m| m.keys().copied())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    println!("\ntuning cost, milliseconds per operation and message size (all team sizes):");
    let header: Vec<String> = sizes.iter().map(|b| format!("{b:>9}")).collect();
    println!("{:<13} {} {:>9}", "op \\ bytes", header.join(" "), "total");
    let mut total = 0.0;
    for op in Collective::ALL.map(|c| c.name()) {
        let Some(by_size) = cost.get(op) else {
            continue;
        };
        let cells: Vec<String> = sizes
            .iter()
            .map(|b| {
                by_size
                    .get(b)
                    .map_or(format!("{:>9}", "-"), |s| format!("{:>9.1}", s * 1e3))
            })
            .collect();
        let sum: f64 = by_size.values().sum();
        total += sum;
        println!("{op:<13} {} {:>9.1}", cells.join(" "), sum * 1e3);
    }
    let rules: usize = table.entries.iter().map(|e| e.rules.len()).sum();
    println!(
        "total {total:.1} s; table: {} entries, {rules} rules, {json_bytes} bytes as JSON ({:.0} per rule), {} bytes per rule once a team resolves it",
        table.entries.len(),
        json_bytes as f64 / rules.max(1) as f64,
        std::mem::size_of::<(Option<u64>, tessera::Algorithm)>()
    );
    let (with_table, model) = lookup_cost(table).map_err(|e| format!("timing lookups: {e}"))?;
    println!(
        "lookup: {:.1} ns per call with the table, {:.1} ns with the model alone",
        with_table * 1e9,
        model * 1e9
    );
    Ok(())
}

/// Seconds per `Team::algorithm_for` (a blocking call's whole choice: forced, table,
/// model) on a team following `table`, and on one following an empty table (the model).
fn lookup_cost(table: &TuningTable) -> tessera::Result<(f64, f64)> {
    let out = std::sync::Mutex::new((0.0, 0.0));
    Job::threads(1).segment(1 << 20).run(|ctx| {
        let world = Team::world(ctx)?;
        let time = |team: &Team| {
            let points = points(&SIZES);
            let rounds = 20_000;
            let t0 = Instant::now();
            for _ in 0..rounds {
                for &(op, bytes) in &points {
                    std::hint::black_box(team.algorithm_for(op, std::hint::black_box(bytes)));
                }
            }
            t0.elapsed().as_secs_f64() / (rounds * points.len()) as f64
        };
        let measured = (
            time(&world.with_tuning_table(table)),
            time(&world.with_tuning_table(&TuningTable::default())),
        );
        *out.lock().expect("one rank") = measured;
        Ok(())
    })?;
    Ok(out.into_inner().expect("one rank"))
}
