//! Statistics files: what `TESSERA_STATS=FILE` (`--stats FILE`) writes, and how the parts
//! every rank writes become one file.
//!
//! Every rank with statistics on ends its part of the job by handing its counts
//! ([`RankStats`], counted by `core::stats`) to whoever started it:
//! - under `tessera run` (`TESSERA_STATS_DIR`, set by the launcher), as a file
//!   `rank-N.json` in the launcher's private directory, which the launcher merges into
//!   `FILE` when the job ends and then removes;
//! - in a process that runs every rank as a thread without the launcher ([`crate::Job`]'s
//!   own `threads` jobs), in memory: the job writes `FILE` itself;
//! - on the mpi conduit, whose ranks may not share a file system, rank 0 gathers every
//!   rank's part over MPI after the end-of-job barrier and writes them (as parts into the
//!   launcher's directory, or as `FILE` for ranks started by `mpirun` directly);
//! - any other process that holds only its own part writes `FILE.N`; `tessera report`
//!   merges the parts it is given.
//!
//! A file is one [`JobStats`]: the job's rank count and conduit and one [`RankStats`] per
//! rank. Merging is putting the ranks' parts side by side, so files of one job's parts can
//! be merged in any order and any grouping.
//!
//! This module must never count: it only writes, reads and merges counts.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::core::stats::{Blocked, Traffic};
use crate::error::JobError;

/// Why text is not a statistics file, or parts do not make one job's.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum StatsError {
    /// Not JSON of the statistics' shape.
    #[error("{0}")]
    Json(String),
    /// JSON of another format.
    #[error("its format is {found:?}, not {FORMAT:?}")]
    Format {
        /// What the `format` field said.
        found: String,
    },
    /// A part for a rank the job does not have.
    #[error("it has a part for rank {rank} of a {ranks}-rank job")]
    RankOutOfRange {
        /// The part's rank.
        rank: usize,
        /// The job's ranks.
        ranks: usize,
    },
    /// Parts of different jobs.
    #[error("parts of different jobs: {ranks} ranks on {conduit} and {other_ranks} ranks on {other_conduit}")]
    DifferentJobs {
        /// The first part's job size.
        ranks: usize,
        /// Its conduit.
        conduit: String,
        /// The other part's job size.
        other_ranks: usize,
        /// Its conduit.
        other_conduit: String,
    },
    /// A rank in two parts.
    #[error("rank {0} appears twice")]
    Duplicate(usize),
    /// Nothing to merge.
    #[error("no statistics to merge")]
    Empty,
}

/// What the `format` field of a statistics file says.
pub const FORMAT: &str = "tessera-stats";

/// The launcher's private directory for the ranks' parts (set for each rank).
pub(crate) const DIR_VARIABLE: &str = "TESSERA_STATS_DIR";

/// A job's communication statistics, as a statistics file holds them.
///
/// ```
/// use tessera::core::report::JobStats;
/// let dir = tempfile::tempdir().unwrap();
/// let file = dir.path().join("stats.json");
/// tessera::Job::threads(2).segment(1 << 20).stats(&file).run(|ctx| {
///     let cell = ctx.alloc_collective::<u64>(1)?;
///     ctx.put(cell.on(1 - ctx.rank()), &[7], tessera::Blocking)?;
///     Ok(ctx.barrier()?)
/// }).unwrap();
/// let stats = JobStats::read(&file).unwrap();
/// assert_eq!(stats.ranks, 2);
/// assert_eq!(stats.bytes_between(0, 1, tessera::Traffic::Put), 8);
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobStats {
    /// Always [`FORMAT`].
    pub format: String,
    /// Ranks in the job.
    pub ranks: usize,
    /// The conduit it ran on.
    pub conduit: String,
    /// One part per rank that reported, in rank order.
    pub per_rank: Vec<RankStats>,
}

/// One rank's counts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RankStats {
    /// The rank.
    pub rank: usize,
    /// Seconds from the rank's start to the end of its part of the job.
    pub elapsed_s: f64,
    /// Operations this rank started, per target and kind (kinds with none are left out).
    pub traffic: Vec<PairTraffic>,
    /// Sizes of the operations this rank started, per kind.
    pub sizes: Vec<SizeHistogram>,
    /// Collective calls per operation and algorithm.
    pub collectives: Vec<CollectiveCalls>,
    /// Time spent blocked, per kind of wait.
    pub blocked: Vec<BlockedTime>,
}

/// Operations one rank started to one target.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PairTraffic {
    /// The target rank.
    pub target: usize,
    /// What the operations were.
    pub kind: Traffic,
    /// How many.
    pub ops: u64,
    /// Their bytes.
    pub bytes: u64,
}

/// A histogram of operation sizes in powers of two.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SizeHistogram {
    /// The kind of operation.
    pub kind: Traffic,
    /// `(at least this many bytes, operations)`: the bucket holds sizes from its floor to
    /// just under twice it (the floor 0 holds empty operations); empty buckets are left out.
    pub buckets: Vec<(u64, u64)>,
}

/// Calls of one collective operation with one algorithm.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CollectiveCalls {
    /// The operation (`allreduce`, ...).
    pub op: String,
    /// The algorithm that ran (`recursive_doubling`, `knomial4`, ...).
    pub algorithm: String,
    /// How many calls.
    pub calls: u64,
    /// The bytes per member of all of them together.
    pub bytes: u64,
}

/// Operations of one kind and their bytes, summed over ranks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KindTotals {
    /// The kind.
    pub kind: Traffic,
    /// Operations.
    pub ops: u64,
    /// Bytes.
    pub bytes: u64,
}

/// Time blocked in one kind of wait.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BlockedTime {
    /// The kind of wait.
    pub kind: Blocked,
    /// How many waits.
    pub waits: u64,
    /// Their total time in seconds.
    pub seconds: f64,
}

impl RankStats {
    /// Operations and bytes this rank started to `target` of `kind`.
    pub fn to(&self, target: usize, kind: Traffic) -> (u64, u64) {
        self.traffic
            .iter()
            .find(|t| t.target == target && t.kind == kind)
            .map_or((0, 0), |t| (t.ops, t.bytes))
    }

    /// Seconds this rank spent blocked in waits of `kind`.
    pub fn blocked_s(&self, kind: Blocked) -> f64 {
        self.blocked
            .iter()
            .find(|b| b.kind == kind)
            .map_or(0.0, |b| b.seconds)
    }
}

impl JobStats {
    /// The statistics of a job of `ranks` ranks on `conduit` from the parts given.
    pub fn from_parts(ranks: usize, conduit: &str, parts: Vec<RankStats>) -> JobStats {
        let mut stats = JobStats {
            format: FORMAT.into(),
            ranks,
            conduit: conduit.into(),
            per_rank: parts,
        };
        stats.per_rank.sort_by_key(|p| p.rank);
        stats
    }

    /// Read a statistics file (a whole job's, or one rank's part).
    pub fn read(path: &Path) -> Result<JobStats, JobError> {
        let text = std::fs::read_to_string(path).map_err(|source| JobError::Os {
            what: format!("reading statistics {}", path.display()),
            source,
        })?;
        JobStats::parse(&text).map_err(|why| {
            JobError::Usage(format!(
                "{} is not a statistics file: {why}",
                path.display()
            ))
        })
    }

    /// Parse a statistics file's text.
    pub fn parse(text: &str) -> Result<JobStats, StatsError> {
        let stats: JobStats =
            serde_json::from_str(text).map_err(|e| StatsError::Json(e.to_string()))?;
        if stats.format != FORMAT {
            return Err(StatsError::Format {
                found: stats.format,
            });
        }
        if let Some(p) = stats.per_rank.iter().find(|p| p.rank >= stats.ranks) {
            return Err(StatsError::RankOutOfRange {
                rank: p.rank,
                ranks: stats.ranks,
            });
        }
        Ok(stats)
    }

    /// Merge files of parts of one job into one: every rank at most once, and every part
    /// from a job of the same size.
    pub fn merge(parts: Vec<JobStats>) -> Result<JobStats, StatsError> {
        let mut iter = parts.into_iter();
        let Some(mut merged) = iter.next() else {
            return Err(StatsError::Empty);
        };
        for part in iter {
            if part.ranks != merged.ranks || part.conduit != merged.conduit {
                return Err(StatsError::DifferentJobs {
                    ranks: merged.ranks,
                    conduit: merged.conduit,
                    other_ranks: part.ranks,
                    other_conduit: part.conduit,
                });
            }
            merged.per_rank.extend(part.per_rank);
        }
        merged.per_rank.sort_by_key(|p| p.rank);
        if let Some(w) = merged.per_rank.windows(2).find(|w| w[0].rank == w[1].rank) {
            return Err(StatsError::Duplicate(w[0].rank));
        }
        Ok(merged)
    }

    /// Bytes moved from rank `from` to rank `to` by operations of `kind`, whichever of the
    /// two started them (a get started by `to` moves bytes from `from`).
    pub fn bytes_between(&self, from: usize, to: usize, kind: Traffic) -> u64 {
        let (origin, target) = if kind.is_read() {
            (to, from)
        } else {
            (from, to)
        };
        self.per_rank
            .iter()
            .find(|p| p.rank == origin)
            .map_or(0, |p| p.to(target, kind).1)
    }

    /// Operations and bytes between different ranks (a rank's operations on its own
    /// memory left out), per kind, summed over the ranks, in [`Traffic::ALL`]'s order;
    /// kinds with none are left out.
    ///
    /// ```
    /// use tessera::core::report::{JobStats, PairTraffic, RankStats};
    /// use tessera::Traffic;
    /// let part = |rank, target| RankStats {
    ///     rank,
    ///     elapsed_s: 1.0,
    ///     traffic: vec![PairTraffic { target, kind: Traffic::Put, ops: 2, bytes: 64 }],
    ///     sizes: vec![],
    ///     collectives: vec![],
    ///     blocked: vec![],
    /// };
    /// let stats = JobStats::from_parts(2, "smp", vec![part(0, 1), part(1, 1)]);
    /// let totals = stats.between_ranks();
    /// assert_eq!((totals[0].kind, totals[0].ops, totals[0].bytes), (Traffic::Put, 2, 64));
    /// ```
    pub fn between_ranks(&self) -> Vec<KindTotals> {
        Traffic::ALL
            .iter()
            .map(|&kind| {
                let mut totals = KindTotals {
                    kind,
                    ops: 0,
                    bytes: 0,
                };
                for part in &self.per_rank {
                    for t in part
                        .traffic
                        .iter()
                        .filter(|t| t.kind == kind && t.target != part.rank)
                    {
                        totals.ops += t.ops;
                        totals.bytes += t.bytes;
                    }
                }
                totals
            })
            .filter(|t| t.ops > 0)
            .collect()
    }

    /// Write the file (JSON, pretty-printed).
    pub fn write(&self, path: &Path) -> Result<(), JobError> {
        let text = serde_json::to_string_pretty(self).expect("statistics serialise");
        std::fs::write(path, text + "\n").map_err(|source| JobError::Os {
            what: format!("writing statistics {}", path.display()),
            source,
        })
    }
}

/// Check, before a job starts, that a statistics file can be written at `path`: its
/// directory exists and it is not itself a directory.
pub fn check_file(path: &Path) -> Result<(), JobError> {
    let bad = |why: String| JobError::BadEnv {
        var: "TESSERA_STATS",
        value: path.display().to_string(),
        why,
    };
    if path.is_dir() {
        return Err(bad(
            "it is a directory; name a file to write (e.g. stats.json)".into(),
        ));
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        return Err(bad(format!(
            "its directory {} does not exist; create it or name a file elsewhere",
            dir.display()
        )));
    }
    Ok(())
}

/// Where a rank's counts go when its part of the job ends.
#[derive(Clone, Debug)]
pub(crate) enum Sink {
    /// A part file in the launcher's private directory.
    Dir(PathBuf),
    /// This file, written by the process that holds every rank's part (the threads of one
    /// process, or rank 0 of the mpi conduit, which gathers them); `FILE.N` from a process
    /// that holds only its own.
    File(PathBuf),
}

/// The name of rank `rank`'s part in the launcher's directory.
pub(crate) fn part_name(rank: usize) -> String {
    format!("rank-{rank}.json")
}

/// Write rank `rank`'s part as `path`.
pub(crate) fn write_part(
    path: &Path,
    ranks: usize,
    conduit: &str,
    part: RankStats,
) -> Result<(), JobError> {
    JobStats::from_parts(ranks, conduit, vec![part]).write(path)
}

/// Merge every part in the launcher's directory `dir` into `file`; an error names parts
/// that are missing (ranks that failed) after writing what there is.
pub fn merge_dir(dir: &Path, ranks: usize, file: &Path) -> Result<(), JobError> {
    let mut parts = Vec::new();
    let mut missing = Vec::new();
    for rank in 0..ranks {
        let path = dir.join(part_name(rank));
        match std::fs::metadata(&path) {
            Ok(_) => parts.push(JobStats::read(&path)?),
            Err(_) => missing.push(rank),
        }
    }
    if parts.is_empty() {
        return Err(JobError::Usage(format!(
            "no rank wrote statistics, so {} was not written",
            file.display()
        )));
    }
    let merged = JobStats::merge(parts).map_err(|e| JobError::Usage(e.to_string()))?;
    merged.write(file)?;
    if missing.is_empty() {
        Ok(())
    } else {
        Err(JobError::Usage(format!(
            "statistics of rank(s) {missing:?} are missing from {} (they did not finish)",
            file.display()
        )))
    }
}
