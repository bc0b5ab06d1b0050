//! The launcher behind `tessera run`: start a job's processes, watch them, end them.
//!
//! - `smp`: one process per rank, each told its rank through the environment contract.
//! - `threads`: one process that runs every rank as a thread.
//! - `mpi`: one `mpirun` (`TESSERA_MPIRUN`, default `mpirun`) that starts the ranks; with
//!   Open MPI it adds `--oversubscribe` (more ranks than cores is normal here),
//!   `--allow-run-as-root` when run as root, and `-x` for every Tessera variable so that
//!   ranks on other hosts see them too. `TESSERA_MPIRUN_ARGS` adds arguments (a host
//!   file, for instance). Inside a Slurm allocation, or with `TESSERA_LAUNCHER=srun`,
//!   `srun` starts them instead ([`MpiLauncher`]).
//!
//! For `smp` and `threads` the launcher first creates the job's private memory
//! ([`JobFile`]: the status board, and every smp rank's region), which the ranks inherit as
//! `TESSERA_JOB_FD`. Through the board it knows what every rank is doing, so:
//! - a rank that ends with status 0 before it has finished its part (it called `exit`, or
//!   a wrapper script ended without starting it) fails the job at once, naming the rank and
//!   what the others wait for;
//! - `SIGQUIT` (Ctrl-\\) prints every rank's current wait without ending the job.
//!
//! When any rank exits non-zero or is killed, the launcher sends SIGTERM to the others,
//! SIGKILL after one second, and reports which rank failed and how. SIGINT, SIGTERM and
//! SIGHUP to the launcher end the whole job the same way. Ranks are also told by the
//! kernel (`PR_SET_PDEATHSIG`) to die if the launcher itself is killed (the signal follows
//! the *thread* that started them, so call [`launch`] from a thread that outlives the
//! job); a rank whose launcher died before it could ask exits at once. The launcher is a
//! *child subreaper*, so a rank's own children (a script's background jobs) become its
//! children when the rank ends: at the end of the job every such process is ended too, on
//! success and on failure. (Ranks are not moved into process groups of their own, which
//! would stop rank 0 from reading a terminal.) Job ids are random; nothing the job creates
//! has a predictable name.
//!
//! This module must never interpret what ranks print; it only forwards it, a whole line
//! per `write`.

use std::ffi::OsString;
use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
use nix::unistd::Pid;

use super::board::{self, Board, JobFile, RankState};
use super::ConduitKind;
use crate::conduit::shm::{default_ring_capacity, RegionLayout};
use crate::conduit::smp;
use crate::conduit::Processes;
use crate::config;
use crate::core::report as stats;
use crate::error::JobError;

/// How long ranks get to exit after SIGTERM before SIGKILL.
const TERM_GRACE: Duration = Duration::from_millis(1000);
/// The watchdog the launcher gives its ranks unless `TESSERA_WAIT_TIMEOUT` says otherwise:
/// a blocking wait that lasts this many seconds fails, naming the ranks it waits for.
pub const DEFAULT_WAIT_TIMEOUT_S: u64 = 300;
/// Longest line `--label` holds before it forwards what it has (with its label).
const LABEL_LINE_MAX: usize = 64 * 1024;
/// How long, after the last rank ended, output forwarding may still take.
const DRAIN_LIMIT: Duration = Duration::from_secs(2);

/// What to launch.
#[derive(Clone, Debug)]
pub struct Launch {
    /// Number of ranks.
    pub ranks: usize,
    /// Conduit.
    pub conduit: ConduitKind,
    /// Segment size per rank (`TESSERA_SEGMENT` syntax), or the default.
    pub segment: Option<String>,
    /// Prefix every output line with `[rank]` (`smp` only: under `threads` every rank
    /// shares one process and one output stream, so lines are forwarded unlabelled).
    pub label: bool,
    /// End the job (as a failure) after this long.
    pub timeout: Option<Duration>,
    /// The program and its arguments.
    pub program: OsString,
    /// Arguments.
    pub args: Vec<OsString>,
    /// Extra environment for every rank.
    pub env: Vec<(OsString, OsString)>,
    /// Directories (of flat files) to remove should the launcher be killed outright
    /// (SIGKILL) before it can clean up: a command's private result directory.
    pub remove_if_killed: Vec<std::path::PathBuf>,
}

impl Launch {
    /// Launch `program` on `ranks` ranks of the default (`smp`) conduit.
    ///
    /// ```no_run
    /// use tessera::job::launcher::Launch;
    /// let outcome = Launch::new(4, "./target/release/examples/hello").run().unwrap();
    /// assert_eq!(outcome.code, 0);
    /// ```
    pub fn new(ranks: usize, program: impl Into<OsString>) -> Launch {
        Launch {
            ranks,
            conduit: ConduitKind::SMP,
            segment: None,
            label: false,
            timeout: None,
            program: program.into(),
            args: Vec::new(),
            env: Vec::new(),
            remove_if_killed: Vec::new(),
        }
    }

    /// Start the job and wait for it to end.
    pub fn run(&self) -> Result<Outcome, JobError> {
        launch(self)
    }

    /// The value a rank will see for `var`: this launch's own setting, else the launcher's
    /// environment (empty means unset).
    fn env_value(&self, var: &str) -> Option<String> {
        match self.env.iter().rev().find(|(k, _)| k == var) {
            Some((_, v)) => Some(v.to_string_lossy().into_owned()).filter(|v| !v.is_empty()),
            None => config::text(var),
        }
    }
}

/// How a job ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// The status the launcher should exit with: 0 on success, else the failing rank's
    /// exit code (128 + signal number when it was killed).
    pub code: i32,
    /// The first failure: the rank (if a rank failed) and a description.
    pub failure: Option<(Option<usize>, String)>,
    /// The job ended because its output was closed (a rank was killed by SIGPIPE): a
    /// command-line tool should end quietly with [`Outcome::code`].
    pub broken_pipe: bool,
}

static RECEIVED_SIGNAL: AtomicI32 = AtomicI32::new(0);
static QUIT_REQUESTS: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(signal: libc::c_int) {
    // Async-signal-safe: a single atomic store.
    RECEIVED_SIGNAL.store(signal, Ordering::SeqCst);
}

extern "C" fn on_quit(_: libc::c_int) {
    // Async-signal-safe: a single atomic add.
    QUIT_REQUESTS.fetch_add(1, Ordering::SeqCst);
}

fn install_signal_handlers() {
    let action = SigAction::new(
        SigHandler::Handler(on_signal),
        SaFlags::empty(),
        SigSet::empty(),
    );
    for signal in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        // SAFETY: the handler only performs an atomic store, which is async-signal-safe,
        // and does not depend on any other process state.
        let _ = unsafe { sigaction(signal, &action) };
    }
    let quit = SigAction::new(
        SigHandler::Handler(on_quit),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    // SAFETY: as above (one atomic add).
    let _ = unsafe { sigaction(Signal::SIGQUIT, &quit) };
}

/// "signal N (NAME)" and, for the signals that have a usual cause here, what to do.
fn signal_text(signal: i32) -> String {
    let name = Signal::try_from(signal)
        .map(|s| s.as_str())
        .unwrap_or("unknown");
    let hint = match signal {
        libc::SIGBUS => ": shared memory ran out (the machine's memory, or /dev/shm for named objects, is smaller than what the ranks touched); lower --segment or the problem size",
        _ => "",
    };
    format!("signal {signal} ({name}){hint}")
}

/// Describe how a rank ended (`mpirun`: it exits with 128 + the signal that killed a
/// rank, which is said too).
fn describe(status: ExitStatus, conduit: ConduitKind) -> String {
    if let Some(signal) = status.signal() {
        format!("was killed by {}", signal_text(signal))
    } else if let (Processes::ByMpiLauncher, Some(code @ 129..=159)) =
        (conduit.processes(), status.code())
    {
        format!(
            "exited with status {code} (a rank was killed by {})",
            signal_text(code - 128)
        )
    } else {
        match status.code() {
            Some(101) => "exited with status 101 (it panicked)".to_string(),
            Some(code) => format!("exited with status {code}"),
            None => "ended for an unknown reason".to_string(),
        }
    }
}

fn exit_code(status: ExitStatus) -> i32 {
    status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

/// Write all of `bytes` to descriptor `fd`, retrying partial writes; one `write` per call
/// where the kernel takes it whole (pipes do up to 4 KiB atomically).
fn write_fd(fd: i32, mut bytes: &[u8]) {
    // SAFETY: `fd` is 1 or 2, open for the life of the process; the borrow lasts one call.
    let out = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
    while !bytes.is_empty() {
        match nix::unistd::write(out, bytes) {
            Ok(0) => return,
            Ok(n) => bytes = &bytes[n..],
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return,
        }
    }
}

/// Forward `stream` line by line with a `[rank] ` prefix, each line in one write. A line
/// longer than [`LABEL_LINE_MAX`] goes out in pieces of that size, each labelled, so memory
/// stays bounded.
fn forward(
    mut stream: impl Read + Send + 'static,
    rank: usize,
    fd: i32,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let prefix = format!("[{rank}] ");
        let mut pending: Vec<u8> = Vec::with_capacity(4096);
        let mut buf = vec![0u8; 16 * 1024];
        let emit = |line: &[u8]| {
            let mut out = Vec::with_capacity(prefix.len() + line.len() + 1);
            out.extend_from_slice(prefix.as_bytes());
            out.extend_from_slice(line);
            if out.last() != Some(&b'\n') {
                out.push(b'\n');
            }
            write_fd(fd, &out);
        };
        loop {
            let n = match stream.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            };
            pending.extend_from_slice(&buf[..n]);
            let mut start = 0;
            while let Some(i) = pending[start..].iter().position(|&b| b == b'\n') {
                emit(&pending[start..start + i + 1]);
                start += i + 1;
            }
            pending.drain(..start);
            while pending.len() >= LABEL_LINE_MAX {
                emit(&pending[..LABEL_LINE_MAX]);
                pending.drain(..LABEL_LINE_MAX);
            }
        }
        if !pending.is_empty() {
            emit(&pending);
        }
    })
}

struct Rank {
    rank: usize,
    child: Child,
    status: Option<ExitStatus>,
}

/// What starts the ranks of an mpi job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MpiLauncher {
    /// `mpirun -np N` (`TESSERA_MPIRUN`).
    Mpirun,
    /// Slurm's `srun -n N --mpi=pmix`, the way a cluster's batch system starts MPI ranks
    /// inside its allocation.
    Srun,
}

impl MpiLauncher {
    /// The command's name, as messages give it.
    ///
    /// ```
    /// use tessera::job::launcher::MpiLauncher;
    /// assert_eq!(MpiLauncher::Srun.name(), "srun");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            MpiLauncher::Mpirun => "mpirun",
            MpiLauncher::Srun => "srun",
        }
    }

    /// The launcher for a job whose own environment is `env`: `TESSERA_LAUNCHER` there or
    /// in this process's environment (`mpirun` or `srun`), else `srun` inside a Slurm
    /// allocation (`SLURM_JOB_ID` is set by `salloc`, `sbatch` and `srun`), else `mpirun`.
    ///
    /// ```
    /// use tessera::job::launcher::MpiLauncher;
    /// let env = [("TESSERA_LAUNCHER".into(), "srun".into())];
    /// assert_eq!(MpiLauncher::for_job(&env), MpiLauncher::Srun);
    /// ```
    pub fn for_job(env: &[(OsString, OsString)]) -> MpiLauncher {
        let named = env
            .iter()
            .find(|(k, _)| k == "TESSERA_LAUNCHER")
            .map(|(_, v)| v.to_string_lossy().into_owned())
            .or_else(|| config::text("TESSERA_LAUNCHER"));
        match named.as_deref() {
            Some("srun") => MpiLauncher::Srun,
            Some(_) => MpiLauncher::Mpirun,
            None if config::raw("SLURM_JOB_ID").is_some() => MpiLauncher::Srun,
            None => MpiLauncher::Mpirun,
        }
    }
}

/// The command that starts `spec`'s program: the program itself, or `mpirun` or `srun`
/// running it.
fn program_command(spec: &Launch) -> Command {
    if spec.conduit.processes() != Processes::ByMpiLauncher {
        let mut cmd = Command::new(&spec.program);
        cmd.args(&spec.args);
        return cmd;
    }
    if MpiLauncher::for_job(&spec.env) == MpiLauncher::Srun {
        // srun passes the whole environment on (its default), so the TESSERA_* settings
        // reach the ranks; Open MPI's ranks find each other through PMIx. More ranks than
        // the allocation's processors are allowed (`--overcommit`), as mpirun's
        // `--oversubscribe` allows them, and one failing rank ends the others.
        let mut cmd = Command::new("srun");
        cmd.arg("-n").arg(spec.ranks.to_string());
        cmd.args(["--overcommit", "--mpi=pmix", "--kill-on-bad-exit=1"]);
        if let Some(extra) = config::text("TESSERA_MPIRUN_ARGS") {
            cmd.args(extra.split_whitespace());
        }
        cmd.arg(&spec.program).args(&spec.args);
        return cmd;
    }
    let mpirun = config::raw("TESSERA_MPIRUN").unwrap_or_else(|| "mpirun".into());
    let open_mpi = Command::new(&mpirun)
        .arg("--version")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("Open MPI"));
    let mut cmd = Command::new(&mpirun);
    cmd.arg("-np").arg(spec.ranks.to_string());
    if open_mpi {
        cmd.arg("--oversubscribe");
        if nix::unistd::geteuid().is_root() {
            cmd.arg("--allow-run-as-root");
        }
        // Open MPI 4.1 picks its shared-memory one-sided component for a one-process
        // communicator, and that component cannot create a window over existing memory
        // (MPI_Win_create fails with MPI_ERR_WIN); leave it out unless the user chose.
        if spec.ranks == 1 && config::raw("OMPI_MCA_osc").is_none() {
            cmd.args(["--mca", "osc", "^sm"]);
        }
        let mut vars: Vec<OsString> = vec!["TESSERA_CONDUIT".into(), "TESSERA_JOB_ID".into()];
        if spec.segment.is_some() {
            vars.push("TESSERA_SEGMENT".into());
        }
        vars.extend(spec.env.iter().map(|(k, _)| k.clone()));
        vars.extend(config::names_set().filter(|k| k.to_string_lossy().starts_with("TESSERA_")));
        vars.sort();
        vars.dedup();
        vars.retain(|v| v != "TESSERA_JOB_FD");
        for var in vars {
            cmd.arg("-x").arg(var);
        }
    }
    if let Some(extra) = config::text("TESSERA_MPIRUN_ARGS") {
        cmd.args(extra.split_whitespace());
    }
    cmd.arg(&spec.program).args(&spec.args);
    cmd
}

fn spawn_rank(
    spec: &Launch,
    job_id: &str,
    job_fd: Option<i32>,
    rank: Option<usize>,
) -> Result<Child, JobError> {
    let mut cmd = program_command(spec);
    cmd.env("TESSERA_CONDUIT", spec.conduit.name())
        .env("TESSERA_RANKS", spec.ranks.to_string())
        .env("TESSERA_JOB_ID", job_id)
        .env_remove("TESSERA_JOB_FD");
    if spec.env_value("TESSERA_WAIT_TIMEOUT").is_none() {
        cmd.env("TESSERA_WAIT_TIMEOUT", DEFAULT_WAIT_TIMEOUT_S.to_string());
    }
    cmd.envs(spec.env.iter().map(|(k, v)| (k, v)));
    if let Some(fd) = job_fd {
        cmd.env("TESSERA_JOB_FD", fd.to_string());
    }
    match rank {
        Some(r) => cmd.env("TESSERA_RANK", r.to_string()),
        None => cmd.env_remove("TESSERA_RANK"),
    };
    if let Some(segment) = &spec.segment {
        cmd.env("TESSERA_SEGMENT", segment);
    }
    if rank.unwrap_or(0) != 0 {
        cmd.stdin(Stdio::null());
    }
    if spec.label && rank.is_some() {
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    }
    let launcher = nix::unistd::getpid();
    // SAFETY: the closure runs in the child between fork and exec and only calls prctl,
    // getppid, signal, fcntl and _exit, which are async-signal-safe; it allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The launcher may have died between fork and prctl, in which case the signal
            // will never come: we were already handed to another parent.
            if libc::getppid() != launcher.as_raw() {
                libc::_exit(1);
            }
            // Ctrl-\ reaches every process of the terminal's group: the launcher answers it
            // with the ranks' waits, and the ranks must not die of it.
            libc::signal(libc::SIGQUIT, libc::SIG_IGN);
            // The job file is close-on-exec in the launcher (so no other program it starts
            // inherits it); this rank keeps it.
            if let Some(fd) = job_fd {
                if libc::fcntl(fd, libc::F_SETFD, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    cmd.spawn().map_err(|source| JobError::Os {
        what: match spec.conduit.processes() {
            // What failed to start is mpirun, not the program it would have started.
            Processes::ByMpiLauncher if MpiLauncher::for_job(&spec.env) == MpiLauncher::Srun => {
                "starting srun for the mpi conduit (inside a Slurm allocation, or with TESSERA_LAUNCHER=srun; is Slurm's srun on PATH? --launcher mpirun uses mpirun instead)".into()
            }
            Processes::ByMpiLauncher => format!(
                "starting {} for the mpi conduit (TESSERA_MPIRUN names another mpirun; is MPI installed?)",
                cmd.get_program().to_string_lossy()
            ),
            _ => format!(
                "starting {} (rank {})",
                spec.program.to_string_lossy(),
                rank.unwrap_or(0)
            ),
        },
        source,
    })
}

fn signal_all(ranks: &[Rank], signal: Signal) {
    for r in ranks.iter().filter(|r| r.status.is_none()) {
        let _ = kill(Pid::from_raw(r.child.id() as i32), signal);
    }
}

/// The job's memory file, where the launcher makes one: the board for smp and threads, and
/// smp's regions unless named objects were asked for.
fn job_file(spec: &Launch) -> Result<Option<JobFile>, JobError> {
    let shm_names = match spec.env_value("TESSERA_SHM_NAMES") {
        Some(v) => config::parse_switch(&v).ok_or_else(|| JobError::BadEnv {
            var: "TESSERA_SHM_NAMES",
            value: v,
            why: "a switch takes 1/0, true/false, yes/no or on/off".into(),
        })?,
        None => false,
    };
    match spec.conduit.processes() {
        Processes::ByMpiLauncher => Ok(None),
        Processes::OneForAll => JobFile::create(spec.ranks, None).map(Some),
        Processes::PerRank if shm_names => JobFile::create(spec.ranks, None).map(Some),
        Processes::PerRank => {
            let segment = match spec
                .segment
                .clone()
                .or_else(|| spec.env_value("TESSERA_SEGMENT"))
            {
                Some(text) => config::parse_size(&text)?,
                None => super::DEFAULT_SEGMENT,
            };
            let queue = match spec.env_value("TESSERA_AM_QUEUE") {
                Some(text) => config::parse_size(&text)
                    .ok()
                    .filter(|&q| q <= config::MAX_AM_QUEUE)
                    .ok_or_else(|| JobError::BadEnv {
                        var: "TESSERA_AM_QUEUE",
                        value: text,
                        why: format!(
                            "a size of at most {} MiB, e.g. 64K",
                            config::MAX_AM_QUEUE >> 20
                        ),
                    })?,
                None => default_ring_capacity(spec.ranks),
            };
            let layout = RegionLayout::new(spec.ranks, segment, queue);
            warn_if_memory_is_short(&layout);
            JobFile::create(
                spec.ranks,
                Some((layout.region_len, layout.segment_len, layout.ring_capacity)),
            )
            .map(Some)
        }
    }
}

/// Warn when one rank's region is larger than the memory available: regions are reserved
/// lazily, so a job may well run, but a rank that touches more memory than there is gets
/// killed (SIGBUS), which is better said before the start.
fn warn_if_memory_is_short(layout: &RegionLayout) {
    if let Some(available) = super::available_memory().filter(|&a| (layout.segment_len as u64) > a)
    {
        write_fd(
            2,
            format!(
                "tessera: warning: each rank's segment is {} MiB but only {} MiB of memory is available; a rank that touches more is killed by SIGBUS (lower --segment / TESSERA_SEGMENT)\n",
                layout.segment_len >> 20,
                available >> 20
            )
            .as_bytes(),
        );
    }
}

/// Become a child subreaper: orphaned descendants of the ranks become our children, so
/// that the job can end them.
fn become_subreaper() {
    // SAFETY: prctl with PR_SET_CHILD_SUBREAPER and an integer argument has no memory
    // effects; failure only means stray descendants go to init instead.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1);
    }
}

/// Children of this process that are neither ranks nor the job's keeper (descendants of
/// ranks, orphaned to us).
fn stray_children(ranks: &[Rank], keeper: Option<i32>) -> Vec<i32> {
    let me = std::process::id();
    let mut found = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{me}/task")) else {
        return found;
    };
    for task in tasks.flatten() {
        let Ok(text) = std::fs::read_to_string(task.path().join("children")) else {
            continue;
        };
        found.extend(
            text.split_whitespace()
                .filter_map(|p| p.parse::<i32>().ok())
                .filter(|&p| Some(p) != keeper && !ranks.iter().any(|r| r.child.id() as i32 == p)),
        );
    }
    found.sort_unstable();
    found.dedup();
    found
}

/// End every process the ranks left behind (after the ranks themselves have ended): TERM,
/// then KILL after a grace period, reaping each.
fn end_strays(ranks: &[Rank], keeper: Option<i32>) {
    let deadline = Instant::now() + TERM_GRACE;
    let mut termed = false;
    loop {
        let strays = stray_children(ranks, keeper);
        if strays.is_empty() {
            return;
        }
        let signal = if !termed {
            Signal::SIGTERM
        } else if Instant::now() > deadline {
            Signal::SIGKILL
        } else {
            Signal::SIGCONT // wake stopped ones so that TERM can act
        };
        for &pid in &strays {
            let _ = kill(Pid::from_raw(pid), signal);
            let _ = nix::sys::wait::waitpid(
                Pid::from_raw(pid),
                Some(nix::sys::wait::WaitPidFlag::WNOHANG),
            );
        }
        termed = true;
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The failure for ranks that exited with status 0 without ever joining the job, once some
/// other rank has joined it (the joined ones would wait for them forever).
fn skipped_ranks(board: &Board, skipped: &[usize]) -> Option<String> {
    let views = board.snapshot();
    let joined =
        (0..views.len()).any(|r| !skipped.contains(&r) && views[r].state != RankState::Absent);
    let never: Vec<usize> = skipped
        .iter()
        .copied()
        .filter(|&r| views[r].state == RankState::Absent)
        .collect();
    (joined && !never.is_empty()).then(|| {
        format!(
            "rank(s) {never:?} exited with status 0 without joining the job while other ranks did (did a wrapper script skip the program on those ranks?); the ranks stood so:\n{}",
            board::describe_all(&views, board::now_ms()).trim_end()
        )
    })
}

/// Why a rank that exited with status 0 did so too early, if it did.
fn early_exit(board: &Board, rank: usize, conduit: ConduitKind) -> Option<String> {
    let views = board.snapshot();
    let started = |r: usize| views[r].state != RankState::Absent;
    let who = match conduit.processes() {
        Processes::OneForAll => "the ranks' process".to_string(),
        _ => format!("rank {rank}"),
    };
    let unfinished: Vec<usize> = match conduit.processes() {
        Processes::OneForAll => (0..views.len())
            .filter(|&r| started(r) && views[r].state != RankState::Finished)
            .collect(),
        _ => vec![rank]
            .into_iter()
            .filter(|&r| started(r) && views[r].state != RankState::Finished)
            .collect(),
    };
    let now = board::now_ms();
    if !unfinished.is_empty() {
        return Some(format!(
            "{who} exited with status 0 before the end of the job (rank(s) {unfinished:?} never reached the end-of-job barrier: a call to exit, or a wrapper that ended first); the ranks stood so:\n{}",
            board::describe_all(&views, now).trim_end()
        ));
    }
    None
}

/// Start the job described by `spec` and wait until every process has ended.
pub fn launch(spec: &Launch) -> Result<Outcome, JobError> {
    // Refused once here rather than by every rank.
    if config::switch("TESSERA_BIND")?.unwrap_or(false) {
        super::binding::check(spec.conduit, spec.ranks)?;
    }
    let Some(file) = spec.env_value("TESSERA_STATS") else {
        return launch_ranks(spec);
    };
    // Statistics: the ranks leave their parts in a private directory, merged here.
    let file = std::path::PathBuf::from(file);
    stats::check_file(&file)?;
    let dir = tempfile::Builder::new()
        .prefix("tessera-stats-")
        .tempdir()
        .map_err(|source| JobError::Os {
            what: "creating a private directory for statistics".into(),
            source,
        })?;
    let mut with_dir = spec.clone();
    with_dir
        .env
        .push((stats::DIR_VARIABLE.into(), dir.path().into()));
    with_dir.remove_if_killed.push(dir.path().to_path_buf());
    let mut outcome = launch_ranks(&with_dir)?;
    match stats::merge_dir(dir.path(), spec.ranks, &file) {
        Ok(()) => {}
        Err(e) if outcome.failure.is_none() => {
            outcome.code = 1;
            outcome.failure = Some((None, e.to_string()));
        }
        // The job's own failure says more than the statistics it could not finish.
        Err(_) => {}
    }
    Ok(outcome)
}

/// [`launch`] once statistics are arranged for.
fn launch_ranks(spec: &Launch) -> Result<Outcome, JobError> {
    if spec.ranks == 0 {
        return Err(JobError::Usage(
            "a job needs at least one rank (-n 1 or more)".into(),
        ));
    }
    if let Some(segment) = &spec.segment {
        config::parse_size(segment)?;
    }
    config::check_user_settings()?;
    install_signal_handlers();
    become_subreaper();
    let job_id = smp::new_job_id()?;
    // Before any rank exists: it ends them and their descendants if this process is
    // killed outright (see `keeper`).
    let keeper = super::keeper::Keeper::start(&job_id, &spec.remove_if_killed);
    let file = job_file(spec)?.map(Arc::new);
    let board = file.as_ref().map(|f| f.board().clone());
    let job_fd = file.as_ref().map(|f| f.fd().as_raw_fd());
    if let Some(fd) = job_fd {
        // Close-on-exec here, so that only the ranks (pre_exec clears it) inherit it.
        let _ = nix::fcntl::fcntl(
            // SAFETY: `fd` belongs to `file`, alive for this whole function.
            unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) },
            nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
        );
    }
    let processes: Vec<Option<usize>> = match spec.conduit.processes() {
        Processes::PerRank => (0..spec.ranks).map(Some).collect(),
        Processes::OneForAll | Processes::ByMpiLauncher => vec![None],
    };
    let mut ranks: Vec<Rank> = Vec::with_capacity(processes.len());
    let mut forwarders = Vec::new();
    for rank in processes {
        match spawn_rank(spec, &job_id, job_fd, rank) {
            Ok(mut child) => {
                let r = rank.unwrap_or(0);
                if let Some(out) = child.stdout.take() {
                    forwarders.push(forward(out, r, 1));
                }
                if let Some(err) = child.stderr.take() {
                    forwarders.push(forward(err, r, 2));
                }
                ranks.push(Rank {
                    rank: r,
                    child,
                    status: None,
                });
            }
            Err(e) => {
                signal_all(&ranks, Signal::SIGKILL);
                for r in &mut ranks {
                    let _ = r.child.wait();
                }
                end_strays(&ranks, keeper.as_ref().map(|k| k.pid()));
                cleanup(&job_id);
                return Err(e);
            }
        }
    }

    let started = Instant::now();
    let mut failure: Option<(Option<usize>, String)> = None;
    let mut code = 0;
    let mut broken_pipe = false;
    let mut teardown: Option<Instant> = None;
    let mut termed = false;
    let mut killed = false;
    let mut quits_served = QUIT_REQUESTS.load(Ordering::SeqCst);
    // Ranks that exited with status 0 before joining the job (fine for programs that do
    // not use Tessera, a failure once another rank joins).
    let mut skipped: Vec<usize> = Vec::new();
    loop {
        for r in ranks.iter_mut().filter(|r| r.status.is_none()) {
            if let Ok(Some(status)) = r.child.try_wait() {
                r.status = Some(status);
                if teardown.is_some() {
                    continue;
                }
                if let Some(b) = board.as_ref() {
                    // A rank that ended the whole job on purpose (global exit): its status
                    // is the job's, and the others are ended.
                    let record = b.record(r.rank.min(b.ranks() - 1));
                    let by =
                        (0..b.ranks()).find(|&x| b.record(x).view().state == RankState::GlobalExit);
                    if let Some(by) = by.filter(|_| {
                        spec.conduit.processes() != Processes::PerRank
                            || record.view().state == RankState::GlobalExit
                    }) {
                        let status_code = b.record(by).exit_status();
                        code = status_code;
                        failure = (status_code != 0).then(|| {
                            (
                                Some(by),
                                format!(
                                    "rank {by} ended the job with global exit status {status_code}"
                                ),
                            )
                        });
                        teardown = Some(Instant::now());
                        continue;
                    }
                }
                let early = match (&board, status.success()) {
                    (Some(b), true) => {
                        if spec.conduit.processes() == Processes::PerRank
                            && b.record(r.rank).view().state == RankState::Absent
                        {
                            skipped.push(r.rank);
                        }
                        early_exit(b, r.rank, spec.conduit)
                    }
                    _ => None,
                };
                if !status.success() || early.is_some() {
                    let who = match spec.conduit.processes() {
                        Processes::PerRank => format!("rank {}", r.rank),
                        Processes::OneForAll => "the ranks' process".to_string(),
                        Processes::ByMpiLauncher => {
                            MpiLauncher::for_job(&spec.env).name().to_string()
                        }
                    };
                    let why = early.unwrap_or_else(|| {
                        let mut why = format!("{who} {}", describe(status, spec.conduit));
                        if let Some(reason) = board
                            .as_ref()
                            .and_then(|b| failed_reason(b, r.rank, spec.conduit))
                        {
                            why.push_str(&format!(" ({reason})"));
                        }
                        why
                    });
                    // Output closed (`| head`): end quietly, as a pipeline expects.
                    broken_pipe = status.signal() == Some(libc::SIGPIPE);
                    code = if status.success() {
                        1
                    } else {
                        exit_code(status)
                    };
                    failure = Some((Some(r.rank), why));
                    teardown = Some(Instant::now());
                }
            }
        }
        if teardown.is_none() && !skipped.is_empty() {
            if let Some(why) = board.as_ref().and_then(|b| skipped_ranks(b, &skipped)) {
                failure = Some((skipped.first().copied(), why));
                code = 1;
                teardown = Some(Instant::now());
            }
        }
        if ranks.iter().all(|r| r.status.is_some()) {
            break;
        }
        let quits = QUIT_REQUESTS.load(Ordering::SeqCst);
        if quits != quits_served {
            quits_served = quits;
            write_fd(2, dump(board.as_deref(), spec).as_bytes());
        }
        if teardown.is_none() {
            let signal = RECEIVED_SIGNAL.load(Ordering::SeqCst);
            if signal != 0 {
                failure = Some((None, format!("the launcher received signal {signal}")));
                code = 128 + signal;
                teardown = Some(Instant::now());
            } else if let Some(limit) = spec.timeout.filter(|&t| started.elapsed() > t) {
                failure = Some((
                    None,
                    format!(
                        "the job exceeded its time limit of {} s",
                        limit.as_secs_f64()
                    ),
                ));
                code = 124;
                teardown = Some(Instant::now());
            }
        }
        if let Some(t) = teardown {
            if !termed {
                signal_all(&ranks, Signal::SIGTERM);
                termed = true;
            } else if !killed && t.elapsed() > TERM_GRACE {
                signal_all(&ranks, Signal::SIGKILL);
                killed = true;
            }
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    end_strays(&ranks, keeper.as_ref().map(|k| k.pid()));
    let drain_until = Instant::now() + DRAIN_LIMIT;
    for f in forwarders {
        while !f.is_finished() && Instant::now() < drain_until {
            std::thread::sleep(Duration::from_millis(2));
        }
        if f.is_finished() {
            let _ = f.join();
        }
    }
    cleanup(&job_id);
    drop(file);
    if let Some(keeper) = keeper {
        keeper.finish();
    }
    Ok(Outcome {
        code,
        failure,
        broken_pipe,
    })
}

/// The first line a failed rank left on the board, if any.
fn failed_reason(board: &Board, rank: usize, conduit: ConduitKind) -> Option<String> {
    let views = board.snapshot();
    let pick = match conduit.processes() {
        Processes::OneForAll => views.iter().position(|v| v.state == RankState::Failed)?,
        _ => rank,
    };
    let view = views.get(pick)?;
    if view.state != RankState::Failed || view.text.is_empty() {
        return None;
    }
    // The board keeps the start of the first line; say so when it was cut.
    let mut text = view.text.trim_end_matches(':').to_string();
    if view.text.len() >= 180 {
        text.push('…');
    }
    Some(match conduit.processes() {
        Processes::OneForAll => format!("rank {pick} failed: {text}"),
        _ => text,
    })
}

/// Every rank's state, for SIGQUIT.
fn dump(board: Option<&Board>, spec: &Launch) -> String {
    match board {
        Some(b) => format!(
            "tessera: the job's ranks now (SIGQUIT; the job goes on):\n{}",
            board::describe_all(&b.snapshot(), board::now_ms())
        ),
        None => format!(
            "tessera: the {} conduit keeps no status board; nothing to show (SIGQUIT ignored)\n",
            spec.conduit
        ),
    }
}

/// Remove anything named the job's ranks left (named objects: only if a rank died during
/// start-up).
fn cleanup(job_id: &str) {
    smp::remove_job_dir(job_id);
}
