//! The top level's way up a V-cycle in one sweep: the interpolation of the coarse
//! correction, the residual, the smoothing and the residual again (NPB's last
//! `interp`, `resid`, `psinv` of `mg3P` and the `resid` after it), each stage a plane
//! behind the one before, so that u, v and r each cross memory once on the way up, where
//! stage by stage (or in the two sweeps of interpolation with residual, then smoothing
//! with residual) they cross it two or three times.
//!
//! This module must never change an operation's order: each point is computed by the same
//! stencil call, on the same operands, as in the stage-by-stage form, so results are equal
//! bit for bit. It communicates only through the level's ghost exchanges, called by every
//! rank in the same order.

use super::*;

/// Planes of the finest level the sweep holds at once (per rank): the interpolation writes
/// two of u, the stages behind it read three each of u (five in all) and r (four) and two
/// of v, and a few of the coarse correction go with them.
const SWEEP_PLANES: usize = 14;

/// Which planes and rows each stage of the sweep takes, and which wait for an exchange.
///
/// Stage `lag` (1: the first residual, 2: the smoothing, 3: the second residual) reads
/// the stage before's values one point further out in every direction, so it runs `lag`
/// planes and, in tiles of rows, `lag` rows behind the interpolation; the planes and rows
/// within `lag` of a block's edge need what neighbours send (or, in tiles, the periodic
/// copy of a row not yet reached) and wait.
struct Lagged {
    /// Interior planes and rows of the block: `1..m0 − 1`, `1..m1 − 1`.
    planes: Range<usize>,
    rows: Range<usize>,
}

/// `interior` less `lag − 1` at each end: what stage `lag` takes in the sweep.
fn inner(interior: &Range<usize>, lag: usize) -> Range<usize> {
    (interior.start + lag - 1)..interior.end.saturating_sub(lag - 1)
}

impl Lagged {
    /// The planes stage `lag` sweeps.
    fn planes(&self, lag: usize) -> Range<usize> {
        inner(&self.planes, lag)
    }

    /// The rows stage `lag` sweeps in the tile whose interpolation writes fine rows
    /// `a..b` (every interior row where the block's rows are all one tile's, `whole`).
    fn rows(&self, lag: usize, a: usize, b: usize, whole: bool) -> Range<usize> {
        if whole {
            return self.rows.clone();
        }
        let swept = inner(&self.rows, lag);
        a.saturating_sub(lag).max(swept.start)..b.saturating_sub(lag).min(swept.end)
    }

    /// The parts of stage `lag` that wait: its edge planes, and (unless the rows are
    /// `whole`) its edge rows of the other planes; each point once.
    fn waiting(&self, lag: usize, whole: bool) -> Vec<Part> {
        // Each interior index not swept, once and in order.
        let edges = |all: &Range<usize>| {
            let swept = inner(all, lag);
            all.clone().filter(move |i| !swept.contains(i))
        };
        let mut parts: Vec<Part> = edges(&self.planes)
            .map(|p| Part {
                planes: p..p + 1,
                rows: self.rows.clone(),
            })
            .collect();
        let swept_planes = self.planes(lag);
        if !whole && !swept_planes.is_empty() {
            for row in edges(&self.rows) {
                parts.push(Part {
                    planes: swept_planes.clone(),
                    rows: row..row + 1,
                });
            }
        }
        parts
    }
}

impl Multigrid<'_> {
    /// The top level's way up: add the interpolated correction to u, take the residual,
    /// smooth, take the residual again (NPB's last steps of `mg3P` and the `resid` of the
    /// iteration), with the ghost exchanges between them.
    ///
    /// Where the x ghosts are our own (one rank along x), one sweep does all four: going
    /// plane by plane, the residual of plane p − 1 as soon as the interpolation has written
    /// plane p, the smoothing of p − 2, the second residual of p − 3, while those planes
    /// are in cache. Where the planes the sweep holds would pass `fused_bytes`, it goes in
    /// tiles of rows, each stage a row further behind (so no stage overwrites what the
    /// stage before still reads in the next tile). Only the planes (and rows, where y is
    /// split or the sweep goes in tiles) that need a neighbour's new values wait for the
    /// exchanges. Where the level below is not gathered, the sweep also restricts the new
    /// residual onto it (the next V-cycle's first step) as soon as the fine rows and
    /// planes a coarse row reads are done; the coarse rows and planes that read waiting
    /// ones wait with them.
    pub(super) fn up_top(&mut self) -> tessera::Result<()> {
        let c = self.smoother;
        let ours = self.procs.map(|p| p == 1);
        let fused = self.fused_bytes > 0 && ours[2];
        let lt = self.levels.len();
        let (lower, upper) = self.levels.split_at_mut(lt - 1);
        let (top, coarse) = (&mut upper[0], &mut lower[lt - 2]);
        let s = top.shape;
        let bufs = &mut self.bufs;
        let v = self.v.as_slice();
        if let Some(seam) = &mut coarse.seam {
            seam.scatter(coarse.u.as_slice(), coarse.shape);
        }
        let (z, zs) = match &coarse.seam {
            None => (coarse.u.as_slice(), coarse.shape),
            Some(seam) => (&seam.block[..], seam.shape),
        };
        if !fused {
            let (u, r) = (top.u.as_mut_slice(), top.r.as_mut_slice());
            interp_resid(z, zs, u, Some(v), r, s, bufs);
            top.r.exchange(s)?;
            psinv(
                top.r.as_slice(),
                top.u.as_mut_slice(),
                s,
                Part::all(s),
                c,
                bufs,
            );
            top.u.exchange(s)?;
            let (u, r) = (top.u.as_slice(), top.r.as_mut_slice());
            resid(u, Some(v), r, s, Part::all(s), bufs);
            return top.r.exchange(s);
        }
        let [m0, m1, m2] = s.m;
        let [c0, c1, _] = zs.m;
        // Coarse rows per tile (each writes two fine rows); the coarse rows 0..c1 − 1 write
        // every fine row, ghosts included.
        let tile = (self.fused_bytes / (SWEEP_PLANES * m2 * size_of::<f64>()) / 2).max(1);
        let whole = ours[1] && tile >= c1 - 1;
        let restrict = coarse.seam.is_none();
        let cs = coarse.shape;
        let lagged = Lagged {
            planes: 1..m0 - 1,
            rows: 1..m1 - 1,
        };
        let (u, r) = (top.u.as_mut_slice(), top.r.as_mut_slice());
        let fill = |data: &mut [f64], plane: usize, rows: Range<usize>| {
            if whole {
                fill_plane_ghosts(data, s, plane, true);
            } else {
                fill_row_ghosts(data, s, plane, rows);
            }
        };
        // The coarse planes and rows restricted in the sweep: 2..planes_done and (in tiles)
        // 2..rows_done; coarse row (j0, j1) reads fine rows 2·j1 − 1 ..= 2·j1 + 1 of fine
        // planes 2·j0 − 1 ..= 2·j0 + 1, so it waits for the second residual's edges.
        let (mut planes_done, mut rows_done) = (2, 2);
        for ca in (0..c1 - 1).step_by(tile) {
            let cb = (ca + tile).min(c1 - 1);
            let (a, b) = (2 * ca, 2 * cb);
            let rows: [Range<usize>; 3] = [1, 2, 3].map(|lag| lagged.rows(lag, a, b, whole));
            // The coarse rows whose fine rows this tile's second residual finishes.
            let coarse_rows = if whole {
                1..cs.m[1] - 1
            } else {
                rows_done..(rows[2].end / 2).max(rows_done)
            };
            rows_done = coarse_rows.end;
            // The next plane of each stage.
            let mut next = [1, 2, 3].map(|lag| lagged.planes(lag).start);
            for k in 0..c0 - 1 {
                let part = Part {
                    planes: k..k + 1,
                    rows: ca..cb,
                };
                interp(z, zs, u, s, part, false, bufs);
                // Fine planes below `ready` hold the interpolation; each stage takes the
                // planes whose neighbours the stage before has finished.
                let mut ready = 2 * k + 2;
                for (stage, lag) in [1, 2, 3].into_iter().enumerate() {
                    let end = ready.saturating_sub(1).min(lagged.planes(lag).end);
                    for p in next[stage]..end {
                        let part = Part {
                            planes: p..p + 1,
                            rows: rows[stage].clone(),
                        };
                        match lag {
                            2 => {
                                psinv(r, u, s, part, c, bufs);
                                fill(u, p, rows[stage].clone());
                            }
                            _ => {
                                resid(u, Some(v), r, s, part, bufs);
                                if lag == 1 || restrict {
                                    fill(r, p, rows[stage].clone());
                                }
                            }
                        }
                        if lag == 3 && restrict && p % 2 == 1 && p >= 5 {
                            let j = (p - 1) / 2;
                            let part = Part {
                                planes: j..j + 1,
                                rows: coarse_rows.clone(),
                            };
                            rprj3(r, s, coarse.r.as_mut_slice(), cs, part, bufs);
                            planes_done = j + 1;
                        }
                    }
                    next[stage] = next[stage].max(end);
                    ready = end;
                }
            }
        }
        top.r.exchange(s)?;
        for part in lagged.waiting(2, whole) {
            psinv(top.r.as_slice(), top.u.as_mut_slice(), s, part, c, bufs);
        }
        top.u.exchange(s)?;
        let (u, r) = (top.u.as_slice(), top.r.as_mut_slice());
        for part in lagged.waiting(3, whole) {
            resid(u, Some(v), r, s, part, bufs);
        }
        top.r.exchange(s)?;
        if !restrict {
            return Ok(());
        }
        let (r, coarse_r) = (top.r.as_slice(), coarse.r.as_mut_slice());
        let mut waiting = vec![
            Part::planes(cs, 1..2),
            Part::planes(cs, planes_done.max(2)..cs.m[0] - 1),
        ];
        if !whole {
            for rows in [1..2, rows_done.max(2)..cs.m[1] - 1] {
                waiting.push(Part {
                    planes: 2..planes_done,
                    rows,
                });
            }
        }
        for part in waiting {
            rprj3(r, s, coarse_r, cs, part, bufs);
        }
        coarse.r.exchange(cs)?;
        self.top_restricted = true;
        Ok(())
    }
}
