//! Global and static variables as symmetric data objects (OpenSHMEM 1.5 §3.1: "Global and
//! static C and C++ variables").
//!
//! At `shmem_init` each PE finds its executable's writable data (the `PT_LOAD` segment with
//! write permission, from `dl_iterate_phdr`, less its read-only-after-relocation part),
//! copies it into a collective allocation of its own segment (page aligned; the same size
//! and offset on every PE, since every PE runs the same executable), and maps those same
//! pages of the segment's memory file over the data's addresses with `MAP_FIXED`. From then
//! on a global variable *is* part of the segment: its symmetric offset is its distance
//! from the start of the data plus the allocation's offset, whatever address the loader
//! gave the data in each process, and other PEs reach it as any segment memory, on this
//! host by load and store and across hosts through the conduit.
//!
//! Nothing between the copy and the mapping writes the data (this runs before any other
//! library state exists, on the thread that calls `shmem_init`).
//!
//! This module must never remap anything but the main executable's own writable data.

use libc::{c_int, c_void};
use tessera::Context;

/// Program-header flag: writable.
const PF_W: u32 = 2;

/// The main executable's writable data, as [first, end) addresses and the end of its
/// read-only-after-relocation prefix.
#[derive(Default)]
struct Data {
    start: usize,
    end: usize,
    relro_end: usize,
    found: bool,
}

unsafe extern "C" fn first_object(
    info: *mut libc::dl_phdr_info,
    _size: usize,
    data: *mut c_void,
) -> c_int {
    // SAFETY: dl_iterate_phdr passes a valid info for this call and our `Data`.
    let (info, out) = unsafe { (&*info, &mut *(data as *mut Data)) };
    // SAFETY: the program headers are `dlpi_phnum` entries at `dlpi_phdr`.
    let headers = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) };
    let base = info.dlpi_addr as usize;
    for h in headers {
        if h.p_type == libc::PT_LOAD && h.p_flags & PF_W != 0 && !out.found {
            out.start = base + h.p_vaddr as usize;
            out.end = out.start + h.p_memsz as usize;
            out.found = true;
        }
        if h.p_type == libc::PT_GNU_RELRO {
            out.relro_end = base + (h.p_vaddr + h.p_memsz) as usize;
        }
    }
    1 // the first object is the main executable: stop
}

/// Why the program's global data could not be made symmetric.
#[derive(Debug, thiserror::Error)]
pub(crate) enum GlobalsError {
    /// The segment has no room for a copy of the data.
    #[error("placing the program's {len} bytes of global data in the symmetric segment: {source}; raise SHMEM_SYMMETRIC_SIZE")]
    NoRoom {
        /// Bytes of writable global data.
        len: usize,
        /// The allocator's refusal.
        source: tessera::Error,
    },
    /// This PE's own segment is not mapped in its process.
    #[error("this PE's own segment is not mapped")]
    NotMapped,
    /// Mapping the segment's pages over the data failed.
    #[error("mapping the program's global data into the symmetric segment failed: {0}")]
    Map(std::io::Error),
    /// The segment's address could not be had.
    #[error(transparent)]
    Segment(#[from] tessera::Error),
}

/// Map this executable's writable data into the segment; `(first, end, offset)` of the
/// data that is now symmetric, `None` where the conduit's segments are not file mappings.
pub(crate) fn map_into_segment(ctx: &Context) -> Result<Option<(usize, usize, u64)>, GlobalsError> {
    let mut data = Data::default();
    // SAFETY: the callback only reads the program headers it is given and writes `data`.
    unsafe { libc::dl_iterate_phdr(Some(first_object), &mut data as *mut Data as *mut c_void) };
    if !data.found {
        return Ok(None);
    }
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
    let lo = (data.start / page * page).max(data.relro_end.next_multiple_of(page));
    let hi = data.end.next_multiple_of(page);
    if lo >= hi {
        return Ok(None);
    }
    let len = hi - lo;
    let Some((fd, file_offset)) = ctx.segment_file() else {
        return Ok(None);
    };
    let block = ctx
        .alloc_collective::<u8>(len + page)
        .map_err(|source| GlobalsError::NoRoom { len, source })?;
    let offset = block.offset().next_multiple_of(page as u64);
    let seg = ctx
        .local_ptr(block, len + page)?
        .ok_or(GlobalsError::NotMapped)? as usize;
    let target = seg + (offset - block.offset()) as usize;
    // SAFETY: [lo, hi) is this executable's writable data (mapped, readable, `len` bytes);
    // [target, target + len) lies inside the fresh allocation; they do not overlap.
    unsafe { std::ptr::copy_nonoverlapping(lo as *const u8, target as *mut u8, len) };
    // SAFETY: the same memory-file pages as the segment's allocation, mapped shared over
    // the executable's writable data, whose contents they now hold; the old private pages
    // are replaced in one call, and nothing writes the data in between.
    let mapped = unsafe {
        libc::mmap(
            lo as *mut c_void,
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_FIXED,
            std::os::fd::AsRawFd::as_raw_fd(&fd),
            (file_offset + offset) as libc::off_t,
        )
    };
    if mapped == libc::MAP_FAILED || mapped as usize != lo {
        return Err(GlobalsError::Map(std::io::Error::last_os_error()));
    }
    Ok(Some((lo, hi, offset)))
}
