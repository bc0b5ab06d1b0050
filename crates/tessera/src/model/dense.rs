//! Dense matrices distributed 2-D block-cyclically over a process grid: ScaLAPACK's
//! layout, and UPC's two-dimensional `shared [b1][b2]` arrays.
//!
//! # The layout
//! An `m × n` matrix is cut into `mb × nb` blocks. Over a `p × q` process grid whose
//! process `(0, 0)` holds the first block (the *source*; any process may be), block
//! `(I, J)` lives on process `((I + rsrc) mod p, (J + csrc) mod q)`. A process stores its
//! blocks column-major in one local array, one after another in each direction: global row
//! `i` in block `I = ⌊i / mb⌋` is local row `⌊I / p⌋·mb + i mod mb` there, and the same for
//! columns. The local array has `numroc(m, mb, prow, rsrc, p)` rows (ScaLAPACK's `NUMROC`)
//! and its leading dimension is that count (at least 1), exactly as a ScaLAPACK descriptor
//! describes it, so local arrays can be handed to BLAS and LAPACK as they are.
//!
//! Team rank `r` of the matrix's team sits at grid coordinates `(r / q, r mod q)`, as in
//! [`Team::grid`](crate::Team::grid) and BLACS's row-major grids.
//!
//! # Access
//! The storage is a [`PhasedArray`], so the local array is lent out as a plain slice in the
//! own phase ([`BlockCyclicMatrix::local`]), and any rank reads any rectangle of the global
//! matrix with one strided get per block it touches in the shared phase
//! ([`BlockCyclicMatrix::read`]). [`BlockCyclicMatrix::redistribute`] builds the same
//! matrix with other block sizes from such reads.
//!
//! This module computes nothing numerical and never hands out another rank's memory
//! outside the shared phase.
//!
//! ```
//! use tessera::{BlockCyclicMatrix, MatrixLayout, Team};
//! tessera::Job::threads(4).run(|ctx| {
//!     let team = Team::world(ctx)?;
//!     // 10 × 7 in 3 × 2 blocks over a 2 × 2 grid.
//!     let layout = MatrixLayout::new(10, 7, 3, 2, 2, 2)?;
//!     let mut a = BlockCyclicMatrix::<f64>::new(&team, layout)?;
//!     a.fill(|i, j| (10 * i + j) as f64)?;
//!     a.share()?;
//!     // Rows 2..6 of column 5, wherever they live.
//!     let mut column = vec![0.0; 4];
//!     a.read(2..6, 5..6, &mut column, 4)?;
//!     assert_eq!(column, [25.0, 35.0, 45.0, 55.0]);
//!     // Entry (4, 5) is in block (1, 2), on process (1, 0): team rank 2.
//!     assert_eq!(layout.owner(4, 5), 2);
//!     Ok(())
//! }).unwrap();
//! ```

use std::ops::Range;

use bytemuck::Pod;

use crate::error::CoreError;
use crate::model::phased::{Phase, PhasedArray};
use crate::model::team::Team;
use crate::Result;

/// The number of rows (or columns) of an `n`-long dimension cut into blocks of `nb` that
/// process `iproc` of `nprocs` holds when process `isrc` holds the first block (ScaLAPACK's
/// `NUMROC`).
///
/// ```
/// // 10 rows in blocks of 3 over 2 processes: blocks 0 and 2 (3 + 3 rows) on process 0,
/// // blocks 1 and 3 (3 + 1) on process 1.
/// assert_eq!(tessera::numroc(10, 3, 0, 0, 2), 6);
/// assert_eq!(tessera::numroc(10, 3, 1, 0, 2), 4);
/// ```
pub fn numroc(n: usize, nb: usize, iproc: usize, isrc: usize, nprocs: usize) -> usize {
    let dist = (nprocs + iproc - isrc % nprocs) % nprocs;
    let blocks = n / nb;
    let mut count = (blocks / nprocs) * nb;
    let extra = blocks % nprocs;
    if dist < extra {
        count += nb;
    } else if dist == extra {
        count += n % nb;
    }
    count
}

/// One dimension of a block-cyclic layout: length, block size, processes, source.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Axis {
    len: usize,
    block: usize,
    procs: usize,
    source: usize,
}

impl Axis {
    fn owner(&self, i: usize) -> usize {
        (i / self.block + self.source) % self.procs
    }

    fn local(&self, i: usize) -> (usize, usize) {
        let b = i / self.block;
        (
            self.owner(i),
            (b / self.procs) * self.block + i % self.block,
        )
    }

    fn global(&self, proc: usize, li: usize) -> usize {
        let dist = (self.procs + proc - self.source) % self.procs;
        let b = (li / self.block) * self.procs + dist;
        b * self.block + li % self.block
    }

    fn count(&self, proc: usize) -> usize {
        numroc(self.len, self.block, proc, self.source, self.procs)
    }

    /// How many of `proc`'s indices are below global index `i`.
    fn count_below(&self, proc: usize, i: usize) -> usize {
        numroc(i, self.block, proc, self.source, self.procs)
    }

    /// The global ranges of the blocks (or parts of blocks) that `range` crosses.
    fn pieces(&self, range: Range<usize>) -> impl Iterator<Item = Range<usize>> + '_ {
        let mut at = range.start;
        std::iter::from_fn(move || {
            (at < range.end).then(|| {
                let end = ((at / self.block + 1) * self.block).min(range.end);
                let piece = at..end;
                at = end;
                piece
            })
        })
    }
}

/// Where every entry of a block-cyclic matrix lives (a ScaLAPACK array descriptor without
/// the context): sizes, block sizes, grid and source process. See the
/// [module documentation](self) for the mapping.
///
/// ```
/// use tessera::MatrixLayout;
/// let l = MatrixLayout::new(8, 8, 2, 2, 2, 2)?;
/// assert_eq!(l.owner_coords(2, 5), (1, 0)); // block (1, 2)
/// assert_eq!(l.local_row(6), (1, 2));       // block row 3 is process row 1's second
/// assert_eq!(l.global_row(1, 2), 6);
/// assert_eq!(l.local_rows(0), 4);
/// # Ok::<(), tessera::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MatrixLayout {
    row: Axis,
    col: Axis,
}

impl MatrixLayout {
    /// An `rows × cols` matrix in `row_block × col_block` blocks over a `grid_rows ×
    /// grid_cols` process grid, the first block on process `(0, 0)`. Every size must be
    /// positive (an empty matrix has no blocks to place).
    pub fn new(
        rows: usize,
        cols: usize,
        row_block: usize,
        col_block: usize,
        grid_rows: usize,
        grid_cols: usize,
    ) -> Result<MatrixLayout> {
        for (what, v) in [
            ("rows", rows),
            ("columns", cols),
            ("row block size", row_block),
            ("column block size", col_block),
            ("process grid rows", grid_rows),
            ("process grid columns", grid_cols),
        ] {
            if v == 0 {
                return Err(CoreError::BadArgument {
                    call: "MatrixLayout::new",
                    argument: "sizes",
                    why: format!(
                        "MatrixLayout::new: the number of {what} is 0; every size must be positive"
                    ),
                }
                .into());
            }
        }
        let axis = |len, block, procs| Axis {
            len,
            block,
            procs,
            source: 0,
        };
        Ok(MatrixLayout {
            row: axis(rows, row_block, grid_rows),
            col: axis(cols, col_block, grid_cols),
        })
    }

    /// The same layout with its first block on process `(prow, pcol)`.
    pub fn with_source(mut self, prow: usize, pcol: usize) -> Result<MatrixLayout> {
        if prow >= self.row.procs || pcol >= self.col.procs {
            return Err(CoreError::BadArgument {
                call: "MatrixLayout::with_source",
                argument: "source",
                why: format!(
                    "MatrixLayout::with_source: process ({prow}, {pcol}) is outside the {}×{} grid",
                    self.row.procs, self.col.procs
                ),
            }
            .into());
        }
        self.row.source = prow;
        self.col.source = pcol;
        Ok(self)
    }

    /// Rows of the global matrix.
    pub fn rows(&self) -> usize {
        self.row.len
    }

    /// Columns of the global matrix.
    pub fn cols(&self) -> usize {
        self.col.len
    }

    /// Rows per block.
    pub fn row_block(&self) -> usize {
        self.row.block
    }

    /// Columns per block.
    pub fn col_block(&self) -> usize {
        self.col.block
    }

    /// The process grid, `(rows, columns)`.
    pub fn grid(&self) -> (usize, usize) {
        (self.row.procs, self.col.procs)
    }

    /// The team rank at grid coordinates `(prow, pcol)` (row-major).
    pub fn rank(&self, prow: usize, pcol: usize) -> usize {
        prow * self.col.procs + pcol
    }

    /// The grid coordinates of team rank `rank`.
    pub fn coords(&self, rank: usize) -> (usize, usize) {
        (rank / self.col.procs, rank % self.col.procs)
    }

    /// The process row holding global row `i`.
    pub fn row_owner(&self, i: usize) -> usize {
        self.row.owner(i)
    }

    /// The process column holding global column `j`.
    pub fn col_owner(&self, j: usize) -> usize {
        self.col.owner(j)
    }

    /// The grid coordinates of the process holding entry `(i, j)`.
    pub fn owner_coords(&self, i: usize, j: usize) -> (usize, usize) {
        (self.row.owner(i), self.col.owner(j))
    }

    /// The team rank holding entry `(i, j)` (its affinity).
    pub fn owner(&self, i: usize, j: usize) -> usize {
        self.rank(self.row.owner(i), self.col.owner(j))
    }

    /// Global row `i` as `(process row, local row)`.
    pub fn local_row(&self, i: usize) -> (usize, usize) {
        self.row.local(i)
    }

    /// Global column `j` as `(process column, local column)`.
    pub fn local_col(&self, j: usize) -> (usize, usize) {
        self.col.local(j)
    }

    /// The global row of local row `li` on process row `prow`.
    pub fn global_row(&self, prow: usize, li: usize) -> usize {
        self.row.global(prow, li)
    }

    /// The global column of local column `lj` on process column `pcol`.
    pub fn global_col(&self, pcol: usize, lj: usize) -> usize {
        self.col.global(pcol, lj)
    }

    /// Local rows on process row `prow` (ScaLAPACK's `NUMROC`).
    pub fn local_rows(&self, prow: usize) -> usize {
        self.row.count(prow)
    }

    /// Local columns on process column `pcol`.
    pub fn local_cols(&self, pcol: usize) -> usize {
        self.col.count(pcol)
    }

    /// How many of process row `prow`'s local rows hold global rows below `i`: its local
    /// rows from this index on hold the global rows from `i` on (the start of a trailing
    /// submatrix).
    pub fn local_rows_below(&self, prow: usize, i: usize) -> usize {
        self.row.count_below(prow, i)
    }

    /// How many of process column `pcol`'s local columns hold global columns below `j`.
    pub fn local_cols_below(&self, pcol: usize, j: usize) -> usize {
        self.col.count_below(pcol, j)
    }

    /// The leading dimension of process row `prow`'s local array (its local rows, at least 1).
    pub fn local_ld(&self, prow: usize) -> usize {
        self.local_rows(prow).max(1)
    }
}

/// This rank's local array of a [`BlockCyclicMatrix`], column-major, lent out in the own
/// phase.
pub struct LocalMatrix<'a, T> {
    /// `ld × cols` elements: local entry `(li, lj)` is `data[lj * ld + li]`.
    pub data: &'a mut [T],
    /// Local rows.
    pub rows: usize,
    /// Local columns.
    pub cols: usize,
    /// Leading dimension (distance between columns).
    pub ld: usize,
}

/// A dense matrix distributed 2-D block-cyclically over the members of a team (see the
/// [module documentation](self)).
pub struct BlockCyclicMatrix<'t, T: Pod> {
    layout: MatrixLayout,
    coords: (usize, usize),
    storage: PhasedArray<'t, T>,
}

impl<'t, T: Pod> BlockCyclicMatrix<'t, T> {
    /// Allocate a matrix with this layout over `team`, whose size must be the grid's (a
    /// collective call with the same layout everywhere). The entries start as the allocator
    /// leaves them; [`fill`](Self::fill) or write them first.
    pub fn new(team: &'t Team<'t>, layout: MatrixLayout) -> Result<Self> {
        let (p, q) = layout.grid();
        if team.size() != p * q {
            return Err(CoreError::BadArgument {
                call: "BlockCyclicMatrix::new",
                argument: "grid",
                why: format!(
                    "BlockCyclicMatrix::new: a {p}×{q} process grid needs {} ranks, but the team \
                 has {}; choose a grid whose product is the team size",
                    p * q,
                    team.size()
                ),
            }
            .into());
        }
        let rows = (0..p).map(|r| layout.local_ld(r)).max().unwrap_or(1);
        let cols = (0..q).map(|c| layout.local_cols(c)).max().unwrap_or(0);
        let storage = PhasedArray::new(team, rows * cols)?;
        Ok(BlockCyclicMatrix {
            layout,
            coords: layout.coords(team.rank()),
            storage,
        })
    }

    /// The layout.
    pub fn layout(&self) -> &MatrixLayout {
        &self.layout
    }

    /// This rank's grid coordinates `(process row, process column)`.
    pub fn coords(&self) -> (usize, usize) {
        self.coords
    }

    /// The current phase of the storage (own: [`local`](Self::local); shared:
    /// [`read`](Self::read)).
    pub fn phase(&self) -> Phase {
        self.storage.phase()
    }

    /// This rank's local array, in the own phase.
    pub fn local(&mut self) -> Result<LocalMatrix<'_, T>> {
        let (prow, pcol) = self.coords;
        let (rows, cols, ld) = (
            self.layout.local_rows(prow),
            self.layout.local_cols(pcol),
            self.layout.local_ld(prow),
        );
        let data = &mut self.storage.own()?[..ld * cols];
        Ok(LocalMatrix {
            data,
            rows,
            cols,
            ld,
        })
    }

    /// Set every local entry to `f(i, j)` of its global indices (own phase; no
    /// communication).
    pub fn fill(&mut self, mut f: impl FnMut(usize, usize) -> T) -> Result<()> {
        let (prow, pcol) = self.coords;
        let layout = self.layout;
        let local = self.local()?;
        for lj in 0..local.cols {
            let j = layout.global_col(pcol, lj);
            let column = &mut local.data[lj * local.ld..lj * local.ld + local.rows];
            for (li, x) in column.iter_mut().enumerate() {
                *x = f(layout.global_row(prow, li), j);
            }
        }
        Ok(())
    }

    /// Own phase to shared: every rank's local writes become readable by all (a barrier).
    pub fn share(&mut self) -> Result<()> {
        self.storage.share()
    }

    /// Shared phase back to own: every rank has finished reading (a barrier).
    pub fn reclaim(&mut self) -> Result<()> {
        self.storage.reclaim()
    }

    /// Elements `range` of process `(prow, pcol)`'s local array (column-major, leading
    /// dimension [`MatrixLayout::local_ld`] of `prow`) in the shared phase, without a copy
    /// where that rank's memory is mapped here (borrowed) and with one get where it is not:
    /// a panel of whole local columns is one range, and a block row of a local array the
    /// span from its first entry to its last, read with the owner's leading dimension.
    ///
    /// ```
    /// use tessera::{BlockCyclicMatrix, Job, MatrixLayout, Team};
    /// Job::threads(2).segment(8 << 20).run(|ctx| {
    ///     let world = Team::world(ctx)?;
    ///     let layout = MatrixLayout::new(4, 4, 2, 2, 1, 2)?; // columns 0-1 and 2-3 apart
    ///     let mut m = BlockCyclicMatrix::new(&world, layout)?;
    ///     m.fill(|i, j| (10 * i + j) as f64)?;
    ///     m.share()?;
    ///     // Process (0, 1) holds columns 2 and 3: its local column 0 is global column 2.
    ///     let column = m.peer_local(0, 1, 0..4)?;
    ///     assert_eq!(&column[..], &[2.0, 12.0, 22.0, 32.0]);
    ///     drop(column);
    ///     assert!(m.peer_local(0, 2, 0..1).is_err()); // no process column 2
    ///     assert!(m.peer_local(0, 1, 0..9).is_err()); // its local array has 8 entries
    ///     m.reclaim()?;
    ///     Ok(())
    /// }).unwrap();
    /// ```
    pub fn peer_local(
        &self,
        prow: usize,
        pcol: usize,
        range: Range<usize>,
    ) -> Result<std::borrow::Cow<'_, [T]>> {
        let (p, q) = self.layout.grid();
        if prow >= p || pcol >= q {
            return Err(CoreError::BadArgument {
                call: "BlockCyclicMatrix::peer_local",
                argument: "process",
                why: format!(
                "BlockCyclicMatrix::peer_local: process ({prow}, {pcol}) outside a {p}×{q} grid"
            ),
            }
            .into());
        }
        let local = self.layout.local_ld(prow) * self.layout.local_cols(pcol);
        if range.end > local {
            return Err(CoreError::BadArgument { call: "BlockCyclicMatrix::peer_local", argument: "range", why: format!(
                "BlockCyclicMatrix::peer_local: elements {range:?} of process ({prow}, {pcol}),                  whose local array has {local}"
            ) }
            .into());
        }
        self.storage.peer(self.layout.rank(prow, pcol), range)
    }

    /// Read the global rectangle `rows × cols` into `dst`, column-major with leading
    /// dimension `ld` (entry `(i, j)` at `dst[(j - cols.start) * ld + i - rows.start]`), in
    /// the shared phase: one strided get (a run per column) per block the rectangle crosses,
    /// a copy where the owner's memory is mapped here.
    pub fn read(
        &self,
        rows: Range<usize>,
        cols: Range<usize>,
        dst: &mut [T],
        ld: usize,
    ) -> Result<()> {
        let l = &self.layout;
        let (m, n) = (rows.len(), cols.len());
        if rows.end > l.rows() || cols.end > l.cols() || rows.start > rows.end {
            return Err(CoreError::BadArgument {
                call: "BlockCyclicMatrix::read",
                argument: "rows",
                why: format!(
                    "BlockCyclicMatrix::read: rows {rows:?} × columns {cols:?} of a {}×{} matrix",
                    l.rows(),
                    l.cols()
                ),
            }
            .into());
        }
        if m == 0 || n == 0 {
            return Ok(());
        }
        if ld < m || dst.len() < (n - 1) * ld + m {
            return Err(CoreError::BadArgument {
                call: "BlockCyclicMatrix::read",
                argument: "ld",
                why: format!(
                    "BlockCyclicMatrix::read: a {m}×{n} rectangle needs a leading dimension of at \
                 least {m} and {} elements, but got {ld} and {}",
                    (n - 1) * ld.max(m) + m,
                    dst.len()
                ),
            }
            .into());
        }
        for cp in l.col.pieces(cols.clone()) {
            let (pcol, lj) = l.local_col(cp.start);
            for rp in l.row.pieces(rows.clone()) {
                let (prow, li) = l.local_row(rp.start);
                let owner_ld = l.local_ld(prow);
                let at = (cp.start - cols.start) * ld + (rp.start - rows.start);
                self.storage.peer_strided(
                    l.rank(prow, pcol),
                    lj * owner_ld + li,
                    &[owner_ld, 1],
                    &mut dst[at..],
                    &[ld, 1],
                    &[cp.len(), rp.len()],
                )?;
            }
        }
        Ok(())
    }

    /// The same matrix in `row_block × col_block` blocks over the same grid and team (a
    /// collective): every rank pulls its new local blocks from wherever they live now. The
    /// old matrix is back in the phase it was in when this returns.
    pub fn redistribute(&mut self, row_block: usize, col_block: usize) -> Result<Self> {
        let l = self.layout;
        let (p, q) = l.grid();
        let layout = MatrixLayout::new(l.rows(), l.cols(), row_block, col_block, p, q)?
            .with_source(l.row.source, l.col.source)?;
        let mut new = BlockCyclicMatrix::new(self.storage_team(), layout)?;
        let was_own = self.phase() == Phase::Own;
        if was_own {
            self.share()?;
        }
        let (prow, pcol) = new.coords;
        let local = new.local()?;
        // Each new local block is one rectangle of the global matrix and of the local array.
        for lj0 in (0..local.cols).step_by(col_block) {
            let j = layout.global_col(pcol, lj0);
            let w = col_block.min(local.cols - lj0);
            for li0 in (0..local.rows).step_by(row_block) {
                let i = layout.global_row(prow, li0);
                let h = row_block.min(local.rows - li0);
                let at = lj0 * local.ld + li0;
                self.read(i..i + h, j..j + w, &mut local.data[at..], local.ld)?;
            }
        }
        if was_own {
            self.reclaim()?;
        }
        Ok(new)
    }

    fn storage_team(&self) -> &'t Team<'t> {
        self.storage.team()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Job;

    fn value(i: usize, j: usize) -> f64 {
        (1000 * i + j) as f64
    }

    #[test]
    fn numroc_and_index_maps_cover_every_index_once() {
        for (n, nb, p, src) in [
            (10, 3, 2, 0),
            (10, 3, 3, 2),
            (7, 7, 2, 1),
            (1, 4, 3, 0),
            (64, 8, 4, 3),
        ] {
            let axis = Axis {
                len: n,
                block: nb,
                procs: p,
                source: src,
            };
            let total: usize = (0..p).map(|r| axis.count(r)).sum();
            assert_eq!(total, n, "n {n} nb {nb} p {p} src {src}");
            let mut seen = vec![0; n];
            for r in 0..p {
                for li in 0..axis.count(r) {
                    let i = axis.global(r, li);
                    assert_eq!(axis.local(i), (r, li));
                    assert_eq!(axis.count_below(r, i), li);
                    seen[i] += 1;
                }
            }
            assert!(seen.iter().all(|&s| s == 1));
        }
    }

    #[test]
    fn bad_layouts_are_refused_by_name() {
        let e = MatrixLayout::new(4, 0, 2, 2, 1, 1).unwrap_err().to_string();
        assert!(e.contains("columns is 0"), "{e}");
        let e = MatrixLayout::new(4, 4, 2, 2, 1, 2)
            .unwrap()
            .with_source(0, 2)
            .unwrap_err()
            .to_string();
        assert!(e.contains("outside the 1×2 grid"), "{e}");
        Job::threads(3)
            .run(|ctx| {
                let team = Team::world(ctx)?;
                let layout = MatrixLayout::new(4, 4, 2, 2, 2, 2)?;
                let e = BlockCyclicMatrix::<f64>::new(&team, layout)
                    .err()
                    .expect("3 ranks cannot hold a 2×2 grid")
                    .to_string();
                assert!(e.contains("needs 4 ranks, but the team has 3"), "{e}");
                Ok(())
            })
            .unwrap();
    }

    #[test]
    fn every_rank_reads_any_rectangle_and_redistributes() {
        for (p, q) in [(1, 3), (3, 1), (2, 2)] {
            Job::threads(p * q)
                .run(|ctx| {
                    let team = Team::world(ctx)?;
                    let layout = MatrixLayout::new(13, 11, 3, 2, p, q)?.with_source(p - 1, 0)?;
                    let mut a = BlockCyclicMatrix::<f64>::new(&team, layout)?;
                    a.fill(value)?;
                    a.share()?;
                    for (rows, cols) in [(0..13, 0..11), (2..9, 3..4), (5..6, 0..11), (4..4, 1..3)]
                    {
                        let ld = rows.len() + 1;
                        let mut got = vec![-1.0; ld * cols.len()];
                        a.read(rows.clone(), cols.clone(), &mut got, ld)?;
                        for (c, j) in cols.clone().enumerate() {
                            for (r, i) in rows.clone().enumerate() {
                                assert_eq!(got[c * ld + r], value(i, j), "({i}, {j})");
                            }
                        }
                    }
                    let mut b = a.redistribute(4, 5)?;
                    assert_eq!(a.phase(), Phase::Shared);
                    assert_eq!(b.layout().row_block(), 4);
                    let (prow, pcol) = b.coords();
                    let lb = *b.layout();
                    let local = b.local()?;
                    for lj in 0..local.cols {
                        for li in 0..local.rows {
                            let (i, j) = (lb.global_row(prow, li), lb.global_col(pcol, lj));
                            assert_eq!(local.data[lj * local.ld + li], value(i, j));
                        }
                    }
                    Ok(())
                })
                .unwrap();
        }
    }
}
