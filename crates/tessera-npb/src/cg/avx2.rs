//! AVX2 form of CG's sparse product, `Matrix::multiply`: the AVX-512 form
//! ([`super::avx512`]) with the instructions AVX2 has.
//!
//! Four entries go at once, as there: their indices widened to 32 bits in one
//! instruction, `x` gathered at them in one more, the values loaded as a vector, and a
//! software prefetch a fixed distance ahead of both streams. AVX2 has no masked loads of
//! 16-bit indices, so a row's last part-quad (at most three entries) is added lane by
//! lane after the vector loop instead of with masks.
//!
//! The sums are taken in the portable form's order, lane for lane (lane `j` gets entries
//! `j, j + 4, …`, the part-quad goes to lanes `0, 1, 2`, and the lanes are combined as
//! `(acc[0] + acc[1]) + (acc[2] + acc[3])`), so results are equal bit for bit (a test
//! compares them). This module must never be called on a CPU without AVX2 (the caller
//! checks [`available`]) nor change the order of an operation.

use super::{ColumnIndex, Matrix};
use std::arch::x86_64::{
    __m128i, _mm256_add_pd, _mm256_i32gather_pd, _mm256_loadu_pd, _mm256_mul_pd, _mm256_setzero_pd,
    _mm256_storeu_pd, _mm_cvtepu16_epi32, _mm_loadl_epi64, _mm_loadu_si128, _mm_prefetch,
    _MM_HINT_T0,
};

/// Entries per vector.
const LANES: usize = 4;

/// How many entries ahead the streams are prefetched: the AVX-512 form's distance, which
/// measured level between 128 and 256 on class B.
const PREFETCH_AHEAD: usize = 192;

/// Whether the chosen level has AVX2, so this CPU runs [`multiply`].
pub(super) fn available() -> bool {
    crate::simd::level() >= crate::simd::Level::Avx2
}

/// `out = m · x`, as `Matrix::multiply`, which has checked `x.len() >= m.ncols` and
/// `out.len()` and picked the index width: [`row`] on each part of each row.
#[target_feature(enable = "avx2")]
pub(super) fn multiply<I: ColumnIndex>(m: &Matrix, colidx: &[I], x: &[f64], out: &mut [f64]) {
    assert!(x.len() >= m.ncols && out.len() == m.rows());
    m.each_row(colidx, x, out, |c, v, x| row(c, v, x));
}

/// The dot product of one part of a row (its entries in one stripe) with `x` from the
/// stripe's first column. Every index in `cols` is below
/// `x.len()` (the matrix's invariant, which [`multiply`] relies on).
#[inline]
#[target_feature(enable = "avx2")]
fn row<I: ColumnIndex>(cols: &[I], vals: &[f64], x: &[f64]) -> f64 {
    let mut acc = _mm256_setzero_pd();
    let whole = cols.len() / LANES * LANES;
    let quads = cols[..whole]
        .chunks_exact(LANES)
        .zip(vals[..whole].chunks_exact(LANES));
    for (k, (c, v)) in quads.enumerate() {
        if k % 2 == 0 {
            // One prefetch per cache line of values (eight entries).
            let ahead = LANES * k + PREFETCH_AHEAD;
            prefetch(vals.as_ptr().wrapping_add(ahead));
            prefetch(cols.as_ptr().wrapping_add(ahead));
        }
        // SAFETY: every index of the matrix is below `x.len()`, as `multiply` asserted.
        let gathered = unsafe { _mm256_i32gather_pd::<8>(x.as_ptr(), widen(c)) };
        let values: &[f64; LANES] = v.try_into().expect("a whole quad");
        // SAFETY: `values` is four readable f64s; the unaligned load reads exactly those.
        let products = _mm256_mul_pd(unsafe { _mm256_loadu_pd(values.as_ptr()) }, gathered);
        acc = _mm256_add_pd(acc, products);
    }
    let mut lanes = [0.0f64; LANES];
    // SAFETY: `lanes` is four writable f64s; the unaligned store writes exactly those.
    unsafe { _mm256_storeu_pd(lanes.as_mut_ptr(), acc) };
    for ((a, &c), &v) in lanes.iter_mut().zip(&cols[whole..]).zip(&vals[whole..]) {
        *a += v * x[c.at()];
    }
    (lanes[0] + lanes[1]) + (lanes[2] + lanes[3])
}

/// Ask for the cache line at `at` to be brought towards the core.
#[inline]
#[target_feature(enable = "avx2")]
fn prefetch<T>(at: *const T) {
    // A prefetch is a hint that never faults, so an address past the end of the arrays
    // (near the last rows) is fine.
    _mm_prefetch::<_MM_HINT_T0>(at.cast())
}

/// The four indices of `quad`, widened to 32-bit lanes.
#[inline]
#[target_feature(enable = "avx2")]
fn widen<I: ColumnIndex>(quad: &[I]) -> __m128i {
    assert_eq!(quad.len(), LANES);
    if size_of::<I>() == 2 {
        // SAFETY: `ColumnIndex` is implemented only for u16 and u32, so a two-byte one is
        // u16, and four of them are the eight bytes this unaligned load reads.
        _mm_cvtepu16_epi32(unsafe { _mm_loadl_epi64(quad.as_ptr().cast()) })
    } else {
        // SAFETY: as above, a four-byte `ColumnIndex` is u32, and four of them are the
        // sixteen bytes this unaligned load reads.
        unsafe { _mm_loadu_si128(quad.as_ptr().cast()) }
    }
}
