//! MG: V-cycle multigrid for the 3-D Poisson equation on a periodic grid (NPB's `mg3P`).
//!
//! Every level is a [`HaloGrid`]: the ranks' blocks of a periodic `2ᵏ × 2ᵏ × 2ᵏ` grid with one
//! ghost layer, decomposed over a power-of-two process grid that halves the slowest
//! dimension first, as NPB does. Ghost updates (NPB's `comm3`) are the halo grid's
//! one-sided exchange of domain intersections, in 6 messages (`--variant 6msg`, three
//! phases) or 26 (`--variant 26msg`, one phase).
//!
//! The operators are NPB's: `resid` (r = v − A u), `psinv` (u += S r), `rprj3` (restriction
//! of the residual to the coarser level) and `interp` (trilinear prolongation added to the
//! finer level). They work on the storage slices directly, with the row buffers of the
//! reference code, so each point costs what it costs there. `interp` also computes the
//! finer level's ghost layer from the coarser level's ghosts; that gives exactly the values
//! an exchange would bring (the same operands in the same order), so it needs none.
//!
//! Coarse levels are *gathered* (seed 000 §3.1.6): once a rank's block of a level would be
//! thinner than [`GATHER_BELOW`] points along some dimension, every rank holds the whole
//! level and works on it redundantly, so those levels need no ghost exchange at all. The
//! finest gathered level is where the two meet: going down, each rank restricts into its
//! own block of it and one allgather assembles the whole level; going up, each rank cuts
//! its block (with ghosts) out of the whole level and interpolates from that. This is also
//! what lets MG run on more ranks than the coarsest levels have points.
//!
//! Coordinates: point `[z, y, x]` (x fastest) is the reference's `(i1, i2, i3) = (x, y, z)`.

// Stencils read neighbours i − 1, i, i + 1 of several rows at once: index loops say that
// most plainly.
#![allow(clippy::needless_range_loop)]

use tessera::coll::{Allgather, Allreduce, Barrier};
use tessera::Blocking;

use crate::NpbError;
use std::collections::BTreeMap;
use std::ops::Range;
use std::time::{Duration, Instant};

use tessera::{Context, CoreError, HaloGrid, HaloStats, HaloStrategy, Op, RectDomain, Team};

use crate::rng::{pow_mod, vranlc, A};
use crate::{Class, Outcome};

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
#[cfg(target_arch = "x86_64")]
mod vector;

/// The problem of one class.
#[derive(Clone, Copy, Debug)]
pub struct ClassData {
    /// The class.
    pub class: Class,
    /// Points along each dimension.
    pub n: usize,
    /// V-cycles timed.
    pub nit: usize,
    /// The official L2 norm of the final residual (`None` where this crate carries none).
    pub rnm2: Option<f64>,
}

/// Official values (NPB 3.4).
pub const CLASSES: [ClassData; 6] = [
    ClassData {
        class: Class::S,
        n: 32,
        nit: 4,
        rnm2: Some(0.530_770_700_573_4e-4),
    },
    ClassData {
        class: Class::W,
        n: 128,
        nit: 4,
        rnm2: Some(0.646_732_937_533_9e-5),
    },
    ClassData {
        class: Class::A,
        n: 256,
        nit: 4,
        rnm2: Some(0.243_336_530_906_9e-5),
    },
    ClassData {
        class: Class::B,
        n: 256,
        nit: 20,
        rnm2: Some(0.180_056_440_135_5e-5),
    },
    ClassData {
        class: Class::C,
        n: 512,
        nit: 20,
        rnm2: Some(5.70673228574e-07),
    },
    ClassData {
        class: Class::D,
        n: 1024,
        nit: 50,
        rnm2: None,
    },
];

/// Relative tolerance of the verification.
const EPSILON: f64 = 1e-8;

variants! {
    /// The ghost-exchange strategy.
    pub enum Variant {
        /// Every neighbour's face, edge and corner in one phase.
        TwentySix => "26msg",
        /// Three phases of face exchanges, edges and corners carried along.
        Six => "6msg",
    }
}

impl Variant {
    /// The halo layer's strategy for this variant.
    fn strategy(self) -> HaloStrategy {
        match self {
            Variant::TwentySix => HaloStrategy::TwentySixMessages,
            Variant::Six => HaloStrategy::SixMessages,
        }
    }
}

/// MG in the kernel registry.
pub struct Mg;

impl crate::Benchmark for Mg {
    fn name(&self) -> &'static str {
        "mg"
    }
    fn variants(&self) -> &'static [&'static str] {
        Variant::NAMES
    }
    fn check_ranks(&self, ranks: usize) -> Result<(), NpbError> {
        // Coarse levels are gathered; the finest (S: 32³) needs two points per rank and
        // dimension, which 1024 ranks (16 × 8 × 8) still have.
        if ranks.is_power_of_two() && ranks <= 1024 {
            Ok(())
        } else {
            Err(NpbError::ranks(
                "mg",
                ranks,
                format!("mg runs on a power-of-two number of ranks up to 1024, not {ranks}"),
            ))
        }
    }
    fn footprint(&self, class: Class, ranks: usize) -> crate::Footprint {
        footprint(class, ranks)
    }
    fn run(&self, ctx: &Context, class: Class, variant: &str) -> tessera::Result<Option<Outcome>> {
        run(ctx, class, crate::parse_variant("mg", variant)?)
    }
    /// MG is bound by memory: per iteration, on the finest grid, the residual twice and
    /// the smoother once (three arrays each), the restriction (one) and the interpolation
    /// (two): 96 bytes per point, and an eighth more for each coarser level (8/7 in all).
    fn demand(&self, class: Class, _outcome: &Outcome) -> crate::hardware::Demand {
        let data = crate::class_data(&CLASSES, |c| c.class, class);
        let points = (data.n as f64).powi(3);
        crate::hardware::Demand {
            resource: crate::hardware::Resource::MemoryBytes,
            amount: 96.0 * 8.0 / 7.0 * points * data.nit as f64,
            basis: "about 110 bytes per finest-grid point per iteration".into(),
        }
    }
}

/// The residual operator's coefficients (a₁ = 0 is skipped, as in the reference).
const RESIDUAL: [f64; 4] = [-8.0 / 3.0, 0.0, 1.0 / 6.0, 1.0 / 12.0];

/// The smoother's coefficients: classes S, W, A use one set, B and larger another.
fn smoother(class: Class) -> [f64; 4] {
    match class {
        Class::S | Class::W | Class::A => [-3.0 / 8.0, 1.0 / 32.0, -1.0 / 64.0, 0.0],
        Class::B | Class::C | Class::D => [-3.0 / 17.0, 1.0 / 33.0, -1.0 / 61.0, 0.0],
    }
}

/// A level whose blocks would be thinner than this many points along some dimension is
/// gathered: every rank holds all of it (see the module documentation). Measured at 2, 4
/// and 8 ranks in docs/PERFORMANCE.md.
pub const GATHER_BELOW: usize = 2;

/// Planes the top level's fused smoothing and residual read at once: three of r, three of
/// u, one of v, and one more of r for the restriction that goes with them.
const FUSED_PLANES: usize = 8;

/// Bytes of those planes, per rank, above which the fused sweep goes in tiles of rows, so
/// that what it holds stays in the last-level cache beside the other ranks' (a class C
/// plane on two ranks is 2.1 MB, and eight of them per rank overflow a 32 MiB L3). At
/// class C on two ranks, tiles (three, of at most 191 rows) measured 16.7–16.9 s against whole planes'
/// 17.4–18.8 s in four interleaved turns (docs/PERFORMANCE.md).
/// `TESSERA_MG_FUSED` (bytes) overrides it, for measurements and for the test that tiles
/// change no bit of the result.
/// The variable that overrides [`fused_bytes`].
pub(crate) const FUSED_ENV: &str = "TESSERA_MG_FUSED";

pub(crate) fn fused_bytes() -> Result<usize, NpbError> {
    const DEFAULT: usize = 6 << 20;
    match tessera::config::text(FUSED_ENV) {
        None => Ok(DEFAULT),
        Some(v) => v.parse().map_err(|_| NpbError::Setting {
            variable: FUSED_ENV,
            message: format!(
                "TESSERA_MG_FUSED={v:?} is not a number of bytes (unset it for the default, {DEFAULT})"
            ),
        }),
    }
}

/// NPB's process grid: double the slowest dimension first, then the next.
pub fn process_grid(ranks: usize) -> [usize; 3] {
    let mut procs = [1; 3];
    let mut d = 0;
    while procs.iter().product::<usize>() < ranks {
        procs[d] *= 2;
        d = (d + 1) % 3;
    }
    procs
}

/// Storage shape and index arithmetic of one block (ghosts included).
#[derive(Clone, Copy, Debug)]
struct Shape {
    m: [usize; 3],
}

impl Shape {
    /// Storage of `interior` points along each dimension plus one ghost layer each side.
    fn with_interior(interior: [usize; 3]) -> Shape {
        Shape {
            m: interior.map(|e| e + 2),
        }
    }

    /// Points in the storage.
    fn len(&self) -> usize {
        self.m.iter().product()
    }

    /// Start of row `(i0, i1)`.
    #[inline(always)]
    fn row(&self, i0: usize, i1: usize) -> usize {
        (i0 * self.m[1] + i1) * self.m[2]
    }
}

/// Row buffers of the portable stencils (the reference's u1/u2, r1/r2, x1/y1, z1/z2/z3).
type RowBuffers = [Vec<f64>; 3];

/// The interior rows a stencil sweep covers: rows `rows` of planes `planes`.
#[derive(Clone, Debug)]
struct Part {
    planes: Range<usize>,
    rows: Range<usize>,
}

impl Part {
    /// Every interior row of the interior planes `planes`.
    fn planes(s: Shape, planes: Range<usize>) -> Part {
        Part {
            planes,
            rows: 1..s.m[1] - 1,
        }
    }

    /// The whole interior.
    fn all(s: Shape) -> Part {
        Part::planes(s, 1..s.m[0] - 1)
    }
}

/// Row `(i0, i1)` of `src`.
#[inline(always)]
fn row(src: &[f64], s: Shape, i0: usize, i1: usize) -> &[f64] {
    let start = s.row(i0, i1);
    &src[start..start + s.m[2]]
}

/// For row `(i0, i1)`: the sum of its four neighbour rows across y and z (`faces`) and of
/// its four diagonal neighbour rows in the y–z plane (`edges`), element by element (the
/// reference's u1/u2, r1/r2, x1/y1 buffers).
#[inline(always)]
fn cross_sums(src: &[f64], s: Shape, i0: usize, i1: usize, faces: &mut [f64], edges: &mut [f64]) {
    let m2 = s.m[2];
    let (ym, yp) = (row(src, s, i0, i1 - 1), row(src, s, i0, i1 + 1));
    let (zm, zp) = (row(src, s, i0 - 1, i1), row(src, s, i0 + 1, i1));
    let (a, b) = (row(src, s, i0 - 1, i1 - 1), row(src, s, i0 - 1, i1 + 1));
    let (c, d) = (row(src, s, i0 + 1, i1 - 1), row(src, s, i0 + 1, i1 + 1));
    let (faces, edges) = (&mut faces[..m2], &mut edges[..m2]);
    for i in 0..m2 {
        faces[i] = ym[i] + yp[i] + zm[i] + zp[i];
        edges[i] = a[i] + b[i] + c[i] + d[i];
    }
}

/// `r = v − A u` on the interior rows `part`; `v = None` means `v` is `r` itself (in
/// place). The AVX-512 or AVX2 form where the CPU and the block allow it.
fn resid(u: &[f64], v: Option<&[f64]>, r: &mut [f64], s: Shape, part: Part, bufs: &mut RowBuffers) {
    #[cfg(target_arch = "x86_64")]
    if avx512::available(s) {
        // SAFETY: `available` checked that this CPU has AVX-512F.
        return unsafe { avx512::resid(u, v, r, s, part) };
    }
    #[cfg(target_arch = "x86_64")]
    if avx2::available(s) {
        // SAFETY: `available` checked that this CPU has AVX2.
        return unsafe { avx2::resid(u, v, r, s, part) };
    }
    resid_portable(u, v, r, s, part, bufs)
}

crate::multilevel! {
    /// [`resid`] for any CPU, with the reference's row buffers.
    fn resid_portable(
        u: &[f64],
        v: Option<&[f64]>,
        r: &mut [f64],
        s: Shape,
        part: Part,
        bufs: &mut RowBuffers,
    ) {
        let m2 = s.m[2];
        let a = RESIDUAL;
        for i0 in part.planes {
            for i1 in part.rows.clone() {
                let [u1, u2, _] = &mut *bufs;
                cross_sums(u, s, i0, i1, u1, u2);
                let (u1, u2) = (&u1[..m2], &u2[..m2]);
                let c = s.row(i0, i1);
                let uc = &u[c..c + m2];
                let out = &mut r[c..c + m2];
                let apply = |i: usize, vv: f64| {
                    vv - a[0] * uc[i]
                        - a[2] * (u2[i] + u1[i - 1] + u1[i + 1])
                        - a[3] * (u2[i - 1] + u2[i + 1])
                };
                match v {
                    Some(v) => {
                        let vc = &v[c..c + m2];
                        for i in 1..m2 - 1 {
                            out[i] = apply(i, vc[i]);
                        }
                    }
                    None => {
                        for i in 1..m2 - 1 {
                            out[i] = apply(i, out[i]);
                        }
                    }
                }
            }
        }
    }
}

/// `u += S r` on the interior rows `part` (the smoother). The AVX-512 form where the CPU
/// and the block allow it.
fn psinv(r: &[f64], u: &mut [f64], s: Shape, part: Part, c: [f64; 4], bufs: &mut RowBuffers) {
    #[cfg(target_arch = "x86_64")]
    if avx512::available(s) {
        // SAFETY: `available` checked that this CPU has AVX-512F.
        return unsafe { avx512::psinv(r, u, s, part, c) };
    }
    #[cfg(target_arch = "x86_64")]
    if avx2::available(s) {
        // SAFETY: `available` checked that this CPU has AVX2.
        return unsafe { avx2::psinv(r, u, s, part, c) };
    }
    psinv_portable(r, u, s, part, c, bufs)
}

crate::multilevel! {
    /// [`psinv`] for any CPU, with the reference's row buffers.
    fn psinv_portable(
        r: &[f64],
        u: &mut [f64],
        s: Shape,
        part: Part,
        c: [f64; 4],
        bufs: &mut RowBuffers,
    ) {
        let m2 = s.m[2];
        for i0 in part.planes {
            for i1 in part.rows.clone() {
                let [r1, r2, _] = &mut *bufs;
                cross_sums(r, s, i0, i1, r1, r2);
                let (r1, r2) = (&r1[..m2], &r2[..m2]);
                let ce = s.row(i0, i1);
                let rr = &r[ce..ce + m2];
                let out = &mut u[ce..ce + m2];
                for i in 1..m2 - 1 {
                    out[i] += c[0] * rr[i]
                        + c[1] * (rr[i - 1] + rr[i + 1] + r1[i])
                        + c[2] * (r2[i] + r1[i - 1] + r1[i + 1]);
                }
            }
        }
    }
}

/// Restrict the fine residual `r` onto the coarse level's interior planes `planes` of `s`
/// (each reads fine planes `2j − 1 ..= 2j + 1`). The AVX-512 or AVX2 form where the CPU
/// and the block allow it.
fn rprj3(
    r: &[f64],
    fine: Shape,
    s: &mut [f64],
    coarse: Shape,
    planes: Range<usize>,
    bufs: &mut RowBuffers,
) {
    #[cfg(target_arch = "x86_64")]
    if avx512::available(coarse) {
        // SAFETY: `available` checked that this CPU has AVX-512F.
        return unsafe { avx512::rprj3(r, fine, s, coarse, planes) };
    }
    #[cfg(target_arch = "x86_64")]
    if avx2::available(coarse) {
        // SAFETY: `available` checked that this CPU has AVX2.
        return unsafe { avx2::rprj3(r, fine, s, coarse, planes) };
    }
    rprj3_portable(r, fine, s, coarse, planes, bufs)
}

crate::multilevel! {
    /// [`rprj3`] for any CPU, with the reference's row buffers.
    fn rprj3_portable(
        r: &[f64],
        fine: Shape,
        s: &mut [f64],
        coarse: Shape,
        planes: Range<usize>,
        bufs: &mut RowBuffers,
    ) {
        let [_, c1, c2] = coarse.m;
        let m2 = fine.m[2];
        for j0 in planes {
            for j1 in 1..c1 - 1 {
                let (i0, i1) = (2 * j0, 2 * j1);
                let [x1, y1, _] = &mut *bufs;
                cross_sums(r, fine, i0, i1, x1, y1);
                let (x1, y1) = (&x1[..m2], &y1[..m2]);
                let rr = row(r, fine, i0, i1);
                let out = coarse.row(j0, j1);
                let out = &mut s[out..out + c2];
                for j2 in 1..c2 - 1 {
                    let i = 2 * j2;
                    out[j2] = 0.5 * rr[i]
                        + 0.25 * (rr[i - 1] + rr[i + 1] + x1[i])
                        + 0.125 * (x1[i - 1] + x1[i + 1] + y1[i])
                        + 0.0625 * (y1[i - 1] + y1[i + 1]);
                }
            }
        }
    }
}

crate::multilevel! {
    /// Add the trilinear interpolation of the coarse `z` to the fine `u`, ghosts included,
    /// for the coarse planes `planes` (each writes fine planes `2i` and `2i + 1`). With
    /// `replace`, write it instead, as adding it to a zeroed `u` would (each fine point is
    /// written once), so the caller need not zero `u` first.
    fn interp(
        z: &[f64],
        coarse: Shape,
        u: &mut [f64],
        fine: Shape,
        planes: Range<usize>,
        replace: bool,
        bufs: &mut RowBuffers,
    ) {
        let [_, c1, c2] = coarse.m;
        let [z1, z2, z3] = bufs;
        let (z1, z2, z3) = (&mut z1[..c2], &mut z2[..c2], &mut z3[..c2]);
        let pairs = c2 - 1;
        for i0 in planes {
            for i1 in 0..c1 - 1 {
                let zc = row(z, coarse, i0, i1);
                let (yp, zp, zpyp) = (
                    row(z, coarse, i0, i1 + 1),
                    row(z, coarse, i0 + 1, i1),
                    row(z, coarse, i0 + 1, i1 + 1),
                );
                for i in 0..c2 {
                    z1[i] = yp[i] + zc[i];
                    z2[i] = zp[i] + zc[i];
                    z3[i] = zpyp[i] + zp[i] + z1[i];
                }
                // Fine rows (2·i0 + a, 2·i1 + b).
                let mut add = |a: usize, b: usize, w: f64, src: &[f64]| {
                    let start = fine.row(2 * i0 + a, 2 * i1 + b);
                    interp_row(&mut u[start..start + 2 * pairs], w, src, replace);
                };
                add(0, 0, 1.0, zc);
                add(0, 1, 0.5, z1);
                add(1, 0, 0.5, z2);
                add(1, 1, 0.25, z3);
            }
        }
    }
}

/// One fine row of [`interp`]: point pairs 2·i, 2·i + 1 from coarse points i, i + 1 of
/// `src`, weighted by `w`. (Always inlined, so that it is compiled for the vector units
/// `interp` is compiled for.)
#[inline(always)]
fn interp_row(out: &mut [f64], w: f64, src: &[f64], replace: bool) {
    let pairs = out.len() / 2;
    let src = &src[..pairs + 1];
    if replace {
        for i in 0..pairs {
            out[2 * i] = w * src[i];
            out[2 * i + 1] = 0.5 * w * (src[i] + src[i + 1]);
        }
    } else {
        for i in 0..pairs {
            out[2 * i] += w * src[i];
            out[2 * i + 1] += 0.5 * w * (src[i] + src[i + 1]);
        }
    }
}

/// Interpolate the coarse correction into `u` and take the residual `r = v − A u`, one
/// sweep: the residual of fine plane p runs as soon as the interpolation has written
/// planes up to p + 1, while they are still in cache. (`interp` computes the ghost planes
/// itself, so nothing else is needed in between.) `v = None` means the residual is taken
/// in place and `u` is the level's fresh correction, which the interpolation writes
/// rather than adds to (see [`interp`]).
fn interp_resid(
    z: &[f64],
    coarse: Shape,
    u: &mut [f64],
    v: Option<&[f64]>,
    r: &mut [f64],
    fine: Shape,
    bufs: &mut RowBuffers,
) {
    let last = fine.m[0] - 1;
    let mut next = 1;
    for i0 in 0..coarse.m[0] - 1 {
        interp(z, coarse, u, fine, i0..i0 + 1, v.is_none(), bufs);
        let ready = (2 * i0 + 1).min(last);
        resid(u, v, r, fine, Part::planes(fine, next..ready), bufs);
        next = ready;
    }
    resid(u, v, r, fine, Part::planes(fine, next..last), bufs);
}

crate::multilevel! {
    /// Sum of squares and largest magnitude over the interior (eight partial sums, so the
    /// loop vectorises).
    fn norm_parts(r: &[f64], s: Shape) -> (f64, f64) {
        let [m0, m1, m2] = s.m;
        let (mut sums, mut maxes) = ([0.0f64; 8], [0.0f64; 8]);
        for i0 in 1..m0 - 1 {
            for i1 in 1..m1 - 1 {
                let inner = &row(r, s, i0, i1)[1..m2 - 1];
                let mut chunks = inner.chunks_exact(8);
                for chunk in &mut chunks {
                    for k in 0..8 {
                        sums[k] += chunk[k] * chunk[k];
                        maxes[k] = if chunk[k].abs() > maxes[k] {
                            chunk[k].abs()
                        } else {
                            maxes[k]
                        };
                    }
                }
                for (k, &x) in chunks.remainder().iter().enumerate() {
                    sums[k] += x * x;
                    maxes[k] = maxes[k].max(x.abs());
                }
            }
        }
        (sums.iter().sum(), maxes.iter().fold(0.0, |a, &b| a.max(b)))
    }
}

/// Fill the ghost layer of a whole periodic level from its own interior: x, then y, then
/// z, each copy carrying the ghosts the previous ones filled, so edges and corners come
/// out as a 26-message exchange would leave them.
fn fill_periodic(data: &mut [f64], s: Shape) {
    let [m0, m1, m2] = s.m;
    for i0 in 1..m0 - 1 {
        fill_plane_ghosts(data, s, i0, true);
    }
    let plane = m1 * m2;
    data.copy_within((m0 - 2) * plane..(m0 - 1) * plane, 0);
    data.copy_within(plane..2 * plane, (m0 - 1) * plane);
}

/// Fill the x ghosts of plane `i0`'s interior rows from the rows themselves and, with
/// `rows`, its ghost rows from its own interior rows, as a periodic exchange along x (and
/// y) does when one rank holds the whole of that dimension.
fn fill_plane_ghosts(data: &mut [f64], s: Shape, i0: usize, rows: bool) {
    fill_row_ghosts(data, s, i0, 1..s.m[1] - 1);
    let [_, m1, m2] = s.m;
    if rows {
        let (first, last) = (s.row(i0, 1), s.row(i0, m1 - 2));
        data.copy_within(last..last + m2, s.row(i0, 0));
        data.copy_within(first..first + m2, s.row(i0, m1 - 1));
    }
}

/// Fill the x ghosts of rows `rows` of plane `i0` from the rows themselves.
fn fill_row_ghosts(data: &mut [f64], s: Shape, i0: usize, rows: Range<usize>) {
    let m2 = s.m[2];
    for i1 in rows {
        let start = s.row(i0, i1);
        let row = &mut data[start..start + m2];
        row[0] = row[m2 - 2];
        row[m2 - 1] = row[1];
    }
}

/// Copy the `extent` box at `src_at` in `src` (shape `from`) to `dst_at` in `dst` (shape
/// `to`), one row at a time.
fn copy_box(
    (src, from, src_at): (&[f64], Shape, [usize; 3]),
    (dst, to, dst_at): (&mut [f64], Shape, [usize; 3]),
    extent: [usize; 3],
) {
    let [e0, e1, e2] = extent;
    for i0 in 0..e0 {
        for i1 in 0..e1 {
            let s = from.row(src_at[0] + i0, src_at[1] + i1) + src_at[2];
            let d = to.row(dst_at[0] + i0, dst_at[1] + i1) + dst_at[2];
            dst[d..d + e2].copy_from_slice(&src[s..s + e2]);
        }
    }
}

/// The storage of one grid of a level: this rank's block, or (gathered) the whole level.
enum LevelGrid<'c> {
    Block(Box<HaloGrid<'c, f64, 3>>),
    Whole(Vec<f64>),
}

impl LevelGrid<'_> {
    fn as_slice(&self) -> &[f64] {
        match self {
            LevelGrid::Block(g) => g.as_slice(),
            LevelGrid::Whole(v) => v,
        }
    }

    fn as_mut_slice(&mut self) -> &mut [f64] {
        match self {
            LevelGrid::Block(g) => g.as_mut_slice(),
            LevelGrid::Whole(v) => v,
        }
    }

    /// Fill the ghost layer: from the neighbours for a block, locally for a whole level.
    fn exchange(&mut self, shape: Shape) -> tessera::Result<()> {
        match self {
            LevelGrid::Block(g) => g.exchange(),
            LevelGrid::Whole(v) => {
                fill_periodic(v, shape);
                Ok(())
            }
        }
    }

    fn stats(&self) -> HaloStats {
        match self {
            LevelGrid::Block(g) => g.stats(),
            LevelGrid::Whole(_) => HaloStats::default(),
        }
    }
}

/// How the finest gathered level meets the distributed level above it.
struct Seam {
    /// This rank's block of the gathered level, with its ghost layer.
    shape: Shape,
    /// Where the block's storage starts in the whole level's storage.
    at: [usize; 3],
    /// Every rank's `at`, in rank order.
    all_at: Vec<[usize; 3]>,
    /// The block's storage (restriction goes in here, interpolation reads from here).
    block: Vec<f64>,
    /// The block's interior, packed for the allgather.
    packed: Vec<f64>,
    /// Every rank's packed block interior, as the allgather delivers them.
    gathered: Vec<f64>,
}

impl Seam {
    /// The seam of a rank whose block interior starts at `at` (whole-level coordinates)
    /// and has `extent` points. Collective.
    fn new(team: &Team<'_>, at: [usize; 3], extent: [usize; 3]) -> tessera::Result<Seam> {
        let mine = at.map(|a| a as u64);
        let mut all = vec![0u64; 3 * team.size()];
        team.run(Allgather::new(&mine).to(&mut all), Blocking)?;
        let shape = Shape::with_interior(extent);
        let interior: usize = extent.iter().product();
        Ok(Seam {
            shape,
            at,
            all_at: all
                .chunks_exact(3)
                .map(|c| [0, 1, 2].map(|d| c[d] as usize))
                .collect(),
            block: vec![0.0; shape.len()],
            packed: vec![0.0; interior],
            gathered: vec![0.0; interior * team.size()],
        })
    }

    /// Assemble the whole level in `whole` (ghosts included) from every rank's block.
    /// Collective.
    fn gather(&mut self, team: &Team<'_>, whole: &mut [f64], shape: Shape) -> tessera::Result<()> {
        let extent = self.shape.m.map(|m| m - 2);
        let inner = Shape { m: extent };
        copy_box(
            (&self.block, self.shape, [1; 3]),
            (&mut self.packed, inner, [0; 3]),
            extent,
        );
        team.run(
            Allgather::new(&self.packed).to(&mut self.gathered),
            Blocking,
        )?;
        for (packed, at) in self.gathered.chunks_exact(inner.len()).zip(&self.all_at) {
            let interior_at = at.map(|a| a + 1);
            copy_box((packed, inner, [0; 3]), (whole, shape, interior_at), extent);
        }
        fill_periodic(whole, shape);
        Ok(())
    }

    /// Cut our block, with its ghost layer, out of the whole level.
    fn scatter(&mut self, whole: &[f64], shape: Shape) {
        let extent = self.shape.m;
        copy_box(
            (whole, shape, self.at),
            (&mut self.block, self.shape, [0; 3]),
            extent,
        );
    }
}

/// One level of the hierarchy.
struct Level<'c> {
    u: LevelGrid<'c>,
    r: LevelGrid<'c>,
    shape: Shape,
    /// The finest gathered level only.
    seam: Option<Seam>,
}

/// The solver's state on one rank.
struct Multigrid<'c> {
    team: Team<'c>,
    /// Levels 1 (2³ points) to lt (the full grid), at index k − 1.
    levels: Vec<Level<'c>>,
    v: HaloGrid<'c, f64, 3>,
    smoother: [f64; 4],
    n: usize,
    /// Ranks along each dimension.
    procs: [usize; 3],
    bufs: RowBuffers,
    /// Time spent assembling the finest gathered level.
    gathering: Duration,
    /// The top level's residual is already restricted onto the level below (by
    /// [`Multigrid::smooth_and_resid_top`]), so the next V-cycle starts one level down.
    top_restricted: bool,
    /// [`fused_bytes`], read once.
    fused_bytes: usize,
}

impl<'c> Multigrid<'c> {
    fn new(
        ctx: &'c Context,
        data: &ClassData,
        strategy: HaloStrategy,
        gather_below: usize,
    ) -> tessera::Result<Self> {
        let procs = process_grid(ctx.ranks());
        let lt = data.n.trailing_zeros() as usize;
        let team = Team::world(ctx)?;
        // Levels 1..=gathered are whole on every rank; the top level never is.
        let gathered = (1..lt)
            .rev()
            .find(|&k| procs.iter().any(|&p| (1 << k) < p * gather_below))
            .unwrap_or(0);
        let mut levels = Vec::new();
        for k in 1..=lt {
            let whole = RectDomain::with_shape([1 << k; 3]);
            let level = if k <= gathered {
                let shape = Shape::with_interior(whole.shape());
                Level {
                    u: LevelGrid::Whole(vec![0.0; shape.len()]),
                    r: LevelGrid::Whole(vec![0.0; shape.len()]),
                    shape,
                    seam: None,
                }
            } else {
                let u = HaloGrid::new(ctx, whole, procs, 1, strategy)?;
                let r = HaloGrid::new(ctx, whole, procs, 1, strategy)?;
                let shape = Shape {
                    m: u.storage_shape(),
                };
                Level {
                    u: LevelGrid::Block(Box::new(u)),
                    r: LevelGrid::Block(Box::new(r)),
                    shape,
                    seam: None,
                }
            };
            levels.push(level);
        }
        if gathered > 0 {
            // Our block of the finest gathered level is half our block of the level above.
            let LevelGrid::Block(finer) = &levels[gathered].u else {
                unreachable!("the level above the gathered ones is distributed")
            };
            let interior = finer.interior();
            let at = [0, 1, 2].map(|d| interior.lo()[d] as usize / 2);
            let extent = [0, 1, 2].map(|d| interior.extent(d) / 2);
            levels[gathered - 1].seam = Some(Seam::new(&team, at, extent)?);
        }
        let whole = RectDomain::with_shape([data.n; 3]);
        let v = HaloGrid::new(ctx, whole, procs, 1, strategy)?;
        let longest = data.n + 2;
        Ok(Multigrid {
            team,
            levels,
            v,
            smoother: smoother(data.class),
            n: data.n,
            procs,
            bufs: std::array::from_fn(|_| vec![0.0; longest]),
            gathering: Duration::ZERO,
            top_restricted: false,
            fused_bytes: fused_bytes()?,
        })
    }

    /// Exchange time of every grid so far, the gathers included.
    fn exchange_stats(&self) -> HaloStats {
        let gathers = HaloStats {
            total: self.gathering,
            ..HaloStats::default()
        };
        self.levels
            .iter()
            .flat_map(|l| [l.u.stats(), l.r.stats()])
            .fold(self.v.stats() + gathers, |a, b| a + b)
    }

    fn top(&mut self) -> &mut Level<'c> {
        self.levels.last_mut().expect("at least one level")
    }

    /// NPB's `zran3`: v is zero but for +1 at the ten largest and −1 at the ten smallest
    /// of n³ random numbers (the sequence taken in x-fastest order), then a ghost exchange.
    fn zran3(&mut self) -> tessera::Result<()> {
        const SEED: u64 = 314_159_265;
        const KEEP: usize = 10;
        let n = self.n as u64;
        let interior = self.v.interior();
        let (lo, len) = (interior.lo(), interior.extent(2));
        let mut row = vec![0.0; len];
        // (value, linear index): the largest and the smallest seen here.
        let mut high: Vec<(f64, u64)> = Vec::with_capacity(KEEP + 1);
        let mut low: Vec<(f64, u64)> = Vec::with_capacity(KEEP + 1);
        for z in lo[0]..=interior.hi()[0] {
            for y in lo[1]..=interior.hi()[1] {
                let first = lo[2] as u64 + n * (y as u64 + n * z as u64);
                let mut x = crate::rng::mul_mod(pow_mod(A, first), SEED);
                vranlc(&mut x, A, &mut row);
                for (i, &value) in row.iter().enumerate() {
                    let at = first + i as u64;
                    keep(&mut high, KEEP, (value, at), |a, b| a > b);
                    keep(&mut low, KEEP, (value, at), |a, b| a < b);
                }
            }
        }
        let ranks = self.team.size();
        let mut places = Vec::new();
        for (mine, better, mark) in [
            (&low, (|a, b| a < b) as fn(f64, f64) -> bool, -1.0),
            (&high, |a, b| a > b, 1.0),
        ] {
            let mut values = [f64::NAN; KEEP];
            let mut indices = [u64::MAX; KEEP];
            for (k, &(value, at)) in mine.iter().enumerate() {
                (values[k], indices[k]) = (value, at);
            }
            let mut all_values = vec![0.0; KEEP * ranks];
            let mut all_indices = vec![0u64; KEEP * ranks];
            self.team
                .run(Allgather::new(&values).to(&mut all_values), Blocking)?;
            self.team
                .run(Allgather::new(&indices).to(&mut all_indices), Blocking)?;
            let mut best: Vec<(f64, u64)> = Vec::with_capacity(KEEP + 1);
            for (&value, &at) in all_values.iter().zip(&all_indices) {
                if at != u64::MAX {
                    keep(&mut best, KEEP, (value, at), better);
                }
            }
            places.extend(best.into_iter().map(|(_, at)| (at, mark)));
        }
        let shape = self.top().shape;
        let v = self.v.as_mut_slice();
        v.fill(0.0);
        for (at, mark) in places {
            let (x, y, z) = (at % n, at / n % n, at / (n * n));
            let p = tessera::Point([z as i64, y as i64, x as i64]);
            if interior.contains(p) {
                let local = p - interior.lo() + tessera::Point::all(1);
                v[shape.row(local[0] as usize, local[1] as usize) + local[2] as usize] = mark;
            }
        }
        self.v.exchange()
    }

    /// `r = v − A u` at the top level, then a ghost exchange of r.
    fn resid_top(&mut self) -> tessera::Result<()> {
        self.top_restricted = false;
        let bufs = &mut self.bufs;
        let top = self.levels.last_mut().expect("at least one level");
        let all = Part::all(top.shape);
        resid(
            top.u.as_slice(),
            Some(self.v.as_slice()),
            top.r.as_mut_slice(),
            top.shape,
            all,
            bufs,
        );
        top.r.exchange(top.shape)
    }

    /// The top level's last smoothing (`u += S r`, the end of NPB's `mg3P`) and then the
    /// residual of the iteration (`r = v − A u`), with their ghost exchanges.
    ///
    /// Where the x ghosts are our own (one rank along x), one sweep does both: the residual
    /// of plane p − 1 is taken as soon as plane p is smoothed and its own ghosts are
    /// filled, while those planes are still in cache. Only the rows that need a
    /// neighbour's new values (the first and last planes, and the first and last rows
    /// where y is split) wait for the exchange of u.
    ///
    /// Where y is ours too, the same sweep also restricts the new residual onto the level
    /// below (the next V-cycle's first step) as soon as the three fine planes a coarse
    /// plane reads are done, so the residual is not read back from memory for it; only the
    /// first and last coarse planes, which read the exchanged planes, wait.
    fn smooth_and_resid_top(&mut self) -> tessera::Result<()> {
        let c = self.smoother;
        let ours = self.procs.map(|p| p == 1);
        let bufs = &mut self.bufs;
        let lt = self.levels.len();
        let (lower, upper) = self.levels.split_at_mut(lt - 1);
        let top = &mut upper[0];
        let s = top.shape;
        if !ours[2] {
            let all = Part::all(s);
            psinv(top.r.as_slice(), top.u.as_mut_slice(), s, all, c, bufs);
            top.u.exchange(s)?;
            return self.resid_top();
        }
        let [m0, m1, m2] = s.m;
        let tile = (self.fused_bytes / (FUSED_PLANES * m2 * size_of::<f64>())).max(2);
        let tiled = tile < m1 - 2;
        let rows_ours = ours[1] && !tiled;
        let mut below = lower.last_mut().filter(|l| rows_ours && l.seam.is_none());
        let v = Some(self.v.as_slice());
        let (r, u) = (top.r.as_mut_slice(), top.u.as_mut_slice());
        // Rows `a..b` of every plane in turn; the residual lags a row behind the
        // smoothing (its rows a − 1 .. b − 1 read the smoothed rows a − 2 ..= b − 1), so
        // the smoothing of the next tile still finds the old residual in rows b − 1 and b.
        // Where rows are not all ours in one sweep, the first and last interior rows,
        // which read ghost rows, wait for the exchange.
        for a in (1..m1 - 1).step_by(tile) {
            let b = (a + tile).min(m1 - 1);
            let resid_rows = if rows_ours {
                1..m1 - 1
            } else {
                (a - 1).max(2)..(b - 1).min(m1 - 2)
            };
            for p in 1..m0 - 1 {
                let part = Part {
                    planes: p..p + 1,
                    rows: a..b,
                };
                psinv(r, u, s, part, c, bufs);
                if rows_ours {
                    fill_plane_ghosts(u, s, p, true);
                } else {
                    fill_row_ghosts(u, s, p, a..b);
                }
                if p < 3 {
                    continue;
                }
                let done = p - 1;
                let part = Part {
                    planes: done..done + 1,
                    rows: resid_rows.clone(),
                };
                resid(u, v, r, s, part, bufs);
                if let Some(coarse) = below.as_mut() {
                    // Coarse plane j reads fine planes 2j − 1 ..= 2j + 1: the first two
                    // and this one are done here.
                    fill_plane_ghosts(r, s, done, true);
                    if done % 2 == 1 && done >= 5 {
                        let j = (done - 1) / 2;
                        let cs = coarse.shape;
                        rprj3(r, s, coarse.r.as_mut_slice(), cs, j..j + 1, bufs);
                    }
                }
            }
        }
        top.u.exchange(s)?;
        let (r, u) = (top.r.as_mut_slice(), top.u.as_slice());
        let mut waited = vec![Part::planes(s, 1..2), Part::planes(s, m0 - 2..m0 - 1)];
        if !rows_ours {
            for edge in [1, m1 - 2] {
                waited.push(Part {
                    planes: 2..m0 - 2,
                    rows: edge..edge + 1,
                });
            }
        }
        // (A plane or row may be listed twice on a thin block; taking it again rewrites
        // the same values.)
        for part in waited {
            resid(u, v, r, s, part, bufs);
        }
        top.r.exchange(s)?;
        let Some(coarse) = below else {
            return Ok(());
        };
        let (cs, r) = (coarse.shape, top.r.as_slice());
        let last = cs.m[0] - 2;
        rprj3(r, s, coarse.r.as_mut_slice(), cs, 1..2, bufs);
        rprj3(r, s, coarse.r.as_mut_slice(), cs, last..last + 1, bufs);
        coarse.r.exchange(cs)?;
        self.top_restricted = true;
        Ok(())
    }

    /// The L2 norm of the top-level residual (NPB's rnm2) and its largest magnitude.
    fn norm(&mut self) -> tessera::Result<(f64, f64)> {
        let top = self.levels.last().expect("at least one level");
        let (sum, max) = norm_parts(top.r.as_slice(), top.shape);
        let sum = self.team.run(Allreduce::value(sum, Op::Sum), Blocking)?;
        let max = self.team.run(Allreduce::value(max, Op::Max), Blocking)?;
        Ok(((sum / (self.n as f64).powi(3)).sqrt(), max))
    }

    /// One iteration: a V-cycle (NPB's `mg3P`) and the top level's residual after it.
    fn iteration(&mut self) -> tessera::Result<()> {
        let lt = self.levels.len();
        let c = self.smoother;
        let bufs = &mut self.bufs;
        // Down: restrict the residual level by level (the top level's restriction may
        // have gone with the last residual).
        let restricted = std::mem::take(&mut self.top_restricted);
        for k in (1..lt).rev() {
            if restricted && k == lt - 1 {
                continue;
            }
            let (coarse, fine) = self.levels.split_at_mut(k);
            let (coarse, fine) = (&mut coarse[k - 1], &fine[0]);
            match &mut coarse.seam {
                None => {
                    rprj3(
                        fine.r.as_slice(),
                        fine.shape,
                        coarse.r.as_mut_slice(),
                        coarse.shape,
                        1..coarse.shape.m[0] - 1,
                        bufs,
                    );
                    coarse.r.exchange(coarse.shape)?;
                }
                Some(seam) => {
                    rprj3(
                        fine.r.as_slice(),
                        fine.shape,
                        &mut seam.block,
                        seam.shape,
                        1..seam.shape.m[0] - 1,
                        bufs,
                    );
                    let start = Instant::now();
                    seam.gather(&self.team, coarse.r.as_mut_slice(), coarse.shape)?;
                    self.gathering += start.elapsed();
                }
            }
        }
        // Bottom: smooth from zero.
        let bottom = &mut self.levels[0];
        bottom.u.as_mut_slice().fill(0.0);
        psinv(
            bottom.r.as_slice(),
            bottom.u.as_mut_slice(),
            bottom.shape,
            Part::all(bottom.shape),
            c,
            bufs,
        );
        bottom.u.exchange(bottom.shape)?;
        // Up: interpolate, take the residual, smooth; the top level's smoothing goes with
        // the residual after it.
        for k in 1..lt {
            let (coarse, fine) = self.levels.split_at_mut(k);
            let (coarse, fine) = (&mut coarse[k - 1], &mut fine[0]);
            let top = k == lt - 1;
            // Interpolate from our block of the coarse level.
            let (z, z_shape) = match &mut coarse.seam {
                None => (coarse.u.as_slice(), coarse.shape),
                Some(seam) => {
                    seam.scatter(coarse.u.as_slice(), coarse.shape);
                    (&seam.block[..], seam.shape)
                }
            };
            // Below the top, the correction starts from zero: the interpolation writes it.
            let v = if top { Some(self.v.as_slice()) } else { None };
            interp_resid(
                z,
                z_shape,
                fine.u.as_mut_slice(),
                v,
                fine.r.as_mut_slice(),
                fine.shape,
                bufs,
            );
            fine.r.exchange(fine.shape)?;
            if top {
                break;
            }
            psinv(
                fine.r.as_slice(),
                fine.u.as_mut_slice(),
                fine.shape,
                Part::all(fine.shape),
                c,
                bufs,
            );
            fine.u.exchange(fine.shape)?;
        }
        self.smooth_and_resid_top()
    }
}

/// Insert `item` into `kept` (at most `limit`, best first by `better`).
fn keep(kept: &mut Vec<(f64, u64)>, limit: usize, item: (f64, u64), better: fn(f64, f64) -> bool) {
    if kept.len() == limit && !better(item.0, kept[limit - 1].0) {
        return;
    }
    let at = kept
        .iter()
        .position(|k| better(item.0, k.0))
        .unwrap_or(kept.len());
    kept.insert(at, item);
    kept.truncate(limit);
}

/// What a rank of MG holds: `u` and `r` on every level and `v` on the finest, each its
/// block with one ghost layer, in the segment (the reference holds the same three).
pub fn footprint(class: Class, ranks: usize) -> crate::Footprint {
    let data = crate::class_data(&CLASSES, |c| c.class, class);
    let procs = process_grid(ranks);
    let block = |n: usize| procs.iter().map(|&p| n.div_ceil(p) + 2).product::<usize>();
    let levels: usize = (1..=data.n.trailing_zeros()).map(|k| block(1 << k)).sum();
    crate::Footprint {
        segment: (2 * levels + block(data.n)) * size_of::<f64>(),
        private: 0,
    }
}

/// Run MG at `class`; rank 0 gets the outcome.
pub fn run(ctx: &Context, class: Class, variant: Variant) -> tessera::Result<Option<Outcome>> {
    run_gathering(ctx, class, variant, GATHER_BELOW)
}

/// [`run`], gathering every level whose blocks would be thinner than `gather_below`
/// points (at least 2) along some dimension, for experiments and tests.
///
/// ```no_run
/// # fn main() -> tessera::Result<()> {
/// tessera::Job::threads(4).run(|ctx| {
///     // Every level below the finest is gathered onto every rank.
///     let outcome = tessera_npb::mg::run_gathering(ctx, tessera_npb::Class::S, tessera_npb::mg::Variant::TwentySix, 64)?;
///     assert!(outcome.map_or(true, |o| o.verified == Some(true)));
///     Ok(())
/// })?;
/// # Ok(())
/// # }
/// ```
pub fn run_gathering(
    ctx: &Context,
    class: Class,
    variant: Variant,
    gather_below: usize,
) -> tessera::Result<Option<Outcome>> {
    if gather_below < 2 {
        return Err(CoreError::BadArgument { call: "mg", argument: "gather_below", why: format!(
            "mg: gather_below must be at least 2 (the finest gathered level needs a point per rank), not {gather_below}"
        ) }
        .into());
    }
    let data = crate::class_data(&CLASSES, |c| c.class, class);
    let strategy = variant.strategy();
    crate::Benchmark::check_ranks(&Mg, ctx.ranks())?;
    let mut mg = Multigrid::new(ctx, data, strategy, gather_below)?;
    // Untimed: set up, one V-cycle, set up again (as the reference does).
    mg.zran3()?;
    mg.resid_top()?;
    mg.iteration()?;
    mg.top().u.as_mut_slice().fill(0.0);
    mg.zran3()?;
    mg.team.run(Barrier, Blocking)?;

    let before = mg.exchange_stats();
    let start = Instant::now();
    mg.resid_top()?;
    mg.norm()?;
    let mut progress = crate::Progress::new("mg", data.nit, ctx.rank())?;
    for done in 1..=data.nit {
        mg.iteration()?;
        progress.done(done);
    }
    let (rnm2, rnmu) = mg.norm()?;
    let mine = start.elapsed().as_secs_f64();
    crate::note_resident_share(); // every array is still held here
    let exchanges = mg.exchange_stats();
    let (in_exchange, waiting) = (
        (exchanges.total - before.total).as_secs_f64(),
        (exchanges.waiting - before.waiting).as_secs_f64(),
    );
    let elapsed = mg.team.run(Allreduce::value(mine, Op::Max), Blocking)?;
    let mut profile = BTreeMap::new();
    for (name, seconds) in [
        ("compute_s", mine - in_exchange),
        ("communication_s", in_exchange - waiting),
        ("wait_s", waiting),
    ] {
        let mean = mg.team.run(Allreduce::value(seconds, Op::Sum), Blocking)? / ctx.ranks() as f64;
        profile.insert(name.to_string(), mean);
    }
    if ctx.rank() != 0 {
        return Ok(None);
    }
    let points = (data.n as f64).powi(3);
    Ok(Some(Outcome {
        kernel: "MG".into(),
        class: class.to_string(),
        ranks: ctx.ranks(),
        variant: variant.to_string(),
        time_s: elapsed,
        mops: 58.0 * data.nit as f64 * points / elapsed / 1e6,
        verified: data.rnm2.map(|r| ((rnm2 - r) / r).abs() <= EPSILON),
        values: BTreeMap::from([("rnm2".to_string(), rnm2), ("rnmu".to_string(), rnmu)]),
        reference: data
            .rnm2
            .map(|r| BTreeMap::from([("rnm2".to_string(), r)]))
            .unwrap_or_default(),
        size: format!("{0}x{0}x{0}", data.n),
        iterations: data.nit as u64,
        operation: "floating point".into(),
        profile,
        ..Outcome::default()
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_grids_halve_the_slowest_dimension_first() {
        assert_eq!(process_grid(1), [1, 1, 1]);
        assert_eq!(process_grid(2), [2, 1, 1]);
        assert_eq!(process_grid(4), [2, 2, 1]);
        assert_eq!(process_grid(8), [2, 2, 2]);
        assert_eq!(process_grid(32), [4, 4, 2]);
    }

    #[test]
    fn keep_holds_the_best_in_order() {
        let mut kept = Vec::new();
        for (i, v) in [5.0, 1.0, 9.0, 3.0, 7.0, 8.0].into_iter().enumerate() {
            keep(&mut kept, 3, (v, i as u64), |a, b| a > b);
        }
        assert_eq!(kept, vec![(9.0, 2), (8.0, 5), (7.0, 4)]);
    }

    /// Values spread over several binades, so that a changed order of operations would
    /// show in the low bits.
    fn noise(len: usize, seed: u64) -> Vec<f64> {
        let mut x = seed;
        let mut values = vec![0.0; len];
        vranlc(&mut x, A, &mut values);
        values
            .iter()
            .map(|v| (v - 0.5) * (1.0 + 1000.0 * v * v))
            .collect()
    }

    /// A vector `resid`: `u`, `v` (or in place), `r`, the block and the rows.
    #[cfg(target_arch = "x86_64")]
    type Resid = unsafe fn(&[f64], Option<&[f64]>, &mut [f64], Shape, Part);

    /// One vector width's stencils, for the test below.
    #[cfg(target_arch = "x86_64")]
    struct VectorForm {
        name: &'static str,
        available: fn(Shape) -> bool,
        resid: Resid,
        psinv: unsafe fn(&[f64], &mut [f64], Shape, Part, [f64; 4]),
        rprj3: unsafe fn(&[f64], Shape, &mut [f64], Shape, Range<usize>),
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn vector_stencils_equal_the_portable_ones_bit_for_bit() {
        let forms = [
            VectorForm {
                name: "avx512",
                available: avx512::available,
                resid: avx512::resid,
                psinv: avx512::psinv,
                rprj3: avx512::rprj3,
            },
            VectorForm {
                name: "avx2",
                available: avx2::available,
                resid: avx2::resid,
                psinv: avx2::psinv,
                rprj3: avx2::rprj3,
            },
        ];
        let bits = |x: &[f64]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        let mut checked = Vec::new();
        for interior in [
            [4, 4, 8],
            [3, 5, 32],
            [2, 2, 16],
            [4, 2, 64],
            [3, 3, 4],
            [2, 3, 12],
        ] {
            let s = Shape::with_interior(interior);
            let (u, v, r0) = (
                noise(s.len(), 271_828_183),
                noise(s.len(), 314_159_265),
                noise(s.len(), 1),
            );
            let coarse = Shape::with_interior(interior.map(|e| e.div_ceil(2)));
            let fine = Shape::with_interior(coarse.m.map(|e| 2 * (e - 2)));
            let r = noise(fine.len(), 5);
            let mut bufs: RowBuffers = std::array::from_fn(|_| vec![0.0; 2 * fine.m[2]]);
            for form in forms.iter().filter(|f| (f.available)(s)) {
                let name = form.name;
                for with_v in [Some(&v[..]), None] {
                    let (mut fast, mut portable) = (r0.clone(), r0.clone());
                    // SAFETY: `available` said this CPU has the form's features.
                    unsafe { (form.resid)(&u, with_v, &mut fast, s, Part::all(s)) };
                    resid_portable(&u, with_v, &mut portable, s, Part::all(s), &mut bufs);
                    assert_eq!(bits(&fast), bits(&portable), "{name} resid, {interior:?}");
                    assert_ne!(bits(&fast), bits(&r0), "{name} resid wrote nothing");
                }
                let c = smoother(Class::A);
                let (mut fast, mut portable) = (u.clone(), u.clone());
                // SAFETY: as above.
                unsafe { (form.psinv)(&r0, &mut fast, s, Part::all(s), c) };
                psinv_portable(&r0, &mut portable, s, Part::all(s), c, &mut bufs);
                assert_eq!(bits(&fast), bits(&portable), "{name} psinv, {interior:?}");
                assert_ne!(bits(&fast), bits(&u), "{name} psinv wrote nothing");
                if (form.available)(coarse) {
                    let (mut fast, mut portable) = (noise(coarse.len(), 7), noise(coarse.len(), 7));
                    let all = 1..coarse.m[0] - 1;
                    // SAFETY: as above.
                    unsafe { (form.rprj3)(&r, fine, &mut fast, coarse, all.clone()) };
                    rprj3_portable(&r, fine, &mut portable, coarse, all, &mut bufs);
                    assert_eq!(bits(&fast), bits(&portable), "{name} rprj3, {:?}", coarse.m);
                    checked.push((name, "rprj3"));
                }
                checked.push((name, "resid psinv"));
            }
        }
        let ran: std::collections::BTreeSet<_> = checked.iter().map(|c| c.0).collect();
        if crate::simd::level() >= crate::simd::Level::Avx2 {
            assert!(
                ran.contains("avx2"),
                "the AVX2 stencils never ran: {checked:?}"
            );
        }
        eprintln!("vector stencils checked: {ran:?}");
    }
}
