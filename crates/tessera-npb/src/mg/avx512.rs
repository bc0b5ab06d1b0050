//! AVX-512 forms of MG's three heaviest stencils, `resid`, `psinv` and `rprj3`: the
//! width-independent code of [`super::vector`] over eight-lane vectors.
//!
//! This module must never be called on a CPU without AVX-512F (the callers check
//! [`available`]) nor change an operation's order.

use super::vector::{neighbour_rows, vector_stencils};
use super::{Part, Shape, RESIDUAL};
use std::arch::x86_64::{
    __m512d, _mm512_add_pd, _mm512_alignr_epi64, _mm512_castpd_si512, _mm512_castsi512_pd,
    _mm512_loadu_pd, _mm512_mul_pd, _mm512_permutex2var_pd, _mm512_set1_pd, _mm512_set_epi64,
    _mm512_storeu_pd, _mm512_sub_pd,
};

/// The vector the stencils work in.
type V = __m512d;

/// Lanes per vector.
const LANES: usize = 8;

/// Whether the chosen level is AVX-512 (so this CPU runs the functions here), and the
/// block shape suits them (rows whose interior is a whole number of vectors).
pub(super) fn available(s: Shape) -> bool {
    let interior = s.m[2] - 2;
    interior >= LANES
        && interior.is_multiple_of(LANES)
        && crate::simd::level() == crate::simd::Level::Avx512
}

/// Lanes `N..8` of `lo` followed by lanes `0..N` of `hi`: the chunk `N` points on.
#[inline]
#[target_feature(enable = "avx512f")]
fn shifted<const N: i32>(lo: V, hi: V) -> V {
    _mm512_castsi512_pd(_mm512_alignr_epi64::<N>(
        _mm512_castpd_si512(hi),
        _mm512_castpd_si512(lo),
    ))
}

/// The chunk one point on from `lo`.
#[inline]
#[target_feature(enable = "avx512f")]
fn shift1(lo: V, hi: V) -> V {
    shifted::<1>(lo, hi)
}

/// The chunk two points on from `lo`.
#[inline]
#[target_feature(enable = "avx512f")]
fn shift2(lo: V, hi: V) -> V {
    shifted::<2>(lo, hi)
}

/// The even and the odd lanes of the sixteen values from `at`.
#[inline]
#[target_feature(enable = "avx512f")]
fn split(at_offset: impl Fn(usize) -> V, at: usize) -> [V; 2] {
    let (a, b) = (at_offset(at), at_offset(at + LANES));
    let even = _mm512_set_epi64(14, 12, 10, 8, 6, 4, 2, 0);
    let odd = _mm512_set_epi64(15, 13, 11, 9, 7, 5, 3, 1);
    [
        _mm512_permutex2var_pd(a, even, b),
        _mm512_permutex2var_pd(a, odd, b),
    ]
}

vector_stencils! {
    feature: "avx512f",
    load: _mm512_loadu_pd,
    store: _mm512_storeu_pd,
    add: _mm512_add_pd,
    sub: _mm512_sub_pd,
    mul: _mm512_mul_pd,
    splat: _mm512_set1_pd,
}
