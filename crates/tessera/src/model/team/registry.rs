//! The algorithm vocabulary: which collective operations there are, which algorithms each
//! has, how they are named and parsed, which are forced by the environment, and the model
//! that picks one when nothing is forced or tuned.
//!
//! This module must never move data: it only names and chooses.

use super::cost::{self, Shape, Work};
use super::*;

/// The collective operations, for choosing algorithms.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Collective {
    /// [`coll::Barrier`](crate::coll::Barrier)
    Barrier,
    /// [`coll::Broadcast`](crate::coll::Broadcast)
    Broadcast,
    /// [`coll::Reduce`](crate::coll::Reduce)
    Reduce,
    /// [`coll::Allreduce`](crate::coll::Allreduce)
    Allreduce,
    /// [`coll::Gather`](crate::coll::Gather)
    Gather,
    /// [`coll::Allgather`](crate::coll::Allgather)
    Allgather,
    /// [`coll::Scatter`](crate::coll::Scatter)
    Scatter,
    /// [`coll::Exchange`](crate::coll::Exchange), equal blocks and varying
    Exchange,
    /// [`coll::Scan`](crate::coll::Scan) and [`coll::Exscan`](crate::coll::Exscan)
    Scan,
    /// [`coll::Broadcast`](crate::coll::Broadcast)`.to_symmetric` (blocking; the nonblocking form is flat)
    BroadcastTo,
    /// [`coll::Scatter`](crate::coll::Scatter)`.to_symmetric` (blocking; the nonblocking form is flat)
    ScatterTo,
    /// [`coll::Gather`](crate::coll::Gather)`.to_symmetric` (blocking; the nonblocking form is flat)
    GatherTo,
}

impl Collective {
    /// Every collective.
    pub const ALL: [Collective; 12] = [
        Collective::Barrier,
        Collective::Broadcast,
        Collective::Reduce,
        Collective::Allreduce,
        Collective::Gather,
        Collective::Allgather,
        Collective::Scatter,
        Collective::Exchange,
        Collective::Scan,
        Collective::BroadcastTo,
        Collective::ScatterTo,
        Collective::GatherTo,
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
            Collective::BroadcastTo => "broadcast_to",
            Collective::ScatterTo => "scatter_to",
            Collective::GatherTo => "gather_to",
        }
    }

    /// A single-address form (`*_to`): it puts straight into destinations in the global
    /// address space, so the conduit's own collectives ([`Algorithm::Native`]) do not
    /// implement it.
    pub fn is_single_address(self) -> bool {
        matches!(
            self,
            Collective::BroadcastTo | Collective::ScatterTo | Collective::GatherTo
        )
    }

    /// The algorithms that implement this operation, in the registry's order (the first
    /// of a family with a radix at its default radix); [`Algorithm::Native`] is not listed
    /// (only a team on the mpi conduit has it: [`Team::algorithms`]).
    pub fn algorithms(self) -> Vec<Algorithm> {
        REGISTRY
            .iter()
            .filter(|row| row.op == self)
            .map(|row| row.algorithm)
            .collect()
    }

    /// What a tuner tries for this operation: every algorithm of [`Collective::algorithms`],
    /// a family with a radix at each radix its row lists for tuning.
    ///
    /// ```
    /// use tessera::{Algorithm, Collective};
    /// let tried = Collective::Exchange.candidates();
    /// assert!(tried.contains(&Algorithm::Bruck(4)) && tried.contains(&Algorithm::Pairwise));
    /// ```
    pub fn candidates(self) -> Vec<Algorithm> {
        REGISTRY
            .iter()
            .filter(|row| row.op == self)
            .flat_map(|row| match row.tuned_radices {
                [] => vec![row.algorithm],
                radices => radices
                    .iter()
                    .map(|&k| row.algorithm.with_radix(k))
                    .collect(),
            })
            .collect()
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
    /// Bruck's dissemination with the given radix: the allgather (radix 2), and the
    /// all-to-all of seed 004 §3.4 (radix 2, 4 or 8), whose `⌈log_r n⌉` phases each send
    /// r − 1 packed messages.
    Bruck(u32),
    /// n − 1 pairwise exchange steps.
    Pairwise,
    /// Every member broadcasts its own block straight to every other (the allgather as
    /// n broadcasts, seed 004 §3.5): one round of n − 1 messages each.
    AllBroadcast,
    /// Rabenseifner's allreduce: a reduce-scatter by recursive halving, then an allgather
    /// by recursive doubling (seed 004 §3.5's reduce-scatter + allgather in `2·log2 n`
    /// rounds, each moving half the data of the last; non-powers of two folded in as for
    /// recursive doubling).
    Rabenseifner,
    /// A chain passing partial results from rank to rank.
    Linear,
    /// The conduit's own collective: MPI's (`MPI_Iallreduce`, `MPI_Ibcast`, ...) on the
    /// `mpi` conduit, on a communicator of the team's own. Every operation has it there
    /// and no other conduit does ([`Team::algorithms`]). Reductions use it for built-in
    /// operations on primitive numbers; user operations, `Loc` and `exchange_v` with
    /// unequal counts use the model's choice instead.
    Native,
}

/// One row of the registry: one algorithm of one operation and what it can do. Every
/// list of algorithms ([`Collective::algorithms`], [`Team::algorithms`]), their names
/// ([`Algorithm`]'s `Display` and `FromStr`), the check of forced algorithms (`TESSERA_COLL_*`, [`Team::with_algorithm`]), the tuner and
/// `tessera bench coll` read the registry. Adding an algorithm is a variant of
/// [`Algorithm`] with its code (`CODES`) and its rows here, and its schedule in
/// `algorithms` (the builder is generic over the element type, so a row cannot hold it).
///
/// ```
/// use tessera::model::team::{registry, Algorithm, Collective};
/// let row = registry()
///     .iter()
///     .find(|r| r.op == Collective::Broadcast && r.algorithm == Algorithm::Binomial)
///     .unwrap();
/// assert_eq!(row.name, "binomial");
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Row {
    /// The operation.
    pub op: Collective,
    /// The algorithm (for a family with a radix, at its default radix).
    pub algorithm: Algorithm,
    /// Its name in `TESSERA_COLL_*`, tuning tables and reports (a radix follows it:
    /// `knomial4`).
    pub name: &'static str,
    /// The radices it takes, if it has one (`knomial<k>`), as (least, most).
    pub radix: Option<(u32, u32)>,
    /// The radices the tuner (`tessera tune`) tries (empty without a radix).
    pub tuned_radices: &'static [u32],
    /// What it does, in one line.
    pub summary: &'static str,
    /// Its cost formula: the work of one call for a team size, a message size and a
    /// radix, which [`MachineParams`](super::MachineParams) prices (see `cost`).
    pub work: fn(Shape) -> Work,
}

const fn row(
    op: Collective,
    algorithm: Algorithm,
    name: &'static str,
    summary: &'static str,
    work: fn(Shape) -> Work,
) -> Row {
    Row {
        op,
        algorithm,
        name,
        radix: None,
        tuned_radices: &[],
        summary,
        work,
    }
}

/// The most a k-nomial radix may be.
const MAX_RADIX: u32 = 64;

/// The k-nomial row of `op` (default radix 4).
const fn knomial(op: Collective, work: fn(Shape) -> Work) -> Row {
    Row {
        op,
        algorithm: Algorithm::Knomial(4),
        name: "knomial",
        radix: Some((2, MAX_RADIX)),
        tuned_radices: &[3, 4, 8],
        summary: "k-nomial tree: each parent talks to up to k - 1 children per round",
        work,
    }
}

/// The k-nomial row of a single-address form (default radix 4).
const fn knomial_single(op: Collective, summary: &'static str, work: fn(Shape) -> Work) -> Row {
    Row {
        tuned_radices: &[2, 4, 8],
        summary,
        ..knomial(op, work)
    }
}

/// Every algorithm of every operation (the conduit's own, [`Algorithm::Native`], is not a
/// row: every mailbox operation has it on the mpi conduit).
static REGISTRY: [Row; 32] = {
    use cost::*;
    use Algorithm::*;
    use Collective::*;
    [
        row(
            Barrier,
            Dissemination,
            "dissemination",
            "ceil(log2 n) rounds of signals to rank + 2^i",
            barrier_dissemination,
        ),
        row(
            Barrier,
            Flat,
            "flat",
            "every member signals rank 0, which releases all",
            barrier_flat,
        ),
        row(
            Broadcast,
            Flat,
            "flat",
            "the root sends to every member",
            broadcast_flat,
        ),
        row(
            Broadcast,
            Binomial,
            "binomial",
            "binomial tree from the root",
            broadcast_binomial,
        ),
        knomial(Broadcast, broadcast_knomial),
        row(
            Broadcast,
            Chain,
            "chain",
            "pipelined chain: each member forwards chunks as they arrive",
            broadcast_chain,
        ),
        row(
            Reduce,
            Flat,
            "flat",
            "the root combines every member's data",
            reduce_flat,
        ),
        row(
            Reduce,
            Binomial,
            "binomial",
            "binomial tree towards the root",
            reduce_binomial,
        ),
        knomial(Reduce, reduce_knomial),
        row(
            Allreduce,
            ReduceBroadcast,
            "reduce_broadcast",
            "binomial reduce, then binomial broadcast",
            allreduce_reduce_broadcast,
        ),
        row(
            Allreduce,
            RecursiveDoubling,
            "recursive_doubling",
            "log2 n pairwise swaps (others folded in)",
            allreduce_recursive_doubling,
        ),
        row(
            Allreduce,
            Ring,
            "ring",
            "ring reduce-scatter, then ring allgather",
            allreduce_ring,
        ),
        row(
            Allreduce,
            Rabenseifner,
            "rabenseifner",
            "recursive-halving reduce-scatter, then recursive-doubling allgather",
            allreduce_rabenseifner,
        ),
        row(
            Gather,
            Flat,
            "flat",
            "every member sends to the root",
            gather_flat,
        ),
        row(
            Gather,
            Binomial,
            "binomial",
            "binomial tree towards the root, blocks merged",
            gather_binomial,
        ),
        row(
            Allgather,
            Ring,
            "ring",
            "n - 1 neighbour steps",
            allgather_ring,
        ),
        row(
            Allgather,
            Bruck(2),
            "bruck",
            "Bruck's dissemination: ceil(log2 n) rounds",
            allgather_bruck,
        ),
        row(
            Allgather,
            GatherBroadcast,
            "gather_broadcast",
            "gather to rank 0, then broadcast",
            allgather_gather_broadcast,
        ),
        row(
            Allgather,
            AllBroadcast,
            "all_broadcast",
            "every member broadcasts its block to all at once",
            one_round_of_all_pairs,
        ),
        row(
            Scatter,
            Flat,
            "flat",
            "the root sends every member its block",
            scatter_flat,
        ),
        row(
            Scatter,
            Binomial,
            "binomial",
            "binomial tree from the root, blocks split",
            scatter_binomial,
        ),
        row(
            Exchange,
            Pairwise,
            "pairwise",
            "n - 1 steps, each with one partner",
            exchange_pairwise,
        ),
        row(
            Exchange,
            Flat,
            "flat",
            "every block sent at once",
            one_round_of_all_pairs,
        ),
        Row {
            op: Exchange,
            algorithm: Bruck(2),
            name: "bruck",
            radix: Some((2, 8)),
            tuned_radices: &[2, 4, 8],
            summary: "dissemination: ceil(log_r n) phases of r - 1 packed messages",
            work: exchange_bruck,
        },
        row(
            Scan,
            Linear,
            "linear",
            "partial results passed rank to rank",
            scan_linear,
        ),
        row(
            Scan,
            RecursiveDoubling,
            "recursive_doubling",
            "log2 n rounds at doubling distances",
            scan_recursive_doubling,
        ),
        row(
            BroadcastTo,
            Flat,
            "flat",
            "the root puts into every destination",
            put_flat,
        ),
        knomial_single(
            BroadcastTo,
            "k-nomial tree of puts: each member forwards from its destination to its children's",
            broadcast_to_knomial,
        ),
        row(
            ScatterTo,
            Flat,
            "flat",
            "the root puts every block and signals every member",
            put_flat,
        ),
        knomial_single(
            ScatterTo,
            "the root puts every block; entry and landing signalled along a k-nomial tree",
            scatter_to_knomial,
        ),
        row(
            GatherTo,
            Flat,
            "flat",
            "every member puts its block; the root hears from each",
            gather_to_flat,
        ),
        knomial_single(
            GatherTo,
            "every member puts its block; entry and landing signalled along a k-nomial tree",
            gather_to_knomial,
        ),
    ]
};

/// The registry: every algorithm of every operation, one [`Row`] each.
pub fn registry() -> &'static [Row] {
    &REGISTRY
}

impl Algorithm {
    /// The algorithm's name without its radix, from the registry.
    pub(super) fn stem(self) -> &'static str {
        match self {
            Algorithm::Native => "native",
            alg => REGISTRY
                .iter()
                .find(|row| same_family(row.algorithm, alg))
                .map_or("unregistered", |row| row.name),
        }
    }
}

/// Every algorithm family in the order of its code (a family with a radix at radix 0):
/// the code that a call's signature carries is the place here plus one. A new algorithm is
/// a variant, an entry at the end of this list and its rows; the signature has room for
/// 63 codes.
const CODES: [Algorithm; 15] = [
    Algorithm::Flat,
    Algorithm::Binomial,
    Algorithm::Knomial(0),
    Algorithm::Chain,
    Algorithm::Dissemination,
    Algorithm::RecursiveDoubling,
    Algorithm::Ring,
    Algorithm::ReduceBroadcast,
    Algorithm::GatherBroadcast,
    Algorithm::Bruck(0),
    Algorithm::Pairwise,
    Algorithm::Linear,
    Algorithm::Native,
    Algorithm::AllBroadcast,
    Algorithm::Rabenseifner,
];

impl Algorithm {
    /// The algorithm's code (1 to 63; its family's place in the registry's code list plus
    /// one) and its radix (0 without one; at most 63), as a call's signature carries them.
    #[inline]
    pub(crate) fn code(self) -> (u64, u64) {
        let family = CODES
            .iter()
            .position(|&a| same_family(a, self))
            .map_or(0, |i| i as u64 + 1);
        (family, self.radix().map_or(0, |k| u64::from(k.min(63))))
    }

    /// The algorithm a signature's code and radix name, if any.
    pub(crate) fn from_code(code: u64, radix: u64) -> Option<Algorithm> {
        let family = *CODES.get(usize::try_from(code).ok()?.checked_sub(1)?)?;
        Some(family.with_radix(radix as u32))
    }

    /// The radix of a family that has one (`knomial<k>`, `bruck<k>`).
    pub fn radix(self) -> Option<u32> {
        match self {
            Algorithm::Knomial(k) | Algorithm::Bruck(k) => Some(k),
            _ => None,
        }
    }

    /// The same family at radix `k` (itself, for an algorithm without a radix).
    ///
    /// ```
    /// use tessera::Algorithm;
    /// assert_eq!(Algorithm::Bruck(2).with_radix(8), Algorithm::Bruck(8));
    /// assert_eq!(Algorithm::Ring.with_radix(8), Algorithm::Ring);
    /// ```
    pub fn with_radix(self, k: u32) -> Algorithm {
        match self {
            Algorithm::Knomial(_) => Algorithm::Knomial(k),
            Algorithm::Bruck(_) => Algorithm::Bruck(k),
            alg => alg,
        }
    }
}

/// `a` and `b` are the same algorithm, whatever their radices.
pub(super) fn same_family(a: Algorithm, b: Algorithm) -> bool {
    std::mem::discriminant(&a) == std::mem::discriminant(&b)
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Algorithm::Knomial(k) => write!(f, "{}{k}", self.stem()),
            // Radix 2 is the allgather's, named as before there was a choice.
            Algorithm::Bruck(k) if *k != 2 => write!(f, "{}{k}", self.stem()),
            alg => f.write_str(alg.stem()),
        }
    }
}

impl FromStr for Algorithm {
    type Err = crate::BadValue;
    fn from_str(s: &str) -> std::result::Result<Self, crate::BadValue> {
        let bad = |message| Err(crate::BadValue::new("algorithm", s, message));
        if s == "native" {
            return Ok(Algorithm::Native);
        }
        for row in REGISTRY.iter() {
            match row.radix {
                None if row.name == s => return Ok(row.algorithm),
                Some((least, most)) if s.starts_with(row.name) => {
                    let digits = &s[row.name.len()..];
                    if digits.is_empty() {
                        return Ok(row.algorithm); // the default radix
                    }
                    return match digits.parse::<u32>() {
                        Ok(k) if (least..=most).contains(&k) => Ok(row.algorithm.with_radix(k)),
                        _ => bad(format!(
                            "{s:?}: {} needs a radix from {least} to {most}, e.g. {}4",
                            row.name, row.name
                        )),
                    };
                }
                _ => {}
            }
        }
        let mut names: Vec<&str> = REGISTRY.iter().map(|r| r.name).collect();
        names.sort_unstable();
        names.dedup();
        bad(format!(
            "unknown collective algorithm {s:?}; known: {}, native",
            names.join(", ")
        ))
    }
}

/// Forced algorithms per operation, in [`Collective::ALL`] order.
pub(super) type Forced = [Option<Algorithm>; Collective::ALL.len()];

/// Every `TESSERA_COLL_<OP>` in the environment names an operation and an algorithm
/// that implements it (the launcher checks this before any rank starts).
pub(crate) fn check_forced_env() -> Result<()> {
    for (op, _) in crate::config::forced_algorithms() {
        if !Collective::ALL
            .iter()
            .any(|c| c.name().to_uppercase() == op)
        {
            let names: Vec<String> = Collective::ALL
                .iter()
                .map(|c| format!("{}{}", crate::config::COLL_PREFIX, c.name().to_uppercase()))
                .collect();
            return Err(CoreError::BadArgument {
                call: "TESSERA_COLL_<OP>",
                argument: "OP",
                why: format!(
                    "environment variable {}{op} names no collective operation; one of {}",
                    crate::config::COLL_PREFIX,
                    names.join(", ")
                ),
            }
            .into());
        }
    }
    forced_from_env().map(|_| ())
}

/// Forced algorithms, from `TESSERA_COLL_*` and [`Team::with_algorithm`].
pub(super) fn forced_from_env() -> Result<Forced> {
    let mut forced = Forced::default();
    for op in Collective::ALL {
        let var = format!("TESSERA_COLL_{}", op.name().to_uppercase());
        if let Some(value) = crate::config::text(&var) {
            let alg = value
                .parse::<Algorithm>()
                .map_err(|e| CoreError::BadArgument {
                    call: "TESSERA_COLL_<OP>",
                    argument: "algorithm",
                    why: format!("{var}: {e}"),
                })?;
            check_supported(op, alg)?;
            forced[op.index()] = Some(alg);
        }
    }
    Ok(forced)
}

/// An error unless the registry has `alg` for `op` ([`Algorithm::Native`] is every
/// mailbox operation's on the mpi conduit).
pub(crate) fn check_supported(op: Collective, alg: Algorithm) -> Result<()> {
    let ok = (alg == Algorithm::Native && !op.is_single_address())
        || REGISTRY.iter().any(|row| {
            row.op == op
                && same_family(row.algorithm, alg)
                && match (row.radix, alg.radix()) {
                    (Some((least, most)), Some(k)) => (least..=most).contains(&k),
                    _ => row.algorithm == alg,
                }
        });
    if ok {
        return Ok(());
    }
    let names: Vec<String> = op.algorithms().iter().map(|a| a.to_string()).collect();
    Err(CoreError::BadArgument {
        call: "Team::with_algorithm",
        argument: "algorithm",
        why: format!(
            "algorithm {alg} does not implement {}; choose one of: {}",
            op.name(),
            names.join(", ")
        ),
    }
    .into())
}

/// The algorithm the cost model picks, with the built-in parameters of a host where every
/// rank has a core ([`MachineParams::DEDICATED`](super::MachineParams::DEDICATED)), for
/// members that read each other's long messages directly: the row of `op` with the least
/// predicted time (see the `cost` module). A team uses its own parameters (calibrated
/// with `tessera tune --calibrate`, or the built-in set for its host) where none is forced
/// and no tuning table covers the operation; a team spanning hosts on the mpi conduit
/// uses [`Algorithm::Native`] for the operations MPI has.
///
/// ```
/// use tessera::model::team::default_algorithm;
/// use tessera::{Algorithm, Collective};
/// // Sixteen members: the barrier takes 4 rounds of signals, not 30 messages via rank 0.
/// assert_eq!(default_algorithm(Collective::Barrier, 16, 0), Algorithm::Dissemination);
/// // An all-to-all of 8-byte blocks goes out at once.
/// assert_eq!(default_algorithm(Collective::Exchange, 16, 8), Algorithm::Flat);
/// ```
pub fn default_algorithm(op: Collective, team_size: usize, bytes: usize) -> Algorithm {
    super::MachineParams::DEDICATED.choose(op, team_size, bytes, true)
}

pub(super) fn radix_of(alg: Algorithm, n: usize) -> usize {
    match alg {
        Algorithm::Flat => n.max(2),
        Algorithm::Knomial(k) => k as usize,
        _ => 2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every row's name parses back to its algorithm and prints as it did; every
    /// operation has rows; `check_supported` accepts
    /// exactly the registry's families (and native).
    #[test]
    fn the_registry_names_parses_and_checks_every_row() {
        for row in registry() {
            let printed = row.algorithm.to_string();
            assert_eq!(printed.parse::<Algorithm>(), Ok(row.algorithm), "{row:?}");
            assert!(printed.starts_with(row.name), "{printed} from {row:?}");
            check_supported(row.op, row.algorithm).unwrap();
            if let Some((least, most)) = row.radix {
                for k in [least, most] {
                    let alg = format!("{}{k}", row.name).parse::<Algorithm>().unwrap();
                    check_supported(row.op, alg).unwrap();
                }
                assert!(format!("{}{}", row.name, most + 1)
                    .parse::<Algorithm>()
                    .is_err());
                assert!(format!("{}{}", row.name, least - 1)
                    .parse::<Algorithm>()
                    .is_err());
            }
        }
        for op in Collective::ALL {
            let rows: Vec<&Row> = registry().iter().filter(|r| r.op == op).collect();
            assert!(!rows.is_empty(), "{op:?}");
            assert_eq!(
                check_supported(op, Algorithm::Native).is_ok(),
                !op.is_single_address()
            );
            for other in registry().iter().filter(|r| r.op != op) {
                let known = rows
                    .iter()
                    .any(|r| same_family(r.algorithm, other.algorithm));
                assert_eq!(check_supported(op, other.algorithm).is_ok(), known);
            }
        }
        // The model only picks registered algorithms.
        for op in Collective::ALL {
            for n in [1, 2, 3, 4, 5, 8, 16, 64] {
                for bytes in [0, 8, 4096, 32 * 1024, 256 * 1024, 1 << 20] {
                    let alg = default_algorithm(op, n, bytes);
                    check_supported(op, alg).unwrap_or_else(|e| panic!("{op:?} {n} {bytes}: {e}"));
                }
            }
        }
        assert!("nonsense"
            .parse::<Algorithm>()
            .unwrap_err()
            .message
            .contains("known: "));
    }
}
