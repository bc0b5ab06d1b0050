//! Atomic memory operations (their exported functions are generated; they call these).
//! Every AMO runs on the runtime's remote atomics over a 32- or 64-bit word of the same
//! size as the C type: `float` and `double` move as their bit patterns (fetch, set and swap
//! only, as the specification allows).
//!
//! A word mapped in this process is reached through the runtime's [`MappedSegments`],
//! without the library's lock (so from several threads at once at `MULTIPLE`); any other
//! through the context.
//!
//! This module must never touch a word except through the runtime's atomics.

use bytemuck::Pod;
use libc::c_int;
use tessera::{AtomicInt, AtomicOp, Context, GlobalPtr, MappedSegments};

use crate::{check, state, symmetric};

/// A C value as the atomic word of the same size.
pub(crate) fn to_word<R: Pod, W: Pod>(v: R) -> W {
    bytemuck::cast(v)
}

/// The C value of an atomic word.
pub(crate) fn from_word<R: Pod, W: Pod>(w: W) -> R {
    bytemuck::cast(w)
}

/// The nonblocking AMOs' delivery of the fetched value to the local `fetch`.
///
/// # Safety
/// `fetch` valid for one element, or null (refused).
pub(crate) unsafe fn deliver<R>(call: &str, fetch: *mut R, value: R) {
    if fetch.is_null() {
        crate::fatal(call, "fetch is null; pass where the fetched value goes");
    }
    // SAFETY: the caller passes a valid destination (checked non-null).
    unsafe { fetch.write_unaligned(value) }
}

/// Apply one atomic to the word at symmetric `addr` on `pe`: directly if it is mapped here
/// (no lock, from any thread), else through the context. Always inlined, so the operation
/// and the pointer stay in registers down to the runtime's atomic.
#[inline(always)]
fn on_word<W: AtomicInt, R>(
    call: &str,
    addr: *const W,
    pe: c_int,
    direct: impl FnOnce(MappedSegments<'static>, GlobalPtr<W>) -> tessera::Result<Option<R>>,
    through: impl FnOnce(&Context, GlobalPtr<W>) -> tessera::Result<R>,
) -> R {
    let sym = symmetric(call);
    let at = sym.remote(call, addr, 1, pe);
    let done = if sym.counted {
        None
    } else {
        check(call, direct(sym.mapped, at))
    };
    match done {
        Some(r) => r,
        None => check(call, through(state(call).session.context(), at)),
    }
}

/// # Safety
/// `src` symmetric.
pub(crate) unsafe fn fetch<W: AtomicInt>(call: &str, src: *const W, pe: c_int) -> W {
    on_word(
        call,
        src,
        pe,
        |m, at| m.atomic_load(at),
        |c, at| c.atomic_load(at),
    )
}

/// # Safety
/// `dest` symmetric.
pub(crate) unsafe fn set<W: AtomicInt>(call: &str, dest: *mut W, value: W, pe: c_int) {
    on_word(
        call,
        dest.cast_const(),
        pe,
        |m, at| Ok(m.atomic_store(at, value)?.then_some(())),
        |c, at| c.atomic_store(at, value),
    )
}

/// # Safety
/// `dest` symmetric.
pub(crate) unsafe fn compare_swap<W: AtomicInt>(
    call: &str,
    dest: *mut W,
    cond: W,
    value: W,
    pe: c_int,
) -> W {
    on_word(
        call,
        dest.cast_const(),
        pe,
        |m, at| m.atomic_compare_swap(at, cond, value),
        |c, at| c.atomic_compare_swap(at, cond, value),
    )
}

#[inline(always)]
fn rmw<W: AtomicInt>(call: &str, dest: *mut W, op: AtomicOp<W>, pe: c_int) -> W {
    on_word(
        call,
        dest.cast_const(),
        pe,
        |m, at| m.atomic_fetch(at, op),
        |c, at| c.atomic_fetch(at, op),
    )
}

/// # Safety
/// `dest` symmetric.
pub(crate) unsafe fn swap<W: AtomicInt>(call: &str, dest: *mut W, value: W, pe: c_int) -> W {
    rmw(call, dest, AtomicOp::Swap(value), pe)
}

/// # Safety
/// `dest` symmetric.
pub(crate) unsafe fn fetch_add<W: AtomicInt>(call: &str, dest: *mut W, value: W, pe: c_int) -> W {
    rmw(call, dest, AtomicOp::Add(value), pe)
}

/// # Safety
/// `dest` symmetric.
pub(crate) unsafe fn fetch_and<W: AtomicInt>(call: &str, dest: *mut W, value: W, pe: c_int) -> W {
    rmw(call, dest, AtomicOp::And(value), pe)
}

/// # Safety
/// `dest` symmetric.
pub(crate) unsafe fn fetch_or<W: AtomicInt>(call: &str, dest: *mut W, value: W, pe: c_int) -> W {
    rmw(call, dest, AtomicOp::Or(value), pe)
}

/// # Safety
/// `dest` symmetric.
pub(crate) unsafe fn fetch_xor<W: AtomicInt>(call: &str, dest: *mut W, value: W, pe: c_int) -> W {
    rmw(call, dest, AtomicOp::Xor(value), pe)
}

/// `shmem_swap` (deprecated generic swap on `long`).
///
/// # Safety
/// `target` symmetric.
#[export_name = "pshmem_swap"]
pub unsafe extern "C" fn shmem_swap(
    target: *mut libc::c_long,
    value: libc::c_long,
    pe: c_int,
) -> libc::c_long {
    rmw::<i64>("shmem_swap", target.cast(), AtomicOp::Swap(value), pe)
}
