//! Remote atomic operations on 32- and 64-bit integers.
//!
//! Every operation is atomic with respect to every other atomic operation on the same
//! address from any rank. Read-modify-write operations are `AcqRel`, loads `Acquire`,
//! stores `Release`, so atomics also order the caller's puts (see the memory model in
//! [`crate::core`]). Targets must be naturally aligned and inside a segment.
//!
//! On a mapped peer an operation is a CPU atomic instruction on its segment. On an
//! unmapped peer (another host) it is an active-message round trip: the owner applies the
//! same CPU atomic to its own segment in a handler and replies with the old value. All
//! atomics on a word are then CPU atomics executed on the owner's host, so they stay atomic
//! with respect to each other whichever way they arrive. The caller waits for the reply,
//! so an operation has taken effect when it returns, as on a mapped peer.
//!
//! *Signals* (`Context::signal`: semaphore posts, the signalling put, the barrier's
//! round signals) are the exception: on an unmapped owner they travel as one active
//! message carrying the data (when it fits) and the flag update, which the owner applies
//! in that order, and the sender does not wait. The owner acknowledges each one; the
//! sender counts them and `Context::complete_signals` waits until all are in. Barriers and
//! `sync_nbi` call it first, so a barrier still orders everything issued before it.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::atomic::{AtomicI32, AtomicI64, AtomicU32, AtomicU64, Ordering};

use bytemuck::Pod;

use super::am::AmHandlerId;
use super::stats::Traffic;
use super::{Context, GlobalPtr, Target};
use crate::error::CoreError;
use crate::{Blocking, Result};

const REQUEST: &str = "tessera.atomic.request";
const REPLY: &str = "tessera.atomic.reply";
const SIGNAL: &str = "tessera.signal";
const SIGNALLED: &str = "tessera.signalled";
/// A signal whose owner sends no acknowledgement (the barrier's rounds).
const SIGNAL_QUIET: &str = "tessera.signal.quiet";

/// A read-modify-write operation for [`Context::atomic_fetch`] and
/// [`Context::atomic_apply`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtomicOp<T> {
    /// Wrapping add.
    Add(T),
    /// Wrapping subtract.
    Sub(T),
    /// Bitwise and.
    And(T),
    /// Bitwise or.
    Or(T),
    /// Bitwise xor.
    Xor(T),
    /// Minimum.
    Min(T),
    /// Maximum.
    Max(T),
    /// Replace (swap).
    Swap(T),
}

mod sealed {

    pub trait Sealed {}
}

/// Integer types with remote atomics: `i32`, `i64`, `u32`, `u64`.
pub trait AtomicInt: Pod + PartialEq + sealed::Sealed {
    #[doc(hidden)]
    /// Type tag on the wire (remote atomics).
    const TAG: u64;
    #[doc(hidden)]
    /// # Safety
    /// `p` must be a valid, aligned, mapped address of a `Self` that lives as long as the call.
    unsafe fn rmw(p: *mut Self, op: AtomicOp<Self>) -> Self;
    #[doc(hidden)]
    /// # Safety
    /// As for `rmw`.
    unsafe fn cas(p: *mut Self, current: Self, new: Self) -> Self;
    #[doc(hidden)]
    /// # Safety
    /// As for `rmw`.
    unsafe fn load(p: *mut Self) -> Self;
    #[doc(hidden)]
    /// # Safety
    /// As for `rmw`.
    unsafe fn store(p: *mut Self, v: Self);
}

macro_rules! atomic_int {
    ($t:ty, $atomic:ty, $tag:expr) => {
        impl sealed::Sealed for $t {}
        impl AtomicInt for $t {
            const TAG: u64 = $tag;
            #[inline(always)]
            unsafe fn rmw(p: *mut Self, op: AtomicOp<Self>) -> Self {
                // SAFETY: the caller guarantees p is valid and aligned; the atomic type has
                // the same size and alignment as the integer.
                let a = unsafe { <$atomic>::from_ptr(p) };
                let o = Ordering::AcqRel;
                match op {
                    AtomicOp::Add(v) => a.fetch_add(v, o),
                    AtomicOp::Sub(v) => a.fetch_sub(v, o),
                    AtomicOp::And(v) => a.fetch_and(v, o),
                    AtomicOp::Or(v) => a.fetch_or(v, o),
                    AtomicOp::Xor(v) => a.fetch_xor(v, o),
                    AtomicOp::Min(v) => a.fetch_min(v, o),
                    AtomicOp::Max(v) => a.fetch_max(v, o),
                    AtomicOp::Swap(v) => a.swap(v, o),
                }
            }
            #[inline(always)]
            unsafe fn cas(p: *mut Self, current: Self, new: Self) -> Self {
                // SAFETY: as in rmw.
                let a = unsafe { <$atomic>::from_ptr(p) };
                match a.compare_exchange(current, new, Ordering::AcqRel, Ordering::Acquire) {
                    Ok(v) | Err(v) => v,
                }
            }
            #[inline(always)]
            unsafe fn load(p: *mut Self) -> Self {
                // SAFETY: as in rmw.
                unsafe { <$atomic>::from_ptr(p) }.load(Ordering::Acquire)
            }
            #[inline(always)]
            unsafe fn store(p: *mut Self, v: Self) {
                // SAFETY: as in rmw.
                unsafe { <$atomic>::from_ptr(p) }.store(v, Ordering::Release)
            }
        }
    };
}
atomic_int!(i32, AtomicI32, 0);
atomic_int!(i64, AtomicI64, 1);
atomic_int!(u32, AtomicU32, 2);
atomic_int!(u64, AtomicU64, 3);

/// One atomic operation as it travels to an unmapped owner.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Remote<T> {
    Rmw(AtomicOp<T>),
    Cas(T, T),
    Load,
    Store(T),
}

/// An integer of 4 or 8 bytes widened to a `u64` word (little end first) and back.
fn widen<T: Pod>(v: T) -> u64 {
    let mut word = [0u8; 8];
    word[..std::mem::size_of::<T>()].copy_from_slice(bytemuck::bytes_of(&v));
    u64::from_le_bytes(word)
}

fn narrow<T: Pod>(word: u64) -> T {
    bytemuck::pod_read_unaligned(&word.to_le_bytes()[..std::mem::size_of::<T>()])
}

impl<T: AtomicInt> Remote<T> {
    /// `[code, a, b]`: codes 0–7 are the [`AtomicOp`]s in declaration order, then CAS, load
    /// and store.
    fn encode(self) -> [u64; 3] {
        let rmw = |code, v| [code, widen(v), 0];
        match self {
            Remote::Rmw(AtomicOp::Add(v)) => rmw(0, v),
            Remote::Rmw(AtomicOp::Sub(v)) => rmw(1, v),
            Remote::Rmw(AtomicOp::And(v)) => rmw(2, v),
            Remote::Rmw(AtomicOp::Or(v)) => rmw(3, v),
            Remote::Rmw(AtomicOp::Xor(v)) => rmw(4, v),
            Remote::Rmw(AtomicOp::Min(v)) => rmw(5, v),
            Remote::Rmw(AtomicOp::Max(v)) => rmw(6, v),
            Remote::Rmw(AtomicOp::Swap(v)) => rmw(7, v),
            Remote::Cas(current, new) => [8, widen(current), widen(new)],
            Remote::Load => [9, 0, 0],
            Remote::Store(v) => [10, widen(v), 0],
        }
    }

    fn decode([code, a, b]: [u64; 3]) -> Option<Self> {
        let v = narrow::<T>(a);
        Some(match code {
            0 => Remote::Rmw(AtomicOp::Add(v)),
            1 => Remote::Rmw(AtomicOp::Sub(v)),
            2 => Remote::Rmw(AtomicOp::And(v)),
            3 => Remote::Rmw(AtomicOp::Or(v)),
            4 => Remote::Rmw(AtomicOp::Xor(v)),
            5 => Remote::Rmw(AtomicOp::Min(v)),
            6 => Remote::Rmw(AtomicOp::Max(v)),
            7 => Remote::Rmw(AtomicOp::Swap(v)),
            8 => Remote::Cas(v, narrow::<T>(b)),
            9 => Remote::Load,
            10 => Remote::Store(v),
            _ => return None,
        })
    }

    /// Apply to a mapped word; returns the value it had before (a store returns the
    /// value stored, which nobody reads).
    ///
    /// # Safety
    /// As for [`AtomicInt::rmw`].
    #[inline(always)]
    pub(crate) unsafe fn apply(self, p: *mut T) -> T {
        // SAFETY: forwarded from the caller.
        unsafe {
            match self {
                Remote::Rmw(op) => T::rmw(p, op),
                Remote::Cas(current, new) => T::cas(p, current, new),
                Remote::Load => T::load(p),
                Remote::Store(v) => {
                    T::store(p, v);
                    v
                }
            }
        }
    }
}

/// Whether the owner of a signal's flag acknowledges it when the flag is not mapped here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Acknowledge {
    /// It does, and [`Context::complete_signals`] waits for that.
    Yes,
    /// It does not.
    No,
}

/// Per-rank state of remote atomics: replies not yet collected, by ticket.
#[derive(Default)]
pub(crate) struct RemoteAtomics {
    next_ticket: Cell<u64>,
    replies: RefCell<HashMap<u64, u64>>,
    /// Signals sent to unmapped owners and not yet acknowledged.
    unacknowledged: Cell<u64>,
}

/// Apply the operation in a request to this rank's own segment.
fn apply_here<T: AtomicInt>(ctx: &Context, offset: u64, op: [u64; 3]) -> Result<u64> {
    let op = Remote::<T>::decode(op).ok_or_else(|| CoreError::Malformed {
        what: format!("unknown remote atomic operation {}", op[0]),
    })?;
    let p = ctx.atomic_target(GlobalPtr::<T>::new(ctx.rank(), offset))?;
    // SAFETY: atomic_target checked that p is mapped (our own segment), in bounds and aligned.
    Ok(widen(unsafe { op.apply(p) }))
}

/// Register the handlers that serve and answer remote atomics. Runs first in start-up, so
/// that no peer's request can find its handler missing.
pub(crate) fn register_handlers(ctx: &Context) -> Result<()> {
    ctx.am_register(REQUEST, |ctx, msg| {
        let &[offset, tag, code, a, b, ticket] = msg.args() else {
            return Err(CoreError::Malformed {
                what: "malformed remote atomic request".into(),
            }
            .into());
        };
        let op = [code, a, b];
        let old = match tag {
            0 => apply_here::<i32>(ctx, offset, op),
            1 => apply_here::<i64>(ctx, offset, op),
            2 => apply_here::<u32>(ctx, offset, op),
            3 => apply_here::<u64>(ctx, offset, op),
            _ => Err(CoreError::Malformed {
                what: format!("unknown remote atomic type {tag}"),
            }
            .into()),
        }?;
        ctx.am_reply_short(msg, AmHandlerId::of(REPLY), &[ticket, old])
    })?;
    ctx.am_register(REPLY, |ctx, msg| {
        let &[ticket, old] = msg.args() else {
            return Err(CoreError::Malformed {
                what: "malformed remote atomic reply".into(),
            }
            .into());
        };
        ctx.remote_atomics.replies.borrow_mut().insert(ticket, old);
        Ok(())
    })?;
    // A signal: its data, then its flag, on this rank's own segment.
    fn apply_signal(ctx: &Context, msg: &super::am::AmMessage<'_>) -> Result<()> {
        let &[flag, code, a, b, data_offset] = msg.args() else {
            return Err(CoreError::Malformed {
                what: "malformed signal".into(),
            }
            .into());
        };
        let data = msg.payload();
        if !data.is_empty() {
            let target =
                ctx.target(GlobalPtr::<u8>::new(ctx.rank(), data_offset), data.len(), 1)?;
            ctx.store_bytes(target, data)?;
        }
        apply_here::<u64>(ctx, flag, [code, a, b])?;
        Ok(())
    }
    ctx.am_register(SIGNAL, |ctx, msg| {
        apply_signal(ctx, msg)?;
        ctx.am_reply_short(msg, AmHandlerId::of(SIGNALLED), &[])
    })?;
    ctx.am_register(SIGNAL_QUIET, apply_signal)?;
    ctx.am_register(SIGNALLED, |ctx, _msg| {
        let pending = &ctx.remote_atomics.unacknowledged;
        pending.set(pending.get().saturating_sub(1));
        Ok(())
    })?;
    Ok(())
}

impl Context {
    fn atomic_target<T: AtomicInt>(&self, ptr: GlobalPtr<T>) -> Result<*mut T> {
        let size = std::mem::size_of::<T>();
        match self.target(ptr, size, size)? {
            Target::Direct(p) => Ok(p.as_ptr() as *mut T),
            Target::Remote { .. } => Err(self
                .conduit()
                .unsupported("atomics on an unmapped peer")
                .into()),
        }
    }

    /// Write `data` (if any) and then apply `op` to `flag`, with release semantics: whoever
    /// acquires `flag` and sees the update also sees the data. On a mapped owner, a store
    /// and a CPU atomic. On an unmapped owner, one active message that the owner applies
    /// in order (the data rides along when it fits one message and lives on the flag's
    /// rank; otherwise it is put first, complete at the target), without waiting; see
    /// [`Context::complete_signals`].
    pub(crate) fn signal(
        &self,
        data: Option<(GlobalPtr<u8>, &[u8])>,
        flag: GlobalPtr<u64>,
        op: Remote<u64>,
    ) -> Result<()> {
        self.signal_as(data, flag, op, Acknowledge::Yes)
    }

    /// [`Context::signal`], where `acknowledge` says whether an unmapped owner
    /// acknowledges it: without, neither [`Context::complete_signals`] nor the barrier's
    /// wait for handled active messages waits for it, so only a protocol that learns of
    /// its arrival otherwise may send one (the barrier, whose partner's own round signal
    /// says it has arrived; see `core::barrier`).
    pub(crate) fn signal_as(
        &self,
        data: Option<(GlobalPtr<u8>, &[u8])>,
        flag: GlobalPtr<u64>,
        op: Remote<u64>,
        acknowledge: Acknowledge,
    ) -> Result<()> {
        if self.counts_communication() {
            return self.signal_counted(data, flag, op, acknowledge);
        }
        self.signal_to(data, flag, op, acknowledge)
    }

    /// [`Context::signal_as`] with statistics on: counted once, as a signalling put (or,
    /// without data, an atomic), however many operations carry it.
    #[cold]
    fn signal_counted(
        &self,
        data: Option<(GlobalPtr<u8>, &[u8])>,
        flag: GlobalPtr<u64>,
        op: Remote<u64>,
        acknowledge: Acknowledge,
    ) -> Result<()> {
        let (kind, peer, bytes) = match data {
            Some((dst, bytes)) => (Traffic::SignalPut, dst.rank(), bytes.len()),
            None => (Traffic::Atomic, flag.rank(), 8),
        };
        self.counted(kind, peer, bytes, || {
            self.signal_to(data, flag, op, acknowledge)
        })
    }

    #[inline]
    fn signal_to(
        &self,
        data: Option<(GlobalPtr<u8>, &[u8])>,
        flag: GlobalPtr<u64>,
        op: Remote<u64>,
        acknowledge: Acknowledge,
    ) -> Result<()> {
        let (rank, offset) = match self.target(flag, 8, 8)? {
            Target::Direct(p) => {
                if let Some((dst, bytes)) = data {
                    self.put(dst, bytes, Blocking)?;
                }
                // SAFETY: target checked that p is a mapped, aligned, in-bounds u64.
                unsafe { op.apply(p.as_ptr() as *mut u64) };
                return Ok(());
            }
            Target::Remote { rank, offset } => (rank, offset as u64),
        };
        if self.in_handler.get() > 0 {
            return Err(CoreError::InHandler("a signal to an unmapped peer").into());
        }
        self.complete_implicit()?;
        let (payload, data_offset): (&[u8], u64) = match data {
            Some((dst, bytes)) if dst.rank() == rank && bytes.len() <= self.am_max_medium(5) => {
                // Checked here, so that the owner's handler cannot fail on it.
                self.target(dst, bytes.len(), 1)?;
                (bytes, dst.offset())
            }
            Some((dst, bytes)) => {
                self.put(dst, bytes, Blocking)?;
                (&[], 0)
            }
            None => (&[], 0),
        };
        let [code, a, b] = op.encode();
        let args = [offset, code, a, b, data_offset];
        let (handler, counted) = match acknowledge {
            Acknowledge::Yes => (SIGNAL, true),
            Acknowledge::No => (SIGNAL_QUIET, false),
        };
        self.am_request_medium_as(rank, AmHandlerId::of(handler), &args, payload, counted)?;
        if acknowledge == Acknowledge::Yes {
            let pending = &self.remote_atomics.unacknowledged;
            pending.set(pending.get() + 1);
        }
        Ok(())
    }

    /// Write `data` (if any), then store `value` into `flag` (release), as a signal: on an
    /// unmapped owner one message that the owner applies in order, without a round trip
    /// (see [`Context::signal`]).
    #[inline(always)]
    pub(crate) fn signal_store(
        &self,
        data: Option<(GlobalPtr<u8>, &[u8])>,
        flag: GlobalPtr<u64>,
        value: u64,
    ) -> Result<()> {
        if data.is_none() {
            if let Some(p) = self.mapped_uncounted(flag) {
                // SAFETY: mapped_uncounted checked that p is a mapped, aligned, in-bounds
                // u64; without data a mapped signal is this store (as in signal_to).
                unsafe { u64::store(p, value) };
                return Ok(());
            }
        }
        self.signal_store_any(data, flag, value)
    }

    /// [`Context::signal_store`] off its inline path.
    #[inline(never)]
    fn signal_store_any(
        &self,
        data: Option<(GlobalPtr<u8>, &[u8])>,
        flag: GlobalPtr<u64>,
        value: u64,
    ) -> Result<()> {
        self.signal(data, flag, Remote::Store(value))
    }

    /// Wait until every active message this rank sent has been handled at its target, then
    /// run the replies that came back (the barrier's guarantee about active messages): a
    /// handler replies before its frame counts as consumed, so once every request is
    /// consumed its reply is here to run. Without a counted request since the last
    /// barrier there is no reply to run and nothing to poll for, so the barrier's arrival
    /// signal goes out at once (across hosts a poll is a probe of MPI's progress engine).
    pub(crate) fn complete_active_messages(&self) -> Result<()> {
        let requested = self.am.take_requested();
        if !self.conduit().am_all_consumed() {
            self.wait_until(
                "its active messages to be handled",
                || Ok(self.conduit().am_all_consumed()),
                || "a target has not polled (every wait polls; a rank computing without calling poll() delays this)".into(),
            )?;
        } else if !requested {
            return Ok(());
        }
        self.poll()
    }

    pub(crate) fn complete_signals(&self) -> Result<()> {
        self.complete_implicit()?;
        let pending = &self.remote_atomics.unacknowledged;
        if pending.get() == 0 {
            return Ok(());
        }
        self.wait_until(
            "acknowledgements of signals",
            || Ok(pending.get() == 0),
            || format!("{} signals are not acknowledged", pending.get()),
        )
    }

    /// Apply `op` at `ptr`, on a mapped word directly or by a round trip to its owner.
    fn atomic_any<T: AtomicInt>(&self, ptr: GlobalPtr<T>, op: Remote<T>) -> Result<T> {
        let size = std::mem::size_of::<T>();
        let target = self.target(ptr, size, size)?;
        if matches!(op, Remote::Load) {
            self.count_word_read(ptr.rank(), size);
        } else {
            self.count(Traffic::Atomic, ptr.rank(), size);
        }
        match target {
            // SAFETY: target checked that p is mapped, in bounds and aligned.
            Target::Direct(p) => Ok(unsafe { op.apply(p.as_ptr() as *mut T) }),
            // The active messages that carry it are the atomic's, not counted again.
            Target::Remote { rank, offset } => {
                self.uncounted(|| self.atomic_remote(rank, offset as u64, op))
            }
        }
    }

    /// An atomic on a word of unmapped rank `rank`: a round trip to its owner.
    fn atomic_remote<T: AtomicInt>(&self, rank: usize, offset: u64, op: Remote<T>) -> Result<T> {
        if self.in_handler.get() > 0 {
            return Err(CoreError::InHandler("an atomic on an unmapped peer").into());
        }
        self.complete_implicit()?;
        let state = &self.remote_atomics;
        let ticket = state.next_ticket.get();
        state.next_ticket.set(ticket + 1);
        let [code, a, b] = op.encode();
        self.am_request_short(
            rank,
            AmHandlerId::of(REQUEST),
            &[offset, T::TAG, code, a, b, ticket],
        )?;
        self.wait_until(
            "a remote atomic",
            || Ok(state.replies.borrow().contains_key(&ticket)),
            || format!("rank {rank} has not answered an atomic on offset {offset}"),
        )?;
        let old = state.replies.borrow_mut().remove(&ticket).expect("present");
        Ok(narrow(old))
    }

    /// Apply `op` to the integer at `ptr` and return the value it had before.
    ///
    /// ```no_run
    /// # use tessera::AtomicOp;
    /// # fn f(ctx: &tessera::Context, counter: tessera::GlobalPtr<u64>) -> tessera::Result<()> {
    /// let ticket = ctx.atomic_fetch(counter.on(0), AtomicOp::Add(1))?;
    /// # Ok(()) }
    /// ```
    pub fn atomic_fetch<T: AtomicInt>(&self, ptr: GlobalPtr<T>, op: AtomicOp<T>) -> Result<T> {
        self.atomic_any(ptr, Remote::Rmw(op))
    }

    /// Apply `op` to the integer at `ptr` without fetching the old value.
    pub fn atomic_apply<T: AtomicInt>(&self, ptr: GlobalPtr<T>, op: AtomicOp<T>) -> Result<()> {
        self.atomic_fetch(ptr, op).map(|_| ())
    }

    /// If the integer at `ptr` equals `current`, replace it with `new`. Returns the value
    /// found (equal to `current` exactly when the swap happened).
    pub fn atomic_compare_swap<T: AtomicInt>(
        &self,
        ptr: GlobalPtr<T>,
        current: T,
        new: T,
    ) -> Result<T> {
        self.atomic_any(ptr, Remote::Cas(current, new))
    }

    /// Atomically read the integer at `ptr` (acquire).
    #[inline]
    pub fn atomic_load<T: AtomicInt>(&self, ptr: GlobalPtr<T>) -> Result<T> {
        if let Some(p) = self.mapped_uncounted(ptr) {
            // SAFETY: mapped_uncounted checked that p is a mapped, aligned, in-bounds T.
            return Ok(unsafe { T::load(p) });
        }
        self.atomic_any(ptr, Remote::Load)
    }

    /// Atomically write the integer at `ptr` (release).
    #[inline]
    pub fn atomic_store<T: AtomicInt>(&self, ptr: GlobalPtr<T>, value: T) -> Result<()> {
        if let Some(p) = self.mapped_uncounted(ptr) {
            // SAFETY: as in atomic_load.
            unsafe { T::store(p, value) };
            return Ok(());
        }
        self.atomic_any(ptr, Remote::Store(value)).map(|_| ())
    }

    /// The address of the integer at `ptr` when it is mapped here (checked: in bounds and
    /// aligned) and statistics are off, so that a load or store through it is the whole
    /// operation: the inline path of loads, stores and signals without data, which polls
    /// and the team channel's flags take on every message. `None` sends the caller the
    /// general way, which also reports a bad pointer.
    #[inline(always)]
    fn mapped_uncounted<T: AtomicInt>(&self, ptr: GlobalPtr<T>) -> Option<*mut T> {
        if self.counts_communication() {
            return None;
        }
        let size = std::mem::size_of::<T>();
        match self.target(ptr, size, size) {
            Ok(Target::Direct(p)) => Some(p.as_ptr().cast()),
            _ => None,
        }
    }
}

/// Floating-point numbers with remote atomic load, store and swap (the operations that
/// move a value whole: OpenSHMEM's fetch, set and swap on `float` and `double`), carried
/// out on the integer of the same width.
pub trait AtomicFloat: Pod + sealed_float::Sealed {
    #[doc(hidden)]
    /// The integer of the same width.
    type Bits: AtomicInt;
}

mod sealed_float {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
}

impl AtomicFloat for f32 {
    type Bits = u32;
}
impl AtomicFloat for f64 {
    type Bits = u64;
}

impl Context {
    /// Atomically read the float at `ptr` (any rank).
    ///
    /// ```
    /// tessera::Job::threads(2).segment(1 << 20).run(|ctx| {
    ///     let x = ctx.alloc_collective::<f64>(1)?;
    ///     ctx.barrier()?;
    ///     if ctx.rank() == 0 {
    ///         ctx.atomic_float_store(x.on(1), 1.5)?;
    ///         assert_eq!(ctx.atomic_float_swap(x.on(1), 2.5)?, 1.5);
    ///         assert_eq!(ctx.atomic_float_load(x.on(1))?, 2.5);
    ///     }
    ///     Ok(())
    /// }).unwrap();
    /// ```
    pub fn atomic_float_load<F: AtomicFloat>(&self, ptr: GlobalPtr<F>) -> Result<F> {
        self.atomic_load(ptr.cast::<F::Bits>()).map(bytemuck::cast)
    }

    /// Atomically write the float at `ptr` (release).
    pub fn atomic_float_store<F: AtomicFloat>(&self, ptr: GlobalPtr<F>, value: F) -> Result<()> {
        self.atomic_store(ptr.cast::<F::Bits>(), bytemuck::cast(value))
    }

    /// Atomically replace the float at `ptr`; the value it held.
    pub fn atomic_float_swap<F: AtomicFloat>(&self, ptr: GlobalPtr<F>, value: F) -> Result<F> {
        self.atomic_fetch(ptr.cast::<F::Bits>(), AtomicOp::Swap(bytemuck::cast(value)))
            .map(bytemuck::cast)
    }
}
