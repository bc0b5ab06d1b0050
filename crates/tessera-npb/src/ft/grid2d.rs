//! FT over a 2-D process grid: pencils, for more ranks than slabs allow.
//!
//! The ranks form a `p1 × p2` grid; rank `(a, b)` is `a·p2 + b`. Each 3-D array goes
//! through three layouts, each with one whole dimension per rank for its 1-D FFTs:
//!
//! | layout | rank `(a, b)` owns | stored | FFTs along |
//! |---|---|---|---|
//! | space | z in block `a` of `p1`, y in block `b` of `p2` | `[z][y][x]` | x |
//! | middle | z in block `a` of `p1`, x in block `b` of `p2` | `[z][x][y]` | y |
//! | frequency | y in block `a` of `p1`, x in block `b` of `p2` | `[y][x][z]` | z |
//!
//! Space ↔ middle moves data only within a row of the process grid (same `a`), middle ↔
//! frequency only within a column (same `b`). As in the slab variants, every element is put
//! straight into its place in the owner's array as soon as the plane it belongs to has been
//! transformed (between row and column, a batch of planes, so that writes run along the
//! owner's contiguous dimension); each transpose is an exchange of the receiving array
//! within the row or column ([`PhasedArray::exchange_within`]): it opens with a barrier of
//! that group and ends with one signal per sender.
//! This module must never assume a rank holds a whole plane.

use std::time::{Duration, Instant};

use tessera::{CoreError, PhasedArray, Team};

use super::{
    checksum_points, decay_tables, initial_row, read_timers, total_checksum, ClassData, Ffts,
    Steps, C, PLANE_BATCH, X, Y, Z,
};

/// The process grid `[p1, p2]` for `ranks` on a grid of `n = [nx, ny, nz]` points: as
/// square as the grid allows, p1 ≥ p2. `None` if no power-of-two split fits.
pub(super) fn process_grid(ranks: usize, n: [usize; 3]) -> Option<[usize; 2]> {
    let [nx, ny, nz] = n;
    let fits = |p1: usize, p2: usize| p1 <= nz.min(ny) && p2 <= nx.min(ny);
    let mut p2 = 1 << (ranks.trailing_zeros() / 2);
    while p2 <= ranks {
        let p1 = ranks / p2;
        if p1 * p2 == ranks && fits(p1, p2) {
            return Some([p1, p2]);
        }
        p2 *= 2;
    }
    None
}

/// One rank's state.
pub(super) struct Solver<'c> {
    world: &'c Team<'c>,
    /// Our row of the process grid (same `a`) and our column (same `b`): the groups of the
    /// two transposes.
    row: Team<'c>,
    column: Team<'c>,
    n: [usize; 3],
    grid: [usize; 2],
    /// This rank's place `(a, b)` in the process grid.
    at: [usize; 2],
    /// z per `a` (space, middle), y per `b` (space), x per `b` (middle, frequency), y per
    /// `a` (frequency).
    zlen: usize,
    ylen_b: usize,
    xlen: usize,
    ylen_a: usize,
    /// The three layouts' arrays: space and frequency written by others only within our
    /// row and column respectively, middle by either (one exchange at a time).
    space: PhasedArray<'c, C>,
    middle: PhasedArray<'c, C>,
    freq: PhasedArray<'c, C>,
    /// u1 in the frequency layout (private).
    work: Vec<C>,
    ffts: Ffts,
    decay: [Vec<f64>; 3],
    comm: Duration,
    wait: Duration,
}

impl<'c> Solver<'c> {
    pub(super) fn new(world: &'c Team<'c>, data: &ClassData) -> tessera::Result<Self> {
        let n = [data.nx, data.ny, data.nz];
        let (ranks, me) = (world.size(), world.rank());
        let grid = process_grid(ranks, n).ok_or_else(|| {
            CoreError::BadArgument { call: "ft", argument: "ranks", why: format!(
                "ft: {ranks} ranks do not split a {}x{}x{} grid into pencils (a power-of-two p1 × p2 with p1 ≤ min(nz, ny) and p2 ≤ min(nx, ny)); use fewer ranks",
                n[0],
                n[1],
                n[2]
            ) }
        })?;
        let [p1, p2] = grid;
        let at = [me / p2, me % p2];
        let local = n.iter().product::<usize>() / ranks;
        let split = |colour: usize, key: usize| -> tessera::Result<Team<'c>> {
            Ok(world
                .split(Some(colour as u32), key as u64)?
                .expect("every rank is in its row and its column"))
        };
        Ok(Solver {
            world,
            row: split(at[0], at[1])?,
            column: split(at[1], at[0])?,
            n,
            grid,
            at,
            zlen: data.nz / p1,
            ylen_b: data.ny / p2,
            xlen: data.nx / p2,
            ylen_a: data.ny / p1,
            space: PhasedArray::new(world, local)?,
            middle: PhasedArray::new(world, local)?,
            freq: PhasedArray::new(world, local)?,
            work: vec![C::default(); local],
            ffts: Ffts::new(n),
            decay: decay_tables(n),
            comm: Duration::ZERO,
            wait: Duration::ZERO,
        })
    }
}

impl Steps for Solver<'_> {
    fn initial_conditions(&mut self) -> tessera::Result<()> {
        let nx = self.n[0];
        let (z0, y0) = (self.at[0] * self.zlen, self.at[1] * self.ylen_b);
        let space = self.space.own()?;
        let mut randoms = vec![0.0; 2 * nx];
        for (i, row) in space.chunks_exact_mut(nx).enumerate() {
            let (zl, yl) = (i / self.ylen_b, i % self.ylen_b);
            initial_row(self.n, y0 + yl, z0 + zl, &mut randoms, row);
        }
        Ok(())
    }

    fn forward_fft(&mut self) -> tessera::Result<()> {
        let [nx, ny, nz] = self.n;
        let (zlen, ylen_b, xlen, ylen_a) = (self.zlen, self.ylen_b, self.xlen, self.ylen_a);
        let [a, b] = self.at;
        // Space → middle, within our row: x FFTs, then each plane's x-blocks to their owners.
        let t = Instant::now();
        let mut exchange = self.middle.exchange_within(&self.row)?;
        self.wait += t.elapsed();
        let space = self.space.own()?;
        for plane in space.chunks_exact_mut(ylen_b * nx) {
            self.ffts.along(X, true, plane);
        }
        let t = Instant::now();
        for (zl, plane) in space.chunks_exact(ylen_b * nx).enumerate() {
            for b2 in 0..self.grid[1] {
                // (z, y, x) → middle[z][x − x0][y] on (a, x's block).
                exchange.put_strided(
                    a * self.grid[1] + b2,
                    zl * xlen * ny + b * ylen_b,
                    &[ny, 1],
                    &plane[b2 * xlen..],
                    &[1, nx],
                    &[xlen, ylen_b],
                )?;
            }
        }
        self.comm += t.elapsed();
        let t = Instant::now();
        exchange.finish()?;

        // Middle → frequency, within our column: y FFTs, then each plane's y-blocks.
        let mut exchange = self.freq.exchange_within(&self.column)?;
        self.wait += t.elapsed();
        let middle = self.middle.own()?;
        let batch = PLANE_BATCH.min(zlen);
        for first in (0..zlen).step_by(batch) {
            let planes = &mut middle[first * xlen * ny..(first + batch) * xlen * ny];
            self.ffts.along(Y, true, planes);
            let t = Instant::now();
            for a2 in 0..self.grid[0] {
                // (z, x, y) → freq[y − y0][x][z] on (y's block, b): runs of `batch` along z.
                exchange.put_strided(
                    a2 * self.grid[1] + b,
                    a * zlen + first,
                    &[xlen * nz, nz, 1],
                    &planes[a2 * ylen_a..],
                    &[1, ny, xlen * ny],
                    &[ylen_a, xlen, batch],
                )?;
            }
            self.comm += t.elapsed();
        }
        let t = Instant::now();
        exchange.finish()?;
        self.wait += t.elapsed();
        self.ffts.along(Z, true, self.freq.own()?);
        Ok(())
    }

    fn evolve(&mut self) -> tessera::Result<()> {
        let nz = self.n[2];
        let (y0, x0) = (self.at[0] * self.ylen_a, self.at[1] * self.xlen);
        let freq = self.freq.own()?;
        let [dx, dy, dz] = &self.decay;
        let rows = freq
            .chunks_exact_mut(nz)
            .zip(self.work.chunks_exact_mut(nz));
        for (i, (u0, u1)) in rows.enumerate() {
            let (yl, xl) = (i / self.xlen, i % self.xlen);
            let fxy = dy[y0 + yl] * dx[x0 + xl];
            for ((e0, e1), &fz) in u0.iter_mut().zip(u1.iter_mut()).zip(dz) {
                *e0 *= fxy * fz;
                *e1 = *e0;
            }
        }
        Ok(())
    }

    fn inverse_fft(&mut self) -> tessera::Result<()> {
        let [nx, ny, nz] = self.n;
        let (zlen, ylen_b, xlen, ylen_a) = (self.zlen, self.ylen_b, self.xlen, self.ylen_a);
        let [a, b] = self.at;
        // Frequency → middle, within our column: z FFTs per y-plane, then its z-blocks.
        let t = Instant::now();
        let mut exchange = self.middle.exchange_within(&self.column)?;
        self.wait += t.elapsed();
        let batch = PLANE_BATCH.min(ylen_a);
        for first in (0..ylen_a).step_by(batch) {
            let planes = &mut self.work[first * xlen * nz..(first + batch) * xlen * nz];
            self.ffts.along(Z, false, planes);
            let t = Instant::now();
            for a2 in 0..self.grid[0] {
                // (y, x, z) → middle[z − z0][x][y] on (z's block, b): runs of `batch` along y.
                exchange.put_strided(
                    a2 * self.grid[1] + b,
                    a * ylen_a + first,
                    &[xlen * ny, ny, 1],
                    &planes[a2 * zlen..],
                    &[1, nz, xlen * nz],
                    &[zlen, xlen, batch],
                )?;
            }
            self.comm += t.elapsed();
        }
        let t = Instant::now();
        exchange.finish()?;

        // Middle → space, within our row: y FFTs per z-plane, then its y-blocks.
        let mut exchange = self.space.exchange_within(&self.row)?;
        self.wait += t.elapsed();
        let middle = self.middle.own()?;
        for (zl, plane) in middle.chunks_exact_mut(xlen * ny).enumerate() {
            self.ffts.along(Y, false, plane);
            let t = Instant::now();
            for b2 in 0..self.grid[1] {
                // (z, x, y) → space[z][y − y0][x] on (a, y's block).
                exchange.put_strided(
                    a * self.grid[1] + b2,
                    zl * ylen_b * nx + b * xlen,
                    &[nx, 1],
                    &plane[b2 * ylen_b..],
                    &[1, ny],
                    &[ylen_b, xlen],
                )?;
            }
            self.comm += t.elapsed();
        }
        let t = Instant::now();
        exchange.finish()?;
        self.wait += t.elapsed();
        self.ffts.along(X, false, self.space.own()?);
        Ok(())
    }

    fn checksum(&mut self) -> tessera::Result<C> {
        let nx = self.n[0];
        let (z0, y0) = (self.at[0] * self.zlen, self.at[1] * self.ylen_b);
        let space = self.space.own()?;
        let mut sum = C::default();
        for [x, y, z] in checksum_points(self.n) {
            if (z0..z0 + self.zlen).contains(&z) && (y0..y0 + self.ylen_b).contains(&y) {
                sum += space[((z - z0) * self.ylen_b + y - y0) * nx + x];
            }
        }
        total_checksum(self.world, sum, self.n)
    }

    fn team(&self) -> &Team<'_> {
        self.world
    }

    fn comm_wait(&mut self, reset: bool) -> (Duration, Duration) {
        read_timers(&mut self.comm, &mut self.wait, reset)
    }
}

#[cfg(test)]
mod tests {
    use super::process_grid;

    #[test]
    fn process_grids_are_as_square_as_the_grid_allows() {
        assert_eq!(process_grid(1, [64; 3]), Some([1, 1]));
        assert_eq!(process_grid(2, [64; 3]), Some([2, 1]));
        assert_eq!(process_grid(8, [64; 3]), Some([4, 2]));
        assert_eq!(process_grid(128, [64; 3]), Some([16, 8]));
        // W: 128 × 128 × 32; p1 may not pass nz = 32.
        assert_eq!(process_grid(2048, [128, 128, 32]), Some([32, 64]));
        assert_eq!(process_grid(8192, [128, 128, 32]), None);
    }
}
