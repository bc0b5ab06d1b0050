//! The NPB-style report and its JSON form.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::hardware::{Bound, Demand, Resource};

/// How a benchmark run ended.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Outcome {
    /// Kernel name (upper case, as NPB prints it).
    pub kernel: String,
    /// Problem class.
    pub class: String,
    /// Ranks that ran it.
    pub ranks: usize,
    /// Variant.
    pub variant: String,
    /// Seconds in the timed region (the slowest rank).
    pub time_s: f64,
    /// Mop/s (total) by the specification's formula.
    pub mops: f64,
    /// `Some(true/false)`, or `None` when the class has no reference values.
    pub verified: Option<bool>,
    /// Computed values checked against the reference.
    pub values: BTreeMap<String, f64>,
    /// The official reference values.
    pub reference: BTreeMap<String, f64>,
    /// Problem size as NPB prints it.
    pub size: String,
    /// Iterations as NPB prints them.
    pub iterations: u64,
    /// What the Mop/s counts.
    pub operation: String,
    /// Where the timed region's time went, in seconds averaged over the ranks (for
    /// kernels that measure it, e.g. `compute_s`, `communication_s`, `wait_s`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub profile: BTreeMap<String, f64>,
    /// Choices the kernel made at run time and what decided them (e.g. CG's `product`
    /// form, with each candidate's trial time).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub choices: BTreeMap<String, String>,
    /// The instruction-set level the kernels ran at (`avx512`, `avx2` or `scalar`; see
    /// [`crate::simd`]). This and the memory figures below are filled in by
    /// [`crate::run`]; a kernel's own `run` leaves them empty.
    #[serde(default)]
    pub simd: String,
    /// Each rank's peak resident memory in bytes (the process's high-water mark; pages of
    /// the shared segment count for every rank that touched them).
    #[serde(default)]
    pub peak_rss_bytes: Vec<u64>,
    /// Each rank's proportional share of resident memory at the end of the timed region,
    /// in bytes (shared pages divided among the ranks that touched them: the shares add up
    /// to what the job holds). This is the figure to compare with a reference's arrays.
    #[serde(default)]
    pub resident_share_bytes: Vec<u64>,
    /// What the timed region needed of the resource that limits this kernel (filled in by
    /// [`crate::run`] from [`crate::Benchmark::demand`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub demand: Option<Demand>,
    /// The run's rate against the measured limit of that resource, where the driver
    /// measured the hardware (`tessera npb --bounds`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound: Option<Bound>,
    /// Operations and bytes between ranks per kind over the whole run, summed over the
    /// ranks (from the job's communication statistics; filled in by the `tessera npb`
    /// driver).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub communication: Vec<tessera::core::report::KindTotals>,
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let row = |f: &mut fmt::Formatter<'_>, k: &str, v: &dyn fmt::Display| {
            writeln!(f, " {k:<16}= {v:>24}")
        };
        writeln!(f, "\n {} Benchmark Completed.", self.kernel)?;
        row(f, "Class", &self.class)?;
        row(f, "Size", &self.size)?;
        row(f, "Iterations", &self.iterations)?;
        row(f, "Time in seconds", &format!("{:.2}", self.time_s))?;
        row(f, "Total processes", &self.ranks)?;
        row(f, "Mop/s total", &format!("{:.2}", self.mops))?;
        row(
            f,
            "Mop/s/process",
            &format!("{:.2}", self.mops / self.ranks as f64),
        )?;
        row(f, "Operation type", &self.operation)?;
        row(
            f,
            "Verification",
            &match self.verified {
                Some(true) => "SUCCESSFUL",
                Some(false) => "UNSUCCESSFUL",
                None => "NOT PERFORMED",
            },
        )?;
        row(f, "Variant", &self.variant)?;
        row(f, "SIMD level", &self.simd)?;
        for (name, choice) in &self.choices {
            writeln!(f, " {name:<16}= {choice}")?;
        }
        let mib = |bytes: &[u64]| {
            let each: Vec<String> = bytes.iter().map(|&b| (b >> 20).to_string()).collect();
            format!("{} MiB", each.join(" "))
        };
        if !self.resident_share_bytes.is_empty() {
            row(f, "Memory/rank", &mib(&self.resident_share_bytes))?;
        }
        if !self.peak_rss_bytes.is_empty() {
            row(f, "Peak RSS/rank", &mib(&self.peak_rss_bytes))?;
        }
        row(
            f,
            "Version",
            &concat!("Tessera ", env!("CARGO_PKG_VERSION")),
        )?;
        if let Some(b) = &self.bound {
            let (unit, scale) = match b.resource {
                Resource::MemoryBytes => ("GB/s of memory", 1e-9),
                Resource::Flops => ("Gflop/s", 1e-9),
            };
            row(
                f,
                "Hardware bound",
                &format!(
                    "{:.1} % ({:.1} of {:.1} {unit})",
                    100.0 * b.fraction,
                    b.achieved_per_s * scale,
                    b.limit_per_s * scale
                ),
            )?;
        }
        for (name, seconds) in &self.profile {
            writeln!(f, " {name:<16}= {seconds:>24.4}")?;
        }
        let ranks = self.ranks.max(1) as f64;
        for t in &self.communication {
            let per_rank = t.ops as f64 / ranks;
            let bytes = t.bytes as f64 / ranks;
            writeln!(
                f,
                " {:<16}= {per_rank:>12.0} per rank, {:>9.3} MiB per rank, {:>9.0} B each",
                t.kind.name(),
                bytes / (1 << 20) as f64,
                t.bytes as f64 / t.ops.max(1) as f64
            )?;
        }
        for (name, value) in &self.values {
            match self.reference.get(name) {
                Some(r) => writeln!(
                    f,
                    " {name:<16}= {value:>24.15e}   reference {r:.15e}   relative error {:.2e}",
                    ((value - r) / r).abs()
                )?,
                None => writeln!(f, " {name:<16}= {value:>24.15e}")?,
            }
        }
        Ok(())
    }
}
