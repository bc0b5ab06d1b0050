//! The bulk copy behind every put and get between mapped memory: `memmove`, except where
//! the destination lies just past the source modulo 4 KiB.
//!
//! glibc's `memcpy` and `memmove` copy with `rep movsb` from a few KiB up, and on AMD Zen 3
//! and Zen 4 that instruction slows down when the destination lies a few bytes to a few
//! hundred bytes past the source modulo 4 KiB: a 32 KiB copy on a Zen 4 host ran at
//! 2.1 GB/s with the destination 8 bytes past, 28-40 GB/s at 16-72 bytes past, against
//! 53-58 GB/s elsewhere. Whether a put meets it depends only on where the program's
//! buffers lie. Copied in pieces of [`PIECE`] bytes, below the sizes where glibc uses
//! `rep movsb`, the same copies ran at 50-52 GB/s, and a 32 KiB `shmem_putmem` to a peer
//! 4 or 8 bytes past its source went from 3.0-3.5 to 51 GB/s (16-200 bytes past: 32-47 to
//! 50-57); so those copies go in pieces, and every other copy is one `memmove` as before.
//! On a 16-core Intel Xeon (family 6 model 207) no gap was slow: 32-256 KiB copies ran at
//! 22-33 GB/s whole at gaps of 0-512 bytes, and pieces were no better (whole 1.13-1.25x
//! faster at gaps of 136 and 200 bytes, pieces 1.04-1.17x faster at 64, level at 8), so
//! pieces are used on AMD processors only.
//!
//! This module must never be slower than `memmove` by more than a call per piece, and never
//! change what a copy writes: overlapping ranges are one `memmove` whatever their gap.

/// Copies shorter than this are one call whatever their gap (glibc copies them with
/// vector registers).
const PIECED_FROM: usize = 2048;

/// Gaps (destination minus source, modulo 4 KiB) from 1 to this many bytes are copied in
/// pieces: on the Zen 4 host a 32 KiB copy ran at 40-49 GB/s whole at 72-200 bytes past
/// and 51-52 in pieces, at 256 and beyond the same either way.
const SLOW_GAP: usize = 255;

/// Bytes per piece: under glibc's smallest default `rep movsb` threshold (2 KiB).
const PIECE: usize = 1024;

/// Whether a copy of `len` bytes from `src` to `dst` goes in pieces.
#[inline(always)]
fn in_pieces(src: usize, dst: usize, len: usize) -> bool {
    let gap = dst.wrapping_sub(src) % 4096;
    len >= PIECED_FROM && (1..=SLOW_GAP).contains(&gap) && (dst >= src + len || src >= dst + len)
}

/// Whether this processor's `rep movsb` slows down at short gaps: AMD's (measured on Zen 3
/// and Zen 4). Read once from `cpuid`.
fn short_gaps_are_slow() -> bool {
    static AMD: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *AMD.get_or_init(|| vendor().as_deref() == Some("AuthenticAMD"))
}

/// The processor's vendor string from `cpuid` leaf 0 (`GenuineIntel`, `AuthenticAMD`, ...).
fn vendor() -> Option<String> {
    #[cfg(target_arch = "x86_64")]
    {
        let leaf = std::arch::x86_64::__cpuid(0);
        let bytes: Vec<u8> = [leaf.ebx, leaf.edx, leaf.ecx]
            .iter()
            .flat_map(|word| word.to_le_bytes())
            .collect();
        String::from_utf8(bytes).ok()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        None
    }
}

/// Copy `len` bytes from `src` to `dst`, which may overlap (as `memmove`).
///
/// # Safety
/// `src` valid for reads and `dst` for writes of `len` bytes.
#[inline(always)]
pub(crate) unsafe fn copy_bytes(src: *const u8, dst: *mut u8, len: usize) {
    if in_pieces(src as usize, dst as usize, len) && short_gaps_are_slow() {
        // SAFETY: as the caller guarantees; the ranges do not overlap (checked).
        unsafe { copy_in_pieces(src, dst, len) };
    } else {
        // SAFETY: as the caller guarantees.
        unsafe { std::ptr::copy(src, dst, len) };
    }
}

/// [`copy_bytes`] for `count` elements of `T`.
///
/// # Safety
/// `src` valid for reads and `dst` for writes of `count` elements.
#[inline(always)]
pub(crate) unsafe fn copy<T>(src: *const T, dst: *mut T, count: usize) {
    // SAFETY: as the caller guarantees, in bytes.
    unsafe { copy_bytes(src.cast(), dst.cast(), count * std::mem::size_of::<T>()) };
}

/// `dst.copy_from_slice(src)` through [`copy`]: for the library's own copies between
/// buffers (a collective's local steps), which meet the same slow gaps.
///
/// # Panics
/// If the lengths differ, as `copy_from_slice` does.
#[inline]
pub(crate) fn copy_slice<T: bytemuck::Pod>(dst: &mut [T], src: &[T]) {
    assert_eq!(
        dst.len(),
        src.len(),
        "a copy between slices of equal length"
    );
    // SAFETY: both slices are valid for their length, equal; a shared and a mutable
    // borrow never overlap.
    unsafe { copy(src.as_ptr(), dst.as_mut_ptr(), src.len()) };
}

/// The pieces, out of line: only the copies that need them pay for the loop.
///
/// # Safety
/// As [`copy_bytes`], with ranges that do not overlap.
#[cold]
#[inline(never)]
unsafe fn copy_in_pieces(src: *const u8, dst: *mut u8, len: usize) {
    let mut done = 0;
    while done < len {
        let n = PIECE.min(len - done);
        // SAFETY: [done, done + n) lies inside both ranges, which do not overlap.
        unsafe { std::ptr::copy_nonoverlapping(src.add(done), dst.add(done), n) };
        done += n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every gap that goes in pieces, and some that do not, at lengths around the piece
    /// size: the destination holds the source byte for byte, and nothing around it moves.
    #[test]
    fn every_gap_copies_byte_for_byte() {
        let src: Vec<u8> = (0..40_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
        for gap in [0, 1, 8, 16, 63, 64, 200, 255, 256, 1000, 4095] {
            for len in [0, 1, 2047, 2048, 3000, 4096, 32_768 + 5] {
                let mut dst = vec![0xEEu8; len + 8192];
                // The destination's offset from the source modulo 4 KiB is `gap`.
                let base = (src.as_ptr() as usize).wrapping_sub(dst.as_ptr() as usize) % 4096;
                let at = (base + gap) % 4096;
                // SAFETY: both ranges lie inside their vectors.
                unsafe { copy(src.as_ptr().add(3), dst.as_mut_ptr().add(at + 3), len) };
                assert_eq!(
                    &dst[at + 3..at + 3 + len],
                    &src[3..3 + len],
                    "gap {gap}, {len} B"
                );
                assert!(dst[..at + 3].iter().all(|&b| b == 0xEE));
                assert!(dst[at + 3 + len..].iter().all(|&b| b == 0xEE));
                let pieces = in_pieces(
                    src[3..].as_ptr() as usize,
                    dst[at + 3..].as_ptr() as usize,
                    len,
                );
                assert_eq!(pieces, len >= PIECED_FROM && (1..=SLOW_GAP).contains(&gap));
            }
        }
    }

    /// The vendor read from `cpuid` is the one the kernel reports.
    #[test]
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    fn the_vendor_is_the_kernels() {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").expect("/proc/cpuinfo");
        let reported = cpuinfo
            .lines()
            .find_map(|line| line.strip_prefix("vendor_id"))
            .and_then(|rest| rest.split(':').nth(1))
            .map(|v| v.trim().to_string());
        assert_eq!(vendor(), reported);
        assert_eq!(
            short_gaps_are_slow(),
            reported.as_deref() == Some("AuthenticAMD")
        );
    }

    #[test]
    fn slices_copy_like_copy_from_slice() {
        let src: Vec<u64> = (0..5000).collect();
        let mut dst = vec![0u64; 5001];
        copy_slice(&mut dst[1..], &src);
        assert_eq!(&dst[1..], &src[..]);
        assert_eq!(dst[0], 0);
    }

    /// Overlapping ranges a few bytes apart, the gap that goes in pieces when they do not
    /// overlap, copy as `memmove` does (one call), both ways.
    #[test]
    fn overlapping_ranges_copy_as_memmove() {
        for shift in [8usize, 100] {
            let original: Vec<u8> = (0..10_000u32).map(|i| (i % 253) as u8).collect();
            let len = 8000;
            let mut up = original.clone();
            let p = up.as_mut_ptr();
            assert!(!in_pieces(p as usize, p as usize + shift, len));
            // SAFETY: both ranges lie inside the vector.
            unsafe { copy_bytes(p, p.add(shift), len) };
            assert_eq!(&up[shift..shift + len], &original[..len]);
            let mut down = original.clone();
            let p = down.as_mut_ptr();
            // SAFETY: both ranges lie inside the vector.
            unsafe { copy_bytes(p.add(shift), p, len) };
            assert_eq!(&down[..len], &original[shift..shift + len]);
        }
    }
}
