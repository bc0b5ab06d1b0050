//! The algorithm vocabulary: which collective operations there are, which algorithms each
//! has, how they are named and parsed, which are forced by the environment, and the model
//! that picks one when nothing is forced or tuned.
//!
//! This module must never move data: it only names and chooses.

use std::sync::OnceLock;

use super::algorithms::Run;
use super::cost::{Shape, Work};
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
    /// address space, so the conduit's own collectives ([`Algorithm::NATIVE`]) do not
    /// implement it.
    pub fn is_single_address(self) -> bool {
        matches!(
            self,
            Collective::BroadcastTo | Collective::ScatterTo | Collective::GatherTo
        )
    }

    /// The algorithms that implement this operation, in the registry's order (the first
    /// of a family with a radix at its default radix); [`Algorithm::NATIVE`] is not listed
    /// (only a team on the mpi conduit has it: [`Team::algorithms`]).
    pub fn algorithms(self) -> Vec<Algorithm> {
        registry()
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
    /// assert!(tried.contains(&Algorithm::bruck(4)) && tried.contains(&Algorithm::PAIRWISE));
    /// ```
    pub fn candidates(self) -> Vec<Algorithm> {
        registry()
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

/// An algorithm for a collective operation: a family (its code, which a call's signature
/// carries) and, for a family with one, a radix. Each operation's algorithms are the rows
/// of the registry ([`registry`]), which give their names (its `Display` and `FromStr`).
///
/// ```
/// use tessera::Algorithm;
/// assert_eq!("knomial8".parse::<Algorithm>().unwrap(), Algorithm::knomial(8));
/// assert_eq!(Algorithm::RECURSIVE_DOUBLING.to_string(), "recursive_doubling");
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Algorithm {
    code: u8,
    /// 0 for a family without a radix.
    radix: u32,
}

impl Algorithm {
    /// The root talks to every member directly (or every member to every member).
    pub const FLAT: Algorithm = Algorithm::family(1);
    /// Binomial tree (k-nomial with radix 2).
    pub const BINOMIAL: Algorithm = Algorithm::family(2);
    /// Pipelined chain: each member forwards chunks to the next as they arrive.
    pub const CHAIN: Algorithm = Algorithm::family(4);
    /// Dissemination in ⌈log₂ n⌉ rounds.
    pub const DISSEMINATION: Algorithm = Algorithm::family(5);
    /// Recursive doubling (non-powers of two folded into the nearest power).
    pub const RECURSIVE_DOUBLING: Algorithm = Algorithm::family(6);
    /// Ring: reduce-scatter then allgather, or n − 1 neighbour steps.
    pub const RING: Algorithm = Algorithm::family(7);
    /// Reduce to a root, then broadcast.
    pub const REDUCE_BROADCAST: Algorithm = Algorithm::family(8);
    /// Gather to a root, then broadcast.
    pub const GATHER_BROADCAST: Algorithm = Algorithm::family(9);
    /// n − 1 pairwise exchange steps.
    pub const PAIRWISE: Algorithm = Algorithm::family(11);
    /// A chain passing partial results from rank to rank.
    pub const LINEAR: Algorithm = Algorithm::family(12);
    /// The conduit's own collective: MPI's (`MPI_Iallreduce`, `MPI_Ibcast`, ...) on the
    /// `mpi` conduit, on a communicator of the team's own. Every operation has it there
    /// and no other conduit does ([`Team::algorithms`]), so it is no row of the registry.
    /// Reductions use it for built-in operations on primitive numbers; user operations,
    /// `Loc` and `exchange_v` with unequal counts use the model's choice instead.
    pub const NATIVE: Algorithm = Algorithm::family(13);
    /// Every member broadcasts its own block straight to every other (the allgather as
    /// n broadcasts, seed 004 §3.5): one round of n − 1 messages each.
    pub const ALL_BROADCAST: Algorithm = Algorithm::family(14);
    /// Rabenseifner's allreduce: a reduce-scatter by recursive halving, then an allgather
    /// by recursive doubling (seed 004 §3.5's reduce-scatter + allgather in `2·log2 n`
    /// rounds, each moving half the data of the last; non-powers of two folded in as for
    /// recursive doubling).
    pub const RABENSEIFNER: Algorithm = Algorithm::family(15);

    /// k-nomial tree with radix `k` (at least 2).
    pub const fn knomial(k: u32) -> Algorithm {
        Algorithm { code: 3, radix: k }
    }

    /// Bruck's dissemination with radix `k`: the allgather (radix 2), and the all-to-all
    /// of seed 004 §3.4 (radix 2, 4 or 8), whose `⌈log_r n⌉` phases each send r − 1 packed
    /// messages.
    pub const fn bruck(k: u32) -> Algorithm {
        Algorithm { code: 10, radix: k }
    }

    /// The family of signature code `code` (1 to 63, the family's own: the registry's
    /// test checks that no two names share one), without a radix. A new family's rows
    /// name it this way.
    pub(crate) const fn family(code: u8) -> Algorithm {
        Algorithm { code, radix: 0 }
    }

    /// Whether `self` and `other` are the same algorithm, whatever their radices.
    pub(crate) fn same_family(self, other: Algorithm) -> bool {
        self.code == other.code
    }
}

impl fmt::Debug for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// One row of the registry: one algorithm of one operation and what it can do. Every
/// list of algorithms ([`Collective::algorithms`], [`Team::algorithms`]), their names
/// ([`Algorithm`]'s `Display` and `FromStr`), the check of forced algorithms (`TESSERA_COLL_*`, [`Team::with_algorithm`]), the tuner and
/// `tessera bench coll` read the registry, and the engine runs a call's algorithm by its
/// row. The rows are written beside their schedules and cost formulas, one file per
/// operation (`model/team/algorithms/`): a new algorithm is a row there.
///
/// ```
/// use tessera::model::team::{registry, Algorithm, Collective};
/// let row = registry()
///     .iter()
///     .find(|r| r.op == Collective::Broadcast && r.algorithm == Algorithm::BINOMIAL)
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
    /// How it runs: its rounds, or the single-address forms' tree.
    pub(crate) run: Run,
}

/// The registry: every algorithm of every operation, one [`Row`] each.
pub fn registry() -> &'static [Row] {
    static REGISTRY: OnceLock<Vec<Row>> = OnceLock::new();
    REGISTRY.get_or_init(super::algorithms::rows)
}

impl Algorithm {
    /// The algorithm's name without its radix, from the registry.
    pub(super) fn stem(self) -> &'static str {
        if self == Algorithm::NATIVE {
            return "native";
        }
        registry()
            .iter()
            .find(|row| row.algorithm.same_family(self))
            .map_or("unregistered", |row| row.name)
    }

    /// The algorithm's code (1 to 63, its family's) and its radix (0 without one; at most
    /// 63), as a call's signature carries them.
    #[inline]
    pub(crate) fn code(self) -> (u64, u64) {
        (u64::from(self.code), u64::from(self.radix.min(63)))
    }

    /// The algorithm a signature's code and radix name, if any.
    pub(crate) fn from_code(code: u64, radix: u64) -> Option<Algorithm> {
        let family = Algorithm::family(u8::try_from(code).ok()?);
        let known = family == Algorithm::NATIVE
            || registry()
                .iter()
                .any(|row| row.algorithm.same_family(family));
        known.then_some(family.with_radix(radix as u32))
    }

    /// The radix of a family that has one (`knomial<k>`, `bruck<k>`).
    pub fn radix(self) -> Option<u32> {
        (self.radix != 0).then_some(self.radix)
    }

    /// The same family at radix `k` (itself, for a family without a radix).
    ///
    /// ```
    /// use tessera::Algorithm;
    /// assert_eq!(Algorithm::bruck(2).with_radix(8), Algorithm::bruck(8));
    /// assert_eq!(Algorithm::RING.with_radix(8), Algorithm::RING);
    /// ```
    pub fn with_radix(self, k: u32) -> Algorithm {
        if self.has_radix() {
            Algorithm { radix: k, ..self }
        } else {
            self
        }
    }

    /// Whether its family takes a radix (some row of it names one).
    fn has_radix(self) -> bool {
        self.radix != 0
            || registry()
                .iter()
                .any(|row| row.algorithm.same_family(self) && row.algorithm.radix != 0)
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // A radix is part of the name unless a row without one names the algorithm at it
        // (the allgather's Bruck, radix 2, is plain `bruck`).
        let plain = registry()
            .iter()
            .any(|row| row.radix.is_none() && row.algorithm == *self);
        match self.radix() {
            Some(k) if !plain => write!(f, "{}{k}", self.stem()),
            _ => f.write_str(self.stem()),
        }
    }
}

impl FromStr for Algorithm {
    type Err = crate::BadValue;
    fn from_str(s: &str) -> std::result::Result<Self, crate::BadValue> {
        let bad = |message| Err(crate::BadValue::new("algorithm", s, message));
        if s == "native" {
            return Ok(Algorithm::NATIVE);
        }
        for row in registry() {
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
        let mut names: Vec<&str> = registry().iter().map(|r| r.name).collect();
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

/// An error unless the registry has `alg` for `op` ([`Algorithm::NATIVE`] is every
/// mailbox operation's on the mpi conduit).
pub(crate) fn check_supported(op: Collective, alg: Algorithm) -> Result<()> {
    let ok = (alg == Algorithm::NATIVE && !op.is_single_address())
        || registry().iter().any(|row| {
            row.op == op
                && row.algorithm.same_family(alg)
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
/// uses [`Algorithm::NATIVE`] for the operations MPI has.
///
/// ```
/// use tessera::model::team::default_algorithm;
/// use tessera::{Algorithm, Collective};
/// // Sixteen members: the barrier takes 4 rounds of signals, not 30 messages via rank 0.
/// assert_eq!(default_algorithm(Collective::Barrier, 16, 0), Algorithm::DISSEMINATION);
/// // An all-to-all of 8-byte blocks goes out at once.
/// assert_eq!(default_algorithm(Collective::Exchange, 16, 8), Algorithm::FLAT);
/// ```
pub fn default_algorithm(op: Collective, team_size: usize, bytes: usize) -> Algorithm {
    super::MachineParams::DEDICATED.choose(op, team_size, bytes, true)
}

/// The tree radix of `alg` over `n` members: n for flat, its radix for a family with one,
/// else 2.
pub(super) fn radix_of(alg: Algorithm, n: usize) -> usize {
    match alg.radix() {
        _ if alg == Algorithm::FLAT => n.max(2),
        Some(k) => k as usize,
        None => 2,
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
                check_supported(op, Algorithm::NATIVE).is_ok(),
                !op.is_single_address()
            );
            for other in registry().iter().filter(|r| r.op != op) {
                let known = rows
                    .iter()
                    .any(|r| r.algorithm.same_family(other.algorithm));
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
        // Every family has one code, every code one family, and the signature has room
        // for it.
        for a in registry() {
            let (code, _) = a.algorithm.code();
            assert!((1..64).contains(&code), "{a:?}");
            assert_ne!(a.algorithm.code, Algorithm::NATIVE.code, "{a:?}");
            for b in registry() {
                assert_eq!(
                    a.name == b.name,
                    a.algorithm.same_family(b.algorithm),
                    "{a:?} and {b:?}"
                );
            }
        }
        assert!("nonsense"
            .parse::<Algorithm>()
            .unwrap_err()
            .message
            .contains("known: "));
    }
}
