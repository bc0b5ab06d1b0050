//! Point-to-point synchronisation: `wait_until`, `test` and the deprecated `wait`, on a
//! symmetric variable of this PE (their exported functions are generated; they call
//! these). The runtime's `wait_value` polls, honours the watchdog, and shows the wait on
//! the job's board.
//!
//! This module must never wait on another PE's memory: the variable is the caller's own.

use libc::{c_int, c_long};
use tessera::{Compare, WaitWord};

use crate::{check, fatal, state};

/// `SHMEM_CMP_NE`, for the deprecated `wait` (wait while equal).
pub(crate) const CMP_NE: c_int = 1;

fn compare(call: &str, cmp: c_int) -> Compare {
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

/// # Safety
/// `ivar` is a symmetric variable of this PE.
pub(crate) unsafe fn wait_until<W: WaitWord>(call: &str, ivar: *mut W, cmp: c_int, value: W) {
    let s = state(call);
    let ctx = s.session.context();
    let at = s.remote(call, ivar.cast_const(), 1, ctx.rank() as c_int);
    check(call, ctx.wait_value(at, compare(call, cmp), value));
}

/// # Safety
/// `ivar` is a symmetric variable of this PE.
pub(crate) unsafe fn test<W: WaitWord>(call: &str, ivar: *mut W, cmp: c_int, value: W) -> c_int {
    let s = state(call);
    let ctx = s.session.context();
    let at = s.remote(call, ivar.cast_const(), 1, ctx.rank() as c_int);
    check(call, ctx.test_value(at, compare(call, cmp), value)) as c_int
}

/// `shmem_wait` (deprecated): wait while `*ivar == cmp_value`.
///
/// # Safety
/// `ivar` is a symmetric `long` of this PE.
#[no_mangle]
pub unsafe extern "C" fn shmem_wait(ivar: *mut c_long, cmp_value: c_long) {
    // SAFETY: as the caller guarantees.
    unsafe { wait_until::<i64>("shmem_wait", ivar.cast(), CMP_NE, cmp_value) }
}

/// `shmem_wait_until` (deprecated generic form on `long`).
///
/// # Safety
/// `ivar` is a symmetric `long` of this PE.
#[no_mangle]
pub unsafe extern "C" fn shmem_wait_until(ivar: *mut c_long, cmp: c_int, cmp_value: c_long) {
    // SAFETY: as the caller guarantees.
    unsafe { wait_until::<i64>("shmem_wait_until", ivar.cast(), cmp, cmp_value) }
}
