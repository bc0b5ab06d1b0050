//! EP: the embarrassingly parallel kernel.
//!
//! Generate `2^(m+1)` uniform numbers with the NPB generator, pair them, keep the pairs
//! inside the unit circle, turn them into Gaussian deviates by the Marsaglia polar method,
//! and count them by annulus (`max(|X|, |Y|)`), summing X and Y. The work is `2^(m−16)`
//! batches of 2¹⁶ pairs. Each batch starts at its own offset of the sequence
//! (`s·a^(2·2¹⁶·k)`), so any rank can compute any batch. Ranks take contiguous ranges of
//! batches, and one allreduce combines the sums and counts.
//!
//! Timed region (as NPB): the batches and the reduction; reported time is the slowest
//! rank's.

use std::collections::BTreeMap;
use std::time::Instant;

use tessera::{Context, Op, Team};

use crate::report::Outcome;
use crate::rng::{mul_mod, pow_mod, vranlc, A};
use crate::Class;

/// log₂ of the pairs per batch.
const MK: u32 = 16;
/// Pairs per batch.
const NK: usize = 1 << MK;
/// Annuli counted.
const NQ: usize = 10;
/// The EP seed.
const SEED: u64 = 271_828_183;
/// Verification tolerance (relative).
const EPSILON: f64 = 1e-8;

/// Class parameters and official verification values (NPB 3.4): (class, m, sx, sy).
pub const CLASSES: [(Class, u32, f64, f64); 4] = [
    (
        Class::S,
        24,
        -3.247_834_652_034_74e3,
        -6.958_407_078_382_297e3,
    ),
    (
        Class::W,
        25,
        -2.863_319_731_645_753e3,
        -6.320_053_679_109_499e3,
    ),
    (
        Class::A,
        28,
        -4.295_875_165_629_892e3,
        -1.580_732_573_678_431e4,
    ),
    (
        Class::B,
        30,
        4.033_815_542_441_498e4,
        -2.660_669_192_809_235e4,
    ),
];

/// Sums and annulus counts of a range of batches.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Tally {
    /// Σ X.
    pub sx: f64,
    /// Σ Y.
    pub sy: f64,
    /// Pairs per annulus.
    pub q: [f64; NQ],
}

/// Tally batches `first..last` (0-based), reusing `x` (2·2¹⁶ numbers) as scratch.
pub fn tally(first: u64, last: u64, x: &mut [f64]) -> Tally {
    let an = pow_mod(A, 2 * NK as u64);
    let mut t = Tally::default();
    for k in first..last {
        let mut seed = mul_mod(pow_mod(an, k), SEED);
        vranlc(&mut seed, A, &mut x[..2 * NK]);
        for pair in x[..2 * NK].chunks_exact(2) {
            let x1 = 2.0 * pair[0] - 1.0;
            let x2 = 2.0 * pair[1] - 1.0;
            let r = x1 * x1 + x2 * x2;
            if r <= 1.0 {
                let f = (-2.0 * r.ln() / r).sqrt();
                let (gx, gy) = (x1 * f, x2 * f);
                let l = gx.abs().max(gy.abs()) as usize;
                t.q[l] += 1.0;
                t.sx += gx;
                t.sy += gy;
            }
        }
    }
    t
}

/// Run EP at `class` on every rank of `ctx`'s job; rank 0 gets the outcome.
pub fn run(ctx: &Context, class: Class, variant: &str) -> tessera::Result<Option<Outcome>> {
    let &(_, m, sx_ref, sy_ref) = CLASSES
        .iter()
        .find(|c| c.0 == class)
        .expect("every class has EP values");
    let world = Team::world(ctx)?;
    let batches = 1u64 << (m - MK);
    let (p, r) = (world.size() as u64, world.rank() as u64);
    let (first, last) = (batches * r / p, batches * (r + 1) / p);
    let mut x = vec![0.0; 2 * NK];
    world.barrier()?;
    let start = Instant::now();
    let mine = tally(first, last, &mut x);
    let mut packed = [0.0; 2 + NQ];
    packed[0] = mine.sx;
    packed[1] = mine.sy;
    packed[2..].copy_from_slice(&mine.q);
    let mut total = [0.0; 2 + NQ];
    world.allreduce(&packed, &mut total, Op::Sum)?;
    let elapsed = world.allreduce_value(start.elapsed().as_secs_f64(), Op::Max)?;
    if world.rank() != 0 {
        return Ok(None);
    }
    let (sx, sy) = (total[0], total[1]);
    let verified =
        ((sx - sx_ref) / sx_ref).abs() <= EPSILON && ((sy - sy_ref) / sy_ref).abs() <= EPSILON;
    let mut values = BTreeMap::from([("sx".to_string(), sx), ("sy".to_string(), sy)]);
    values.insert("gaussian_pairs".into(), total[2..].iter().sum());
    let reference = BTreeMap::from([("sx".to_string(), sx_ref), ("sy".to_string(), sy_ref)]);
    let numbers = 2f64.powi(m as i32 + 1);
    Ok(Some(Outcome {
        kernel: "EP".into(),
        class: class.to_string(),
        ranks: world.size(),
        variant: variant.into(),
        time_s: elapsed,
        mops: numbers / elapsed / 1e6,
        verified: Some(verified),
        values,
        reference,
        size: format!("{}", 1u64 << (m + 1)),
        iterations: 0,
        operation: "Random numbers generated".into(),
        profile: BTreeMap::new(),
    }))
}
