//! MG's three heaviest stencils, `resid`, `psinv` and `rprj3`, written once for any vector
//! width and expanded by [`vector_stencils!`] into the AVX-512 ([`super::avx512`], eight
//! lanes) and AVX2 ([`super::avx2`], four lanes) modules.
//!
//! The portable forms keep the reference's row buffers: the four face neighbours of a row
//! are summed into one buffer, the four edge neighbours into another, and the stencil then
//! reads those buffers back at i − 1, i and i + 1 (at 2j − 1, 2j and 2j + 1 for the
//! restriction, whose chunks are split into odd and even lanes here). That is fifteen loads
//! and three stores per chunk of points, and the cores measured are limited by loads there,
//! not by the arithmetic or the memory. Here the sums stay in registers: each chunk of a
//! sum is computed once and the i ± 1 neighbours are made by shifting lanes across two
//! consecutive chunks, which leaves ten loads and one store per chunk.
//!
//! Every sum is taken in the same order as in the portable form, so results are equal bit
//! for bit (the tests compare them). The expanding module supplies the vector type `V`,
//! `LANES`, the intrinsics for the element-wise primitives, and `shift1`, `shift2` (the
//! chunk one and two lanes on, across two chunks) and `split` (even and odd lanes of
//! `2 · LANES` values), each enabled for its feature; nothing here may change an
//! operation's order.

use super::Shape;

/// Row `(i0, i1)` of `src`, its four face neighbours across y and z and its four diagonal
/// neighbours in the y–z plane, in `cross_sums`' order.
#[inline]
pub(super) fn neighbour_rows(
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

/// Expand the stencils for one vector width, inside a module that defines `V`, `LANES`,
/// `shift1`, `shift2` and `split`: `$feature` is the `target_feature` they need, and the
/// named intrinsics give the element-wise primitives (unaligned load and store, add,
/// subtract, multiply, broadcast).
macro_rules! vector_stencils {
    (
        feature: $feature:literal,
        load: $load:ident,
        store: $store:ident,
        add: $add:ident,
        sub: $sub:ident,
        mul: $mul:ident,
        splat: $splat:ident $(,)?
    ) => {
        /// The `LANES` values of `row` from `at`.
        #[inline]
        #[target_feature(enable = $feature)]
        fn load(row: &[f64], at: usize) -> V {
            let chunk: &[f64; LANES] = row[at..at + LANES].try_into().expect("a whole chunk");
            // SAFETY: `chunk` is `LANES` readable, initialised f64s (the slice above is
            // checked), and the unaligned load reads exactly those.
            unsafe { $load(chunk.as_ptr()) }
        }

        /// Write `x` to the `LANES` values of `row` from `at`.
        #[inline]
        #[target_feature(enable = $feature)]
        fn store(row: &mut [f64], at: usize, x: V) {
            let chunk: &mut [f64; LANES] = (&mut row[at..at + LANES])
                .try_into()
                .expect("a whole chunk");
            // SAFETY: `chunk` is `LANES` writable f64s borrowed exclusively, and the
            // unaligned store writes exactly those.
            unsafe { $store(chunk.as_mut_ptr(), x) }
        }

        /// Lane-wise `a + b`.
        #[inline]
        #[target_feature(enable = $feature)]
        fn add(a: V, b: V) -> V {
            $add(a, b)
        }

        /// Lane-wise `a − b`.
        #[inline]
        #[target_feature(enable = $feature)]
        fn sub(a: V, b: V) -> V {
            $sub(a, b)
        }

        /// Lane-wise `a · b` (never fused with an add).
        #[inline]
        #[target_feature(enable = $feature)]
        fn mul(a: V, b: V) -> V {
            $mul(a, b)
        }

        /// `x` in every lane.
        #[inline]
        #[target_feature(enable = $feature)]
        fn splat(x: f64) -> V {
            $splat(x)
        }

        /// `((a + b) + c) + d`, the portable `cross_sums`' order.
        #[inline]
        #[target_feature(enable = $feature)]
        fn sum4(a: V, b: V, c: V, d: V) -> V {
            add(add(add(a, b), c), d)
        }

        /// The values of a row function at i − 1, i and i + 1 for the `LANES` points i = at + 1
        /// ..= at + LANES of each chunk, each computed once per chunk.
        struct Window<F> {
            at_offset: F,
            /// The function's chunk at the current `at` (its values at i − 1).
            current: V,
        }

        impl<F: Fn(usize) -> V> Window<F> {
            #[inline]
            #[target_feature(enable = $feature)]
            fn new(at_offset: F) -> Self {
                let current = at_offset(0);
                Window { at_offset, current }
            }

            /// `(x[i − 1], x[i], x[i + 1])` for the chunk at `at`; `last` says there is no whole
            /// chunk after it, so the shifted ones are loaded directly.
            #[inline]
            #[target_feature(enable = $feature)]
            fn advance(&mut self, at: usize, last: bool) -> [V; 3] {
                let before = self.current;
                if last {
                    return [before, (self.at_offset)(at + 1), (self.at_offset)(at + 2)];
                }
                let next = (self.at_offset)(at + LANES);
                self.current = next;
                [before, shift1(before, next), shift2(before, next)]
            }
        }

        /// The fine values at 2j − 1, 2j and 2j + 1 for the `LANES` coarse points j of each
        /// chunk of a restriction: the fine row read `2 · LANES` points at a time and split into its odd
        /// and even points.
        struct Strided<F> {
            at_offset: F,
            /// The values at 2j − 1 and 2j for the current chunk.
            current: [V; 2],
        }

        impl<F: Fn(usize) -> V> Strided<F> {
            #[inline]
            #[target_feature(enable = $feature)]
            fn new(at_offset: F) -> Self {
                let current = split(&at_offset, 1);
                Strided { at_offset, current }
            }

            /// `(x[2j − 1], x[2j], x[2j + 1])` for the chunk whose first 2j − 1 is `first`;
            /// `last` says there is no whole chunk after it.
            #[inline]
            #[target_feature(enable = $feature)]
            fn advance(&mut self, first: usize, last: bool) -> [V; 3] {
                let [before, here] = self.current;
                if last {
                    // `2 · LANES` points from `first + 1` end at the row's last point: their odd
                    // lanes are the values after.
                    let [_, after] = split(&self.at_offset, first + 1);
                    return [before, here, after];
                }
                let next = split(&self.at_offset, first + 2 * LANES);
                self.current = next;
                [before, here, shift1(before, next[0])]
            }
        }

        /// The sum of four rows' `LANES` values from `at`, in `cross_sums`' order.
        #[inline]
        #[target_feature(enable = $feature)]
        fn sum_rows(rows: [&[f64]; 4], at: usize) -> V {
            sum4(
                load(rows[0], at),
                load(rows[1], at),
                load(rows[2], at),
                load(rows[3], at),
            )
        }

        /// A row's centre values and its face and edge sums, each at i − 1, i and i + 1, for the
        /// `LANES` points of one chunk.
        struct Around {
            centre: [V; 3],
            faces: [V; 3],
            edges: [V; 3],
        }

        /// Walk the interior rows `part` in `LANES`-point chunks, handing `body` the start of
        /// the row in the storage, the chunk's offset `at` (its points are at + 1 ..= at + LANES) and
        /// what `src` holds around them.
        #[inline]
        #[target_feature(enable = $feature)]
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
        #[target_feature(enable = $feature)]
        pub(super) fn resid(u: &[f64], v: Option<&[f64]>, r: &mut [f64], s: Shape, part: Part) {
            let [a0, _, a2, a3] = RESIDUAL.map(|a| splat(a));
            sweep(u, s, part, |row, at, around| {
                let [_, u_here, _] = around.centre;
                let [f_before, _, f_after] = around.faces;
                let [e_before, e_here, e_after] = around.edges;
                let vv = load(v.unwrap_or(r), row + at + 1);
                let x = sub(vv, mul(a0, u_here));
                let faces_edges = add(add(e_here, f_before), f_after);
                let x = sub(x, mul(a2, faces_edges));
                let x = sub(x, mul(a3, add(e_before, e_after)));
                store(r, row + at + 1, x);
            })
        }

        /// Restrict the fine residual `r` onto the coarse level's interior rows `part`, as the
        /// portable `rprj3`.
        #[target_feature(enable = $feature)]
        pub(super) fn rprj3(r: &[f64], fine: Shape, s: &mut [f64], coarse: Shape, part: Part) {
            let c2 = coarse.m[2];
            let [quarter, eighth, sixteenth] = [0.25, 0.125, 0.0625].map(|w| splat(w));
            let half = splat(0.5);
            let chunks = (c2 - 2) / LANES;
            for j0 in part.planes {
                for j1 in part.rows.clone() {
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
                        let near = add(add(r_before, r_after), x_here);
                        let far = add(add(x_before, x_after), y_here);
                        let x = add(mul(half, r_here), mul(quarter, near));
                        let x = add(x, mul(eighth, far));
                        let corners = add(y_before, y_after);
                        store(s, out + k * LANES + 1, add(x, mul(sixteenth, corners)));
                    }
                }
            }
        }

        /// `u += S r` on the interior rows `part`, as the portable `psinv`.
        #[target_feature(enable = $feature)]
        pub(super) fn psinv(r: &[f64], u: &mut [f64], s: Shape, part: Part, c: [f64; 4]) {
            let [c0, c1, c2, _] = c.map(|c| splat(c));
            sweep(r, s, part, |row, at, around| {
                let [r_before, r_here, r_after] = around.centre;
                let [f_before, f_here, f_after] = around.faces;
                let [_, e_here, _] = around.edges;
                let near = add(add(r_before, r_after), f_here);
                let far = add(add(e_here, f_before), f_after);
                let x = add(mul(c0, r_here), mul(c1, near));
                let x = add(x, mul(c2, far));
                store(u, row + at + 1, add(load(u, row + at + 1), x));
            })
        }
    };
}
pub(super) use vector_stencils;
