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
    /// [`Team::broadcast_to`] (blocking; the nonblocking form is flat)
    BroadcastTo,
    /// [`Team::scatter_to`] (blocking; the nonblocking form is flat)
    ScatterTo,
    /// [`Team::gather_to`] (blocking; the nonblocking form is flat)
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
/// `tessera bench coll` read the registry; adding an algorithm is adding a row and its
/// function.
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
}

const fn row(
    op: Collective,
    algorithm: Algorithm,
    name: &'static str,
    summary: &'static str,
) -> Row {
    Row {
        op,
        algorithm,
        name,
        radix: None,
        tuned_radices: &[],
        summary,
    }
}

/// The most a k-nomial radix may be.
const MAX_RADIX: u32 = 64;

/// The k-nomial row of `op` (default radix 4).
const fn knomial(op: Collective) -> Row {
    Row {
        op,
        algorithm: Algorithm::Knomial(4),
        name: "knomial",
        radix: Some((2, MAX_RADIX)),
        tuned_radices: &[3, 4, 8],
        summary: "k-nomial tree: each parent talks to up to k - 1 children per round",
    }
}

/// The k-nomial row of a single-address form (default radix 4).
const fn knomial_single(op: Collective, summary: &'static str) -> Row {
    Row {
        tuned_radices: &[2, 4, 8],
        summary,
        ..knomial(op)
    }
}

/// Every algorithm of every operation (the conduit's own, [`Algorithm::Native`], is not a
/// row: every mailbox operation has it on the mpi conduit).
static REGISTRY: [Row; 32] = {
    use Algorithm::*;
    use Collective::*;
    [
        row(
            Barrier,
            Dissemination,
            "dissemination",
            "ceil(log2 n) rounds of signals to rank + 2^i",
        ),
        row(
            Barrier,
            Flat,
            "flat",
            "every member signals rank 0, which releases all",
        ),
        row(Broadcast, Flat, "flat", "the root sends to every member"),
        row(
            Broadcast,
            Binomial,
            "binomial",
            "binomial tree from the root",
        ),
        knomial(Broadcast),
        row(
            Broadcast,
            Chain,
            "chain",
            "pipelined chain: each member forwards chunks as they arrive",
        ),
        row(
            Reduce,
            Flat,
            "flat",
            "the root combines every member's data",
        ),
        row(
            Reduce,
            Binomial,
            "binomial",
            "binomial tree towards the root",
        ),
        knomial(Reduce),
        row(
            Allreduce,
            ReduceBroadcast,
            "reduce_broadcast",
            "binomial reduce, then binomial broadcast",
        ),
        row(
            Allreduce,
            RecursiveDoubling,
            "recursive_doubling",
            "log2 n pairwise swaps (others folded in)",
        ),
        row(
            Allreduce,
            Ring,
            "ring",
            "ring reduce-scatter, then ring allgather",
        ),
        row(
            Allreduce,
            Rabenseifner,
            "rabenseifner",
            "recursive-halving reduce-scatter, then recursive-doubling allgather",
        ),
        row(Gather, Flat, "flat", "every member sends to the root"),
        row(
            Gather,
            Binomial,
            "binomial",
            "binomial tree towards the root, blocks merged",
        ),
        row(Allgather, Ring, "ring", "n - 1 neighbour steps"),
        row(
            Allgather,
            Bruck(2),
            "bruck",
            "Bruck's dissemination: ceil(log2 n) rounds",
        ),
        row(
            Allgather,
            GatherBroadcast,
            "gather_broadcast",
            "gather to rank 0, then broadcast",
        ),
        row(
            Allgather,
            AllBroadcast,
            "all_broadcast",
            "every member broadcasts its block to all at once",
        ),
        row(
            Scatter,
            Flat,
            "flat",
            "the root sends every member its block",
        ),
        row(
            Scatter,
            Binomial,
            "binomial",
            "binomial tree from the root, blocks split",
        ),
        row(
            Exchange,
            Pairwise,
            "pairwise",
            "n - 1 steps, each with one partner",
        ),
        row(Exchange, Flat, "flat", "every block sent at once"),
        Row {
            op: Exchange,
            algorithm: Bruck(2),
            name: "bruck",
            radix: Some((2, 8)),
            tuned_radices: &[2, 4, 8],
            summary: "dissemination: ceil(log_r n) phases of r - 1 packed messages",
        },
        row(
            Scan,
            Linear,
            "linear",
            "partial results passed rank to rank",
        ),
        row(
            Scan,
            RecursiveDoubling,
            "recursive_doubling",
            "log2 n rounds at doubling distances",
        ),
        row(
            BroadcastTo,
            Flat,
            "flat",
            "the root puts into every destination",
        ),
        knomial_single(
            BroadcastTo,
            "k-nomial tree of puts: each member forwards from its destination to its children's",
        ),
        row(
            ScatterTo,
            Flat,
            "flat",
            "the root puts every block and signals every member",
        ),
        knomial_single(
            ScatterTo,
            "the root puts every block; entry and landing signalled along a k-nomial tree",
        ),
        row(
            GatherTo,
            Flat,
            "flat",
            "every member puts its block; the root hears from each",
        ),
        knomial_single(
            GatherTo,
            "every member puts its block; entry and landing signalled along a k-nomial tree",
        ),
    ]
};

/// The registry: every algorithm of every operation, one [`Row`] each.
pub fn registry() -> &'static [Row] {
    &REGISTRY
}

impl Algorithm {
    /// The algorithm's name without its radix, from the registry.
    fn stem(self) -> &'static str {
        match self {
            Algorithm::Native => "native",
            alg => REGISTRY
                .iter()
                .find(|row| same_family(row.algorithm, alg))
                .map_or("unregistered", |row| row.name),
        }
    }
}

impl Algorithm {
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
fn same_family(a: Algorithm, b: Algorithm) -> bool {
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
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
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
                        _ => Err(format!(
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
        Err(format!(
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
    for (op, _) in crate::job::env::forced_algorithms() {
        if !Collective::ALL
            .iter()
            .any(|c| c.name().to_uppercase() == op)
        {
            let names: Vec<String> = Collective::ALL
                .iter()
                .map(|c| {
                    format!(
                        "{}{}",
                        crate::job::env::COLL_PREFIX,
                        c.name().to_uppercase()
                    )
                })
                .collect();
            return Err(CoreError::Invalid(format!(
                "environment variable {}{op} names no collective operation; one of {}",
                crate::job::env::COLL_PREFIX,
                names.join(", ")
            ))
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
    Err(CoreError::Invalid(format!(
        "algorithm {alg} does not implement {}; choose one of: {}",
        op.name(),
        names.join(", ")
    ))
    .into())
}

/// The algorithm the model picks when none is forced and no tuning table covers the
/// operation, on a team within one host (a team spanning hosts on the mpi conduit uses
/// [`Algorithm::Native`] for the operations MPI has). The choices follow `tessera bench
/// coll` at 2 and 4 ranks on shared memory and 8 on threads (docs/PERFORMANCE.md). Moving
/// every block directly (flat, all-broadcast) wins for gather, scatter, allgather,
/// exchange and the single-address forms, because a shared-memory "message" or put costs
/// about one cache-line round trip however many are in flight and whichever member sends
/// it. Trees and rings win where data would otherwise cross one rank many times, and the
/// chain pipelines large broadcasts through more than two ranks. This is the choice for
/// members that cannot read each other's memory directly; where they can (ranks of one
/// host, `TESSERA_DIRECT` on), a team's model sends broadcasts of 16 KiB or more flat.
///
/// ```
/// use tessera::model::team::default_algorithm;
/// use tessera::{Algorithm, Collective};
/// assert_eq!(default_algorithm(Collective::Allgather, 4, 8), Algorithm::AllBroadcast);
/// assert_eq!(default_algorithm(Collective::BroadcastTo, 4, 8), Algorithm::Flat);
/// ```
pub fn default_algorithm(op: Collective, team_size: usize, bytes: usize) -> Algorithm {
    model_algorithm(op, team_size, bytes, false, false)
}

/// [`default_algorithm`] for a team whose members read each other's long messages
/// directly (`direct_reads`; see `core::direct`) or not. With direct reads a broadcast of
/// 16 KiB or more goes flat: the root offers its buffer once and every receiver copies
/// it in parallel, where a chain or a tree would first copy it into forwarders' buffers
/// (at 256 KiB flat took 27 µs against the chain's 55–62 at 4 ranks, 65 against 92 at 8;
/// docs/PERFORMANCE.md). Where ranks take turns on a core (`crowded`), a broadcast of up to
/// 256 B among 3 or 4 members goes along a chain: its root sends one message and goes on,
/// so calls in a loop overlap (4 ranks on 2 cores, 8 and 64 B: 0.16–0.24 µs against the
/// binomial tree's 0.24–0.38 in a loop, and within noise of it alone; at 8 members alone
/// the chain took 2.2× as long, and with a core each, n − 1 hops instead of log2 n).
/// Crowded hosts have a few more rules, each measured at 8 ranks on 2 cores (below).
pub(crate) fn model_algorithm(
    op: Collective,
    team_size: usize,
    bytes: usize,
    direct_reads: bool,
    crowded: bool,
) -> Algorithm {
    match op {
        // Where 5-8 members take turns on cores, the flat barrier (each member signals the
        // root and waits for its release: two waits instead of ⌈log2 n⌉) won every run at
        // 8 ranks on 2 cores (threads and processes 10.3-11.9 µs against 12.9-15.1);
        // at 4 dissemination won (2.7 against 4.5).
        Collective::Barrier if crowded && (5..=8).contains(&team_size) => Algorithm::Flat,
        Collective::Barrier => Algorithm::Dissemination,
        Collective::Broadcast if crowded && (3..=4).contains(&team_size) && bytes <= 256 => {
            Algorithm::Chain
        }
        // Where ranks share cores, a 32 KiB broadcast goes faster down the binomial tree
        // than flat (8 ranks on 2 cores: flat 1.12-1.24x slower in every run, 1.07x at 4).
        Collective::Broadcast
            if direct_reads
                && bytes >= super::channel::DIRECT_FROM
                && !(crowded && bytes <= 32 * 1024) =>
        {
            Algorithm::Flat
        }
        Collective::Broadcast if bytes >= 256 * 1024 && team_size > 2 => Algorithm::Chain,
        Collective::Broadcast => Algorithm::Binomial,
        // At 8 ranks the 4-nomial tree beat the binomial tree at every size (1 MiB: 597-626
        // µs against 687-755, radix 3 902-939), now that a member receives its first child
        // straight into its accumulator; at 4 the binomial tree won in 6 of 8 runs from
        // 256 KiB (52-55 µs against 65-69 flat; 80-83 in the other two, by which ranks
        // shared a core).
        Collective::Reduce if (5..=8).contains(&team_size) => Algorithm::Knomial(4),
        // Beyond 8 ranks, unmeasured since that change: kept from when radix 3 beat the
        // binomial tree from 32 KiB at 4 and 8 ranks.
        Collective::Reduce if bytes >= 32 * 1024 && team_size > 8 => Algorithm::Knomial(3),
        Collective::Reduce => Algorithm::Binomial,
        // At 2 ranks recursive doubling (each member reads the other's whole vector) beats
        // the ring up to 256 KiB (18-20 µs against 31-33 on the AVX-512 Xeon, both starting
        // from their input) and loses at 1 MiB (164 against 135), where its three vectors
        // no longer fit a 2 MiB L2.
        Collective::Allreduce if team_size == 2 && bytes <= 256 * 1024 => {
            Algorithm::RecursiveDoubling
        }
        // With no member to fold in, Rabenseifner's halving moves as much as the ring in
        // log2 n steps instead of n − 1, and starts from its input without a copy: 256 KiB
        // 81-86 µs against the ring's 100-102 at 4 ranks, 1 MiB 430-452 against 500-523;
        // 8 ranks (threads) 245 against 275 and 1154 against 1236.
        Collective::Allreduce
            if bytes > 32 * 1024 && team_size > 2 && team_size.is_power_of_two() =>
        {
            Algorithm::Rabenseifner
        }
        Collective::Allreduce if bytes > 32 * 1024 => Algorithm::Ring,
        Collective::Allreduce => Algorithm::RecursiveDoubling,
        // An 8-byte scatter where ranks share cores: the binomial tree's few small
        // messages beat the root's n − 1 (8 ranks on 2 cores 0.27-0.28 µs against
        // 0.44-0.46, 4 ranks 0.30-0.31 against 0.34-0.35); from 64 B flat wins again.
        Collective::Scatter if crowded && team_size >= 4 && bytes <= 8 => Algorithm::Binomial,
        Collective::Gather | Collective::Scatter => Algorithm::Flat,
        // Measured up to 8 ranks, where it beat Bruck and the ring at every size.
        Collective::Allgather if team_size <= 8 => Algorithm::AllBroadcast,
        Collective::Allgather if bytes <= 32 * 1024 => Algorithm::Bruck(2),
        Collective::Allgather => Algorithm::Ring,
        Collective::Exchange => Algorithm::Flat,
        // At 2 members up to 64 B the chain is one message and recursive doubling one
        // each way, and recursive doubling won every run in a loop (8 B: 0.22-0.24 µs
        // against the chain's 0.27-0.29; equal from 512 B).
        Collective::Scan if team_size == 2 && bytes <= 64 => Algorithm::RecursiveDoubling,
        // Otherwise recursive doubling moves the whole vector log2 n times per member:
        // measured slower than the chain at every size up to 8 ranks (1.2-3.9x).
        Collective::Scan if team_size <= 8 || bytes >= 32 * 1024 => Algorithm::Linear,
        Collective::Scan => Algorithm::RecursiveDoubling,
        // At 8 ranks the 4-nomial tree of puts beats the binomial tree from 256 KiB (1 MiB:
        // 1.09-1.13x in every run; the binomial tree beat the root's puts by 1.2x); at 4
        // ranks the binomial tree beats the root's puts from 1 MiB (142 µs against 182).
        Collective::BroadcastTo if team_size > 4 && bytes >= 256 * 1024 => Algorithm::Knomial(4),
        Collective::BroadcastTo if team_size > 2 && bytes >= 1 << 20 => Algorithm::Knomial(2),
        Collective::BroadcastTo | Collective::ScatterTo | Collective::GatherTo => Algorithm::Flat,
    }
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

    /// The model's crowded-host rule: small broadcasts among 3-4 members go along a
    /// chain only where ranks share cores; larger teams, larger messages and hosts with a
    /// core per rank keep the tree.
    #[test]
    fn small_broadcasts_chain_only_on_crowded_hosts_of_few_members() {
        let bcast =
            |n, bytes, crowded| model_algorithm(Collective::Broadcast, n, bytes, false, crowded);
        assert_eq!(bcast(4, 8, true), Algorithm::Chain);
        assert_eq!(bcast(3, 256, true), Algorithm::Chain);
        assert_eq!(bcast(4, 8, false), Algorithm::Binomial);
        assert_eq!(bcast(4, 512, true), Algorithm::Binomial);
        assert_eq!(bcast(8, 8, true), Algorithm::Binomial);
        assert_eq!(bcast(2, 8, true), Algorithm::Binomial);
    }

    /// The other crowded-host rules: the flat barrier among 5-8 members, the binomial
    /// scatter of 8 B among 4 or more, the binomial broadcast up to 32 KiB where long
    /// messages are read directly; elsewhere the defaults.
    #[test]
    fn crowded_hosts_take_the_flat_barrier_and_small_trees() {
        let model = |op, n, bytes, crowded| model_algorithm(op, n, bytes, false, crowded);
        use Collective::{Barrier, Scatter};
        assert_eq!(model(Barrier, 8, 0, true), Algorithm::Flat);
        assert_eq!(model(Barrier, 5, 0, true), Algorithm::Flat);
        assert_eq!(model(Barrier, 4, 0, true), Algorithm::Dissemination);
        assert_eq!(model(Barrier, 16, 0, true), Algorithm::Dissemination);
        assert_eq!(model(Barrier, 8, 0, false), Algorithm::Dissemination);
        assert_eq!(model(Scatter, 8, 8, true), Algorithm::Binomial);
        assert_eq!(model(Scatter, 4, 8, true), Algorithm::Binomial);
        assert_eq!(model(Scatter, 8, 64, true), Algorithm::Flat);
        assert_eq!(model(Scatter, 2, 8, true), Algorithm::Flat);
        assert_eq!(model(Scatter, 8, 8, false), Algorithm::Flat);
        let bcast =
            |n, bytes, crowded| model_algorithm(Collective::Broadcast, n, bytes, true, crowded);
        assert_eq!(bcast(8, 32 * 1024, true), Algorithm::Binomial);
        assert_eq!(bcast(8, 32 * 1024, false), Algorithm::Flat);
        assert_eq!(bcast(8, 256 * 1024, true), Algorithm::Flat);
    }

    /// Small scans at 2 members take recursive doubling; elsewhere the chain.
    #[test]
    fn small_scans_of_two_members_double() {
        let scan = |n, bytes| default_algorithm(Collective::Scan, n, bytes);
        assert_eq!(scan(2, 8), Algorithm::RecursiveDoubling);
        assert_eq!(scan(2, 512), Algorithm::Linear);
        assert_eq!(scan(4, 8), Algorithm::Linear);
    }

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
            .contains("known: "));
    }
}
