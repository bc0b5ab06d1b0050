//! The report of one application run: what ran, how long it took, the rate against the
//! single-core DGEMM ceiling measured in the same run, the check, and the ScaLAPACK
//! baseline when one ran beside it. Printed in the NAS benchmarks' style and written as
//! JSON.

use std::fmt;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::blas::{self, Trans};
use crate::{Outcome, Problem, THRESHOLD};

/// ScaLAPACK's run of the same problem in the same job.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Baseline {
    /// The routine (`PDGEMM`, `PDPOTRF`, `PDGETRF`).
    pub routine: String,
    /// Its wall time.
    pub seconds: f64,
    /// Its result checked as Tessera's is (the same scaled residual, passes below
    /// [`THRESHOLD`]).
    #[serde(default)]
    pub residual: Option<f64>,
}

impl Baseline {
    /// Whether ScaLAPACK's result passed the same check as Tessera's.
    pub fn verified(&self) -> bool {
        self.residual.is_some_and(|r| r < THRESHOLD)
    }
}

/// Everything `tessera app` prints about one run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// What ran.
    pub problem: Problem,
    /// Ranks of the job.
    pub ranks: usize,
    /// The conduit.
    pub conduit: String,
    /// What the ranks measured.
    pub outcome: Outcome,
    /// One core's DGEMM rate in flop/s, measured before the run (the ceiling per rank).
    pub dgemm_flops_per_core: Option<f64>,
    /// ScaLAPACK on the same problem, if it ran.
    pub baseline: Option<Baseline>,
}

impl Report {
    /// Whether the check passed.
    pub fn verified(&self) -> bool {
        self.outcome.failure.is_none() && self.outcome.residual.is_some_and(|r| r < THRESHOLD)
    }

    /// The rate of the whole job in flop/s.
    pub fn flops_per_s(&self) -> f64 {
        self.problem.flops() / self.outcome.seconds
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = &self.problem;
        let o = &self.outcome;
        let rate = self.flops_per_s();
        let per_rank = rate / self.ranks as f64;
        let row = |f: &mut fmt::Formatter<'_>, name: &str, value: String| {
            writeln!(f, " {name:<24}= {value:>24}")
        };
        writeln!(f, "\n {} Benchmark Completed.", p.app.name().to_uppercase())?;
        row(f, "Size", format!("{} × {}", p.n, p.n))?;
        row(f, "Block", format!("{} × {}", p.block, p.block))?;
        row(f, "Process grid", format!("{} × {}", p.grid.0, p.grid.1))?;
        row(f, "Ranks", format!("{} ({})", self.ranks, self.conduit))?;
        row(f, "Variant", p.variant.to_string())?;
        row(f, "Time in seconds", format!("{:.3}", o.seconds))?;
        row(f, "GFLOP/s", format!("{:.2}", rate * 1e-9))?;
        row(f, "GFLOP/s per rank", format!("{:.2}", per_rank * 1e-9))?;
        if let Some(core) = self.dgemm_flops_per_core {
            row(
                f,
                "DGEMM on one core",
                format!(
                    "{:.2} ({:.0}% per rank)",
                    core * 1e-9,
                    100.0 * per_rank / core
                ),
            )?;
        }
        row(
            f,
            "Communication",
            format!(
                "{:.3} s ({:.1}%)",
                o.comm_seconds,
                100.0 * o.comm_seconds / o.seconds
            ),
        )?;
        if let (Some(b0), Some(seconds)) = (p.input_block, o.redistribute_seconds) {
            row(
                f,
                "Redistribution",
                format!("{seconds:.3} s (from {b0} × {b0}, not timed above)"),
            )?;
        }
        match &o.failure {
            Some(why) => writeln!(f, " Failure: {why}")?,
            None => {
                writeln!(
                    f,
                    " Residual {} = {:.3e} (passes below {THRESHOLD})",
                    o.residual_name,
                    o.residual.unwrap_or(f64::NAN)
                )?;
            }
        }
        let verdict = if self.verified() {
            "SUCCESSFUL"
        } else {
            "UNSUCCESSFUL"
        };
        row(f, "Verification", verdict.to_string())?;
        if let Some(b) = &self.baseline {
            row(
                f,
                &format!("ScaLAPACK {}", b.routine),
                format!(
                    "{:.3} s, {:.2} GFLOP/s",
                    b.seconds,
                    p.flops() / b.seconds * 1e-9
                ),
            )?;
            row(
                f,
                "ScaLAPACK residual",
                match b.residual {
                    Some(r) => format!(
                        "{r:.3e} ({})",
                        if b.verified() {
                            "SUCCESSFUL"
                        } else {
                            "UNSUCCESSFUL"
                        }
                    ),
                    None => "not checked".into(),
                },
            )?;
            row(
                f,
                "ScaLAPACK / Tessera",
                format!("{:.2}× time", b.seconds / o.seconds),
            )?;
        }
        Ok(())
    }
}

/// One core's DGEMM rate in flop/s: the best of a few `1024 × 1024 × 1024` multiplies,
/// single-threaded (the ceiling a rank's local updates approach).
pub fn dgemm_rate() -> f64 {
    blas::single_threaded();
    let n = 1024;
    let a: Vec<f64> = (0..n * n).map(|i| (i % 7) as f64 * 0.25).collect();
    let b: Vec<f64> = (0..n * n).map(|i| (i % 5) as f64 * 0.5).collect();
    let mut c = vec![0.0; n * n];
    let mut best = f64::INFINITY;
    for _ in 0..3 {
        let start = Instant::now();
        blas::gemm(
            Trans::No,
            Trans::No,
            n,
            n,
            n,
            1.0,
            &a,
            n,
            &b,
            n,
            0.0,
            &mut c,
            n,
        );
        best = best.min(start.elapsed().as_secs_f64());
    }
    2.0 * (n as f64).powi(3) / best
}
