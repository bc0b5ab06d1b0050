//! The symmetric heap: the segment's collective arena. Every allocation routine is
//! collective (every PE calls it with the same arguments, in the same order) and ends with
//! a barrier, as the specification says; a mismatch is caught by the runtime's barrier
//! fingerprint.
//!
//! This module must never hand out memory outside the segment.

use libc::{c_long, c_void};

use tessera::conduit::shm::SEGMENT_ADDRESS_ALIGN;

use crate::{check, fatal, state};

/// Allocate `size` bytes aligned to `align` (a power of two) on every PE; null for size 0
/// and, as the specification says, for a request the symmetric heap cannot meet (PE 0
/// says once which variable raises the heap). Every PE ends with the barrier either way:
/// the heaps are alike, so a request fails on every PE or on none.
fn allocate(call: &str, size: usize, align: usize) -> *mut c_void {
    let s = state(call);
    let ctx = s.session.context();
    if size == 0 {
        check(call, ctx.barrier());
        return std::ptr::null_mut();
    }
    if !align.is_power_of_two() {
        fatal(call, format!("alignment {align} is not a power of two"));
    }
    if align > SEGMENT_ADDRESS_ALIGN {
        return refuse(
            call,
            format!("alignment {align} is more than the {SEGMENT_ADDRESS_ALIGN} bytes the symmetric heap's addresses are aligned to"),
        );
    }
    let Some(padded) = size.checked_add(align - 1) else {
        return refuse(call, format!("{size} bytes is more than the address space"));
    };
    let block = match ctx.alloc_collective::<u8>(padded) {
        Ok(p) => p,
        Err(tessera::Error::Core(tessera::CoreError::SegmentExhausted { .. })) => {
            return refuse(
                call,
                format!(
                "{size} bytes aligned to {align} do not fit in what is left of the symmetric heap"
            ),
            )
        }
        Err(e) => fatal(call, e),
    };
    let aligned = block.offset().next_multiple_of(align as u64);
    let addr = s.sym.local_address(aligned);
    s.blocks.borrow_mut().insert(addr as usize, (block, size));
    check(call, ctx.barrier());
    addr
}

/// A request the symmetric heap cannot meet: the barrier every PE takes, a null pointer,
/// and (on PE 0, once per program) what raises the heap.
fn refuse(call: &str, why: impl std::fmt::Display) -> *mut c_void {
    use std::sync::atomic::{AtomicBool, Ordering};
    static SAID: AtomicBool = AtomicBool::new(false);
    let s = state(call);
    let ctx = s.session.context();
    if ctx.rank() == 0 && !SAID.swap(true, Ordering::Relaxed) {
        tessera::job::write_stderr(&format!(
            "tessera-shmem: {call}: {why}; returning NULL (the symmetric heap is {} bytes per PE: raise SHMEM_SYMMETRIC_SIZE, e.g. SHMEM_SYMMETRIC_SIZE=4G)\n",
            ctx.segment_len()
        ));
    }
    check(call, ctx.barrier());
    std::ptr::null_mut()
}

fn release(call: &str, ptr: *mut c_void) {
    let s = state(call);
    let ctx = s.session.context();
    if !ptr.is_null() {
        let Some((block, _)) = s.blocks.borrow_mut().remove(&(ptr as usize)) else {
            fatal(
                call,
                format!("{ptr:p} was not returned by shmem_malloc (or was freed already)"),
            );
        };
        check(call, ctx.free_collective(block));
    }
    check(call, ctx.barrier());
}

fn reallocate(call: &str, ptr: *mut c_void, size: usize) -> *mut c_void {
    let s = state(call);
    if ptr.is_null() {
        return allocate(call, size, 16);
    }
    let Some(&(_, old)) = s.blocks.borrow().get(&(ptr as usize)) else {
        fatal(call, format!("{ptr:p} was not returned by shmem_malloc"));
    };
    let new = allocate(call, size, 16);
    if new.is_null() && size > 0 {
        // The heap could not meet it: the old block stays, as the specification says.
        return new;
    }
    if !new.is_null() {
        // SAFETY: both blocks are this PE's, in its segment, at least min(old, size) long,
        // and distinct (the old one is still allocated).
        unsafe { std::ptr::copy_nonoverlapping(ptr as *const u8, new as *mut u8, old.min(size)) };
    }
    release(call, ptr);
    new
}

/// `shmem_malloc`: `size` bytes on every PE (collective).
///
/// # Safety
/// None beyond C's.
#[export_name = "pshmem_malloc"]
pub unsafe extern "C" fn shmem_malloc(size: usize) -> *mut c_void {
    allocate("shmem_malloc", size, 16)
}

/// `shmem_malloc_with_hints`: as `shmem_malloc` (hints are accepted and need nothing here).
///
/// # Safety
/// None beyond C's.
#[export_name = "pshmem_malloc_with_hints"]
pub unsafe extern "C" fn shmem_malloc_with_hints(size: usize, _hints: c_long) -> *mut c_void {
    allocate("shmem_malloc_with_hints", size, 16)
}

/// `shmem_calloc`: `count × size` zeroed bytes on every PE.
///
/// # Safety
/// None beyond C's.
#[export_name = "pshmem_calloc"]
pub unsafe extern "C" fn shmem_calloc(count: usize, size: usize) -> *mut c_void {
    const CALL: &str = "shmem_calloc";
    let Some(bytes) = count.checked_mul(size) else {
        return refuse(CALL, format!("{count} × {size} bytes overflows"));
    };
    let p = allocate(CALL, bytes, 16);
    if !p.is_null() {
        // SAFETY: p is this PE's fresh block of `bytes` bytes.
        unsafe { std::ptr::write_bytes(p as *mut u8, 0, bytes) };
        check(CALL, state(CALL).session.context().barrier());
    }
    p
}

/// `shmem_align`: `size` bytes aligned to `alignment` on every PE.
///
/// # Safety
/// None beyond C's.
#[export_name = "pshmem_align"]
pub unsafe extern "C" fn shmem_align(alignment: usize, size: usize) -> *mut c_void {
    allocate("shmem_align", size, alignment.max(16))
}

/// `shmem_realloc`: a block of `size` bytes holding the old block's contents.
///
/// # Safety
/// `ptr` is null or from `shmem_malloc`.
#[export_name = "pshmem_realloc"]
pub unsafe extern "C" fn shmem_realloc(ptr: *mut c_void, size: usize) -> *mut c_void {
    reallocate("shmem_realloc", ptr, size)
}

/// `shmem_free` (collective).
///
/// # Safety
/// `ptr` is null or from `shmem_malloc`.
#[export_name = "pshmem_free"]
pub unsafe extern "C" fn shmem_free(ptr: *mut c_void) {
    release("shmem_free", ptr);
}

/// `shmalloc` (deprecated name of `shmem_malloc`).
///
/// # Safety
/// None beyond C's.
#[export_name = "pshmalloc"]
pub unsafe extern "C" fn shmalloc(size: usize) -> *mut c_void {
    allocate("shmalloc", size, 16)
}

/// `shfree` (deprecated name of `shmem_free`).
///
/// # Safety
/// `ptr` is null or from `shmalloc`.
#[export_name = "pshfree"]
pub unsafe extern "C" fn shfree(ptr: *mut c_void) {
    release("shfree", ptr);
}

/// `shrealloc` (deprecated name of `shmem_realloc`).
///
/// # Safety
/// `ptr` is null or from `shmalloc`.
#[export_name = "pshrealloc"]
pub unsafe extern "C" fn shrealloc(ptr: *mut c_void, size: usize) -> *mut c_void {
    reallocate("shrealloc", ptr, size)
}

/// `shmemalign` (deprecated name of `shmem_align`).
///
/// # Safety
/// None beyond C's.
#[export_name = "pshmemalign"]
pub unsafe extern "C" fn shmemalign(alignment: usize, size: usize) -> *mut c_void {
    allocate("shmemalign", size, alignment.max(16))
}
