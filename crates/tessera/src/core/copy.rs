//! The bulk copy behind every put and get between mapped memory: `memmove`, except where
//! the destination lies just past the source modulo 4 KiB on an AMD processor.
//!
//! glibc's `memcpy` and `memmove` copy with `rep movsb` from about 2 KiB up (to the L2
//! cache's size on AMD processors, 1 MiB on Zen 4), and on AMD Zen 3 and Zen 4 that
//! instruction slows down when the destination lies a few bytes to a few hundred bytes past
//! the source modulo 4 KiB: each load then seems to depend on a store just made. On a
//! Zen 4 host, 32 KiB to 768 KiB copies ran at 2-3 GB/s with the destination 1-8 bytes
//! past, 22-40 at 16, 48 and 72 bytes past and 40-49 at 200-255, against 49-58 elsewhere.
//! Whether a put meets it depends only on where the program's buffers lie. Copied from the
//! end towards the start, 128 bytes at a time in 32-byte vector registers, a load never
//! follows a store to the same place modulo 4 KiB, and the same copies ran at 49-57 GB/s
//! at every gap from 1 to 255 bytes (4 KiB: 77-79 against 4 at 1-8 bytes, 43 at 16; 1 MiB
//! and beyond, where glibc leaves `rep movsb`, level with `memmove`); so those copies go
//! backwards, and every other copy is one `memmove`. (Forward copies in 1 KiB pieces,
//! under glibc's `rep movsb` threshold, reached only 12-13 GB/s at 1-16 bytes and lost
//! 10-20 % at the other gaps on that host.) On a 16-core Intel Xeon (family 6 model 207) no
//! gap was slow: 32-256 KiB copies ran at 22-33 GB/s whole at gaps of 0-512 bytes; so the
//! backward copy is used on AMD processors with AVX2 only.
//!
//! This module must never be slower than `memmove` where it departs from it, and never
//! change what a copy writes: overlapping ranges are one `memmove` whatever their gap.

/// Copies shorter than this are one call whatever their gap (glibc copies them with
/// vector registers).
const BACKWARD_FROM: usize = 2048;

/// Copies of this many bytes and more are one call whatever their gap: glibc's `rep movsb`
/// stops at the L2 cache's size on AMD processors (1 MiB on Zen 4).
const BACKWARD_BELOW: usize = 1 << 20;

/// Gaps (destination minus source, modulo 4 KiB) from 1 to this many bytes go backwards:
/// on the Zen 4 host a 32 KiB copy ran at 40-49 GB/s whole at 200-255 bytes past and
/// 43-57 backwards, at 256 and beyond the same either way.
const SLOW_GAP: usize = 255;

/// Bytes per step of the backward copy: four 32-byte registers.
const STEP: usize = 128;

/// Whether a copy of `len` bytes from `src` to `dst` goes backwards.
#[inline(always)]
fn backwards(src: usize, dst: usize, len: usize) -> bool {
    let gap = dst.wrapping_sub(src) % 4096;
    (BACKWARD_FROM..BACKWARD_BELOW).contains(&len)
        && (1..=SLOW_GAP).contains(&gap)
        && (dst >= src + len || src >= dst + len)
}

/// Whether this processor's `rep movsb` slows down at short gaps and it can copy with
/// 32-byte registers: AMD's (measured on Zen 3 and Zen 4) with AVX2. Read once.
pub(crate) fn short_gaps_are_slow() -> bool {
    static SLOW: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *SLOW.get_or_init(|| vendor().as_deref() == Some("AuthenticAMD") && has_avx2())
}

/// Whether the processor has AVX2 (and the kernel saves its registers).
fn has_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
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

/// The processor's family and model from `cpuid` leaf 1, as the kernel reports them in
/// `/proc/cpuinfo` (`cpu family`, `model`): the extended fields added where the base
/// family is 15 (AMD Zen 3 and Zen 4 are family 25).
pub(crate) fn family_and_model() -> Option<(u32, u32)> {
    #[cfg(target_arch = "x86_64")]
    {
        let eax = std::arch::x86_64::__cpuid(1).eax;
        let base_family = (eax >> 8) & 0xF;
        let base_model = (eax >> 4) & 0xF;
        let (family, model) = match base_family {
            0xF => (
                base_family + ((eax >> 20) & 0xFF),
                ((eax >> 16) & 0xF) << 4 | base_model,
            ),
            6 => (6, ((eax >> 16) & 0xF) << 4 | base_model),
            _ => (base_family, base_model),
        };
        Some((family, model))
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
    if backwards(src as usize, dst as usize, len) && short_gaps_are_slow() {
        // SAFETY: as the caller guarantees; the ranges do not overlap (checked), and
        // short_gaps_are_slow checked that the processor has AVX2.
        unsafe { copy_backwards(src, dst, len) };
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

/// `dst.copy_from_slice(src)` for a short copy (a collective's few bytes, a message's
/// inline data) without a call: up to 64 bytes as two overlapping moves of the largest
/// power of two that fits, which compile to a pair of loads and stores (a call of
/// `memmove` for 8 bytes costs about a dozen instructions and a jump); longer ones as
/// [`copy_slice`].
///
/// ```text
/// 13 bytes: [0, 8) and [5, 13), each one 8-byte load and store
/// ```
///
/// # Panics
/// If the lengths differ, as `copy_from_slice` does.
#[inline(always)]
pub(crate) fn copy_short(dst: &mut [u8], src: &[u8]) {
    assert_eq!(
        dst.len(),
        src.len(),
        "a copy between slices of equal length"
    );
    let len = src.len();
    // The same slice, with its length now known to the compiler as `len`.
    let dst = &mut dst[..len];
    // The first `W` bytes and the last `W` (`W <= len < 2W`): every byte at least once.
    macro_rules! overlapping {
        ($w:literal) => {{
            let (head, tail): ([u8; $w], [u8; $w]) = (
                src[..$w].try_into().expect("len >= W"),
                src[len - $w..].try_into().expect("len >= W"),
            );
            dst[..$w].copy_from_slice(&head);
            dst[len - $w..].copy_from_slice(&tail);
        }};
    }
    match len {
        0 => {}
        1 => dst[0] = src[0],
        2..=3 => overlapping!(2),
        4..=7 => overlapping!(4),
        8..=15 => overlapping!(8),
        16..=31 => overlapping!(16),
        32..=64 => overlapping!(32),
        _ => copy_slice(dst, src),
    }
}

/// The backward copy, out of line: only the copies that need it pay for the loop.
///
/// # Safety
/// As [`copy_bytes`], with ranges that do not overlap, on a processor with AVX2.
#[cfg(target_arch = "x86_64")]
#[cold]
#[inline(never)]
#[target_feature(enable = "avx2")]
unsafe fn copy_backwards(src: *const u8, dst: *mut u8, len: usize) {
    use std::arch::x86_64::{__m256i, _mm256_loadu_si256, _mm256_storeu_si256};
    let mut at = len;
    while at >= STEP {
        at -= STEP;
        // SAFETY: [at, at + STEP) lies inside both ranges, which do not overlap; the
        // unaligned forms take any address; the caller checked AVX2.
        unsafe {
            let from = src.add(at).cast::<__m256i>();
            let to = dst.add(at).cast::<__m256i>();
            let (a, b) = (_mm256_loadu_si256(from), _mm256_loadu_si256(from.add(1)));
            let (c, d) = (
                _mm256_loadu_si256(from.add(2)),
                _mm256_loadu_si256(from.add(3)),
            );
            _mm256_storeu_si256(to, a);
            _mm256_storeu_si256(to.add(1), b);
            _mm256_storeu_si256(to.add(2), c);
            _mm256_storeu_si256(to.add(3), d);
        }
    }
    // SAFETY: the first `at` (< STEP) bytes of both ranges, which do not overlap.
    unsafe { std::ptr::copy_nonoverlapping(src, dst, at) };
}

/// Elsewhere [`short_gaps_are_slow`] is false and this is never called.
///
/// # Safety
/// As [`copy_bytes`].
#[cfg(not(target_arch = "x86_64"))]
unsafe fn copy_backwards(src: *const u8, dst: *mut u8, len: usize) {
    // SAFETY: as the caller guarantees.
    unsafe { std::ptr::copy(src, dst, len) };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every gap that goes backwards, and some that do not, at lengths around the step
    /// and the bounds: the destination holds the source byte for byte, and nothing around
    /// it moves.
    #[test]
    fn every_gap_copies_byte_for_byte() {
        let src: Vec<u8> = (0..(1u32 << 20) + 4096)
            .map(|i| (i * 7 + i / 251) as u8)
            .collect();
        for gap in [0, 1, 8, 16, 63, 64, 200, 255, 256, 1000, 4095] {
            for len in [
                0,
                1,
                2047,
                2048,
                2048 + 127,
                3000,
                4096,
                32_768 + 5,
                (1 << 20) - 1,
                1 << 20,
            ] {
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
                let back = backwards(
                    src[3..].as_ptr() as usize,
                    dst[at + 3..].as_ptr() as usize,
                    len,
                );
                assert_eq!(
                    back,
                    (BACKWARD_FROM..BACKWARD_BELOW).contains(&len) && (1..=SLOW_GAP).contains(&gap)
                );
            }
        }
    }

    /// A short copy of every length up to past its last case, at every offset in a line:
    /// the destination holds the source byte for byte, and nothing around it moves.
    #[test]
    fn short_copies_copy_every_byte_and_nothing_else() {
        let src: Vec<u8> = (0..200u32).map(|i| (i * 37 + 11) as u8).collect();
        for len in 0..=80 {
            for at in 0..8 {
                let mut dst = [0xEEu8; 100];
                copy_short(&mut dst[at..at + len], &src[3..3 + len]);
                assert_eq!(&dst[at..at + len], &src[3..3 + len], "{len} B at {at}");
                assert!(dst[..at].iter().all(|&b| b == 0xEE), "{len} B at {at}");
                assert!(
                    dst[at + len..].iter().all(|&b| b == 0xEE),
                    "{len} B at {at}"
                );
            }
        }
    }

    /// A short copy into a longer slice panics, as `copy_from_slice` does, rather than
    /// filling a prefix.
    #[test]
    #[should_panic(expected = "equal length")]
    fn a_short_copy_into_a_longer_slice_panics() {
        let mut dst = [0u8; 9];
        copy_short(&mut dst, &[1u8; 8]);
    }

    /// The vendor, family and model read from `cpuid` are the ones the kernel reports.
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
        let field = |name: &str| {
            cpuinfo
                .lines()
                .find(|line| line.split(':').next().map(str::trim) == Some(name))
                .and_then(|line| line.split(':').nth(1))
                .and_then(|v| v.trim().parse::<u32>().ok())
        };
        if let (Some(family), Some(model)) = (field("cpu family"), field("model")) {
            assert_eq!(family_and_model(), Some((family, model)));
        }
        assert_eq!(
            short_gaps_are_slow(),
            reported.as_deref() == Some("AuthenticAMD") && has_avx2()
        );
    }

    /// The backward copy itself, wherever the processor has AVX2 (through `copy` it runs
    /// on AMD processors only): every length around its step, at several offsets of
    /// source and destination, byte for byte, nothing around the destination touched.
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn the_backward_copy_copies_byte_for_byte() {
        if !has_avx2() {
            return;
        }
        let src: Vec<u8> = (0..5000u32).map(|i| (i * 13 + i / 97) as u8).collect();
        for len in (0..=3 * STEP + 1).chain([2048, 2048 + 127, 4096 + 5]) {
            for (from, to) in [(0, 0), (1, 8), (7, 200), (64, 3)] {
                let mut dst = vec![0xEEu8; len + 256];
                // SAFETY: both ranges lie inside their vectors, which do not overlap;
                // has_avx2 checked the processor.
                unsafe { copy_backwards(src[from..].as_ptr(), dst[to..].as_mut_ptr(), len) };
                assert_eq!(&dst[to..to + len], &src[from..from + len], "{len} B");
                assert!(dst[..to].iter().all(|&b| b == 0xEE), "{len} B");
                assert!(dst[to + len..].iter().all(|&b| b == 0xEE), "{len} B");
            }
        }
    }

    #[test]
    fn slices_copy_like_copy_from_slice() {
        let src: Vec<u64> = (0..5000).collect();
        let mut dst = vec![0u64; 5001];
        copy_slice(&mut dst[1..], &src);
        assert_eq!(&dst[1..], &src[..]);
        assert_eq!(dst[0], 0);
    }

    /// Overlapping ranges a few bytes apart, the gap that goes backwards when they do not
    /// overlap, copy as `memmove` does (one call), both ways.
    #[test]
    fn overlapping_ranges_copy_as_memmove() {
        for shift in [8usize, 100] {
            let original: Vec<u8> = (0..10_000u32).map(|i| (i % 253) as u8).collect();
            let len = 8000;
            let mut up = original.clone();
            let p = up.as_mut_ptr();
            assert!(!backwards(p as usize, p as usize + shift, len));
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
