//! Remote memory access: the typed, sized and untyped put and get families (their
//! exported functions are generated; they call these).
//!
//! Puts are complete at the target when they return on shared memory, and ordered with
//! `shmem_quiet`/`shmem_fence` (the runtime's `sync_nbi`) on other conduits; the `_nbi`
//! forms may complete at once, as the specification allows.
//!
//! Memory mapped in this process is reached through the runtime's `MappedSegments`,
//! without the library's lock (so from several threads at once at `MULTIPLE`); any other
//! through the context.
//!
//! This module must never read or write a peer's memory except through the runtime.

use bytemuck::Pod;
use libc::c_int;

use tessera::{Blocking, GlobalPtr, Signal, SignalOp};

use crate::access::Symmetric;
use crate::{check, fatal, state, symmetric};

/// A slice of `n` elements at `p`, or the end of the job naming `call` if `p` is null.
///
/// # Safety
/// `p` must be valid for `n` elements.
unsafe fn local<'a, T>(call: &str, p: *const T, n: usize) -> &'a [T] {
    if n == 0 {
        return &[];
    }
    if p.is_null() {
        fatal(call, "a null buffer");
    }
    // SAFETY: the caller guarantees p is valid for n elements.
    unsafe { std::slice::from_raw_parts(p, n) }
}

/// # Safety
/// `p` must be valid for `n` elements.
unsafe fn local_mut<'a, T>(call: &str, p: *mut T, n: usize) -> &'a mut [T] {
    if n == 0 {
        return &mut [];
    }
    if p.is_null() {
        fatal(call, "a null buffer");
    }
    // SAFETY: the caller guarantees p is valid for n elements.
    unsafe { std::slice::from_raw_parts_mut(p, n) }
}

/// Put `n` elements from `src` to symmetric `dest` on `pe`.
///
/// # Safety
/// `src` valid for `n` elements; `dest` symmetric.
pub(crate) unsafe fn put<T: Pod>(call: &str, dest: *mut T, src: *const T, n: usize, pe: c_int) {
    let sym = symmetric(call);
    let to = sym.remote(call, dest.cast_const(), n, pe);
    // SAFETY: the caller passes a source valid for n elements.
    let data = unsafe { local(call, src, n) };
    put_to(call, sym, to, data);
}

/// Put `data` at `to`: directly if it is mapped here (no lock), else through the context.
#[inline(always)]
fn put_to<T: Pod>(call: &str, sym: &Symmetric, to: GlobalPtr<T>, data: &[T]) {
    if sym.counted || !check(call, sym.mapped.put(to, data)) {
        check(call, state(call).session.context().put(to, data, Blocking));
    }
}

/// Get into `out` from `from`: directly if it is mapped here (no lock), else through the
/// context.
#[inline(always)]
fn get_from<T: Pod>(call: &str, sym: &Symmetric, from: GlobalPtr<T>, out: &mut [T]) {
    if sym.counted || !check(call, sym.mapped.get(from, out)) {
        check(call, state(call).session.context().get(from, out, Blocking));
    }
}

/// Get `n` elements from symmetric `src` on `pe` into `dest`.
///
/// # Safety
/// `dest` valid for `n` elements; `src` symmetric.
pub(crate) unsafe fn get<T: Pod>(call: &str, dest: *mut T, src: *const T, n: usize, pe: c_int) {
    let sym = symmetric(call);
    let from = sym.remote(call, src, n, pe);
    // SAFETY: the caller passes a destination valid for n elements.
    let out = unsafe { local_mut(call, dest, n) };
    get_from(call, sym, from, out);
}

/// Put one value.
///
/// # Safety
/// `dest` symmetric.
pub(crate) unsafe fn p<T: Pod>(call: &str, dest: *mut T, value: T, pe: c_int) {
    let sym = symmetric(call);
    let to = sym.remote(call, dest.cast_const(), 1, pe);
    put_to(call, sym, to, std::slice::from_ref(&value));
}

/// Get one value.
///
/// # Safety
/// `src` symmetric.
pub(crate) unsafe fn g<T: Pod>(call: &str, src: *const T, pe: c_int) -> T {
    let sym = symmetric(call);
    let from = sym.remote(call, src, 1, pe);
    let mut value = T::zeroed();
    get_from(call, sym, from, std::slice::from_mut(&mut value));
    value
}

/// The strides of a strided call as element counts, and the span in elements of `n`
/// elements `remote` apart on the symmetric side; `None` when there is nothing to move.
fn strides(
    call: &str,
    dst: isize,
    sst: isize,
    n: usize,
    remote: isize,
) -> Option<(usize, usize, usize)> {
    if n == 0 {
        return None;
    }
    if dst <= 0 || sst <= 0 {
        fatal(
            call,
            format!("strides must be positive (dst {dst}, sst {sst})"),
        );
    }
    Some((dst as usize, sst as usize, (n - 1) * remote as usize + 1))
}

/// Put `n` elements taken every `sst` from `src` to every `dst` of symmetric `dest`.
///
/// # Safety
/// `src` valid for its strided elements; `dest` symmetric for its strided elements.
pub(crate) unsafe fn iput<T: Pod>(
    call: &str,
    dest: *mut T,
    src: *const T,
    dst: isize,
    sst: isize,
    n: usize,
    pe: c_int,
) {
    let Some((dst, sst, span)) = strides(call, dst, sst, n, dst) else {
        return;
    };
    let sym = symmetric(call);
    let to = sym.remote(call, dest.cast_const(), span, pe);
    for i in 0..n {
        // SAFETY: the caller passes a source valid for its strided elements.
        let v = unsafe { *src.add(i * sst) };
        put_to(call, sym, to.add(i * dst), std::slice::from_ref(&v));
    }
}

/// Get `n` elements every `sst` of symmetric `src` into every `dst` of `dest`.
///
/// # Safety
/// `dest` valid for its strided elements; `src` symmetric for its strided elements.
pub(crate) unsafe fn iget<T: Pod>(
    call: &str,
    dest: *mut T,
    src: *const T,
    dst: isize,
    sst: isize,
    n: usize,
    pe: c_int,
) {
    let Some((dst, sst, span)) = strides(call, dst, sst, n, sst) else {
        return;
    };
    let sym = symmetric(call);
    let from = sym.remote(call, src, span, pe);
    for i in 0..n {
        let mut v = T::zeroed();
        get_from(call, sym, from.add(i * sst), std::slice::from_mut(&mut v));
        // SAFETY: the caller passes a destination valid for its strided elements.
        unsafe { *dest.add(i * dst) = v };
    }
}

/// The strides of a blocked strided call (OpenSHMEM 1.6 `ibput`/`ibget`) as element
/// counts, and the span in elements of `nblocks` blocks of `bsize` elements `remote` apart
/// on the symmetric side; `None` when there is nothing to move.
fn block_strides(
    call: &str,
    dst: isize,
    sst: isize,
    bsize: usize,
    nblocks: usize,
    remote: isize,
) -> Option<(usize, usize, usize)> {
    if bsize == 0 || nblocks == 0 {
        return None;
    }
    if dst <= 0 || sst <= 0 {
        fatal(
            call,
            format!("strides must be positive (dst {dst}, sst {sst})"),
        );
    }
    let span = (nblocks - 1)
        .checked_mul(remote as usize)
        .and_then(|s| s.checked_add(bsize))
        .unwrap_or_else(|| fatal(call, "the blocks span more than the address space"));
    Some((dst as usize, sst as usize, span))
}

/// Put `nblocks` blocks of `bsize` contiguous elements, block `i` from `src + i·sst` to
/// symmetric `dest + i·dst` on `pe` (OpenSHMEM 1.6 `shmem_ibput`): one contiguous put per
/// block.
///
/// # Safety
/// `src` valid for its blocks; `dest` symmetric for its blocks.
#[allow(clippy::too_many_arguments)] // the specification's argument list
pub(crate) unsafe fn ibput<T: Pod>(
    call: &str,
    dest: *mut T,
    src: *const T,
    dst: isize,
    sst: isize,
    bsize: usize,
    nblocks: usize,
    pe: c_int,
) {
    let Some((dst, sst, span)) = block_strides(call, dst, sst, bsize, nblocks, dst) else {
        return;
    };
    let sym = symmetric(call);
    let to = sym.remote(call, dest.cast_const(), span, pe);
    for i in 0..nblocks {
        // SAFETY: the caller passes a source valid for its blocks.
        let block = unsafe { std::slice::from_raw_parts(src.add(i * sst), bsize) };
        put_to(call, sym, to.add(i * dst), block);
    }
}

/// Get `nblocks` blocks of `bsize` contiguous elements, block `i` from symmetric
/// `src + i·sst` on `pe` to `dest + i·dst` (OpenSHMEM 1.6 `shmem_ibget`).
///
/// # Safety
/// `dest` valid for its blocks; `src` symmetric for its blocks.
#[allow(clippy::too_many_arguments)] // the specification's argument list
pub(crate) unsafe fn ibget<T: Pod>(
    call: &str,
    dest: *mut T,
    src: *const T,
    dst: isize,
    sst: isize,
    bsize: usize,
    nblocks: usize,
    pe: c_int,
) {
    let Some((dst, sst, span)) = block_strides(call, dst, sst, bsize, nblocks, sst) else {
        return;
    };
    let sym = symmetric(call);
    let from = sym.remote(call, src, span, pe);
    for i in 0..nblocks {
        // SAFETY: the caller passes a destination valid for its blocks.
        let block = unsafe { std::slice::from_raw_parts_mut(dest.add(i * dst), bsize) };
        get_from(call, sym, from.add(i * sst), block);
    }
}

/// Put `n` elements from `src` to symmetric `dest` on `pe`, then update the signal at
/// `sig_addr` on `pe` with `sig_op` (`SHMEM_SIGNAL_SET` or `_ADD`) and `signal`: one
/// signalling put, so a PE that sees the signal sees the data.
///
/// # Safety
/// `src` valid for `n` elements; `dest` and `sig_addr` symmetric.
#[allow(clippy::too_many_arguments)] // the specification's argument list
pub(crate) unsafe fn put_signal<T: Pod>(
    call: &str,
    dest: *mut T,
    src: *const T,
    n: usize,
    sig_addr: *mut u64,
    signal: u64,
    sig_op: c_int,
    pe: c_int,
) {
    let op = match sig_op {
        0 => SignalOp::Set(signal),
        1 => SignalOp::Add(signal),
        other => fatal(
            call,
            format!("sig_op {other} is neither SHMEM_SIGNAL_SET nor SHMEM_SIGNAL_ADD"),
        ),
    };
    let sym = symmetric(call);
    let to = sym.remote(call, dest.cast_const(), n, pe);
    // The runtime checks the word's alignment, as for any atomic.
    let flag = sym.remote(call, sig_addr.cast_const(), 1, pe);
    // SAFETY: the caller passes a source valid for n elements.
    let data = unsafe { local(call, src, n) };
    if sym.counted || !check(call, sym.mapped.put_with_signal(to, data, flag, op)) {
        check(
            call,
            state(call)
                .session
                .context()
                .put(to, data, Signal::Flag(flag, op)),
        );
    }
}

/// `shmem_signal_fetch`: the value of this PE's signal at `sig_addr` (an atomic fetch).
///
/// # Safety
/// `sig_addr` is a symmetric `uint64_t` of this PE.
#[export_name = "pshmem_signal_fetch"]
pub unsafe extern "C" fn shmem_signal_fetch(sig_addr: *const u64) -> u64 {
    const CALL: &str = "shmem_signal_fetch";
    // SAFETY: as the caller guarantees.
    unsafe { crate::amo::fetch::<u64>(CALL, sig_addr, symmetric(CALL).rank as c_int) }
}

/// `shmem_signal_wait_until`: wait until this PE's signal compares true; its value then.
///
/// # Safety
/// `sig_addr` is a symmetric `uint64_t` of this PE.
#[export_name = "pshmem_signal_wait_until"]
pub unsafe extern "C" fn shmem_signal_wait_until(
    sig_addr: *mut u64,
    cmp: c_int,
    cmp_value: u64,
) -> u64 {
    // SAFETY: as the caller guarantees.
    unsafe { crate::p2p::wait_until::<u64>("shmem_signal_wait_until", sig_addr, cmp, cmp_value) }
}

// `shmem_longdouble_p` and `shmem_longdouble_g` (and their context forms) take or return
// `long double` by value. On x86-64 (System V) an 80-bit `long double` argument is passed
// in memory, on the stack, and one is returned in the x87 register st(0); Rust has no
// type for either, so these four are written in assembly over the pointer forms.

/// `shmem_longdouble_p(dest, value, pe)`: a tail call of
/// `shmem_longdouble_put(dest, &value, 1, pe)`, with `&value` the argument's stack slot.
///
/// # Safety
/// As `shmem_longdouble_put` with one element.
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
#[export_name = "pshmem_longdouble_p"]
pub unsafe extern "C" fn shmem_longdouble_p() {
    // SAFETY: on entry rdi = dest, esi = pe and the value sits at [rsp + 8] (the caller's
    // argument area, alive for the whole call); the jump keeps that frame, so the put
    // reads the value in place and returns straight to our caller.
    core::arch::naked_asm!(
        "mov ecx, esi",
        "lea rsi, [rsp + 8]",
        "mov edx, 1",
        "jmp {put}",
        put = sym crate::typed::shmem_longdouble_put,
    )
}

/// `shmem_longdouble_g(source, pe)`: `shmem_longdouble_get` into a stack slot, then the
/// value loaded into st(0).
///
/// # Safety
/// As `shmem_longdouble_get` with one element.
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
#[export_name = "pshmem_longdouble_g"]
pub unsafe extern "C" fn shmem_longdouble_g() {
    // SAFETY: on entry rdi = source, esi = pe and rsp is 8 mod 16; 24 bytes of stack make
    // it 16-aligned for the call and hold the 16-byte value, which the get writes and
    // `fld` loads into st(0), where the ABI returns a long double.
    core::arch::naked_asm!(
        "sub rsp, 24",
        "mov ecx, esi",
        "mov rsi, rdi",
        "mov rdi, rsp",
        "mov edx, 1",
        "call {get}",
        "fld tbyte ptr [rsp]",
        "add rsp, 24",
        "ret",
        get = sym crate::typed::shmem_longdouble_get,
    )
}

/// `shmem_ctx_longdouble_p(ctx, dest, value, pe)`: a tail call of
/// `shmem_ctx_longdouble_put(ctx, dest, &value, 1, pe)`.
///
/// # Safety
/// As `shmem_ctx_longdouble_put` with one element.
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
#[export_name = "pshmem_ctx_longdouble_p"]
pub unsafe extern "C" fn shmem_ctx_longdouble_p() {
    // SAFETY: on entry rdi = ctx, rsi = dest, edx = pe and the value sits at [rsp + 8];
    // the put's arguments are rdi = ctx, rsi = dest, rdx = &value, rcx = 1, r8d = pe, and
    // the jump keeps the caller's frame (and the value in it) alive.
    core::arch::naked_asm!(
        "mov r8d, edx",
        "lea rdx, [rsp + 8]",
        "mov ecx, 1",
        "jmp {put}",
        put = sym crate::typed::shmem_ctx_longdouble_put,
    )
}

/// `shmem_ctx_longdouble_g(ctx, source, pe)`: `shmem_ctx_longdouble_get` into a stack
/// slot, then the value loaded into st(0).
///
/// # Safety
/// As `shmem_ctx_longdouble_get` with one element.
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
#[export_name = "pshmem_ctx_longdouble_g"]
pub unsafe extern "C" fn shmem_ctx_longdouble_g() {
    // SAFETY: on entry rdi = ctx, rsi = source, edx = pe and rsp is 8 mod 16; 24 bytes of
    // stack align it for the call and hold the value. The get's arguments are rdi = ctx,
    // rsi = dest (the slot), rdx = source, rcx = 1, r8d = pe.
    core::arch::naked_asm!(
        "sub rsp, 24",
        "mov r8d, edx",
        "mov rdx, rsi",
        "mov rsi, rsp",
        "mov ecx, 1",
        "call {get}",
        "fld tbyte ptr [rsp]",
        "add rsp, 24",
        "ret",
        get = sym crate::typed::shmem_ctx_longdouble_get,
    )
}
