//! MG's stencils on one rank's block: the residual, the smoother, restriction and
//! interpolation (portable code; the vector forms are in `vector`), and the periodic and
//! ghost fills they need.
//!
//! This module must never communicate: the level's exchanges are the caller's.

use super::*;

/// Row buffers of the portable stencils (the reference's u1/u2, r1/r2, x1/y1, z1/z2/z3).
pub(super) type RowBuffers = [Vec<f64>; 3];

/// The interior rows a stencil sweep covers: rows `rows` of planes `planes`.
#[derive(Clone, Debug)]
pub(super) struct Part {
    pub(super) planes: Range<usize>,
    pub(super) rows: Range<usize>,
}

impl Part {
    /// Every interior row of the interior planes `planes`.
    pub(super) fn planes(s: Shape, planes: Range<usize>) -> Part {
        Part {
            planes,
            rows: 1..s.m[1] - 1,
        }
    }

    /// The whole interior.
    pub(super) fn all(s: Shape) -> Part {
        Part::planes(s, 1..s.m[0] - 1)
    }
}

/// Row `(i0, i1)` of `src`.
#[inline(always)]
pub(super) fn row(src: &[f64], s: Shape, i0: usize, i1: usize) -> &[f64] {
    let start = s.row(i0, i1);
    &src[start..start + s.m[2]]
}

/// For row `(i0, i1)`: the sum of its four neighbour rows across y and z (`faces`) and of
/// its four diagonal neighbour rows in the y–z plane (`edges`), element by element (the
/// reference's u1/u2, r1/r2, x1/y1 buffers).
#[inline(always)]
pub(super) fn cross_sums(
    src: &[f64],
    s: Shape,
    i0: usize,
    i1: usize,
    faces: &mut [f64],
    edges: &mut [f64],
) {
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
pub(super) fn resid(
    u: &[f64],
    v: Option<&[f64]>,
    r: &mut [f64],
    s: Shape,
    part: Part,
    bufs: &mut RowBuffers,
) {
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
    pub(super) fn resid_portable(
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
pub(super) fn psinv(
    r: &[f64],
    u: &mut [f64],
    s: Shape,
    part: Part,
    c: [f64; 4],
    bufs: &mut RowBuffers,
) {
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
    pub(super) fn psinv_portable(
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

/// Restrict the fine residual `r` onto the coarse level's interior rows `part` of `s`
/// (coarse row `(j0, j1)` reads fine rows `2j1 − 1 ..= 2j1 + 1` of fine planes
/// `2j0 − 1 ..= 2j0 + 1`). The AVX-512 or AVX2 form where the CPU and the block allow it.
pub(super) fn rprj3(
    r: &[f64],
    fine: Shape,
    s: &mut [f64],
    coarse: Shape,
    part: Part,
    bufs: &mut RowBuffers,
) {
    #[cfg(target_arch = "x86_64")]
    if avx512::available(coarse) {
        // SAFETY: `available` checked that this CPU has AVX-512F.
        return unsafe { avx512::rprj3(r, fine, s, coarse, part) };
    }
    #[cfg(target_arch = "x86_64")]
    if avx2::available(coarse) {
        // SAFETY: `available` checked that this CPU has AVX2.
        return unsafe { avx2::rprj3(r, fine, s, coarse, part) };
    }
    rprj3_portable(r, fine, s, coarse, part, bufs)
}

crate::multilevel! {
    /// [`rprj3`] for any CPU, with the reference's row buffers.
    pub(super) fn rprj3_portable(
        r: &[f64],
        fine: Shape,
        s: &mut [f64],
        coarse: Shape,
        part: Part,
        bufs: &mut RowBuffers,
    ) {
        let c2 = coarse.m[2];
        let m2 = fine.m[2];
        for j0 in part.planes {
            for j1 in part.rows.clone() {
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
    /// for the coarse rows and planes `part` (coarse rows at most `0..coarse.m[1] − 1`,
    /// planes at most `0..coarse.m[0] − 1`: coarse row `i` of plane `k` writes fine rows `2i`
    /// and `2i + 1` of fine planes `2k` and `2k + 1`). With `replace`, write it instead, as
    /// adding it to a zeroed `u` would (each fine point is written once), so the caller
    /// need not zero `u` first.
    pub(super) fn interp(
        z: &[f64],
        coarse: Shape,
        u: &mut [f64],
        fine: Shape,
        part: Part,
        replace: bool,
        bufs: &mut RowBuffers,
    ) {
        let c2 = coarse.m[2];
        let [z1, z2, z3] = bufs;
        let (z1, z2, z3) = (&mut z1[..c2], &mut z2[..c2], &mut z3[..c2]);
        let pairs = c2 - 1;
        for i0 in part.planes {
            for i1 in part.rows.clone() {
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
pub(super) fn interp_row(out: &mut [f64], w: f64, src: &[f64], replace: bool) {
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
pub(super) fn interp_resid(
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
        let part = Part {
            planes: i0..i0 + 1,
            rows: 0..coarse.m[1] - 1,
        };
        interp(z, coarse, u, fine, part, v.is_none(), bufs);
        let ready = (2 * i0 + 1).min(last);
        resid(u, v, r, fine, Part::planes(fine, next..ready), bufs);
        next = ready;
    }
    resid(u, v, r, fine, Part::planes(fine, next..last), bufs);
}

crate::multilevel! {
    /// Sum of squares and largest magnitude over the interior (eight partial sums, so the
    /// loop vectorises).
    pub(super) fn norm_parts(r: &[f64], s: Shape) -> (f64, f64) {
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
pub(super) fn fill_periodic(data: &mut [f64], s: Shape) {
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
pub(super) fn fill_plane_ghosts(data: &mut [f64], s: Shape, i0: usize, rows: bool) {
    fill_row_ghosts(data, s, i0, 1..s.m[1] - 1);
    let [_, m1, m2] = s.m;
    if rows {
        let (first, last) = (s.row(i0, 1), s.row(i0, m1 - 2));
        data.copy_within(last..last + m2, s.row(i0, 0));
        data.copy_within(first..first + m2, s.row(i0, m1 - 1));
    }
}

/// Fill the x ghosts of rows `rows` of plane `i0` from the rows themselves.
pub(super) fn fill_row_ghosts(data: &mut [f64], s: Shape, i0: usize, rows: Range<usize>) {
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
pub(super) fn copy_box(
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
