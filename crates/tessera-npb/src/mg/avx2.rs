//! AVX2 forms of MG's three heaviest stencils, `resid`, `psinv` and `rprj3`: the
//! width-independent code of [`super::vector`] over four-lane vectors, for CPUs without
//! AVX-512 (and `TESSERA_SIMD=avx2`).
//!
//! This module must never be called on a CPU without AVX2 (the callers check
//! [`available`]) nor change an operation's order.

use super::vector::{neighbour_rows, vector_stencils};
use super::{Part, Shape, RESIDUAL};
use std::arch::x86_64::{
    __m256d, _mm256_add_pd, _mm256_loadu_pd, _mm256_mul_pd, _mm256_permute2f128_pd,
    _mm256_permute4x64_pd, _mm256_set1_pd, _mm256_shuffle_pd, _mm256_storeu_pd, _mm256_sub_pd,
    _mm256_unpackhi_pd, _mm256_unpacklo_pd,
};

/// The vector the stencils work in.
type V = __m256d;

/// Lanes per vector.
const LANES: usize = 4;

/// Whether the chosen level has AVX2 (so this CPU runs the functions here), and the block
/// shape suits them (rows whose interior is a whole number of vectors).
pub(super) fn available(s: Shape) -> bool {
    let interior = s.m[2] - 2;
    interior >= LANES
        && interior.is_multiple_of(LANES)
        && crate::simd::level() >= crate::simd::Level::Avx2
}

/// `[lo₁, lo₂, lo₃, hi₀]`: the chunk one point on from `lo`.
#[inline]
#[target_feature(enable = "avx2")]
fn shift1(lo: V, hi: V) -> V {
    // Lane 0 from lo's first pair, 1 from the middle pair, 2 from lo's second pair, 3 from
    // the middle's second: lo₁, lo₂, lo₃, hi₀.
    _mm256_shuffle_pd::<0b0101>(lo, shift2(lo, hi))
}

/// `[lo₂, lo₃, hi₀, hi₁]`: the chunk two points on from `lo`.
#[inline]
#[target_feature(enable = "avx2")]
fn shift2(lo: V, hi: V) -> V {
    _mm256_permute2f128_pd::<0x21>(lo, hi)
}

/// The even and the odd lanes of the eight values from `at`.
#[inline]
#[target_feature(enable = "avx2")]
fn split(at_offset: impl Fn(usize) -> V, at: usize) -> [V; 2] {
    let (a, b) = (at_offset(at), at_offset(at + LANES));
    // unpacklo gives a₀ b₀ a₂ b₂ and unpackhi a₁ b₁ a₃ b₃; swapping the middle lanes puts
    // each in order.
    const MIDDLE_SWAPPED: i32 = 0b11_01_10_00;
    [
        _mm256_permute4x64_pd::<MIDDLE_SWAPPED>(_mm256_unpacklo_pd(a, b)),
        _mm256_permute4x64_pd::<MIDDLE_SWAPPED>(_mm256_unpackhi_pd(a, b)),
    ]
}

vector_stencils! {
    feature: "avx2",
    load: _mm256_loadu_pd,
    store: _mm256_storeu_pd,
    add: _mm256_add_pd,
    sub: _mm256_sub_pd,
    mul: _mm256_mul_pd,
    splat: _mm256_set1_pd,
}
