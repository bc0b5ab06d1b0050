//! `tessera npb`: run NAS Parallel Benchmark kernels as jobs and report them.

use std::path::Path;
use std::process::ExitCode;

use tessera::{Context, RankResult};
use tessera_npb::hardware::Hardware;
use tessera_npb::{Class, Kernel, Outcome};

use crate::JobArgs;

/// Validate everything up front: a bad kernel, class, rank count or variant is a one-line
/// error naming what is allowed.
fn plan(
    kernel: &str,
    class: &str,
    job: &JobArgs,
    variant: Option<&str>,
) -> Result<(Vec<Kernel>, Class), String> {
    let ranks = job.ranks() as usize;
    let kernels = if kernel.eq_ignore_ascii_case("all") {
        // Every kernel that runs at this rank count; say which ones cannot.
        let (runnable, skipped): (Vec<Kernel>, Vec<Kernel>) = Kernel::ALL
            .into_iter()
            .partition(|k| k.check_ranks(ranks).is_ok());
        for k in skipped {
            eprintln!(
                "npb: skipping {}: {}",
                k.name().to_uppercase(),
                k.check_ranks(ranks).unwrap_err()
            );
        }
        if runnable.is_empty() {
            return Err(format!("no kernel runs on {ranks} ranks"));
        }
        runnable
    } else {
        vec![kernel.parse::<Kernel>().map_err(|e| e.to_string())?]
    };
    let class = class.parse::<Class>().map_err(|e| e.to_string())?;
    tessera_npb::check_settings().map_err(|e| e.to_string())?;
    for k in &kernels {
        k.check_run(class, variant.unwrap_or(k.variants()[0]), ranks)
            .map_err(|e| e.to_string())?;
        check_memory(*k, class, job)?;
    }
    Ok((kernels, class))
}

/// Refuse, before starting, a run whose arrays cannot fit in this machine's memory (all
/// ranks share it on the smp and threads conduits; across hosts under mpi each host has
/// its own, which this cannot see).
fn check_memory(kernel: Kernel, class: Class, job: &JobArgs) -> Result<(), String> {
    if job.conduit.processes() == tessera::conduit::Processes::ByMpiLauncher {
        return Ok(());
    }
    let ranks = job.ranks() as usize;
    let need = peak_per_rank(kernel.footprint(class, ranks).total()).saturating_mul(ranks as u64);
    match tessera::job::available_memory() {
        Some(available) if need > available => Err(format!(
            "{} class {class} on {ranks} rank(s) needs about {:.1} GiB of memory, but {:.1} GiB is available here; run a smaller class, or spread it over hosts with --conduit mpi",
            kernel.name().to_uppercase(),
            need as f64 / GIB,
            available as f64 / GIB
        )),
        // Said where it matters: a run that takes a large share of the machine.
        Some(available) if need > available / 4 => {
            eprintln!(
                "npb: {} class {class} on {ranks} rank(s) needs about {:.1} GiB of memory; {:.1} GiB is available",
                kernel.name().to_uppercase(),
                need as f64 / GIB,
                available as f64 / GIB
            );
            Ok(())
        }
        _ => Ok(()),
    }
}

const GIB: f64 = (1u64 << 30) as f64;

/// A rank's peak resident memory for arrays of `arrays` bytes: half as much again for what
/// generating and sorting them holds at once, and 64 MiB for the program and the runtime.
/// At class B on 2 ranks this is above every kernel's measured peak resident size (CG 114
/// MiB against 197, IS 309 against 355, MG 234 against 389, FT 1165 against 1600).
fn peak_per_rank(arrays: usize) -> u64 {
    (arrays as u64).saturating_add(arrays as u64 / 2) + (64 << 20)
}

/// The segment each rank needs for `kernel` at `class`: what it allocates collectively,
/// an eighth more and 64 MiB for the runtime, and never less than the default.
fn segment_for(kernel: Kernel, class: Class, ranks: usize) -> usize {
    let need = kernel.footprint(class, ranks).segment;
    (need + need / 8 + (64 << 20))
        .next_multiple_of(1 << 20)
        .max(tessera::job::DEFAULT_SEGMENT)
}

/// The watchdog on every wait inside a kernel, in seconds. The longest legitimate wait is
/// a rank waiting while a peer generates its share of the data or finishes a slower part,
/// which grows with the class: well under 120 s up to B; C's arrays are 4–16 times B's and
/// D's 16–64 times C's.
fn wait_timeout_s(class: Class) -> &'static str {
    match class {
        Class::S | Class::W | Class::A | Class::B => "120",
        Class::C => "900",
        Class::D => "7200",
    }
}

/// Measure the limits the kernels are compared with, before any rank starts, and say
/// what they are.
fn measure_hardware(ranks: usize) -> Hardware {
    eprintln!("npb: measuring memory bandwidth and the floating-point peak ...");
    let hw = Hardware::measure(ranks);
    eprintln!(
        "npb: triad {:.1} GB/s on {} thread(s), memcpy {:.1} GB/s on one, {:.1} Gflop/s per core at {}",
        hw.triad_bytes_per_s * 1e-9,
        hw.threads,
        hw.memcpy_bytes_per_s * 1e-9,
        hw.flops_per_core * 1e-9,
        hw.level
    );
    hw
}

pub(crate) fn drive(
    kernel: &str,
    class: &str,
    job: &JobArgs,
    variant: Option<&str>,
    json: Option<&Path>,
    bounds: bool,
) -> Result<ExitCode, String> {
    // A sweep (-n 1,2,4) runs every count in turn; every count is checked before any runs.
    let jobs = job.sweep();
    let plans = jobs
        .iter()
        .map(|j| plan(kernel, class, j, variant))
        .collect::<Result<Vec<_>, String>>()?;
    let class = plans[0].1;
    let most = jobs.iter().map(|j| j.ranks()).max().unwrap_or(1);
    let hardware = bounds.then(|| measure_hardware(most as usize));
    let runs: Vec<(&JobArgs, Kernel)> = jobs
        .iter()
        .zip(&plans)
        .flat_map(|(j, (kernels, _))| kernels.iter().map(move |&k| (j, k)))
        .collect();
    let mut outcomes = Vec::new();
    let bar = job.progress(
        Some(runs.len() as u64),
        "npb: {spinner} [{bar:20}] {pos}/{len} running {msg} ({elapsed} in all)",
    );
    for (done, &(job_n, k)) in runs.iter().enumerate() {
        let line = format!(
            "npb: {} class {class} on {} rank(s) of the {} conduit ...",
            k.name().to_uppercase(),
            job_n.ranks(),
            job_n.conduit
        );
        job.status(&bar, &line);
        bar.set_position(done as u64);
        bar.set_message(format!(
            "{} class {class} on {} rank(s)",
            k.name().to_uppercase(),
            job_n.ranks()
        ));
        // The user's statistics file, one per kernel and rank count when several run.
        let stats = job.stats.as_ref().map(|f| {
            let f = if job.is_sweep() {
                crate::named(f, &format!("n{}", job_n.ranks()))
            } else {
                f.clone()
            };
            if runs.len() > jobs.len() {
                crate::named(&f, k.name())
            } else {
                f
            }
        });
        let mut o = match run_kernel(k, class, job_n, variant, stats)? {
            Ok(o) => o,
            Err(quietly) => return Ok(quietly),
        };
        o.bound = hardware.as_ref().and_then(|hw| hw.bound(&o));
        bar.suspend(|| print!("{o}"));
        outcomes.push(o);
    }
    bar.finish_and_clear();
    if outcomes.len() > 1 {
        println!(
            "\n {:<6} {:<5} {:>6} {:>12} {:>12} {:>14} {:>7} {:>8}  verification",
            "kernel", "class", "ranks", "time (s)", "Mop/s", "MiB/rank", "SIMD", "bound"
        );
        for o in &outcomes {
            let v = match o.verified {
                Some(true) => "SUCCESSFUL",
                Some(false) => "UNSUCCESSFUL",
                None => "NOT PERFORMED",
            };
            let peak = o.resident_share_bytes.iter().max().copied().unwrap_or(0) >> 20;
            let bound = o
                .bound
                .as_ref()
                .map_or("-".to_string(), |b| format!("{:.1}%", 100.0 * b.fraction));
            println!(
                " {:<6} {:<5} {:>6} {:>12.3} {:>12.2} {:>14} {:>7} {bound:>8}  {v}",
                o.kernel, o.class, o.ranks, o.time_s, o.mops, peak, o.simd
            );
        }
    }
    if let Some(path) = json {
        let text = if outcomes.len() == 1 {
            serde_json::to_string_pretty(&outcomes[0])
        } else {
            serde_json::to_string_pretty(&outcomes)
        }
        .map_err(|e| e.to_string())?;
        std::fs::write(path, text + "\n")
            .map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    let failed = outcomes.iter().any(|o| o.verified == Some(false));
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Run kernel `k` as one job and read its outcome, with the communication its statistics
/// counted (kept in `stats` when given); the exit code to end with quietly when the
/// output was closed.
fn run_kernel(
    k: Kernel,
    class: Class,
    job: &JobArgs,
    variant: Option<&str>,
    stats: Option<std::path::PathBuf>,
) -> Result<Result<Outcome, ExitCode>, String> {
    let v = variant.unwrap_or(k.variants()[0]);
    let result = crate::ResultFile::new(&format!("npb-{}.json", k.name()))?;
    let file = result.path();
    // Every run counts its communication for the report; the statistics go where the
    // user asked, else beside the result.
    let stats_file = stats.unwrap_or_else(|| result.beside("stats.json"));
    let mut launch = result.guard(job.launch_self(&[
        "npb",
        k.name(),
        "--class",
        &class.to_string(),
        "--variant",
        v,
        "--out",
        &file.to_string_lossy(),
    ])?);
    // Size the segment for the kernel unless the user chose one.
    if launch.segment.is_none() && tessera::config::raw("TESSERA_SEGMENT").is_none() {
        let bytes = segment_for(k, class, job.ranks() as usize);
        launch.segment = Some(format!("{}M", bytes >> 20));
    }
    // No kernel waits long in a correct run, so a wait that does is a bug: fail naming
    // it instead of hanging (TESSERA_WAIT_TIMEOUT in the environment overrides this).
    if tessera::config::raw("TESSERA_WAIT_TIMEOUT").is_none() {
        launch
            .env
            .push(("TESSERA_WAIT_TIMEOUT".into(), wait_timeout_s(class).into()));
    }
    launch
        .env
        .push(("TESSERA_STATS".into(), stats_file.clone().into()));
    let outcome = launch.run().map_err(|e| e.to_string())?;
    if outcome.broken_pipe {
        return Ok(Err(crate::report(&outcome)));
    }
    if outcome.code != 0 {
        let why = outcome.failure.map(|f| f.1).unwrap_or_default();
        return Err(format!(
            "{} class {class} on {} rank(s) failed: {why}",
            k.name().to_uppercase(),
            job.ranks()
        ));
    }
    let stats = tessera::JobStats::read(&stats_file).map_err(|e| e.to_string())?;
    let text = result.read()?;
    let mut o: Outcome = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    o.communication = stats.between_ranks();
    Ok(Ok(o))
}

pub(crate) fn rank_main(
    ctx: &Context,
    kernel: &str,
    class: &str,
    variant: &str,
    out: &Path,
) -> RankResult {
    let kernel: Kernel = kernel.parse()?;
    let class: Class = class.parse()?;
    if let Some(outcome) = tessera_npb::run(ctx, kernel, class, variant)? {
        std::fs::write(out, serde_json::to_string(&outcome)?)?;
    }
    Ok(())
}
