//! The launcher behind `tessera run`: start a job's processes, watch them, end them.
//!
//! - `smp`: one process per rank, each told its rank through the environment contract.
//! - `threads`: one process that runs every rank as a thread.
//! - `mpi`: one `mpirun` (`TESSERA_MPIRUN`, default `mpirun`) that starts the ranks; with
//!   Open MPI it adds `--oversubscribe` (more ranks than cores is normal here),
//!   `--allow-run-as-root` when run as root, and `-x` for every Tessera variable so that
//!   ranks on other hosts see them too. `TESSERA_MPIRUN_ARGS` adds arguments (a host
//!   file, for instance).
//!
//! When any rank exits non-zero or is killed, the launcher sends SIGTERM to the others,
//! SIGKILL after one second, and reports which rank failed and how. SIGINT, SIGTERM and
//! SIGHUP to the launcher end the whole job the same way. Ranks are also told by the
//! kernel (`PR_SET_PDEATHSIG`) to die if the launcher itself is killed (the signal follows
//! the *thread* that started them, so call [`launch`] from a thread that outlives the job). After the job, any
//! shared-memory object a rank left behind (possible only if it died during start-up) is
//! removed.
//!
//! This module must never interpret what ranks print; it only forwards it.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
use nix::unistd::Pid;

use super::ConduitKind;
use crate::conduit::smp::object_name;
use crate::error::JobError;

/// How long ranks get to exit after SIGTERM before SIGKILL.
const TERM_GRACE: Duration = Duration::from_millis(1000);

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
            conduit: ConduitKind::Smp,
            segment: None,
            label: false,
            timeout: None,
            program: program.into(),
            args: Vec::new(),
            env: Vec::new(),
        }
    }

    /// Start the job and wait for it to end.
    pub fn run(&self) -> Result<Outcome, JobError> {
        launch(self)
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
}

static RECEIVED_SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(signal: libc::c_int) {
    // Async-signal-safe: a single atomic store.
    RECEIVED_SIGNAL.store(signal, Ordering::SeqCst);
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
}

/// Describe how a rank ended.
fn describe(status: ExitStatus) -> String {
    if let Some(signal) = status.signal() {
        let name = Signal::try_from(signal)
            .map(|s| s.as_str())
            .unwrap_or("unknown");
        format!("was killed by signal {signal} ({name})")
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

/// A unique id: the launcher's pid and the clock.
fn new_job_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{:x}x{:x}", std::process::id(), nanos as u32)
}

fn forward(
    stream: impl Read + Send + 'static,
    rank: usize,
    to_stderr: bool,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stream);
        let mut line = Vec::new();
        loop {
            line.clear();
            match reader.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    if line.last() != Some(&b'\n') {
                        line.push(b'\n');
                    }
                    let prefix = format!("[{rank}] ");
                    let _ = if to_stderr {
                        let mut err = std::io::stderr().lock();
                        err.write_all(prefix.as_bytes())
                            .and_then(|_| err.write_all(&line))
                    } else {
                        let mut out = std::io::stdout().lock();
                        out.write_all(prefix.as_bytes())
                            .and_then(|_| out.write_all(&line))
                    };
                }
            }
        }
    })
}

struct Rank {
    rank: usize,
    child: Child,
    status: Option<ExitStatus>,
}

/// The command that starts `spec`'s program: the program itself, or `mpirun` running it.
fn program_command(spec: &Launch) -> Command {
    if spec.conduit != ConduitKind::Mpi {
        let mut cmd = Command::new(&spec.program);
        cmd.args(&spec.args);
        return cmd;
    }
    let mpirun = std::env::var_os("TESSERA_MPIRUN").unwrap_or_else(|| "mpirun".into());
    let open_mpi = Command::new(&mpirun)
        .arg("--version")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("Open MPI"));
    let mut cmd = Command::new(&mpirun);
    cmd.arg("-np").arg(spec.ranks.to_string());
    if open_mpi {
        cmd.arg("--oversubscribe");
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            cmd.arg("--allow-run-as-root");
        }
        let mut vars: Vec<OsString> = vec!["TESSERA_CONDUIT".into()];
        if spec.segment.is_some() {
            vars.push("TESSERA_SEGMENT".into());
        }
        vars.extend(spec.env.iter().map(|(k, _)| k.clone()));
        vars.extend(
            std::env::vars_os()
                .map(|(k, _)| k)
                .filter(|k| k.to_string_lossy().starts_with("TESSERA_")),
        );
        vars.sort();
        vars.dedup();
        for var in vars {
            cmd.arg("-x").arg(var);
        }
    }
    if let Ok(extra) = std::env::var("TESSERA_MPIRUN_ARGS") {
        cmd.args(extra.split_whitespace());
    }
    cmd.arg(&spec.program).args(&spec.args);
    cmd
}

fn spawn_rank(spec: &Launch, job_id: &str, rank: Option<usize>) -> Result<Child, JobError> {
    let mut cmd = program_command(spec);
    cmd.env("TESSERA_CONDUIT", spec.conduit.name())
        .env("TESSERA_RANKS", spec.ranks.to_string())
        .env("TESSERA_JOB_ID", job_id)
        .envs(spec.env.iter().map(|(k, v)| (k, v)));
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
    // SAFETY: the closure runs in the child between fork and exec and only calls prctl,
    // which is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.spawn().map_err(|source| JobError::Os {
        what: format!(
            "starting {} (rank {})",
            spec.program.to_string_lossy(),
            rank.unwrap_or(0)
        ),
        source,
    })
}

fn signal_all(ranks: &[Rank], signal: Signal) {
    for r in ranks.iter().filter(|r| r.status.is_none()) {
        let _ = kill(Pid::from_raw(r.child.id() as i32), signal);
    }
}

/// Start the job described by `spec` and wait until every process has ended.
pub fn launch(spec: &Launch) -> Result<Outcome, JobError> {
    if spec.ranks == 0 {
        return Err(JobError::Usage(
            "a job needs at least one rank (-n 1 or more)".into(),
        ));
    }
    if let Some(segment) = &spec.segment {
        super::parse_size(segment)?;
    }
    install_signal_handlers();
    let job_id = new_job_id();
    let processes: Vec<Option<usize>> = match spec.conduit {
        ConduitKind::Smp => (0..spec.ranks).map(Some).collect(),
        ConduitKind::Threads | ConduitKind::Mpi => vec![None],
    };
    let mut ranks: Vec<Rank> = Vec::with_capacity(processes.len());
    let mut forwarders = Vec::new();
    for rank in processes {
        match spawn_rank(spec, &job_id, rank) {
            Ok(mut child) => {
                let r = rank.unwrap_or(0);
                if let Some(out) = child.stdout.take() {
                    forwarders.push(forward(out, r, false));
                }
                if let Some(err) = child.stderr.take() {
                    forwarders.push(forward(err, r, true));
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
                cleanup(spec, &job_id);
                return Err(e);
            }
        }
    }

    let started = Instant::now();
    let mut failure: Option<(Option<usize>, String)> = None;
    let mut code = 0;
    let mut teardown: Option<Instant> = None;
    let mut termed = false;
    let mut killed = false;
    loop {
        for r in ranks.iter_mut().filter(|r| r.status.is_none()) {
            if let Ok(Some(status)) = r.child.try_wait() {
                r.status = Some(status);
                if !status.success() && teardown.is_none() {
                    failure = Some((
                        Some(r.rank),
                        match spec.conduit {
                            ConduitKind::Smp => format!("rank {} {}", r.rank, describe(status)),
                            ConduitKind::Threads => {
                                format!("the ranks' process {}", describe(status))
                            }
                            ConduitKind::Mpi => format!("mpirun {}", describe(status)),
                        },
                    ));
                    code = exit_code(status);
                    teardown = Some(Instant::now());
                }
            }
        }
        if ranks.iter().all(|r| r.status.is_some()) {
            break;
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
    for f in forwarders {
        let _ = f.join();
    }
    cleanup(spec, &job_id);
    Ok(Outcome { code, failure })
}

/// Remove any shared-memory object the job's ranks left (only possible if one died before
/// every rank attached).
fn cleanup(spec: &Launch, job_id: &str) {
    if spec.conduit == ConduitKind::Smp {
        for rank in 0..spec.ranks {
            let _ = nix::sys::mman::shm_unlink(object_name(job_id, rank).as_str());
        }
    }
}
