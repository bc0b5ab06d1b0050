//! Large grids start a quarter page apart, small ones where the allocator puts them, and
//! each keeps its values and gives its whole block back when dropped.
//!
//! The count behind the stagger is the process's, so this file holds one test: no other
//! test of this process makes grids in between.

use std::time::Duration;

use tessera::{GlobalGrid, HaloGrid, HaloStrategy, Job, RectDomain};

/// Where in a 4 KiB page a grid's storage starts.
fn in_page(grid: &GlobalGrid<'_, f64, 3>) -> usize {
    // SAFETY: the grid is this rank's alone; no other rank has its reference.
    let view = unsafe { grid.view() };
    // The lowest point is the first element of the storage (row-major).
    &view[view.domain().lo()] as *const f64 as usize % 4096
}

#[test]
fn large_grids_start_a_quarter_page_apart() {
    Job::threads(1)
        .segment(64 << 20)
        .wait_timeout(Duration::from_secs(60))
        .run(|ctx| {
            // 40 × 40 × 40 f64 = 500 KiB: large. 8 × 8 × 8 = 4 KiB: small.
            let large = RectDomain::with_shape([40, 40, 40]);
            let small = RectDomain::with_shape([8, 8, 8]);
            let value = |p: tessera::Point<3>| (p[0] * 10_000 + p[1] * 100 + p[2]) as f64;
            let mut grids = Vec::new();
            let mut places = Vec::new();
            for _ in 0..6 {
                let g = GlobalGrid::from_fn(ctx, large, value)?;
                places.push(in_page(&g));
                grids.push(g);
                // A small grid in between takes no quarter.
                let _small = GlobalGrid::filled(ctx, small, 1.0)?;
            }
            for (k, pair) in places.windows(2).enumerate() {
                assert_eq!(
                    (pair[1] + 4096 - pair[0]) % 4096,
                    1024,
                    "grids {k} and {}: {places:?}",
                    k + 1
                );
            }
            for g in &grids {
                // SAFETY: as above.
                let view = unsafe { g.view() };
                let mut checked = 0;
                view.foreach(|p, &e| {
                    assert_eq!(e, value(p), "{p:?}");
                    checked += 1;
                });
                assert_eq!(checked, large.len());
            }
            drop(grids);
            // Every block, padding included, goes back: 200 grids of 500 KiB each made
            // and dropped in a 64 MiB segment.
            for _ in 0..200 {
                drop(GlobalGrid::filled(ctx, large, 0.0)?);
            }
            // A halo grid's block is a grid like these, and takes the next quarter.
            let h = HaloGrid::<f64, 3>::new(ctx, large, [1, 1, 1], 1, HaloStrategy::SixMessages)?;
            let at = h.as_slice().as_ptr() as usize % 4096;
            let next = GlobalGrid::filled(ctx, large, 0.0)?;
            assert_eq!((in_page(&next) + 4096 - at) % 4096, 1024);
            Ok(())
        })
        .unwrap();
}
