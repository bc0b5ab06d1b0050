//! `tessera bench`: micro-benchmarks that report ratios measured in the same run.
//!
//! The driver (this module) launches jobs of the `tessera` executable itself; rank 0 of
//! each job writes its part of the results to a temporary JSON file, and the driver merges
//! the parts, prints a table and writes the JSON report.

pub(crate) mod coll;
pub(crate) mod grid;
pub(crate) mod rma;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Subcommand;
use serde::{Deserialize, Serialize};

use crate::JobArgs;

#[derive(Subcommand)]
pub(crate) enum BenchCommand {
    /// Put/get latency and bandwidth, signalling put, active-message round trip, barrier.
    Rma {
        #[command(flatten)]
        job: JobArgs,
        /// Write the JSON report here.
        #[arg(long)]
        json: Option<PathBuf>,
        /// Rank counts at which to measure the barrier (each is a separate job).
        #[arg(long, value_delimiter = ',', default_values_t = vec![2u32, 4, 8])]
        barrier_ranks: Vec<u32>,
        /// Fewer iterations (a smoke test; figures are noisier).
        #[arg(long)]
        quick: bool,
    },
    /// Ghost exchange of a 3-D block per rank with each strategy (6msg, 26msg, and the
    /// hand-packed baseline), and one-sided grid copy bandwidth against memcpy.
    Grid {
        #[command(flatten)]
        job: JobArgs,
        /// Write the JSON report here.
        #[arg(long)]
        json: Option<PathBuf>,
        /// Points along each edge of a rank's block.
        #[arg(long, default_value_t = 128)]
        edge: usize,
        /// Fewer iterations (a smoke test; figures are noisier).
        #[arg(long)]
        quick: bool,
    },
    /// Latency of every collective, with the model's choice ("tuned") and every fixed
    /// algorithm, from 8 B to 1 MiB.
    Coll {
        #[command(flatten)]
        job: JobArgs,
        /// Write the JSON report here.
        #[arg(long)]
        json: Option<PathBuf>,
        /// Fewer sizes and iterations (a smoke test).
        #[arg(long)]
        quick: bool,
        /// Also print the cost model's predicted time beside each measured one, and how
        /// often the model's choice is within 10% of the best fixed algorithm.
        #[arg(long)]
        model: bool,
        /// Keep the private buffers in ordinary `Vec`s rather than on huge pages
        /// (`tessera::HugePageArray`): a peer reads long messages between 4 KiB pages about
        /// half as fast.
        #[arg(long)]
        plain_buffers: bool,
    },
}

impl BenchCommand {
    /// How its jobs start.
    pub(crate) fn job(&self) -> &JobArgs {
        match self {
            BenchCommand::Rma { job, .. }
            | BenchCommand::Grid { job, .. }
            | BenchCommand::Coll { job, .. } => job,
        }
    }

    /// Where the report goes as JSON, if anywhere.
    pub(crate) fn json(&self) -> Option<&Path> {
        match self {
            BenchCommand::Rma { json, .. }
            | BenchCommand::Grid { json, .. }
            | BenchCommand::Coll { json, .. } => json.as_deref(),
        }
    }
}

/// One measured figure.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub(crate) struct Record {
    pub op: String,
    /// The collective algorithm (`"tuned"`: the model's choice); absent for `bench rma`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub algorithm: Option<String>,
    pub bytes: u64,
    pub ranks: u64,
    /// `latency_us` or `bandwidth_mbs`.
    pub metric: String,
    pub value: f64,
    /// mpi conduit, between two ranks: `same_host` or `cross_host`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pair: Option<String>,
    /// On `"tuned"` rows: the algorithm the tuned choice resolved to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub choice: Option<String>,
}

/// Baselines measured in the same run.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct Baselines {
    /// memcpy bandwidth (MB/s, 10^6 bytes per second) per size in bytes.
    pub memcpy_bandwidth_mbs: BTreeMap<String, f64>,
    /// A cache line from one rank to another and back, in microseconds (`bench rma`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cacheline_roundtrip_us: Option<f64>,
}

/// What rank 0 of a benchmark job writes.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct Part {
    pub results: Vec<Record>,
    pub baselines: Option<Baselines>,
}

/// The machine the figures come from.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct System {
    pub cpu: String,
    pub cores: usize,
    pub conduit: String,
}

/// The JSON report.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Report {
    pub system: System,
    pub results: Vec<Record>,
    pub baselines: Baselines,
    /// Where `bench coll` kept its private buffers ("huge pages" or "Vecs"); absent for
    /// the other benchmarks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buffers: Option<String>,
}

impl Report {
    /// The report of one benchmark job.
    fn from_part(part: Part, job: &JobArgs) -> Result<Report, String> {
        Ok(Report {
            system: system(job.conduit.name()),
            results: part.results,
            baselines: part
                .baselines
                .ok_or("the benchmark job reported no baselines")?,
            buffers: None,
        })
    }

    /// Write the JSON report if asked to, and say so.
    fn write_json(&self, path: Option<&Path>) -> Result<ExitCode, String> {
        if let Some(path) = path {
            write_json(path, self)?;
            println!("wrote {}", path.display());
        }
        Ok(ExitCode::SUCCESS)
    }
}

/// The machine this runs on: its processor as `/proc/cpuinfo` names it, with family,
/// model and widest vector extension (a virtual machine's name often says only "AMD
/// EPYC", and figures differ between generations and between AVX2 and AVX-512 hosts).
pub(crate) fn system(conduit: &str) -> System {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    System {
        cpu: describe_processor(&cpuinfo),
        cores,
        conduit: conduit.into(),
    }
}

/// "NAME (family F model M, AVX-512)" from the text of `/proc/cpuinfo` (its first
/// processor); "unknown" where it names none.
fn describe_processor(cpuinfo: &str) -> String {
    let field = |name: &str| {
        cpuinfo.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            (key.trim() == name).then(|| value.trim().to_string())
        })
    };
    let Some(name) = field("model name") else {
        return "unknown".into();
    };
    let flags = field("flags").unwrap_or_default();
    let has = |flag: &str| flags.split_whitespace().any(|f| f == flag);
    let vector = if has("avx512f") {
        Some("AVX-512")
    } else if has("avx2") {
        Some("AVX2 only")
    } else {
        None
    };
    let mut details = Vec::new();
    if let (Some(family), Some(model)) = (field("cpu family"), field("model")) {
        details.push(format!("family {family} model {model}"));
    }
    details.extend(vector.map(String::from));
    if details.is_empty() {
        name
    } else {
        format!("{name} ({})", details.join(", "))
    }
}

pub(crate) fn run_part(job: &JobArgs, kind: &str, extra: &[&str]) -> Result<Part, String> {
    let text = run_rank_job(job, kind, extra, &[])?;
    serde_json::from_str(&text).map_err(|e| format!("parsing the benchmark's result: {e}"))
}

/// Run `tessera __rank KIND --out FILE EXTRA...` as a job of `job`'s ranks, with `env`
/// set in every rank, and return what its rank 0 wrote to FILE.
pub(crate) fn run_rank_job(
    job: &JobArgs,
    kind: &str,
    extra: &[&str],
    env: &[(&str, &str)],
) -> Result<String, String> {
    let result = crate::ResultFile::new(&format!("bench-{}.json", job.ranks()))?;
    let out = result.path().to_string_lossy().into_owned();
    let mut args = vec![kind, "--out", out.as_str()];
    args.extend_from_slice(extra);
    // The tuner's rank 0 draws a bar of its own.
    let bar = if kind == "tune" {
        indicatif::ProgressBar::hidden()
    } else {
        job.progress(None, "{spinner} {msg} ({elapsed})")
    };
    bar.set_message(format!(
        "{kind} on {} rank(s) of the {} conduit",
        job.ranks(),
        job.conduit
    ));
    let mut launch = job.launch_self(&args)?;
    launch
        .env
        .extend(env.iter().map(|&(k, v)| (k.into(), v.into())));
    let outcome = result.guard(launch).run();
    bar.finish_and_clear();
    let outcome = outcome.map_err(|e| e.to_string())?;
    if outcome.code != 0 {
        let why = outcome.failure.map(|f| f.1).unwrap_or_default();
        return Err(format!(
            "benchmark job on {} ranks failed: {why}",
            job.ranks()
        ));
    }
    result.read()
}

fn write_json(path: &Path, report: &Report) -> Result<(), String> {
    let text = serde_json::to_string_pretty(report).map_err(|e| e.to_string())?;
    std::fs::write(path, text + "\n").map_err(|e| format!("writing {}: {e}", path.display()))
}

fn print_table(report: &Report) {
    println!(
        "{:<24} {:>9} {:>6} {:>14}  vs baseline",
        "op", "bytes", "ranks", "value"
    );
    for r in &report.results {
        let (value, note) = match r.metric.as_str() {
            "bandwidth_mbs" => {
                let base = report
                    .baselines
                    .memcpy_bandwidth_mbs
                    .get(&r.bytes.to_string());
                let note = base
                    .map(|b| format!("{:.0}% of memcpy", 100.0 * r.value / b))
                    .unwrap_or_default();
                (format!("{:.0} MB/s", r.value), note)
            }
            _ => {
                let note = report
                    .baselines
                    .cacheline_roundtrip_us
                    .map(|c| format!("{:.2}x cache-line round trip", r.value / c))
                    .unwrap_or_default();
                (format!("{:.4} us", r.value), note)
            }
        };
        println!(
            "{:<24} {:>9} {:>6} {:>14}  {}",
            r.op, r.bytes, r.ranks, value, note
        );
    }
    if let Some(c) = report.baselines.cacheline_roundtrip_us {
        println!("baseline: cache-line round trip {c:.4} us");
    }
}

/// Time per operation of a figure, in microseconds (latencies as they are, bandwidths
/// as the time of one transfer of their size).
fn time_per_op_us(r: &Record) -> Option<f64> {
    match r.metric.as_str() {
        "latency_us" => Some(r.value),
        "bandwidth_mbs" if r.value > 0.0 => Some(r.bytes as f64 / r.value),
        _ => None,
    }
}

/// What counting communication (`--stats`) added to each operation: the same figures
/// measured in a job without statistics and one with, side by side.
fn print_counting_cost(plain: &[Record], counted: &[Record]) {
    println!(
        "counting communication (--stats): time per operation without and with it\n{:<24} {:>9} {:>12} {:>12} {:>10}",
        "op", "bytes", "without us", "with us", "added ns"
    );
    let mut added = Vec::new();
    for c in counted {
        let Some(p) = plain.iter().find(|p| {
            (&p.op, &p.algorithm, p.bytes, p.ranks) == (&c.op, &c.algorithm, c.bytes, c.ranks)
        }) else {
            continue;
        };
        if let (Some(tp), Some(tc)) = (time_per_op_us(p), time_per_op_us(c)) {
            let ns = (tc - tp) * 1e3;
            added.push(ns);
            let op = match &c.algorithm {
                Some(alg) => format!("{} {alg}", c.op),
                None => c.op.clone(),
            };
            println!("{op:<24} {:>9} {tp:>12.4} {tc:>12.4} {ns:>10.1}", c.bytes);
        }
    }
    added.sort_by(f64::total_cmp);
    if let Some(median) = added.get(added.len() / 2) {
        println!("median added per operation: {median:.1} ns (noise included: compare rows with themselves across runs)\n");
    }
}

pub(crate) fn drive(command: BenchCommand) -> Result<ExitCode, String> {
    match command {
        BenchCommand::Rma {
            job,
            json,
            barrier_ranks,
            quick,
        } => {
            if job.ranks() < 2 {
                return Err("bench rma needs at least 2 ranks (-n 2)".into());
            }
            let quick_flag: &[&str] = if quick { &["--quick"] } else { &[] };
            job.say(&format!(
                "bench rma: {} ranks, {} conduit ...",
                job.ranks(),
                job.conduit
            ));
            // With statistics on, the same job without them first, for what counting costs.
            let uncounted = match job.stats {
                Some(_) => Some(run_part(&job.without_stats(), "bench-rma", quick_flag)?),
                None => None,
            };
            let main = run_part(&job, "bench-rma", quick_flag)?;
            if let Some(plain) = &uncounted {
                print_counting_cost(&plain.results, &main.results);
            }
            let mut results = main.results;
            let baselines = main
                .baselines
                .ok_or("the benchmark job reported no baselines")?;
            for &n in barrier_ranks.iter().filter(|&&n| n != job.ranks()) {
                job.say(&format!("bench rma: barrier at {n} ranks ..."));
                let sub = job.with_ranks(n);
                let mut extra = vec!["--barrier-only"];
                extra.extend_from_slice(quick_flag);
                results.extend(run_part(&sub, "bench-rma", &extra)?.results);
            }
            let report = Report {
                system: system(job.conduit.name()),
                results,
                baselines,
                buffers: None,
            };
            print_table(&report);
            report.write_json(json.as_deref())
        }
        BenchCommand::Grid {
            job,
            json,
            edge,
            quick,
        } => {
            if job.ranks() < 2 || edge < 2 {
                return Err(
                    "bench grid needs at least 2 ranks (-n 2) and --edge of at least 2".into(),
                );
            }
            job.say(&format!(
                "bench grid: {} ranks, {} conduit, {edge}^3 points per rank ...",
                job.ranks(),
                job.conduit
            ));
            let edge_arg = edge.to_string();
            let mut extra = vec!["--edge", edge_arg.as_str()];
            if quick {
                extra.push("--quick");
            }
            let part = run_part(&job, "bench-grid", &extra)?;
            let report = Report::from_part(part, &job)?;
            print_table(&report);
            if let Some(packed) = report.results.iter().find(|r| r.op == "ghost_packed") {
                for r in report.results.iter().filter(|r| r.op.starts_with("ghost_")) {
                    println!(
                        "{:<24} {:.2}x the hand-packed exchange's time",
                        r.op,
                        r.value / packed.value
                    );
                }
            }
            report.write_json(json.as_deref())
        }
        BenchCommand::Coll {
            job,
            json,
            quick,
            model,
            plain_buffers,
        } => {
            job.say(&format!(
                "bench coll: {} ranks, {} conduit, buffers {} ...",
                job.ranks(),
                job.conduit,
                if plain_buffers {
                    "in Vecs"
                } else {
                    "on huge pages"
                }
            ));
            let mut flags: Vec<&str> = Vec::new();
            if quick {
                flags.push("--quick");
            }
            if plain_buffers {
                flags.push("--plain-buffers");
            }
            let uncounted = match job.stats {
                Some(_) => Some(run_part(&job.without_stats(), "bench-coll", &flags)?),
                None => None,
            };
            let part = run_part(&job, "bench-coll", &flags)?;
            if let Some(plain) = &uncounted {
                print_counting_cost(&plain.results, &part.results);
            }
            let mut report = Report::from_part(part, &job)?;
            report.buffers = Some(if plain_buffers { "Vecs" } else { "huge pages" }.into());
            coll::print_table(&report);
            if model {
                coll::print_model(&report);
            }
            report.write_json(json.as_deref())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::describe_processor;

    #[test]
    fn the_processor_is_named_with_family_model_and_vectors() {
        let zen4 = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\n\
                    model name\t: AMD EPYC\nflags\t\t: fpu avx avx2 avx512f avx512bw\n\n\
                    processor\t: 1\nmodel name\t: other\n";
        assert_eq!(
            describe_processor(zen4),
            "AMD EPYC (family 25 model 17, AVX-512)"
        );
        let zen3 = "cpu family\t: 25\nmodel\t\t: 1\nmodel name\t: AMD EPYC\nflags\t\t: avx avx2\n";
        assert_eq!(
            describe_processor(zen3),
            "AMD EPYC (family 25 model 1, AVX2 only)"
        );
        assert_eq!(describe_processor("model name\t: Some CPU\n"), "Some CPU");
        assert_eq!(describe_processor(""), "unknown");
    }
}
