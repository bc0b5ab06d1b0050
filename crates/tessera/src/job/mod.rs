//! The job layer: how ranks come to exist, learn who they are, and end.
//!
//! ## Environment contract
//! `tessera run` (see [`launcher`]) starts ranks with these variables; a program that
//! finds none of them runs as a single rank.
//!
//! | variable | meaning |
//! |---|---|
//! | `TESSERA_CONDUIT` | `smp` (one process per rank), `threads` (one process, `TESSERA_RANKS` threads) or `mpi` (processes started by mpirun; the default when built with the `mpi` feature and started by mpirun) |
//! | `TESSERA_MPI_BYPASS` | `0`: on the mpi conduit, reach ranks of the same host through MPI too, not shared memory |
//! | `TESSERA_MPI_PROGRESS` | on the mpi conduit, microseconds between the polls of a progress thread that serves one-sided operations while the rank computes (e.g. `100`; unset or `0`: no thread) |
//! | `TESSERA_RANKS` | number of ranks in the job |
//! | `TESSERA_RANK` | this process's rank (`smp` only) |
//! | `TESSERA_JOB_ID` | unique job id; names the shared-memory objects (`smp` only) |
//! | `TESSERA_SEGMENT` | segment size per rank, e.g. `512M`, `4G` (default [`DEFAULT_SEGMENT`], reserved lazily) |
//! | `TESSERA_AM_QUEUE` | bytes per active-message queue (default: 64 KiB, less for large jobs) |
//! | `TESSERA_WAIT_TIMEOUT` | watchdog: seconds a blocking wait may take before it fails naming who is missing |
//! | `TESSERA_BOOT_TIMEOUT` | seconds to wait for all ranks to attach at start-up (default 60) |
//! | `TESSERA_CHECK` | `1` for checked mode (collective calls verified across ranks) |
//! | `TESSERA_HIDE_PEERS` | `1`: treat every peer as unmapped, as on another host, so data moves through the conduit's put/get and atomics through active messages (a testing aid) |
//!
//! This layer must never do communication itself; it builds conduits and contexts and
//! reports how ranks ended.

pub mod launcher;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

use crate::conduit::shm::{default_ring_capacity, RegionLayout};
pub use crate::conduit::ConduitKind;
use crate::conduit::{smp, threads};

#[cfg(feature = "mpi")]
use crate::conduit::mpi::{launcher_ranks, started_by_mpirun};
#[cfg(not(feature = "mpi"))]
fn started_by_mpirun() -> bool {
    false
}
#[cfg(not(feature = "mpi"))]
fn launcher_ranks() -> Option<usize> {
    None
}
use crate::core::{Context, Options};
use crate::error::JobError;

/// Default segment size per rank: 2 GiB, enough for NPB class B on one or two ranks. Pages
/// are reserved lazily, on first touch, so an unused segment costs only address space.
pub const DEFAULT_SEGMENT: usize = 2 << 30;

/// What an SPMD body returns: `Ok(())`, or any error (`?` works on Tessera's and others').
pub type RankResult = std::result::Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// Parse a size such as `4096`, `64K`, `512M`, `2G` or `1T` (binary multiples).
///
/// ```
/// assert_eq!(tessera::job::parse_size("512M").unwrap(), 512 << 20);
/// assert!(tessera::job::parse_size("lots").is_err());
/// ```
pub fn parse_size(text: &str) -> Result<usize, JobError> {
    let t = text.trim();
    let (digits, shift) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let shift = match c.to_ascii_uppercase() {
                'K' => 10,
                'M' => 20,
                'G' => 30,
                'T' => 40,
                _ => return Err(JobError::BadSize(text.into())),
            };
            (&t[..i], shift)
        }
        _ => (t, 0),
    };
    let n: usize = digits
        .trim()
        .parse()
        .map_err(|_| JobError::BadSize(text.into()))?;
    n.checked_shl(shift)
        .filter(|v| v >> shift == n && *v > 0)
        .ok_or_else(|| JobError::BadSize(text.into()))
}

fn env_var(var: &'static str) -> Option<String> {
    std::env::var(var).ok().filter(|v| !v.is_empty())
}

fn env_parse<T: std::str::FromStr>(var: &'static str, what: &str) -> Result<Option<T>, JobError> {
    match env_var(var) {
        None => Ok(None),
        Some(value) => value.parse().map(Some).map_err(|_| JobError::BadEnv {
            var,
            value,
            why: what.into(),
        }),
    }
}

/// Identity of a rank process started by the launcher.
#[derive(Clone, Debug)]
struct Launched {
    job_id: String,
    rank: usize,
    boot_timeout: Duration,
}

/// A job description: which conduit, how many ranks, how big the segments.
///
/// ```
/// use tessera::{Job, AtomicOp};
/// Job::threads(3).segment(1 << 20).run(|ctx| {
///     let total = ctx.alloc_collective::<u64>(1)?;
///     ctx.barrier()?;
///     ctx.atomic_apply(total.on(0), AtomicOp::Add(ctx.rank() as u64 + 1))?;
///     ctx.barrier()?;
///     assert_eq!(ctx.atomic_load(total.on(0))?, 6);
///     Ok(())
/// }).unwrap();
/// ```
#[derive(Clone, Debug)]
pub struct Job {
    conduit: ConduitKind,
    ranks: usize,
    segment: usize,
    am_queue: Option<usize>,
    options: Options,
    hide_peers: bool,
    /// mpi conduit: ranks of one host through shared memory.
    mpi_bypass: bool,
    launched: Option<Launched>,
}

impl Job {
    /// `ranks` ranks as threads of this process.
    pub fn threads(ranks: usize) -> Job {
        Job {
            conduit: ConduitKind::Threads,
            ranks,
            segment: DEFAULT_SEGMENT,
            am_queue: None,
            options: Options::default(),
            hide_peers: false,
            mpi_bypass: true,
            launched: None,
        }
    }

    /// The job this process belongs to, from the environment contract; a single rank when
    /// the process was started directly.
    pub fn from_env() -> Result<Job, JobError> {
        let mut job = Job::threads(1);
        if let Some(segment) = env_var("TESSERA_SEGMENT") {
            job.segment = parse_size(&segment).map_err(|e| JobError::BadEnv {
                var: "TESSERA_SEGMENT",
                value: segment,
                why: e.to_string(),
            })?;
        }
        job.am_queue = env_var("TESSERA_AM_QUEUE")
            .map(|v| {
                parse_size(&v).map_err(|e| JobError::BadEnv {
                    var: "TESSERA_AM_QUEUE",
                    value: v,
                    why: e.to_string(),
                })
            })
            .transpose()?;
        job.options.wait_timeout = env_parse::<f64>("TESSERA_WAIT_TIMEOUT", "seconds, e.g. 30")?
            .map(Duration::from_secs_f64);
        job.options.checked = env_var("TESSERA_CHECK").is_some_and(|v| v != "0");
        job.hide_peers = env_var("TESSERA_HIDE_PEERS").is_some_and(|v| v != "0");
        let ranks = env_parse::<usize>("TESSERA_RANKS", "a positive number of ranks")?;
        let conduit = match env_var("TESSERA_CONDUIT") {
            Some(v) => v.parse::<ConduitKind>().map_err(|why| JobError::BadEnv {
                var: "TESSERA_CONDUIT",
                value: v,
                why,
            })?,
            None if started_by_mpirun() => ConduitKind::Mpi,
            None if ranks.is_some() => ConduitKind::Smp,
            None => ConduitKind::Threads,
        };
        if conduit == ConduitKind::Mpi {
            // MPI decides the ranks; the launcher's count is only a hint for the layout.
            job.ranks = launcher_ranks().unwrap_or(1);
            job.mpi_bypass = env_var("TESSERA_MPI_BYPASS").is_none_or(|v| v != "0");
        }
        job.conduit = conduit;
        if let Some(ranks) = ranks {
            if ranks == 0 {
                return Err(JobError::BadEnv {
                    var: "TESSERA_RANKS",
                    value: "0".into(),
                    why: "at least one rank".into(),
                });
            }
            job.ranks = ranks;
        }
        if conduit == ConduitKind::Smp {
            let missing = |var| {
                JobError::BadEnv {
                var,
                value: String::new(),
                why: "required for the smp conduit; start smp jobs with `tessera run -n N -- PROGRAM`".into(),
            }
            };
            let rank = env_parse::<usize>("TESSERA_RANK", "a rank number")?
                .ok_or_else(|| missing("TESSERA_RANK"))?;
            let job_id = env_var("TESSERA_JOB_ID").ok_or_else(|| missing("TESSERA_JOB_ID"))?;
            if rank >= job.ranks {
                return Err(JobError::BadEnv {
                    var: "TESSERA_RANK",
                    value: rank.to_string(),
                    why: format!("must be below TESSERA_RANKS={}", job.ranks),
                });
            }
            let boot = env_parse::<f64>("TESSERA_BOOT_TIMEOUT", "seconds")?.unwrap_or(60.0);
            job.launched = Some(Launched {
                job_id,
                rank,
                boot_timeout: Duration::from_secs_f64(boot),
            });
        }
        Ok(job)
    }

    /// Segment size per rank in bytes (rounded up to whole pages).
    pub fn segment(mut self, bytes: usize) -> Job {
        self.segment = bytes;
        self
    }

    /// Bytes per active-message queue (rounded up to a power of two).
    pub fn am_queue(mut self, bytes: usize) -> Job {
        self.am_queue = Some(bytes);
        self
    }

    /// Fail any blocking wait that takes longer than `limit`, naming who is missing.
    pub fn wait_timeout(mut self, limit: Duration) -> Job {
        self.options.wait_timeout = Some(limit);
        self
    }

    /// Checked mode: verify collective calls across ranks (slower).
    pub fn checked(mut self, on: bool) -> Job {
        self.options.checked = on;
        self
    }

    /// Treat every peer as unmapped, as if it ran on another host: puts and gets to peers
    /// go through the conduit's transfer calls and atomics through active messages. A
    /// testing aid for the paths a multi-host conduit takes (also `TESSERA_HIDE_PEERS=1`).
    ///
    /// ```
    /// use tessera::Job;
    /// Job::threads(2).segment(1 << 20).hide_peers(true).run(|ctx| {
    ///     let cell = ctx.alloc_collective::<u64>(1)?;
    ///     ctx.put_value(cell.on(1 - ctx.rank()), 7)?;
    ///     ctx.barrier()?;
    ///     assert_eq!(ctx.get_value(cell)?, 7);
    ///     Ok(())
    /// }).unwrap();
    /// ```
    pub fn hide_peers(mut self, hide: bool) -> Job {
        self.hide_peers = hide;
        self
    }

    /// Number of ranks.
    pub fn ranks(&self) -> usize {
        self.ranks
    }

    /// The conduit.
    pub fn conduit(&self) -> ConduitKind {
        self.conduit
    }

    fn layout(&self) -> RegionLayout {
        let queue = self
            .am_queue
            .unwrap_or_else(|| default_ring_capacity(self.ranks));
        RegionLayout::new(self.ranks, self.segment, queue)
    }

    /// Run `body` on every rank of this process (all of them for `threads`, this process's
    /// rank for `smp`), then a final barrier. Returns the first failure: an error returned
    /// by a body, a panic, or a start-up problem, naming the rank.
    pub fn run<F>(&self, body: F) -> Result<(), JobError>
    where
        F: Fn(&Context) -> RankResult + Sync,
    {
        if self.ranks == 0 {
            return Err(JobError::Usage("a job needs at least one rank".into()));
        }
        match (&self.launched, self.conduit) {
            (Some(launched), ConduitKind::Smp) => {
                let conduit = smp::attach(&launched.job_id, launched.rank, self.layout(), launched.boot_timeout)?
                    .hide_peers(self.hide_peers);
                run_rank(Box::new(conduit), self.options.clone(), &body)
                    .map_err(|why| JobError::RankFailed { rank: launched.rank, why })
            }
            (None, ConduitKind::Smp) => Err(JobError::Usage(
                "the smp conduit needs ranks started by `tessera run`; use Job::threads for in-process jobs".into(),
            )),
            (_, ConduitKind::Threads) => self.run_threads(&body),
            (_, ConduitKind::Mpi) => self.run_mpi(&body),
        }
    }

    #[cfg(feature = "mpi")]
    fn run_mpi<F>(&self, body: &F) -> Result<(), JobError>
    where
        F: Fn(&Context) -> RankResult + Sync,
    {
        let bypass = self.mpi_bypass && !self.hide_peers;
        let boot = env_parse::<f64>("TESSERA_BOOT_TIMEOUT", "seconds")?.unwrap_or(60.0);
        let progress = env_parse::<u64>(
            "TESSERA_MPI_PROGRESS",
            "microseconds between progress polls, or 0 for no progress thread",
        )?
        .filter(|&us| us > 0)
        .map(Duration::from_micros);
        let conduit = crate::conduit::mpi::MpiConduit::start(
            self.segment,
            self.am_queue,
            bypass,
            progress,
            Duration::from_secs_f64(boot),
        )?;
        let rank = crate::conduit::Conduit::rank(&conduit);
        run_rank(Box::new(conduit), self.options.clone(), body)
            .map_err(|why| JobError::RankFailed { rank, why })
    }

    #[cfg(not(feature = "mpi"))]
    fn run_mpi<F>(&self, _body: &F) -> Result<(), JobError>
    where
        F: Fn(&Context) -> RankResult + Sync,
    {
        Err(JobError::Usage(
            "this Tessera was built without MPI; rebuild with `--features mpi`".into(),
        ))
    }

    fn run_threads<F>(&self, body: &F) -> Result<(), JobError>
    where
        F: Fn(&Context) -> RankResult + Sync,
    {
        let job = threads::ThreadsJob::new(self.layout())?;
        std::thread::scope(|scope| -> Result<(), JobError> {
            let mut handles = Vec::with_capacity(self.ranks);
            for rank in 0..self.ranks {
                let job = job.clone();
                let options = self.options.clone();
                let handle = std::thread::Builder::new()
                    .name(format!("rank-{rank}"))
                    .stack_size(16 << 20)
                    .spawn_scoped(scope, move || {
                        let _alive = crate::core::RankThread::enter();
                        let conduit = job.conduit(rank).hide_peers(self.hide_peers);
                        if let Err(why) = run_rank(Box::new(conduit), options, body) {
                            job.abort.raise(rank, &why);
                        }
                    })
                    .map_err(|source| JobError::Os {
                        what: format!("starting the thread of rank {rank}"),
                        source,
                    })?;
                handles.push(handle);
            }
            for handle in handles {
                let _ = handle.join();
            }
            Ok(())
        })?;
        match job.abort.first() {
            Some((rank, why)) => Err(JobError::RankFailed { rank, why }),
            None => Ok(()),
        }
    }
}

/// Build the context, run the body, finish; any failure (error or panic) as a message.
fn run_rank<F>(
    conduit: Box<dyn crate::conduit::Conduit>,
    options: Options,
    body: &F,
) -> Result<(), String>
where
    F: Fn(&Context) -> RankResult + Sync,
{
    let outcome = catch_unwind(AssertUnwindSafe(|| -> Result<(), String> {
        let ctx = Context::new(conduit, options).map_err(|e| format!("start-up: {e}"))?;
        let outcome = body(&ctx)
            .map_err(|e| e.to_string())
            .and_then(|()| ctx.finish().map_err(|e| e.to_string()));
        if let Err(why) = &outcome {
            // End the job now, naming the reason (the mpi conduit aborts every rank here).
            ctx.conduit().abort(why);
        }
        outcome
    }));
    match outcome {
        Ok(result) => result,
        Err(panic) => Err(match panic.downcast_ref::<&str>() {
            Some(s) => format!("panicked: {s}"),
            None => match panic.downcast_ref::<String>() {
                Some(s) => format!("panicked: {s}"),
                None => "panicked".to_string(),
            },
        }),
    }
}

/// Run an SPMD program: `body` runs on every rank of the job this process belongs to
/// (from the environment contract; one rank when started directly). On failure it prints
/// the error and exits the process with status 1, so `main` can be just this call.
///
/// ```no_run
/// tessera::spmd(|ctx| {
///     println!("hello from rank {} of {}", ctx.rank(), ctx.ranks());
///     Ok(())
/// });
/// ```
pub fn spmd<F>(body: F)
where
    F: Fn(&Context) -> RankResult + Sync,
{
    let job = match Job::from_env() {
        Ok(job) => job,
        Err(e) => {
            eprintln!("tessera: {e}");
            std::process::exit(2);
        }
    };
    if let Err(e) = job.run(body) {
        eprintln!("tessera: {e}");
        std::process::exit(1);
    }
}
