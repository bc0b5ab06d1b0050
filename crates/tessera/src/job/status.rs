//! The jobs of this user running on this machine and what their ranks are doing: what
//! `tessera status` prints, from another terminal, while a job runs.
//!
//! A job's ranks carry its id, rank count and the descriptor of its private memory file
//! (the status board) in their environment. The kernel shows a process's environment and
//! descriptors (`/proc/PID/environ`, `/proc/PID/fd`) only to its own user, so another
//! user's jobs are neither listed nor readable. The board is opened read-only in effect:
//! this module only takes snapshots.
//!
//! This module must never write to a job's board or signal its processes.

use crate::error::JobError;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::os::fd::AsRawFd;

use super::board::{self, JobFile};

/// A running job of this user, as its rank processes show it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunningJob {
    /// The job id (`TESSERA_JOB_ID`).
    pub id: String,
    /// Its rank count.
    pub ranks: usize,
    /// Its conduit.
    pub conduit: String,
    /// The processes of its ranks found (one for a `threads` job).
    pub pids: Vec<i32>,
    /// The process that started them (the launcher), if known.
    pub launcher: Option<i32>,
    /// A rank process and the descriptor number of the job's board in it.
    board: Option<(i32, i32)>,
}

/// The variables of `pid`'s environment that name its job, if it is a rank of one.
fn job_of(pid: i32) -> Option<BTreeMap<String, String>> {
    let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    let vars: BTreeMap<String, String> = environ
        .split(|&b| b == 0)
        .filter_map(|entry| {
            let text = std::str::from_utf8(entry).ok()?;
            let (k, v) = text.split_once('=')?;
            k.starts_with("TESSERA_")
                .then(|| (k.to_string(), v.to_string()))
        })
        .collect();
    vars.contains_key("TESSERA_JOB_ID").then_some(vars)
}

/// The parent of `pid`.
fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name, in parentheses, may hold spaces: the fields follow its last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// Every job of this user running on this machine, by id.
///
/// ```
/// // This test process is no rank of a job, and lists none of its own.
/// let jobs = tessera::job::status::running_jobs();
/// assert!(jobs.iter().all(|j| !j.pids.contains(&(std::process::id() as i32))));
/// ```
pub fn running_jobs() -> Vec<RunningJob> {
    let me = std::process::id() as i32;
    let mut jobs: BTreeMap<String, RunningJob> = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Some(vars) = job_of(pid) else { continue };
        let id = vars["TESSERA_JOB_ID"].clone();
        let ranks = vars
            .get("TESSERA_RANKS")
            .and_then(|r| r.parse().ok())
            .unwrap_or(1);
        let job = jobs.entry(id.clone()).or_insert_with(|| RunningJob {
            id,
            ranks,
            conduit: vars
                .get("TESSERA_CONDUIT")
                .cloned()
                .unwrap_or_else(|| "smp".into()),
            pids: Vec::new(),
            launcher: parent_of(pid),
            board: None,
        });
        job.pids.push(pid);
        if job.board.is_none() {
            job.board = vars
                .get("TESSERA_JOB_FD")
                .and_then(|fd| fd.parse().ok())
                .map(|fd| (pid, fd));
        }
    }
    let mut jobs: Vec<RunningJob> = jobs.into_values().collect();
    for job in &mut jobs {
        job.pids.sort_unstable();
    }
    jobs
}

impl RunningJob {
    /// What every rank is doing now, one line each, under a line naming the job; an
    /// explanation instead where the job has no board this process can read.
    pub fn describe(&self) -> String {
        let mut out = format!(
            "job {}: {} rank(s) of the {} conduit, process(es) {:?}{}\n",
            self.id,
            self.ranks,
            self.conduit,
            self.pids,
            self.launcher
                .map_or(String::new(), |p| format!(", started by process {p}"))
        );
        match self.views() {
            Ok(views) => {
                let now = board::now_ms();
                for (rank, view) in views.iter().enumerate() {
                    let _ = write!(out, "  {}", board::describe_rank(rank, view, now));
                    let (ops, bytes) = view.sent;
                    if ops > 0 {
                        let _ = write!(
                            out,
                            "; {ops} operations to other ranks, {:.1} MiB, so far (statistics, as of its last long wait or its last 4096 operations)",
                            bytes as f64 / (1 << 20) as f64
                        );
                    }
                    out.push('\n');
                }
            }
            Err(why) => {
                let _ = writeln!(out, "  {why}");
            }
        }
        out
    }

    /// A snapshot of the job's board.
    fn views(&self) -> Result<Vec<board::RankView>, JobError> {
        let Some((pid, fd)) = self.board else {
            return Err(JobError::NoStatusBoard {
                conduit: self.conduit.clone(),
            });
        };
        // Mapped shared, as the board's atomics need, so opened for reading and writing;
        // only read here.
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(format!("/proc/{pid}/fd/{fd}"))
            .map_err(|source| JobError::Os {
                what: "its status board cannot be opened (the job may have ended)".into(),
                source,
            })?;
        let job = JobFile::open(file.as_raw_fd(), self.ranks)?;
        Ok(job.board().snapshot())
    }
}
