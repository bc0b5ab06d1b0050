//! Point-to-point synchronisation: `wait_until`, `test` and the deprecated `wait` on a
//! symmetric variable of this PE, and 1.5's waits and tests on many (`_all`, `_any`,
//! `_some`, their `_vector` forms); their exported functions are generated and call these. The runtime's `wait_value` polls, honours the watchdog, and shows the wait on
//! the job's board.
//!
//! This module must never wait on another PE's memory: the variable is the caller's own.

use std::sync::atomic::{AtomicUsize, Ordering};

use libc::{c_int, c_long};
use tessera::{Compare, GlobalPtr, MappedWords, Wait, WaitWord};

use crate::access::{self, try_state, Symmetric};
use crate::{check, fatal, state, symmetric};

/// `SHMEM_CMP_NE`, for the deprecated `wait` (wait while equal).
pub(crate) const CMP_NE: c_int = 1;

pub(crate) fn compare(call: &str, cmp: c_int) -> Compare {
    match cmp {
        0 => Compare::Eq,
        1 => Compare::Ne,
        2 => Compare::Gt,
        3 => Compare::Ge,
        4 => Compare::Lt,
        5 => Compare::Le,
        other => fatal(
            call,
            format!("comparison {other} is not one of SHMEM_CMP_EQ, _NE, _GT, _GE, _LT, _LE"),
        ),
    }
}

/// Wait until this PE's `*ivar cmp value`; the value that satisfied it.
///
/// # Safety
/// `ivar` is a symmetric variable of this PE.
pub(crate) unsafe fn wait_until<W: WaitWord>(call: &str, ivar: *mut W, cmp: c_int, value: W) -> W {
    let sym = symmetric(call);
    let cmp = compare(call, cmp);
    let at = sym.own(call, ivar.cast_const(), 1);
    // SAFETY: `own` checked that ivar is this PE's symmetric variable.
    if let Some(seen) = unsafe { quick_look(sym, ivar, |w| cmp.holds(w, value)) } {
        return seen;
    }
    let mut seen = value;
    wait_words(call, sym, at, 1, |word| {
        seen = word(0);
        cmp.holds(seen, value)
    });
    seen
}

/// Polls of a wait's word before the runtime's wait: about a microsecond of `pause`s,
/// longer than a store takes to cross between two cores (60–270 ns on the 2-core hosts).
const QUICK_SPINS: u32 = 32;

/// A wait's first look: poll the word itself for up to [`QUICK_SPINS`] (fewer where ranks
/// outnumber cores, as the runtime's policy says) and return the value that satisfied
/// `holds`, or `None` to wait in the runtime. A ping-pong's wait is satisfied here, where
/// the runtime's wait (the state, the board's bookkeeping, the mapped words' check) would
/// put some 350 instructions between the store arriving and the caller's next step.
/// Only where every PE's segment is mapped here, so that every put lands by a store
/// rather than through a message this PE must poll for; messages are not polled
/// meanwhile (the runtime's wait polls them every fourth spin), which delays them by at
/// most that microsecond once per wait. Counted waits (statistics on) and misaligned
/// words go to the runtime, which counts and reports them.
///
/// # Safety
/// `ivar` is a symmetric variable of this PE (checked by `Symmetric::own`).
#[inline(always)]
unsafe fn quick_look<W: WaitWord>(
    sym: &Symmetric,
    ivar: *mut W,
    holds: impl Fn(W) -> bool,
) -> Option<W> {
    if sym.counted || !sym.all_mapped || !ivar.is_aligned() {
        return None;
    }
    for _ in 0..QUICK_SPINS.min(sym.spins_per_yield) {
        // SAFETY: ivar is this PE's own aligned word, in memory this process maps; peers
        // store to it with release, so an acquire load sees what they put before.
        let seen = unsafe { W::load_acquire(ivar) };
        if holds(seen) {
            return Some(seen);
        }
        std::hint::spin_loop();
    }
    None
}

/// # Safety
/// `ivar` is a symmetric variable of this PE.
pub(crate) unsafe fn test<W: WaitWord>(call: &str, ivar: *mut W, cmp: c_int, value: W) -> c_int {
    let sym = symmetric(call);
    let cmp = compare(call, cmp);
    let at = sym.own(call, ivar.cast_const(), 1);
    test_words(call, sym, at, 1, |word| cmp.holds(word(0), value)) as c_int
}

/// Block until `done` holds over this PE's `n` words from `first`. At `MULTIPLE` the
/// words are polled without the library's lock, so that the PE's other threads keep
/// working (one of them may be the one to set them); the wait takes the lock when it is
/// free, once per yield, to make progress, show on the job's board and honour the
/// watchdog. Otherwise the runtime's own wait runs, under the lock.
fn wait_words<W: WaitWord>(
    call: &str,
    sym: &Symmetric,
    first: GlobalPtr<W>,
    n: usize,
    mut done: impl FnMut(&dyn Fn(usize) -> W) -> bool,
) {
    if !access::lock_free() {
        let s = state(call);
        check(call, s.session.context().wait_words(first, n, done));
        return;
    }
    let words = own_words(call, sym, first, n);
    let word = |i: usize| words.get(i);
    let describe = || format!("{n} words from offset {}", first.offset());
    let mut wait: Option<Wait> = None;
    let mut spins = 0u32;
    let outcome = loop {
        if done(&word) {
            break Ok(());
        }
        spins += 1;
        if spins < sym.spins_per_yield {
            std::hint::spin_loop();
            continue;
        }
        spins = 0;
        if let Some(s) = try_state() {
            let ctx = s.session.context();
            let step = match &mut wait {
                Some(w) => ctx.wait_step(w, &describe),
                None => ctx.wait_begin("words to change").map(|w| wait = Some(w)),
            };
            if let Err(e) = step {
                break Err(e);
            }
        }
        std::thread::yield_now();
    };
    if let Some(w) = wait {
        state(call).session.context().wait_end(w, &outcome);
    }
    check(call, outcome);
}

/// Evaluate `f` once over this PE's `n` words from `first`, making progress: at
/// `MULTIPLE` without the lock (progress only if the lock is free).
fn test_words<W: WaitWord, R>(
    call: &str,
    sym: &Symmetric,
    first: GlobalPtr<W>,
    n: usize,
    f: impl FnOnce(&dyn Fn(usize) -> W) -> R,
) -> R {
    if !access::lock_free() {
        let s = state(call);
        return check(call, s.session.context().test_words(first, n, f));
    }
    let words = own_words(call, sym, first, n);
    if let Some(s) = try_state() {
        check(call, s.session.context().poll());
    }
    f(&|i| words.get(i))
}

/// This PE's `n` words from `first`, checked once for the polls of a wait or test.
fn own_words<W: WaitWord>(
    call: &str,
    sym: &Symmetric,
    first: GlobalPtr<W>,
    n: usize,
) -> MappedWords<'static, W> {
    check(call, sym.mapped.words(first, n))
        .unwrap_or_else(|| fatal(call, "this PE's own segment is not mapped"))
}

/// `shmem_wait` (deprecated): wait while `*ivar == cmp_value`.
///
/// # Safety
/// `ivar` is a symmetric `long` of this PE.
#[export_name = "pshmem_wait"]
pub unsafe extern "C" fn shmem_wait(ivar: *mut c_long, cmp_value: c_long) {
    // SAFETY: as the caller guarantees.
    unsafe { wait_until::<i64>("shmem_wait", ivar.cast(), CMP_NE, cmp_value) };
}

/// `shmem_wait_until` (deprecated generic form on `long`).
///
/// # Safety
/// `ivar` is a symmetric `long` of this PE.
#[export_name = "pshmem_wait_until"]
pub unsafe extern "C" fn shmem_wait_until(ivar: *mut c_long, cmp: c_int, cmp_value: c_long) {
    // SAFETY: as the caller guarantees.
    unsafe { wait_until::<i64>("shmem_wait_until", ivar.cast(), cmp, cmp_value) };
}

/// Which of many variables a multi-valued wait or test asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Form {
    /// Every included variable.
    All,
    /// One included variable (its index).
    Any,
    /// At least one, and every one that holds (their indices).
    Some,
}

/// The values a multi-valued wait compares against: one for all, or one per variable.
#[derive(Clone, Copy)]
pub(crate) enum Values<W> {
    One(W),
    Each(*const W),
}

/// Where `Form::Any` starts looking, advanced after each success, so that a variable that
/// is always ready does not hide the others.
static ANY_START: AtomicUsize = AtomicUsize::new(0);

/// A multi-valued wait (`waits`) or test over the `n` symmetric variables at `ivars` on
/// this PE. `status[i] != 0` leaves variable `i` out (a null `status` leaves none out).
/// Returns: for `All`, 1 when every included variable holds (and at once when none is
/// included), else 0; for `Any`, the index of one that holds, or `SIZE_MAX` if none does
/// or none is included; for `Some`, how many hold, with their indices in `indices`.
///
/// # Safety
/// `ivars` symmetric for `n` elements of this PE; `status` null or valid for `n`; `indices`
/// valid for `n` when the form is `Some`; a vector of values valid for `n`.
#[allow(clippy::too_many_arguments)] // the specification's argument list
pub(crate) unsafe fn many<W: WaitWord>(
    call: &str,
    form: Form,
    waits: bool,
    ivars: *mut W,
    n: usize,
    indices: *mut usize,
    status: *const c_int,
    cmp: c_int,
    values: Values<W>,
) -> usize {
    let sym = symmetric(call);
    let cmp = compare(call, cmp);
    if n > 0 && form == Form::Some && indices.is_null() {
        fatal(call, "indices is null; pass an array of nelems size_t");
    }
    if let Values::Each(p) = values {
        if n > 0 && p.is_null() {
            fatal(call, "cmp_values is null; pass an array of nelems values");
        }
    }
    // SAFETY: the caller passes a status array of n (or null) and values as described.
    let included = |i: usize| status.is_null() || unsafe { *status.add(i) } == 0;
    let want = |i: usize| match values {
        Values::One(v) => v,
        // SAFETY: as above.
        Values::Each(p) => unsafe { *p.add(i) },
    };
    if !(0..n).any(included) {
        return match form {
            Form::All => 1,
            Form::Any => usize::MAX,
            Form::Some => 0,
        };
    }
    let first = sym.own(call, ivars.cast_const(), n);
    let start = ANY_START.load(Ordering::Relaxed) % n;
    let ready = |word: &dyn Fn(usize) -> W, i: usize| included(i) && cmp.holds(word(i), want(i));
    // What one look at the variables found, in the form the call returns; nothing is
    // allocated, since programs poll the tests.
    let mut outcome = 0;
    let mut evaluate = |word: &dyn Fn(usize) -> W| -> bool {
        outcome = match form {
            Form::All => (0..n).all(|i| !included(i) || ready(word, i)) as usize,
            Form::Any => (0..n)
                .map(|k| (start + k) % n)
                .find(|&i| ready(word, i))
                .unwrap_or(usize::MAX),
            Form::Some => {
                let mut count = 0;
                for i in (0..n).filter(|&i| ready(word, i)) {
                    // SAFETY: the caller passes indices valid for n, and count < n.
                    unsafe { *indices.add(count) = i };
                    count += 1;
                }
                count
            }
        };
        match form {
            Form::All => outcome == 1,
            Form::Any => outcome != usize::MAX,
            Form::Some => outcome > 0,
        }
    };
    if waits {
        wait_words(call, sym, first, n, &mut evaluate);
    } else {
        test_words(call, sym, first, n, &mut evaluate);
    }
    if form == Form::Any && outcome != usize::MAX {
        ANY_START.fetch_add(1, Ordering::Relaxed);
    }
    outcome
}
