//! Heat diffusion on a periodic 3-D grid: each rank owns a block with one layer of ghost
//! cells, fills them by a one-sided ghost exchange (`HaloGrid`), and takes a Jacobi step
//! (every point becomes the average of itself and its six neighbours). On a periodic grid
//! such a step conserves the total heat exactly in exact arithmetic, so the program checks
//! that the sum over all ranks stays what it was, to rounding.
//!
//! ```text
//! cargo run --release -- run -n 4 -- target/release/examples/heat 64 50 26msg
//! ```

use tessera::coll::Allreduce;
use tessera::Blocking;
use tessera::{Grid, HaloGrid, HaloStrategy, Op, Point, RectDomain, Team};

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(32);
    let steps: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(20);
    let strategy: HaloStrategy = args
        .next()
        .map(|s| s.parse().unwrap_or_else(|e| panic!("{e}")))
        .unwrap_or(HaloStrategy::SixMessages);
    tessera::spmd(|ctx| {
        let team = Team::world(ctx)?;
        let whole = RectDomain::with_shape([n, n, n]);
        let mut u = HaloGrid::<f64, 3>::new(ctx, whole, [ctx.ranks(), 1, 1], 1, strategy)?;
        let interior = u.interior();
        // A hot spot in one corner of the domain.
        u.view_mut().restrict(&interior).foreach_mut(|p, e| {
            *e = if p.0.iter().all(|&c| c < 4) {
                100.0
            } else {
                0.0
            }
        });
        let heat = |u: &HaloGrid<f64, 3>| {
            let mut sum = 0.0;
            u.view().restrict(&interior).foreach(|_, &e| sum += e);
            team.run(Allreduce::value(sum, Op::Sum), Blocking)
        };
        let before = heat(&u)?;
        let start = std::time::Instant::now();
        let mut next = Grid::filled(interior, 0.0);
        let axes = [0, 1, 2].map(|d| Point::unit(d, 1));
        for _ in 0..steps {
            u.exchange()?;
            let old = u.view();
            next.view_mut().foreach_mut(|p, e| {
                let around: f64 = axes.iter().map(|&a| old[p + a] + old[p - a]).sum();
                *e = (old[p] + around) / 7.0;
            });
            u.view_mut().copy_from(&next.view());
        }
        let after = heat(&u)?;
        if ctx.rank() == 0 {
            println!(
                "heat: {n}³ points on {} ranks, {steps} steps with {strategy} ghost exchange in {:.3} s; total heat {before} -> {after}",
                ctx.ranks(),
                start.elapsed().as_secs_f64()
            );
        }
        if ((after - before) / before).abs() > 1e-9 {
            return Err(format!("heat not conserved: {before} became {after}").into());
        }
        Ok(())
    });
}
