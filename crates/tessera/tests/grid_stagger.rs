//! Large grids start a quarter page apart, small ones where the allocator puts them, and
//! each keeps its values and gives its whole block back when dropped.
//!
//! The count behind the stagger is the process's, so this file holds one test: no other
//! test of this process makes grids in between.

use std::time::Duration;

use tessera::{GlobalGrid, HaloGrid, HaloStrategy, Job, Point, RectDomain};

#[test]
fn large_grids_start_a_quarter_page_apart() {
    Job::threads(1)
        .segment(64 << 20)
        .wait_timeout(Duration::from_secs(60))
        .run(|ctx| {
            // Blocks of 42 × 42 × 42 f64 with their ghosts, 579 KiB: large; of 6 × 6 × 6,
            // 1.7 KiB: small. One rank: every ghost is a periodic copy of our own interior.
            let grid = |n: usize| {
                let whole = RectDomain::with_shape([n, n, n]);
                HaloGrid::<f64, 3>::new(ctx, whole, [1, 1, 1], 1, HaloStrategy::SixMessages)
            };
            let value = |p: Point<3>| (p[0] * 10_000 + p[1] * 100 + p[2]) as f64;
            let mut grids = Vec::new();
            let mut places = Vec::new();
            for _ in 0..6 {
                let mut g = grid(40)?;
                let interior = g.interior();
                g.view_mut()
                    .restrict(&interior)
                    .foreach_mut(|p, e| *e = value(p));
                places.push(g.as_slice().as_ptr() as usize % 4096);
                grids.push(g);
                // A small grid in between takes no quarter.
                let _small = grid(4)?;
            }
            for (k, pair) in places.windows(2).enumerate() {
                assert_eq!(
                    (pair[1] + 4096 - pair[0]) % 4096,
                    1024,
                    "grids {k} and {}: {places:?}",
                    k + 1
                );
            }
            for g in &mut grids {
                g.exchange()?;
                let mut checked = 0;
                g.view().foreach(|p, &e| {
                    let wrapped = Point(std::array::from_fn(|d| p[d].rem_euclid(40)));
                    assert_eq!(e, value(wrapped), "{p:?}");
                    checked += 1;
                });
                assert_eq!(checked, 42 * 42 * 42);
            }
            drop(grids);
            // Every block, its extra page included, goes back: 200 grids of 500 KiB each
            // made and dropped in a 64 MiB segment.
            let large = RectDomain::with_shape([40, 40, 40]);
            for _ in 0..200 {
                drop(GlobalGrid::filled(ctx, large, 0.0)?);
            }
            Ok(())
        })
        .unwrap();
}
