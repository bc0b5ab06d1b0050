//! Errors of the distributed grids: each names the problem and the way out.

use std::time::Duration;

use tessera::{GlobalGrid, HaloGrid, HaloStrategy, Job, Point, RectDomain};

#[test]
fn bad_halo_grids_and_points_are_named() {
    Job::threads(2)
        .wait_timeout(Duration::from_secs(30))
        .run(|ctx| {
            let whole = RectDomain::with_shape([8, 8, 8]);
            let e = HaloGrid::<f64, 3>::new(ctx, whole, [2, 2, 1], 1, HaloStrategy::Packed)
                .err()
                .expect("4 positions for 2 ranks");
            assert!(
                e.to_string()
                    .contains("has 4 positions but the job has 2 ranks"),
                "{e}"
            );
            let e = HaloGrid::<f64, 3>::new(ctx, whole, [2, 1, 1], 5, HaloStrategy::Packed)
                .err()
                .expect("blocks of 4 with ghosts 5 wide");
            assert!(
                e.to_string().contains("too few for 2 blocks of at least 5"),
                "{e}"
            );
            let e = "9msg".parse::<HaloStrategy>().unwrap_err();
            assert!(e.to_string().contains("use 6msg, 26msg or packed"), "{e}");

            let g = GlobalGrid::filled(ctx, RectDomain::with_shape([2, 2]), 1u32)?;
            let e = g.reference().get(ctx, Point([2, 0])).unwrap_err();
            assert!(e.to_string().contains("point [2, 0] is outside"), "{e}");
            assert_eq!(g.reference().get(ctx, Point([1, 1]))?, 1);
            Ok(())
        })
        .unwrap();
}
