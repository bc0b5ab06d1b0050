//! The few MPI-3 calls rsmpi does not wrap (passive-target RMA windows, nonblocking
//! sends of owned buffers), behind small types that keep their invariants.
//!
//! Every `unsafe` call to MPI in the conduit lives here, and every call to MPI at all
//! (here, in the messenger and in the collectives) runs inside [`serial`], so that the
//! optional progress thread never enters MPI at the same time as the rank. What keeps
//! the calls sound:
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
use mpi::traits::Communicator;

use crate::conduit::{NativeOp, NativeType, Op, Reduction};
use crate::error::ConduitError;

/// Serialises the conduit's calls into MPI between the rank's thread and the optional
/// progress thread (MPI then runs at `MPI_THREAD_SERIALIZED`: Open MPI's one-sided
/// component over TCP refuses `MPI_THREAD_MULTIPLE`).
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Whether a progress thread exists, so that `serial` must take the lock. Set once by
/// `ProgressThread::start` before it spawns the thread (the spawn orders it before the
/// thread's first call) and on the rank's own thread, which reads it; so `Relaxed`.
static SHARED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

thread_local! {
    /// Whether this thread is inside `serial` (nesting would deadlock).
    static IN_MPI: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Run `f`, which calls MPI, with no other thread of this process inside MPI (a lock,
/// taken only once a progress thread exists). Never nested, and never around anything
/// that may call back into the conduit (handlers).
pub(crate) fn serial<R>(f: impl FnOnce() -> R) -> R {
    debug_assert!(!IN_MPI.get(), "nested serial(): this would deadlock");
    let _guard = SHARED.load(std::sync::atomic::Ordering::Relaxed).then(|| {
        SERIAL
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    });
    IN_MPI.set(true);
    let result = f();
    IN_MPI.set(false);
    result
}

/// Make one MPI call (inside [`serial`]) and turn its return code into a result.
pub(crate) fn check(call: &'static str, mpi: impl FnOnce() -> c_int) -> Result<(), ConduitError> {
    let code = serial(mpi);
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
        check("MPI_Win_create", || unsafe {
            ffi::MPI_Win_create(
                base.as_ptr() as *mut c_void,
                len as ffi::MPI_Aint,
                1,
                ffi::RSMPI_INFO_NULL,
                comm.as_raw(),
                &mut win,
            )
        })?;
        // SAFETY: `win` was just created.
        check("MPI_Win_lock_all", || unsafe {
            ffi::MPI_Win_lock_all(ffi::MPI_MODE_NOCHECK as c_int, win)
        })?;
        Ok(Window { win })
    }

    /// Write `src` at `offset` of `rank`'s segment and wait until it is complete there
    /// (`MPI_Put`, then `MPI_Win_flush`).
    pub(crate) fn put(&self, rank: usize, offset: usize, src: &[u8]) -> Result<(), ConduitError> {
        // SAFETY: `src` stays borrowed until the flush below completes the put.
        unsafe { self.put_deferred(rank, offset, src) }?;
        self.flush(rank)
    }

    /// Read `dst.len()` bytes at `offset` of `rank`'s segment (`MPI_Get`, then flush).
    pub(crate) fn get(
        &self,
        rank: usize,
        offset: usize,
        dst: &mut [u8],
    ) -> Result<(), ConduitError> {
        let len = dst.len();
        let at = NonNull::from(dst).cast::<u8>();
        // SAFETY: `dst` stays mutably borrowed, so untouched by anyone else, until the flush
        // below completes the get.
        unsafe { self.get_deferred(rank, offset, at, len) }?;
        self.flush(rank)
    }

    /// Start `MPI_Rput` of `data` (which the returned transfer owns) to `rank` at `offset`.
    /// `None` when `data` is too long for one call (the caller then puts blocking).
    pub(crate) fn start_put(
        &self,
        rank: usize,
        offset: usize,
        data: Vec<u8>,
    ) -> Result<Option<Transfer>, ConduitError> {
        if data.len() > MAX_COUNT {
            return Ok(None);
        }
        // SAFETY: reading an MPI handle constant initialised by MPI_Init.
        let mut request: ffi::MPI_Request = unsafe { ffi::RSMPI_REQUEST_NULL };
        // SAFETY: the window is live and locked; `data`'s heap buffer moves into the
        // returned Transfer, which keeps it until MPI reports the request complete (its
        // Drop waits); the core checked the target range.
        check("MPI_Rput", || unsafe {
            ffi::MPI_Rput(
                data.as_ptr() as *const c_void,
                data.len() as c_int,
                ffi::RSMPI_UINT8_T,
                rank as c_int,
                offset as ffi::MPI_Aint,
                data.len() as c_int,
                ffi::RSMPI_UINT8_T,
                self.win,
                &mut request,
            )
        })?;
        Ok(Some(Transfer {
            op: OwnedRequest {
                request,
                buffer: data,
            },
            rank,
            put: true,
        }))
    }

    /// Start `MPI_Rget` of `len` bytes from `rank` at `offset` into a buffer the returned
    /// transfer owns; `None` when `len` is too long for one call.
    pub(crate) fn start_get(
        &self,
        rank: usize,
        offset: usize,
        len: usize,
    ) -> Result<Option<Transfer>, ConduitError> {
        if len > MAX_COUNT {
            return Ok(None);
        }
        let mut buffer = vec![0u8; len];
        // SAFETY: reading an MPI handle constant initialised by MPI_Init.
        let mut request: ffi::MPI_Request = unsafe { ffi::RSMPI_REQUEST_NULL };
        // SAFETY: as in start_put; MPI writes `buffer` until the request completes, and
        // nobody reads it before (Transfer::buffer is read only after `finish` says done).
        check("MPI_Rget", || unsafe {
            ffi::MPI_Rget(
                buffer.as_mut_ptr() as *mut c_void,
                len as c_int,
                ffi::RSMPI_UINT8_T,
                rank as c_int,
                offset as ffi::MPI_Aint,
                len as c_int,
                ffi::RSMPI_UINT8_T,
                self.win,
                &mut request,
            )
        })?;
        Ok(Some(Transfer {
            op: OwnedRequest { request, buffer },
            rank,
            put: false,
        }))
    }

    /// Whether `transfer` is done, waiting for it with `wait`. A get is done when its
    /// request completes; a put also needs `MPI_Win_flush` (request completion is only
    /// local), which it does then.
    pub(crate) fn finish(&self, transfer: &mut Transfer, wait: bool) -> Result<bool, ConduitError> {
        if !transfer.op.test_or_wait(wait)? {
            return Ok(false);
        }
        if transfer.put {
            self.flush(transfer.rank)?;
        }
        Ok(true)
    }

    /// `MPI_Put` of `data` without completing it: complete at the next
    /// [`Window::flush_all`].
    ///
    /// # Safety
    /// `data` must stay valid and unmodified until the next `flush_all` returns.
    pub(crate) unsafe fn put_deferred(
        &self,
        rank: usize,
        offset: usize,
        data: &[u8],
    ) -> Result<(), ConduitError> {
        for (i, chunk) in data.chunks(MAX_COUNT).enumerate() {
            // SAFETY: the window is live and locked; the caller keeps `data` until the
            // flush; the core checked the target range.
            check("MPI_Put", || unsafe {
                ffi::MPI_Put(
                    chunk.as_ptr() as *const c_void,
                    chunk.len() as c_int,
                    ffi::RSMPI_UINT8_T,
                    rank as c_int,
                    (offset + i * MAX_COUNT) as ffi::MPI_Aint,
                    chunk.len() as c_int,
                    ffi::RSMPI_UINT8_T,
                    self.win,
                )
            })?;
        }
        Ok(())
    }

    /// `MPI_Get` into `dst` without completing it: complete at the next `flush_all`.
    ///
    /// # Safety
    /// `dst` must point to `len` writable bytes that nothing reads or writes until the next
    /// `flush_all` returns.
    pub(crate) unsafe fn get_deferred(
        &self,
        rank: usize,
        offset: usize,
        dst: NonNull<u8>,
        len: usize,
    ) -> Result<(), ConduitError> {
        let mut done = 0;
        while done < len {
            let n = (len - done).min(MAX_COUNT);
            // SAFETY: the window is live and locked; the caller guarantees the destination
            // until the flush; the core checked the source range.
            check("MPI_Get", || unsafe {
                ffi::MPI_Get(
                    dst.as_ptr().add(done) as *mut c_void,
                    n as c_int,
                    ffi::RSMPI_UINT8_T,
                    rank as c_int,
                    (offset + done) as ffi::MPI_Aint,
                    n as c_int,
                    ffi::RSMPI_UINT8_T,
                    self.win,
                )
            })?;
            done += n;
        }
        Ok(())
    }

    /// Complete every operation this rank started on the window (`MPI_Win_flush_all`).
    pub(crate) fn flush_all(&self) -> Result<(), ConduitError> {
        // SAFETY: the window is live and locked for all ranks.
        check("MPI_Win_flush_all", || unsafe {
            ffi::MPI_Win_flush_all(self.win)
        })
    }

    fn flush(&self, rank: usize) -> Result<(), ConduitError> {
        // SAFETY: the window is live and locked for all ranks.
        check("MPI_Win_flush", || unsafe {
            ffi::MPI_Win_flush(rank as c_int, self.win)
        })
    }
}

impl Drop for Window {
    fn drop(&mut self) {
        // SAFETY: created and locked in `create`; unlocked and freed exactly once here
        // (collective, after the job's final barrier).
        serial(|| unsafe {
            ffi::MPI_Win_unlock_all(self.win);
            ffi::MPI_Win_free(&mut self.win);
        });
    }
}

/// An MPI request and the buffer it reads or writes, kept together until MPI is done.
pub(crate) struct OwnedRequest {
    request: ffi::MPI_Request,
    buffer: Vec<u8>,
}

impl OwnedRequest {
    /// Whether the request has completed; with `wait`, block until it has.
    pub(crate) fn test_or_wait(&mut self, wait: bool) -> Result<bool, ConduitError> {
        if wait {
            // SAFETY: the request is live or already null (then MPI_Wait returns at once).
            check("MPI_Wait", || unsafe {
                ffi::MPI_Wait(&mut self.request, ffi::RSMPI_STATUS_IGNORE)
            })?;
            return Ok(true);
        }
        // SAFETY: as above; its buffer is owned by `self`.
        unsafe { test_request(&mut self.request) }
    }
}

impl Drop for OwnedRequest {
    fn drop(&mut self) {
        // MPI must be done with the buffer before it goes.
        // SAFETY: as in test_or_wait.
        serial(|| unsafe { ffi::MPI_Wait(&mut self.request, ffi::RSMPI_STATUS_IGNORE) });
    }
}

/// A request-based one-sided transfer (`MPI_Rput`/`MPI_Rget`) on a buffer it owns.
pub(crate) struct Transfer {
    op: OwnedRequest,
    rank: usize,
    put: bool,
}

impl Transfer {
    /// The bytes a finished get brought.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.op.buffer
    }

    /// Whether this is a put.
    pub(crate) fn is_put(&self) -> bool {
        self.put
    }
}

/// A nonblocking send (`MPI_Isend`) of a buffer it owns.
pub(crate) struct Send(OwnedRequest);

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
        // returned Send, which keeps it until MPI reports completion (its Drop waits).
        check("MPI_Isend", || unsafe {
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
        Ok(Send(OwnedRequest { request, buffer }))
    }

    /// Whether the send has completed (the buffer may then be dropped).
    pub(crate) fn done(&mut self) -> Result<bool, ConduitError> {
        self.0.test_or_wait(false)
    }
}

/// A receive of any source and tag posted ahead (`MPI_Irecv`) into a buffer it owns, so
/// that a message is matched as it arrives rather than queued as unexpected and found by
/// a probe later (a probe builds and frees a request of its own, under MPI's matching
/// lock, every time it looks, also when nothing has come).
pub(crate) struct PostedReceive {
    request: ffi::MPI_Request,
    buffer: Vec<u8>,
    comm: ffi::MPI_Comm,
}

/// A message a [`PostedReceive`] took: its source, tag and bytes.
pub(crate) type Received = (usize, i32, Vec<u8>);

impl PostedReceive {
    /// Post a receive of up to `capacity` bytes on `comm`, which must outlive it.
    pub(crate) fn post(
        comm: &SimpleCommunicator,
        capacity: usize,
    ) -> Result<PostedReceive, ConduitError> {
        let mut posted = PostedReceive {
            // SAFETY: reading an MPI handle constant initialised by MPI_Init.
            request: unsafe { ffi::RSMPI_REQUEST_NULL },
            buffer: vec![0; capacity],
            comm: comm.as_raw(),
        };
        posted.repost()?;
        Ok(posted)
    }

    fn repost(&mut self) -> Result<(), ConduitError> {
        // SAFETY: the buffer belongs to `self`, which neither touches nor frees it (its heap
        // storage stays put when `self` moves) until MPI has completed the request (`take`)
        // or it has been cancelled and waited for (`cancel`, `drop`); the communicator is
        // valid by `post`'s contract.
        check("MPI_Irecv", || unsafe {
            ffi::MPI_Irecv(
                self.buffer.as_mut_ptr() as *mut c_void,
                self.buffer.len() as c_int,
                ffi::RSMPI_UINT8_T,
                ffi::RSMPI_ANY_SOURCE,
                ffi::RSMPI_ANY_TAG,
                self.comm,
                &mut self.request,
            )
        })
    }

    /// The message received, if one has arrived (and the receive posted again).
    pub(crate) fn take(&mut self) -> Result<Option<Received>, ConduitError> {
        let mut flag: c_int = 0;
        // SAFETY: an all-zero MPI_Status is valid (plain integers), and MPI_Test fills it.
        let mut status: ffi::MPI_Status = unsafe { std::mem::zeroed() };
        // SAFETY: the request is this receive's, live since `repost`.
        check("MPI_Test", || unsafe {
            ffi::MPI_Test(&mut self.request, &mut flag, &mut status)
        })?;
        if flag == 0 {
            return Ok(None);
        }
        let message = self.message(&status)?;
        self.repost()?;
        Ok(Some(message))
    }

    /// Withdraw the receive (nothing is posted afterwards); the message it had already
    /// taken, if any.
    pub(crate) fn cancel(&mut self) -> Result<Option<Received>, ConduitError> {
        // SAFETY: as in `post`: reading a handle constant.
        if self.request == unsafe { ffi::RSMPI_REQUEST_NULL } {
            return Ok(None);
        }
        // SAFETY: as in `take`.
        let mut status: ffi::MPI_Status = unsafe { std::mem::zeroed() };
        let mut cancelled: c_int = 0;
        // SAFETY: the request is live; after MPI_Wait it is null and the buffer free.
        check("MPI_Cancel", || unsafe {
            ffi::MPI_Cancel(&mut self.request)
        })?;
        // SAFETY: as above.
        check("MPI_Wait", || unsafe {
            ffi::MPI_Wait(&mut self.request, &mut status)
        })?;
        // SAFETY: `status` was filled by MPI_Wait.
        check("MPI_Test_cancelled", || unsafe {
            ffi::MPI_Test_cancelled(&status, &mut cancelled)
        })?;
        if cancelled != 0 {
            return Ok(None);
        }
        self.message(&status).map(Some)
    }

    /// The message a completed receive brought, by its status.
    fn message(&self, status: &ffi::MPI_Status) -> Result<Received, ConduitError> {
        let mut count: c_int = 0;
        // SAFETY: `status` is a completed receive's.
        check("MPI_Get_count", || unsafe {
            ffi::MPI_Get_count(status, ffi::RSMPI_UINT8_T, &mut count)
        })?;
        let bytes = self.buffer[..count.max(0) as usize].to_vec();
        Ok((status.MPI_SOURCE as usize, status.MPI_TAG, bytes))
    }
}

impl Drop for PostedReceive {
    fn drop(&mut self) {
        // MPI must be done with the buffer before it goes.
        let _ = self.cancel();
    }
}

/// A communicator handle moved into the progress thread.
struct CommHandle(ffi::MPI_Comm);

// SAFETY: an MPI handle is an opaque value that any thread may pass to MPI once MPI runs
// at MPI_THREAD_SERIALIZED or above, which `ProgressThread::start` requires of its
// caller, and calls are serialised by `serial`; the thread only reads the handle.
unsafe impl std::marker::Send for CommHandle {}

/// A thread that enters MPI every `period` (an `MPI_Iprobe` on a communicator nobody
/// sends on), so that MPI's progress engine serves one-sided operations aimed at this
/// rank while the rank computes without calling MPI. Stopped and joined when dropped.
pub(crate) struct ProgressThread {
    /// Set by `drop` (`Release`), read by the thread before each poll (`Acquire`); no
    /// other data passes between the two threads.
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ProgressThread {
    /// Start polling `comm` every `period`.
    ///
    /// # Safety
    /// MPI must have been initialised at `MPI_THREAD_SERIALIZED` or above, every other MPI
    /// call of the process must go through [`serial`], and `comm` must stay valid (not
    /// freed, MPI not finalised) until the returned value is dropped.
    pub(crate) unsafe fn start(
        comm: &SimpleCommunicator,
        period: std::time::Duration,
    ) -> Result<ProgressThread, ConduitError> {
        use std::sync::atomic::{AtomicBool, Ordering};
        SHARED.store(true, Ordering::Relaxed);
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let handle = CommHandle(comm.as_raw());
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("tessera-mpi-progress".into())
            .spawn(move || {
                let handle = handle;
                while !flag.load(Ordering::Acquire) {
                    let mut found: c_int = 0;
                    // SAFETY: the caller of `start` keeps `comm` valid and MPI initialised
                    // (serialised calls allowed) until `drop` has joined this thread.
                    serial(|| unsafe {
                        ffi::MPI_Iprobe(
                            ffi::RSMPI_ANY_SOURCE,
                            ffi::RSMPI_ANY_TAG,
                            handle.0,
                            &mut found,
                            ffi::RSMPI_STATUS_IGNORE,
                        )
                    });
                    std::thread::sleep(period);
                }
            })
            .map_err(|_| ConduitError::Unsupported {
                conduit: "mpi",
                what: "start its progress thread",
            })?;
        Ok(ProgressThread {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for ProgressThread {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Release);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// MPI's datatype for elements of `elem`.
fn datatype(elem: NativeType) -> ffi::MPI_Datatype {
    // SAFETY: reading MPI handle constants initialised by MPI_Init.
    unsafe {
        match elem {
            NativeType::I8 => ffi::RSMPI_INT8_T,
            NativeType::I16 => ffi::RSMPI_INT16_T,
            NativeType::I32 => ffi::RSMPI_INT32_T,
            NativeType::I64 => ffi::RSMPI_INT64_T,
            NativeType::U8 => ffi::RSMPI_UINT8_T,
            NativeType::U16 => ffi::RSMPI_UINT16_T,
            NativeType::U32 => ffi::RSMPI_UINT32_T,
            NativeType::U64 => ffi::RSMPI_UINT64_T,
            NativeType::F32 => ffi::RSMPI_FLOAT,
            NativeType::F64 => ffi::RSMPI_DOUBLE,
        }
    }
}

/// Bytes of one element of `elem`.
fn elem_bytes(elem: NativeType) -> usize {
    match elem {
        NativeType::I8 | NativeType::U8 => 1,
        NativeType::I16 | NativeType::U16 => 2,
        NativeType::I32 | NativeType::U32 | NativeType::F32 => 4,
        NativeType::I64 | NativeType::U64 | NativeType::F64 => 8,
    }
}

/// MPI's operation for `op`; MPI has no min/max-with-index on our `Loc` layout.
fn operation(op: Op) -> Result<ffi::MPI_Op, ConduitError> {
    // SAFETY: reading MPI handle constants initialised by MPI_Init.
    Ok(unsafe {
        match op {
            Op::Sum => ffi::RSMPI_SUM,
            Op::Prod => ffi::RSMPI_PROD,
            Op::Min => ffi::RSMPI_MIN,
            Op::Max => ffi::RSMPI_MAX,
            Op::BitAnd => ffi::RSMPI_BAND,
            Op::BitOr => ffi::RSMPI_BOR,
            Op::BitXor => ffi::RSMPI_BXOR,
            Op::LogicalAnd => ffi::RSMPI_LAND,
            Op::LogicalOr => ffi::RSMPI_LOR,
            Op::MinLoc | Op::MaxLoc => {
                return Err(ConduitError::Unsupported {
                    conduit: "mpi",
                    what: "reduce with MinLoc or MaxLoc natively",
                })
            }
        }
    })
}

/// A count as MPI's `int`, or an error naming the call.
fn count(call: &'static str, n: usize) -> Result<c_int, ConduitError> {
    c_int::try_from(n).map_err(|_| ConduitError::Mpi {
        call,
        code: ffi::MPI_ERR_COUNT as c_int,
    })
}

/// Start MPI's nonblocking form of `op` on `comm` (`MPI_Ibarrier`, `MPI_Ibcast`, ...)
/// over `src` and `dst` (a broadcast's data is `dst`) and return its request.
///
/// # Safety
/// `src` must stay readable and `dst` writable and otherwise untouched until the request
/// completes (`MPI_Test` reports it), and the lengths must be as [`NativeOp`] describes
/// them for `comm`'s size on every member.
pub(crate) unsafe fn start_collective(
    comm: &SimpleCommunicator,
    op: NativeOp,
    src: &[u8],
    dst: &mut [u8],
) -> Result<ffi::MPI_Request, ConduitError> {
    let c = comm.as_raw();
    // SAFETY: reading an MPI handle constant initialised by MPI_Init.
    let mut request: ffi::MPI_Request = unsafe { ffi::RSMPI_REQUEST_NULL };
    let req = &mut request as *mut ffi::MPI_Request;
    // SAFETY: reading an MPI handle constant initialised by MPI_Init.
    let bytes = unsafe { ffi::RSMPI_UINT8_T };
    let (s, d) = (
        src.as_ptr() as *const c_void,
        dst.as_mut_ptr() as *mut c_void,
    );
    let typed = |reduction: Reduction, len: usize| -> Result<_, ConduitError> {
        let per = elem_bytes(reduction.elem);
        Ok((
            count("a native reduction", len / per)?,
            datatype(reduction.elem),
            operation(reduction.op)?,
        ))
    };
    // SAFETY (every call below): the caller keeps both buffers alive and untouched until
    // the request completes, and each count fits the buffer it describes.
    match op {
        NativeOp::Barrier => {
            // SAFETY: as above.
            check("MPI_Ibarrier", || unsafe { ffi::MPI_Ibarrier(c, req) })
        }
        NativeOp::Broadcast { root } => {
            let len = count("MPI_Ibcast", dst.len())?;
            // SAFETY: as above.
            check("MPI_Ibcast", || unsafe {
                ffi::MPI_Ibcast(d, len, bytes, root as c_int, c, req)
            })
        }
        NativeOp::Reduce { root, reduction } => {
            let (len, ty, mop) = typed(reduction, src.len())?;
            // SAFETY: as above.
            check("MPI_Ireduce", || unsafe {
                ffi::MPI_Ireduce(s, d, len, ty, mop, root as c_int, c, req)
            })
        }
        NativeOp::Allreduce { reduction } => {
            let (len, ty, mop) = typed(reduction, src.len())?;
            // SAFETY: as above.
            check("MPI_Iallreduce", || unsafe {
                ffi::MPI_Iallreduce(s, d, len, ty, mop, c, req)
            })
        }
        NativeOp::Scan {
            reduction,
            exclusive,
        } => {
            let (len, ty, mop) = typed(reduction, src.len())?;
            if exclusive {
                // SAFETY: as above.
                check("MPI_Iexscan", || unsafe {
                    ffi::MPI_Iexscan(s, d, len, ty, mop, c, req)
                })
            } else {
                // SAFETY: as above.
                check("MPI_Iscan", || unsafe {
                    ffi::MPI_Iscan(s, d, len, ty, mop, c, req)
                })
            }
        }
        NativeOp::Gather { root } => {
            let len = count("MPI_Igather", src.len())?;
            // SAFETY: as above.
            check("MPI_Igather", || unsafe {
                ffi::MPI_Igather(s, len, bytes, d, len, bytes, root as c_int, c, req)
            })
        }
        NativeOp::Allgather => {
            let len = count("MPI_Iallgather", src.len())?;
            // SAFETY: as above.
            check("MPI_Iallgather", || unsafe {
                ffi::MPI_Iallgather(s, len, bytes, d, len, bytes, c, req)
            })
        }
        NativeOp::Scatter { root } => {
            let len = count("MPI_Iscatter", dst.len())?;
            // SAFETY: as above.
            check("MPI_Iscatter", || unsafe {
                ffi::MPI_Iscatter(s, len, bytes, d, len, bytes, root as c_int, c, req)
            })
        }
        NativeOp::Exchange => {
            let n = serial(|| comm.size()) as usize;
            let len = count("MPI_Ialltoall", src.len() / n.max(1))?;
            // SAFETY: as above.
            check("MPI_Ialltoall", || unsafe {
                ffi::MPI_Ialltoall(s, len, bytes, d, len, bytes, c, req)
            })
        }
    }?;
    Ok(request)
}

/// Test `request` once (`MPI_Test`, which sets it to null when it completes).
///
/// # Safety
/// `request` must be a live request or null, with its buffers still valid.
pub(crate) unsafe fn test_request(request: &mut ffi::MPI_Request) -> Result<bool, ConduitError> {
    let mut flag: c_int = 0;
    // SAFETY: the caller's promise; testing a null request is allowed.
    // SAFETY: as above.
    check("MPI_Test", || unsafe {
        ffi::MPI_Test(request, &mut flag, ffi::RSMPI_STATUS_IGNORE)
    })?;
    Ok(flag != 0)
}

/// A nonblocking collective that owns its buffers (8-byte aligned, so a reduction may
/// view them as any [`NativeType`]) until MPI is done with them.
pub(crate) struct OwnedCollective {
    request: ffi::MPI_Request,
    done: bool,
    /// Kept alive for MPI, which reads it.
    src: Vec<u64>,
    dst: Vec<u64>,
    dst_len: usize,
}

impl OwnedCollective {
    /// Start `op` on `comm` over a copy of `src` (for a broadcast, the root's data) and
    /// an output of `dst_len` bytes, taking buffers from `spare` where one is large
    /// enough (fresh large buffers cost a page fault per page).
    pub(crate) fn start(
        comm: &SimpleCommunicator,
        op: NativeOp,
        src: &[u8],
        dst_len: usize,
        spare: &mut Vec<Vec<u64>>,
    ) -> Result<OwnedCollective, ConduitError> {
        let mut words = |bytes: usize| {
            let n = bytes.div_ceil(8);
            let best = (0..spare.len())
                .filter(|&i| spare[i].capacity() >= n)
                .min_by_key(|&i| spare[i].capacity());
            let mut v = best.map(|i| spare.swap_remove(i)).unwrap_or_default();
            // Stale contents are never read: the source is overwritten below, and MPI
            // writes every output byte the caller reads.
            v.truncate(n);
            v.resize(n, 0);
            v
        };
        let broadcast = matches!(op, NativeOp::Broadcast { .. });
        let src_len = if broadcast { 0 } else { src.len() };
        let (mut own_src, mut dst) = (words(src_len), words(dst_len));
        // A broadcast's data travels in the destination.
        let landing: &mut [u8] =
            bytemuck::cast_slice_mut(if broadcast { &mut dst } else { &mut own_src });
        landing[..src.len()].copy_from_slice(src);
        let src_bytes = &bytemuck::cast_slice::<u64, u8>(&own_src)[..src_len];
        let dst_bytes = &mut bytemuck::cast_slice_mut::<u64, u8>(&mut dst)[..dst_len];
        // SAFETY: both buffers are heap storage owned by the returned value, which does
        // not move them, and which keeps them until `test` reports completion (or, if it
        // never does, leaks them in `drop`).
        let request = unsafe { start_collective(comm, op, src_bytes, dst_bytes) }?;
        Ok(OwnedCollective {
            request,
            done: false,
            src: own_src,
            dst,
            dst_len,
        })
    }

    /// Whether MPI has completed the operation (then `output` holds the result).
    pub(crate) fn test(&mut self) -> Result<bool, ConduitError> {
        if !self.done {
            // SAFETY: the request is live (not yet reported complete) and its buffers are
            // owned by `self`.
            self.done = unsafe { test_request(&mut self.request) }?;
        }
        Ok(self.done)
    }

    /// The output bytes (complete once `test` has returned true).
    pub(crate) fn output(&self) -> &[u8] {
        &bytemuck::cast_slice(&self.dst)[..self.dst_len]
    }

    /// The buffers of a completed collective, for the next ones.
    pub(crate) fn into_buffers(mut self) -> [Vec<u64>; 2] {
        assert!(
            self.done,
            "buffers handed back before MPI is done with them"
        );
        [std::mem::take(&mut self.src), std::mem::take(&mut self.dst)]
    }
}

impl Drop for OwnedCollective {
    fn drop(&mut self) {
        // A collective that never completed (its wait failed and the job is ending) may
        // still be written by MPI: leak its buffers rather than free them under it, and
        // never block here (the other members may be gone).
        if !matches!(self.test(), Ok(true)) {
            std::mem::forget(std::mem::take(&mut self.src));
            std::mem::forget(std::mem::take(&mut self.dst));
        }
    }
}
