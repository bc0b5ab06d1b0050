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
//! owner's contiguous dimension); each transpose starts with a barrier and ends with one
//! post per sender.
//! This module must never assume a rank holds a whole plane.

use std::time::{Duration, Instant};

use tessera::{Context, CoreError, GlobalPtr, Semaphore, Team};

use super::{
    checksum_points, decay_tables, initial_row, own_mut, read_timers, scratch_len, total_checksum,
    ClassData, Plans, Steps, C, PLANE_BATCH,
};

/// The process grid `[p1, p2]` for `ranks` on a grid of `n = [nx, ny, nz]` points: as
/// square as the grid allows, p1 ≥ p2. `None` if no power-of-two split fits.
pub fn process_grid(ranks: usize, n: [usize; 3]) -> Option<[usize; 2]> {
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
    ctx: &'c Context,
    team: Team<'c>,
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
    /// The three layouts' arrays, one per rank at the same offset.
    space: GlobalPtr<C>,
    middle: GlobalPtr<C>,
    freq: GlobalPtr<C>,
    arrived: Semaphore,
    /// u1 in the frequency layout (private).
    work: Vec<C>,
    forward: Plans,
    inverse: Plans,
    scratch: Vec<C>,
    decay: [Vec<f64>; 3],
    comm: Duration,
    wait: Duration,
}

impl<'c> Solver<'c> {
    pub(super) fn new(ctx: &'c Context, data: &ClassData) -> tessera::Result<Self> {
        let n = [data.nx, data.ny, data.nz];
        let grid = process_grid(ctx.ranks(), n).ok_or_else(|| {
            CoreError::Invalid(format!(
                "ft: {} ranks do not split a {}x{}x{} grid into pencils (a power-of-two p1 × p2 with p1 ≤ min(nz, ny) and p2 ≤ min(nx, ny)); use fewer ranks",
                ctx.ranks(),
                n[0],
                n[1],
                n[2]
            ))
        })?;
        let [p1, p2] = grid;
        let at = [ctx.rank() / p2, ctx.rank() % p2];
        let local = n.iter().product::<usize>() / ctx.ranks();
        let mut planner = super::Planner::new();
        let forward = Plans::new(&mut planner, n, true);
        let inverse = Plans::new(&mut planner, n, false);
        Ok(Solver {
            ctx,
            team: Team::world(ctx)?,
            n,
            grid,
            at,
            zlen: data.nz / p1,
            ylen_b: data.ny / p2,
            xlen: data.nx / p2,
            ylen_a: data.ny / p1,
            space: ctx.alloc_collective::<C>(local)?,
            middle: ctx.alloc_collective::<C>(local)?,
            freq: ctx.alloc_collective::<C>(local)?,
            arrived: ctx.semaphore_collective()?,
            work: vec![C::default(); local],
            scratch: vec![C::default(); scratch_len(&[&forward, &inverse])],
            forward,
            inverse,
            decay: decay_tables(n),
            comm: Duration::ZERO,
            wait: Duration::ZERO,
        })
    }

    fn local_len(&self) -> usize {
        self.n.iter().product::<usize>() / self.ctx.ranks()
    }

    /// This rank's part of `self.space`, `self.middle` or `self.freq`.
    ///
    /// # Safety
    /// As the slab solver's: each array is written by other ranks only inside the
    /// transposes into it, between their opening barrier and the owner's wait for every
    /// sender, and callers hold the slice only outside that window.
    #[allow(clippy::mut_from_ref)]
    unsafe fn own_mut(&self, array: GlobalPtr<C>) -> tessera::Result<&'c mut [C]> {
        // SAFETY: the caller's contract above.
        unsafe { own_mut(self.ctx, array, self.local_len()) }
    }

    /// The world rank at process-grid place `(a, b)`.
    fn rank_at(&self, a: usize, b: usize) -> usize {
        a * self.grid[1] + b
    }

    /// Start a transpose: every owner is done with the array it is about to receive.
    fn open_transpose(&mut self) -> tessera::Result<()> {
        let t = Instant::now();
        self.team.barrier()?;
        self.wait += t.elapsed();
        Ok(())
    }

    /// Post every rank in `peers` (this transpose's owners, who are also its senders)
    /// once, and wait for a post from each of them.
    fn close_transpose(&mut self, peers: Vec<usize>) -> tessera::Result<()> {
        let t = Instant::now();
        for &d in &peers {
            self.arrived.on(d).post(self.ctx, 1)?;
        }
        self.arrived.wait(self.ctx, peers.len() as u64)?;
        self.wait += t.elapsed();
        Ok(())
    }

    /// The ranks of our process-grid row (same `a`).
    fn row(&self) -> Vec<usize> {
        (0..self.grid[1])
            .map(|b| self.rank_at(self.at[0], b))
            .collect()
    }

    /// The ranks of our process-grid column (same `b`).
    fn column(&self) -> Vec<usize> {
        (0..self.grid[0])
            .map(|a| self.rank_at(a, self.at[1]))
            .collect()
    }
}

impl Steps for Solver<'_> {
    fn initial_conditions(&mut self) -> tessera::Result<()> {
        let nx = self.n[0];
        let (z0, y0) = (self.at[0] * self.zlen, self.at[1] * self.ylen_b);
        // SAFETY: called before the forward transposes; the space array is written by
        // others only in the inverse's last transpose, after a barrier we reach later.
        let space = unsafe { self.own_mut(self.space)? };
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
        self.open_transpose()?;
        // SAFETY: between the two barriers of the forward FFT only this rank uses its space
        // array.
        let space = unsafe { self.own_mut(self.space)? };
        for plane in space.chunks_exact_mut(ylen_b * nx) {
            self.forward
                .x
                .process_with_scratch(plane, &mut self.scratch);
        }
        let t = Instant::now();
        for (zl, plane) in space.chunks_exact(ylen_b * nx).enumerate() {
            for b2 in 0..self.grid[1] {
                // (z, y, x) → middle[z][x − x0][y] on (a, x's block).
                self.ctx.put_strided(
                    self.middle
                        .on(self.rank_at(a, b2))
                        .add(zl * xlen * ny + b * ylen_b),
                    &[ny, 1],
                    &plane[b2 * xlen..],
                    &[1, nx],
                    &[xlen, ylen_b],
                )?;
            }
        }
        self.comm += t.elapsed();
        self.close_transpose(self.row())?;

        // Middle → frequency, within our column: y FFTs, then each plane's y-blocks.
        self.open_transpose()?;
        // SAFETY: every row peer has posted: our middle array is complete, and nobody
        // writes it again before the inverse's first transpose.
        let middle = unsafe { self.own_mut(self.middle)? };
        let batch = PLANE_BATCH.min(zlen);
        for first in (0..zlen).step_by(batch) {
            let planes = &mut middle[first * xlen * ny..(first + batch) * xlen * ny];
            self.forward
                .y
                .process_with_scratch(planes, &mut self.scratch);
            let t = Instant::now();
            for a2 in 0..self.grid[0] {
                // (z, x, y) → freq[y − y0][x][z] on (y's block, b): runs of `batch` along z.
                self.ctx.put_strided(
                    self.freq.on(self.rank_at(a2, b)).add(a * zlen + first),
                    &[xlen * nz, nz, 1],
                    &planes[a2 * ylen_a..],
                    &[1, ny, xlen * ny],
                    &[ylen_a, xlen, batch],
                )?;
            }
            self.comm += t.elapsed();
        }
        self.close_transpose(self.column())?;
        // SAFETY: every column peer has posted; nothing writes our frequency array again.
        let freq = unsafe { self.own_mut(self.freq)? };
        self.forward.z.process_with_scratch(freq, &mut self.scratch);
        Ok(())
    }

    fn evolve(&mut self) -> tessera::Result<()> {
        let nz = self.n[2];
        let (y0, x0) = (self.at[0] * self.ylen_a, self.at[1] * self.xlen);
        // SAFETY: see forward_fft's last step.
        let freq = unsafe { self.own_mut(self.freq)? };
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
        self.open_transpose()?;
        let mut work = std::mem::take(&mut self.work);
        let batch = PLANE_BATCH.min(ylen_a);
        for first in (0..ylen_a).step_by(batch) {
            let planes = &mut work[first * xlen * nz..(first + batch) * xlen * nz];
            self.inverse
                .z
                .process_with_scratch(planes, &mut self.scratch);
            let t = Instant::now();
            for a2 in 0..self.grid[0] {
                // (y, x, z) → middle[z − z0][x][y] on (z's block, b): runs of `batch` along y.
                self.ctx.put_strided(
                    self.middle.on(self.rank_at(a2, b)).add(a * ylen_a + first),
                    &[xlen * ny, ny, 1],
                    &planes[a2 * zlen..],
                    &[1, nz, xlen * nz],
                    &[zlen, xlen, batch],
                )?;
            }
            self.comm += t.elapsed();
        }
        self.work = work;
        self.close_transpose(self.column())?;

        // Middle → space, within our row: y FFTs per z-plane, then its y-blocks.
        self.open_transpose()?;
        // SAFETY: every column peer has posted; nothing writes our middle array again
        // before the next forward FFT.
        let middle = unsafe { self.own_mut(self.middle)? };
        for (zl, plane) in middle.chunks_exact_mut(xlen * ny).enumerate() {
            self.inverse
                .y
                .process_with_scratch(plane, &mut self.scratch);
            let t = Instant::now();
            for b2 in 0..self.grid[1] {
                // (z, x, y) → space[z][y − y0][x] on (a, y's block).
                self.ctx.put_strided(
                    self.space
                        .on(self.rank_at(a, b2))
                        .add(zl * ylen_b * nx + b * xlen),
                    &[nx, 1],
                    &plane[b2 * ylen_b..],
                    &[1, ny],
                    &[ylen_b, xlen],
                )?;
            }
            self.comm += t.elapsed();
        }
        self.close_transpose(self.row())?;
        // SAFETY: every row peer has posted; nobody writes our space array again before
        // the next inverse FFT's last transpose, which opens with a barrier.
        let space = unsafe { self.own_mut(self.space)? };
        self.inverse
            .x
            .process_with_scratch(space, &mut self.scratch);
        Ok(())
    }

    fn checksum(&self) -> tessera::Result<C> {
        let nx = self.n[0];
        let (z0, y0) = (self.at[0] * self.zlen, self.at[1] * self.ylen_b);
        // SAFETY: read between the inverse FFT's end and the next transpose's barrier.
        let space = unsafe { self.own_mut(self.space)? };
        let mut sum = C::default();
        for [x, y, z] in checksum_points(self.n) {
            if (z0..z0 + self.zlen).contains(&z) && (y0..y0 + self.ylen_b).contains(&y) {
                sum += space[((z - z0) * self.ylen_b + y - y0) * nx + x];
            }
        }
        total_checksum(&self.team, sum, self.n)
    }

    fn team(&self) -> &Team<'_> {
        &self.team
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
