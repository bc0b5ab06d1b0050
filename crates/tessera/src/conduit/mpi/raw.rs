//! The few MPI-3 calls rsmpi does not wrap (passive-target RMA windows, nonblocking
//! sends of owned buffers), behind small types that keep their invariants.
//!
//! Every `unsafe` call to MPI in the conduit lives here. What keeps them sound:
//! - handles (`MPI_Win`, `MPI_Request`) are created here, used only through `&self`
//!   methods on the one thread that owns the conduit, and freed exactly once in `Drop`;
//! - buffers passed to MPI outlive the operation: blocking calls return after MPI is done
//!   with them, and a [`Send`]'s buffer is owned by the `Send` until `MPI_Test` reports
//!   completion;
//! - windows are freed before `MPI_Finalize` (the conduit drops them before the universe).
//!
//! This module must never decide policy (which peer goes which way); it only makes calls.

use std::ffi::{c_int, c_void};
use std::ptr::NonNull;

use mpi::ffi;
use mpi::raw::AsRaw;
use mpi::topology::SimpleCommunicator;

use crate::error::ConduitError;

/// Turn an MPI return code into a result.
pub(crate) fn check(call: &'static str, code: c_int) -> Result<(), ConduitError> {
    if code == ffi::MPI_SUCCESS as c_int {
        Ok(())
    } else {
        Err(ConduitError::Mpi { call, code })
    }
}

/// Largest count one MPI call moves (counts are `int`); longer transfers are split.
const MAX_COUNT: usize = 1 << 30;

/// A window over every rank's segment, open for passive-target access to all ranks for
/// its whole life (`MPI_Win_lock_all` with `MPI_MODE_NOCHECK`).
pub(crate) struct Window {
    win: ffi::MPI_Win,
}

impl Window {
    /// Collective over `comm`: expose `len` bytes at `base` (this rank's segment).
    ///
    /// # Safety
    /// `base` must point to `len` bytes that stay mapped for the life of the window.
    pub(crate) unsafe fn create(
        comm: &SimpleCommunicator,
        base: NonNull<u8>,
        len: usize,
    ) -> Result<Self, ConduitError> {
        // SAFETY: reading an MPI handle constant initialised by MPI_Init.
        let mut win: ffi::MPI_Win = unsafe { ffi::RSMPI_WIN_NULL };
        // SAFETY: the caller guarantees the memory; out-pointer is a valid local.
        unsafe {
            check(
                "MPI_Win_create",
                ffi::MPI_Win_create(
                    base.as_ptr() as *mut c_void,
                    len as ffi::MPI_Aint,
                    1,
                    ffi::RSMPI_INFO_NULL,
                    comm.as_raw(),
                    &mut win,
                ),
            )?;
            check(
                "MPI_Win_lock_all",
                ffi::MPI_Win_lock_all(ffi::MPI_MODE_NOCHECK as c_int, win),
            )?;
        }
        Ok(Window { win })
    }

    /// Write `src` at `offset` of `rank`'s segment and wait until it is complete there
    /// (`MPI_Put`, then `MPI_Win_flush`).
    pub(crate) fn put(&self, rank: usize, offset: usize, src: &[u8]) -> Result<(), ConduitError> {
        for (i, chunk) in src.chunks(MAX_COUNT).enumerate() {
            let at = offset + i * MAX_COUNT;
            // SAFETY: the window is live and locked; `chunk` stays borrowed until the
            // flush below completes the operation; the core checked that the range lies
            // in the target's segment.
            check("MPI_Put", unsafe {
                ffi::MPI_Put(
                    chunk.as_ptr() as *const c_void,
                    chunk.len() as c_int,
                    ffi::RSMPI_UINT8_T,
                    rank as c_int,
                    at as ffi::MPI_Aint,
                    chunk.len() as c_int,
                    ffi::RSMPI_UINT8_T,
                    self.win,
                )
            })?;
        }
        self.flush(rank)
    }

    /// Read `dst.len()` bytes at `offset` of `rank`'s segment (`MPI_Get`, then flush).
    pub(crate) fn get(
        &self,
        rank: usize,
        offset: usize,
        dst: &mut [u8],
    ) -> Result<(), ConduitError> {
        for (i, chunk) in dst.chunks_mut(MAX_COUNT).enumerate() {
            let at = offset + i * MAX_COUNT;
            // SAFETY: as in put; `chunk` is written by MPI until the flush.
            check("MPI_Get", unsafe {
                ffi::MPI_Get(
                    chunk.as_mut_ptr() as *mut c_void,
                    chunk.len() as c_int,
                    ffi::RSMPI_UINT8_T,
                    rank as c_int,
                    at as ffi::MPI_Aint,
                    chunk.len() as c_int,
                    ffi::RSMPI_UINT8_T,
                    self.win,
                )
            })?;
        }
        self.flush(rank)
    }

    fn flush(&self, rank: usize) -> Result<(), ConduitError> {
        // SAFETY: the window is live and locked for all ranks.
        check("MPI_Win_flush", unsafe {
            ffi::MPI_Win_flush(rank as c_int, self.win)
        })
    }
}

impl Drop for Window {
    fn drop(&mut self) {
        // SAFETY: created and locked in `create`; unlocked and freed exactly once here
        // (collective, after the job's final barrier).
        unsafe {
            ffi::MPI_Win_unlock_all(self.win);
            ffi::MPI_Win_free(&mut self.win);
        }
    }
}

/// A nonblocking send that owns its buffer until MPI is done with it.
pub(crate) struct Send {
    request: ffi::MPI_Request,
    _buffer: Vec<u8>,
}

impl Send {
    /// Start sending `buffer` to `dest` with `tag` on `comm`.
    pub(crate) fn start(
        comm: &SimpleCommunicator,
        dest: usize,
        tag: i32,
        buffer: Vec<u8>,
    ) -> Result<Send, ConduitError> {
        // SAFETY: reading an MPI handle constant initialised by MPI_Init.
        let mut request: ffi::MPI_Request = unsafe { ffi::RSMPI_REQUEST_NULL };
        // SAFETY: the buffer's heap storage does not move when the Vec moves into the
        // returned Send, which keeps it until `done` reports completion (or drop waits).
        check("MPI_Isend", unsafe {
            ffi::MPI_Isend(
                buffer.as_ptr() as *const c_void,
                buffer.len() as c_int,
                ffi::RSMPI_UINT8_T,
                dest as c_int,
                tag,
                comm.as_raw(),
                &mut request,
            )
        })?;
        Ok(Send {
            request,
            _buffer: buffer,
        })
    }

    /// Whether the send has completed (the buffer may then be dropped).
    pub(crate) fn done(&mut self) -> Result<bool, ConduitError> {
        let mut flag: c_int = 0;
        // SAFETY: the request is live until it completes; MPI_Test sets it to
        // MPI_REQUEST_NULL on completion, and testing a null request is allowed.
        check("MPI_Test", unsafe {
            ffi::MPI_Test(&mut self.request, &mut flag, ffi::RSMPI_STATUS_IGNORE)
        })?;
        Ok(flag != 0)
    }
}

impl Drop for Send {
    fn drop(&mut self) {
        // A send still in flight must finish before its buffer goes.
        // SAFETY: as in `done`; MPI_Wait on a completed (null) request returns at once.
        unsafe { ffi::MPI_Wait(&mut self.request, ffi::RSMPI_STATUS_IGNORE) };
    }
}
