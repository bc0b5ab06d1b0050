//! `tessera`: launch PGAS jobs, check a conduit, measure it.
//!
//! ```text
//! tessera run -n 4 -- ./target/release/examples/hello     # 4 processes over shared memory
//! tessera run --conduit threads -n 4 -- ./prog            # 4 threads in one process
//! tessera selftest -n 3                                   # the conduit conformance suite
//! tessera bench rma -n 2 --json rma.json                  # put/get/AM/barrier figures
//! tessera bench grid -n 2 --json grid.json                # ghost exchange, grid copy
//! tessera tune -n 4                                       # collective tuning table
//! tessera tune --calibrate -n 2                           # the cost model's machine parameters
//! tessera app lu -n 4 --size 4096                         # dense LU (the apps feature)
//! tessera npb cg --class B -n 4 --stats cg.json           # count communication
//! tessera report cg.json -o cg-report                     # heat map, sizes, waits, tables
//! tessera npb ft --class A -n 1,2,4 --json ft.json        # a sweep for a scaling plot
//! tessera status                                          # what running jobs' ranks do
//! ```

mod app;
mod bench;
mod calibrate;
mod config;
mod npb;
mod report;
mod selftest;
mod shmem;
mod tune;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use tessera::job::launcher::{Launch, Outcome};
use tessera::ConduitKind;

#[derive(Parser)]
#[command(
    name = "tessera",
    version,
    about = "Tessera: a partitioned global address space runtime"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// How to start a job's ranks; shared by every command that starts ranks.
#[derive(Args, Clone, Debug)]
pub struct JobArgs {
    /// Number of ranks; `npb` and `app` also take a list (`-n 1,2,4,8`), a sweep that runs
    /// each count in turn and reports them together.
    #[arg(short = 'n', long = "ranks", visible_alias = "np", value_delimiter = ',', num_args = 1, default_value = "2", value_parser = clap::value_parser!(u32).range(1..=4096))]
    counts: Vec<u32>,
    /// Conduit: smp (processes over shared memory), threads (one process) or mpi (ranks started by mpirun; needs the mpi feature).
    #[arg(long, default_value = "smp")]
    conduit: ConduitKind,
    /// Segment size per rank, e.g. 512M or 4G (default 2G, reserved lazily).
    #[arg(long)]
    segment: Option<String>,
    /// End the job as failed after this many seconds.
    #[arg(long, value_parser = parse_timeout)]
    timeout: Option<Duration>,
    /// Count communication and write the job's statistics (JSON) to FILE: operations and
    /// bytes per rank pair and kind, sizes, collective calls, time blocked (as
    /// TESSERA_STATS=FILE does); `tessera report FILE` draws them.
    #[arg(long, value_name = "FILE")]
    stats: Option<PathBuf>,
    /// No progress bars or status lines on standard error (they are left out anyway when
    /// it is not a terminal).
    #[arg(short = 'q', long)]
    quiet: bool,
    /// What starts the ranks of `--conduit mpi`: mpirun, or Slurm's srun (the default
    /// inside a Slurm allocation; as TESSERA_LAUNCHER does).
    #[arg(long, value_parser = ["mpirun", "srun"])]
    launcher: Option<String>,
}

/// `--timeout`: a positive, finite number of seconds (the same rule as every duration).
fn parse_timeout(text: &str) -> Result<Duration, String> {
    tessera::config::parse_seconds(text).map_err(|e| e.message)
}

/// A private place for a rank to leave its result for the command to read: a fresh
/// directory only this user can enter (mode 0700, random name; `tempfile`), removed with
/// everything in it as soon as the result is read (before anything is printed, so a closed
/// output cannot leave it behind), when dropped, and by the job's keeper should the command
/// be killed outright. Nothing predictable in /tmp, nothing another user can plant or read.
pub struct ResultFile {
    dir: tempfile::TempDir,
    path: PathBuf,
}

impl ResultFile {
    /// A result file called `name` in a new private directory.
    pub fn new(name: &str) -> Result<ResultFile, String> {
        let dir = tempfile::Builder::new()
            .prefix("tessera-")
            .tempdir()
            .map_err(|e| format!("creating a private directory for results: {e}"))?;
        let path = dir.path().join(name);
        Ok(ResultFile { dir, path })
    }

    /// Where the rank writes.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// `launch`, told to remove this directory should the command be killed outright.
    pub fn guard(&self, mut launch: Launch) -> Launch {
        launch.remove_if_killed.push(self.dir.path().to_path_buf());
        launch
    }

    /// A path for another file in the same private directory (gone with it).
    pub fn beside(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// What the rank wrote; the directory is gone when this returns.
    pub fn read(self) -> Result<String, String> {
        let text = std::fs::read_to_string(&self.path)
            .map_err(|e| format!("reading the job's result {}: {e}", self.path.display()));
        let _ = self.dir.close();
        text
    }
}

impl JobArgs {
    /// The number of ranks (the first count of a sweep).
    pub fn ranks(&self) -> u32 {
        self.counts[0]
    }

    /// The jobs of a sweep (`-n 1,2,4`), one per count, in the order given; one job
    /// without a sweep.
    pub fn sweep(&self) -> Vec<JobArgs> {
        self.counts
            .iter()
            .map(|&n| JobArgs {
                counts: vec![n],
                ..self.clone()
            })
            .collect()
    }

    /// A progress bar of `len` steps (a spinner without), drawn on standard error while
    /// it is a terminal and `--quiet` is not given; `template` as indicatif's.
    pub fn progress(&self, len: Option<u64>, template: &str) -> indicatif::ProgressBar {
        let bar = match len {
            _ if self.quiet => return indicatif::ProgressBar::hidden(),
            Some(len) => indicatif::ProgressBar::new(len),
            None => indicatif::ProgressBar::new_spinner(),
        };
        if bar.is_hidden() {
            return bar;
        }
        bar.set_style(
            indicatif::ProgressStyle::with_template(template)
                .expect("the template is valid")
                .progress_chars("=> "),
        );
        bar.enable_steady_tick(Duration::from_millis(200));
        bar
    }

    /// Say `line` on standard error, above `bar` if it is drawn (not with `--quiet`).
    pub fn status(&self, bar: &indicatif::ProgressBar, line: &str) {
        if bar.is_hidden() {
            self.say(line);
        } else {
            bar.println(line);
        }
    }

    /// Say `line` on standard error, unless `--quiet` is given.
    pub fn say(&self, line: &str) {
        if !self.quiet {
            eprintln!("{line}");
        }
    }

    /// These settings without statistics.
    pub fn without_stats(&self) -> JobArgs {
        JobArgs {
            stats: None,
            ..self.clone()
        }
    }

    /// Whether `-n` gave several counts.
    pub fn is_sweep(&self) -> bool {
        self.counts.len() > 1
    }

    /// These settings for a job of `ranks` ranks, one of several a command runs: its
    /// statistics (if asked for) go to FILE with the rank count before the extension
    /// (`stats.json` -> `stats.n4.json`), so no job's overwrite another's.
    pub fn with_ranks(&self, ranks: u32) -> JobArgs {
        JobArgs {
            counts: vec![ranks],
            stats: self.stats.as_ref().map(|file| numbered(file, ranks)),
            ..self.clone()
        }
    }

    /// A launch of `program args` with these settings.
    pub fn launch(&self, program: OsString, args: Vec<OsString>) -> Launch {
        Launch {
            ranks: self.ranks() as usize,
            conduit: self.conduit,
            segment: self.segment.clone(),
            label: false,
            timeout: self.timeout,
            program,
            args,
            env: self
                .stats
                .iter()
                .map(|file| ("TESSERA_STATS".into(), file.into()))
                .chain(
                    self.launcher
                        .iter()
                        .map(|l| ("TESSERA_LAUNCHER".into(), l.into())),
                )
                .collect(),
            remove_if_killed: Vec::new(),
        }
    }

    /// A launch of this `tessera` executable's hidden rank entry point.
    pub fn launch_self(&self, rank_args: &[&str]) -> Result<Launch, String> {
        let exe = std::env::current_exe()
            .map_err(|e| format!("cannot find the tessera executable: {e}"))?;
        let mut args: Vec<OsString> = vec!["__rank".into()];
        args.extend(rank_args.iter().map(OsString::from));
        Ok(self.launch(exe.into(), args))
    }
}

/// `tessera status`: every running job of this user (or the one named), its ranks' waits.
fn status(only: Option<&str>) -> Result<ExitCode, String> {
    let jobs: Vec<_> = tessera::job::status::running_jobs()
        .into_iter()
        .filter(|j| only.is_none_or(|id| j.id == id))
        .collect();
    if jobs.is_empty() {
        return Err(match only {
            Some(id) => format!(
                "no running job {id} of this user on this machine (`tessera status` lists them)"
            ),
            None => "no Tessera job of this user is running on this machine".into(),
        });
    }
    for job in jobs {
        print!("{}", job.describe());
    }
    Ok(ExitCode::SUCCESS)
}

/// Say where the statistics a command was asked for are, and how to draw them.
fn announce_stats(file: Option<PathBuf>) {
    if let Some(file) = file.filter(|f| f.is_file()) {
        eprintln!(
            "tessera: communication statistics in {} (`tessera report {}` draws them)",
            file.display(),
            file.display()
        );
    }
}

impl Command {
    /// The statistics file this command was asked for (`--stats`, or `TESSERA_STATS`).
    fn stats_file(&self) -> Option<PathBuf> {
        self.job()?
            .stats
            .clone()
            .or_else(|| tessera::config::raw("TESSERA_STATS").map(PathBuf::from))
    }

    /// How this command starts jobs, if it does.
    fn job(&self) -> Option<&JobArgs> {
        match self {
            Command::Run(r) | Command::Oshrun(r) => Some(&r.job),
            Command::Selftest { job, .. }
            | Command::Npb { job, .. }
            | Command::Tune { job, .. } => Some(job),
            Command::App(args) => Some(&args.job),
            Command::Bench { what } => Some(what.job()),
            _ => None,
        }
    }
}

/// `file` with `.n<ranks>` before its extension.
fn numbered(file: &std::path::Path, ranks: u32) -> PathBuf {
    named(file, &format!("n{ranks}"))
}

/// `file` with `.<part>` before its extension (`stats.json` -> `stats.cg.json`).
pub fn named(file: &std::path::Path, part: &str) -> PathBuf {
    let stem = file.file_stem().unwrap_or_default().to_string_lossy();
    let name = match file.extension() {
        Some(ext) => format!("{stem}.{part}.{}", ext.to_string_lossy()),
        None => format!("{stem}.{part}"),
    };
    file.with_file_name(name)
}

/// `tessera run`'s (and `oshrun`'s) command line.
#[derive(Args)]
struct RunArgs {
    #[command(flatten)]
    job: JobArgs,
    /// Prefix every output line with the rank that printed it (smp; under
    /// --conduit threads all ranks share one output stream).
    #[arg(long)]
    label: bool,
    /// The program and its arguments (after `--`).
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "PROGRAM [ARGS]"
    )]
    command: Vec<OsString>,
}

impl RunArgs {
    /// Start the program and wait for the job.
    fn run(self) -> Result<ExitCode, String> {
        let mut args = self.command;
        let program = args.remove(0);
        let mut launch = self.job.launch(program, args);
        launch.label = self.label;
        launch
            .run()
            .map(|outcome| report(&outcome))
            .map_err(|e| e.to_string())
    }
}

#[derive(Subcommand)]
enum Command {
    /// Start PROGRAM on N ranks and wait for the job to end.
    Run(RunArgs),
    /// `oshrun`: start an OpenSHMEM program's PEs (`-np N` as mpirun writes it, and every
    /// option of `run`); SHMEM_SYMMETRIC_SIZE (or SMA_SYMMETRIC_SIZE) sizes the symmetric
    /// heap unless --segment is given.
    #[command(hide = true)]
    Oshrun(RunArgs),
    /// Run the conduit conformance suite on N ranks.
    Selftest {
        #[command(flatten)]
        job: JobArgs,
        /// Only the cases whose name contains this.
        #[arg(long)]
        case: Option<String>,
    },
    /// Run NAS Parallel Benchmark kernels (they start their own ranks), verified against
    /// the official values.
    Npb {
        /// Kernel: ep, is, cg, mg, ft, or `all` for every kernel built so far. Variants:
        /// is has `default` (`sample`; keys sent by lines from 16 ranks with AVX-512),
        /// `sample` (owners' ranges from a sample of the keys, keys into fixed slots),
        /// `tally`, `count` and `stream` (count, keys sent by lines); cg
        /// `signal` (default) and `barrier`; mg `26msg` (default) and `6msg`; ft `slabs`
        /// (default), `packed`, `pencils` and `2d`.
        kernel: String,
        /// Problem class: S, W, A, B, C or D (D has no official values here: it prints the
        /// computed ones with `Verification = NOT PERFORMED`).
        #[arg(long, default_value = "S")]
        class: String,
        #[command(flatten)]
        job: JobArgs,
        /// Kernel variant (see each kernel's list; the first is the default).
        #[arg(long)]
        variant: Option<String>,
        /// Write the result as JSON here.
        #[arg(long)]
        json: Option<PathBuf>,
        /// Measure memory bandwidth and the floating-point peak first (a few seconds), and
        /// report each kernel's rate as a fraction of the limit that binds it.
        #[arg(long)]
        bounds: bool,
    },
    /// Measure every collective algorithm per operation, message size and team size, and
    /// write the tuning table collectives then follow (default: ~/.config/tessera/tuning.json).
    Tune {
        #[command(flatten)]
        job: JobArgs,
        /// Write the table here instead of the default location.
        #[arg(short = 'o', long)]
        output: Option<PathBuf>,
        /// Three message sizes and few iterations (a smoke test).
        #[arg(long)]
        quick: bool,
        /// Measure the cost model's machine parameters instead (about a second, at the
        /// team size -n gives) and keep them in ~/.config/tessera/calibration.json.
        #[arg(long, conflicts_with = "quick")]
        calibrate: bool,
    },
    /// Tables and pictures (SVG, PNG) from statistics (--stats), npb/app results and
    /// sweeps (--json), or bench rma/coll results (--json).
    Report(report::ReportArgs),
    /// What every rank of this user's running jobs is doing now (as Ctrl-\ prints on the
    /// job's own terminal), from any terminal.
    Status {
        /// Only the job with this id (as `tessera status` lists it).
        job: Option<String>,
    },
    /// Dense linear algebra on block-cyclic matrices: summa, cholesky or lu, verified and
    /// timed (built with the apps feature; ScaLAPACK beside it with the scalapack feature).
    App(app::AppArgs),
    /// OpenSHMEM for C and C++: install the library, shmem.h, oshcc and oshrun.
    Shmem {
        #[command(subcommand)]
        what: shmem::ShmemCommand,
    },
    /// Every setting Tessera reads (TESSERA_* variables): the value in force, where it came
    /// from, and whether a job would accept it (exit status 2 if not).
    Config {
        /// Print as JSON.
        #[arg(long, conflicts_with = "markdown")]
        json: bool,
        /// Print the table of every variable (kind, default, meaning) in Markdown, as the
        /// README carries it.
        #[arg(long)]
        markdown: bool,
    },
    /// Micro-benchmarks.
    Bench {
        #[command(subcommand)]
        what: bench::BenchCommand,
    },
    /// Internal: the body run inside each rank by `selftest` and `bench`.
    #[command(name = "__rank", hide = true)]
    Rank {
        #[command(subcommand)]
        what: RankCommand,
    },
}

#[derive(Subcommand)]
enum RankCommand {
    Npb {
        kernel: String,
        #[arg(long)]
        class: String,
        #[arg(long)]
        variant: String,
        #[arg(long)]
        out: PathBuf,
    },
    Selftest {
        #[arg(long)]
        case: Option<String>,
    },
    App {
        #[arg(long)]
        problem: String,
        #[arg(long)]
        out: PathBuf,
        #[arg(long)]
        baseline: bool,
    },
    BenchColl {
        #[arg(long)]
        out: PathBuf,
        #[arg(long)]
        quick: bool,
        #[arg(long)]
        plain_buffers: bool,
    },
    Tune {
        #[arg(long)]
        out: PathBuf,
        #[arg(long)]
        quick: bool,
    },
    Calibrate {
        #[arg(long)]
        out: PathBuf,
    },
    BenchGrid {
        #[arg(long)]
        out: PathBuf,
        #[arg(long)]
        edge: usize,
        #[arg(long)]
        quick: bool,
    },
    BenchRma {
        #[arg(long)]
        out: PathBuf,
        #[arg(long)]
        barrier_only: bool,
        #[arg(long)]
        quick: bool,
    },
}

/// Report a finished job on stderr and turn it into an exit code. A job whose output was
/// closed (a rank killed by SIGPIPE, as when piped into `head`) ends quietly.
pub fn report(outcome: &Outcome) -> ExitCode {
    if let Some((_, why)) = &outcome.failure {
        if !outcome.broken_pipe {
            tessera::job::write_stderr(&format!(
                "tessera: job failed: {why}; the other ranks were ended\n"
            ));
        }
    }
    ExitCode::from(outcome.code.clamp(0, 255) as u8)
}

/// Restore the default action of SIGPIPE, so that writing to a closed pipe (`tessera ... |
/// head`) ends the command quietly with the conventional status (128 + 13) instead of a
/// panic in `println!` (Rust ignores SIGPIPE by default).
fn default_sigpipe() {
    use nix::sys::signal::{signal, SigHandler, Signal};
    // SAFETY: installing the default disposition runs no handler code.
    let _ = unsafe { signal(Signal::SIGPIPE, SigHandler::SigDfl) };
}

/// The options of `tessera run` that take a value or stand alone, for the check of a
/// mistyped option that would otherwise be taken for the program.
const RUN_OPTIONS: &[&str] = &[
    "--ranks",
    "--conduit",
    "--segment",
    "--timeout",
    "--label",
    "--help",
    "--version",
];

/// A program name that is really a mistyped option (`tessera run -n 2 --timout 5 -- p`):
/// the error names it and the closest option. A program whose name starts with `-` can
/// still be run as `./-name`.
fn mistyped_option(program: &std::ffi::OsStr, options: &[&str]) -> Result<(), String> {
    let Some(text) = program.to_str().filter(|t| t.starts_with('-')) else {
        return Ok(());
    };
    let name = text.split('=').next().unwrap_or(text);
    let closest = options
        .iter()
        .map(|o| (tessera::config::edit_distance(name, o), *o))
        .min()
        .filter(|&(d, _)| d <= 3)
        .map(|(_, o)| format!("; did you mean {o}?"))
        .unwrap_or_default();
    Err(format!(
        "unknown option {name}{closest} (options go before the program; a program whose name starts with '-' is run as ./{text})"
    ))
}

/// Refuse, before a long run, an output file that cannot be written: an existing file must
/// open for writing, and a new one must be creatable where it is named (it is created and
/// removed again, so nothing is left if the run then fails). Where the command makes the
/// file's directories itself (`makes_dirs`), the nearest one that exists must be writable.
fn check_output(
    path: Option<&std::path::Path>,
    flag: &str,
    makes_dirs: bool,
) -> Result<(), String> {
    let Some(path) = path else { return Ok(()) };
    let fail = |e: std::io::Error| format!("{flag} {}: cannot write there: {e}", path.display());
    if makes_dirs {
        let existing = path
            .ancestors()
            .skip(1)
            .find(|a| a.as_os_str().is_empty() || a.exists())
            .map(|a| {
                if a.as_os_str().is_empty() {
                    std::path::Path::new(".")
                } else {
                    a
                }
            })
            .unwrap_or(std::path::Path::new("."));
        if !path.exists() {
            return nix::unistd::access(existing, nix::unistd::AccessFlags::W_OK)
                .map_err(|e| fail(std::io::Error::from(e)));
        }
    }
    if path.is_dir() {
        return Err(format!(
            "{flag} {}: is a directory; name a file",
            path.display()
        ));
    }
    if path.exists() {
        std::fs::OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(fail)?;
    } else {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(fail)?;
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}

/// The file a command will write at its end, the option that names it, and whether the
/// command makes its directories (`tune` does).
fn output(command: &Command) -> Option<(Option<&std::path::Path>, &'static str, bool)> {
    match command {
        Command::Npb { json, .. } => Some((json.as_deref(), "--json", false)),
        Command::App(args) => Some((args.json(), "--json", false)),
        Command::Bench { what } => Some((what.json(), "--json", false)),
        Command::Tune { output, .. } => Some((output.as_deref(), "--output", true)),
        _ => None,
    }
}

/// Whether the command starts ranks (and so must check the settings they will read).
fn launches(command: &Command) -> bool {
    !matches!(
        command,
        Command::Rank { .. } | Command::Shmem { .. } | Command::Config { .. }
    )
}

/// Everything checked before a command starts a rank.
fn preflight(command: &Command) -> Result<(), String> {
    if let Some(job) = command.job() {
        let sweeps = matches!(command, Command::Npb { .. } | Command::App(_));
        if job.is_sweep() && !sweeps {
            return Err(format!(
                "-n {} is a sweep, which only npb and app run; give one rank count",
                job.counts
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            ));
        }
    }
    if launches(command) {
        tessera::check_settings().map_err(|e| e.to_string())?;
    }
    if let Command::Run(run) | Command::Oshrun(run) = command {
        mistyped_option(&run.command[0], RUN_OPTIONS)?;
    }
    if let Some((path, flag, makes_dirs)) = output(command) {
        check_output(path, flag, makes_dirs)?;
    }
    Ok(())
}

fn main() -> ExitCode {
    default_sigpipe();
    let cli = Cli::parse_from(shmem::oshrun_args(std::env::args_os()));
    if let Err(e) = preflight(&cli.command) {
        tessera::job::write_stderr(&format!("tessera: {e}\n"));
        return ExitCode::from(2);
    }
    let stats_asked = cli.command.stats_file();
    let result = match cli.command {
        Command::Run(run) => run.run(),
        Command::Oshrun(mut run) => shmem::oshrun_segment(&mut run.job).and_then(|()| run.run()),
        Command::Selftest { job, case } => selftest::drive(&job, case.as_deref()),
        Command::Npb {
            kernel,
            class,
            job,
            variant,
            json,
            bounds,
        } => npb::drive(
            &kernel,
            &class,
            &job,
            variant.as_deref(),
            json.as_deref(),
            bounds,
        ),
        Command::App(args) => app::drive(&args),
        Command::Report(args) => report::drive(&args),
        Command::Status { job } => status(job.as_deref()),
        Command::Bench { what } => bench::drive(what),
        Command::Config { json, markdown } => config::drive(json, markdown),
        Command::Shmem { what } => shmem::drive(what),
        Command::Tune {
            job,
            output,
            calibrate: true,
            ..
        } => calibrate::drive(&job, output.as_deref()),
        Command::Tune {
            job, output, quick, ..
        } => tune::drive(&job, output.as_deref(), quick),
        Command::Rank { what } => {
            let job = match tessera::Job::from_env() {
                Ok(job) => job,
                Err(e) => {
                    tessera::job::write_stderr(&format!("tessera: {e}\n"));
                    return ExitCode::from(2);
                }
            };
            let run = match what {
                RankCommand::Npb {
                    kernel,
                    class,
                    variant,
                    out,
                } => job.run(|ctx| npb::rank_main(ctx, &kernel, &class, &variant, &out)),
                RankCommand::Selftest { case } => {
                    job.run(|ctx| tessera::conformance::run_all(ctx, case.as_deref()))
                }
                #[cfg(feature = "apps")]
                RankCommand::App {
                    problem,
                    out,
                    baseline,
                } => job.run(|ctx| app::rank_main(ctx, &problem, baseline, &out)),
                #[cfg(not(feature = "apps"))]
                RankCommand::App { .. } => {
                    job.run(|_| Err("built without the apps feature".into()))
                }
                RankCommand::BenchColl {
                    out,
                    quick,
                    plain_buffers,
                } => job.run(|ctx| bench::coll::rank_main(ctx, &out, quick, plain_buffers)),
                RankCommand::Tune { out, quick } => {
                    job.run(|ctx| tune::rank_main(ctx, &out, quick))
                }
                RankCommand::Calibrate { out } => job.run(|ctx| calibrate::rank_main(ctx, &out)),
                RankCommand::BenchGrid { out, edge, quick } => {
                    job.run(|ctx| bench::grid::rank_main(ctx, &out, edge, quick))
                }
                RankCommand::BenchRma {
                    out,
                    barrier_only,
                    quick,
                } => job.run(|ctx| bench::rma::rank_main(ctx, &out, barrier_only, quick)),
            };
            match run {
                Ok(()) => Ok(ExitCode::SUCCESS),
                Err(e) => {
                    tessera::job::write_stderr(&format!("tessera: {e}\n"));
                    Ok(ExitCode::from(1))
                }
            }
        }
    };
    if let Ok(code) = &result {
        if *code == ExitCode::SUCCESS {
            announce_stats(stats_asked);
        }
    }
    result.unwrap_or_else(|e| {
        tessera::job::write_stderr(&format!("tessera: {e}\n"));
        ExitCode::from(2)
    })
}
