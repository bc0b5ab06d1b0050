//! Shared arrays at the edges: empty arrays, single-element blocks longer than the array,
//! and bad indices get errors, not panics.

use std::time::Duration;

use tessera::{Affinity, Distribution, Job, SharedArray};

#[test]
fn empty_and_tiny_arrays_and_bad_indices() {
    Job::threads(3)
        .wait_timeout(Duration::from_secs(30))
        .run(|ctx| {
            for d in [
                Distribution::Cyclic,
                Distribution::BlockCyclic(4),
                Distribution::Blocked,
                Distribution::Indefinite,
            ] {
                let empty = SharedArray::<u32>::alloc(ctx, 0, d)?;
                let mut none: [u32; 0] = [];
                empty.get_range(ctx, 0, &mut none)?;
                let mut ran = 0;
                empty.forall(ctx, 0..0, Affinity::Element, |_| {
                    ran += 1;
                    Ok(())
                })?;
                assert_eq!(ran, 0);
                let e = empty.get(ctx, 0).unwrap_err();
                assert!(
                    e.to_string().contains("outside the array's 0 elements"),
                    "{e}"
                );
                // Two elements with blocks of four: everything on rank 0 but Cyclic.
                let tiny = SharedArray::<u32>::alloc(ctx, 2, d)?;
                if ctx.rank() == 0 {
                    tiny.put_range(ctx, 0, &[5, 6])?;
                }
                ctx.barrier()?;
                let mut got = [0u32; 2];
                tiny.get_range(ctx, 0, &mut got)?;
                assert_eq!(got, [5, 6], "{d:?}");
                let e = tiny.get_range(ctx, 1, &mut got).unwrap_err();
                assert!(e.to_string().contains("elements 1..3 are outside"), "{e}");
                ctx.barrier()?;
                tiny.free(ctx)?;
                empty.free(ctx)?;
            }
            Ok(())
        })
        .unwrap();
}
