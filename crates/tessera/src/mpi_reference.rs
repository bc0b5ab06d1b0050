//! Raw MPI on the same ranks, for benchmarks that put Tessera beside plain MPI in one run
//! (`tessera bench rma --conduit mpi`). Available in a job on the mpi conduit only.
//!
//! It sits above the core (it takes a [`Context`]), not in the conduit, so the conduit
//! layer never reaches up to the core. This module must never be used by the runtime
//! itself: it exists to be compared with.

use std::ffi::c_int;
use std::ptr::NonNull;
use std::time::{Duration, Instant};

use mpi::collective::SystemOperation;
use mpi::point_to_point::{Destination, Source};
use mpi::topology::SimpleCommunicator;
use mpi::traits::{Communicator, CommunicatorCollectives};

use crate::conduit::mpi::raw::{serial, Window};
use crate::error::CoreError;
use crate::{ConduitKind, Context, Result};

fn world(ctx: &Context) -> Result<SimpleCommunicator> {
    if ctx.conduit_kind() != ConduitKind::MPI {
        return Err(CoreError::BadArgument {
            call: "RawMpi::new",
            argument: "ctx",
            why: format!(
                "raw MPI comparisons need the mpi conduit; this job runs on {}",
                ctx.conduit_kind()
            ),
        }
        .into());
    }
    Ok(SimpleCommunicator::world())
}

/// A plain MPI window over a private buffer of every rank, locked for passive-target
/// access (what an MPI programmer would write for one-sided transfers).
///
/// ```no_run
/// # fn f(ctx: &tessera::Context) -> tessera::Result<()> {
/// let window = tessera::mpi_reference::RawWindow::new(ctx, 4096)?; // collective
/// if ctx.rank() == 0 {
///     window.put(1, 0, &[1, 2, 3])?; // MPI_Put + MPI_Win_flush
/// }
/// drop(window); // collective too
/// # Ok(()) }
/// ```
pub struct RawWindow {
    // Field order: the window is freed before its memory.
    window: Window,
    _memory: Vec<u8>,
}

impl RawWindow {
    /// Collective: `len` bytes per rank.
    pub fn new(ctx: &Context, len: usize) -> Result<RawWindow> {
        let world = world(ctx)?;
        let mut memory = vec![0u8; len.max(1)];
        let base = NonNull::new(memory.as_mut_ptr()).expect("a Vec's buffer is never null");
        // SAFETY: the buffer is `len` bytes and lives in `_memory` until after the window is
        // freed (field order); moving the Vec into the struct does not move its heap buffer.
        let window = unsafe { Window::create(&world, base, memory.len()) }?;
        Ok(RawWindow {
            window,
            _memory: memory,
        })
    }

    /// `MPI_Put` of `src` to `rank`'s buffer at `offset`, then `MPI_Win_flush`.
    pub fn put(&self, rank: usize, offset: usize, src: &[u8]) -> Result<()> {
        self.check(offset, src.len())?;
        Ok(self.window.put(rank, offset, src)?)
    }

    /// `MPI_Get` into `dst` from `rank`'s buffer at `offset`, then `MPI_Win_flush`.
    pub fn get(&self, rank: usize, offset: usize, dst: &mut [u8]) -> Result<()> {
        self.check(offset, dst.len())?;
        Ok(self.window.get(rank, offset, dst)?)
    }

    fn check(&self, offset: usize, len: usize) -> Result<()> {
        if offset + len > self._memory.len() {
            return Err(CoreError::BadArgument {
                call: "RawWindow",
                argument: "offset",
                why: format!(
                    "{len} bytes at {offset} do not fit a {}-byte raw window",
                    self._memory.len()
                ),
            }
            .into());
        }
        Ok(())
    }
}

/// `rounds` round trips of an 8-byte `MPI_Send`/`MPI_Recv` between this rank and `peer`
/// (the lower rank sends first); returns the time per round trip.
pub fn pingpong(ctx: &Context, peer: usize, rounds: u64) -> Result<Duration> {
    let world = world(ctx)?;
    let other = world.process_at_rank(peer as c_int);
    let first = ctx.rank() < peer;
    let mut value = 0u64;
    let start = Instant::now();
    for i in 0..rounds {
        // Inside `serial` like every MPI call of the process (see the progress thread).
        if first {
            serial(|| other.send(&i));
            (value, _) = serial(|| other.receive::<u64>());
        } else {
            (value, _) = serial(|| other.receive::<u64>());
            serial(|| other.send(&value));
        }
    }
    std::hint::black_box(value);
    Ok(start.elapsed() / rounds.max(1) as u32)
}

/// `MPI_Barrier` on every rank of the job.
pub fn barrier(ctx: &Context) -> Result<()> {
    let world = world(ctx)?;
    serial(|| world.barrier());
    Ok(())
}

/// `MPI_Ibarrier` on every rank of the job, completed by testing it in a loop: the form a
/// barrier that keeps serving other ranks' requests while it waits would have to use
/// (`MPI_Barrier` serves nothing until it returns).
pub fn ibarrier(ctx: &Context) -> Result<()> {
    let world = world(ctx)?;
    let mut request = serial(|| world.immediate_barrier());
    loop {
        match serial(|| request.test()) {
            Ok(_) => return Ok(()),
            Err(pending) => request = pending,
        }
    }
}

/// `MPI_Allreduce` of one `u64` (sum) over every rank of the job.
pub fn allreduce_sum(ctx: &Context, value: u64) -> Result<u64> {
    let mut total = 0u64;
    let world = world(ctx)?;
    serial(|| world.all_reduce_into(&value, &mut total, SystemOperation::sum()));
    Ok(total)
}
