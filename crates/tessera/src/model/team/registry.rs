//! The algorithm vocabulary: which collective operations there are, which algorithms each
//! has, how they are named and parsed, which are forced by the environment, and the model
//! that picks one when nothing is forced or tuned.
//!
//! This module must never move data: it only names and chooses.

use super::*;

/// The collective operations, for choosing algorithms.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Collective {
    /// [`Team::barrier`]
    Barrier,
    /// [`Team::broadcast`]
    Broadcast,
    /// [`Team::reduce`]
    Reduce,
    /// [`Team::allreduce`]
    Allreduce,
    /// [`Team::gather`]
    Gather,
    /// [`Team::allgather`]
    Allgather,
    /// [`Team::scatter`]
    Scatter,
    /// [`Team::exchange`] and [`Team::exchange_v`]
    Exchange,
    /// [`Team::scan`] and [`Team::exscan`]
    Scan,
}

impl Collective {
    /// Every collective.
    pub const ALL: [Collective; 9] = [
        Collective::Barrier,
        Collective::Broadcast,
        Collective::Reduce,
        Collective::Allreduce,
        Collective::Gather,
        Collective::Allgather,
        Collective::Scatter,
        Collective::Exchange,
        Collective::Scan,
    ];

    /// Position in [`Collective::ALL`].
    pub(crate) fn index(self) -> usize {
        self as usize
    }

    /// Lower-case name, as in `TESSERA_COLL_<NAME>` (upper-cased) and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Collective::Barrier => "barrier",
            Collective::Broadcast => "broadcast",
            Collective::Reduce => "reduce",
            Collective::Allreduce => "allreduce",
            Collective::Gather => "gather",
            Collective::Allgather => "allgather",
            Collective::Scatter => "scatter",
            Collective::Exchange => "exchange",
            Collective::Scan => "scan",
        }
    }

    /// The algorithms that implement this operation.
    pub fn algorithms(self) -> &'static [Algorithm] {
        use Algorithm::*;
        match self {
            Collective::Barrier => &[Dissemination, Flat],
            Collective::Broadcast => &[Flat, Binomial, Knomial(4), Chain],
            Collective::Reduce => &[Flat, Binomial, Knomial(4)],
            Collective::Allreduce => &[ReduceBroadcast, RecursiveDoubling, Ring],
            Collective::Gather => &[Flat, Binomial],
            Collective::Allgather => &[Ring, Bruck, GatherBroadcast],
            Collective::Scatter => &[Flat, Binomial],
            Collective::Exchange => &[Pairwise, Flat],
            Collective::Scan => &[Linear, RecursiveDoubling],
        }
    }
}

/// An algorithm for a collective operation.
///
/// ```
/// use tessera::Algorithm;
/// assert_eq!("knomial8".parse::<Algorithm>().unwrap(), Algorithm::Knomial(8));
/// assert_eq!(Algorithm::RecursiveDoubling.to_string(), "recursive_doubling");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// The root talks to every member directly (or every member to every member).
    Flat,
    /// Binomial tree (k-nomial with radix 2).
    Binomial,
    /// k-nomial tree with the given radix (at least 2).
    Knomial(u32),
    /// Pipelined chain: each member forwards chunks to the next as they arrive.
    Chain,
    /// Dissemination in ⌈log₂ n⌉ rounds.
    Dissemination,
    /// Recursive doubling (non-powers of two folded into the nearest power).
    RecursiveDoubling,
    /// Ring: reduce-scatter then allgather, or n − 1 neighbour steps.
    Ring,
    /// Reduce to a root, then broadcast.
    ReduceBroadcast,
    /// Gather to a root, then broadcast.
    GatherBroadcast,
    /// Bruck's dissemination allgather.
    Bruck,
    /// n − 1 pairwise exchange steps.
    Pairwise,
    /// A chain passing partial results from rank to rank.
    Linear,
    /// The conduit's own collective: MPI's (`MPI_Iallreduce`, `MPI_Ibcast`, ...) on the
    /// `mpi` conduit, on a communicator of the team's own. Every operation has it there
    /// and no other conduit does ([`Team::algorithms`]). Reductions use it for built-in
    /// operations on primitive numbers; user operations, `Loc` and `exchange_v` with
    /// unequal counts use the model's choice instead.
    Native,
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Algorithm::Flat => f.write_str("flat"),
            Algorithm::Binomial => f.write_str("binomial"),
            Algorithm::Knomial(k) => write!(f, "knomial{k}"),
            Algorithm::Chain => f.write_str("chain"),
            Algorithm::Dissemination => f.write_str("dissemination"),
            Algorithm::RecursiveDoubling => f.write_str("recursive_doubling"),
            Algorithm::Ring => f.write_str("ring"),
            Algorithm::ReduceBroadcast => f.write_str("reduce_broadcast"),
            Algorithm::GatherBroadcast => f.write_str("gather_broadcast"),
            Algorithm::Bruck => f.write_str("bruck"),
            Algorithm::Pairwise => f.write_str("pairwise"),
            Algorithm::Linear => f.write_str("linear"),
            Algorithm::Native => f.write_str("native"),
        }
    }
}

impl FromStr for Algorithm {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        Ok(match s {
            "flat" => Algorithm::Flat,
            "binomial" => Algorithm::Binomial,
            "chain" => Algorithm::Chain,
            "dissemination" => Algorithm::Dissemination,
            "recursive_doubling" => Algorithm::RecursiveDoubling,
            "ring" => Algorithm::Ring,
            "reduce_broadcast" => Algorithm::ReduceBroadcast,
            "gather_broadcast" => Algorithm::GatherBroadcast,
            "bruck" => Algorithm::Bruck,
            "pairwise" => Algorithm::Pairwise,
            "linear" => Algorithm::Linear,
            "native" => Algorithm::Native,
            k if k.starts_with("knomial") => match k["knomial".len()..].parse::<u32>() {
                Ok(radix) if radix >= 2 => Algorithm::Knomial(radix),
                _ => {
                    return Err(format!(
                        "{k:?}: knomial needs a radix of at least 2, e.g. knomial4"
                    ))
                }
            },
            other => return Err(format!("unknown collective algorithm {other:?}")),
        })
    }
}

/// Forced algorithms per operation, in [`Collective::ALL`] order.
pub(super) type Forced = [Option<Algorithm>; 9];

/// Forced algorithms, from `TESSERA_COLL_*` and [`Team::with_algorithm`].
pub(super) fn forced_from_env() -> Result<Forced> {
    let mut forced = Forced::default();
    for op in Collective::ALL {
        let var = format!("TESSERA_COLL_{}", op.name().to_uppercase());
        if let Some(value) = crate::job::env::text(&var) {
            let alg = value
                .parse::<Algorithm>()
                .map_err(|e| CoreError::Invalid(format!("{var}: {e}")))?;
            check_supported(op, alg)?;
            forced[op.index()] = Some(alg);
        }
    }
    Ok(forced)
}

pub(crate) fn check_supported(op: Collective, alg: Algorithm) -> Result<()> {
    let supported = op.algorithms();
    let ok = alg == Algorithm::Native
        || supported.contains(&alg)
        || matches!(alg, Algorithm::Knomial(_))
            && supported.iter().any(|a| matches!(a, Algorithm::Knomial(_)));
    if ok {
        return Ok(());
    }
    let names: Vec<String> = supported.iter().map(|a| a.to_string()).collect();
    Err(CoreError::Invalid(format!(
        "algorithm {alg} does not implement {}; choose one of: {}",
        op.name(),
        names.join(", ")
    ))
    .into())
}

/// The algorithm the model picks when none is forced and no tuning table covers the
/// operation, on a team within one host (a team spanning hosts on the mpi conduit uses
/// [`Algorithm::Native`] instead). The choices follow `tessera bench coll` at 2 and 4 ranks on shared memory
/// (docs/PERFORMANCE.md). Moving every block directly (flat) wins for gather, scatter and
/// exchange, because a shared-memory "message" costs about one cache-line round trip
/// however many are in flight. Trees and rings win where data would otherwise cross
/// one rank many times, and the chain pipelines large broadcasts through more than two
/// ranks.
pub fn default_algorithm(op: Collective, team_size: usize, bytes: usize) -> Algorithm {
    match op {
        Collective::Barrier => Algorithm::Dissemination,
        Collective::Broadcast if bytes >= 256 * 1024 && team_size > 2 => Algorithm::Chain,
        Collective::Broadcast => Algorithm::Binomial,
        Collective::Reduce => Algorithm::Binomial,
        Collective::Allreduce if bytes >= 32 * 1024 => Algorithm::Ring,
        Collective::Allreduce => Algorithm::RecursiveDoubling,
        Collective::Gather | Collective::Scatter => Algorithm::Flat,
        Collective::Allgather if bytes <= 32 * 1024 && team_size > 2 => Algorithm::Bruck,
        Collective::Allgather => Algorithm::Ring,
        Collective::Exchange => Algorithm::Flat,
        Collective::Scan if team_size <= 4 => Algorithm::Linear,
        Collective::Scan => Algorithm::RecursiveDoubling,
    }
}

pub(super) fn radix_of(alg: Algorithm, n: usize) -> usize {
    match alg {
        Algorithm::Flat => n.max(2),
        Algorithm::Knomial(k) => k as usize,
        _ => 2,
    }
}
