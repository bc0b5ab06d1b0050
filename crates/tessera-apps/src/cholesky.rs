//! Cholesky factorisation `A = L·Lᵀ` of a symmetric positive definite block-cyclic
//! matrix: right-looking and blocked, with team broadcasts (seed 004 §6.2).
//!
//! Step `k`, for block column `k`:
//! 1. the rank holding the diagonal block factors it (LAPACK `dpotrf`);
//! 2. it inverts the factor and broadcasts the inverse down its process column, whose
//!    ranks multiply their blocks of the panel below by it (`L_ik = A_ik·L_kk⁻ᵀ`, one
//!    `dtrmm`: three times as fast as the solve `dtrsm` in OpenBLAS);
//! 3. each rank of the panel's process column broadcasts its panel rows: along its process
//!    row on a grid of one process row, to every rank otherwise, since a rank needs the
//!    panel rows of its own rows and those of its columns (the panel transposed, which
//!    seed 004 gets by handing the data to a member of the other team);
//! 4. every rank updates the lower triangle of its trailing blocks,
//!    `A_ij −= L_ik·L_jkᵀ`, in chunks of local block columns (one DGEMM below every
//!    diagonal block of the chunk, one per block column above that).
//!
//! The `lookahead1` variant factors and sends panel `k + 1` before the rest of step `k`'s
//! update; the `lookahead` variant takes two steps at a time, applying both panels in one
//! product.
//!
//! Only the lower triangle is referenced. A matrix that is not positive definite stops
//! every rank at the same step, naming the first column whose minor fails. Checked with
//! `‖A − L·Lᵀ‖_F / ‖A‖_F`, computing `L·Lᵀ` with the same broadcasts and the original
//! `A` regenerated.

use std::ops::Range;
use tessera::coll::{Allreduce, Broadcast};
use tessera::{Blocking, Nonblocking};

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
/// `cols` the panel's rows for its local columns from `from_col`, the update's `B`
/// operand: on a grid of several process rows they come from every process row's panel
/// rows and are stored transposed (`w × (nloc − from_col)`, column-major: one panel row
/// per column); on a grid of one process row every panel row is among this rank's own, and
/// `cols` holds them as they are (`(nloc − from_col) × w`, column-major, used transposed),
/// gathered by contiguous runs. `pieces[r]` holds process row `r`'s panel rows (as `buf`
/// does this rank's) on a grid of several process rows.
#[derive(Default)]
struct StepPanels {
    buf: Vec<f64>,
    pieces: Vec<Vec<f64>>,
    cols: Vec<f64>,
    from_row: usize,
    from_col: usize,
    width: usize,
}

/// A step's panel broadcasts in flight, from [`StepPanels::post`].
type Posted<'t> = Vec<tessera::CollRequest<'t, f64>>;

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

    /// The buffer for process row `r`'s panel rows from `first` (with the status word),
    /// sized: this rank's own `buf` for its own process row.
    fn piece(&mut self, layout: &MatrixLayout, me: usize, r: usize, first: usize) -> &mut Vec<f64> {
        let len = 1 + (layout.local_rows(r) - layout.local_rows_below(r, first)) * self.width;
        self.pieces.resize_with(layout.grid().0, Vec::new);
        let piece = if r == me {
            &mut self.buf
        } else {
            &mut self.pieces[r]
        };
        piece.resize(len, 0.0);
        piece
    }

    /// Give every rank the panel rows (filled by the panel's process column after
    /// [`start`](Self::start)) with `status`, and fill `cols`. Returns the status of the
    /// panel's process column.
    ///
    /// On a grid of one process row this is one broadcast along it. On several, each rank
    /// of the panel's process column broadcasts its rows to the whole world: every rank
    /// needs its own process row's rows, and the rows of its columns, which are spread over
    /// every process row. A row broadcast followed by a column allgather moves the same
    /// bytes on a 2 × 2 grid, but chains two waits, each on ranks that may be computing;
    /// with two ranks per core that chain cost 2 × 2 Cholesky at N = 2048 about a tenth of
    /// its time. (On a grid of `p × q` with `p, q > 2` a rank receives more this way: all
    /// of the panel, against `1/p + 1/q` of it.)
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
        let (p, q) = grid.shape;
        if p == 1 {
            comm.time(|| {
                grid.row
                    .run(Broadcast::in_place(root, &mut self.buf), Blocking)
            })?;
        } else {
            for r in 0..p {
                let piece = self.piece(layout, grid.me.0, r, first);
                comm.time(|| {
                    grid.world
                        .run(Broadcast::in_place(r * q + root, piece), Blocking)
                })?;
            }
        }
        self.columns(grid, layout, first);
        Ok(self.buf[0].to_bits())
    }

    /// [`broadcast`](Self::broadcast) started without waiting (the panel's process column
    /// has set the status word); [`complete`](Self::complete) finishes it.
    fn post<'t>(
        &mut self,
        grid: &Grid<'t>,
        layout: &MatrixLayout,
        k0: usize,
        first: usize,
        comm: &mut CommTimer,
    ) -> Result<Posted<'t>> {
        let root = layout.col_owner(k0);
        let (p, q) = grid.shape;
        if p == 1 {
            let buf = std::mem::take(&mut self.buf);
            return Ok(vec![comm.time(|| {
                grid.row.run(Broadcast::owned(root, buf), Nonblocking)
            })?]);
        }
        (0..p)
            .map(|r| {
                let piece = std::mem::take(self.piece(layout, grid.me.0, r, first));
                comm.time(|| {
                    grid.world
                        .run(Broadcast::owned(r * q + root, piece), Nonblocking)
                })
            })
            .collect()
    }

    /// Wait for the broadcasts [`post`](Self::post) started and fill `cols`; returns the
    /// status of the panel's process column.
    fn complete(
        &mut self,
        grid: &Grid<'_>,
        layout: &MatrixLayout,
        first: usize,
        posted: Posted<'_>,
        comm: &mut CommTimer,
    ) -> Result<u64> {
        // One request (the row broadcast) on one process row, else one per process row.
        let one_row = grid.shape.0 == 1;
        for (r, request) in posted.into_iter().enumerate() {
            let data = comm.time(|| request.wait())?;
            if one_row || r == grid.me.0 {
                self.buf = data;
            } else {
                self.pieces[r] = data;
            }
        }
        self.columns(grid, layout, first);
        Ok(self.buf[0].to_bits())
    }

    /// Fill `cols` from the panel rows this rank now holds.
    fn columns(&mut self, grid: &Grid<'_>, layout: &MatrixLayout, first: usize) {
        let (prow, pcol) = grid.me;
        let (mloc, nloc) = (layout.local_rows(prow), layout.local_cols(pcol));
        if grid.shape.0 == 1 {
            self.gather_own_rows(layout, pcol, mloc, nloc);
            return;
        }
        // Column j's panel row is local row `li` of process row `r`, at its place among
        // that row's panel rows from `first`.
        let w = self.width;
        let cols_n = nloc - self.from_col;
        self.cols.resize(cols_n * w, 0.0);
        for lc in 0..cols_n {
            let (r, li) = layout.local_row(layout.global_col(pcol, self.from_col + lc));
            let from = layout.local_rows_below(r, first);
            let stride = layout.local_rows(r) - from;
            let piece = if r == prow {
                &self.buf
            } else {
                &self.pieces[r]
            };
            for (c, v) in self.cols[lc * w..(lc + 1) * w].iter_mut().enumerate() {
                *v = piece[1 + c * stride + li - from];
            }
        }
    }

    /// On a grid of one process row: the panel rows of this rank's local columns from
    /// `from_col`, `(nloc − from_col) × w` column-major, copied from its own rows one run
    /// of consecutive global columns (one block) at a time.
    fn gather_own_rows(&mut self, layout: &MatrixLayout, pcol: usize, mloc: usize, nloc: usize) {
        let w = self.width;
        let cols_n = nloc - self.from_col;
        let stride = mloc - self.from_row;
        let nb = layout.col_block();
        self.cols.resize(cols_n * w, 0.0);
        let rows = &self.buf[1..];
        let mut lc = 0;
        while lc < cols_n {
            let local = self.from_col + lc;
            let run = (nb - local % nb).min(cols_n - lc);
            // One process row: local row = global row.
            let at = layout.global_col(pcol, local) - self.from_row;
            for c in 0..w {
                self.cols[c * cols_n + lc..c * cols_n + lc + run]
                    .copy_from_slice(&rows[c * stride + at..c * stride + at + run]);
            }
            lc += run;
        }
    }

    /// The panels `a` (step k) and `b` (step k + 1) side by side, as one panel of width
    /// `a.width + b.width` over `b`'s rows and columns: the trailing update of both steps
    /// then runs as one product with twice the inner dimension. `a`'s rows and columns are
    /// clipped to `b`'s range.
    fn merge(&mut self, layout: &MatrixLayout, me: (usize, usize), a: &StepPanels, b: &StepPanels) {
        let (mloc, nloc) = (layout.local_rows(me.0), layout.local_cols(me.1));
        let (wa, wb) = (a.width, b.width);
        let w = wa + wb;
        let (from_row, from_col) = (b.from_row, b.from_col);
        let (m, cols_n) = (mloc - from_row, nloc - from_col);
        let (ma, na) = (mloc - a.from_row, nloc - a.from_col);
        let (skip_rows, skip_cols) = (from_row - a.from_row, from_col - a.from_col);
        self.width = w;
        self.from_row = from_row;
        self.from_col = from_col;
        self.buf.resize(1 + m * w, 0.0);
        let (ra, rb) = (a.rows(), b.rows());
        for c in 0..wa {
            self.buf[1 + c * m..1 + (c + 1) * m]
                .copy_from_slice(&ra[c * ma + skip_rows..c * ma + skip_rows + m]);
        }
        self.buf[1 + wa * m..].copy_from_slice(&rb[..wb * m]);
        self.cols.resize(cols_n * w, 0.0);
        if layout.grid().0 == 1 {
            // (columns × w), column-major: a's w columns, then b's.
            for c in 0..wa {
                self.cols[c * cols_n..(c + 1) * cols_n]
                    .copy_from_slice(&a.cols[c * na + skip_cols..c * na + skip_cols + cols_n]);
            }
            self.cols[wa * cols_n..].copy_from_slice(&b.cols[..wb * cols_n]);
        } else {
            // (w × columns), column-major: each column's wa values of a, then wb of b.
            for lc in 0..cols_n {
                let at = (skip_cols + lc) * wa;
                self.cols[lc * w..lc * w + wa].copy_from_slice(&a.cols[at..at + wa]);
                self.cols[lc * w + wa..(lc + 1) * w]
                    .copy_from_slice(&b.cols[lc * wb..(lc + 1) * wb]);
            }
        }
    }
}

/// Local columns the update multiplies in one DGEMM (whole blocks, at least one): a wider
/// product runs closer to the core's DGEMM rate (on Zen 3 with OpenBLAS, `4096 × 1024 ×
/// 128` at 39.0 GFLOP/s against `4096 × 128 × 128` at 37.1).
const UPDATE_WIDTH: usize = 1024;

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
    let cols_n = nloc - s.from_col;
    // The panel rows of local columns from `lj` as DGEMM's B operand.
    let b_of = |lj: usize| {
        if layout.grid().0 == 1 {
            (Trans::Yes, &s.cols[lj - s.from_col..], cols_n.max(1))
        } else {
            (Trans::No, &s.cols[(lj - s.from_col) * w..], w)
        }
    };
    // The first local row a local column's update needs: from its diagonal block down.
    let first_row = |lj: usize| {
        let j0 = layout.global_col(me.1, lj);
        layout.local_rows_below(me.0, j0 - j0 % nb).max(s.from_row)
    };
    let rows = s.rows();
    // T's rows `li..li + m` of local columns `lj..lj + n` −= their panel rows · B.
    let mut product = |li: usize, m: usize, lj: usize, n: usize| {
        let (tb, b, ldb) = b_of(lj);
        blas::gemm(
            Trans::No,
            tb,
            m,
            n,
            w,
            -1.0,
            &rows[li - s.from_row..],
            rows_ld,
            b,
            ldb,
            1.0,
            &mut t[lj * ld + li..],
            ld,
        );
    };
    while lj < end {
        // A chunk of whole local block columns, [lj, ce).
        let ce = end.min((lj / nb + (UPDATE_WIDTH / nb).max(1)) * nb);
        // The rows below every diagonal block of the chunk, in one product.
        let last = first_row(ce - 1);
        product(last, mloc - last, lj, ce - lj);
        // Above them, each block column's rows from its own diagonal block.
        let mut bj = lj;
        while bj < ce {
            let cw = (nb - bj % nb).min(ce - bj);
            let li = first_row(bj);
            if li < last {
                product(li, last - li, bj, cw);
            }
            bj += cw;
        }
        lj = ce;
        progress()?;
    }
    Ok(())
}

/// Steps 1–2 on the panel's process column: factor the diagonal block and invert the
/// factor, broadcast the inverse with its status down the column, multiply the panel below
/// by it and copy this rank's panel rows into `rows`. The multiply (`dtrmm`) gives what the
/// solve `dtrsm` would, about three times as fast in OpenBLAS. The factor's condition
/// number is the square root of the diagonal block's, so the inverse loses little, and the
/// residual check would show any loss. Returns the status (`u64::MAX`, or the failing
/// column).
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
        let mut result = blas::potrf_lower(w, block, ld);
        for c in 0..w {
            diag[1 + c * w..1 + (c + 1) * w].copy_from_slice(&block[c * ld..c * ld + w]);
        }
        if result.is_ok() {
            // A factor's diagonal is positive, so this cannot fail; were it to, the status
            // would name the column all the same.
            result = blas::invert_lower(w, &mut diag[1..], w);
        }
        diag[0] = f64::from_bits(result.err().map_or(u64::MAX, |c| (k0 + c) as u64));
    }
    comm.time(|| grid.col.run(Broadcast::in_place(pr, diag), Blocking))?;
    let status = diag[0].to_bits();
    // The panel below the diagonal block: this rank's local rows from k0 + w.
    let below = layout.local_rows_below(prow, k0 + w);
    if status == u64::MAX {
        blas::trmm(
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

/// The end of panel `k0`'s block column (the first column after it).
fn panel_end(layout: &MatrixLayout, k0: usize) -> usize {
    k0 + layout.col_block().min(layout.rows() - k0)
}

/// Factor panel `k0` on its process column and broadcast it to every rank into `panels`;
/// returns the error if the matrix is not positive definite there.
fn panel_step(
    grid: &Grid<'_>,
    layout: &MatrixLayout,
    a: &mut [f64],
    k0: usize,
    panels: &mut StepPanels,
    diag: &mut Vec<f64>,
    comm: &mut CommTimer,
) -> Result<Option<String>> {
    let first = panel_end(layout, k0);
    let rows = panels.start(layout, grid.me, k0, first);
    let mut status = u64::MAX;
    if grid.me.1 == layout.col_owner(k0) {
        status = factor_panel(grid, layout, a, k0, rows, diag, comm)?;
    }
    // 3–4: every rank learns the status with the panel rows.
    let status = panels.broadcast(grid, layout, k0, first, status, comm)?;
    Ok((status != u64::MAX).then(|| not_positive_definite(status)))
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
        if let Some(why) = panel_step(grid, layout, a, k0, &mut panels, &mut diag, comm)? {
            return Ok(Some(why));
        }
        update_lower(layout, grid.me, a, &panels, 0..usize::MAX, &mut || Ok(()))?;
    }
    Ok(None)
}

/// The local columns of block column `k0` if this rank holds them (none past the end).
fn own_block(layout: &MatrixLayout, pcol: usize, k0: usize) -> Range<usize> {
    if k0 < layout.rows() && layout.col_owner(k0) == pcol {
        let lc = layout.local_col(k0).1;
        lc..lc + panel_end(layout, k0) - k0
    } else {
        0..0
    }
}

/// Wait for a panel's broadcasts into `panel` (starting this rank's part of them unless
/// it started them as the panel's process column), and fill its columns; the error if its
/// status says the matrix is not positive definite.
fn receive_panel<'t>(
    grid: &Grid<'t>,
    layout: &MatrixLayout,
    k0: usize,
    panel: &mut StepPanels,
    started: Option<Posted<'t>>,
    comm: &mut CommTimer,
) -> Result<Option<String>> {
    let first = panel_end(layout, k0);
    let posted = match started {
        Some(posted) => posted,
        None => panel.post(grid, layout, k0, first, comm)?,
    };
    let status = panel.complete(grid, layout, first, posted, comm)?;
    Ok((status != u64::MAX).then(|| not_positive_definite(status)))
}

/// The lookahead variant, two steps at a time. The trailing update of steps `k` and
/// `k + 1` runs as one product with both panels (inner dimension `2·nb`, closer to the
/// core's DGEMM rate: `4096 × 1024 × 256` at 42.0 GFLOP/s against 39.0 for `× 128` on
/// Zen 3 with OpenBLAS). Before it, the process column of panel `k + 2` updates that block
/// column, factors it and starts its nonblocking row broadcast; the process column of
/// panel `k + 3` updates its block column, takes panel `k + 2` as soon as it is there,
/// applies it, factors panel `k + 3` and starts its broadcast. Both panels of the next
/// pair are then on their way while every rank runs the big update, which advances the
/// broadcasts between its products.
fn lookahead(
    grid: &Grid<'_>,
    layout: &MatrixLayout,
    a: &mut [f64],
    comm: &mut CommTimer,
) -> Result<Option<String>> {
    let (n, nb) = (layout.rows(), layout.col_block());
    let (me, pcol) = (grid.me, grid.me.1);
    let mut diag = Vec::new();
    // The two panels of the next pair, and the pair being applied (both merged).
    let [mut p2, mut p3, mut pair] = <[StepPanels; 3]>::default();
    let (p2, p3, pair) = (&mut p2, &mut p3, &mut pair);
    // The first pair, as the blocking variant takes it.
    if let Some(why) = panel_step(grid, layout, a, 0, p2, &mut diag, comm)? {
        return Ok(Some(why));
    }
    if nb < n {
        update_lower(layout, me, a, p2, own_block(layout, pcol, nb), &mut || {
            Ok(())
        })?;
        if let Some(why) = panel_step(grid, layout, a, nb, p3, &mut diag, comm)? {
            return Ok(Some(why));
        }
        pair.merge(layout, me, p2, p3);
    } else {
        std::mem::swap(pair, p2);
    }
    for k2 in (2 * nb..n).step_by(2 * nb) {
        let k3 = k2 + nb;
        let (cols2, cols3) = (own_block(layout, pcol, k2), own_block(layout, pcol, k3));
        let (mut sent2, mut sent3) = (None, None);
        // Panel k + 2 on its process column.
        let rows = p2.start(layout, me, k2, panel_end(layout, k2));
        if !cols2.is_empty() {
            update_lower(layout, me, a, pair, cols2.clone(), &mut || Ok(()))?;
            let status = factor_panel(grid, layout, a, k2, rows, &mut diag, comm)?;
            p2.buf[0] = f64::from_bits(status);
            sent2 = Some(p2.post(grid, layout, k2, panel_end(layout, k2), comm)?);
        }
        // Panel k + 3 on its process column, once panel k + 2 is there.
        let mut have2 = false;
        if k3 < n {
            p3.start(layout, me, k3, panel_end(layout, k3));
            if !cols3.is_empty() {
                update_lower(layout, me, a, pair, cols3.clone(), &mut || Ok(()))?;
                if let Some(why) = receive_panel(grid, layout, k2, p2, sent2.take(), comm)? {
                    return Ok(Some(why));
                }
                have2 = true;
                update_lower(layout, me, a, p2, cols3.clone(), &mut || Ok(()))?;
                let rows = &mut p3.buf[1..];
                let status = factor_panel(grid, layout, a, k3, rows, &mut diag, comm)?;
                p3.buf[0] = f64::from_bits(status);
                sent3 = Some(p3.post(grid, layout, k3, panel_end(layout, k3), comm)?);
            }
        }
        // The rest of the pair's update, moving the broadcasts along between products.
        let mut progress = || -> Result<()> {
            for request in [sent2.as_mut(), sent3.as_mut()]
                .into_iter()
                .flatten()
                .flatten()
            {
                request.test()?;
            }
            Ok(())
        };
        let mut done = [cols2, cols3];
        done.sort_by_key(|r| r.start);
        let mut from = 0;
        for skip in done.iter().filter(|r| !r.is_empty()) {
            update_lower(layout, me, a, pair, from..skip.start, &mut progress)?;
            from = skip.end;
        }
        update_lower(layout, me, a, pair, from..usize::MAX, &mut progress)?;
        // The next pair.
        if !have2 {
            if let Some(why) = receive_panel(grid, layout, k2, p2, sent2.take(), comm)? {
                return Ok(Some(why));
            }
        }
        if k3 < n {
            if let Some(why) = receive_panel(grid, layout, k3, p3, sent3.take(), comm)? {
                return Ok(Some(why));
            }
            pair.merge(layout, me, p2, p3);
        } else {
            std::mem::swap(pair, p2);
        }
    }
    update_lower(layout, me, a, pair, 0..usize::MAX, &mut || Ok(()))?;
    Ok(None)
}

/// One step of lookahead: at step `k`, the process column of panel `k + 1` first applies
/// panel `k` to that block column alone, factors panel `k + 1` and starts its broadcast
/// in place; then every rank applies panel `k` to the rest of its trailing part, moving
/// the broadcast along between products, and takes panel `k + 1` at the end. So the
/// panel's factorisation and broadcast run while the other process columns update,
/// instead of in front of everyone's update.
fn lookahead_one(
    grid: &Grid<'_>,
    layout: &MatrixLayout,
    a: &mut [f64],
    comm: &mut CommTimer,
) -> Result<Option<String>> {
    let (n, pcol, me) = (layout.rows(), grid.me.1, grid.me);
    let mut diag = Vec::new();
    let [mut current, mut next] = <[StepPanels; 2]>::default();
    if let Some(why) = panel_step(grid, layout, a, 0, &mut current, &mut diag, comm)? {
        return Ok(Some(why));
    }
    let mut k0 = 0;
    loop {
        let k1 = panel_end(layout, k0);
        if k1 >= n {
            return Ok(None);
        }
        let cols = own_block(layout, pcol, k1);
        let rows = next.start(layout, me, k1, panel_end(layout, k1));
        let mut sent = None;
        if !cols.is_empty() {
            update_lower(layout, me, a, &current, cols.clone(), &mut || Ok(()))?;
            let status = factor_panel(grid, layout, a, k1, rows, &mut diag, comm)?;
            next.buf[0] = f64::from_bits(status);
            sent = Some(next.post(grid, layout, k1, panel_end(layout, k1), comm)?);
        }
        let mut progress = || -> Result<()> {
            for request in sent.iter_mut().flatten() {
                request.test()?;
            }
            Ok(())
        };
        let rest = if cols.is_empty() { 0 } else { cols.end };
        update_lower(layout, me, a, &current, rest..usize::MAX, &mut progress)?;
        if let Some(why) = receive_panel(grid, layout, k1, &mut next, sent, comm)? {
            return Ok(Some(why));
        }
        std::mem::swap(&mut current, &mut next);
        k0 = k1;
    }
}

/// Factor the test matrix on `grid` and check the factor.
pub fn run(grid: &Grid<'_>, problem: &Problem) -> Result<Outcome> {
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
    let al = a.local()?;
    let mut comm = CommTimer::default();
    let start = common::start_clock(grid.world)?;
    let failure = match problem.variant {
        Variant::Blocking => blocking(grid, &layout, al.data, &mut comm)?,
        Variant::Lookahead => lookahead(grid, &layout, al.data, &mut comm)?,
        Variant::LookaheadOne => lookahead_one(grid, &layout, al.data, &mut comm)?,
        other => return Err(crate::invalid(format!("Cholesky has no variant {other}"))),
    };
    let (seconds, comm_seconds) = common::stop_clock(grid.world, start, &comm)?;
    if let Some(why) = failure {
        return Ok(Outcome::failed(seconds, comm_seconds, why).redistributed(redistribution));
    }
    let residual = check(grid, &layout, al.data, kind, &mut comm)?;
    Ok(Outcome::checked(
        seconds,
        comm_seconds,
        residual,
        "‖A − L·Lᵀ‖_F / (‖A‖_F·N·ε)",
    )
    .redistributed(redistribution))
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
    let diff = grid.world.run(Allreduce::value(diff, Op::Sum), Blocking)?;
    let norm = grid.world.run(Allreduce::value(norm, Op::Sum), Blocking)?;
    Ok(diff.sqrt() / (norm.sqrt() * n as f64 * f64::EPSILON))
}
