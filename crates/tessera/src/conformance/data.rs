//! The conformance cases of the distributed data: grid copies, ghost exchange, shared arrays.
//!
//! This module must never special-case a conduit: what it checks is the contract.

use super::*;
use crate::coll::Allreduce;
use crate::Blocking;

/// A deterministic stream every rank draws identically (SplitMix64), so that all ranks
/// agree on random test parameters without communicating.
struct Draw(u64);

impl Draw {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % (hi - lo + 1) as u64) as i64
    }

    fn point(&mut self, lo: i64, hi: i64) -> Point<3> {
        Point(std::array::from_fn(|_| self.range(lo, hi)))
    }

    /// A box of 1 to 6 points a side somewhere in [−4, 9]³, strided one time in four.
    fn rect(&mut self) -> RectDomain<3> {
        let lo = self.point(-4, 4);
        let hi = lo + self.point(0, 5);
        let stride = if self.next().is_multiple_of(4) {
            self.point(1, 2)
        } else {
            Point::all(1)
        };
        RectDomain::strided(lo, hi, stride)
    }
}

/// Copies between grids of every kind on every combination of ranks: a global grid on rank
/// d from a global grid on rank s, issued by any rank i (local or remote on both sides,
/// including third-party copies), from i's local grid into a global one, and from a global
/// grid into i's local one, with translations, restrictions and strides. Every rank keeps
/// the same sequential model of all grids; the issuer checks the destination against it.
pub(super) fn grid_copies(ctx: &Context) -> RankResult {
    let ranks = ctx.ranks();
    let team = Team::world(ctx)?;
    let label = |owner: usize, p: Point<3>| {
        (owner as i64 + 1) * 1_000_000 + 10_000 * p[0] + 100 * p[1] + p[2]
    };
    let mut draw = Draw(0x5eed);
    let domains: Vec<_> = (0..ranks).map(|_| draw.rect().grow(2)).collect();
    let me = ctx.rank();
    let global = GlobalGrid::from_fn(ctx, domains[me], |p| label(me, p))?;
    let refs = global.exchange(&team)?;
    // The model: every rank's global grid and every rank's local grid.
    let mut model: Vec<Grid<i64, 3>> = (0..ranks)
        .map(|r| Grid::from_fn(domains[r], |p| label(r, p)))
        .collect();
    let mut locals: Vec<Grid<i64, 3>> = (0..ranks)
        .map(|r| Grid::from_fn(domains[r].translate(Point::all(1)), |p| -label(r, p)))
        .collect();
    ctx.barrier()?;
    for round in 0..48 {
        let (issuer, d, s) = (
            draw.next() as usize % ranks,
            draw.next() as usize % ranks,
            draw.next() as usize % ranks,
        );
        let (shift, window) = (draw.point(-3, 3), draw.rect().grow(2));
        let kind = round % 4;
        let moved_here = if issuer == me {
            match kind {
                // global ← global, blocking and nonblocking
                0 => refs[d]
                    .restrict(&window)
                    .copy_from(ctx, &refs[s].translate(shift))?,
                1 => {
                    let src = refs[s].translate(shift);
                    let (n, handle) = refs[d].restrict(&window).copy_from_nb(ctx, &src)?;
                    handle.wait()?;
                    n
                }
                // global ← the issuer's local grid
                2 => refs[d]
                    .restrict(&window)
                    .copy_from(ctx, &locals[me].view().translate(shift))?,
                // the issuer's local grid ← global
                _ => locals[me]
                    .view_mut()
                    .restrict(&window)
                    .copy_from_ref(ctx, &refs[s].translate(shift))?,
            }
        } else {
            0
        };
        // Every rank applies the same copy to its model.
        let expected = match kind {
            0 | 1 => {
                let src = model[s].clone();
                model[d]
                    .view_mut()
                    .restrict(&window)
                    .copy_from(&src.view().translate(shift))
            }
            2 => {
                let src = locals[issuer].view();
                model[d]
                    .view_mut()
                    .restrict(&window)
                    .copy_from(&src.translate(shift))
            }
            _ => locals[issuer]
                .view_mut()
                .restrict(&window)
                .copy_from(&model[s].view().translate(shift)),
        };
        ctx.barrier()?;
        if issuer == me {
            ensure(moved_here == expected, || {
                format!("grid copy round {round}: moved {moved_here} elements, want {expected}")
            })?;
            let (checked, want) = if kind == 3 {
                (locals[me].clone(), &locals[me])
            } else {
                let mut back = Grid::filled(domains[d], 0i64);
                back.view_mut().copy_from_ref(ctx, &refs[d])?;
                (back, &model[d])
            };
            ensure(&checked == want, || {
                let bad = want
                    .domain()
                    .iter()
                    .find(|&p| checked[p] != want[p])
                    .unwrap();
                format!(
                    "grid copy round {round} (kind {kind}, rank {d} from {s}, shift {shift}): at {bad} have {}, want {}",
                    checked[bad], want[bad]
                )
            })?;
        }
        ctx.barrier()?;
    }
    Ok(())
}

/// Ghost exchange with every strategy on a periodic 3-D grid with uneven blocks: every
/// ghost cell holds the value of the point it wraps to, and a 27-point stencil over each
/// block equals the serial periodic stencil. Run twice per grid (the second exchange must
/// not mix with the first).
pub(super) fn ghost_exchange(ctx: &Context) -> RankResult {
    let ranks = ctx.ranks();
    let whole = RectDomain::new(Point([-3, 2, 0]), Point([8, 9, 6]));
    let extent = Point(whole.shape().map(|n| n as i64));
    let wrap = |p: Point<3>| {
        Point(std::array::from_fn(|d| {
            whole.lo()[d] + (p[d] - whole.lo()[d]).rem_euclid(extent[d])
        }))
    };
    let value = |p: Point<3>, epoch: i64| {
        (p[0] * 7919 + p[1] * 104_729 + p[2] * 13 + epoch * 1_000_003) % 65_521
    };
    // Process grids: all ranks along each dimension in turn, and a balanced one.
    let mut shapes = vec![[ranks, 1, 1], [1, ranks, 1], [1, 1, ranks]];
    let balanced = {
        let mut p = [1usize; 3];
        let mut left = ranks;
        let mut d = 0;
        while left.is_multiple_of(2) {
            p[d] *= 2;
            left /= 2;
            d = (d + 1) % 3;
        }
        p[d] *= left;
        p
    };
    shapes.push(balanced);
    for procs in shapes {
        if (0..3).any(|d| whole.extent(d) < 2 * procs[d]) {
            continue;
        }
        for strategy in HaloStrategy::ALL {
            for width in [1i64, 2] {
                if (0..3).any(|d| whole.extent(d) < width as usize * procs[d]) {
                    continue;
                }
                let mut grid = HaloGrid::<i64, 3>::new(ctx, whole, procs, width, strategy)?;
                let interior = grid.interior();
                for epoch in 0..2 {
                    grid.view_mut()
                        .restrict(&interior)
                        .foreach_mut(|p, e| *e = value(p, epoch));
                    grid.exchange()?;
                    let view = grid.view();
                    let mut bad = None;
                    view.foreach(|p, &e| {
                        if bad.is_none() && e != value(wrap(p), epoch) {
                            bad = Some((p, e));
                        }
                    });
                    ensure(bad.is_none(), || {
                        let (p, e) = bad.unwrap();
                        format!(
                            "{strategy} exchange over {procs:?}, width {width}, epoch {epoch}: ghost {p} holds {e}, want {} (the value at {})",
                            value(wrap(p), epoch),
                            wrap(p)
                        )
                    })?;
                    let around = RectDomain::new(Point::all(-1), Point::all(1));
                    for p in interior.iter() {
                        let ours: i64 = around.iter().map(|o| view[p + o]).sum();
                        let serial: i64 = around.iter().map(|o| value(wrap(p + o), epoch)).sum();
                        ensure(ours == serial, || {
                            format!("{strategy} exchange over {procs:?}: stencil at {p} is {ours}, serial {serial}")
                        })?;
                    }
                }
                ctx.barrier()?;
            }
        }
    }
    Ok(())
}

/// Shared arrays in every distribution: owner-computes writes through `forall`, element and
/// range reads and writes against the values written, the local slice in local order, and
/// a view with another block size reading the same storage.
pub(super) fn shared_arrays(ctx: &Context) -> RankResult {
    let (me, ranks) = (ctx.rank(), ctx.ranks());
    let team = Team::world(ctx)?;
    // Odd, so that last blocks are short; at least three elements per rank, so that every
    // rank owns some in every distribution and a view in pairs fits the cyclic storage.
    let len = 37 + 2 * ranks;
    let value = |i: usize, epoch: u64| epoch * 1000 + i as u64 * 7 + 1;
    for d in [
        Distribution::Cyclic,
        Distribution::BlockCyclic(3),
        Distribution::Blocked,
        Distribution::Indefinite,
    ] {
        let a = SharedArray::<u64>::alloc(ctx, len, d)?;
        let mut mine = 0u64;
        a.forall(ctx, 0..len, Affinity::Element, |i| {
            ensure(a.owner(i) == me, || {
                format!(
                    "{d:?}: forall ran element {i} on rank {me}, owner {}",
                    a.owner(i)
                )
            })
            .map_err(|e| crate::Error::from(CoreError::Internal(e.to_string())))?;
            mine += 1;
            a.put(ctx, i, value(i, 0))
        })?;
        let total = team.run(Allreduce::value(mine, Op::Sum), Blocking)?;
        ensure(total == len as u64, || {
            format!("{d:?}: forall ran {total} iterations for {len} elements")
        })?;
        let mut by_index = 0;
        a.forall(ctx, 3..len, Affinity::Index, |i| {
            ensure(i % ranks == me, || {
                format!("{d:?}: index forall ran {i} on rank {me}")
            })
            .map_err(|e| crate::Error::from(CoreError::Internal(e.to_string())))?;
            by_index += 1;
            Ok(())
        })?;
        let total = team.run(Allreduce::value(by_index, Op::Sum), Blocking)?;
        ensure(total == len - 3, || {
            format!("{d:?}: index forall ran {total} iterations")
        })?;
        ctx.barrier()?;
        // Ranges starting and ending anywhere.
        let mut draw = Draw(me as u64 + 11);
        for _ in 0..20 {
            let s = draw.range(0, len as i64) as usize;
            let e = draw.range(s as i64, len as i64) as usize;
            let mut got = vec![0u64; e - s];
            a.get_range(ctx, s, &mut got)?;
            let want: Vec<u64> = (s..e).map(|i| value(i, 0)).collect();
            ensure(got == want, || {
                format!("{d:?}: get_range {s}..{e} gave {got:?}, want {want:?}")
            })?;
        }
        // SAFETY: every write to the array happened before the barrier above; the next
        // writes come after the barrier below, once this slice is gone.
        let local = unsafe { a.local(ctx)? }.to_vec();
        let owned: Vec<u64> = (0..len)
            .filter(|&i| a.owner(i) == me)
            .map(|i| value(i, 0))
            .collect();
        ensure(local == owned, || {
            format!("{d:?}: local slice {local:?}, want {owned:?}")
        })?;
        // Another block size over the same storage reads what is stored where it points.
        if d == Distribution::Cyclic {
            // The longest pairs-of-elements view that fits what every rank reserved.
            let v = (1..=len)
                .rev()
                .find_map(|n| a.with_distribution(n, Distribution::BlockCyclic(2)).ok())
                .ok_or("no BlockCyclic(2) view fits")?;
            for j in 0..v.len() {
                let i = (0..len).find(|&i| a.address(i).ok() == v.address(j).ok());
                if let Some(i) = i {
                    let got = v.get(ctx, j)?;
                    ensure(got == value(i, 0), || {
                        format!("recast element {j} (= cyclic {i}) is {got}")
                    })?;
                }
            }
        }
        ctx.barrier()?;
        // Each rank overwrites its own share of the index range.
        let (s, e) = (me * len / ranks, (me + 1) * len / ranks);
        let fresh: Vec<u64> = (s..e).map(|i| value(i, 1)).collect();
        a.put_range(ctx, s, &fresh)?;
        ctx.barrier()?;
        let mut all = vec![0u64; len];
        a.get_range(ctx, 0, &mut all)?;
        for (i, &got) in all.iter().enumerate() {
            ensure(got == value(i, 1), || {
                format!(
                    "{d:?}: after put_range element {i} is {got}, want {}",
                    value(i, 1)
                )
            })?;
            if i % 5 == me % 5 {
                let one = a.get(ctx, i)?;
                ensure(one == got, || {
                    format!("{d:?}: get({i}) is {one}, get_range said {got}")
                })?;
            }
        }
        ctx.barrier()?;
        a.free(ctx)?;
    }
    Ok(())
}
