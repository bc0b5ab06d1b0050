//! SUMMA: `C = A · B` for block-cyclic `A`, `B`, `C` over a process grid, by row and
//! column team broadcasts of panels (seed 004 §6.1).
//!
//! For every block column `k` of `A` (and block row `k` of `B`), the process column that
//! holds it broadcasts its part of the panel along each process row, and the process row
//! that holds `B`'s block row broadcasts down each process column; every rank then adds
//! the product of the two panels to its local `C` with one DGEMM. The `prefetch` variant
//! starts the nonblocking broadcasts of panel `k + 1` before multiplying panel `k`, and
//! advances them between slices of that multiply. The `onesided` variant broadcasts
//! nothing: with `A` and `B` in the shared phase for the whole multiply (they are only
//! read), every rank passes the owners' panels straight to DGEMM, borrowed where their
//! memory is mapped (every rank of a host) and fetched with one get where not.
//!
//! Checked with a vector: `C·x` against `A·(B·x)`.

use tessera::coll::Broadcast;
use tessera::{Blocking, Nonblocking};
use tessera::{MatrixLayout, Result};

use crate::blas::{self, Trans};
use crate::common::{self, CommTimer, Grid};
use crate::{Outcome, Problem, Variant};

/// Matrix seeds: `A`, `B` and the check vector (the ScaLAPACK baseline fills its `A` and
/// `B` from the same).
pub(crate) const SEEDS: [u64; 3] = [11, 12, 13];

/// The two panels of step `k` as this rank needs them: `A`'s (its local rows × the panel
/// width) and `B`'s (the panel width × its local columns), column-major, dense.
#[derive(Default)]
struct Panels {
    a: Vec<f64>,
    b: Vec<f64>,
    width: usize,
}

/// Run SUMMA on `grid` for `problem` and check the product.
pub fn run(grid: &Grid<'_>, problem: &Problem) -> Result<Outcome> {
    let (n, nb) = (problem.n, problem.block);
    let layout = grid.square(n, nb)?;
    let mut redistribution = None;
    let entries = |seed| move |i, j| common::uniform(seed, i, j);
    let mut a = common::input_matrix(grid, problem, entries(SEEDS[0]), &mut redistribution)?;
    let mut b = common::input_matrix(grid, problem, entries(SEEDS[1]), &mut redistribution)?;
    let mut c = common::matrix(grid, layout)?;
    c.fill(|_, _| 0.0)?;
    if problem.variant == Variant::OneSided {
        return onesided(grid, &layout, [a, b, c], redistribution);
    }
    let (prow, pcol) = grid.me;
    let (mloc, nloc, ld) = (
        layout.local_rows(prow),
        layout.local_cols(pcol),
        layout.local_ld(prow),
    );
    let (al, bl, cl) = (a.local()?, b.local()?, c.local()?);
    // This rank's share of step k's panels, if it holds any, into `p`'s buffers, which
    // are kept from step to step; where it holds none, buffers of the right length whose
    // contents the broadcast overwrites.
    let own_panels = |k: usize, p: &mut Panels| {
        let k0 = k * nb;
        p.width = nb.min(n - k0);
        let width = p.width;
        if layout.col_owner(k0) == pcol {
            let lj = layout.local_col(k0).1;
            p.a.clear();
            p.a.extend_from_slice(&al.data[lj * ld..lj * ld + width * ld]);
        } else {
            p.a.resize(width * ld, 0.0);
        }
        p.b.resize(width * nloc, 0.0);
        if layout.row_owner(k0) == prow {
            let li = layout.local_row(k0).1;
            for lj in 0..nloc {
                p.b[lj * width..(lj + 1) * width]
                    .copy_from_slice(&bl.data[lj * ld + li..lj * ld + li + width]);
            }
        }
    };
    let mut own = Panels::default();
    let roots = |k: usize| (layout.col_owner(k * nb), layout.row_owner(k * nb));
    let steps = n.div_ceil(nb);
    let mut comm = CommTimer::default();
    let start = common::start_clock(grid.world)?;
    match problem.variant {
        Variant::Blocking => {
            for k in 0..steps {
                own_panels(k, &mut own);
                let (a_root, b_root) = roots(k);
                comm.time(|| -> Result<()> {
                    grid.row
                        .run(Broadcast::in_place(a_root, &mut own.a), Blocking)?;
                    grid.col
                        .run(Broadcast::in_place(b_root, &mut own.b), Blocking)
                })?;
                multiply(&own, mloc, nloc, ld, cl.data, &mut || Ok(()))?;
            }
        }
        Variant::Lookahead | Variant::LookaheadOne | Variant::OneSided => {
            return Err(crate::invalid(format!(
                "SUMMA has no variant {}",
                problem.variant
            )));
        }
        Variant::Prefetch => {
            // Two sets of panel buffers take turns: the broadcasts of step k + 1 fill
            // one (in place, so nothing is copied or allocated on the way) while step k
            // multiplies with the other.
            let start_step = |k: usize, mut p: Panels| -> Result<_> {
                own_panels(k, &mut p);
                let (a_root, b_root) = roots(k);
                Ok((
                    grid.row.run(Broadcast::owned(a_root, p.a), Nonblocking)?,
                    grid.col.run(Broadcast::owned(b_root, p.b), Nonblocking)?,
                    p.width,
                ))
            };
            let mut pending = Some(comm.time(|| start_step(0, own))?);
            let mut spare = Panels::default();
            for k in 0..steps {
                let (ra, rb, width) = pending.take().expect("step k was started");
                let p = comm.time(|| -> Result<Panels> {
                    Ok(Panels {
                        a: ra.wait()?,
                        b: rb.wait()?,
                        width,
                    })
                })?;
                if k + 1 < steps {
                    let next = std::mem::take(&mut spare);
                    pending = Some(comm.time(|| start_step(k + 1, next))?);
                }
                // Between slices of the multiply, move the next panels along.
                let mut progress = || -> Result<()> {
                    if let Some((ra, rb, _)) = pending.as_mut() {
                        ra.test()?;
                        rb.test()?;
                    }
                    Ok(())
                };
                multiply(&p, mloc, nloc, ld, cl.data, &mut progress)?;
                spare = p;
            }
        }
    }
    let (seconds, comm_seconds) = common::stop_clock(grid.world, start, &comm)?;
    let residual = check(grid, &layout, al.data, bl.data, cl.data)?;
    Ok(Outcome::checked(seconds, comm_seconds, residual, RESIDUAL).redistributed(redistribution))
}

/// The `onesided` variant (see the module documentation): `A` and `B` shared from start
/// to end, one DGEMM per step on the owners' panels, no broadcast.
fn onesided(
    grid: &Grid<'_>,
    layout: &MatrixLayout,
    [mut a, mut b, mut c]: [tessera::BlockCyclicMatrix<'_, f64>; 3],
    redistribution: Option<f64>,
) -> Result<Outcome> {
    let (n, nb) = (layout.rows(), layout.col_block());
    let (prow, pcol) = grid.me;
    let (mloc, nloc, ld) = (
        layout.local_rows(prow),
        layout.local_cols(pcol),
        layout.local_ld(prow),
    );
    let mut comm = CommTimer::default();
    let start = common::start_clock(grid.world)?;
    comm.time(|| -> Result<()> {
        a.share()?;
        b.share()
    })?;
    {
        let cl = c.local()?;
        for k0 in (0..n).step_by(nb) {
            let w = nb.min(n - k0);
            // A's panel: this process row's local columns lc.. of the process column that
            // holds block column k (same local rows and leading dimension as here).
            let (acol, lc) = layout.local_col(k0);
            let a_panel = comm.time(|| a.peer_local(prow, acol, lc * ld..(lc + w) * ld))?;
            // B's panel: local rows li.. of the process row that holds block row k, every
            // local column of this process column, with that process row's leading
            // dimension.
            let (brow, li) = layout.local_row(k0);
            let ldb = layout.local_ld(brow);
            let span = if nloc == 0 {
                0..0
            } else {
                li..(nloc - 1) * ldb + li + w
            };
            let b_panel = comm.time(|| b.peer_local(brow, pcol, span))?;
            blas::gemm(
                Trans::No,
                Trans::No,
                mloc,
                nloc,
                w,
                1.0,
                &a_panel,
                ld,
                &b_panel,
                ldb,
                1.0,
                cl.data,
                ld,
            );
        }
    }
    comm.time(|| -> Result<()> {
        a.reclaim()?;
        b.reclaim()
    })?;
    let (seconds, comm_seconds) = common::stop_clock(grid.world, start, &comm)?;
    let residual = check(
        grid,
        layout,
        a.local()?.data,
        b.local()?.data,
        c.local()?.data,
    )?;
    Ok(Outcome::checked(seconds, comm_seconds, residual, RESIDUAL).redistributed(redistribution))
}

/// What [`check`] computes.
const RESIDUAL: &str = "‖C·x − A·(B·x)‖∞ / (‖A‖∞‖B‖∞‖x‖∞·N·ε)";

/// `C = A·B` checked on a vector: `‖C·x − A·(B·x)‖∞ / (‖A‖∞‖B‖∞‖x‖∞·N·ε)`, from the local
/// arrays of the three matrices in `layout` (Tessera's, or ScaLAPACK's of the same
/// problem).
pub(crate) fn check(
    grid: &Grid<'_>,
    layout: &MatrixLayout,
    a: &[f64],
    b: &[f64],
    c: &[f64],
) -> Result<f64> {
    let n = layout.rows();
    let x: Vec<f64> = (0..n).map(|i| common::uniform(SEEDS[2], i, 0)).collect();
    let world = grid.world;
    let bx = common::matvec(world, layout, grid.me, b, &x)?;
    let abx = common::matvec(world, layout, grid.me, a, &bx)?;
    let cx = common::matvec(world, layout, grid.me, c, &x)?;
    let err = common::max_abs(&cx.iter().zip(&abx).map(|(u, v)| u - v).collect::<Vec<_>>());
    let scale = common::norm_inf(world, layout, grid.me, a)?
        * common::norm_inf(world, layout, grid.me, b)?
        * common::max_abs(&x);
    Ok(err / (scale * n as f64 * f64::EPSILON))
}

/// `C += A_panel · B_panel` in slices of columns, calling `progress` between them.
fn multiply(
    p: &Panels,
    mloc: usize,
    nloc: usize,
    ld: usize,
    c: &mut [f64],
    progress: &mut dyn FnMut() -> Result<()>,
) -> Result<()> {
    // Slices of at least 256 columns keep DGEMM efficient; at most 8 per panel.
    let slice = nloc.div_ceil(8).max(256);
    for j0 in (0..nloc).step_by(slice) {
        let w = slice.min(nloc - j0);
        blas::gemm(
            Trans::No,
            Trans::No,
            mloc,
            w,
            p.width,
            1.0,
            &p.a,
            ld,
            &p.b[j0 * p.width..],
            p.width,
            1.0,
            &mut c[j0 * ld..],
            ld,
        );
        progress()?;
    }
    Ok(())
}
