//! AVX-512 form of CG's sparse product, `Matrix::multiply`.
//!
//! The portable product loads each entry's column index, then `x` at that index, then the
//! entry's value, one at a time. On this machine's cores that runs at about a third of
//! the rate the matrix streams from memory: the stream loads wait behind the scattered
//! loads of `x`, and the out-of-order window is too short to keep enough of the stream in
//! flight. Here four entries go at once: their indices are widened to 32 bits in one
//! instruction, `x` is gathered at them in one more, and the values are loaded as a
//! vector. Fewer instructions per entry leave room for more stream loads in flight, and a
//! software prefetch runs a fixed distance ahead of both streams.
//!
//! The sums are taken in the portable form's order, lane for lane: lane `j` of the
//! accumulator is the portable form's `acc[j]`, it gets the products of entries
//! `j, j + 4, …` of the row in that order, a final part-quad adds its entries to lanes
//! `0, 1, 2` and the lanes are combined as `(acc[0] + acc[1]) + (acc[2] + acc[3])`. Results
//! are therefore equal bit for bit (a test compares them). This module must never be
//! called on a CPU without AVX-512F/VL/BW (the caller checks [`available`]) nor change
//! the order of an operation.

use super::{ColumnIndex, Matrix};
use std::arch::x86_64::{
    __m128i, __m256d, _mm256_castpd256_pd128, _mm256_extractf128_pd, _mm256_hadd_pd,
    _mm256_mask_add_pd, _mm256_maskz_loadu_pd, _mm256_mmask_i32gather_pd, _mm256_mul_pd,
    _mm256_setzero_pd, _mm_add_sd, _mm_cvtepu16_epi32, _mm_cvtsd_f64, _mm_maskz_loadu_epi16,
    _mm_maskz_loadu_epi32, _mm_prefetch, _MM_HINT_T0,
};

/// Entries per vector.
const LANES: usize = 4;

/// How many entries ahead of the one being multiplied the streams are prefetched. Chosen
/// by measurement on this machine's class B block: 128 to 256 were level, shorter
/// distances and longer ones slower.
const PREFETCH_AHEAD: usize = 192;

/// Whether the chosen level is AVX-512, so this CPU runs [`multiply`].
pub(super) fn available() -> bool {
    crate::simd::level() == crate::simd::Level::Avx512
}

/// `out = m · x`, as `Matrix::multiply`, which has checked `x.len() >= m.ncols` and
/// `out.len()` and picked the index width: [`row`] on each part of each row.
#[target_feature(enable = "avx512f,avx512vl,avx512bw")]
pub(super) fn multiply<I: ColumnIndex>(m: &Matrix, colidx: &[I], x: &[f64], out: &mut [f64]) {
    assert!(x.len() >= m.ncols && out.len() == m.rows());
    m.each_row(colidx, x, out, |c, v, x| row(c, v, x));
}

/// The dot product of one part of a row (its entries in one stripe) with `x` from the
/// stripe's first column. Every index in `cols` is below
/// `x.len()` (the matrix's invariant, which [`multiply`] relies on).
#[inline]
#[target_feature(enable = "avx512f,avx512vl,avx512bw")]
fn row<I: ColumnIndex>(cols: &[I], vals: &[f64], x: &[f64]) -> f64 {
    let mut acc = _mm256_setzero_pd();
    let mut add_quad = |c: &[I], v: &[f64]| {
        let lanes = first_lanes(c.len());
        // SAFETY: the lanes enabled are those of `c`, each an index of the matrix, below
        // `x.len()` as `multiply` asserted.
        let gathered = unsafe { gather(x, widen(c), lanes) };
        let products = _mm256_mul_pd(load_values(v), gathered);
        acc = _mm256_mask_add_pd(acc, lanes, acc, products);
    };
    // Eight entries (a cache line of values) per step, then what is left by quads.
    let octets = cols
        .chunks_exact(2 * LANES)
        .zip(vals.chunks_exact(2 * LANES));
    for (k, (c, v)) in octets.enumerate() {
        let ahead = 2 * LANES * k + PREFETCH_AHEAD;
        prefetch(vals.as_ptr().wrapping_add(ahead));
        prefetch(cols.as_ptr().wrapping_add(ahead));
        add_quad(&c[..LANES], &v[..LANES]);
        add_quad(&c[LANES..], &v[LANES..]);
    }
    let rest = cols.len() / (2 * LANES) * (2 * LANES);
    for (c, v) in cols[rest..].chunks(LANES).zip(vals[rest..].chunks(LANES)) {
        add_quad(c, v);
    }
    // (acc0 + acc1, acc0 + acc1, acc2 + acc3, acc2 + acc3), then the low pair plus the high.
    let pairs = _mm256_hadd_pd(acc, acc);
    _mm_cvtsd_f64(_mm_add_sd(
        _mm256_castpd256_pd128(pairs),
        _mm256_extractf128_pd::<1>(pairs),
    ))
}

/// A mask of the first `n` (at most four) lanes.
#[inline]
fn first_lanes(n: usize) -> u8 {
    debug_assert!(n <= LANES);
    ((1u32 << n) - 1) as u8
}

/// Ask for the cache line at `at` to be brought towards the core.
#[inline]
#[target_feature(enable = "avx512f")]
fn prefetch<T>(at: *const T) {
    // A prefetch is a hint that never faults, so an address past the end of the arrays
    // (near the last rows) is fine.
    _mm_prefetch::<_MM_HINT_T0>(at.cast())
}

/// The (at most four) indices of `quad`, widened to 32-bit lanes; lanes past its end are 0.
#[inline]
#[target_feature(enable = "avx512f,avx512vl,avx512bw")]
fn widen<I: ColumnIndex>(quad: &[I]) -> __m128i {
    let lanes = first_lanes(quad.len());
    if size_of::<I>() == 2 {
        // SAFETY: `ColumnIndex` is implemented only for u16 and u32, so a two-byte one is
        // u16; the mask enables exactly the elements of `quad`, and masked-off lanes are
        // neither read nor able to fault.
        _mm_cvtepu16_epi32(unsafe { _mm_maskz_loadu_epi16(lanes, quad.as_ptr().cast()) })
    } else {
        // SAFETY: as above, a four-byte `ColumnIndex` is u32, and the mask enables exactly
        // the elements of `quad`.
        unsafe { _mm_maskz_loadu_epi32(lanes, quad.as_ptr().cast()) }
    }
}

/// The (at most four) values of `quad`; lanes past its end are 0.
#[inline]
#[target_feature(enable = "avx512f,avx512vl")]
fn load_values(quad: &[f64]) -> __m256d {
    // SAFETY: the mask enables exactly the elements of `quad`; masked-off lanes are neither
    // read nor able to fault.
    unsafe { _mm256_maskz_loadu_pd(first_lanes(quad.len()), quad.as_ptr()) }
}

/// `x` at the 32-bit indices in the enabled `lanes` of `at`; other lanes are 0.
///
/// # Safety
/// Every enabled lane of `at` is below `x.len()`.
#[inline]
#[target_feature(enable = "avx512f,avx512vl")]
unsafe fn gather(x: &[f64], at: __m128i, lanes: u8) -> __m256d {
    // SAFETY: the caller guarantees every enabled index is inside `x`; disabled lanes are
    // not read.
    unsafe { _mm256_mmask_i32gather_pd::<8>(_mm256_setzero_pd(), lanes, at, x.as_ptr()) }
}
