//! Pinning ranks to processors (`TESSERA_BIND`, [`crate::Job::bind`]): each rank of the
//! job on a processor of its own, the `k`-th of those the process may run on for rank
//! `k`, as `OMP_PROC_BIND=true` or `mpirun --bind-to core` place their threads and
//! processes, so that the scheduler does not move a rank away from its caches.
//!
//! Only the `smp` and `threads` conduits, whose ranks share one host, are pinned here;
//! under `mpirun` the launcher's own option does it. This module must never pin a rank
//! unless asked, and never two ranks of a job to one processor: where the processors are
//! fewer than the ranks, binding is refused before any rank starts.

use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
use nix::unistd::Pid;

use crate::conduit::ConduitKind;
use crate::error::JobError;

/// The processors this thread may run on, in order.
fn allowed() -> Result<Vec<usize>, JobError> {
    let set = sched_getaffinity(Pid::from_raw(0)).map_err(|e| JobError::Os {
        what: "reading the processors this process may run on (TESSERA_BIND)".into(),
        source: e.into(),
    })?;
    Ok((0..CpuSet::count())
        .filter(|&cpu| set.is_set(cpu).unwrap_or(false))
        .collect())
}

/// Refuse binding `ranks` ranks where the process may run on fewer processors, or where
/// the conduit's ranks are not this module's to pin (`mpi`: its launcher binds them).
pub(crate) fn check(conduit: ConduitKind, ranks: usize) -> Result<(), JobError> {
    if conduit != ConduitKind::SMP && conduit != ConduitKind::THREADS {
        return Err(JobError::Usage(format!(
            "TESSERA_BIND pins the ranks of the smp and threads conduits; the {conduit} \
             conduit's launcher binds them itself (Open MPI: mpirun --bind-to core)"
        )));
    }
    room(&allowed()?, ranks)
}

fn room(cpus: &[usize], ranks: usize) -> Result<(), JobError> {
    if cpus.len() < ranks {
        let cpus = cpus.len();
        return Err(JobError::Usage(format!(
            "TESSERA_BIND pins each rank to a processor of its own, but this job runs {ranks} \
             ranks and may use {cpus} processors: run at most {cpus} ranks, or unset TESSERA_BIND"
        )));
    }
    Ok(())
}

/// Pin the calling thread (rank `rank` of a job of `ranks` on this host) to the
/// `rank`-th processor this process may run on. Threads the rank starts afterwards
/// inherit the pinning.
pub(crate) fn pin(rank: usize, ranks: usize) -> Result<(), JobError> {
    let cpus = allowed()?;
    room(&cpus, ranks)?;
    let cpu = cpus[rank];
    let mut only = CpuSet::new();
    let pinned = only
        .set(cpu)
        .and_then(|()| sched_setaffinity(Pid::from_raw(0), &only));
    pinned.map_err(|e| JobError::Os {
        what: format!("pinning rank {rank} to processor {cpu} (TESSERA_BIND)"),
        source: e.into(),
    })
}
