//! LU factorisation with partial pivoting, `P·A = L·U`, of a block-cyclic matrix:
//! blocked and right-looking, with HPL's row swaps (seed 002's dense LU).
//!
//! Step `k`, for block column `k`:
//! 1. the panel's process column factors the panel (`n − k0` rows, `w` columns). On a
//!    grid with one process row the panel is local and LAPACK's `dgetrf` does it; else
//!    column by column, with the pivot found by a max-location allreduce down the process
//!    column and the two swapped rows exchanged by a sum allreduce (each has one owner);
//! 2. the panel, its pivots and a status word are broadcast along every process row;
//! 3. every rank swaps the pivoted rows in its trailing columns (HPL: the columns left of
//!    the panel keep their rows, and the solve applies each step's swaps in turn);
//! 4. the panel's process row solves its block row of `U` (`dtrsm` with the panel's unit
//!    lower triangle) and broadcasts it down every process column;
//! 5. every rank updates its trailing part, `A₂₂ −= L₂₁·U₁₂`, with one DGEMM.
//!
//! A pivot that is exactly zero stops every rank at the same step, naming the column.
//! Checked as HPL does: solve `A·x = b` with the factors and report
//! `‖A·x − b‖∞ / (ε·(‖A‖∞‖x‖∞ + ‖b‖∞)·N)` with the original `A` regenerated.

use tessera::coll::{Allreduce, Broadcast};
use tessera::Blocking;
use tessera::{Loc, MatrixLayout, Op, Result};

use crate::blas::{self, Solve, Trans, Triangle};
use crate::common::{self, CommTimer, Grid};
use crate::{MatrixKind, Outcome, Problem, Variant};

/// Seeds of the matrix and the right-hand side.
const SEEDS: [u64; 2] = [31, 32];

/// Entry `(i, j)` of the test matrix: uniform, except that `singular` zeroes column
/// `n / 2`, which leaves an exactly zero pivot there.
pub fn entry(kind: MatrixKind, n: usize, i: usize, j: usize) -> f64 {
    if kind == MatrixKind::Singular && j == n / 2 {
        0.0
    } else {
        common::uniform(SEEDS[0], i, j)
    }
}

/// No failure: the status word's value when every pivot so far is non-zero.
const OK: u64 = u64::MAX;

/// Factor the panel of step `k0` in place on its process column (local columns `lc..lc +
/// w` of `a`): the pivots' global rows, and the first zero pivot's column if any.
fn factor_panel(
    grid: &Grid<'_>,
    layout: &MatrixLayout,
    a: &mut [f64],
    k0: usize,
    lc: usize,
    comm: &mut CommTimer,
) -> Result<(Vec<usize>, u64)> {
    let prow = grid.me.0;
    let n = layout.rows();
    let w = layout.col_block().min(n - k0);
    let (mloc, ld) = (layout.local_rows(prow), layout.local_ld(prow));
    let lr0 = layout.local_rows_below(prow, k0);
    let mut ipiv = vec![0; w];
    if grid.shape.0 == 1 {
        // One process row: local rows are global rows, and the panel is all here.
        let status = blas::getrf(mloc - lr0, w, &mut a[lc * ld + lr0..], ld, &mut ipiv)
            .err()
            .map_or(OK, |c| (k0 + c) as u64);
        ipiv.iter_mut().for_each(|p| *p += k0);
        return Ok((ipiv, status));
    }
    let col = |c: usize| (lc + c) * ld;
    // Column jj's multipliers, copied out so the later columns can be updated in place.
    let mut multipliers = Vec::with_capacity(mloc);
    for jj in 0..w {
        let j = k0 + jj;
        // This rank's candidates: its local rows from global row j on.
        let from = layout.local_rows_below(prow, j);
        let mut best = Loc::new(-1.0, u64::MAX);
        for li in from..mloc {
            let v = a[col(jj) + li].abs();
            if v > best.value {
                best = Loc::new(v, layout.global_row(prow, li) as u64);
            }
        }
        let best = comm.time(|| grid.col.run(Allreduce::value(best, Op::MaxLoc), Blocking))?;
        if best.value <= 0.0 {
            return Ok((ipiv, j as u64));
        }
        let piv = best.index as usize;
        ipiv[jj] = piv;
        // The pivot row and row j, each from its owner, to every rank of the column.
        let mut rows = vec![0.0; 2 * w];
        for (slot, r) in [piv, j].into_iter().enumerate() {
            let (owner, li) = layout.local_row(r);
            if owner == prow {
                for c in 0..w {
                    rows[slot * w + c] = a[col(c) + li];
                }
            }
        }
        let rows = comm.time(|| -> Result<Vec<f64>> {
            let mut sum = vec![0.0; 2 * w];
            grid.col
                .run(Allreduce::new(&rows, Op::Sum).to(&mut sum), Blocking)?;
            Ok(sum)
        })?;
        // Swap: row j takes the pivot row, the pivot row takes row j.
        for (r, slot) in [(j, 0), (piv, 1)] {
            let (owner, li) = layout.local_row(r);
            if owner == prow {
                for c in 0..w {
                    a[col(c) + li] = rows[slot * w + c];
                }
            }
        }
        // Multipliers below row j, then the rank-1 update of the panel's later columns.
        let below = layout.local_rows_below(prow, j + 1);
        let pivot = rows[jj];
        for li in below..mloc {
            a[col(jj) + li] /= pivot;
        }
        multipliers.clear();
        multipliers.extend_from_slice(&a[col(jj) + below..col(jj) + mloc]);
        for c in jj + 1..w {
            let u = rows[c];
            for (x, l) in a[col(c) + below..col(c) + mloc]
                .iter_mut()
                .zip(&multipliers)
            {
                *x -= l * u;
            }
        }
    }
    Ok((ipiv, OK))
}

/// Swap the rows that step `k0`'s pivots `ipiv` name, in this rank's local columns from
/// `lc_from`, with `mine` and `all` as the scratch of the exchange.
fn swap_rows(
    grid: &Grid<'_>,
    layout: &MatrixLayout,
    a: &mut [f64],
    (k0, ipiv): (usize, &[usize]),
    lc_from: usize,
    (mine, all): (&mut Vec<f64>, &mut Vec<f64>),
    comm: &mut CommTimer,
) -> Result<()> {
    let (prow, pcol) = grid.me;
    let (nloc, ld) = (layout.local_cols(pcol), layout.local_ld(prow));
    let cols = nloc - lc_from;
    if cols == 0 {
        return Ok(());
    }
    if grid.shape.0 == 1 {
        for (jj, &piv) in ipiv.iter().enumerate() {
            let j = k0 + jj;
            if piv != j {
                for lj in lc_from..nloc {
                    a.swap(lj * ld + j, lj * ld + piv);
                }
            }
        }
        return Ok(());
    }
    // The rows involved, and which original row each ends up holding.
    let mut rows: Vec<usize> = (k0..k0 + ipiv.len()).chain(ipiv.iter().copied()).collect();
    rows.sort_unstable();
    rows.dedup();
    let slot = |r: usize| rows.binary_search(&r).expect("an involved row");
    let mut holds: Vec<usize> = rows.clone();
    for (jj, &piv) in ipiv.iter().enumerate() {
        holds.swap(slot(k0 + jj), slot(piv));
    }
    // Every involved row's trailing part, each from its owner, summed down the column.
    mine.clear();
    mine.resize(rows.len() * cols, 0.0);
    for (s, &r) in rows.iter().enumerate() {
        let (owner, li) = layout.local_row(r);
        if owner == prow {
            for c in 0..cols {
                mine[s * cols + c] = a[(lc_from + c) * ld + li];
            }
        }
    }
    all.resize(mine.len(), 0.0);
    comm.time(|| {
        grid.col
            .run(Allreduce::new(mine, Op::Sum).to(all), Blocking)
    })?;
    for (s, &r) in rows.iter().enumerate() {
        let (owner, li) = layout.local_row(r);
        if owner == prow {
            let from = slot(holds[s]);
            for c in 0..cols {
                a[(lc_from + c) * ld + li] = all[from * cols + c];
            }
        }
    }
    Ok(())
}

/// Factor the test matrix on `grid`, solve with the factors and check the solution.
pub fn run(grid: &Grid<'_>, problem: &Problem) -> Result<Outcome> {
    if problem.variant != Variant::Blocking {
        return Err(crate::invalid(format!(
            "LU has no variant {}",
            problem.variant
        )));
    }
    let (n, nb) = (problem.n, problem.block);
    let layout = grid.square(n, nb)?;
    let kind = problem.matrix;
    let mut redistribution = None;
    let mut a = common::input_matrix(
        grid,
        problem,
        |i, j| entry(kind, n, i, j),
        &mut redistribution,
    )?;
    let (prow, pcol) = grid.me;
    let (mloc, nloc, ld) = (
        layout.local_rows(prow),
        layout.local_cols(pcol),
        layout.local_ld(prow),
    );
    let al = a.local()?;
    let mut pivots = Vec::with_capacity(n);
    let mut comm = CommTimer::default();
    let start = common::start_clock(grid.world)?;
    let mut failure = None;
    // Buffers kept from step to step (fresh ones would cost page faults every step).
    let (mut buf, mut u, mut mine, mut all) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for k0 in (0..n).step_by(nb) {
        let w = nb.min(n - k0);
        let (pr, pc) = layout.owner_coords(k0, k0);
        let lr0 = layout.local_rows_below(prow, k0);
        let panel_rows = mloc - lr0;
        // 1–2: the panel, its pivots and the status along the process rows.
        buf.clear();
        buf.resize(1 + w + panel_rows * w, 0.0);
        if pcol == pc {
            let lc = layout.local_col(k0).1;
            let (ipiv, status) = factor_panel(grid, &layout, al.data, k0, lc, &mut comm)?;
            buf[0] = f64::from_bits(status);
            for (b, p) in buf[1..1 + w].iter_mut().zip(&ipiv) {
                *b = f64::from_bits(*p as u64);
            }
            for c in 0..w {
                buf[1 + w + c * panel_rows..1 + w + (c + 1) * panel_rows]
                    .copy_from_slice(&al.data[(lc + c) * ld + lr0..(lc + c) * ld + mloc]);
            }
        }
        comm.time(|| grid.row.run(Broadcast::in_place(pc, &mut buf), Blocking))?;
        let status = buf[0].to_bits();
        if status != OK {
            failure = Some(format!(
                "the matrix is singular: the pivot of column {status} (0-based) is exactly zero"
            ));
            break;
        }
        let ipiv: Vec<usize> = buf[1..1 + w].iter().map(|b| b.to_bits() as usize).collect();
        pivots.extend_from_slice(&ipiv);
        let panel = &buf[1 + w..];
        let panel_ld = panel_rows.max(1);
        // 3: swaps in the trailing columns.
        let lc1 = layout.local_cols_below(pcol, k0 + w);
        swap_rows(
            grid,
            &layout,
            al.data,
            (k0, &ipiv),
            lc1,
            (&mut mine, &mut all),
            &mut comm,
        )?;
        // 4: U's block row, solved on the panel's process row, down every process column.
        let trailing = nloc - lc1;
        u.clear();
        u.resize(w * trailing, 0.0);
        if trailing == 0 {
            continue; // the last block column: nothing right of it
        }
        if prow == pr {
            let lr = layout.local_row(k0).1;
            let l11 = &panel[lr - lr0..];
            blas::trsm(
                Solve::LeftUnitLower,
                w,
                trailing,
                l11,
                panel_ld,
                &mut al.data[lc1 * ld + lr..],
                ld,
            );
            for c in 0..trailing {
                u[c * w..(c + 1) * w]
                    .copy_from_slice(&al.data[(lc1 + c) * ld + lr..(lc1 + c) * ld + lr + w]);
            }
        }
        comm.time(|| grid.col.run(Broadcast::in_place(pr, &mut u), Blocking))?;
        // 5: the trailing update.
        let lr1 = layout.local_rows_below(prow, k0 + w);
        blas::gemm(
            Trans::No,
            Trans::No,
            mloc - lr1,
            trailing,
            w,
            -1.0,
            &panel[lr1 - lr0..],
            panel_ld,
            &u,
            w,
            1.0,
            &mut al.data[lc1 * ld + lr1..],
            ld,
        );
    }
    let (seconds, comm_seconds) = common::stop_clock(grid.world, start, &comm)?;
    if let Some(why) = failure {
        return Ok(Outcome::failed(seconds, comm_seconds, why).redistributed(redistribution));
    }
    let residual = check(grid, &layout, al.data, (&pivots, Swaps::Trailing), kind)?;
    Ok(Outcome::checked(
        seconds,
        comm_seconds,
        residual,
        "‖A·x − b‖∞ / (ε·(‖A‖∞‖x‖∞ + ‖b‖∞)·N)",
    )
    .redistributed(redistribution))
}

/// Where a factorisation applied its row swaps, which decides when a solve applies them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Swaps {
    /// To the trailing columns only (HPL's order, this module's): step `k`'s swaps are
    /// applied to `b` just before step `k`'s solve.
    Trailing,
    /// To whole rows, `L`'s columns too (LAPACK's and ScaLAPACK's `getrf`): every swap is
    /// applied to `b` before the solve.
    WholeRows,
}

/// Solve `A·x = b` with the distributed factors (every rank keeps `x` whole) and return
/// HPL's scaled residual.
pub(crate) fn check(
    grid: &Grid<'_>,
    layout: &MatrixLayout,
    lu: &[f64],
    (pivots, swaps): (&[usize], Swaps),
    kind: MatrixKind,
) -> Result<f64> {
    let (prow, pcol) = grid.me;
    let n = layout.rows();
    let nb = layout.col_block();
    let ld = layout.local_ld(prow);
    let world = grid.world;
    let b: Vec<f64> = (0..n).map(|i| common::uniform(SEEDS[1], i, 0)).collect();
    let mut y = b.clone();
    // One triangular step: the diagonal block's owner solves its part of `y` and sends it
    // to everyone; the block column's ranks subtract their blocks' products from the rows
    // `rows` (global), summed by an allreduce (each row has one contributor).
    let step = |y: &mut Vec<f64>,
                k0: usize,
                triangle: Triangle,
                rows: std::ops::Range<usize>|
     -> Result<()> {
        let w = nb.min(n - k0);
        let (pr, pc) = layout.owner_coords(k0, k0);
        if grid.me == (pr, pc) {
            let (lr, lc) = (layout.local_row(k0).1, layout.local_col(k0).1);
            blas::trsv(triangle, w, &lu[lc * ld + lr..], ld, &mut y[k0..k0 + w]);
        }
        let mut part = y[k0..k0 + w].to_vec();
        world.run(
            Broadcast::in_place(layout.rank(pr, pc), &mut part),
            Blocking,
        )?;
        y[k0..k0 + w].copy_from_slice(&part);
        let mut delta = vec![0.0; rows.len()];
        if pcol == pc {
            let lc = layout.local_col(k0).1;
            let (from, to) = (
                layout.local_rows_below(prow, rows.start),
                layout.local_rows_below(prow, rows.end),
            );
            let mut local = vec![0.0; to - from];
            blas::gemv(
                Trans::No,
                to - from,
                w,
                -1.0,
                &lu[lc * ld + from..],
                ld,
                &part,
                0.0,
                &mut local,
            );
            for (li, v) in (from..to).zip(local) {
                delta[layout.global_row(prow, li) - rows.start] = v;
            }
        }
        let mut sum = vec![0.0; delta.len()];
        world.run(Allreduce::new(&delta, Op::Sum).to(&mut sum), Blocking)?;
        for (yi, d) in y[rows].iter_mut().zip(sum) {
            *yi += d;
        }
        Ok(())
    };
    // L·y = P·b: each step's swaps before its solve (HPL's order), or all of them first.
    let swap = |y: &mut Vec<f64>, rows: std::ops::Range<usize>| {
        for i in rows {
            y.swap(i, pivots[i]);
        }
    };
    if swaps == Swaps::WholeRows {
        swap(&mut y, 0..n);
    }
    for k0 in (0..n).step_by(nb) {
        let w = nb.min(n - k0);
        if swaps == Swaps::Trailing {
            swap(&mut y, k0..k0 + w);
        }
        step(&mut y, k0, Triangle::UnitLower, k0 + w..n)?;
    }
    // U·x = y, last block first.
    for k0 in (0..n).step_by(nb).rev() {
        step(&mut y, k0, Triangle::Upper, 0..k0)?;
    }
    let x = y;
    let (ax, row_sums) =
        common::matvec_generated(world, layout, grid.me, |i, j| entry(kind, n, i, j), &x)?;
    let r = common::max_abs(&ax.iter().zip(&b).map(|(u, v)| u - v).collect::<Vec<_>>());
    let scale = common::max_abs(&row_sums) * common::max_abs(&x) + common::max_abs(&b);
    Ok(r / (f64::EPSILON * scale * n as f64))
}
