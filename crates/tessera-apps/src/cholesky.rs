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

use std::ops::Range;

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
/// triangle, in buffers kept from step to step (fresh allocations of this size would cost
/// page faults every step). `buf[1..]` holds the panel's rows for this rank's local rows
/// from `from_row` (`(mloc − from_row) × w`, column-major; `buf[0]` is the status word);
/// `cols` the panel's rows for its local columns from `from_col`, transposed (`w × (nloc −
/// from_col)`, column-major: one panel row per column), except on a grid with one process
/// row, where every panel row is already among this rank's rows and the update reads
/// them there (`cols` unused).
#[derive(Default)]
struct StepPanels {
    buf: Vec<f64>,
    send: Vec<f64>,
    all: Vec<f64>,
    cols: Vec<f64>,
    from_row: usize,
    from_col: usize,
    width: usize,
}

impl StepPanels {
    /// The panel rows of this rank's local rows.
    fn rows(&self) -> &[f64] {
        &self.buf[1..]
    }

    /// Size step `k0`'s buffers for panel rows from global row `first` on, and return the
    /// part the panel's process column fills before [`broadcast`](Self::broadcast): the
    /// rows, `(mloc − local rows below first) × w` column-major.
    fn start(
        &mut self,
        layout: &MatrixLayout,
        me: (usize, usize),
        k0: usize,
        first: usize,
    ) -> &mut [f64] {
        let w = layout.col_block().min(layout.rows() - k0);
        let mloc = layout.local_rows(me.0);
        self.from_row = layout.local_rows_below(me.0, first);
        self.from_col = layout.local_cols_below(me.1, first);
        self.width = w;
        self.buf.resize(1 + (mloc - self.from_row) * w, 0.0);
        &mut self.buf[1..]
    }

    /// Broadcast the rows (filled by the panel's process column after
    /// [`start`](Self::start)) along the process rows with `status`, then transpose them
    /// into each process column. Returns the status of the panel's process column.
    fn broadcast(
        &mut self,
        grid: &Grid<'_>,
        layout: &MatrixLayout,
        k0: usize,
        first: usize,
        status: u64,
        comm: &mut CommTimer,
    ) -> Result<u64> {
        let root = layout.col_owner(k0);
        if grid.me.1 == root {
            self.buf[0] = f64::from_bits(status);
        }
        comm.time(|| grid.row.broadcast(root, &mut self.buf))?;
        self.transpose(grid, layout, first, comm)?;
        Ok(self.buf[0].to_bits())
    }

    /// The panel rows that are this rank's columns, from each process column's ranks:
    /// fills `cols` from the rows every rank of the process row now holds.
    fn transpose(
        &mut self,
        grid: &Grid<'_>,
        layout: &MatrixLayout,
        first: usize,
        comm: &mut CommTimer,
    ) -> Result<()> {
        if grid.shape.0 == 1 {
            return Ok(());
        }
        let (prow, pcol) = grid.me;
        let w = self.width;
        let (mloc, nloc) = (layout.local_rows(prow), layout.local_cols(pcol));
        // Column team member r holds the panel rows of process row r; each contributes
        // those that are global rows of this process column's columns, in order, each
        // row's w values together.
        let p = grid.shape.0;
        let mine = |r: usize| {
            (0..layout.local_rows(r))
                .map(move |li| layout.global_row(r, li))
                .filter(move |&i| i >= first && layout.col_owner(i) == pcol)
        };
        let most = (0..p).map(|r| mine(r).count()).max().unwrap_or(0);
        let stride = mloc - self.from_row;
        let rows = &self.buf[1..];
        self.send.clear();
        for i in mine(prow) {
            let li = layout.local_row(i).1 - self.from_row;
            self.send.extend((0..w).map(|c| rows[c * stride + li]));
        }
        self.send.resize(most * w, 0.0);
        let gathered: &[f64] = if p == 1 {
            &self.send
        } else {
            self.all.resize(most * w * p, 0.0);
            comm.time(|| grid.col.allgather(&self.send, &mut self.all))?;
            &self.all
        };
        // This rank's local columns from `from_col`: column j's panel row came from process
        // row row_owner(j), at its place among that row's contributions.
        let cols_n = nloc - self.from_col;
        self.cols.resize(cols_n * w, 0.0);
        let mut next = vec![0usize; p];
        for lc in 0..cols_n {
            let j = layout.global_col(pcol, self.from_col + lc);
            let r = layout.row_owner(j);
            let at = (r * most + next[r]) * w;
            next[r] += 1;
            self.cols[lc * w..(lc + 1) * w].copy_from_slice(&gathered[at..at + w]);
        }
        Ok(())
    }
}

/// `T −= rows · colsᵀ` on the lower triangle (by blocks) of this rank's trailing part,
/// for the local columns in `cols` (clipped to the trailing part), calling `progress`
/// after each local block column.
fn update_lower(
    layout: &MatrixLayout,
    me: (usize, usize),
    t: &mut [f64],
    s: &StepPanels,
    cols: Range<usize>,
    progress: &mut dyn FnMut() -> Result<()>,
) -> Result<()> {
    let (mloc, nloc, ld) = (
        layout.local_rows(me.0),
        layout.local_cols(me.1),
        layout.local_ld(me.0),
    );
    let nb = layout.col_block();
    let w = s.width;
    let rows_ld = (mloc - s.from_row).max(1);
    let (mut lj, end) = (cols.start.max(s.from_col), cols.end.min(nloc));
    while lj < end {
        // Up to the end of this local block column.
        let cw = (nb - lj % nb).min(end - lj);
        let j0 = layout.global_col(me.1, lj);
        // Local rows from the block row of j0 on: the blocks on and below the diagonal.
        let li = layout.local_rows_below(me.0, j0 - j0 % nb).max(s.from_row);
        // The panel rows of these columns: with one process row, rows j0.. of this rank's
        // own panel rows (used transposed); else the transposed copy.
        let (tb, b, ldb) = if layout.grid().0 == 1 {
            let at = layout.local_row(j0).1 - s.from_row;
            (Trans::Yes, &s.rows()[at..], rows_ld)
        } else {
            (Trans::No, &s.cols[(lj - s.from_col) * w..], w)
        };
        blas::gemm(
            Trans::No,
            tb,
            mloc - li,
            cw,
            w,
            -1.0,
            &s.rows()[li - s.from_row..],
            rows_ld,
            b,
            ldb,
            1.0,
            &mut t[lj * ld + li..],
            ld,
        );
        lj += cw;
        progress()?;
    }
    Ok(())
}

/// Steps 1–2 on the panel's process column: factor the diagonal block, broadcast it with
/// its status down the column, solve the panel below it and copy this rank's panel rows
/// into `rows`. Returns the status (`u64::MAX`, or the failing column).
fn factor_panel(
    grid: &Grid<'_>,
    layout: &MatrixLayout,
    a: &mut [f64],
    k0: usize,
    rows: &mut [f64],
    diag: &mut Vec<f64>,
    comm: &mut CommTimer,
) -> Result<u64> {
    let prow = grid.me.0;
    let n = layout.rows();
    let w = layout.col_block().min(n - k0);
    let pr = layout.row_owner(k0);
    let (mloc, ld) = (layout.local_rows(prow), layout.local_ld(prow));
    let lc = layout.local_col(k0).1;
    diag.resize(1 + w * w, 0.0);
    if prow == pr {
        let lr = layout.local_row(k0).1;
        let block = &mut a[lc * ld + lr..];
        let result = blas::potrf_lower(w, block, ld);
        diag[0] = f64::from_bits(result.err().map_or(u64::MAX, |c| (k0 + c) as u64));
        for c in 0..w {
            diag[1 + c * w..1 + (c + 1) * w].copy_from_slice(&block[c * ld..c * ld + w]);
        }
    }
    comm.time(|| grid.col.broadcast(pr, diag))?;
    let status = diag[0].to_bits();
    // The panel below the diagonal block: this rank's local rows from k0 + w.
    let below = layout.local_rows_below(prow, k0 + w);
    if status == u64::MAX {
        blas::trsm(
            Solve::RightLowerTransposed,
            mloc - below,
            w,
            &diag[1..],
            w,
            &mut a[lc * ld + below..],
            ld,
        );
    }
    let n_rows = mloc - below;
    for c in 0..w {
        rows[c * n_rows..(c + 1) * n_rows]
            .copy_from_slice(&a[(lc + c) * ld + below..(lc + c) * ld + mloc]);
    }
    Ok(status)
}

/// The error for a failed status word.
fn not_positive_definite(status: u64) -> String {
    format!(
        "the matrix is not positive definite: the leading minor fails at column {status} \
         (0-based; the pivot there is not positive)"
    )
}

/// The blocking variant: each step factors its panel, broadcasts it and updates.
fn blocking(
    grid: &Grid<'_>,
    layout: &MatrixLayout,
    a: &mut [f64],
    comm: &mut CommTimer,
) -> Result<Option<String>> {
    let (n, nb) = (layout.rows(), layout.col_block());
    let (mut panels, mut diag) = (StepPanels::default(), Vec::new());
    for k0 in (0..n).step_by(nb) {
        let w = nb.min(n - k0);
        let rows = panels.start(layout, grid.me, k0, k0 + w);
        let mut status = u64::MAX;
        if grid.me.1 == layout.col_owner(k0) {
            status = factor_panel(grid, layout, a, k0, rows, &mut diag, comm)?;
        }
        // 3–4: every rank learns the status with the panel rows.
        let status = panels.broadcast(grid, layout, k0, k0 + w, status, comm)?;
        if status != u64::MAX {
            return Ok(Some(not_positive_definite(status)));
        }
        // 5.
        update_lower(layout, grid.me, a, &panels, 0..usize::MAX, &mut || Ok(()))?;
    }
    Ok(None)
}

/// The lookahead variant: the process column of panel `k + 1` updates that block column
/// first, factors it and starts its nonblocking row broadcast before the rest of step `k`'s
/// update (advancing the broadcast between blocks), so the other columns find the next
/// panel already on its way when they finish their update.
fn lookahead(
    grid: &Grid<'_>,
    layout: &MatrixLayout,
    a: &mut [f64],
    comm: &mut CommTimer,
) -> Result<Option<String>> {
    let (n, nb) = (layout.rows(), layout.col_block());
    let pcol = grid.me.1;
    let width = |k0: usize| nb.min(n - k0);
    let (mut cur, mut next, mut diag) = (StepPanels::default(), StepPanels::default(), Vec::new());
    let mut pending = None;
    // The first panel.
    let rows = cur.start(layout, grid.me, 0, width(0));
    if pcol == layout.col_owner(0) {
        let status = factor_panel(grid, layout, a, 0, rows, &mut diag, comm)?;
        cur.buf[0] = f64::from_bits(status);
        pending = Some(comm.time(|| grid.row.broadcast_nb(pcol, &cur.buf))?);
    }
    for k0 in (0..n).step_by(nb) {
        let first = k0 + width(k0);
        let request = match pending.take() {
            Some(request) => request,
            None => comm.time(|| grid.row.broadcast_nb(layout.col_owner(k0), &cur.buf))?,
        };
        cur.buf = comm.time(|| request.wait())?;
        let status = cur.buf[0].to_bits();
        if status != u64::MAX {
            return Ok(Some(not_positive_definite(status)));
        }
        cur.transpose(grid, layout, first, comm)?;
        if first >= n {
            update_lower(layout, grid.me, a, &cur, 0..usize::MAX, &mut || Ok(()))?;
            break;
        }
        // The next panel's block column, in local columns.
        let k1 = first;
        let next_cols = if pcol == layout.col_owner(k1) {
            let lc = layout.local_col(k1).1;
            lc..lc + width(k1)
        } else {
            0..0
        };
        let rows = next.start(layout, grid.me, k1, k1 + width(k1));
        if !next_cols.is_empty() {
            update_lower(layout, grid.me, a, &cur, next_cols.clone(), &mut || Ok(()))?;
            let status = factor_panel(grid, layout, a, k1, rows, &mut diag, comm)?;
            next.buf[0] = f64::from_bits(status);
            pending = Some(comm.time(|| grid.row.broadcast_nb(pcol, &next.buf))?);
        }
        // The rest of step k's update, moving the next panel along between blocks.
        let mut progress = || -> Result<()> {
            if let Some(request) = pending.as_mut() {
                request.test()?;
            }
            Ok(())
        };
        update_lower(layout, grid.me, a, &cur, 0..next_cols.start, &mut progress)?;
        update_lower(
            layout,
            grid.me,
            a,
            &cur,
            next_cols.end..usize::MAX,
            &mut progress,
        )?;
        std::mem::swap(&mut cur, &mut next);
    }
    Ok(None)
}

/// Factor the test matrix on `grid` and check the factor.
pub fn run(grid: &Grid<'_>, problem: &Problem) -> Result<Outcome> {
    let (n, nb) = (problem.n, problem.block);
    let layout = grid.square(n, nb)?;
    let kind = problem.matrix;
    let mut a = common::matrix(grid, layout)?;
    a.fill(|i, j| entry(kind, n, i, j))?;
    let al = a.local()?;
    let mut comm = CommTimer::default();
    let start = common::start_clock(grid.world)?;
    let failure = match problem.variant {
        Variant::Blocking => blocking(grid, &layout, al.data, &mut comm)?,
        Variant::Lookahead => lookahead(grid, &layout, al.data, &mut comm)?,
        other => return Err(crate::invalid(format!("Cholesky has no variant {other}"))),
    };
    let (seconds, comm_seconds) = common::stop_clock(grid.world, start, &comm)?;
    if let Some(why) = failure {
        return Ok(Outcome::failed(seconds, comm_seconds, why));
    }
    let residual = check(grid, &layout, al.data, kind, &mut comm)?;
    Ok(Outcome {
        seconds,
        comm_seconds,
        residual: Some(residual),
        residual_name: "‖A − L·Lᵀ‖_F / (‖A‖_F·N·ε)".into(),
        failure: None,
    })
}

/// `‖A − L·Lᵀ‖_F / (‖A‖_F·N·ε)` over the whole symmetric matrix, from its lower triangle:
/// `L·Lᵀ` is accumulated step by step with the factorisation's own panel broadcasts.
pub(crate) fn check(
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
    let mut panels = StepPanels::default();
    for k0 in (0..n).step_by(nb) {
        let w = nb.min(n - k0);
        let rows = panels.start(layout, grid.me, k0, k0);
        if pcol == layout.col_owner(k0) {
            let lc = layout.local_col(k0).1;
            let from = layout.local_rows_below(prow, k0);
            for c in 0..w {
                for li in from..mloc {
                    // L's panel: zero above the diagonal (the upper triangle still holds A).
                    let keep = layout.global_row(prow, li) >= k0 + c;
                    rows[c * (mloc - from) + li - from] =
                        if keep { l[(lc + c) * ld + li] } else { 0.0 };
                }
            }
        }
        panels.broadcast(grid, layout, k0, k0, 0, comm)?;
        update_lower(layout, grid.me, &mut d, &panels, 0..usize::MAX, &mut || {
            Ok(())
        })?;
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
