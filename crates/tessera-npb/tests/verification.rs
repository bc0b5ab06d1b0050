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
    let outcome = Mutex::new(None);
    Job::threads(ranks)
        .segment(256 << 20)
        .wait_timeout(Duration::from_secs(300))
        .run(|ctx| {
            if let Some(o) = run(ctx, kernel, class, variant)? {
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
