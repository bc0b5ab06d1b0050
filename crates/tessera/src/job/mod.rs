//! The job layer: how ranks come to exist, learn who they are, and end.
//!
//! ## Environment contract
//! `tessera run` (see [`launcher`]) starts ranks with the variables below; a program that
//! finds none of them runs as a single rank. Every variable is read by [`crate::config`], which
//! applies one parser per kind (sizes, seconds, switches) and never panics on a value;
//! empty means unset.
//!
//! Every variable, with its kind, default and meaning, is one entry of
//! [`config::VARIABLES`]; `tessera config` prints each with the value in force and where it
//! came from, and `tessera config --markdown` the README's table of them. `TESSERA_SEGMENT`
//! defaults to [`DEFAULT_SEGMENT`] and `TESSERA_WAIT_TIMEOUT` under `tessera run` to
//! [`launcher::DEFAULT_WAIT_TIMEOUT_S`] seconds; the launcher sets `TESSERA_CONDUIT`,
//! `TESSERA_RANKS`, `TESSERA_RANK`, `TESSERA_JOB_ID` and `TESSERA_JOB_FD` for each rank.
//!
//! Any other `TESSERA_*` name is refused by the launcher, with the closest known name, and
//! so is a value that is not UTF-8 text.
//!
//! ## How a job ends
//! Every rank records its state on the job's status board ([`board`]). A rank's part ends
//! with the *end-of-job barrier* ([`Job::run`] runs it after the body); a rank that ends
//! any other way while its peers may still need it (returns early into a barrier the others
//! never reach, calls `exit`, crashes) makes the job fail at once, naming the rank and what
//! the others were waiting for. Under `threads`, `exit` from a rank's thread is caught the
//! same way (the process then exits with status 1, not the status given).
//!
//! This layer must never do communication itself; it builds conduits and contexts and
//! reports how ranks ended.

mod binding;
mod keeper;
pub mod launcher;
mod session;
pub mod status;

pub use session::Session;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use crate::board::{self, Board, JobFile, RankState};
use crate::config;
use crate::core::report as stats;

use crate::conduit::shm::{default_ring_capacity, RegionLayout};
pub use crate::conduit::ConduitKind;
use crate::conduit::{Conduit, Processes, Start};
use crate::core::{Context, Options};
use crate::error::JobError;

/// Default segment size per rank: 2 GiB, enough for NPB class B on one or two ranks. Pages
/// are reserved lazily, on first touch, so an unused segment costs only address space.
pub const DEFAULT_SEGMENT: usize = 2 << 30;

/// What an SPMD body returns: `Ok(())`, or any error (`?` works on Tessera's and others').
pub type RankResult = std::result::Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// Memory this machine can give to new work without swapping, in bytes (`MemAvailable`
/// of `/proc/meminfo`), or `None` where the system does not say.
///
/// ```
/// if let Some(bytes) = tessera::job::available_memory() {
///     assert!(bytes > 0);
/// }
/// ```
pub fn available_memory() -> Option<u64> {
    proc_bytes("/proc/meminfo", "MemAvailable:")
}

/// The value of the line starting with `key` in a Linux `/proc` file that counts in kB
/// (`/proc/meminfo`, `/proc/self/status`, `/proc/self/smaps_rollup`), in bytes; `None`
/// where the file or the line is missing.
///
/// ```
/// if let Some(peak) = tessera::job::proc_bytes("/proc/self/status", "VmHWM:") {
///     assert!(peak > 0);
/// }
/// ```
pub fn proc_bytes(path: &str, key: &str) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    let line = text.lines().find(|l| l.starts_with(key))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib << 10)
}

/// Under `threads` with a launcher: how long ranks get to stop after one failed before the
/// process ends without them (a rank that never waits never learns of the failure).
const ABORT_GRACE: Duration = Duration::from_secs(2);

/// Default time for every rank to attach at start-up.
const DEFAULT_BOOT_TIMEOUT: Duration = Duration::from_secs(60);

/// Identity of a rank process started by the launcher.
#[derive(Clone, Debug)]
struct Launched {
    job_id: String,
    rank: usize,
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
#[derive(Clone)]
pub struct Job {
    conduit: ConduitKind,
    ranks: usize,
    segment: usize,
    am_queue: Option<usize>,
    options: Options,
    hide_peers: bool,
    /// Pin each rank to a processor of its own (`TESSERA_BIND`, [`Job::bind`]).
    bind: bool,
    boot_timeout: Duration,
    launched: Option<Launched>,
    /// The launcher's private memory file (`TESSERA_JOB_FD`): the board, and smp regions.
    job_file: Option<Arc<JobFile>>,
    /// smp under the launcher: named objects instead of the job file (`TESSERA_SHM_NAMES`).
    shm_names: bool,
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Job")
            .field("conduit", &self.conduit)
            .field("ranks", &self.ranks)
            .field("segment", &self.segment)
            .field("launched", &self.launched)
            .field("job_file", &self.job_file.is_some())
            .finish_non_exhaustive()
    }
}

impl Job {
    /// `ranks` ranks as threads of this process.
    pub fn threads(ranks: usize) -> Job {
        Job {
            conduit: ConduitKind::THREADS,
            ranks,
            segment: DEFAULT_SEGMENT,
            am_queue: None,
            options: Options::default(),
            hide_peers: false,
            bind: false,
            boot_timeout: DEFAULT_BOOT_TIMEOUT,
            launched: None,
            job_file: None,
            shm_names: false,
        }
    }

    /// The job this process belongs to, from the environment contract; a single rank when
    /// the process was started directly.
    pub fn from_env() -> Result<Job, JobError> {
        let mut job = Job::threads(1);
        if let Some(segment) = config::size("TESSERA_SEGMENT")? {
            job.segment = segment;
        }
        job.am_queue = config::am_queue()?;
        job.options.wait_timeout = match config::limit("TESSERA_WAIT_TIMEOUT")? {
            Some(config::Limit::After(limit)) => Some(limit),
            Some(config::Limit::Off) | None => None,
        };
        job.options.checked = config::switch("TESSERA_CHECK")?.unwrap_or(false);
        job.options.stats = stats_sink()?;
        job.hide_peers = config::switch("TESSERA_HIDE_PEERS")?.unwrap_or(false);
        job.bind = config::switch("TESSERA_BIND")?.unwrap_or(false);
        let ranks = config::number::<usize>("TESSERA_RANKS", "a positive number of ranks")?;
        let conduit = match config::text("TESSERA_CONDUIT") {
            Some(v) => v.parse::<ConduitKind>().map_err(|why| JobError::BadEnv {
                var: "TESSERA_CONDUIT",
                value: v,
                why: why.message,
            })?,
            None => match ConduitKind::started_this_process() {
                Some(own) => own,
                None if ranks.is_some() => ConduitKind::SMP,
                None => ConduitKind::THREADS,
            },
        };
        if conduit.processes() == Processes::ByMpiLauncher {
            // Its launcher decides the ranks; the count is only a hint for the layout.
            job.ranks = conduit.bootstrap().launcher_ranks().unwrap_or(1);
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
        job.boot_timeout = config::seconds("TESSERA_BOOT_TIMEOUT")?.unwrap_or(DEFAULT_BOOT_TIMEOUT);
        job.shm_names = config::switch("TESSERA_SHM_NAMES")?.unwrap_or(false);
        if conduit.processes() != Processes::ByMpiLauncher {
            if let Some(fd) = config::number::<i32>("TESSERA_JOB_FD", "a descriptor number")? {
                job.job_file = Some(Arc::new(JobFile::open(fd, job.ranks)?));
            }
        }
        if conduit.processes() == Processes::PerRank {
            let missing = |var| {
                JobError::BadEnv {
                var,
                value: String::new(),
                why: format!(
                    "required for the {conduit} conduit; start {conduit} jobs with `tessera run -n N -- PROGRAM`"
                ),
            }
            };
            let rank = config::number::<usize>("TESSERA_RANK", "a rank number")?
                .ok_or_else(|| missing("TESSERA_RANK"))?;
            let job_id = config::text("TESSERA_JOB_ID").ok_or_else(|| missing("TESSERA_JOB_ID"))?;
            if rank >= job.ranks {
                return Err(JobError::BadEnv {
                    var: "TESSERA_RANK",
                    value: rank.to_string(),
                    why: format!("must be below TESSERA_RANKS={}", job.ranks),
                });
            }
            job.launched = Some(Launched { job_id, rank });
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

    /// Count communication (see [`stats`]) and write the job's statistics to `file` when
    /// it ends (as `TESSERA_STATS=FILE` does); `tessera report FILE` draws them.
    pub fn stats(mut self, file: impl Into<std::path::PathBuf>) -> Job {
        self.options.stats = Some(stats::Sink::File(file.into()));
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
    ///     ctx.put(cell.on(1 - ctx.rank()), &[7], tessera::Blocking)?;
    ///     ctx.barrier()?;
    ///     assert_eq!(ctx.get_value(cell)?, 7);
    ///     Ok(())
    /// }).unwrap();
    /// ```
    pub fn hide_peers(mut self, hide: bool) -> Job {
        self.hide_peers = hide;
        self
    }

    /// Pin each rank to a processor of its own, rank `k` to the `k`-th processor the
    /// process may run on (also `TESSERA_BIND=1`), as `OMP_PROC_BIND=true` places
    /// threads; for the `smp` and `threads` conduits (under `mpirun`, its own option
    /// binds). A job with more ranks than processors is refused. Off by default: two
    /// pinned jobs started side by side would share their processors.
    ///
    /// ```
    /// use tessera::Job;
    /// let processors = std::thread::available_parallelism().map_or(1, |n| n.get());
    /// let job = Job::threads(processors + 1).segment(1 << 20).bind(true);
    /// let refused = job.run(|_| Ok(())).unwrap_err();
    /// assert!(refused.to_string().contains("TESSERA_BIND"));
    /// ```
    pub fn bind(mut self, on: bool) -> Job {
        self.bind = on;
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
    /// rank for `smp`), then the end-of-job barrier. Returns the first failure: an error
    /// returned by a body, a panic, a start-up problem, or a rank that left the job early,
    /// naming the rank.
    pub fn run<F>(&self, body: F) -> Result<(), JobError>
    where
        F: Fn(&Context) -> RankResult + Sync,
    {
        if self.ranks == 0 {
            return Err(JobError::Usage("a job needs at least one rank".into()));
        }
        guard_exit();
        if self.conduit.processes() == Processes::OneForAll {
            return self.run_threads(&body);
        }
        if self.bind {
            binding::check(self.conduit, self.ranks)?;
            binding::pin(self.launched.as_ref().map_or(0, |l| l.rank), self.ranks)?;
        }
        let board = self.job_file.as_ref().map(|f| f.board().clone());
        let _watch = (self.launched.as_ref()).map(|l| RankWatch::enter(board.as_ref(), l.rank));
        let conduit = self.connect(board.as_ref())?;
        let part = run_rank(conduit, self.options_with(board), &body)?;
        self.deliver_stats(part)
    }

    /// What a conduit needs to connect this job's ranks.
    fn start(&self) -> Start<'_> {
        Start {
            layout: self.layout(),
            segment: self.segment,
            am_queue: self.am_queue,
            launched: (self.launched.as_ref()).map(|l| (l.rank, l.job_id.as_str())),
            job_file: self.job_file.as_deref(),
            named_objects: self.shm_names,
            boot_timeout: self.boot_timeout,
            hide_peers: self.hide_peers,
        }
    }

    /// This process's rank's conduit, a failure recorded on the board.
    fn connect(&self, board: Option<&Arc<Board>>) -> Result<Box<dyn Conduit>, JobError> {
        self.conduit
            .bootstrap()
            .connect(&self.start())
            .inspect_err(|e| {
                if let (Some(b), Some(l)) = (board, &self.launched) {
                    b.record(l.rank).fail(&e.to_string());
                }
            })
    }

    fn options_with(&self, board: Option<Arc<Board>>) -> Options {
        Options {
            board,
            ..self.options.clone()
        }
    }

    fn run_threads<F>(&self, body: &F) -> Result<(), JobError>
    where
        F: Fn(&Context) -> RankResult + Sync,
    {
        let board = match &self.job_file {
            Some(file) if file.board().ranks() == self.ranks => file.board().clone(),
            _ => Board::in_process(self.ranks),
        };
        if self.bind {
            binding::check(self.conduit, self.ranks)?;
        }
        let job = self.conduit.bootstrap().connect_all(&self.start())?;
        let parts = Mutex::new(Vec::new());
        std::thread::scope(|scope| -> Result<(), JobError> {
            let mut handles = Vec::with_capacity(self.ranks);
            for rank in 0..self.ranks {
                let job = job.clone();
                let options = self.options_with(Some(board.clone()));
                let board = board.clone();
                let parts = &parts;
                let handle = std::thread::Builder::new()
                    .name(format!("rank-{rank}"))
                    .stack_size(16 << 20)
                    .spawn_scoped(scope, move || {
                        if self.bind {
                            if let Err(e) = binding::pin(rank, self.ranks) {
                                return job.fail(rank, &e.to_string());
                            }
                        }
                        let _alive = crate::core::RankThread::enter();
                        let _watch = RankWatch::enter(Some(&board), rank);
                        let conduit = job.clone().conduit(rank);
                        match run_rank(conduit, options, body) {
                            Ok(part) => {
                                parts.lock().unwrap_or_else(|e| e.into_inner()).extend(part)
                            }
                            Err(JobError::RankFailed { why, .. }) => job.fail(rank, &why),
                            Err(other) => job.fail(rank, &other.to_string()),
                        }
                    })
                    .map_err(|source| JobError::Os {
                        what: format!("starting the thread of rank {rank}"),
                        source,
                    })?;
                handles.push(handle);
            }
            // Under a launcher, a rank that computes on without ever waiting would keep
            // the process (and so the job) alive after another rank failed: give it
            // ABORT_GRACE to notice, then end the process with the failure.
            // Without a launcher (a test in this process) the joins below simply wait.
            let mut failed_at: Option<std::time::Instant> = None;
            while self.job_file.is_some() && !handles.iter().all(|h| h.is_finished()) {
                if job.first_failure().is_some() {
                    let since = *failed_at.get_or_insert_with(std::time::Instant::now);
                    if since.elapsed() > ABORT_GRACE {
                        let running: Vec<usize> = (0..handles.len())
                            .filter(|&r| !handles[r].is_finished())
                            .collect();
                        if let Some((rank, why)) = job.first_failure() {
                            write_stderr(&format!(
                                "tessera: rank {rank} failed: {why}\ntessera: rank(s) {running:?} did not stop within {} s of it (running, never waiting); ending the ranks' process\n",
                                ABORT_GRACE.as_secs()
                            ));
                        }
                        std::process::exit(1);
                    }
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            for handle in handles {
                let _ = handle.join();
            }
            Ok(())
        })?;
        match job.first_failure() {
            Some((rank, why)) => Err(JobError::RankFailed { rank, why }),
            None => self.deliver_stats(parts.into_inner().unwrap_or_else(|e| e.into_inner())),
        }
    }

    /// Hand the statistics this process holds to where they go (nothing when statistics
    /// are off): its ranks' parts, or on the mpi conduit at rank 0 every rank's.
    pub(crate) fn deliver_stats(&self, parts: Vec<stats::RankStats>) -> Result<(), JobError> {
        let Some(sink) = &self.options.stats else {
            return Ok(());
        };
        let conduit = self.conduit.to_string();
        let ranks = parts
            .iter()
            .map(|p| p.rank + 1)
            .max()
            .unwrap_or(0)
            .max(self.ranks);
        match sink {
            stats::Sink::File(file) if !parts.is_empty() && parts.len() == ranks => {
                stats::JobStats::from_parts(ranks, &conduit, parts).write(file)
            }
            stats::Sink::Dir(dir) => parts.into_iter().try_for_each(|part| {
                let path = dir.join(stats::part_name(part.rank));
                stats::write_part(&path, ranks, &conduit, part)
            }),
            stats::Sink::File(file) => parts.into_iter().try_for_each(|part| {
                let mut path = file.clone().into_os_string();
                path.push(format!(".{}", part.rank));
                stats::write_part(path.as_ref(), ranks, &conduit, part)
            }),
        }
    }
}

/// After the end-of-job barrier: the statistics this rank hands in, if it counts: its own
/// part, or, where the conduit gathers them (`mpi`), every rank's at rank 0 and none
/// elsewhere.
pub(crate) fn stats_parts(ctx: &Context) -> Result<Vec<stats::RankStats>, JobError> {
    let Some(part) = ctx.stats() else {
        return Ok(Vec::new());
    };
    let failed = |why: String| JobError::RankFailed {
        rank: ctx.rank(),
        why,
    };
    let bytes = serde_json::to_vec(&part).map_err(|e| failed(e.to_string()))?;
    match ctx.conduit().gather_at_root(&bytes) {
        Ok(None) => Ok(vec![part]),
        Ok(Some(all)) => all
            .iter()
            .map(|b| {
                serde_json::from_slice(b).map_err(|e| failed(format!("a rank's statistics: {e}")))
            })
            .collect(),
        Err(e) => Err(failed(format!("gathering the statistics: {e}"))),
    }
}

/// Where this process's ranks send their statistics, from the environment: the
/// launcher's directory (`TESSERA_STATS_DIR`), else `TESSERA_STATS`'s file.
fn stats_sink() -> Result<Option<stats::Sink>, JobError> {
    if let Some(dir) = config::raw(stats::DIR_VARIABLE) {
        return Ok(Some(stats::Sink::Dir(dir.into())));
    }
    match config::raw("TESSERA_STATS") {
        None => Ok(None),
        Some(file) => {
            let file = std::path::PathBuf::from(file);
            stats::check_file(&file)?;
            Ok(Some(stats::Sink::File(file)))
        }
    }
}

/// Build the context, run the body, finish; any failure (error or panic) is
/// [`JobError::RankFailed`] with its reason. The rank's record on the board follows:
/// running, then finished or failed.
fn run_rank<F>(
    conduit: Box<dyn crate::conduit::Conduit>,
    options: Options,
    body: &F,
) -> Result<Vec<stats::RankStats>, JobError>
where
    F: Fn(&Context) -> RankResult + Sync,
{
    let board = options.board.clone();
    let rank = conduit.rank();
    let failed = |why: String| JobError::RankFailed { rank, why };
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let ctx = Context::new(conduit, options).map_err(|e| failed(format!("start-up: {e}")))?;
        if let Some(b) = &board {
            b.record(rank).set_state(RankState::Running);
        }
        let outcome = body(&ctx).and_then(|()| ctx.finish().map_err(Into::into));
        if let Err(e) = outcome {
            let why = e.to_string();
            // End the job now, naming the reason (the mpi conduit aborts every rank here).
            ctx.conduit().abort(&why);
            return Err(failed(why));
        }
        stats_parts(&ctx)
    }));
    let outcome = outcome.unwrap_or_else(|panic| {
        Err(failed(match panic.downcast_ref::<&str>() {
            Some(s) => format!("panicked: {s}"),
            None => match panic.downcast_ref::<String>() {
                Some(s) => format!("panicked: {s}"),
                None => "panicked".to_string(),
            },
        }))
    });
    if let Some(b) = &board {
        match &outcome {
            Ok(_) => b.record(rank).set_state(RankState::Finished),
            Err(JobError::RankFailed { why, .. }) => b.record(rank).fail(why),
            Err(other) => b.record(rank).fail(&other.to_string()),
        }
    }
    outcome
}

// ----- a rank that calls exit() -------------------------------------------------------

/// Boards of the jobs running in this process and the ranks this process runs in each,
/// for the exit check.
static BOARDS: Mutex<Vec<(Weak<Board>, Vec<usize>)>> = Mutex::new(Vec::new());

std::thread_local! {
    /// The rank this thread runs, if it is a rank's thread.
    static THIS_RANK: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
}

/// While alive: this thread runs `rank` of the job with `board` (marked starting).
struct RankWatch;

impl RankWatch {
    fn enter(board: Option<&Arc<Board>>, rank: usize) -> RankWatch {
        THIS_RANK.with(|r| r.set(Some(rank)));
        if let Some(board) = board {
            board.record(rank).set_state(RankState::Starting);
            let mut boards = BOARDS.lock().unwrap_or_else(|e| e.into_inner());
            boards.retain(|(b, _)| b.strong_count() > 0);
            match boards
                .iter_mut()
                .find(|(b, _)| b.as_ptr() == Arc::as_ptr(board))
            {
                Some((_, ranks)) => ranks.push(rank),
                None => boards.push((Arc::downgrade(board), vec![rank])),
            }
        }
        RankWatch
    }
}

impl Drop for RankWatch {
    fn drop(&mut self) {
        THIS_RANK.with(|r| r.set(None));
    }
}

/// Install, once per process, the check that runs when the process exits with status 0:
/// if a job of this process is still running (some rank of this process neither finished
/// nor failed), whoever called `exit(0)` left the other ranks waiting, so say which rank it
/// was and exit with status 1 instead. (Any other status is a failure already and is left
/// as it is.)
fn guard_exit() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: on_exit registers a function that glibc calls with the exit status and
        // our null argument; `on_exit_status` never unwinds (try_lock, loads, raw writes).
        unsafe {
            on_exit(on_exit_status, std::ptr::null_mut());
        }
    });
}

extern "C" {
    /// glibc's `on_exit(3)`: like `atexit`, but the function learns the exit status.
    fn on_exit(
        function: extern "C" fn(libc::c_int, *mut libc::c_void),
        argument: *mut libc::c_void,
    ) -> libc::c_int;
}

extern "C" fn on_exit_status(status: libc::c_int, _: *mut libc::c_void) {
    if status == 0 {
        exit_check();
    }
}

fn exit_check() {
    let Ok(boards) = BOARDS.try_lock() else {
        return;
    };
    let mut unfinished = Vec::new();
    let mut board_text = String::new();
    for (board, mine) in boards.iter() {
        let Some(board) = board.upgrade() else {
            continue;
        };
        let views = board.snapshot();
        // A failing job is already ending with its own report.
        if mine.iter().any(|&r| views[r].state == RankState::Failed) {
            continue;
        }
        let running: Vec<usize> = mine
            .iter()
            .copied()
            .filter(|&r| {
                matches!(
                    views[r].state,
                    RankState::Starting | RankState::Running | RankState::Waiting
                )
            })
            .collect();
        if !running.is_empty() {
            unfinished.extend(running);
            unfinished.sort_unstable();
            board_text = board::describe_all(&views, board::now_ms());
        }
    }
    if unfinished.is_empty() {
        return;
    }
    let who = THIS_RANK
        .try_with(|r| r.get())
        .ok()
        .flatten()
        .map_or("a thread that is not a rank".to_string(), |r| {
            format!("rank {r}")
        });
    let message = format!(
        "tessera: {who} called exit(0) while rank(s) {unfinished:?} of this process had not finished the job, so the other ranks would wait for them forever; exiting with status 1 instead (return from the rank's body to end it)\n{board_text}"
    );
    write_stderr(&message);
    // SAFETY: _exit ends the process at once; nothing here relies on destructors.
    unsafe { libc::_exit(1) };
}

/// Restore SIGPIPE's default action (Rust ignores it, so `println!` to a closed pipe
/// panics): a rank whose output is closed ends quietly, and the launcher, seeing SIGPIPE,
/// ends the job quietly with status 141 as a pipeline expects.
fn default_sigpipe() {
    use nix::sys::signal::{signal, SigHandler, Signal};
    // SAFETY: installing the default disposition runs no handler code.
    let _ = unsafe { signal(Signal::SIGPIPE, SigHandler::SigDfl) };
}

/// Write `text` to standard error in one `write` call where the kernel allows (so lines
/// from several ranks do not interleave), without taking Rust's stderr lock.
pub fn write_stderr(text: &str) {
    let mut bytes = text.as_bytes();
    while !bytes.is_empty() {
        match nix::unistd::write(std::io::stderr(), bytes) {
            Ok(0) | Err(_) => return,
            Ok(n) => bytes = &bytes[n..],
        }
    }
}

/// Run an SPMD program: `body` runs on every rank of the job this process belongs to
/// (from the environment contract; one rank when started directly). On failure it prints
/// the error and exits the process with status 1, so `main` can be just this call. It also
/// gives SIGPIPE its default action, so that a rank whose output is closed (`| head`)
/// ends quietly instead of panicking in `println!`.
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
    default_sigpipe();
    let job = match Job::from_env() {
        Ok(job) => job,
        Err(e) => {
            write_stderr(&format!("tessera: {e}\n"));
            std::process::exit(2);
        }
    };
    if let Err(e) = job.run(body) {
        write_stderr(&format!("tessera: {e}\n"));
        std::process::exit(1);
    }
}
