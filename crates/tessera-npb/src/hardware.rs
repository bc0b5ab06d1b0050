//! The hardware limits NPB kernels are measured against, measured on this machine in the
//! same run: memory bandwidth (a STREAM-style triad on as many threads as ranks have
//! cores, and a one-thread `memcpy`) and a core's floating-point peak at the chosen
//! instruction-set level (independent fused multiply-adds). Each kernel states its
//! [`Demand`] on the resource that binds it; [`Hardware::bound`] turns a run's demand
//! and time into a fraction of the limit.
//!
//! The measurements take a few seconds and run in the driver before any rank starts; this
//! module must never run inside a timed region.

use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::simd::{self, Level};
use crate::Outcome;

/// The resource whose rate limits a kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Resource {
    /// Bytes to and from main memory.
    MemoryBytes,
    /// Floating-point operations.
    Flops,
}

/// How much of its binding resource a kernel's timed region needs.
///
/// ```
/// use tessera_npb::hardware::{Demand, Resource};
/// let d = Demand { resource: Resource::MemoryBytes, amount: 1e9, basis: "example".into() };
/// assert_eq!(d.resource, Resource::MemoryBytes);
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Demand {
    /// The resource.
    pub resource: Resource,
    /// Bytes or operations in the whole timed region, all ranks together.
    pub amount: f64,
    /// How the amount is counted (one line, for the report).
    pub basis: String,
}

/// A run's rate against the limit of its binding resource.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Bound {
    /// The resource.
    pub resource: Resource,
    /// The run's rate (bytes or operations per second).
    pub achieved_per_s: f64,
    /// The measured limit for the cores the run had.
    pub limit_per_s: f64,
    /// `achieved_per_s / limit_per_s`.
    pub fraction: f64,
}

/// The limits measured on this machine.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Hardware {
    /// Threads the bandwidth was measured with (the cores the ranks have).
    pub threads: usize,
    /// Triad `a = b + s·c` over arrays far larger than the caches, all threads at once,
    /// counted as STREAM does (24 bytes per element, write-allocate not counted).
    pub triad_bytes_per_s: f64,
    /// `memcpy` of 256 MiB on one thread, reads and writes counted.
    pub memcpy_bytes_per_s: f64,
    /// One core's floating-point peak at [`Hardware::level`] (a fused multiply-add counts
    /// two; at `scalar`, separate multiplies and adds).
    pub flops_per_core: f64,
    /// The instruction-set level of the peak.
    pub level: String,
}

impl Hardware {
    /// Measure with `threads` threads for the bandwidth (at most the cores this process
    /// may use).
    pub fn measure(threads: usize) -> Hardware {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let threads = threads.clamp(1, cores);
        Hardware {
            threads,
            triad_bytes_per_s: triad(threads),
            memcpy_bytes_per_s: memcpy(),
            flops_per_core: peak_flops(),
            level: simd::level().to_string(),
        }
    }

    /// The limit of `resource` for a run on `ranks` ranks.
    pub fn limit(&self, resource: Resource, ranks: usize) -> f64 {
        match resource {
            Resource::MemoryBytes => self.triad_bytes_per_s,
            Resource::Flops => self.flops_per_core * ranks.clamp(1, self.threads) as f64,
        }
    }

    /// How close `outcome` came to its kernel's limit; `None` if it states no demand.
    pub fn bound(&self, outcome: &Outcome) -> Option<Bound> {
        let demand = outcome.demand.as_ref()?;
        let achieved_per_s = demand.amount / outcome.time_s;
        let limit_per_s = self.limit(demand.resource, outcome.ranks);
        Some(Bound {
            resource: demand.resource,
            achieved_per_s,
            limit_per_s,
            fraction: achieved_per_s / limit_per_s,
        })
    }
}

/// Best of five triads on `threads` threads, each over its own three 64 MiB arrays.
fn triad(threads: usize) -> f64 {
    const ELEMENTS: usize = 8 << 20;
    let mut arrays: Vec<[Vec<f64>; 3]> = (0..threads)
        .map(|_| {
            [
                vec![0.0; ELEMENTS],
                vec![1.0; ELEMENTS],
                vec![2.0; ELEMENTS],
            ]
        })
        .collect();
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        let start = Instant::now();
        std::thread::scope(|scope| {
            for [a, b, c] in arrays.iter_mut() {
                scope.spawn(move || triad_kernel(a, b, c, 3.0));
            }
        });
        best = best.min(start.elapsed().as_secs_f64());
    }
    (24 * ELEMENTS * threads) as f64 / best
}

crate::multilevel! {
    /// `a = b + s·c`, element by element.
    fn triad_kernel(a: &mut [f64], b: &[f64], c: &[f64], s: f64) {
        for ((a, &b), &c) in a.iter_mut().zip(b).zip(c) {
            *a = b + s * c;
        }
    }
}

/// Best of five copies of 256 MiB on one thread, in bytes read and written per second.
fn memcpy() -> f64 {
    const BYTES: usize = 256 << 20;
    let from = vec![1u8; BYTES];
    let mut to = vec![0u8; BYTES];
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        let start = Instant::now();
        to.copy_from_slice(std::hint::black_box(&from));
        std::hint::black_box(&mut to);
        best = best.min(start.elapsed().as_secs_f64());
    }
    (2 * BYTES) as f64 / best
}

crate::multilevel! {
    /// `rounds` times over `N` accumulators held in registers: `v = v·a + b`, fused where
    /// `fused`; returns their sum.
    fn multiply_adds(a: f64, b: f64, rounds: usize, fused: bool, wide: bool) -> f64 {
        // Enough independent chains for two vector units with a four-cycle latency, and
        // few enough to stay in registers: 8 of AVX-512's 32 registers, or 8 of AVX2's 16.
        if wide {
            chains::<64>(a, b, rounds, fused)
        } else {
            chains::<32>(a, b, rounds, fused)
        }
    }
}

/// `N` independent multiply-add chains of `rounds` steps; the sum of their ends.
#[inline(always)]
fn chains<const N: usize>(a: f64, b: f64, rounds: usize, fused: bool) -> f64 {
    let mut acc = std::hint::black_box([1.0f64; N]);
    for _ in 0..rounds {
        if fused {
            for v in acc.iter_mut() {
                *v = v.mul_add(a, b);
            }
        } else {
            for v in acc.iter_mut() {
                *v = *v * a + b;
            }
        }
    }
    acc.iter().sum()
}

/// One core's best rate over five runs of independent multiply-adds, in operations per
/// second. FMA exists at the AVX2 and AVX-512 levels only (elsewhere `mul_add` would be a
/// library call), so the scalar level multiplies and adds separately.
fn peak_flops() -> f64 {
    const ROUNDS: usize = 4_000_000;
    let level = simd::level();
    let (fused, wide) = (level >= Level::Avx2, level == Level::Avx512);
    let n = if wide { 64 } else { 32 };
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        let start = Instant::now();
        let (a, b) = std::hint::black_box((0.999_999, 1e-6));
        let sum = multiply_adds(a, b, std::hint::black_box(ROUNDS), fused, wide);
        best = best.min(start.elapsed().as_secs_f64());
        std::hint::black_box(sum);
    }
    (2 * n * ROUNDS) as f64 / best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bound_divides_the_run_rate_by_the_limit() {
        let hw = Hardware {
            threads: 2,
            triad_bytes_per_s: 20e9,
            memcpy_bytes_per_s: 10e9,
            flops_per_core: 30e9,
            level: "avx2".into(),
        };
        let mut o = Outcome {
            ranks: 4,
            time_s: 2.0,
            ..Outcome::default()
        };
        assert_eq!(hw.bound(&o), None);
        o.demand = Some(Demand {
            resource: Resource::Flops,
            amount: 60e9,
            basis: String::new(),
        });
        // Four ranks on two cores: the flop limit is two cores' worth.
        let b = hw.bound(&o).unwrap();
        assert_eq!(
            (b.achieved_per_s, b.limit_per_s, b.fraction),
            (30e9, 60e9, 0.5)
        );
        o.demand.as_mut().unwrap().resource = Resource::MemoryBytes;
        assert_eq!(hw.bound(&o).unwrap().fraction, 1.5);
    }

    #[test]
    fn the_measurements_are_positive_and_plausible() {
        let hw = Hardware::measure(1);
        // Any machine this runs on moves more than 100 MB/s and does more than 100 Mflop/s.
        assert!(hw.triad_bytes_per_s > 1e8, "{hw:?}");
        assert!(hw.memcpy_bytes_per_s > 1e8, "{hw:?}");
        assert!(hw.flops_per_core > 1e8, "{hw:?}");
    }
}
