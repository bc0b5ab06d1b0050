//! AVX-512 forms of MG's three heaviest stencils, `resid`, `psinv` and `rprj3`.
//!
//! The portable forms keep the reference's row buffers: the four face neighbours of a row
//! are summed into one buffer, the four edge neighbours into another, and the stencil then
//! reads those buffers back at i − 1, i and i + 1 (at 2j − 1, 2j and 2j + 1 for the
//! restriction, whose chunks are split into odd and even lanes here). That is fifteen loads and three stores
//! per eight points, and on this machine's cores the loads, not the arithmetic or the
//! memory, set the pace. Here the sums stay in registers: each eight-point chunk of a sum
//! is computed once and the i ± 1 neighbours are made by shifting lanes across two
//! consecutive chunks, which leaves ten loads and one store per eight points.
//!
//! Every sum is taken in the same order as in the portable form, so results are equal bit
//! for bit (the tests compare them). This module must never be called on a CPU without
//! AVX-512F (the callers check [`available`]) nor change an operation's order.

use super::{Part, Shape, RESIDUAL};
use std::arch::x86_64::{
    __m512d, _mm512_add_pd, _mm512_alignr_epi64, _mm512_castpd_si512, _mm512_castsi512_pd,
    _mm512_loadu_pd, _mm512_mul_pd, _mm512_permutex2var_pd, _mm512_set1_pd, _mm512_set_epi64,
    _mm512_storeu_pd, _mm512_sub_pd,
};

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

/// The eight values of `row` from `at`.
#[inline]
#[target_feature(enable = "avx512f")]
fn load(row: &[f64], at: usize) -> __m512d {
    let chunk: &[f64; LANES] = row[at..at + LANES].try_into().expect("eight values");
    // SAFETY: `chunk` is eight readable, initialised f64s (the slice above is checked), and
    // the unaligned load reads exactly those.
    unsafe { _mm512_loadu_pd(chunk.as_ptr()) }
}

/// Write `x` to the eight values of `row` from `at`.
#[inline]
#[target_feature(enable = "avx512f")]
fn store(row: &mut [f64], at: usize, x: __m512d) {
    let chunk: &mut [f64; LANES] = (&mut row[at..at + LANES]).try_into().expect("eight values");
    // SAFETY: `chunk` is eight writable f64s borrowed exclusively, and the unaligned store
    // writes exactly those.
    unsafe { _mm512_storeu_pd(chunk.as_mut_ptr(), x) }
}

/// Lanes `N..8` of `lo` followed by lanes `0..N` of `hi`: the chunk `N` points on.
#[inline]
#[target_feature(enable = "avx512f")]
fn shifted<const N: i32>(lo: __m512d, hi: __m512d) -> __m512d {
    _mm512_castsi512_pd(_mm512_alignr_epi64::<N>(
        _mm512_castpd_si512(hi),
        _mm512_castpd_si512(lo),
    ))
}

/// `((a + b) + c) + d`, the portable `cross_sums`' order.
#[inline]
#[target_feature(enable = "avx512f")]
fn sum4(a: __m512d, b: __m512d, c: __m512d, d: __m512d) -> __m512d {
    _mm512_add_pd(_mm512_add_pd(_mm512_add_pd(a, b), c), d)
}

/// The values of a row function at i − 1, i and i + 1 for the eight points i = at + 1 ..
/// at + 9 of each chunk, each computed once per chunk.
struct Window<F> {
    at_offset: F,
    /// The function's chunk at the current `at` (its values at i − 1).
    current: __m512d,
}

impl<F: Fn(usize) -> __m512d> Window<F> {
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn new(at_offset: F) -> Self {
        let current = at_offset(0);
        Window { at_offset, current }
    }

    /// `(x[i − 1], x[i], x[i + 1])` for the chunk at `at`; `last` says there is no whole
    /// chunk after it, so the shifted ones are loaded directly.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn advance(&mut self, at: usize, last: bool) -> [__m512d; 3] {
        let before = self.current;
        if last {
            return [before, (self.at_offset)(at + 1), (self.at_offset)(at + 2)];
        }
        let next = (self.at_offset)(at + LANES);
        self.current = next;
        [
            before,
            shifted::<1>(before, next),
            shifted::<2>(before, next),
        ]
    }
}

/// The fine values at 2j − 1, 2j and 2j + 1 for the eight coarse points j of each chunk
/// of a restriction: the fine row read sixteen points at a time and split into its odd
/// and even points.
struct Strided<F> {
    at_offset: F,
    /// The values at 2j − 1 and 2j for the current chunk.
    current: [__m512d; 2],
}

impl<F: Fn(usize) -> __m512d> Strided<F> {
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn new(at_offset: F) -> Self {
        let current = split(&at_offset, 1);
        Strided { at_offset, current }
    }

    /// `(x[2j − 1], x[2j], x[2j + 1])` for the chunk whose first 2j − 1 is `first`;
    /// `last` says there is no whole chunk after it.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn advance(&mut self, first: usize, last: bool) -> [__m512d; 3] {
        let [before, here] = self.current;
        if last {
            // Sixteen points from `first + 1` end at the row's last point: their odd
            // lanes are the values after.
            let [_, after] = split(&self.at_offset, first + 1);
            return [before, here, after];
        }
        let next = split(&self.at_offset, first + 2 * LANES);
        self.current = next;
        [before, here, shifted::<1>(before, next[0])]
    }
}

/// The even and the odd lanes of the sixteen values from `at`.
#[inline]
#[target_feature(enable = "avx512f")]
fn split(at_offset: impl Fn(usize) -> __m512d, at: usize) -> [__m512d; 2] {
    let (a, b) = (at_offset(at), at_offset(at + LANES));
    let even = _mm512_set_epi64(14, 12, 10, 8, 6, 4, 2, 0);
    let odd = _mm512_set_epi64(15, 13, 11, 9, 7, 5, 3, 1);
    [
        _mm512_permutex2var_pd(a, even, b),
        _mm512_permutex2var_pd(a, odd, b),
    ]
}

/// Row `(i0, i1)` of `src`, its four face neighbours across y and z and its four diagonal
/// neighbours in the y–z plane, in `cross_sums`' order.
#[inline]
fn neighbour_rows(
    src: &[f64],
    s: Shape,
    i0: usize,
    i1: usize,
) -> (&[f64], [&[f64]; 4], [&[f64]; 4]) {
    let row = |a, b| super::row(src, s, a, b);
    let faces = [
        row(i0, i1 - 1),
        row(i0, i1 + 1),
        row(i0 - 1, i1),
        row(i0 + 1, i1),
    ];
    let edges = [
        row(i0 - 1, i1 - 1),
        row(i0 - 1, i1 + 1),
        row(i0 + 1, i1 - 1),
        row(i0 + 1, i1 + 1),
    ];
    (row(i0, i1), faces, edges)
}

/// The sum of four rows' eight values from `at`, in `cross_sums`' order.
#[inline]
#[target_feature(enable = "avx512f")]
fn sum_rows(rows: [&[f64]; 4], at: usize) -> __m512d {
    sum4(
        load(rows[0], at),
        load(rows[1], at),
        load(rows[2], at),
        load(rows[3], at),
    )
}

/// A row's centre values and its face and edge sums, each at i − 1, i and i + 1, for the
/// eight points of one chunk.
struct Around {
    centre: [__m512d; 3],
    faces: [__m512d; 3],
    edges: [__m512d; 3],
}

/// Walk the interior rows `part` in eight-point chunks, handing `body` the start of
/// the row in the storage, the chunk's offset `at` (its points are at + 1 .. at + 9) and
/// what `src` holds around them.
#[inline]
#[target_feature(enable = "avx512f")]
fn sweep(src: &[f64], s: Shape, part: Part, mut body: impl FnMut(usize, usize, Around)) {
    let chunks = (s.m[2] - 2) / LANES;
    for i0 in part.planes {
        for i1 in part.rows.clone() {
            let (centre, f, e) = neighbour_rows(src, s, i0, i1);
            let mut centres = Window::new(|at| load(centre, at));
            let mut faces = Window::new(|at| sum_rows(f, at));
            let mut edges = Window::new(|at| sum_rows(e, at));
            for k in 0..chunks {
                let (at, last) = (k * LANES, k + 1 == chunks);
                let around = Around {
                    centre: centres.advance(at, last),
                    faces: faces.advance(at, last),
                    edges: edges.advance(at, last),
                };
                body(s.row(i0, i1), at, around);
            }
        }
    }
}

/// `r = v − A u` on the interior rows `part`, as the portable `resid`; `v = None` means in
/// place.
#[target_feature(enable = "avx512f")]
pub(super) fn resid(u: &[f64], v: Option<&[f64]>, r: &mut [f64], s: Shape, part: Part) {
    let [a0, _, a2, a3] = RESIDUAL.map(|a| _mm512_set1_pd(a));
    sweep(u, s, part, |row, at, around| {
        let [_, u_here, _] = around.centre;
        let [f_before, _, f_after] = around.faces;
        let [e_before, e_here, e_after] = around.edges;
        let vv = load(v.unwrap_or(r), row + at + 1);
        let x = _mm512_sub_pd(vv, _mm512_mul_pd(a0, u_here));
        let faces_edges = _mm512_add_pd(_mm512_add_pd(e_here, f_before), f_after);
        let x = _mm512_sub_pd(x, _mm512_mul_pd(a2, faces_edges));
        let x = _mm512_sub_pd(x, _mm512_mul_pd(a3, _mm512_add_pd(e_before, e_after)));
        store(r, row + at + 1, x);
    })
}

/// Restrict the fine residual `r` onto the coarse level's interior, as the portable
/// `rprj3`.
#[target_feature(enable = "avx512f")]
pub(super) fn rprj3(r: &[f64], fine: Shape, s: &mut [f64], coarse: Shape) {
    let [c0, c1, c2] = coarse.m;
    let [quarter, eighth, sixteenth] = [0.25, 0.125, 0.0625].map(|w| _mm512_set1_pd(w));
    let half = _mm512_set1_pd(0.5);
    let chunks = (c2 - 2) / LANES;
    for j0 in 1..c0 - 1 {
        for j1 in 1..c1 - 1 {
            let (centre, f, e) = neighbour_rows(r, fine, 2 * j0, 2 * j1);
            let mut centres = Strided::new(|at| load(centre, at));
            let mut faces = Strided::new(|at| sum_rows(f, at));
            let mut edges = Strided::new(|at| sum_rows(e, at));
            let out = coarse.row(j0, j1);
            for k in 0..chunks {
                let (first, last) = (2 * k * LANES + 1, k + 1 == chunks);
                let [r_before, r_here, r_after] = centres.advance(first, last);
                let [x_before, x_here, x_after] = faces.advance(first, last);
                let [y_before, y_here, y_after] = edges.advance(first, last);
                let near = _mm512_add_pd(_mm512_add_pd(r_before, r_after), x_here);
                let far = _mm512_add_pd(_mm512_add_pd(x_before, x_after), y_here);
                let x = _mm512_add_pd(_mm512_mul_pd(half, r_here), _mm512_mul_pd(quarter, near));
                let x = _mm512_add_pd(x, _mm512_mul_pd(eighth, far));
                let corners = _mm512_add_pd(y_before, y_after);
                store(
                    s,
                    out + k * LANES + 1,
                    _mm512_add_pd(x, _mm512_mul_pd(sixteenth, corners)),
                );
            }
        }
    }
}

/// `u += S r` on the interior rows `part`, as the portable `psinv`.
#[target_feature(enable = "avx512f")]
pub(super) fn psinv(r: &[f64], u: &mut [f64], s: Shape, part: Part, c: [f64; 4]) {
    let [c0, c1, c2, _] = c.map(|c| _mm512_set1_pd(c));
    sweep(r, s, part, |row, at, around| {
        let [r_before, r_here, r_after] = around.centre;
        let [f_before, f_here, f_after] = around.faces;
        let [_, e_here, _] = around.edges;
        let near = _mm512_add_pd(_mm512_add_pd(r_before, r_after), f_here);
        let far = _mm512_add_pd(_mm512_add_pd(e_here, f_before), f_after);
        let x = _mm512_add_pd(_mm512_mul_pd(c0, r_here), _mm512_mul_pd(c1, near));
        let x = _mm512_add_pd(x, _mm512_mul_pd(c2, far));
        store(u, row + at + 1, _mm512_add_pd(load(u, row + at + 1), x));
    })
}
