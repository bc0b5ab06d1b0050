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

/// One class: log₂ of the pairs, and the official sums of X and Y.
#[derive(Clone, Copy, Debug)]
pub struct ClassData {
    /// The class.
    pub class: Class,
    /// log₂ of the pairs generated (`2^(m+1)` numbers).
    pub m: u32,
    /// The official (Σ X, Σ Y); `None` for a class whose values this crate does not carry.
    pub sums: Option<(f64, f64)>,
}

/// Class parameters and official verification values (NPB 3.4).
pub const CLASSES: [ClassData; 6] = [
    ClassData {
        class: Class::S,
        m: 24,
        sums: Some((-3247.83465203474, -6958.407078382297)),
    },
    ClassData {
        class: Class::W,
        m: 25,
        sums: Some((-2863.319731645753, -6320.053679109499)),
    },
    ClassData {
        class: Class::A,
        m: 28,
        sums: Some((-4295.875165629892, -15807.32573678431)),
    },
    ClassData {
        class: Class::B,
        m: 30,
        sums: Some((40338.15542441498, -26606.69192809235)),
    },
    ClassData {
        class: Class::C,
        m: 32,
        sums: Some((47643.67927995374, -80840.72988043731)),
    },
    ClassData {
        class: Class::D,
        m: 36,
        sums: None,
    },
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

/// What a rank of EP holds: one batch of numbers.
pub fn footprint(_class: Class, _ranks: usize) -> crate::Footprint {
    crate::Footprint {
        segment: 0,
        private: 2 * NK * size_of::<f64>(),
    }
}

variants! {
    /// EP has one way to run.
    pub enum Variant {
        /// Contiguous ranges of batches per rank, one allreduce.
        Default => "default",
    }
}

/// EP in the kernel registry.
pub struct Ep;

impl crate::Benchmark for Ep {
    fn name(&self) -> &'static str {
        "ep"
    }
    fn variants(&self) -> &'static [&'static str] {
        Variant::NAMES
    }
    fn check_ranks(&self, ranks: usize) -> Result<(), String> {
        if ranks >= 1 {
            Ok(())
        } else {
            Err("ep runs on any number of ranks ≥ 1".into())
        }
    }
    fn footprint(&self, class: Class, ranks: usize) -> crate::Footprint {
        footprint(class, ranks)
    }
    fn run(&self, ctx: &Context, class: Class, variant: &str) -> tessera::Result<Option<Outcome>> {
        run(ctx, class, crate::parse_variant("ep", variant)?)
    }
}

/// Run EP at `class` on every rank of `ctx`'s job; rank 0 gets the outcome.
pub fn run(ctx: &Context, class: Class, variant: Variant) -> tessera::Result<Option<Outcome>> {
    let data = crate::class_data(&CLASSES, |c| c.class, class);
    let m = data.m;
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
    crate::note_resident_share(); // every array is still held here
    if world.rank() != 0 {
        return Ok(None);
    }
    let (sx, sy) = (total[0], total[1]);
    let verified = data.sums.map(|(sx_ref, sy_ref)| {
        ((sx - sx_ref) / sx_ref).abs() <= EPSILON && ((sy - sy_ref) / sy_ref).abs() <= EPSILON
    });
    let mut values = BTreeMap::from([("sx".to_string(), sx), ("sy".to_string(), sy)]);
    values.insert("gaussian_pairs".into(), total[2..].iter().sum());
    let reference = data
        .sums
        .map(|(sx_ref, sy_ref)| {
            BTreeMap::from([("sx".to_string(), sx_ref), ("sy".to_string(), sy_ref)])
        })
        .unwrap_or_default();
    let numbers = 2f64.powi(m as i32 + 1);
    Ok(Some(Outcome {
        kernel: "EP".into(),
        class: class.to_string(),
        ranks: world.size(),
        variant: variant.to_string(),
        time_s: elapsed,
        mops: numbers / elapsed / 1e6,
        verified,
        values,
        reference,
        size: format!("{}", 1u64 << (m + 1)),
        iterations: 0,
        operation: "Random numbers generated".into(),
        profile: BTreeMap::new(),
        simd: crate::simd::level().to_string(),
        peak_rss_bytes: Vec::new(),
        resident_share_bytes: Vec::new(),
    }))
}
