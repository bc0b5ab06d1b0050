//! A rank as an owned handle: start it, use its context for as long as the program likes,
//! finish it. This is what a library with an init/finalize interface (the OpenSHMEM C
//! layer) needs, where [`Job::run`](super::Job::run) wants the rank's work as a closure.
//!
//! A session is one rank per process: the `smp` conduit under `tessera run`, the `mpi`
//! conduit, or a program started directly (one rank).
//!
//! This module must never run a rank's work itself; it only starts and ends ranks.

use std::sync::Arc;

use super::board::{Board, RankState};
use super::{Job, RankWatch};
use crate::conduit::Processes;
use crate::core::Context;
use crate::error::JobError;

/// One rank of the job this process belongs to, started and not yet finished.
///
/// ```no_run
/// let session = tessera::Session::start().expect("a rank");
/// let ctx = session.context();
/// let cell = ctx.alloc_collective::<u64>(1).unwrap();
/// ctx.put(cell.on((ctx.rank() + 1) % ctx.ranks()), &[7], tessera::Blocking).unwrap();
/// ctx.barrier().unwrap();
/// session.finish().unwrap();
/// ```
pub struct Session {
    ctx: Context,
    /// The job it belongs to (where its statistics go).
    job: Job,
    board: Option<Arc<Board>>,
    ended: std::cell::Cell<bool>,
    _watch: RankWatch,
}

impl Session {
    /// Join the job this process belongs to (from the environment contract; one rank when
    /// started directly). Collective: every rank of the job calls it.
    pub fn start() -> Result<Session, JobError> {
        Job::from_env()?.session()
    }

    /// The rank's context.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// End the rank's part: the end-of-job barrier (collective), then the rank is finished.
    pub fn finish(self) -> Result<(), JobError> {
        self.end()
    }

    /// [`Session::finish`] in place, for a session that must outlive its end (a library
    /// whose teams borrow the context); a second call does nothing.
    pub fn end(&self) -> Result<(), JobError> {
        if self.ended.replace(true) {
            return Ok(());
        }
        let rank = self.ctx.rank();
        let failed = |why: String| JobError::RankFailed { rank, why };
        let outcome = self
            .ctx
            .finish()
            .map_err(|e| failed(e.to_string()))
            .and_then(|()| super::stats_parts(&self.ctx))
            .and_then(|parts| {
                self.job
                    .deliver_stats(parts)
                    .map_err(|e| failed(e.to_string()))
            });
        if let Some(b) = &self.board {
            match &outcome {
                Ok(()) => b.record(rank).set_state(RankState::Finished),
                Err(JobError::RankFailed { why, .. }) => b.record(rank).fail(why),
                Err(other) => b.record(rank).fail(&other.to_string()),
            }
        }
        outcome
    }

    /// Say that other threads of this rank may end its waits (OpenSHMEM's
    /// `SHMEM_THREAD_MULTIPLE`), so that deadlock detection never takes a wait of it for a
    /// deadlock; the watchdog (`TESSERA_WAIT_TIMEOUT`) still names a wait that never ends.
    pub fn other_threads_may_end_waits(&self) {
        if let Some(b) = &self.board {
            b.record(self.ctx.rank()).set_other_threads(true);
        }
    }

    /// Record that this rank failed for `why` (before the process exits with an error).
    pub fn fail(&self, why: &str) {
        if let Some(b) = &self.board {
            b.record(self.ctx.rank()).fail(why);
        }
        self.ctx.conduit().abort(why);
    }

    /// End the whole job now with exit status `status` (OpenSHMEM's `shmem_global_exit`):
    /// the launcher ends every other rank and exits with `status`.
    pub fn global_exit(&self, status: i32) -> ! {
        if let Some(b) = &self.board {
            b.record(self.ctx.rank()).global_exit(status);
        }
        self.ctx.conduit().global_exit(status);
        // SAFETY: _exit ends the process at once, without running destructors or exit
        // handlers that would take this for an unfinished rank.
        unsafe { libc::_exit(status) }
    }
}

impl Job {
    /// This process's rank as a [`Session`] (one rank per process).
    pub fn session(&self) -> Result<Session, JobError> {
        super::guard_exit();
        let (board, rank) = match self.conduit.processes() {
            Processes::OneForAll if self.ranks != 1 => {
                return Err(JobError::Usage(format!(
                    "a session is one rank per process, and the {} conduit runs {} ranks in this one; use the smp conduit (`tessera run -n {} -- PROGRAM`)",
                    self.conduit, self.ranks, self.ranks
                )))
            }
            Processes::OneForAll => (Some(Board::in_process(1)), 0),
            _ => (
                self.job_file.as_ref().map(|f| f.board().clone()),
                self.launched.as_ref().map_or(0, |l| l.rank),
            ),
        };
        let watch = RankWatch::enter(board.as_ref(), rank);
        let conduit = match self.conduit.processes() {
            Processes::OneForAll => self
                .conduit
                .bootstrap()
                .connect_all(&self.start())?
                .conduit(0),
            _ => self.connect(board.as_ref())?,
        };
        let rank = conduit.rank();
        let ctx = Context::new(conduit, self.options_with(board.clone())).map_err(|e| {
            JobError::RankFailed {
                rank,
                why: format!("start-up: {e}"),
            }
        })?;
        if let Some(b) = &board {
            b.record(rank).set_state(RankState::Running);
        }
        Ok(Session {
            ctx,
            job: self.clone(),
            board,
            ended: std::cell::Cell::new(false),
            _watch: watch,
        })
    }
}
