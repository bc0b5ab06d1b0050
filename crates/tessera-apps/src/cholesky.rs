//! Cholesky factorisation `A = L·Lᵀ` of a symmetric positive definite block-cyclic
//! matrix: right-looking and blocked, with team broadcasts (seed 004 §6.2).
//!
//! Step `k`, for block column `k`:
//! 1. the rank holding the diagonal block factors it (LAPACK `dpotrf`);
//! 2. it broadcasts the factor down its process column, whose ranks solve their blocks of
//!    the panel below it (`L_ik = A_ik·L_kk⁻ᵀ`, one `dtrsm`);
//! 3. the panel's process column broadcasts each rank's panel rows along its process row;
//! 4. each process column allgathers the panel rows that match its columns (the panel
//!    transposed: the step seed 004 describes as handing the data to a member of the other
//!    team);
//! 5. every rank updates the lower triangle of its trailing blocks,
//!    `A_ij −= L_ik·L_jkᵀ`, one DGEMM per local block column.
//!
//! Only the lower triangle is referenced. A matrix that is not positive definite stops
//! every rank at the same step, naming the first column whose minor fails. Checked with
//! `‖A − L·Lᵀ‖_F / ‖A‖_F`, computing `L·Lᵀ` with the same broadcasts and the original
//! `A` regenerated.

use tessera::{MatrixLayout, Op, Result};

use crate::blas::{self, Solve, Trans};
use crate::common::{self, CommTimer, Grid};
use crate::{MatrixKind, Outcome, Problem, Variant};

/// The seed of the test matrix.
const SEED: u64 = 21;

/// Entry `(i, j)` of the test matrix: symmetric, uniform off the diagonal and dominant
/// on it, so positive definite; `indefinite` makes the diagonal at `n / 2` negative, so
/// the factorisation fails exactly there.
pub fn entry(kind: MatrixKind, n: usize, i: usize, j: usize) -> f64 {
    let (lo, hi) = (i.min(j), i.max(j));
    let v = common::uniform(SEED, hi, lo);
    match (i == j, kind) {
        (true, MatrixKind::Indefinite) if i == n / 2 => -(n as f64),
        (true, _) => v + n as f64,
        (false, _) => v,
    }
}

/// The panels of one step as a rank needs them for an update of its trailing lower
/// triangle: `rows` holds the panel's rows for this rank's local rows from `from_row`
/// (`(mloc − from_row) × w`, column-major), `cols` the panel's rows for its local columns
/// from `from_col` (`(nloc − from_col) × w`), i.e. the panel transposed.
struct StepPanels {
    rows: Vec<f64>,
    cols: Vec<f64>,
    from_row: usize,
    from_col: usize,
    width: usize,
}

/// Broadcast step `k`'s panel rows from global row `first` on (the panel's process column
/// holds them in `panel`, `(mloc − local rows below first) × w` column-major) along the
/// process rows, then transpose them into each process column. `status` travels with the
/// row broadcast: the panel's process column's value (a failing column, or `u64::MAX`)
/// reaches every rank and is returned.
fn broadcast_panels(
    grid: &Grid<'_>,
    layout: &MatrixLayout,
    k0: usize,
    first: usize,
    panel: Option<&[f64]>,
    status: u64,
    comm: &mut CommTimer,
) -> Result<(StepPanels, u64)> {
    let (prow, pcol) = grid.me;
    let n = layout.rows();
    let w = layout.col_block().min(n - k0);
    let (mloc, nloc) = (layout.local_rows(prow), layout.local_cols(pcol));
    let from_row = layout.local_rows_below(prow, first);
    let from_col = layout.local_cols_below(pcol, first);
    let rows_len = (mloc - from_row) * w;
    // One broadcast: the status word first, then the rows.
    let mut buf = vec![0.0; 1 + rows_len];
    if let Some(panel) = panel {
        buf[0] = f64::from_bits(status);
        buf[1..].copy_from_slice(&panel[..rows_len]);
    }
    comm.time(|| grid.row.broadcast(layout.col_owner(k0), &mut buf))?;
    let status = buf[0].to_bits();
    let rows_panel = buf.split_off(1);
    // The transpose: column team member r holds the panel rows of process row r; each
    // contributes those that are global rows of this process column's columns, in order.
    let p = grid.shape.0;
    let mine = |r: usize| {
        (0..layout.local_rows(r))
            .map(move |li| layout.global_row(r, li))
            .filter(move |&i| i >= first && layout.col_owner(i) == pcol)
    };
    let most = (0..p).map(|r| mine(r).count()).max().unwrap_or(0);
    let mut send = vec![0.0; most * w];
    let stride = mloc - from_row;
    for (slot, i) in mine(prow).enumerate() {
        let li = layout.local_row(i).1 - from_row;
        for c in 0..w {
            send[slot * w + c] = rows_panel[c * stride + li];
        }
    }
    let mut all = vec![0.0; most * w * p];
    comm.time(|| grid.col.allgather(&send, &mut all))?;
    // This rank's local columns from `from_col`: column j's panel row came from process
    // row row_owner(j), at its place among that row's contributions.
    let cols_n = nloc - from_col;
    let mut cols_panel = vec![0.0; cols_n * w];
    let mut next = vec![0usize; p];
    for lc in 0..cols_n {
        let j = layout.global_col(pcol, from_col + lc);
        let r = layout.row_owner(j);
        let slot = next[r];
        next[r] += 1;
        for c in 0..w {
            cols_panel[c * cols_n + lc] = all[(r * most + slot) * w + c];
        }
    }
    Ok((
        StepPanels {
            rows: rows_panel,
            cols: cols_panel,
            from_row,
            from_col,
            width: w,
        },
        status,
    ))
}

/// `T −= rows · colsᵀ` on the lower triangle (by blocks) of this rank's trailing part.
fn update_lower(layout: &MatrixLayout, me: (usize, usize), t: &mut [f64], s: &StepPanels) {
    let (mloc, nloc, ld) = (
        layout.local_rows(me.0),
        layout.local_cols(me.1),
        layout.local_ld(me.0),
    );
    let nb = layout.col_block();
    let (rows_ld, cols_ld) = ((mloc - s.from_row).max(1), (nloc - s.from_col).max(1));
    let mut lj = s.from_col;
    while lj < nloc {
        // Up to the end of this local block column.
        let cw = (nb - lj % nb).min(nloc - lj);
        let j0 = layout.global_col(me.1, lj);
        // Local rows from the block row of j0 on: the blocks on and below the diagonal.
        let li = layout.local_rows_below(me.0, j0 - j0 % nb).max(s.from_row);
        blas::gemm(
            Trans::No,
            Trans::Yes,
            mloc - li,
            cw,
            s.width,
            -1.0,
            &s.rows[li - s.from_row..],
            rows_ld,
            &s.cols[lj - s.from_col..],
            cols_ld,
            1.0,
            &mut t[lj * ld + li..],
            ld,
        );
        lj += cw;
    }
}

/// Factor the test matrix on `grid` and check the factor.
pub fn run(grid: &Grid<'_>, problem: &Problem) -> Result<Outcome> {
    if problem.variant != Variant::Blocking {
        return Err(crate::invalid(format!(
            "Cholesky has no variant {}",
            problem.variant
        )));
    }
    let (n, nb) = (problem.n, problem.block);
    let layout = grid.square(n, nb)?;
    let kind = problem.matrix;
    let mut a = common::matrix(grid, layout)?;
    a.fill(|i, j| entry(kind, n, i, j))?;
    let (prow, pcol) = grid.me;
    let (mloc, ld) = (layout.local_rows(prow), layout.local_ld(prow));
    let al = a.local()?;
    let mut comm = CommTimer::default();
    let start = common::start_clock(grid.world)?;
    let mut failure = None;
    for k0 in (0..n).step_by(nb) {
        let w = nb.min(n - k0);
        let (pr, pc) = layout.owner_coords(k0, k0);
        let mut panel = None;
        let mut status = u64::MAX;
        if pcol == pc {
            let lc = layout.local_col(k0).1;
            // 1–2: the diagonal block's factor, with its status, down the process column.
            let mut diag = vec![0.0; 1 + w * w];
            if prow == pr {
                let lr = layout.local_row(k0).1;
                let block = &mut al.data[lc * ld + lr..];
                let result = blas::potrf_lower(w, block, ld);
                diag[0] = f64::from_bits(result.err().map_or(u64::MAX, |c| (k0 + c) as u64));
                for c in 0..w {
                    diag[1 + c * w..1 + (c + 1) * w].copy_from_slice(&block[c * ld..c * ld + w]);
                }
            }
            comm.time(|| grid.col.broadcast(pr, &mut diag))?;
            status = diag[0].to_bits();
            // The panel below the diagonal block: this rank's local rows from k0 + w.
            let below = layout.local_rows_below(prow, k0 + w);
            if status == u64::MAX {
                blas::trsm(
                    Solve::RightLowerTransposed,
                    mloc - below,
                    w,
                    &diag[1..],
                    w,
                    &mut al.data[lc * ld + below..],
                    ld,
                );
            }
            let mut rows = vec![0.0; (mloc - below) * w];
            for c in 0..w {
                rows[c * (mloc - below)..(c + 1) * (mloc - below)]
                    .copy_from_slice(&al.data[(lc + c) * ld + below..(lc + c) * ld + mloc]);
            }
            panel = Some(rows);
        }
        // 3–4: every rank learns the status with the panel rows.
        let (s, status) = broadcast_panels(
            grid,
            &layout,
            k0,
            k0 + w,
            panel.as_deref(),
            status,
            &mut comm,
        )?;
        if status != u64::MAX {
            failure = Some(format!(
                "the matrix is not positive definite: the leading minor fails at column {status} \
                 (0-based; the pivot there is not positive)"
            ));
            break;
        }
        // 5.
        update_lower(&layout, grid.me, al.data, &s);
    }
    let (seconds, comm_seconds) = common::stop_clock(grid.world, start, &comm)?;
    if let Some(why) = failure {
        return Ok(Outcome::failed(seconds, comm_seconds, why));
    }
    let residual = check(grid, &layout, al.data, kind, &mut comm)?;
    Ok(Outcome {
        seconds,
        comm_seconds,
        flops: (n as f64).powi(3) / 3.0,
        residual: Some(residual),
        residual_name: "‖A − L·Lᵀ‖_F / (‖A‖_F·N·ε)".into(),
        failure: None,
    })
}

/// `‖A − L·Lᵀ‖_F / (‖A‖_F·N·ε)` over the whole symmetric matrix, from its lower triangle:
/// `L·Lᵀ` is accumulated step by step with the factorisation's own panel broadcasts.
fn check(
    grid: &Grid<'_>,
    layout: &MatrixLayout,
    l: &[f64],
    kind: MatrixKind,
    comm: &mut CommTimer,
) -> Result<f64> {
    let (prow, pcol) = grid.me;
    let n = layout.rows();
    let nb = layout.col_block();
    let (mloc, nloc, ld) = (
        layout.local_rows(prow),
        layout.local_cols(pcol),
        layout.local_ld(prow),
    );
    // D = −L·Lᵀ, accumulated.
    let mut d = vec![0.0; ld * nloc];
    for k0 in (0..n).step_by(nb) {
        let w = nb.min(n - k0);
        let panel = (pcol == layout.col_owner(k0)).then(|| {
            let lc = layout.local_col(k0).1;
            let from = layout.local_rows_below(prow, k0);
            let mut rows = vec![0.0; (mloc - from) * w];
            for c in 0..w {
                for li in from..mloc {
                    // L's panel: zero above the diagonal (the upper triangle still holds A).
                    let keep = layout.global_row(prow, li) >= k0 + c;
                    rows[c * (mloc - from) + li - from] =
                        if keep { l[(lc + c) * ld + li] } else { 0.0 };
                }
            }
            rows
        });
        let (s, _) = broadcast_panels(grid, layout, k0, k0, panel.as_deref(), 0, comm)?;
        update_lower(layout, grid.me, &mut d, &s);
    }
    // Sum over the lower triangle, off-diagonal entries twice (the upper mirror).
    let (mut diff, mut norm) = (0.0, 0.0);
    for lj in 0..nloc {
        let j = layout.global_col(pcol, lj);
        for li in 0..mloc {
            let i = layout.global_row(prow, li);
            if i < j {
                continue;
            }
            let weight = if i == j { 1.0 } else { 2.0 };
            let a = entry(kind, n, i, j);
            diff += weight * (a + d[lj * ld + li]).powi(2);
            norm += weight * a * a;
        }
    }
    let diff = grid.world.allreduce_value(diff, Op::Sum)?;
    let norm = grid.world.allreduce_value(norm, Op::Sum)?;
    Ok(diff.sqrt() / (norm.sqrt() * n as f64 * f64::EPSILON))
}
