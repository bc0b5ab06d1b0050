//! What the three applications share: the process grid and its teams, the test matrices,
//! distributed matrix–vector products and norms for the checks, and the timer that
//! separates communication from computation.

use std::time::Instant;
use tessera::coll::{Allreduce, Barrier};
use tessera::Blocking;

use tessera::{BlockCyclicMatrix, MatrixLayout, Op, Team};

use crate::blas::{self, Trans};

/// A `p × q` process grid over the world: the world team and the row and column teams
/// (a rank's row team holds the ranks of its process row; its rank there is its process
/// column, and the other way round for the column team).
pub struct Grid<'t> {
    /// Every rank.
    pub world: &'t Team<'t>,
    /// The ranks of this rank's process row.
    pub row: Team<'t>,
    /// The ranks of this rank's process column.
    pub col: Team<'t>,
    /// Process rows and columns.
    pub shape: (usize, usize),
    /// This rank's `(process row, process column)`.
    pub me: (usize, usize),
}

impl<'t> Grid<'t> {
    /// Split `world` into a `p × q` grid (collective).
    pub fn new(world: &'t Team<'t>, p: usize, q: usize) -> tessera::Result<Grid<'t>> {
        let (row, col) = world.grid(p, q)?;
        let me = (world.rank() / q, world.rank() % q);
        Ok(Grid {
            world,
            row,
            col,
            shape: (p, q),
            me,
        })
    }

    /// The layout of an `n × n` matrix in `nb × nb` blocks over this grid.
    pub fn square(&self, n: usize, nb: usize) -> tessera::Result<MatrixLayout> {
        MatrixLayout::new(n, n, nb, nb, self.shape.0, self.shape.1)
    }
}

/// A reproducible pseudo-random number in [-0.5, 0.5) for entry `(i, j)` of matrix
/// `seed`, computable on any rank without communication (SplitMix64 of the three).
pub fn uniform(seed: u64, i: usize, j: usize) -> f64 {
    let mut z = seed
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add((i as u64) << 32 | j as u64);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64 - 0.5
}

/// Time spent inside communication, kept apart from the total.
#[derive(Default)]
pub struct CommTimer {
    seconds: f64,
}

impl CommTimer {
    /// Run `f`, counting its time as communication.
    pub fn time<R>(&mut self, f: impl FnOnce() -> R) -> R {
        let start = Instant::now();
        let r = f();
        self.seconds += start.elapsed().as_secs_f64();
        r
    }

    /// Seconds counted so far.
    pub fn seconds(&self) -> f64 {
        self.seconds
    }
}

/// `y = M · x` for a distributed `M` and `x` held whole on every rank; `y` is returned
/// whole on every rank (each rank multiplies its local part, then one allreduce sums the
/// process rows' partial results). `local` is this rank's local array of `M`.
pub fn matvec(
    world: &Team<'_>,
    layout: &MatrixLayout,
    me: (usize, usize),
    local: &[f64],
    x: &[f64],
) -> tessera::Result<Vec<f64>> {
    let (mloc, nloc, ld) = (
        layout.local_rows(me.0),
        layout.local_cols(me.1),
        layout.local_ld(me.0),
    );
    let xl: Vec<f64> = (0..nloc).map(|lj| x[layout.global_col(me.1, lj)]).collect();
    let mut yl = vec![0.0; mloc];
    blas::gemv(Trans::No, mloc, nloc, 1.0, local, ld, &xl, 0.0, &mut yl);
    scatter_rows(world, layout, me, &yl)
}

/// `y = M · x` and the row sums of `|M|` for a matrix given by `entry(i, j)` on the local
/// part of `layout` (the original matrix of a factorisation, regenerated rather than kept).
pub fn matvec_generated(
    world: &Team<'_>,
    layout: &MatrixLayout,
    me: (usize, usize),
    entry: impl Fn(usize, usize) -> f64,
    x: &[f64],
) -> tessera::Result<(Vec<f64>, Vec<f64>)> {
    let (mloc, nloc) = (layout.local_rows(me.0), layout.local_cols(me.1));
    let (mut yl, mut sl) = (vec![0.0; mloc], vec![0.0; mloc]);
    for lj in 0..nloc {
        let j = layout.global_col(me.1, lj);
        for li in 0..mloc {
            let a = entry(layout.global_row(me.0, li), j);
            yl[li] += a * x[j];
            sl[li] += a.abs();
        }
    }
    Ok((
        scatter_rows(world, layout, me, &yl)?,
        scatter_rows(world, layout, me, &sl)?,
    ))
}

/// The `∞`-norm (largest row sum of `|M|`) of the stored matrix.
pub fn norm_inf(
    world: &Team<'_>,
    layout: &MatrixLayout,
    me: (usize, usize),
    local: &[f64],
) -> tessera::Result<f64> {
    let (mloc, nloc, ld) = (
        layout.local_rows(me.0),
        layout.local_cols(me.1),
        layout.local_ld(me.0),
    );
    let mut sums = vec![0.0; mloc];
    for lj in 0..nloc {
        for (s, a) in sums.iter_mut().zip(&local[lj * ld..lj * ld + mloc]) {
            *s += a.abs();
        }
    }
    Ok(max_abs(&scatter_rows(world, layout, me, &sums)?))
}

/// Per-local-row values summed over the process rows' ranks into one global vector held
/// by every rank.
fn scatter_rows(
    world: &Team<'_>,
    layout: &MatrixLayout,
    me: (usize, usize),
    local: &[f64],
) -> tessera::Result<Vec<f64>> {
    let mut full = vec![0.0; layout.rows()];
    for (li, v) in local.iter().enumerate() {
        full[layout.global_row(me.0, li)] = *v;
    }
    let mut sum = vec![0.0; full.len()];
    world.run(Allreduce::new(&full, Op::Sum).to(&mut sum), Blocking)?;
    Ok(sum)
}

/// The largest magnitude in `v` (the vector `∞`-norm).
pub fn max_abs(v: &[f64]) -> f64 {
    v.iter().fold(0.0f64, |m, x| m.max(x.abs()))
}

/// Start every rank's clock together: a barrier of the world, then the time.
pub fn start_clock(world: &Team<'_>) -> tessera::Result<Instant> {
    world.run(Barrier, Blocking)?;
    Ok(Instant::now())
}

/// Stop the clocks: a barrier, then the elapsed time (every rank's is the slowest rank's,
/// to within the barrier) and the largest communication time on any rank.
pub fn stop_clock(
    world: &Team<'_>,
    start: Instant,
    comm: &CommTimer,
) -> tessera::Result<(f64, f64)> {
    world.run(Barrier, Blocking)?;
    let elapsed = start.elapsed().as_secs_f64();
    let comm = world.run(Allreduce::value(comm.seconds(), Op::Max), Blocking)?;
    Ok((elapsed, comm))
}

/// An input matrix of `problem` over the grid in its blocks, its entries from `entry`:
/// generated there directly, or, when the problem names an input block size, generated in
/// those blocks and then redistributed, that step's wall time (barrier to barrier) added
/// to `redistribution`.
pub fn input_matrix<'t>(
    grid: &'t Grid<'t>,
    problem: &crate::Problem,
    entry: impl FnMut(usize, usize) -> f64,
    redistribution: &mut Option<f64>,
) -> tessera::Result<BlockCyclicMatrix<'t, f64>> {
    let layout = grid.square(problem.n, problem.block)?;
    let Some(b0) = problem.input_block else {
        let mut m = matrix(grid, layout)?;
        m.fill(entry)?;
        return Ok(m);
    };
    let (p, q) = layout.grid();
    let from = MatrixLayout::new(layout.rows(), layout.cols(), b0, b0, p, q)?;
    let mut input = matrix(grid, from)?;
    input.fill(entry)?;
    let start = start_clock(grid.world)?;
    let m = input.redistribute(layout.row_block(), layout.col_block())?;
    let (seconds, _) = stop_clock(grid.world, start, &CommTimer::default())?;
    *redistribution = Some(redistribution.unwrap_or(0.0) + seconds);
    Ok(m)
}

/// Allocate an `n × n` matrix over the grid.
pub fn matrix<'t>(
    grid: &'t Grid<'t>,
    layout: MatrixLayout,
) -> tessera::Result<BlockCyclicMatrix<'t, f64>> {
    BlockCyclicMatrix::new(grid.world, layout)
}
