//! `tessera app summa|cholesky|lu`: the dense linear-algebra applications as jobs, with
//! an NPB-style report, the single-core DGEMM ceiling measured first, and ScaLAPACK on
//! the same problem in the same job with `--baseline scalapack`.
//!
//! The applications link OpenBLAS, so they are behind the `apps` feature; without it the
//! command says how to get them.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use crate::JobArgs;

/// The command line of `tessera app`.
#[derive(Args, Debug)]
// Without the apps feature the command only explains how to get it, reading no field.
#[cfg_attr(not(feature = "apps"), allow(dead_code))]
pub(crate) struct AppArgs {
    /// The application: summa, cholesky or lu.
    app: String,
    #[command(flatten)]
    pub(crate) job: JobArgs,
    /// Matrix order N (every matrix is N × N).
    #[arg(long, default_value_t = 2048, allow_negative_numbers = true)]
    size: i64,
    /// Block size NB (NB × NB blocks, 2-D block-cyclic).
    #[arg(long, default_value_t = 128, allow_negative_numbers = true)]
    block: i64,
    /// Generate the input matrices in NB0 × NB0 blocks and redistribute them to NB × NB
    /// before the run (timed apart and reported as Redistribution).
    #[arg(long, value_name = "NB0", allow_negative_numbers = true)]
    input_block: Option<i64>,
    /// Process grid PxQ with P·Q ranks (default: the most square with P ≤ Q).
    #[arg(long)]
    grid: Option<String>,
    /// Variant: summa has prefetch (default), blocking and onesided; cholesky lookahead1
    /// (default), blocking and lookahead; lu blocking.
    #[arg(long)]
    variant: Option<String>,
    /// Test matrix: random (default); indefinite (cholesky) or singular (lu) to see the
    /// failure reported.
    #[arg(long, default_value = "random")]
    matrix: String,
    /// Write the report as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Also run ScaLAPACK's routine on the same problem in the same job (needs
    /// --conduit mpi and a tessera built with the scalapack feature).
    #[arg(long)]
    baseline: Option<String>,
}

impl AppArgs {
    /// Where the report goes as JSON, if anywhere.
    pub(crate) fn json(&self) -> Option<&std::path::Path> {
        self.json.as_deref()
    }
}

#[cfg(not(feature = "apps"))]
pub(crate) fn drive(_args: &AppArgs) -> Result<ExitCode, String> {
    Err(
        "this tessera was built without the dense applications, which link OpenBLAS; \
         install it (apt-get install libopenblas-dev) and build with \
         `cargo build --release --features tessera-cli/apps`"
            .into(),
    )
}

#[cfg(feature = "apps")]
pub(crate) use with_apps::{drive, rank_main};

#[cfg(feature = "apps")]
mod with_apps {
    use std::path::Path;

    use super::*;
    use tessera::{Context, RankResult};
    use tessera_apps::report::{dgemm_rate, Baseline};
    use tessera_apps::{App, AppError, Problem, Report};

    /// Everything checked before a rank starts.
    fn plan(args: &AppArgs, job: &JobArgs) -> Result<Problem, String> {
        let app: App = args.app.parse().map_err(|e: AppError| e.to_string())?;
        let ranks = job.ranks() as usize;
        let problem = Problem {
            app,
            n: positive(args.size, "--size")?,
            block: positive(args.block, "--block")?,
            grid: match &args.grid {
                Some(g) => parse_grid(g)?,
                None => tessera_apps::default_grid(ranks),
            },
            variant: match &args.variant {
                Some(v) => v.parse().map_err(|e: AppError| e.to_string())?,
                None => app.variants()[0],
            },
            matrix: args.matrix.parse().map_err(|e: AppError| e.to_string())?,
            input_block: args
                .input_block
                .map(|b| positive(b, "--input-block"))
                .transpose()?,
        };
        problem.check(ranks).map_err(|e| e.to_string())?;
        if let Some(b) = &args.baseline {
            if !b.eq_ignore_ascii_case("scalapack") {
                return Err(format!("--baseline {b:?}: the only baseline is scalapack"));
            }
            tessera_apps::scalapack::available(job.conduit).map_err(|e| e.to_string())?;
        }
        // Three n × n matrices at most (SUMMA), shared by the ranks of one host; in 128
        // bits, so that no --size wraps around to a small number.
        let need = 3 * (problem.n as u128).pow(2) * 8;
        if need > isize::MAX as u128 {
            return Err(format!(
                "--size {}: three {}×{} matrices of 8-byte numbers would take {need} bytes, more than this machine can address; choose a smaller --size",
                problem.n, problem.n, problem.n
            ));
        }
        if let Some(available) = tessera::job::available_memory() {
            if need > available as u128
                && job.conduit.processes() != tessera::conduit::Processes::ByMpiLauncher
            {
                return Err(format!(
                    "{} of order {} needs about {:.1} GiB, but {:.1} GiB is available; choose a smaller --size",
                    app,
                    problem.n,
                    need as f64 / (1u64 << 30) as f64,
                    available as f64 / (1u64 << 30) as f64
                ));
            }
        }
        Ok(problem)
    }

    /// `PxQ` (or `P×Q`) to `(P, Q)`, each positive and their product representable
    /// (the check against the rank count follows in `Problem::check`).
    pub(super) fn parse_grid(text: &str) -> Result<(usize, usize), String> {
        let bad = || format!("--grid {text:?}: write the process grid as PxQ, e.g. 2x2");
        let (p, q) = text.split_once(['x', 'X', '×']).ok_or_else(bad)?;
        let side = |s: &str| -> Result<usize, String> {
            let v: usize = s.trim().parse().map_err(|_| bad())?;
            if v == 0 || v > MAX_GRID_SIDE {
                return Err(format!(
                    "--grid {text:?}: each side of the process grid must be between 1 and {MAX_GRID_SIDE} (the most ranks a job has)"
                ));
            }
            Ok(v)
        };
        Ok((side(p)?, side(q)?))
    }

    /// The longest side of a process grid: a job has at most this many ranks.
    const MAX_GRID_SIDE: usize = 4096;

    /// A positive size from the command line, or the error naming the flag.
    fn positive(value: i64, flag: &str) -> Result<usize, String> {
        usize::try_from(value)
            .ok()
            .filter(|&v| v > 0)
            .ok_or_else(|| format!("{flag} {value}: must be a positive integer"))
    }

    pub(crate) fn drive(args: &AppArgs) -> Result<ExitCode, String> {
        if args.job.is_sweep() && args.grid.is_some() {
            return Err(
                "--grid names one process grid, but a sweep (-n with several counts) needs one per count; leave --grid out and each count takes its default grid".into(),
            );
        }
        // Every count of a sweep is checked before any runs.
        let jobs = args.job.sweep();
        let problems = jobs
            .iter()
            .map(|job| plan(args, job))
            .collect::<Result<Vec<_>, String>>()?;
        args.job.say("app: measuring one core's DGEMM rate ...");
        let core = dgemm_rate();
        let mut reports = Vec::new();
        for (job, problem) in jobs.iter().zip(problems) {
            match run_one(args, job, problem, core)? {
                Ok(report) => reports.push(report),
                Err(quietly) => return Ok(quietly),
            }
        }
        if let Some(path) = &args.json {
            let text = if let [one] = reports.as_slice() {
                serde_json::to_string_pretty(one)
            } else {
                serde_json::to_string_pretty(&reports)
            }
            .map_err(|e| e.to_string())?;
            std::fs::write(path, text + "\n")
                .map_err(|e| format!("writing {}: {e}", path.display()))?;
        }
        if let Some(why) = reports.iter().find_map(|r| r.outcome.failure.as_ref()) {
            return Err(format!("{}: {why}", reports[0].problem.app));
        }
        Ok(if reports.iter().all(Report::verified) {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        })
    }

    /// Run `problem` as one job of `job`'s ranks; the exit code to end with quietly when
    /// the output was closed.
    fn run_one(
        args: &AppArgs,
        job: &JobArgs,
        problem: Problem,
        core: f64,
    ) -> Result<Result<Report, ExitCode>, String> {
        if let Some(b0) = problem.input_block {
            job.say(&format!(
                "app: input generated in {b0}×{b0} blocks, redistributed to {}×{}",
                problem.block, problem.block
            ));
        }
        job.say(&format!(
            "app: {} of order {} in {}×{} blocks on a {}×{} grid of the {} conduit ...",
            problem.app,
            problem.n,
            problem.block,
            problem.block,
            problem.grid.0,
            problem.grid.1,
            job.conduit
        ));
        let result = crate::ResultFile::new("app.json")?;
        let spec = serde_json::to_string(&problem).map_err(|e| e.to_string())?;
        let mut rank_args = vec![
            "app",
            "--problem",
            &spec,
            "--out",
            result.path().to_str().ok_or("a non-UTF-8 temporary path")?,
        ];
        if args.baseline.is_some() {
            rank_args.push("--baseline");
        }
        let mut launch = result.guard(job.launch_self(&rank_args)?);
        // Three matrices and the panels, with room to spare, unless the user chose.
        if launch.segment.is_none() && tessera::config::raw("TESSERA_SEGMENT").is_none() {
            let ranks = job.ranks() as usize;
            // `plan` bounded 3·N²·8 by isize::MAX, so 4·N²·8 fits in 128 bits and the
            // share of one rank in usize after the division by at least one rank.
            let per_rank = usize::try_from(4 * (problem.n as u128).pow(2) * 8 / ranks as u128)
                .map_err(|_| format!("--size {}: too large for one rank's segment", problem.n))?
                .saturating_add(256 << 20);
            let bytes = per_rank
                .next_multiple_of(1 << 20)
                .max(tessera::job::DEFAULT_SEGMENT);
            launch.segment = Some(format!("{}M", bytes >> 20));
        }
        let bar = job.progress(None, "app: {spinner} {msg} ({elapsed})");
        bar.set_message(format!(
            "{} of order {} on {} rank(s)",
            problem.app,
            problem.n,
            job.ranks()
        ));
        let outcome = launch.run();
        bar.finish_and_clear();
        let outcome = outcome.map_err(|e| e.to_string())?;
        if outcome.broken_pipe {
            return Ok(Err(crate::report(&outcome)));
        }
        if outcome.code != 0 {
            let why = outcome.failure.map(|f| f.1).unwrap_or_default();
            return Err(format!("{} failed: {why}", problem.app));
        }
        let text = result.read()?;
        let (o, baseline): (tessera_apps::Outcome, Option<Baseline>) =
            serde_json::from_str(&text).map_err(|e| e.to_string())?;
        let report = Report {
            problem,
            ranks: job.ranks() as usize,
            conduit: job.conduit.to_string(),
            outcome: o,
            dgemm_flops_per_core: Some(core),
            baseline,
        };
        print!("{report}");
        Ok(Ok(report))
    }

    /// Inside each rank: run the application (then ScaLAPACK when asked); rank 0 writes
    /// the outcome.
    pub(crate) fn rank_main(
        ctx: &Context,
        problem: &str,
        baseline: bool,
        out: &Path,
    ) -> RankResult {
        let problem: Problem = serde_json::from_str(problem)?;
        let outcome = tessera_apps::run(ctx, &problem)?;
        let baseline = if baseline && outcome.failure.is_none() {
            Some(tessera_apps::scalapack::run(ctx, &problem)?)
        } else {
            None
        };
        if ctx.rank() == 0 {
            std::fs::write(out, serde_json::to_string(&(outcome, baseline))?)?;
        }
        Ok(())
    }
}
