//! NPB kernels verify against the official values at several rank counts (threads
//! conduit here; the `tessera npb` command's tests run real processes).

use std::sync::Mutex;
use std::time::Duration;

use tessera::Job;
use tessera_npb::{run, Class, Kernel, Outcome};

fn run_kernel(kernel: Kernel, class: Class, ranks: usize) -> Outcome {
    run_variant(kernel, class, ranks, kernel.variants()[0])
}

fn run_variant(kernel: Kernel, class: Class, ranks: usize, variant: &str) -> Outcome {
    run_on(ranks, |ctx| run(ctx, kernel, class, variant))
}

/// Run `kernel` on `ranks` threads and return rank 0's outcome.
fn run_on(
    ranks: usize,
    kernel: impl Fn(&tessera::Context) -> tessera::Result<Option<Outcome>> + Sync,
) -> Outcome {
    let outcome = Mutex::new(None);
    Job::threads(ranks)
        .segment(256 << 20)
        .wait_timeout(Duration::from_secs(300))
        .run(|ctx| {
            if let Some(o) = kernel(ctx)? {
                *outcome.lock().unwrap() = Some(o);
            }
            Ok(())
        })
        .unwrap();
    let o = outcome.into_inner().unwrap().expect("rank 0 reports");
    assert_eq!(o.ranks, ranks);
    o
}

/// Class S verifies in every variant of `kernel` at 1, 2, 4 and 8 ranks.
fn class_s_verifies_in_every_variant(kernel: Kernel) {
    for variant in kernel.variants() {
        for ranks in [1, 2, 4, 8] {
            let o = run_variant(kernel, Class::S, ranks, variant);
            assert_eq!(
                o.verified,
                Some(true),
                "{kernel:?} S {variant} at {ranks} ranks:\n{o}"
            );
            assert_eq!(o.variant, *variant);
        }
    }
}

#[test]
fn ep_class_s_verifies_at_1_2_3_and_4_ranks() {
    for ranks in [1, 2, 3, 4] {
        let o = run_kernel(Kernel::Ep, Class::S, ranks);
        assert_eq!(o.verified, Some(true), "EP S at {ranks} ranks:\n{o}");
        // 2^24 pairs of which π/4 land in the circle.
        let pairs = o.values["gaussian_pairs"];
        assert!(
            (pairs / (1u64 << 24) as f64 - std::f64::consts::FRAC_PI_4).abs() < 1e-3,
            "{pairs}"
        );
    }
}

#[test]
fn is_class_s_verifies_at_1_2_4_and_8_ranks_in_every_variant() {
    class_s_verifies_in_every_variant(Kernel::Is);
}

#[test]
fn cg_class_s_verifies_at_1_2_4_and_8_ranks_in_every_variant() {
    class_s_verifies_in_every_variant(Kernel::Cg);
}

#[test]
fn cg_class_w_verifies_at_4_ranks() {
    let o = run_kernel(Kernel::Cg, Class::W, 4);
    assert_eq!(o.verified, Some(true), "CG W:\n{o}");
}

#[test]
fn mg_class_s_verifies_at_1_2_4_and_8_ranks_in_every_variant() {
    class_s_verifies_in_every_variant(Kernel::Mg);
}

#[test]
fn ft_turns_to_pencils_beyond_the_slabs_and_verifies() {
    // S has 64 planes: 128 ranks cannot hold slabs, so `slabs` runs the 2-D
    // decomposition (a 16 × 8 process grid) and says so; W has 32 z-planes.
    for (class, ranks) in [(Class::S, 128), (Class::W, 64)] {
        let o = run_kernel(Kernel::Ft, class, ranks);
        assert_eq!(o.variant, "2d", "FT {class} at {ranks} ranks");
        assert_eq!(o.verified, Some(true), "FT {class} at {ranks} ranks:\n{o}");
    }
}

/// Run MG class S on `ranks` threads, gathering levels thinner than `gather_below`.
fn mg_gathering(ranks: usize, gather_below: usize) -> Outcome {
    run_on(ranks, |ctx| {
        tessera_npb::mg::run_gathering(
            ctx,
            Class::S,
            tessera_npb::mg::Variant::TwentySix,
            gather_below,
        )
    })
}

#[test]
fn mg_gathers_coarse_levels_at_every_seam() {
    // 32³: gathering below 4, 8, 16 and 32 points puts the seam (the finest gathered level)
    // at every level from 2³ to 16³, where the decomposed and the whole levels meet.
    for ranks in [2, 4, 8] {
        for gather_below in [4, 8, 16, 32] {
            let o = mg_gathering(ranks, gather_below);
            assert_eq!(
                o.verified,
                Some(true),
                "MG S at {ranks} ranks gathering below {gather_below}:\n{o}"
            );
        }
    }
}

#[test]
fn mg_class_s_verifies_beyond_the_coarsest_level_at_16_and_64_ranks() {
    // Over the 4 × 2 × 2 and 4 × 4 × 4 process grids the 2³ level (and at 64 ranks the
    // 4³ one) would give blocks a point thick or less, so they are gathered.
    for ranks in [16, 64] {
        let o = run_kernel(Kernel::Mg, Class::S, ranks);
        assert_eq!(o.verified, Some(true), "MG S at {ranks} ranks:\n{o}");
    }
}

#[test]
fn mg_refuses_a_gather_threshold_below_two() {
    let err = Job::threads(1)
        .run(|ctx| {
            Ok(tessera_npb::mg::run_gathering(
                ctx,
                Class::S,
                tessera_npb::mg::Variant::TwentySix,
                1,
            )
            .map(|_| ())?)
        })
        .unwrap_err();
    assert!(
        err.to_string().contains("gather_below must be at least 2"),
        "{err}"
    );
}

#[test]
fn mg_class_w_verifies_at_2_ranks() {
    let o = run_kernel(Kernel::Mg, Class::W, 2);
    assert_eq!(o.verified, Some(true), "MG W at 2 ranks:\n{o}");
}

#[test]
fn ft_class_s_verifies_at_1_2_4_and_8_ranks_in_every_variant() {
    class_s_verifies_in_every_variant(Kernel::Ft);
}

#[test]
fn ft_class_w_verifies_at_4_ranks() {
    let o = run_kernel(Kernel::Ft, Class::W, 4);
    assert_eq!(o.verified, Some(true), "FT W at 4 ranks:\n{o}");
}
