//! Who may call the library and from which threads: the thread level provided, the
//! state (reached through [`state`], which holds the library's lock when several threads
//! may call), and the symmetric addressing every RMA, AMO and wait uses without that lock
//! ([`symmetric`]).
//!
//! The levels, as `shmem_init_thread` grants them:
//! - `SINGLE` and `FUNNELED`: the thread that initialised the library calls it; a call
//!   from another thread is refused with a message. No lock is taken.
//! - `SERIALIZED`: any thread, one at a time. Every routine that touches the runtime's
//!   per-PE state holds a reentrant lock, so even a program that breaks the promise is not
//!   silently corrupted.
//! - `MULTIPLE`: any threads at once. Granted only when every PE's segment is mapped in
//!   this process (the `smp` conduit, and `mpi` on one host): then puts, gets, AMOs,
//!   put-with-signal, waits, tests, fence and quiet run on the runtime's
//!   [`MappedSegments`] with no lock at all, and only the rest (collectives, allocation,
//!   teams, contexts) takes the lock. Where a peer is reachable only through the conduit,
//!   a put would need the lock, so `SERIALIZED` is the most this library reports there.
//!
//! This module must never move data itself: it says who may, and where.

use std::ops::Deref;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicUsize, Ordering};

use libc::{c_int, c_void};
use parking_lot::{ReentrantMutex, ReentrantMutexGuard};
use tessera::{GlobalPtr, MappedSegments};

use crate::{fatal, State};

/// `SHMEM_THREAD_SINGLE`, `_FUNNELED`, `_SERIALIZED`, `_MULTIPLE`.
pub(crate) const SINGLE: c_int = 0;
pub(crate) const FUNNELED: c_int = 1;
pub(crate) const SERIALIZED: c_int = 2;
pub(crate) const MULTIPLE: c_int = 3;

/// The thread level provided (set before the state is published).
static LEVEL: AtomicI32 = AtomicI32::new(FUNNELED);
/// The thread that initialised the library.
static OWNER: AtomicUsize = AtomicUsize::new(0);
/// The library's state while initialised (null before `shmem_init` and after
/// `shmem_finalize`). Plain statics rather than thread-locals: in a shared library every
/// thread-local access is a call to `__tls_get_addr`, which cost several nanoseconds per
/// routine; `pthread_self` reads the thread pointer directly.
static STATE: AtomicPtr<State> = AtomicPtr::new(std::ptr::null_mut());
/// The symmetric addressing, published with the state (and, unlike it, never freed: a
/// thread may still hold it when another finalises).
static SYMMETRIC: AtomicPtr<Symmetric> = AtomicPtr::new(std::ptr::null_mut());
/// `shmem_init` ran, and `shmem_finalize` ran (for the messages).
static INITIALISED: AtomicBool = AtomicBool::new(false);
static FINALIZED: AtomicBool = AtomicBool::new(false);
/// The lock around the state at `SERIALIZED` and `MULTIPLE`. Reentrant, because routines
/// call routines (a signal fetch is an AMO; an error reports through the state).
static LOCK: ReentrantMutex<()> = ReentrantMutex::new(());

#[inline(always)]
fn this_thread() -> usize {
    // SAFETY: pthread_self has no preconditions.
    unsafe { libc::pthread_self() as usize }
}

/// The thread level provided.
#[inline(always)]
pub(crate) fn level() -> c_int {
    LEVEL.load(Ordering::Relaxed)
}

/// Whether `MULTIPLE` was granted: RMA, AMOs, waits, tests, fence and quiet then run
/// without the lock.
#[inline]
pub(crate) fn lock_free() -> bool {
    level() == MULTIPLE
}

/// Whether this thread may call the library now (it is initialised, and either any thread
/// may or this is the thread that initialised it).
#[inline(always)]
fn admitted() -> bool {
    level() >= SERIALIZED || OWNER.load(Ordering::Relaxed) == this_thread()
}

/// The state if this thread may reach it (without taking the lock: for the error path,
/// which must not block).
#[inline(always)]
pub(crate) fn current() -> Option<&'static State> {
    let p = STATE.load(Ordering::Acquire);
    if p.is_null() || !admitted() {
        return None;
    }
    // SAFETY: a non-null STATE points to the State leaked by `publish`, which only
    // `retire` frees after nulling STATE.
    Some(unsafe { &*p })
}

/// The state, held: at `SERIALIZED` and `MULTIPLE` the library's lock is held until this
/// is dropped, so every routine that touches the runtime's per-PE state (the context,
/// the teams, the heap's table) keeps one for as long as it uses them.
pub(crate) struct Held {
    state: &'static State,
    _lock: Option<ReentrantMutexGuard<'static, ()>>,
}

impl Deref for Held {
    type Target = State;
    fn deref(&self) -> &State {
        self.state
    }
}

/// The state, or the end of the job with a message saying why there is none (this is the
/// check every call makes before using any reference into the runtime).
#[inline(always)]
pub(crate) fn state(call: &str) -> Held {
    let Some(state) = current() else { refuse(call) };
    let _lock = (level() >= SERIALIZED).then(|| LOCK.lock());
    Held { state, _lock }
}

/// The state if this thread can take the lock without waiting (for waits polled without
/// it, which make progress when they can).
pub(crate) fn try_state() -> Option<Held> {
    let state = current()?;
    let _lock = if level() >= SERIALIZED {
        Some(LOCK.try_lock()?)
    } else {
        None
    };
    Some(Held { state, _lock })
}

/// The state for the error path: with the lock if it comes within a second (another
/// thread may hold it in a long wait), else `None`.
pub(crate) fn state_for_error() -> Option<Held> {
    let state = current()?;
    let _lock = if level() >= SERIALIZED {
        Some(LOCK.try_lock_for(std::time::Duration::from_secs(1))?)
    } else {
        None
    };
    Some(Held { state, _lock })
}

/// Why this thread may not call the library now.
#[cold]
#[inline(never)]
fn refuse(call: &str) -> ! {
    if FINALIZED.load(Ordering::Acquire) {
        fatal(call, "called after shmem_finalize");
    }
    if INITIALISED.load(Ordering::Acquire) {
        fatal(
            call,
            format!(
                "called from a thread other than the one that called shmem_init, at thread level {}; to call from several threads, initialise with shmem_init_thread(SHMEM_THREAD_SERIALIZED or SHMEM_THREAD_MULTIPLE, &provided)",
                level_name(level())
            ),
        );
    }
    fatal(call, "called before shmem_init; call shmem_init first")
}

/// The specification's name of a thread level.
pub(crate) fn level_name(level: c_int) -> &'static str {
    match level {
        SINGLE => "SHMEM_THREAD_SINGLE",
        FUNNELED => "SHMEM_THREAD_FUNNELED",
        SERIALIZED => "SHMEM_THREAD_SERIALIZED",
        _ => "SHMEM_THREAD_MULTIPLE",
    }
}

/// Whether the library is initialised and usable from this thread.
pub(crate) fn initialised_here() -> bool {
    current().is_some()
}

/// Whether the library was finalised.
pub(crate) fn finalised() -> bool {
    FINALIZED.load(Ordering::Acquire)
}

/// Publish the state of a freshly initialised PE, and the level granted.
pub(crate) fn publish(state: &'static State, level: c_int) {
    LEVEL.store(level, Ordering::Relaxed);
    OWNER.store(this_thread(), Ordering::Relaxed);
    SYMMETRIC.store(
        state.sym as *const Symmetric as *mut Symmetric,
        Ordering::Release,
    );
    STATE.store(state as *const State as *mut State, Ordering::Release);
    INITIALISED.store(true, Ordering::Release);
}

/// Withdraw the state (at `shmem_finalize`): every later call is refused.
pub(crate) fn retire() {
    SYMMETRIC.store(std::ptr::null_mut(), Ordering::Release);
    STATE.store(std::ptr::null_mut(), Ordering::Release);
    FINALIZED.store(true, Ordering::Release);
}

/// The symmetric addressing, for the routines that run without the lock; a thread that
/// may not call gets the same message as [`state`] gives.
#[inline(always)]
pub(crate) fn symmetric(call: &str) -> &'static Symmetric {
    let p = SYMMETRIC.load(Ordering::Acquire);
    if p.is_null() || !admitted() {
        refuse(call);
    }
    // SAFETY: a non-null SYMMETRIC points to the Symmetric leaked by `init`, never freed.
    unsafe { &*p }
}

/// What every thread may read without the lock: this PE's place in the job, where the
/// symmetric objects are in this process, and the runtime's view of the mapped segments.
/// Written once at `shmem_init`, then only read.
pub(crate) struct Symmetric {
    /// Statistics are on: transfers and atomics go through the context, which counts
    /// them, instead of straight to the mapped segments.
    pub(crate) counted: bool,
    pub(crate) rank: usize,
    pub(crate) ranks: usize,
    /// This PE's segment in this process's memory.
    pub(crate) seg_base: usize,
    pub(crate) seg_len: usize,
    /// The program's writable data, mapped into the segment: (first address, end, offset).
    pub(crate) globals: Option<(usize, usize, u64)>,
    /// Puts, gets and atomics on the mapped segments, from any thread.
    pub(crate) mapped: MappedSegments<'static>,
    /// Every PE's segment is mapped here, so every transfer completes as it returns.
    pub(crate) all_mapped: bool,
    /// The runtime's wait policy: polls between yields.
    pub(crate) spins_per_yield: u32,
    /// The contexts, readable without the lock.
    pub(crate) contexts: crate::ctx::Contexts,
}

impl Symmetric {
    /// The segment offset of the `bytes` bytes at this process's address `addr`, which must
    /// be symmetric: in the symmetric heap, or in the program's global data.
    #[inline(always)]
    pub(crate) fn offset_of(&self, call: &str, addr: *const c_void, bytes: usize) -> u64 {
        let a = addr as usize;
        let inside =
            |lo: usize, hi: usize| a >= lo && a.checked_add(bytes).is_some_and(|e| e <= hi);
        if inside(self.seg_base, self.seg_base + self.seg_len) {
            return (a - self.seg_base) as u64;
        }
        if let Some((lo, hi, off)) = self.globals {
            if inside(lo, hi) {
                return off + (a - lo) as u64;
            }
        }
        not_symmetric(call, addr, bytes)
    }

    /// Whether `addr` is a symmetric address.
    pub(crate) fn is_symmetric(&self, addr: *const c_void) -> bool {
        let a = addr as usize;
        (a >= self.seg_base && a < self.seg_base + self.seg_len)
            || self.globals.is_some_and(|(lo, hi, _)| a >= lo && a < hi)
    }

    /// Check that `pe` is a PE of the job.
    #[inline(always)]
    pub(crate) fn pe(&self, call: &str, pe: c_int) -> usize {
        if pe < 0 || pe as usize >= self.ranks {
            no_such_pe(call, pe, self.ranks);
        }
        pe as usize
    }

    /// The global pointer to `count` elements at symmetric address `addr` on `pe`. Always
    /// inlined: returned from a call, the pointer goes through memory, and reloading it
    /// whole after two 8-byte stores stalls store forwarding (half an AMO's cost).
    #[inline(always)]
    pub(crate) fn remote<T>(
        &self,
        call: &str,
        addr: *const T,
        count: usize,
        pe: c_int,
    ) -> GlobalPtr<T> {
        let pe = self.pe(call, pe);
        let bytes = count.saturating_mul(std::mem::size_of::<T>());
        let off = self.offset_of(call, addr.cast(), bytes);
        GlobalPtr::new(pe, off)
    }

    /// The global pointer to `count` elements at symmetric address `addr` on this PE.
    #[inline(always)]
    pub(crate) fn own<T>(&self, call: &str, addr: *const T, count: usize) -> GlobalPtr<T> {
        // This PE is in the job: only the address is checked.
        let bytes = count.saturating_mul(std::mem::size_of::<T>());
        GlobalPtr::new(self.rank, self.offset_of(call, addr.cast(), bytes))
    }

    /// This process's address of the symmetric object at segment offset `off`.
    pub(crate) fn local_address(&self, off: u64) -> *mut c_void {
        if let Some((lo, hi, goff)) = self.globals {
            if off >= goff && off < goff + (hi - lo) as u64 {
                return (lo + (off - goff) as usize) as *mut c_void;
            }
        }
        (self.seg_base + off as usize) as *mut c_void
    }
}

/// The message for an address that is not symmetric.
#[cold]
#[inline(never)]
fn not_symmetric(call: &str, addr: *const c_void, bytes: usize) -> ! {
    fatal(
        call,
        format!(
            "address {addr:p} ({bytes} bytes) is not symmetric: it is neither in the symmetric heap nor in the program's global or static data; allocate it with shmem_malloc, or make it a global or static variable"
        ),
    )
}

/// The message for a PE number outside the job.
#[cold]
#[inline(never)]
fn no_such_pe(call: &str, pe: c_int, ranks: usize) -> ! {
    fatal(
        call,
        format!(
            "PE {pe} does not exist: this job has PEs 0 to {}",
            ranks - 1
        ),
    )
}
