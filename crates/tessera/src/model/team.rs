//! Teams and their collective operations.
//!
//! A [`Team`] is an ordered set of ranks that perform collectives together: the world,
//! or any subset made by [`Team::split`] (and [`Team::grid`] for the rows and columns of a
//! process grid). Teams nest: a team can be split again. Creating a team is collective
//! over its parent.
//!
//! Every operation comes in several algorithms ([`Algorithm`]). A tuning table
//! (`tessera tune`), else a documented model ([`default_algorithm`]), picks one from the
//! team size and message size. `TESSERA_COLL_<OPERATION>=<algorithm>` (for example
//! `TESSERA_COLL_ALLREDUCE=ring`) or [`Team::with_algorithm`] forces one. Data moves as
//! signalling puts into per-member mailboxes (see the `channel` module), so the
//! collectives work on any conduit. On the mpi conduit every team also has a communicator
//! of its own, and [`Algorithm::Native`] runs MPI's collective on it; the model uses it
//! for teams that span hosts.
//!
//! Semantics: operations are blocking, except the `*_to_nb` single-address forms
//! ([`CollHandle`]) and the `*_nb` forms of the mailbox operations ([`CollRequest`]), and
//! every member must call the same operations in the same order with matching arguments (roots, counts, operation). Mismatched lengths are
//! detected and reported. Reduction operations must be associative and commutative
//! (floating-point results may differ in the last bits between algorithms). A built-in
//! operation that does not apply to the element type is refused before anything moves. A
//! user operation that fails mid-way ends the job: its partners would otherwise wait for
//! it (the watchdog, `TESSERA_WAIT_TIMEOUT`, names them).
//!
//! This module must never touch another rank's memory except through the channel.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;
use std::rc::Rc;
use std::str::FromStr;

use bytemuck::Pod;

use super::channel::{area_len, CallGuard, Channel, Incoming, Outgoing, DEFAULT_CHUNK};
use super::ops::{Combine, Op, Reducible};
use super::schedule::{
    Buf, Builder, Checked, Local, NativePending, Pending, Reducer, Reserved, Schedule,
};
use super::signature::{Form, Reduction as SigReduction, Signature};
use super::tuning::{self, Rules};
use crate::conduit::{NativeCall, NativeOp, Reduction};
use crate::core::native::NativeGroup;
use crate::error::CoreError;
use crate::{Context, GlobalPtr, Result};

/// The blocking single-address form `$name` and its nonblocking twin `$nb`, both thin
/// wrappers of `$op(nb, ...)`, which holds the operation's one implementation.
macro_rules! single_address_pair {
    ($(#[$doc:meta])* $name:ident, $nb:ident, $op:ident, ($($arg:ident: $ty:ty),*)) => {
        $(#[$doc])*
        pub fn $name<T: Pod>(&self, $($arg: $ty),*) -> Result<()> {
            self.$op(false, $($arg),*).map(drop)
        }

        #[doc = concat!("Nonblocking [`Team::", stringify!($name), "`]: the puts are issued before it")]
        /// returns and the handle completes the exit synchronisation. Needs entry
        /// [`SyncMode::No`] and exit `No` or `My` (see [`Team::with_sync`]).
        pub fn $nb<T: Pod>(&self, $($arg: $ty),*) -> Result<CollHandle<'a>> {
            Ok(self
                .$op(true, $($arg),*)?
                .expect("a nonblocking call returns a handle"))
        }
    };
}

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
type Forced = [Option<Algorithm>; 9];

/// Forced algorithms, from `TESSERA_COLL_*` and [`Team::with_algorithm`].
fn forced_from_env() -> Result<Forced> {
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

/// A team of ranks that performs collectives together. See the [module docs](self).
///
/// ```
/// use tessera::{Job, Op, Team};
/// Job::threads(4).segment(8 << 20).run(|ctx| {
///     let world = Team::world(ctx)?;
///     let total = world.allreduce_value(ctx.rank() as u64 + 1, Op::Sum)?;
///     assert_eq!(total, 10);
///     let (row, col) = world.grid(2, 2)?;
///     assert_eq!(row.allreduce_value(1u32, Op::Sum)?, 2);
///     assert_eq!(col.size(), 2);
///     Ok(())
/// }).unwrap();
/// ```
#[derive(Clone)]
pub struct Team<'a> {
    ctx: &'a Context,
    members: Rc<Vec<usize>>,
    me: usize,
    channel: Rc<Channel>,
    /// Algorithms forced per operation (by `TESSERA_COLL_*` or [`Team::with_algorithm`]),
    /// in [`Collective::ALL`] order.
    forced: Forced,
    /// The tuning table's rules for this team's size, per operation, if a table is in
    /// force (see [`crate::model::tuning`]); resolved when the team is made.
    tuned: Option<Rc<[Option<Rules>; 9]>>,
    /// Synchronisation of the single-address forms.
    sync: DataSync,
    /// Counters of the nonblocking single-address forms in flight.
    nb: Rc<RefCell<NonblockingState>>,
    /// The nonblocking mailbox collectives in flight, and the results of finished ones.
    schedules: Rc<RefCell<Schedules>>,
    /// The team's group in the conduit's own collectives, where it has them.
    native: Option<Rc<NativeGroup<'a>>>,
    /// Some member's segment is not mapped here (another host). Every member agrees: if
    /// two members sit on different hosts, each member is on a different host from one
    /// of them.
    spans_hosts: bool,
    /// When the last copy of the team goes, leaves the end-of-job check of its inbox.
    _auditor: Rc<Auditor<'a>>,
}

/// Hands a team's inbox to the end-of-job check when the team is dropped: a message some
/// member sent that this member never received means the members' collective calls did
/// not match (a broadcast whose roots differed, a call one member skipped), which the
/// job then reports instead of ending with wrong results.
struct Auditor<'a> {
    ctx: &'a Context,
    channel: Rc<Channel>,
}

impl Drop for Auditor<'_> {
    fn drop(&mut self) {
        let audit = self.channel.audit();
        self.ctx.at_end_of_job(Box::new(move |ctx: &Context| {
            let senders = audit.unreceived(ctx)?;
            if senders.is_empty() {
                return Ok(());
            }
            Err(CoreError::CollectiveMismatch(format!(
                "world rank(s) {senders:?} sent world rank {} team messages it never received",
                ctx.rank()
            ))
            .into())
        }));
    }
}

/// Per member: "landed" messages still to send to it, expected from it, received from it.
/// Messages between a pair arrive in order and all look alike, so counts are enough: the
/// k-th expected message from a source is the k-th one it sent.
#[derive(Clone, Debug, Default)]
struct NonblockingState {
    unsent: Vec<u64>,
    expected: Vec<u64>,
    received: Vec<u64>,
}

/// The nonblocking mailbox collectives of a team: in flight in start order, and the
/// outputs of finished ones until their requests take them.
#[derive(Default)]
struct Schedules {
    reserved: Reserved,
    pending: std::collections::VecDeque<(u64, Box<dyn Pending>)>,
    finished: HashMap<u64, Box<dyn std::any::Any>>,
    next: u64,
}

impl Schedules {
    /// Whether some collective in flight moves messages on the team's channel.
    fn on_channel(&self) -> bool {
        self.pending.iter().any(|(_, p)| p.on_channel())
    }
}

/// A nonblocking collective in progress ([`Team::allreduce_nb`] and the other `*_nb`
/// forms of the blocking operations). It owns copies of its buffers, so it borrows
/// nothing from the caller: several may be in flight on one team and waited for in any
/// order. Every `test` or `wait` on any of a team's requests advances all of them, in the
/// order they were started. Wait for all of them, on every member, before the team's
/// next blocking collective. Dropping a request waits for it.
///
/// Where the blocking call would run [`Algorithm::Native`] (by default, on a team that
/// spans hosts on the mpi conduit), the request is MPI's own nonblocking collective
/// (`MPI_Iallreduce`, ...), which also progresses inside MPI (with
/// `TESSERA_MPI_PROGRESS`, while the rank computes); otherwise it is a schedule of the
/// team's mailbox messages, which moves when a request of the team is tested.
///
/// ```
/// use tessera::{Job, Op, Team};
/// Job::threads(3).segment(8 << 20).run(|ctx| {
///     let world = Team::world(ctx)?;
///     let me = ctx.rank() as u64;
///     let sum = world.allreduce_nb(&[me, 1], Op::Sum)?;
///     let all = world.allgather_nb(&[me])?;
///     // ... compute while they progress (each test advances both) ...
///     assert_eq!(all.wait()?, vec![0, 1, 2]);
///     assert_eq!(sum.wait()?, vec![3, 3]);
///     Ok(())
/// }).unwrap();
/// ```
#[must_use = "a nonblocking collective's result is only there once its request is waited on"]
pub struct CollRequest<'a, T> {
    team: Team<'a>,
    ticket: u64,
    taken: bool,
    _output: std::marker::PhantomData<T>,
}

impl<T: Pod> CollRequest<'_, T> {
    /// Leave the operation to the team, which finishes it with the others; nobody waits
    /// for it and its output is not kept (checked mode's agreement checks).
    fn detach(mut self) {
        self.taken = true;
    }

    /// Block until the operation is complete and return this member's output (empty where
    /// the operation has none: a barrier, or a rooted gather or reduce off the root).
    pub fn wait(mut self) -> Result<Vec<T>> {
        self.finish()?;
        self.taken = true;
        let output = self
            .team
            .schedules
            .borrow_mut()
            .finished
            .remove(&self.ticket)
            .expect("finished");
        Ok(*output
            .downcast::<Vec<T>>()
            .expect("a request's output has its element type"))
    }
}

impl<T> CollRequest<'_, T> {
    /// Whether the operation is complete, advancing every request of the team once.
    pub fn test(&mut self) -> Result<bool> {
        self.team.advance_schedules()?;
        Ok(self
            .team
            .schedules
            .borrow()
            .finished
            .contains_key(&self.ticket))
    }

    fn finish(&mut self) -> Result<()> {
        let ctx = self.team.ctx;
        wait_done(ctx, || self.test())
    }
}

impl<T> Drop for CollRequest<'_, T> {
    fn drop(&mut self) {
        if self.taken {
            return;
        }
        let _ = self.finish();
        self.team
            .schedules
            .borrow_mut()
            .finished
            .remove(&self.ticket);
    }
}

/// Wait until `test` reports a nonblocking collective complete: one test, then the core's
/// wait (progress, watchdog).
fn wait_done(ctx: &Context, mut test: impl FnMut() -> Result<bool>) -> Result<()> {
    if test()? {
        return Ok(());
    }
    ctx.wait_until("a nonblocking collective", test, || {
        "a team member has not started the same nonblocking collectives in the same order".into()
    })
}

/// A nonblocking single-address collective in progress (see [`Team::broadcast_to_nb`]).
/// Several may be in flight on one team. Wait for all of them, on every member, before
/// the team's next blocking collective: their messages share the team's streams. A
/// member that starts one with its own handles still open gets an error instead (a
/// member that has already waited cannot tell, so the rule is the program's).
/// Dropping a handle waits for it.
///
/// ```
/// use tessera::{Job, SyncMode, Team};
/// Job::threads(2).segment(8 << 20).run(|ctx| {
///     let world = Team::world(ctx)?;
///     let loose = world.with_sync(SyncMode::No, SyncMode::My);
///     let buf = ctx.alloc_collective::<u64>(4)?;
///     let dsts = world.symmetric(buf);
///     // Two broadcasts in flight at once, into different halves.
///     let a = loose.broadcast_to_nb(0, &[1, 2], &dsts, 2)?;
///     let b = loose.broadcast_to_nb(1, &[3, 4], &[dsts[0].add(2), dsts[1].add(2)], 2)?;
///     // ... compute ...
///     b.wait()?;
///     a.wait()?;
///     let mut got = [0u64; 4];
///     ctx.get(buf, &mut got)?;
///     assert_eq!(got, [1, 2, 3, 4]);
///     world.barrier()?;
///     Ok(())
/// }).unwrap();
/// ```
#[must_use = "a nonblocking collective is only known complete once its handle is waited on"]
pub struct CollHandle<'a> {
    team: Team<'a>,
    /// (source, count): complete once that many "landed" messages came from each source.
    need: Vec<(usize, u64)>,
    open: bool,
}

impl CollHandle<'_> {
    /// Whether the operation is complete (this member's destination holds its data and
    /// its own messages are sent), advancing every nonblocking collective of the team once.
    pub fn test(&mut self) -> Result<bool> {
        if !self.open {
            return Ok(true);
        }
        self.team.progress_nonblocking()?;
        let st = self.team.nb.borrow();
        let done = self.need.iter().all(|&(s, k)| st.received[s] >= k)
            && st.unsent.iter().all(|&u| u == 0);
        drop(st);
        if done {
            self.open = false;
            self.team.channel.end_nonblocking();
        }
        Ok(done)
    }

    /// Block until the operation is complete.
    pub fn wait(mut self) -> Result<()> {
        self.finish()
    }

    fn finish(&mut self) -> Result<()> {
        let ctx = self.team.ctx;
        wait_done(ctx, || self.test())
    }
}

impl Drop for CollHandle<'_> {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}

/// How much a single-address collective (`broadcast_to`, `scatter_to`, `gather_to`,
/// `allgather_to`, `exchange_to`) synchronises, on entry and on exit (UPC's
/// `UPC_IN_*SYNC` / `UPC_OUT_*SYNC`). A *source* is a member that puts into this member's
/// destination; a *target* is a member whose destination this member puts into.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SyncMode {
    /// Entry: data may be written into any destination as soon as any member has entered,
    /// so every destination must be ready (and not in use) before anyone enters. Exit: a
    /// member returns once its own puts are issued; its destination may not hold the data
    /// yet, so read it only after a later synchronisation (a barrier).
    No,
    /// Entry: a destination is written only after its owner has entered (each member
    /// tells its sources). Exit: a member returns once its own destination holds all its
    /// data and its own puts are done.
    My,
    /// Entry: nothing is written until every member has entered (a barrier). Exit: as
    /// `My`, then a barrier, so every destination is complete when anyone returns.
    All,
}

/// Entry and exit synchronisation of the single-address forms; the default is
/// `{ input: All, output: My }`. Set with [`Team::with_sync`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DataSync {
    pub input: SyncMode,
    pub output: SyncMode,
}

impl Default for DataSync {
    fn default() -> Self {
        DataSync {
            input: SyncMode::All,
            output: SyncMode::My,
        }
    }
}

impl<'a> Team<'a> {
    /// The team of every rank. Collective over all ranks; create it once and reuse it
    /// (each team keeps a mailbox area in every member's segment).
    pub fn world(ctx: &'a Context) -> Result<Team<'a>> {
        let n = ctx.ranks();
        let area = ctx.alloc_collective::<u8>(area_len(n, DEFAULT_CHUNK))?;
        zero(ctx, area, area_len(n, DEFAULT_CHUNK))?;
        ctx.barrier()?; // nobody writes into a mailbox before its owner has cleared it
        let areas = (0..n).map(|r| area.on(r)).collect();
        let native = NativeGroup::world(ctx)?;
        Team::build(ctx, (0..n).collect(), ctx.rank(), areas, native)
    }

    fn build(
        ctx: &'a Context,
        members: Vec<usize>,
        me: usize,
        areas: Vec<GlobalPtr<u8>>,
        native: Option<NativeGroup<'a>>,
    ) -> Result<Team<'a>> {
        let size = members.len();
        let spans_hosts = members
            .iter()
            .any(|&r| !ctx.is_addressable(GlobalPtr::<u8>::new(r, 0)));
        let channel = Rc::new(Channel::new(me, areas, DEFAULT_CHUNK));
        let team = Team {
            ctx,
            members: Rc::new(members),
            me,
            _auditor: Rc::new(Auditor {
                ctx,
                channel: channel.clone(),
            }),
            channel,
            forced: forced_from_env()?,
            tuned: tuning::in_force()?
                .map(|table| Rc::new(Collective::ALL.map(|op| table.rules_for(op, size)))),
            sync: DataSync::default(),
            nb: Rc::new(RefCell::new(NonblockingState {
                unsent: vec![0; size],
                expected: vec![0; size],
                received: vec![0; size],
            })),
            native: native.map(Rc::new),
            schedules: Rc::new(RefCell::new(Schedules::default())),
            spans_hosts,
        };
        if team.forced.contains(&Some(Algorithm::Native)) {
            team.check_available(Algorithm::Native)?;
        }
        Ok(team)
    }

    /// The algorithm a call of `op` with `bytes` per member would use on this team: the
    /// forced one, else the tuning table's, else the model's. (A call that cannot use
    /// [`Algorithm::Native`], such as a user reduction, falls back to the model's choice
    /// instead; this reports what an eligible call gets.)
    ///
    /// ```
    /// use tessera::{Algorithm, Collective, Job, Team};
    /// Job::threads(2).segment(8 << 20).run(|ctx| {
    ///     let world = Team::world(ctx)?;
    ///     let ring = world.with_algorithm(Collective::Allreduce, Algorithm::Ring)?;
    ///     assert_eq!(ring.algorithm_for(Collective::Allreduce, 8), Algorithm::Ring);
    ///     Ok(())
    /// }).unwrap();
    /// ```
    pub fn algorithm_for(&self, op: Collective, bytes: usize) -> Algorithm {
        self.choose(op, bytes, true)
    }

    /// The algorithms this team can run `op` with: the operation's own
    /// ([`Collective::algorithms`]) and, on a conduit with collectives of its own (mpi),
    /// [`Algorithm::Native`].
    ///
    /// ```
    /// use tessera::{Algorithm, Collective, Job, Team};
    /// Job::threads(2).segment(8 << 20).run(|ctx| {
    ///     let world = Team::world(ctx)?;
    ///     let algs = world.algorithms(Collective::Allreduce);
    ///     assert!(algs.contains(&Algorithm::Ring));
    ///     assert!(!algs.contains(&Algorithm::Native)); // threads has no MPI
    ///     Ok(())
    /// }).unwrap();
    /// ```
    pub fn algorithms(&self, op: Collective) -> Vec<Algorithm> {
        let mut algs = op.algorithms().to_vec();
        if self.native.is_some() {
            algs.push(Algorithm::Native);
        }
        algs
    }

    /// An error unless this team can run `alg` at all.
    fn check_available(&self, alg: Algorithm) -> Result<()> {
        if alg == Algorithm::Native && self.native.is_none() {
            return Err(CoreError::Invalid(format!(
                "algorithm native calls the conduit's own collectives, and the {} conduit has none; run on the mpi conduit (--conduit mpi) or choose another algorithm",
                self.ctx.conduit_kind()
            ))
            .into());
        }
        Ok(())
    }

    /// This rank's index in the team.
    pub fn rank(&self) -> usize {
        self.me
    }

    /// Number of members.
    pub fn size(&self) -> usize {
        self.members.len()
    }

    /// The world rank of team member `team_rank`.
    pub fn world_rank(&self, team_rank: usize) -> usize {
        self.members[team_rank]
    }

    /// The team rank of world rank `world_rank`, if it is a member.
    pub fn team_rank(&self, world_rank: usize) -> Option<usize> {
        self.members.iter().position(|&r| r == world_rank)
    }

    /// The context this team runs on.
    pub fn context(&self) -> &'a Context {
        self.ctx
    }

    /// This team with `algorithm` forced for `op` (for experiments and tests). The copy
    /// shares the team's channel, so it must be used in the same collective order.
    pub fn with_algorithm(&self, op: Collective, algorithm: Algorithm) -> Result<Team<'a>> {
        check_supported(op, algorithm)?;
        self.check_available(algorithm)?;
        let mut forced = self.forced;
        forced[op.index()] = Some(algorithm);
        Ok(Team {
            forced,
            ..self.clone()
        })
    }

    /// This team with the single-address forms synchronising as `input` on entry and
    /// `output` on exit (see [`SyncMode`]). The copy shares the team's channel, so it must
    /// be used in the same collective order.
    ///
    /// ```
    /// use tessera::{Job, SyncMode, Team};
    /// Job::threads(2).segment(8 << 20).run(|ctx| {
    ///     let world = Team::world(ctx)?;
    ///     let buf = ctx.alloc_collective::<u64>(2)?;
    ///     // Destinations are ready (nothing else uses buf): no entry barrier; read after
    ///     // our own barrier.
    ///     let loose = world.with_sync(SyncMode::No, SyncMode::No);
    ///     loose.allgather_to(&[ctx.rank() as u64], &world.symmetric(buf))?;
    ///     world.barrier()?;
    ///     let mut got = [9u64; 2];
    ///     ctx.get(buf, &mut got)?;
    ///     assert_eq!(got, [0, 1]);
    ///     Ok(())
    /// }).unwrap();
    /// ```
    pub fn with_sync(&self, input: SyncMode, output: SyncMode) -> Team<'a> {
        Team {
            sync: DataSync { input, output },
            ..self.clone()
        }
    }

    /// Split into sub-teams: members passing the same `colour` form a team, ordered by
    /// `key` (ties by rank in this team). `None` joins no team and returns `None`.
    /// Collective over this team.
    pub fn split(&self, colour: Option<u32>, key: u64) -> Result<Option<Team<'a>>> {
        let n = self.size();
        let mine = [colour.map_or(u64::MAX, u64::from), key];
        let mut all = vec![0u64; 2 * n];
        self.allgather(&mine, &mut all)?;
        let mut group: Vec<(u64, usize)> = (0..n)
            .filter(|&i| colour.is_some() && all[2 * i] == mine[0])
            .map(|i| (all[2 * i + 1], i))
            .collect();
        group.sort_unstable();
        // Each member clears a mailbox area sized for its new team, then publishes it.
        let area = match colour {
            Some(_) => {
                let len = area_len(group.len(), DEFAULT_CHUNK);
                let area = self.ctx.alloc_local::<u8>(len)?;
                zero(self.ctx, area, len)?;
                Some(area)
            }
            None => None,
        };
        let published = area.map_or([u64::MAX, 0], |a| [a.rank() as u64, a.offset()]);
        let mut areas = vec![0u64; 2 * n];
        self.allgather(&published, &mut areas)?;
        let me = group.iter().position(|&(_, i)| i == self.me);
        // The conduit's group for the new team: the colour is the group's first member (in
        // this team), the key its place in the order just computed, so both agree.
        let native = match &self.native {
            Some(parent) => {
                parent.split(me.map(|_| group[0].1 as u32), me.map_or(0, |m| m as u32))?
            }
            None => None,
        };
        let Some(me) = me else {
            return Ok(None);
        };
        let members = group.iter().map(|&(_, i)| self.members[i]).collect();
        let areas = group
            .iter()
            .map(|&(_, i)| GlobalPtr::new(areas[2 * i] as usize, areas[2 * i + 1]))
            .collect();
        let mut team = Team::build(self.ctx, members, me, areas, native)?;
        team.forced = self.forced;
        Ok(Some(team))
    }

    /// The team of `members` (indices in this team, in the new team's order), made by
    /// those members alone: nobody else takes part, and nothing is allocated. This is how
    /// OpenSHMEM's active sets (a start, a stride and a size, named by the members only)
    /// run on Tessera's collectives. The new team shares this team's message streams, so
    /// its collectives and this team's must be called in the same order by the members
    /// they share (as any overlapping collectives must), and nonblocking collectives of
    /// one must be finished before the other starts any. Every member of `members` must
    /// call it, and this member must be one.
    ///
    /// ```
    /// use tessera::{Job, Op, Team};
    /// Job::threads(4).segment(8 << 20).run(|ctx| {
    ///     let world = Team::world(ctx)?;
    ///     if ctx.rank() % 2 == 0 {
    ///         // Ranks 0 and 2 only; 1 and 3 go on without them.
    ///         let evens = world.subset(&[0, 2])?;
    ///         assert_eq!(evens.allreduce_value(ctx.rank() as u64, Op::Sum)?, 2);
    ///     }
    ///     world.barrier()?;
    ///     Ok(())
    /// }).unwrap();
    /// ```
    pub fn subset(&self, members: &[usize]) -> Result<Team<'a>> {
        let n = self.size();
        let mut seen = vec![false; n];
        for &m in members {
            if m >= n || std::mem::replace(&mut seen[m], true) {
                return Err(CoreError::Invalid(format!(
                    "subset: member {m} is {} (this team has members 0..{n}, each at most once)",
                    if m >= n {
                        "not a member"
                    } else {
                        "listed twice"
                    }
                ))
                .into());
            }
        }
        let Some(me) = members.iter().position(|&m| m == self.me) else {
            return Err(CoreError::Invalid(format!(
                "subset: this member ({}) is not in {members:?}; only the subset's members make it",
                self.me
            ))
            .into());
        };
        let size = members.len();
        Ok(Team {
            ctx: self.ctx,
            members: Rc::new(members.iter().map(|&m| self.members[m]).collect()),
            me,
            channel: Rc::new(self.channel.subset(members)),
            forced: self.forced,
            tuned: tuning::in_force()?
                .map(|table| Rc::new(Collective::ALL.map(|op| table.rules_for(op, size)))),
            sync: self.sync,
            nb: Rc::new(RefCell::new(NonblockingState {
                unsent: vec![0; size],
                expected: vec![0; size],
                received: vec![0; size],
            })),
            schedules: Rc::new(RefCell::new(Schedules::default())),
            native: None,
            spans_hosts: self.spans_hosts,
            _auditor: self._auditor.clone(),
        })
    }

    /// The row and column teams of a `rows × cols` process grid laid out row-major over
    /// this team (member r sits at row r / cols, column r % cols). Collective.
    pub fn grid(&self, rows: usize, cols: usize) -> Result<(Team<'a>, Team<'a>)> {
        if rows * cols != self.size() {
            return Err(CoreError::Invalid(format!(
                "a {rows}×{cols} grid needs {} members; this team has {}",
                rows * cols,
                self.size()
            ))
            .into());
        }
        let (row, col) = (self.me / cols, self.me % cols);
        let row_team = self.split(Some(row as u32), col as u64)?.expect("in a row");
        let col_team = self
            .split(Some(col as u32), row as u64)?
            .expect("in a column");
        Ok((row_team, col_team))
    }

    /// The algorithm for `op` with `bytes` per member: forced, else the tuning table's,
    /// else the model's. `native` only where this team has it and the call can use it
    /// (`native_ok`: a built-in reduction on a primitive type, equal blocks; and a count
    /// MPI can express); otherwise the model decides.
    fn choose(&self, op: Collective, bytes: usize, native_ok: bool) -> Algorithm {
        let alg = match self.forced[op.index()] {
            Some(alg) => alg,
            None => self
                .tuned
                .as_ref()
                .and_then(|rules| tuning::rule_for(rules[op.index()].as_deref()?, bytes))
                .unwrap_or_else(|| self.model(op, bytes)),
        };
        let fits = bytes.saturating_mul(self.size()) <= i32::MAX as usize;
        let alg = if alg == Algorithm::Native && !(native_ok && fits && self.native.is_some()) {
            default_algorithm(op, self.size(), bytes)
        } else {
            alg
        };
        self.channel.record_algorithm(alg);
        alg
    }

    /// The model's choice: on a team that spans hosts and has the conduit's own
    /// collectives, those (MPI's beat messages built from one-sided operations between
    /// hosts at every measured size, docs/PERFORMANCE.md); otherwise
    /// [`default_algorithm`].
    fn model(&self, op: Collective, bytes: usize) -> Algorithm {
        if self.spans_hosts && self.native.is_some() {
            Algorithm::Native
        } else {
            default_algorithm(op, self.size(), bytes)
        }
    }

    /// Run `call` with the conduit's own collectives (after `choose` said `Native`).
    fn native(&self, op: NativeOp, src: &[u8], dst: &mut [u8]) -> Result<()> {
        self.native
            .as_ref()
            .expect("choose returns Native only where the team has a group")
            .run(NativeCall { op, src, dst })
    }

    // ----- message helpers ------------------------------------------------------------

    fn send<T: Pod>(&self, to: usize, data: &[T]) -> Result<()> {
        self.channel.send(self.ctx, to, bytemuck::cast_slice(data))
    }

    fn recv<T: Pod>(&self, from: usize, out: &mut [T]) -> Result<()> {
        self.channel
            .recv(self.ctx, from, bytemuck::cast_slice_mut(out))
    }

    fn sendrecv<T: Pod>(&self, to: usize, data: &[T], from: usize, out: &mut [T]) -> Result<()> {
        self.channel.sendrecv(
            self.ctx,
            to,
            bytemuck::cast_slice(data),
            from,
            bytemuck::cast_slice_mut(out),
        )
    }

    /// Start a blocking call: every message it sends carries `call` (the outermost call's,
    /// if this one is nested inside another collective of the team), until the guard is
    /// dropped.
    fn begin_call(&self, call: Signature) -> CallGuard {
        self.channel.enter_call(call)
    }

    /// Start a blocking collective: record its signature for its messages, and in checked
    /// mode make sure every member called the same collective with matching arguments,
    /// naming the members that differ (one ring exchange of a descriptor). Runs before any
    /// local validation, so a member with a bad argument cannot leave the others waiting.
    fn check_call(
        &self,
        op: Collective,
        root: Option<usize>,
        count: usize,
        elem: usize,
        reduction: Option<Op>,
    ) -> Result<CallGuard> {
        let guard = self.begin_call(Signature::new(
            op,
            Form::Blocking,
            root,
            count,
            elem,
            reduction.map(SigReduction::Builtin),
        ));
        if !self.ctx.checked_mode() || self.size() == 1 {
            return Ok(guard);
        }
        let mine = signature(op, root, count, elem, reduction);
        let n = self.size();
        let mut all = vec![0u64; 5 * n];
        all[5 * self.me..5 * self.me + 5].copy_from_slice(&mine);
        let (right, left) = ((self.me + 1) % n, (self.me + n - 1) % n);
        let call = self.channel.call();
        self.channel.set_call(Signature::AGREEMENT);
        for s in 0..n - 1 {
            let out = (self.me + n - s) % n;
            let inb = (self.me + 2 * n - s - 1) % n;
            let moved = self.sendrecv_within(
                right,
                left,
                &mut all,
                5 * out..5 * out + 5,
                5 * inb..5 * inb + 5,
            );
            if moved.is_err() {
                self.channel.set_call(call);
                moved?;
            }
        }
        self.channel.set_call(call);
        agree(&self.members, &all)?;
        Ok(guard)
    }

    /// Start a blocking collective with a user reduction (no checked-mode agreement: the
    /// operation cannot be compared).
    fn begin_user<T>(&self, op: Collective, root: Option<usize>, count: usize) -> CallGuard {
        self.begin_call(Signature::new(
            op,
            Form::Blocking,
            root,
            count,
            std::mem::size_of::<T>(),
            Some(SigReduction::User),
        ))
    }

    /// In checked mode, start the agreement check of a nonblocking call: a ring allgather
    /// of every member's call, as a schedule ahead of the call's own, whose last step
    /// fails every later `test` or `wait` on this team with the calls named if they differ.
    /// Before any local check of the arguments, so that every member's call goes out.
    fn check_nb<T>(
        &self,
        op: Collective,
        root: Option<usize>,
        count: usize,
        reduction: Option<Op>,
    ) -> Result<()> {
        self.channel.set_call(Signature::new(
            op,
            Form::Nonblocking,
            root,
            count,
            std::mem::size_of::<T>(),
            reduction.map(SigReduction::Builtin),
        ));
        if !self.ctx.checked_mode() || self.size() == 1 {
            return Ok(());
        }
        let mine = signature(op, root, count, std::mem::size_of::<T>(), reduction);
        let (n, me) = (self.size(), self.me);
        let members = self.members.clone();
        let verify = Box::new(move |all: &[u64]| agree(&members, all));
        let mut st = self.schedules.borrow_mut();
        self.reserve_from_channel(&mut st)?;
        let schedule = allgather_rounds(&mut st.reserved, self.channel.chunk(), &mine, n, me)
            .carrying(Signature::AGREEMENT);
        drop(st);
        self.enqueue::<u64>(Box::new(Checked::new(schedule, verify)))
            .map(|request| request.detach())
    }

    /// The start of a rooted operation without a reduction: checked-mode agreement, then a
    /// valid root.
    fn enter_rooted<T>(&self, op: Collective, root: usize, count: usize) -> Result<CallGuard> {
        let guard = self.check_call(op, Some(root), count, std::mem::size_of::<T>(), None)?;
        self.check_root(root)?;
        Ok(guard)
    }

    /// The start of an operation with a built-in reduction: checked-mode agreement, then
    /// refuse an operation that does not apply to the type (before anything moves).
    fn enter_reduction<T: Reducible>(
        &self,
        op: Collective,
        root: Option<usize>,
        count: usize,
        reduction: Op,
    ) -> Result<CallGuard> {
        let guard = self.check_call(op, root, count, std::mem::size_of::<T>(), Some(reduction))?;
        check_op::<T>(reduction)?;
        Ok(guard)
    }

    /// Send `buf[out]` to `to` while receiving `buf[inb]` from `from`, straight from and
    /// into the buffer (the ranges are disjoint; no copy of the outgoing block).
    fn sendrecv_within<T: Pod>(
        &self,
        to: usize,
        from: usize,
        buf: &mut [T],
        out: std::ops::Range<usize>,
        inb: std::ops::Range<usize>,
    ) -> Result<()> {
        let (send, recv) = if out.end <= inb.start {
            let (lo, hi) = buf.split_at_mut(inb.start);
            (&lo[out], &mut hi[..inb.len()])
        } else {
            debug_assert!(inb.end <= out.start, "overlapping ring blocks");
            let (lo, hi) = buf.split_at_mut(out.start);
            (&hi[..out.len()], &mut lo[inb])
        };
        self.sendrecv(to, send, from, recv)
    }

    /// The block each member gets of an all-to-all source of `len` elements, or an error
    /// naming `what` when `len` is not a multiple of the team size.
    fn block_of(&self, what: &str, len: usize) -> Result<usize> {
        let n = self.size();
        if !len.is_multiple_of(n) {
            return Err(CoreError::Invalid(format!(
                "{what}: src has {len} elements, not a multiple of the team size {n}"
            ))
            .into());
        }
        Ok(len / n)
    }

    fn check_root(&self, root: usize) -> Result<()> {
        if root >= self.size() {
            return Err(CoreError::Invalid(format!(
                "root {root} is not a member: this team has ranks 0..{}",
                self.size()
            ))
            .into());
        }
        Ok(())
    }

    // ----- barrier ----------------------------------------------------------------------

    /// Block until every member has entered the barrier.
    pub fn barrier(&self) -> Result<()> {
        let _call = self.check_call(Collective::Barrier, None, 0, 0, None)?;
        let n = self.size();
        match self.choose(Collective::Barrier, 0, true) {
            Algorithm::Native => self.native(NativeOp::Barrier, &[], &mut []),
            Algorithm::Flat => {
                if self.me == 0 {
                    let mut bufs: Vec<[u8; 0]> = vec![[]; n];
                    let mut recvs: Vec<Incoming> = bufs
                        .iter_mut()
                        .enumerate()
                        .skip(1)
                        .map(|(i, b)| Incoming::new(i, b))
                        .collect();
                    self.channel.transfer(self.ctx, &mut [], &mut recvs)?;
                    let mut sends: Vec<Outgoing> = (1..n).map(|i| Outgoing::new(i, &[])).collect();
                    self.channel.transfer(self.ctx, &mut sends, &mut [])
                } else {
                    self.channel.send(self.ctx, 0, &[])?;
                    self.channel.recv(self.ctx, 0, &mut [])
                }
            }
            _ => {
                let mut dist = 1;
                while dist < n {
                    self.channel.sendrecv(
                        self.ctx,
                        (self.me + dist) % n,
                        &[],
                        (self.me + n - dist) % n,
                        &mut [],
                    )?;
                    dist *= 2;
                }
                Ok(())
            }
        }
    }

    // ----- broadcast --------------------------------------------------------------------

    /// Copy `data` from member `root` to every member's `data`.
    pub fn broadcast<T: Pod>(&self, root: usize, data: &mut [T]) -> Result<()> {
        let _call = self.enter_rooted::<T>(Collective::Broadcast, root, data.len())?;
        let n = self.size();
        if n == 1 {
            return Ok(());
        }
        match self.choose(Collective::Broadcast, std::mem::size_of_val(data), true) {
            Algorithm::Native => self.native(
                NativeOp::Broadcast { root },
                &[],
                bytemuck::cast_slice_mut(data),
            ),
            Algorithm::Chain => {
                let rel = (self.me + n - root) % n;
                let (prev, next) = ((self.me + n - 1) % n, (self.me + 1) % n);
                let step = (DEFAULT_CHUNK / std::mem::size_of::<T>().max(1)).max(1);
                let mut start = 0;
                loop {
                    let end = (start + step).min(data.len());
                    if rel != 0 {
                        self.recv(prev, &mut data[start..end])?;
                    }
                    if rel != n - 1 {
                        self.send(next, &data[start..end])?;
                    }
                    start = end;
                    if start >= data.len() {
                        return Ok(());
                    }
                }
            }
            alg => {
                let radix = radix_of(alg, n);
                let tree = Knomial::new(radix, n, (self.me + n - root) % n);
                if let Some(parent) = tree.parent {
                    self.recv((parent + root) % n, data)?;
                }
                let children: Vec<usize> = tree.children.iter().map(|c| (c + root) % n).collect();
                let bytes: &[u8] = bytemuck::cast_slice(data);
                let mut sends: Vec<Outgoing> =
                    children.iter().map(|&c| Outgoing::new(c, bytes)).collect();
                self.channel.transfer(self.ctx, &mut sends, &mut [])
            }
        }
    }

    /// Broadcast one value from `root`.
    pub fn broadcast_value<T: Pod>(&self, root: usize, value: T) -> Result<T> {
        let mut v = [value];
        self.broadcast(root, &mut v)?;
        Ok(v[0])
    }

    // ----- reductions -------------------------------------------------------------------

    /// Reduce `src` over all members with `op` into `dst` on `root` (`dst` is untouched
    /// elsewhere and may be empty there).
    pub fn reduce<T: Reducible>(
        &self,
        root: usize,
        src: &[T],
        dst: &mut [T],
        op: Op,
    ) -> Result<()> {
        let _call = self.enter_reduction::<T>(Collective::Reduce, Some(root), src.len(), op)?;
        let combine = |a: &mut [T], b: &[T]| T::reduce(op, a, b);
        self.reduce_impl(root, src, dst, &combine, native_reduction::<T>(op))
    }

    /// [`Team::reduce`] with a user operation `combine(acc, other)` (associative and
    /// commutative) over any plain-old-data type.
    pub fn reduce_with<T: Pod>(
        &self,
        root: usize,
        src: &[T],
        dst: &mut [T],
        combine: &Combine<'_, T>,
    ) -> Result<()> {
        let _call = self.begin_user::<T>(Collective::Reduce, Some(root), src.len());
        self.reduce_impl(root, src, dst, combine, None)
    }

    /// Reduce with `combine`, or with the conduit's own reduction `native` where the
    /// algorithm is [`Algorithm::Native`].
    fn reduce_impl<T: Pod>(
        &self,
        root: usize,
        src: &[T],
        dst: &mut [T],
        combine: &Combine<'_, T>,
        native: Option<Reduction>,
    ) -> Result<()> {
        self.check_root(root)?;
        if self.me == root && dst.len() != src.len() {
            return Err(length_error("reduce", "dst", dst.len(), src.len()));
        }
        let n = self.size();
        let alg = self.choose(
            Collective::Reduce,
            std::mem::size_of_val(src),
            native.is_some(),
        );
        if let (Algorithm::Native, Some(reduction)) = (alg, native) {
            return self.native(
                NativeOp::Reduce { root, reduction },
                bytemuck::cast_slice(src),
                bytemuck::cast_slice_mut(dst),
            );
        }
        let tree = Knomial::new(radix_of(alg, n), n, (self.me + n - root) % n);
        let children: Vec<usize> = tree.children.iter().map(|&c| (c + root) % n).collect();
        let parent = tree.parent.map(|p| (p + root) % n);
        // Pipelined in segments of one mailbox chunk: a member receives segment k from
        // every child, combines it into its accumulator while it is in cache and passes it
        // up, so no member holds more than a segment per child beyond its accumulator.
        // The accumulator is `dst` on the root, `src` itself on a leaf, a copy elsewhere.
        let len = src.len();
        let seg = (DEFAULT_CHUNK / std::mem::size_of::<T>().max(1)).max(1);
        let mut segments = (0..len.div_ceil(seg).max(1)).map(|k| k * seg..((k + 1) * seg).min(len));
        if children.is_empty() {
            return match parent {
                Some(p) => segments.try_for_each(|r| self.send(p, &src[r])),
                None => {
                    dst.copy_from_slice(src); // a team of one
                    Ok(())
                }
            };
        }
        // The accumulator: `dst` on the root, a copy of `src` on an inner member.
        let mut own = Vec::new();
        let acc: &mut [T] = if parent.is_none() {
            dst.copy_from_slice(src);
            dst
        } else {
            own.extend_from_slice(src);
            &mut own
        };
        let width = seg.min(len).max(1);
        let mut scratch = vec![T::zeroed(); width * children.len()];
        for range in segments {
            let part = range.len();
            let mut recvs: Vec<Incoming> = children
                .iter()
                .zip(scratch.chunks_mut(width))
                .map(|(&c, b)| Incoming::new(c, bytemuck::cast_slice_mut(&mut b[..part])))
                .collect();
            self.channel.transfer(self.ctx, &mut [], &mut recvs)?;
            drop(recvs);
            for b in scratch.chunks(width) {
                combine(&mut acc[range.clone()], &b[..part])?;
            }
            if let Some(p) = parent {
                self.send(p, &acc[range])?;
            }
        }
        Ok(())
    }

    /// Reduce one value to `root`: `Some(result)` there, `None` elsewhere.
    pub fn reduce_value<T: Reducible>(&self, root: usize, value: T, op: Op) -> Result<Option<T>> {
        let mut out = [value];
        let dst: &mut [T] = if self.me == root { &mut out } else { &mut [] };
        self.reduce(root, &[value], dst, op)?;
        Ok((self.me == root).then_some(out[0]))
    }

    /// Reduce `src` over all members with `op`; every member gets the result in `dst`.
    pub fn allreduce<T: Reducible>(&self, src: &[T], dst: &mut [T], op: Op) -> Result<()> {
        let _call = self.enter_reduction::<T>(Collective::Allreduce, None, src.len(), op)?;
        let combine = |a: &mut [T], b: &[T]| T::reduce(op, a, b);
        self.allreduce_impl(src, dst, &combine, native_reduction::<T>(op))
    }

    /// [`Team::allreduce`] with a user operation.
    pub fn allreduce_with<T: Pod>(
        &self,
        src: &[T],
        dst: &mut [T],
        combine: &Combine<'_, T>,
    ) -> Result<()> {
        let _call = self.begin_user::<T>(Collective::Allreduce, None, src.len());
        self.allreduce_impl(src, dst, combine, None)
    }

    fn allreduce_impl<T: Pod>(
        &self,
        src: &[T],
        dst: &mut [T],
        combine: &Combine<'_, T>,
        native: Option<Reduction>,
    ) -> Result<()> {
        if dst.len() != src.len() {
            return Err(length_error("allreduce", "dst", dst.len(), src.len()));
        }
        let n = self.size();
        let bytes = std::mem::size_of_val(src);
        match self.choose(Collective::Allreduce, bytes, native.is_some()) {
            Algorithm::Native => self.native(
                NativeOp::Allreduce {
                    reduction: native.expect("choose allows native only with a reduction"),
                },
                bytemuck::cast_slice(src),
                bytemuck::cast_slice_mut(dst),
            ),
            Algorithm::ReduceBroadcast => {
                let single = self.with_forced(&[
                    (Collective::Reduce, Algorithm::Binomial),
                    (Collective::Broadcast, Algorithm::Binomial),
                ]);
                single.reduce_with(0, src, dst, combine)?;
                single.broadcast(0, dst)
            }
            Algorithm::Ring if src.len() >= n => self.allreduce_ring(src, dst, combine),
            _ => self.allreduce_recursive_doubling(src, dst, combine),
        }
    }

    /// The same team with some algorithms forced, for composed algorithms.
    fn with_forced(&self, pairs: &[(Collective, Algorithm)]) -> Team<'a> {
        let mut forced = self.forced;
        for &(op, alg) in pairs {
            forced[op.index()] = Some(alg);
        }
        Team {
            forced,
            ..self.clone()
        }
    }

    fn allreduce_recursive_doubling<T: Pod>(
        &self,
        src: &[T],
        dst: &mut [T],
        combine: &Combine<'_, T>,
    ) -> Result<()> {
        let n = self.size();
        let me = self.me;
        let pow = if n.is_power_of_two() {
            n
        } else {
            n.next_power_of_two() / 2
        };
        let rem = n - pow;
        dst.copy_from_slice(src);
        let mut other = vec![T::zeroed(); src.len()];
        // Fold the first 2·rem members pairwise so that `pow` members remain.
        let vrank = if me < 2 * rem {
            if me.is_multiple_of(2) {
                self.send(me + 1, dst)?;
                None
            } else {
                self.recv(me - 1, &mut other)?;
                combine(dst, &other)?;
                Some(me / 2)
            }
        } else {
            Some(me - rem)
        };
        if let Some(v) = vrank {
            let real = |v: usize| if v < rem { 2 * v + 1 } else { v + rem };
            let mut mask = 1;
            while mask < pow {
                let partner = real(v ^ mask);
                self.sendrecv(partner, dst, partner, &mut other)?;
                combine(dst, &other)?;
                mask *= 2;
            }
        }
        if me < 2 * rem {
            if me.is_multiple_of(2) {
                self.recv(me + 1, dst)?;
            } else {
                self.send(me - 1, dst)?;
            }
        }
        Ok(())
    }

    fn allreduce_ring<T: Pod>(
        &self,
        src: &[T],
        dst: &mut [T],
        combine: &Combine<'_, T>,
    ) -> Result<()> {
        let n = self.size();
        let me = self.me;
        let (right, left) = ((me + 1) % n, (me + n - 1) % n);
        let block = |b: usize| split_range(src.len(), n, b % n);
        dst.copy_from_slice(src);
        let mut incoming = vec![T::zeroed(); src.len().div_ceil(n)];
        // Reduce-scatter: after n − 1 steps, block (me + 1) % n is complete here.
        for s in 0..n - 1 {
            let out = block(me + n - s);
            let inb = block(me + 2 * n - s - 1);
            let tmp = &mut incoming[..inb.len()];
            self.sendrecv(right, &dst[out], left, tmp)?;
            combine(&mut dst[inb], tmp)?;
        }
        // Allgather of the completed blocks.
        for s in 0..n - 1 {
            let out = block(me + 1 + n - s);
            let inb = block(me + n - s);
            self.sendrecv_within(right, left, dst, out, inb)?;
        }
        Ok(())
    }

    /// Reduce one value over all members; every member gets the result
    /// (Berkeley UPC's `bupc_allv_reduce`).
    pub fn allreduce_value<T: Reducible>(&self, value: T, op: Op) -> Result<T> {
        let mut out = [value];
        self.allreduce(&[value], &mut out, op)?;
        Ok(out[0])
    }

    // ----- gather, allgather, scatter -------------------------------------------------

    /// Gather every member's `src` (all the same length) into `dst` on `root`, in rank order
    /// (`dst.len() == size · src.len()` there; untouched and possibly empty elsewhere).
    pub fn gather<T: Pod>(&self, root: usize, src: &[T], dst: &mut [T]) -> Result<()> {
        let _call = self.enter_rooted::<T>(Collective::Gather, root, src.len())?;
        let n = self.size();
        let b = src.len();
        if self.me == root && dst.len() != n * b {
            return Err(length_error("gather", "dst", dst.len(), n * b));
        }
        match self.choose(Collective::Gather, std::mem::size_of_val(src), true) {
            Algorithm::Native => self.native(
                NativeOp::Gather { root },
                bytemuck::cast_slice(src),
                bytemuck::cast_slice_mut(dst),
            ),
            Algorithm::Flat => {
                if self.me == root {
                    dst[root * b..(root + 1) * b].copy_from_slice(src);
                    let mut recvs: Vec<Incoming> = dst
                        .chunks_mut(b.max(1))
                        .take(n)
                        .enumerate()
                        .filter(|&(i, _)| i != root)
                        .map(|(i, c)| Incoming::new(i, bytemuck::cast_slice_mut(c)))
                        .collect();
                    if b == 0 {
                        recvs = (0..n)
                            .filter(|&i| i != root)
                            .map(|i| Incoming::new(i, &mut []))
                            .collect();
                    }
                    self.channel.transfer(self.ctx, &mut [], &mut recvs)
                } else {
                    self.send(root, src)
                }
            }
            _ => {
                // Binomial: member rel collects the blocks of relative ranks [rel, rel + span).
                let rel = (self.me + n - root) % n;
                let tree = Knomial::new(2, n, rel);
                let span = tree.subtree_end - rel;
                let mut buf = vec![T::zeroed(); span * b];
                buf[..b].copy_from_slice(src);
                for &c in &tree.children {
                    let child_end = Knomial::new(2, n, c).subtree_end;
                    self.recv(
                        (c + root) % n,
                        &mut buf[(c - rel) * b..(child_end - rel) * b],
                    )?;
                }
                match tree.parent {
                    Some(p) => self.send((p + root) % n, &buf),
                    None => {
                        for (j, block) in buf.chunks(b.max(1)).enumerate().take(n) {
                            let abs = (j + root) % n;
                            dst[abs * b..(abs + 1) * b].copy_from_slice(&block[..b]);
                        }
                        Ok(())
                    }
                }
            }
        }
    }

    /// Every member gets every member's `src` in rank order
    /// (`dst.len() == size · src.len()`).
    pub fn allgather<T: Pod>(&self, src: &[T], dst: &mut [T]) -> Result<()> {
        let _call = self.check_call(
            Collective::Allgather,
            None,
            src.len(),
            std::mem::size_of::<T>(),
            None,
        )?;
        let n = self.size();
        let b = src.len();
        if dst.len() != n * b {
            return Err(length_error("allgather", "dst", dst.len(), n * b));
        }
        let me = self.me;
        match self.choose(Collective::Allgather, std::mem::size_of_val(src), true) {
            Algorithm::Native => self.native(
                NativeOp::Allgather,
                bytemuck::cast_slice(src),
                bytemuck::cast_slice_mut(dst),
            ),
            Algorithm::GatherBroadcast => {
                let single = self.with_forced(&[
                    (Collective::Gather, Algorithm::Binomial),
                    (Collective::Broadcast, Algorithm::Binomial),
                ]);
                single.gather(0, src, dst)?;
                single.broadcast(0, dst)
            }
            Algorithm::Bruck => {
                // tmp[j] holds the block of member (me + j) % n.
                let mut tmp = vec![T::zeroed(); n * b];
                tmp[..b].copy_from_slice(src);
                let mut dist = 1;
                while dist < n {
                    let count = dist.min(n - dist);
                    let (have, rest) = tmp.split_at_mut(dist * b);
                    self.sendrecv(
                        (me + n - dist) % n,
                        &have[..count * b],
                        (me + dist) % n,
                        &mut rest[..count * b],
                    )?;
                    dist *= 2;
                }
                for j in 0..n {
                    let abs = (me + j) % n;
                    dst[abs * b..(abs + 1) * b].copy_from_slice(&tmp[j * b..(j + 1) * b]);
                }
                Ok(())
            }
            _ => {
                dst[me * b..(me + 1) * b].copy_from_slice(src);
                let (right, left) = ((me + 1) % n, (me + n - 1) % n);
                for s in 0..n.saturating_sub(1) {
                    let out = (me + n - s) % n;
                    let inb = (me + 2 * n - s - 1) % n;
                    self.sendrecv_within(
                        right,
                        left,
                        dst,
                        out * b..(out + 1) * b,
                        inb * b..(inb + 1) * b,
                    )?;
                }
                Ok(())
            }
        }
    }

    /// Member `root` sends block `i` of `src` (`size · dst.len()` elements) to member `i`.
    pub fn scatter<T: Pod>(&self, root: usize, src: &[T], dst: &mut [T]) -> Result<()> {
        let _call = self.enter_rooted::<T>(Collective::Scatter, root, dst.len())?;
        let n = self.size();
        let b = dst.len();
        if self.me == root && src.len() != n * b {
            return Err(length_error("scatter", "src", src.len(), n * b));
        }
        match self.choose(Collective::Scatter, std::mem::size_of_val(dst), true) {
            Algorithm::Native => self.native(
                NativeOp::Scatter { root },
                bytemuck::cast_slice(src),
                bytemuck::cast_slice_mut(dst),
            ),
            Algorithm::Flat => {
                if self.me == root {
                    dst.copy_from_slice(&src[root * b..(root + 1) * b]);
                    let mut sends: Vec<Outgoing> = (0..n)
                        .filter(|&i| i != root)
                        .map(|i| Outgoing::new(i, bytemuck::cast_slice(&src[i * b..(i + 1) * b])))
                        .collect();
                    self.channel.transfer(self.ctx, &mut sends, &mut [])
                } else {
                    self.recv(root, dst)
                }
            }
            _ => {
                let rel = (self.me + n - root) % n;
                let tree = Knomial::new(2, n, rel);
                let span = tree.subtree_end - rel;
                let mut buf = vec![T::zeroed(); span * b];
                match tree.parent {
                    Some(p) => self.recv((p + root) % n, &mut buf)?,
                    None => {
                        for j in 0..n {
                            let abs = (j + root) % n;
                            buf[j * b..(j + 1) * b].copy_from_slice(&src[abs * b..(abs + 1) * b]);
                        }
                    }
                }
                for &c in &tree.children {
                    let child_end = Knomial::new(2, n, c).subtree_end;
                    self.send((c + root) % n, &buf[(c - rel) * b..(child_end - rel) * b])?;
                }
                dst.copy_from_slice(&buf[..b]);
                Ok(())
            }
        }
    }

    // ----- exchange ---------------------------------------------------------------------

    /// All-to-all: block `j` of `src` goes to member `j`, and block `i` of `dst` comes from
    /// member `i` (blocks of `src.len() / size` elements).
    pub fn exchange<T: Pod>(&self, src: &[T], dst: &mut [T]) -> Result<()> {
        let _call = self.check_call(
            Collective::Exchange,
            None,
            src.len(),
            std::mem::size_of::<T>(),
            None,
        )?;
        let n = self.size();
        if !src.len().is_multiple_of(n) || dst.len() != src.len() {
            return Err(CoreError::Invalid(format!(
                "exchange: src has {} elements and dst {}; both must be the same multiple of the team size {n}",
                src.len(),
                dst.len()
            ))
            .into());
        }
        let b = src.len() / n;
        // Equal blocks: ranges computed, nothing allocated (this is the per-call cost of
        // small all-to-alls, OpenSHMEM's `alltoall` among them).
        let block = |j: usize| j * b..(j + 1) * b;
        self.exchange_blocks(src, block, dst, block, true)
    }

    /// Check an all-to-all with varying counts (one count per member each way, totals
    /// matching the buffers, this member's own block the same both ways) and return the
    /// offsets of the send and receive blocks.
    fn exchange_v_layout(
        &self,
        src_len: usize,
        send_counts: &[usize],
        dst_len: usize,
        recv_counts: &[usize],
    ) -> Result<(Vec<usize>, Vec<usize>)> {
        let n = self.size();
        if send_counts.len() != n || recv_counts.len() != n {
            return Err(CoreError::Invalid(format!(
                "exchange_v: counts need one entry per member ({n})"
            ))
            .into());
        }
        let (send_total, recv_total): (usize, usize) =
            (send_counts.iter().sum(), recv_counts.iter().sum());
        if send_total != src_len || recv_total != dst_len {
            return Err(CoreError::Invalid(format!(
                "exchange_v: counts add up to {send_total} sent and {recv_total} received, but src has {src_len} and dst {dst_len}"
            ))
            .into());
        }
        let me = self.me;
        if recv_counts[me] != send_counts[me] {
            return Err(length_error(
                "exchange_v (own block)",
                "recv_counts[me]",
                recv_counts[me],
                send_counts[me],
            ));
        }
        let offsets = |counts: &[usize]| -> Vec<usize> {
            counts
                .iter()
                .scan(0, |acc, &c| {
                    let start = *acc;
                    *acc += c;
                    Some(start)
                })
                .collect()
        };
        Ok((offsets(send_counts), offsets(recv_counts)))
    }

    /// All-to-all with varying counts: `send_counts[j]` elements (consecutive in `src`) go
    /// to member `j`; `recv_counts[i]` elements (consecutive in `dst`) come from member `i`.
    pub fn exchange_v<T: Pod>(
        &self,
        src: &[T],
        send_counts: &[usize],
        dst: &mut [T],
        recv_counts: &[usize],
    ) -> Result<()> {
        // Counts differ between members here, so the signature leaves them out.
        let _call = self.begin_call(Signature::new(
            Collective::Exchange,
            Form::Blocking,
            None,
            0,
            std::mem::size_of::<T>(),
            None,
        ));
        let (so, ro) = self.exchange_v_layout(src.len(), send_counts, dst.len(), recv_counts)?;
        self.exchange_blocks(
            src,
            |j| so[j]..so[j] + send_counts[j],
            dst,
            |i| ro[i]..ro[i] + recv_counts[i],
            false,
        )
    }

    /// The all-to-all itself: `send(j)` is the range of `src` that goes to member `j`,
    /// `recv(i)` the range of `dst` that comes from member `i` (checked, consecutive and
    /// in member order). `uniform`: every member passes equal counts (an
    /// [`Team::exchange`]), which MPI's all-to-all needs. Equal counts on this member
    /// alone do not say that, and members must all choose MPI or all not.
    fn exchange_blocks<T: Pod>(
        &self,
        src: &[T],
        send: impl Fn(usize) -> std::ops::Range<usize>,
        dst: &mut [T],
        recv: impl Fn(usize) -> std::ops::Range<usize>,
        uniform: bool,
    ) -> Result<()> {
        let n = self.size();
        let me = self.me;
        dst[recv(me)].copy_from_slice(&src[send(me)]);
        match self.choose(
            Collective::Exchange,
            std::mem::size_of_val(src) / n,
            uniform,
        ) {
            Algorithm::Native => self.native(
                NativeOp::Exchange,
                bytemuck::cast_slice(src),
                bytemuck::cast_slice_mut(dst),
            ),
            Algorithm::Flat => {
                let mut sends: Vec<Outgoing> = (0..n)
                    .filter(|&j| j != me)
                    .map(|j| Outgoing::new(j, bytemuck::cast_slice(&src[send(j)])))
                    .collect();
                let mut rest: &mut [T] = dst;
                let mut recvs = Vec::with_capacity(n - 1);
                let mut consumed = 0;
                for i in 0..n {
                    let range = recv(i);
                    let (head, tail) = std::mem::take(&mut rest).split_at_mut(range.end - consumed);
                    consumed = range.end;
                    rest = tail;
                    if i != me {
                        let start = head.len() - range.len();
                        recvs.push(Incoming::new(
                            i,
                            bytemuck::cast_slice_mut(&mut head[start..]),
                        ));
                    }
                }
                self.channel.transfer(self.ctx, &mut sends, &mut recvs)
            }
            _ => {
                for s in 1..n {
                    let (to, from) = ((me + s) % n, (me + n - s) % n);
                    self.sendrecv(to, &src[send(to)], from, &mut dst[recv(from)])?;
                }
                Ok(())
            }
        }
    }

    // ----- data-centric (single-address) forms ------------------------------------------

    /// The same segment offset on every member: the destinations of data allocated with
    /// [`Context::alloc_collective`], in team-rank order, for the `*_to` forms.
    pub fn symmetric<T>(&self, ptr: GlobalPtr<T>) -> Vec<GlobalPtr<T>> {
        self.members.iter().map(|&r| ptr.on(r)).collect()
    }

    fn check_destinations<T>(&self, what: &str, dsts: &[GlobalPtr<T>]) -> Result<()> {
        self.check_places(what, "destination", dsts)
    }

    /// One pointer per member, pointer `i` on member `i` (`role`: what they are, for the
    /// error).
    fn check_places<T>(&self, what: &str, role: &str, ptrs: &[GlobalPtr<T>]) -> Result<()> {
        if ptrs.len() != self.size() {
            return Err(length_error(
                what,
                &format!("the {role} list"),
                ptrs.len(),
                self.size(),
            ));
        }
        for (i, &d) in ptrs.iter().enumerate() {
            self.check_place(what, role, i, d)?;
        }
        Ok(())
    }

    /// Destination `d` must live on team member `i`.
    fn check_destination<T>(&self, what: &str, i: usize, d: GlobalPtr<T>) -> Result<()> {
        self.check_place(what, "destination", i, d)
    }

    /// Pointer `d` (a `role`) must live on team member `i`.
    fn check_place<T>(&self, what: &str, role: &str, i: usize, d: GlobalPtr<T>) -> Result<()> {
        if d.rank() != self.members[i] {
            return Err(CoreError::Invalid(format!(
                "{what}: {role} {i} lives on rank {} but team member {i} is rank {}",
                d.rank(),
                self.members[i]
            ))
            .into());
        }
        Ok(())
    }

    /// The synchronisation around a single-address form's puts (`put`), by `self.sync`:
    /// `targets` are the members this one puts into, `sources` those that put into it.
    /// Entry `My` and exit `My` are one empty channel message per pair ("entered",
    /// "landed"), in opposite directions, each consumed within the call.
    fn deliver(
        &self,
        targets: impl Iterator<Item = usize> + Clone,
        sources: impl Iterator<Item = usize> + Clone,
        put: impl FnOnce() -> Result<()>,
    ) -> Result<()> {
        let _call = self.begin_call(Signature::SINGLE_ADDRESS);
        let exchange = |to: &mut dyn Iterator<Item = usize>,
                        from: &mut dyn Iterator<Item = usize>| {
            let mut sends: Vec<Outgoing> = to.map(|t| Outgoing::new(t, &[])).collect();
            let mut recvs: Vec<Incoming> = from.map(|s| Incoming::new(s, &mut [])).collect();
            self.channel.transfer(self.ctx, &mut sends, &mut recvs)
        };
        match self.sync.input {
            SyncMode::All => self.barrier()?,
            SyncMode::My => exchange(&mut sources.clone(), &mut targets.clone())?,
            SyncMode::No => {}
        }
        put()?;
        match self.sync.output {
            SyncMode::No => Ok(()),
            SyncMode::My => exchange(&mut targets.clone(), &mut sources.clone()),
            SyncMode::All => {
                exchange(&mut targets.clone(), &mut sources.clone())?;
                self.barrier()
            }
        }
    }

    /// A single-address form: blocking (`deliver`), or nonblocking (puts now, "landed"
    /// messages counted by a handle).
    fn run_single(
        &self,
        nb: bool,
        targets: impl Iterator<Item = usize> + Clone,
        sources: impl Iterator<Item = usize> + Clone,
        put: impl FnOnce() -> Result<()>,
    ) -> Result<Option<CollHandle<'a>>> {
        if !nb {
            return self.deliver(targets, sources, put).map(|()| None);
        }
        if self.sync.input != SyncMode::No || self.sync.output == SyncMode::All {
            return Err(CoreError::Invalid(format!(
                "nonblocking single-address collectives need entry SyncMode::No and exit No or My (this team has {:?}/{:?}); use Team::with_sync(SyncMode::No, SyncMode::My) and make sure the destinations are ready before anyone enters",
                self.sync.input, self.sync.output
            ))
            .into());
        }
        if !self.schedules.borrow().pending.is_empty() {
            return Err(CoreError::Invalid(
                "nonblocking mailbox collectives (allreduce_nb, ...) are in flight on this team: wait for them before starting a nonblocking single-address one".into(),
            )
            .into());
        }
        put()?;
        let mut need = Vec::new();
        if self.sync.output == SyncMode::My {
            let mut nb_state = self.nb.borrow_mut();
            for t in targets {
                nb_state.unsent[t] += 1;
            }
            for s in sources {
                nb_state.expected[s] += 1;
                need.push((s, nb_state.expected[s]));
            }
        }
        self.channel.begin_nonblocking();
        let mut handle = CollHandle {
            team: self.clone(),
            need,
            open: true,
        };
        handle.test()?;
        Ok(Some(handle))
    }

    /// Advance every nonblocking collective of this team without waiting: send the
    /// "landed" messages that fit, count the ones that arrived.
    fn progress_nonblocking(&self) -> Result<()> {
        let mut st = self.nb.borrow_mut();
        for t in 0..self.size() {
            while st.unsent[t] > 0
                && self
                    .channel
                    .try_send_chunk(self.ctx, t, &[], Signature::SINGLE_ADDRESS)?
            {
                st.unsent[t] -= 1;
            }
            while st.received[t] < st.expected[t]
                && self
                    .channel
                    .try_recv_chunk(self.ctx, t, &mut [], Signature::SINGLE_ADDRESS)?
                    .is_some()
            {
                st.received[t] += 1;
            }
        }
        Ok(())
    }

    single_address_pair! {
        /// Single-address broadcast: `root` puts `src` straight into every member's
        /// destination `dsts[i]` (one copy per member, no mailbox). Every member passes the same
        /// `dsts` (see [`Team::symmetric`]) and `len`; `src` is read on the root only. By
        /// default (see [`Team::with_sync`]) entry is synchronised (no member's destination
        /// is written before it has entered) and every member returns once its own
        /// destination holds the data.
        ///
        /// ```
        /// use tessera::{Job, Team};
        /// Job::threads(3).segment(8 << 20).run(|ctx| {
        ///     let world = Team::world(ctx)?;
        ///     let buf = ctx.alloc_collective::<u32>(4)?;
        ///     world.broadcast_to(1, &[7, 8, 9, 10], &world.symmetric(buf), 4)?;
        ///     let mut got = [0u32; 4];
        ///     ctx.get(buf, &mut got)?;
        ///     assert_eq!(got, [7, 8, 9, 10]);
        ///     Ok(())
        /// }).unwrap();
        /// ```
        broadcast_to, broadcast_to_nb, broadcast_to_op, (root: usize, src: &[T], dsts: &[GlobalPtr<T>], len: usize)
    }

    fn broadcast_to_op<T: Pod>(
        &self,
        nb: bool,
        root: usize,
        src: &[T],
        dsts: &[GlobalPtr<T>],
        len: usize,
    ) -> Result<Option<CollHandle<'a>>> {
        self.check_root(root)?;
        self.check_destinations("broadcast_to", dsts)?;
        if self.me == root && src.len() != len {
            return Err(length_error("broadcast_to", "src", src.len(), len));
        }
        self.root_puts(nb, root, dsts, |_| src)
    }

    /// The root puts `block(i)` into every member `i`'s destination; the others receive.
    fn root_puts<'s, T: Pod>(
        &self,
        nb: bool,
        root: usize,
        dsts: &[GlobalPtr<T>],
        block: impl Fn(usize) -> &'s [T],
    ) -> Result<Option<CollHandle<'a>>> {
        let (n, me) = (self.size(), self.me);
        self.run_single(
            nb,
            (0..n).filter(|&i| me == root && i != root),
            std::iter::once(root).filter(|_| me != root),
            || {
                if me == root {
                    for (i, d) in dsts.iter().enumerate() {
                        self.ctx.put(*d, block(i))?;
                    }
                }
                Ok(())
            },
        )
    }

    /// Rendezvous broadcast: every member *gets* the data from `src`, which lives on `root`
    /// (in its segment; every member passes the same pointer), into its own `dst` (a local
    /// buffer; every member passes the same length). The receivers move the data, each
    /// once the root has entered, and nothing passes through the team's mailboxes. The
    /// team's synchronisation modes ([`Team::with_sync`]) apply with source and
    /// destination swapped: entry `My` means the root's `src` is read only after the root
    /// has entered, exit `My` that the root returns once every member has finished
    /// reading it (so it may then change it) and every member once its `dst` is filled.
    ///
    /// ```
    /// use tessera::{Job, Team};
    /// Job::threads(3).segment(8 << 20).run(|ctx| {
    ///     let world = Team::world(ctx)?;
    ///     let src = ctx.alloc_collective::<u32>(4)?.on(2);
    ///     if ctx.rank() == 2 {
    ///         ctx.put(src, &[7, 8, 9, 10])?;
    ///     }
    ///     let mut got = [0u32; 4];
    ///     world.broadcast_from(2, src, &mut got)?;
    ///     assert_eq!(got, [7, 8, 9, 10]);
    ///     Ok(())
    /// }).unwrap();
    /// ```
    pub fn broadcast_from<T: Pod>(
        &self,
        root: usize,
        src: GlobalPtr<T>,
        dst: &mut [T],
    ) -> Result<()> {
        self.check_root(root)?;
        self.check_place("broadcast_from", "source", root, src)?;
        let (n, me) = (self.size(), self.me);
        // Members read from the root; the root is read by all the others.
        self.deliver(
            std::iter::once(root).filter(|_| me != root),
            (0..n).filter(|&i| me == root && i != root),
            || self.ctx.get(src, dst),
        )
    }

    /// Rendezvous gather: `root` *gets* block `i` of `dst` (`dst.len() / size` elements) from
    /// member `i`'s `srcs[i]` (in that member's segment) once member `i` has entered. Every
    /// member passes the same `srcs` (see [`Team::symmetric`]); `dst` is written on the root
    /// only (others may pass an empty one). The synchronisation modes apply as for
    /// [`Team::broadcast_from`]: with exit `My` a member returns once the root has read its
    /// block.
    ///
    /// ```
    /// use tessera::{Job, Team};
    /// Job::threads(3).segment(8 << 20).run(|ctx| {
    ///     let world = Team::world(ctx)?;
    ///     let mine = ctx.alloc_collective::<u64>(2)?;
    ///     ctx.put(mine, &[ctx.rank() as u64, 100])?;
    ///     let mut all = vec![0u64; if ctx.rank() == 0 { 6 } else { 0 }];
    ///     world.gather_from(0, &world.symmetric(mine), &mut all)?;
    ///     if ctx.rank() == 0 {
    ///         assert_eq!(all, [0, 100, 1, 100, 2, 100]);
    ///     }
    ///     Ok(())
    /// }).unwrap();
    /// ```
    pub fn gather_from<T: Pod>(
        &self,
        root: usize,
        srcs: &[GlobalPtr<T>],
        dst: &mut [T],
    ) -> Result<()> {
        self.check_root(root)?;
        self.check_places("gather_from", "source", srcs)?;
        let (n, me) = (self.size(), self.me);
        let len = if me == root {
            self.block_of("gather_from", dst.len())?
        } else {
            0
        };
        self.deliver(
            (0..n).filter(|&i| me == root && i != root),
            std::iter::once(root).filter(|_| me != root),
            || {
                if me != root {
                    return Ok(());
                }
                // All the gets in flight at once (each completes as issued on shared
                // memory), starting with the next member's block.
                let mut blocks: Vec<(usize, &mut [T])> =
                    dst.chunks_mut(len.max(1)).enumerate().collect();
                blocks.rotate_left((me + 1) % n);
                let handles = blocks
                    .into_iter()
                    .map(|(i, block)| self.ctx.get_nb(srcs[i], block))
                    .collect::<Result<Vec<_>>>()?;
                handles.into_iter().try_for_each(|h| h.wait())
            },
        )
    }

    single_address_pair! {
        /// Single-address all-to-all: block `j` of `src` (`src.len() / size` elements) is put
        /// straight into member `j`'s destination `dsts[j]` at block position `me`. Entry is
        /// synchronised; each member returns once every block of its own destination arrived.
        exchange_to, exchange_to_nb, exchange_to_op, (src: &[T], dsts: &[GlobalPtr<T>])
    }

    fn exchange_to_op<T: Pod>(
        &self,
        nb: bool,
        src: &[T],
        dsts: &[GlobalPtr<T>],
    ) -> Result<Option<CollHandle<'a>>> {
        self.check_destinations("exchange_to", dsts)?;
        let b = self.block_of("exchange_to", src.len())?;
        self.all_put(nb, dsts, b, |j| &src[j * b..(j + 1) * b])
    }

    /// Every member puts `block(j)` into member `j`'s destination at block position (its
    /// team rank × `len`).
    fn all_put<'s, T: Pod>(
        &self,
        nb: bool,
        dsts: &[GlobalPtr<T>],
        len: usize,
        block: impl Fn(usize) -> &'s [T],
    ) -> Result<Option<CollHandle<'a>>> {
        let (n, me) = (self.size(), self.me);
        let others = (0..n).filter(move |&i| i != me);
        self.run_single(nb, others.clone(), others, || {
            // Start with the next member so that members do not all write to the same one.
            for s in 0..n {
                let j = (me + s) % n;
                self.ctx.put(dsts[j].add(me * len), block(j))?;
            }
            Ok(())
        })
    }

    single_address_pair! {
        /// Single-address gather: every member puts its `src` straight into the root's
        /// destination `dst` at block position (its team rank × `src.len()`). Every member
        /// passes the same `dst`, on the root, and the same `src.len()`. Entry is synchronised;
        /// the root returns once every block has landed, the others once theirs is sent.
        ///
        /// ```
        /// use tessera::{Job, Team};
        /// Job::threads(3).segment(8 << 20).run(|ctx| {
        ///     let world = Team::world(ctx)?;
        ///     let buf = ctx.alloc_collective::<u32>(3)?;
        ///     world.gather_to(0, &[10 + ctx.rank() as u32], buf.on(0))?;
        ///     if ctx.rank() == 0 {
        ///         let mut got = [0u32; 3];
        ///         ctx.get(buf, &mut got)?;
        ///         assert_eq!(got, [10, 11, 12]);
        ///     }
        ///     Ok(())
        /// }).unwrap();
        /// ```
        gather_to, gather_to_nb, gather_to_op, (root: usize, src: &[T], dst: GlobalPtr<T>)
    }

    fn gather_to_op<T: Pod>(
        &self,
        nb: bool,
        root: usize,
        src: &[T],
        dst: GlobalPtr<T>,
    ) -> Result<Option<CollHandle<'a>>> {
        self.check_root(root)?;
        self.check_destination("gather_to", root, dst)?;
        let (n, me) = (self.size(), self.me);
        self.run_single(
            nb,
            std::iter::once(root).filter(|_| me != root),
            (0..n).filter(|&i| me == root && i != root),
            || self.ctx.put(dst.add(me * src.len()), src),
        )
    }

    single_address_pair! {
        /// Single-address scatter: the root puts block `i` of `src` (`src.len() / size`
        /// elements) straight into member `i`'s destination `dsts[i]`. Every member passes the
        /// same `dsts` and block length `len`; `src` is read on the root only. Entry is
        /// synchronised; every member returns once its block has landed.
        scatter_to, scatter_to_nb, scatter_to_op, (root: usize, src: &[T], dsts: &[GlobalPtr<T>], len: usize)
    }

    fn scatter_to_op<T: Pod>(
        &self,
        nb: bool,
        root: usize,
        src: &[T],
        dsts: &[GlobalPtr<T>],
        len: usize,
    ) -> Result<Option<CollHandle<'a>>> {
        self.check_root(root)?;
        self.check_destinations("scatter_to", dsts)?;
        let n = self.size();
        if self.me == root && src.len() != n * len {
            return Err(length_error("scatter_to", "src", src.len(), n * len));
        }
        self.root_puts(nb, root, dsts, |i| &src[i * len..(i + 1) * len])
    }

    single_address_pair! {
        /// Single-address allgather: every member puts its `src` straight into every member's
        /// destination `dsts[j]` at block position (its team rank × `src.len()`). Entry is
        /// synchronised; each member returns once every block of its own destination arrived.
        allgather_to, allgather_to_nb, allgather_to_op, (src: &[T], dsts: &[GlobalPtr<T>])
    }

    fn allgather_to_op<T: Pod>(
        &self,
        nb: bool,
        src: &[T],
        dsts: &[GlobalPtr<T>],
    ) -> Result<Option<CollHandle<'a>>> {
        self.check_destinations("allgather_to", dsts)?;
        self.all_put(nb, dsts, src.len(), |_| src)
    }

    // ----- scans ------------------------------------------------------------------------

    /// Inclusive prefix reduction: member `i` gets `src₀ op … op srcᵢ` in `dst`.
    pub fn scan<T: Reducible>(&self, src: &[T], dst: &mut [T], op: Op) -> Result<()> {
        let _call = self.enter_reduction::<T>(Collective::Scan, None, src.len(), op)?;
        let combine = |a: &mut [T], b: &[T]| T::reduce(op, a, b);
        self.scan_impl(src, dst, false, &combine, native_reduction::<T>(op))
    }

    /// Exclusive prefix reduction: member `i > 0` gets `src₀ op … op srcᵢ₋₁`; member 0's
    /// `dst` is set to zeros.
    pub fn exscan<T: Reducible>(&self, src: &[T], dst: &mut [T], op: Op) -> Result<()> {
        let _call = self.enter_reduction::<T>(Collective::Scan, None, src.len(), op)?;
        let combine = |a: &mut [T], b: &[T]| T::reduce(op, a, b);
        self.scan_impl(src, dst, true, &combine, native_reduction::<T>(op))
    }

    /// Inclusive (or exclusive) scan with a user operation.
    pub fn scan_with<T: Pod>(
        &self,
        src: &[T],
        dst: &mut [T],
        exclusive: bool,
        combine: &Combine<'_, T>,
    ) -> Result<()> {
        let _call = self.begin_user::<T>(Collective::Scan, None, src.len());
        self.scan_impl(src, dst, exclusive, combine, None)
    }

    fn scan_impl<T: Pod>(
        &self,
        src: &[T],
        dst: &mut [T],
        exclusive: bool,
        combine: &Combine<'_, T>,
        native: Option<Reduction>,
    ) -> Result<()> {
        if dst.len() != src.len() {
            return Err(length_error("scan", "dst", dst.len(), src.len()));
        }
        let n = self.size();
        let me = self.me;
        let len = src.len();
        match self.choose(
            Collective::Scan,
            std::mem::size_of_val(src),
            native.is_some(),
        ) {
            Algorithm::Native => {
                self.native(
                    NativeOp::Scan {
                        reduction: native.expect("choose allows native only with a reduction"),
                        exclusive,
                    },
                    bytemuck::cast_slice(src),
                    bytemuck::cast_slice_mut(dst),
                )?;
                if exclusive && me == 0 {
                    dst.fill(T::zeroed()); // MPI leaves it undefined; ours is zeros
                }
                Ok(())
            }
            Algorithm::Linear => {
                // prefix = src₀ … srcₘₑ₋₁ arrives from the left; pass prefix op src right.
                let mut inclusive = src.to_vec();
                let mut prefix = vec![T::zeroed(); len];
                if me > 0 {
                    self.recv(me - 1, &mut prefix)?;
                    let mut p = prefix.clone();
                    combine(&mut p, src)?;
                    inclusive = p;
                }
                if me + 1 < n {
                    self.send(me + 1, &inclusive)?;
                }
                dst.copy_from_slice(if exclusive { &prefix } else { &inclusive });
                Ok(())
            }
            _ => {
                // Hillis–Steele: after round k, `inclusive` covers 2ᵏ⁺¹ members ending at me.
                let mut inclusive = src.to_vec();
                let mut exclusive_acc: Option<Vec<T>> = None;
                let mut incoming = vec![T::zeroed(); len];
                let mut dist = 1;
                while dist < n {
                    let to = (me + dist < n).then_some(me + dist);
                    let from = (me >= dist).then(|| me - dist);
                    let mut sends: Vec<Outgoing> = to
                        .map(|t| Outgoing::new(t, bytemuck::cast_slice(&inclusive)))
                        .into_iter()
                        .collect();
                    let mut recvs: Vec<Incoming> = from
                        .map(|f| Incoming::new(f, bytemuck::cast_slice_mut(&mut incoming)))
                        .into_iter()
                        .collect();
                    self.channel.transfer(self.ctx, &mut sends, &mut recvs)?;
                    drop(sends);
                    if from.is_some() {
                        combine(&mut inclusive, &incoming)?;
                        match exclusive_acc.as_mut() {
                            Some(e) => combine(e, &incoming)?,
                            None => exclusive_acc = Some(incoming.clone()),
                        }
                    }
                    dist *= 2;
                }
                if exclusive {
                    match exclusive_acc {
                        Some(e) => dst.copy_from_slice(&e),
                        None => dst.fill(T::zeroed()),
                    }
                } else {
                    dst.copy_from_slice(&inclusive);
                }
                Ok(())
            }
        }
    }

    /// Inclusive scan of one value.
    pub fn scan_value<T: Reducible>(&self, value: T, op: Op) -> Result<T> {
        let mut out = [value];
        self.scan(&[value], &mut out, op)?;
        Ok(out[0])
    }

    /// Exclusive scan of one value: `None` on member 0.
    pub fn exscan_value<T: Reducible>(&self, value: T, op: Op) -> Result<Option<T>> {
        let mut out = [value];
        self.exscan(&[value], &mut out, op)?;
        Ok((self.me > 0).then_some(out[0]))
    }
}

// ----- nonblocking mailbox collectives ------------------------------------------------

/// One algorithm each, written as schedules (module `schedule`): dissemination barrier,
/// binomial broadcast and reduce, reduce-then-broadcast allreduce, flat gather and
/// scatter, ring allgather, pairwise exchange, linear scan.
impl<'a> Team<'a> {
    /// Build a schedule with this team's reservations and start it.
    fn start_schedule<T: Pod>(
        &self,
        build: impl FnOnce(&mut Reserved, usize) -> Schedule<T>,
    ) -> Result<CollRequest<'a, T>> {
        let mut st = self.schedules.borrow_mut();
        self.reserve_from_channel(&mut st)?;
        let schedule = build(&mut st.reserved, self.channel.chunk()).carrying(self.channel.call());
        drop(st);
        self.enqueue(Box::new(schedule))
    }

    /// Before building a schedule: refuse if single-address nonblocking collectives are in
    /// flight, and if no schedule has reserved sequence numbers ahead, continue from where
    /// the channel's streams are.
    fn reserve_from_channel(&self, st: &mut Schedules) -> Result<()> {
        // The channel counts every nonblocking collective in flight: those held here and
        // the single-address ones.
        if self.channel.nonblocking() > st.pending.len() {
            return Err(CoreError::Invalid(
                "nonblocking single-address collectives are in flight on this team: wait for their handles before starting a nonblocking mailbox one".into(),
            )
            .into());
        }
        if !st.on_channel() {
            st.reserved.send = (0..self.size()).map(|p| self.channel.sent_to(p)).collect();
            st.reserved.recv = (0..self.size())
                .map(|p| self.channel.received_from(p))
                .collect();
        }
        Ok(())
    }

    /// Start `op` as the conduit's own nonblocking collective if the blocking call of
    /// `coll` at `bytes` would run natively (the same choice, so every member makes it
    /// alike); `None` (nothing started) otherwise, or when `op` is `None` (no native
    /// form for this call). `src` and `dst_len` are as [`NativeOp`] describes them.
    fn start_native<T: Pod>(
        &self,
        coll: Collective,
        bytes: usize,
        op: Option<NativeOp>,
        src: &[T],
        dst_len: usize,
    ) -> Result<Option<CollRequest<'a, T>>> {
        let (Some(op), Some(group)) = (op, &self.native) else {
            return Ok(None);
        };
        if self.choose(coll, bytes, true) != Algorithm::Native {
            return Ok(None);
        }
        let size = std::mem::size_of::<T>();
        let ticket = group.start(op, bytemuck::cast_slice(src), dst_len * size)?;
        let zero = matches!(
            op,
            NativeOp::Scan {
                exclusive: true,
                ..
            }
        ) && self.me == 0;
        let pending = NativePending::<T>::new(ticket, zero);
        self.enqueue(Box::new(pending)).map(Some)
    }

    /// Hold `pending` with the team's other nonblocking collectives and return its
    /// request. Counted on the channel, so that blocking mailbox collectives are refused
    /// until it is done (the rule is the same whichever library runs it).
    fn enqueue<T: Pod>(&self, pending: Box<dyn Pending>) -> Result<CollRequest<'a, T>> {
        self.channel.begin_nonblocking();
        let mut st = self.schedules.borrow_mut();
        let ticket = st.next;
        st.next += 1;
        st.pending.push_back((ticket, pending));
        drop(st);
        let request = CollRequest {
            team: self.clone(),
            ticket,
            taken: false,
            _output: std::marker::PhantomData,
        };
        self.advance_schedules()?;
        Ok(request)
    }

    /// Advance every nonblocking collective in flight, oldest first. One that is done
    /// behind an unfinished agreement check (checked mode) stays until the check is done.
    fn advance_schedules(&self) -> Result<()> {
        let mut st = self.schedules.borrow_mut();
        let (mut i, mut gated) = (0, false);
        while i < st.pending.len() {
            let done = st.pending[i].1.advance(self.ctx, &self.channel)?;
            gated |= !done && st.pending[i].1.gates();
            if done && !gated {
                let (ticket, done) = st.pending.remove(i).expect("in range");
                self.channel.end_nonblocking();
                let (output, spare) = done.output();
                if let Some(output) = output {
                    st.finished.insert(ticket, output);
                }
                st.reserved.keep(spare);
            } else {
                i += 1;
            }
        }
        Ok(())
    }

    /// Nonblocking [`Team::barrier`] (dissemination); its request's output is empty.
    pub fn barrier_nb(&self) -> Result<CollRequest<'a, u8>> {
        self.check_nb::<()>(Collective::Barrier, None, 0, None)?;
        let op = Some(NativeOp::Barrier);
        if let Some(r) = self.start_native(Collective::Barrier, 0, op, &[], 0)? {
            return Ok(r);
        }
        let (n, me) = (self.size(), self.me);
        self.start_schedule(|reserved, chunk| {
            let mut b = Builder::new(reserved, chunk, &[], 0, 0, vec![]);
            let mut dist = 1;
            while dist < n {
                b = b.round(
                    vec![((me + dist) % n, (Buf::Dst, 0..0))],
                    vec![((me + n - dist) % n, (Buf::Dst, 0..0))],
                    vec![],
                );
                dist *= 2;
            }
            b.build()
        })
    }

    /// Nonblocking [`Team::broadcast`]: every member passes `data` of the same length
    /// (read on `root` only); the request's output is the root's data.
    pub fn broadcast_nb<T: Pod>(&self, root: usize, data: &[T]) -> Result<CollRequest<'a, T>> {
        self.check_nb::<T>(Collective::Broadcast, Some(root), data.len(), None)?;
        self.check_root(root)?;
        let (n, len) = (self.size(), data.len());
        let rel = (self.me + n - root) % n;
        let mine = if rel == 0 { data } else { &[] };
        let op = Some(NativeOp::Broadcast { root });
        let bytes = std::mem::size_of_val(data);
        if let Some(r) = self.start_native(Collective::Broadcast, bytes, op, mine, len)? {
            return Ok(r);
        }
        self.start_schedule(|reserved, chunk| {
            let first = if rel == 0 {
                vec![Local::Copy {
                    from: (Buf::Src, 0..len),
                    to: (Buf::Dst, 0..len),
                }]
            } else {
                vec![]
            };
            // Only the root's data travels.
            let data = if rel == 0 { data } else { &[] };
            let b = Builder::new(reserved, chunk, data, len, 0, first);
            let b = broadcast_rounds(b, n, root, rel, len);
            b.build()
        })
    }

    /// Nonblocking [`Team::reduce`] with a built-in operation; the output is the result on
    /// `root` and empty elsewhere.
    pub fn reduce_nb<T: Reducible>(
        &self,
        root: usize,
        src: &[T],
        op: Op,
    ) -> Result<CollRequest<'a, T>> {
        self.check_nb::<T>(Collective::Reduce, Some(root), src.len(), Some(op))?;
        check_op::<T>(op)?;
        self.reduce_nb_impl(root, src, builtin::<T>(op), native_reduction::<T>(op))
    }

    /// [`Team::reduce_nb`] with a user operation `combine(acc, other)` (associative and
    /// commutative) over any plain-old-data type. The request owns the operation, so it
    /// may not borrow.
    ///
    /// ```
    /// use tessera::{Job, Team};
    /// Job::threads(3).segment(8 << 20).run(|ctx| {
    ///     let world = Team::world(ctx)?;
    ///     // (sum, largest) over pairs.
    ///     let pair = [ctx.rank() as u32 + 1, 10 * ctx.rank() as u32];
    ///     let req = world.reduce_nb_with(0, &[pair], |acc: &mut [[u32; 2]], x: &[[u32; 2]]| {
    ///         for (a, b) in acc.iter_mut().zip(x) {
    ///             *a = [a[0] + b[0], a[1].max(b[1])];
    ///         }
    ///         Ok(())
    ///     })?;
    ///     let got = req.wait()?;
    ///     if ctx.rank() == 0 {
    ///         assert_eq!(got, vec![[6, 20]]);
    ///     }
    ///     Ok(())
    /// }).unwrap();
    /// ```
    pub fn reduce_nb_with<T: Pod>(
        &self,
        root: usize,
        src: &[T],
        combine: impl Fn(&mut [T], &[T]) -> Result<()> + 'static,
    ) -> Result<CollRequest<'a, T>> {
        self.check_nb::<T>(Collective::Reduce, Some(root), src.len(), None)?;
        self.reduce_nb_impl(root, src, Box::new(combine), None)
    }

    fn reduce_nb_impl<T: Pod>(
        &self,
        root: usize,
        src: &[T],
        reducer: Reducer<T>,
        native: Option<Reduction>,
    ) -> Result<CollRequest<'a, T>> {
        self.check_root(root)?;
        let (n, len) = (self.size(), src.len());
        let rel = (self.me + n - root) % n;
        let dst_len = if rel == 0 { len } else { 0 };
        let native = native.map(|reduction| NativeOp::Reduce { root, reduction });
        let bytes = std::mem::size_of_val(src);
        if let Some(r) = self.start_native(Collective::Reduce, bytes, native, src, dst_len)? {
            return Ok(r);
        }
        self.start_schedule(|reserved, chunk| {
            reduce_rounds(reserved, chunk, src, reducer, n, root, rel, dst_len).build()
        })
    }

    /// Nonblocking [`Team::allreduce`] with a built-in operation (a reduction to member 0,
    /// then a broadcast).
    pub fn allreduce_nb<T: Reducible>(&self, src: &[T], op: Op) -> Result<CollRequest<'a, T>> {
        self.check_nb::<T>(Collective::Allreduce, None, src.len(), Some(op))?;
        check_op::<T>(op)?;
        self.allreduce_nb_impl(src, builtin::<T>(op), native_reduction::<T>(op))
    }

    /// [`Team::allreduce_nb`] with a user operation, as [`Team::reduce_nb_with`].
    pub fn allreduce_nb_with<T: Pod>(
        &self,
        src: &[T],
        combine: impl Fn(&mut [T], &[T]) -> Result<()> + 'static,
    ) -> Result<CollRequest<'a, T>> {
        self.check_nb::<T>(Collective::Allreduce, None, src.len(), None)?;
        self.allreduce_nb_impl(src, Box::new(combine), None)
    }

    fn allreduce_nb_impl<T: Pod>(
        &self,
        src: &[T],
        reducer: Reducer<T>,
        native: Option<Reduction>,
    ) -> Result<CollRequest<'a, T>> {
        let (n, len) = (self.size(), src.len());
        let me = self.me;
        let native = native.map(|reduction| NativeOp::Allreduce { reduction });
        let bytes = std::mem::size_of_val(src);
        if let Some(r) = self.start_native(Collective::Allreduce, bytes, native, src, len)? {
            return Ok(r);
        }
        self.start_schedule(|reserved, chunk| {
            let b = reduce_rounds(reserved, chunk, src, reducer, n, 0, me, len);
            broadcast_rounds(b, n, 0, me, len).build()
        })
    }

    /// Nonblocking [`Team::gather`]: the output on `root` is every member's `src` in rank
    /// order; empty elsewhere.
    pub fn gather_nb<T: Pod>(&self, root: usize, src: &[T]) -> Result<CollRequest<'a, T>> {
        self.check_nb::<T>(Collective::Gather, Some(root), src.len(), None)?;
        self.check_root(root)?;
        let (n, len, me) = (self.size(), src.len(), self.me);
        let (op, bytes) = (Some(NativeOp::Gather { root }), std::mem::size_of_val(src));
        let dst_len = if me == root { n * len } else { 0 };
        if let Some(r) = self.start_native(Collective::Gather, bytes, op, src, dst_len)? {
            return Ok(r);
        }
        self.start_schedule(|reserved, chunk| {
            if me == root {
                let first = vec![Local::Copy {
                    from: (Buf::Src, 0..len),
                    to: (Buf::Dst, me * len..(me + 1) * len),
                }];
                let recvs = (0..n)
                    .filter(|&i| i != root)
                    .map(|i| (i, (Buf::Dst, i * len..(i + 1) * len)))
                    .collect();
                Builder::new(reserved, chunk, src, n * len, 0, first)
                    .round(vec![], recvs, vec![])
                    .build()
            } else {
                Builder::new(reserved, chunk, src, 0, 0, vec![])
                    .round(vec![(root, (Buf::Src, 0..len))], vec![], vec![])
                    .build()
            }
        })
    }

    /// Nonblocking [`Team::allgather`] (ring): the output is every member's `src` in rank
    /// order.
    pub fn allgather_nb<T: Pod>(&self, src: &[T]) -> Result<CollRequest<'a, T>> {
        self.check_nb::<T>(Collective::Allgather, None, src.len(), None)?;
        let (n, len, me) = (self.size(), src.len(), self.me);
        let (op, bytes) = (Some(NativeOp::Allgather), std::mem::size_of_val(src));
        if let Some(r) = self.start_native(Collective::Allgather, bytes, op, src, n * len)? {
            return Ok(r);
        }
        self.start_schedule(|reserved, chunk| allgather_rounds(reserved, chunk, src, n, me))
    }

    /// Nonblocking [`Team::scatter`]: `root` passes `size · count` elements (others may
    /// pass an empty `src`); each member's output is its block of `count`.
    pub fn scatter_nb<T: Pod>(
        &self,
        root: usize,
        src: &[T],
        count: usize,
    ) -> Result<CollRequest<'a, T>> {
        self.check_nb::<T>(Collective::Scatter, Some(root), count, None)?;
        self.check_root(root)?;
        let (n, me) = (self.size(), self.me);
        if me == root && src.len() != n * count {
            return Err(length_error("scatter_nb", "src", src.len(), n * count));
        }
        let mine = if me == root { src } else { &[] };
        let (op, bytes) = (
            Some(NativeOp::Scatter { root }),
            count * std::mem::size_of::<T>(),
        );
        if let Some(r) = self.start_native(Collective::Scatter, bytes, op, mine, count)? {
            return Ok(r);
        }
        self.start_schedule(|reserved, chunk| {
            if me == root {
                let first = vec![Local::Copy {
                    from: (Buf::Src, me * count..(me + 1) * count),
                    to: (Buf::Dst, 0..count),
                }];
                let sends = (0..n)
                    .filter(|&i| i != root)
                    .map(|i| (i, (Buf::Src, i * count..(i + 1) * count)))
                    .collect();
                Builder::new(reserved, chunk, src, count, 0, first)
                    .round(sends, vec![], vec![])
                    .build()
            } else {
                Builder::new(reserved, chunk, &[], count, 0, vec![])
                    .round(vec![], vec![(root, (Buf::Dst, 0..count))], vec![])
                    .build()
            }
        })
    }

    /// Nonblocking [`Team::exchange`] (pairwise): block `j` of `src` goes to member `j`;
    /// block `i` of the output came from member `i`.
    pub fn exchange_nb<T: Pod>(&self, src: &[T]) -> Result<CollRequest<'a, T>> {
        self.check_nb::<T>(Collective::Exchange, None, src.len(), None)?;
        let (n, me) = (self.size(), self.me);
        let b = self.block_of("exchange_nb", src.len())?;
        let (op, bytes) = (Some(NativeOp::Exchange), b * std::mem::size_of::<T>());
        if let Some(r) = self.start_native(Collective::Exchange, bytes, op, src, src.len())? {
            return Ok(r);
        }
        let block = move |buf: Buf, j: usize| (buf, j * b..(j + 1) * b);
        self.start_schedule(|reserved, chunk| {
            let first = vec![Local::Copy {
                from: block(Buf::Src, me),
                to: block(Buf::Dst, me),
            }];
            let mut builder = Builder::new(reserved, chunk, src, src.len(), 0, first);
            for s in 1..n {
                let (to, from) = ((me + s) % n, (me + n - s) % n);
                builder = builder.round(
                    vec![(to, block(Buf::Src, to))],
                    vec![(from, block(Buf::Dst, from))],
                    vec![],
                );
            }
            builder.build()
        })
    }

    /// Nonblocking [`Team::exchange_v`] (pairwise): `send_counts[j]` elements of `src` go
    /// to member `j`; the output holds `recv_counts[i]` elements from each member `i`, in
    /// member order.
    ///
    /// ```
    /// use tessera::{Job, Team};
    /// Job::threads(2).segment(8 << 20).run(|ctx| {
    ///     let world = Team::world(ctx)?;
    ///     // Member 0 keeps one element and sends two; member 1 keeps two and sends none.
    ///     let (src, send, recv) = if ctx.rank() == 0 {
    ///         (vec![1u8, 2, 3], [1, 2], [1, 0])
    ///     } else {
    ///         (vec![4u8, 5], [0, 2], [2, 2])
    ///     };
    ///     let got = world.exchange_v_nb(&src, &send, &recv)?.wait()?;
    ///     assert_eq!(got, if ctx.rank() == 0 { vec![1] } else { vec![2, 3, 4, 5] });
    ///     Ok(())
    /// }).unwrap();
    /// ```
    pub fn exchange_v_nb<T: Pod>(
        &self,
        src: &[T],
        send_counts: &[usize],
        recv_counts: &[usize],
    ) -> Result<CollRequest<'a, T>> {
        // Counts differ between members, so the signature leaves them out.
        self.channel.set_call(Signature::new(
            Collective::Exchange,
            Form::Nonblocking,
            None,
            0,
            std::mem::size_of::<T>(),
            None,
        ));
        let recv_total = recv_counts.iter().sum();
        let (so, ro) = self.exchange_v_layout(src.len(), send_counts, recv_total, recv_counts)?;
        let (n, me) = (self.size(), self.me);
        let out = |j: usize| (Buf::Src, so[j]..so[j] + send_counts[j]);
        let into = |i: usize| (Buf::Dst, ro[i]..ro[i] + recv_counts[i]);
        self.start_schedule(|reserved, chunk| {
            let first = vec![Local::Copy {
                from: out(me),
                to: into(me),
            }];
            let mut builder = Builder::new(reserved, chunk, src, recv_total, 0, first);
            for s in 1..n {
                let (to, from) = ((me + s) % n, (me + n - s) % n);
                builder = builder.round(vec![(to, out(to))], vec![(from, into(from))], vec![]);
            }
            builder.build()
        })
    }

    /// Nonblocking [`Team::scan`] (inclusive) with a built-in operation.
    pub fn scan_nb<T: Reducible>(&self, src: &[T], op: Op) -> Result<CollRequest<'a, T>> {
        self.check_nb::<T>(Collective::Scan, None, src.len(), Some(op))?;
        check_op::<T>(op)?;
        self.scan_schedule(src, builtin::<T>(op), native_reduction::<T>(op), false)
    }

    /// Nonblocking [`Team::exscan`]; member 0's output is zeros.
    pub fn exscan_nb<T: Reducible>(&self, src: &[T], op: Op) -> Result<CollRequest<'a, T>> {
        self.check_nb::<T>(Collective::Scan, None, src.len(), Some(op))?;
        check_op::<T>(op)?;
        self.scan_schedule(src, builtin::<T>(op), native_reduction::<T>(op), true)
    }

    /// [`Team::scan_nb`] with a user operation, as [`Team::reduce_nb_with`].
    pub fn scan_nb_with<T: Pod>(
        &self,
        src: &[T],
        combine: impl Fn(&mut [T], &[T]) -> Result<()> + 'static,
    ) -> Result<CollRequest<'a, T>> {
        self.check_nb::<T>(Collective::Scan, None, src.len(), None)?;
        self.scan_schedule(src, Box::new(combine), None, false)
    }

    /// [`Team::exscan_nb`] with a user operation, as [`Team::reduce_nb_with`]; member 0's
    /// output is zeros.
    pub fn exscan_nb_with<T: Pod>(
        &self,
        src: &[T],
        combine: impl Fn(&mut [T], &[T]) -> Result<()> + 'static,
    ) -> Result<CollRequest<'a, T>> {
        self.check_nb::<T>(Collective::Scan, None, src.len(), None)?;
        self.scan_schedule(src, Box::new(combine), None, true)
    }

    /// The linear chain: the prefix arrives from the left in `Tmp`, is combined with `src`
    /// and passed right.
    fn scan_schedule<T: Pod>(
        &self,
        src: &[T],
        reducer: Reducer<T>,
        native: Option<Reduction>,
        exclusive: bool,
    ) -> Result<CollRequest<'a, T>> {
        let (n, len, me) = (self.size(), src.len(), self.me);
        let native = native.map(|reduction| NativeOp::Scan {
            reduction,
            exclusive,
        });
        let bytes = std::mem::size_of_val(src);
        if let Some(r) = self.start_native(Collective::Scan, bytes, native, src, len)? {
            return Ok(r);
        }
        let all = |b: Buf| (b, 0..len);
        self.start_schedule(|reserved, chunk| {
            let mut first = Vec::new();
            if me == 0 {
                first.push(Local::Copy {
                    from: all(Buf::Src),
                    to: all(Buf::Tmp),
                });
                first.push(if exclusive {
                    Local::Zero(all(Buf::Dst))
                } else {
                    Local::Copy {
                        from: all(Buf::Src),
                        to: all(Buf::Dst),
                    }
                });
            }
            let mut b = Builder::new(reserved, chunk, src, len, len, first).reducer(reducer);
            if me > 0 {
                let mut after = Vec::new();
                if exclusive {
                    after.push(Local::Copy {
                        from: all(Buf::Tmp),
                        to: all(Buf::Dst),
                    });
                }
                after.push(Local::Combine {
                    from: all(Buf::Src),
                    into: all(Buf::Tmp),
                });
                if !exclusive {
                    after.push(Local::Copy {
                        from: all(Buf::Tmp),
                        to: all(Buf::Dst),
                    });
                }
                b = b.round(vec![], vec![(me - 1, all(Buf::Tmp))], after);
            }
            if me + 1 < n {
                b = b.round(vec![(me + 1, all(Buf::Tmp))], vec![], vec![]);
            }
            b.build()
        })
    }
}

/// The rounds of a binomial broadcast of `Dst[0..len]` from `root` (this member at
/// relative rank `rel`): receive from the parent, then send to every child.
fn broadcast_rounds<T: Pod>(
    b: Builder<'_, T>,
    n: usize,
    root: usize,
    rel: usize,
    len: usize,
) -> Builder<'_, T> {
    let tree = Knomial::new(2, n, rel);
    let b = match tree.parent {
        Some(p) => b.round(vec![], vec![((p + root) % n, (Buf::Dst, 0..len))], vec![]),
        None => b,
    };
    let sends: Vec<_> = tree
        .children
        .iter()
        .map(|&c| ((c + root) % n, (Buf::Dst, 0..len)))
        .collect();
    if sends.is_empty() {
        b
    } else {
        b.round(sends, vec![], vec![])
    }
}

/// A binomial reduction of `src` to `root` (this member at relative rank `rel`),
/// pipelined in segments of one chunk like the blocking [`Team::reduce`]: the accumulator
/// is `Tmp[0..len]`; segment k from child `i` lands in the `i`-th slot after it, is
/// combined, and the segment goes up before the next one comes in. The root copies the
/// result into `Dst` (of `dst_len` elements here).
#[allow(clippy::too_many_arguments)]
fn reduce_rounds<'r, T: Pod>(
    reserved: &'r mut Reserved,
    chunk: usize,
    src: &[T],
    reducer: Reducer<T>,
    n: usize,
    root: usize,
    rel: usize,
    dst_len: usize,
) -> Builder<'r, T> {
    let len = src.len();
    let tree = Knomial::new(2, n, rel);
    let seg = (chunk / std::mem::size_of::<T>().max(1)).max(1);
    let width = seg.min(len);
    let first = vec![Local::Copy {
        from: (Buf::Src, 0..len),
        to: (Buf::Tmp, 0..len),
    }];
    let tmp_len = len + tree.children.len() * width;
    let mut b = Builder::new(reserved, chunk, src, dst_len, tmp_len, first).reducer(reducer);
    for k in 0..len.div_ceil(seg).max(1) {
        let range = k * seg..((k + 1) * seg).min(len);
        let slot = |i: usize| (Buf::Tmp, len + i * width..len + i * width + range.len());
        if !tree.children.is_empty() {
            let recvs = tree
                .children
                .iter()
                .enumerate()
                .map(|(i, &c)| ((c + root) % n, slot(i)))
                .collect();
            let after = (0..tree.children.len())
                .map(|i| Local::Combine {
                    from: slot(i),
                    into: (Buf::Tmp, range.clone()),
                })
                .collect();
            b = b.round(vec![], recvs, after);
        }
        if let Some(p) = tree.parent {
            b = b.round(vec![((p + root) % n, (Buf::Tmp, range))], vec![], vec![]);
        }
    }
    if tree.parent.is_none() {
        b = b.round(
            vec![],
            vec![],
            vec![Local::Copy {
                from: (Buf::Tmp, 0..len),
                to: (Buf::Dst, 0..len),
            }],
        );
    }
    b
}

/// The conduit's own form of the built-in reduction `op` on `T`, if `T` has one (the
/// operations that apply to primitive numbers are all MPI's too).
fn native_reduction<T: Reducible>(op: Op) -> Option<Reduction> {
    Some(Reduction {
        elem: T::NATIVE?,
        op,
    })
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

fn radix_of(alg: Algorithm, n: usize) -> usize {
    match alg {
        Algorithm::Flat => n.max(2),
        Algorithm::Knomial(k) => k as usize,
        _ => 2,
    }
}

/// A k-nomial tree over relative ranks 0..n rooted at 0.
struct Knomial {
    parent: Option<usize>,
    /// Children.
    children: Vec<usize>,
    /// One past the last relative rank of this node's subtree.
    subtree_end: usize,
}

impl Knomial {
    fn new(radix: usize, n: usize, rel: usize) -> Knomial {
        // p: the largest power of `radix` dividing `rel` (for the root, the power that
        // covers all n); rel's subtree is [rel, rel + p), its parent clears the digit
        // at p, its children are rel + d·q for every lower power q and digit d.
        let mut p = 1;
        if rel == 0 {
            while p < n {
                p *= radix;
            }
        } else {
            while rel.is_multiple_of(p * radix) {
                p *= radix;
            }
        }
        let parent = (rel != 0).then(|| rel - (rel / p % radix) * p);
        let mut children = Vec::new();
        let mut q = 1;
        while q < p {
            for d in 1..radix {
                if rel + d * q < n {
                    children.push(rel + d * q);
                }
            }
            q *= radix;
        }
        Knomial {
            parent,
            children,
            subtree_end: (rel + p).min(n),
        }
    }
}

fn split_range(len: usize, parts: usize, i: usize) -> std::ops::Range<usize> {
    let base = len / parts;
    let extra = len % parts;
    let start = i * base + i.min(extra);
    start..start + base + usize::from(i < extra)
}

/// Every built-in reduction, for naming them in checked-mode reports.
pub(crate) const ALL_OPS: [Op; 11] = [
    Op::Sum,
    Op::Prod,
    Op::Min,
    Op::Max,
    Op::BitAnd,
    Op::BitOr,
    Op::BitXor,
    Op::LogicalAnd,
    Op::LogicalOr,
    Op::MinLoc,
    Op::MaxLoc,
];

/// Refuse an operation that does not apply to `T` before any message moves, so that no
/// member is left waiting for a partner that gave up.
/// A collective call as checked mode compares it: the operation, root, count, element
/// size and reduction, as words.
fn signature(
    op: Collective,
    root: Option<usize>,
    count: usize,
    elem: usize,
    reduction: Option<Op>,
) -> [u64; 5] {
    [
        op.index() as u64,
        root.map_or(u64::MAX, |r| r as u64),
        count as u64,
        elem as u64,
        reduction.map_or(u64::MAX, |r| {
            ALL_OPS.iter().position(|&o| o == r).unwrap_or(0) as u64
        }),
    ]
}

/// Whether every member's [`signature`] (five words each, in team order, in `all`) is the
/// same; if not, an error naming each member's world rank and call.
fn agree(members: &[usize], all: &[u64]) -> Result<()> {
    let n = members.len();
    if (0..n).all(|i| all[5 * i..5 * i + 5] == all[..5]) {
        return Ok(());
    }
    let describe = |d: &[u64]| -> String {
        let name = Collective::ALL.get(d[0] as usize).map_or("?", |c| c.name());
        let root = if d[1] == u64::MAX {
            String::new()
        } else {
            format!("root {}, ", d[1])
        };
        let red = ALL_OPS
            .get(d[4] as usize)
            .map_or(String::new(), |o| format!(", {o:?}"));
        format!("{name}({root}{} elements of {} bytes{red})", d[2], d[3])
    };
    let calls: Vec<String> = (0..n)
        .map(|i| format!("rank {}: {}", members[i], describe(&all[5 * i..5 * i + 5])))
        .collect();
    Err(CoreError::Invalid(format!(
        "collective arguments differ between ranks (checked mode): {}",
        calls.join("; ")
    ))
    .into())
}

/// The rounds of a ring allgather of `src` (`len` elements per member) into `Dst`.
fn allgather_rounds<T: Pod>(
    reserved: &mut Reserved,
    chunk: usize,
    src: &[T],
    n: usize,
    me: usize,
) -> Schedule<T> {
    let len = src.len();
    let block = move |b: usize| (Buf::Dst, (b % n) * len..(b % n + 1) * len);
    let first = vec![Local::Copy {
        from: (Buf::Src, 0..len),
        to: block(me),
    }];
    let mut b = Builder::new(reserved, chunk, src, n * len, 0, first);
    for s in 0..n.saturating_sub(1) {
        b = b.round(
            vec![((me + 1) % n, block(me + n - s))],
            vec![((me + n - 1) % n, block(me + 2 * n - s - 1))],
            vec![],
        );
    }
    b.build()
}

/// The combining function of the built-in operation `op` on `T`, for a schedule.
fn builtin<T: Reducible>(op: Op) -> Reducer<T> {
    Box::new(move |a: &mut [T], x: &[T]| T::reduce(op, a, x))
}

fn check_op<T: Reducible>(op: Op) -> Result<()> {
    T::reduce(op, &mut [], &[])
}

fn length_error(op: &str, arg: &str, got: usize, want: usize) -> crate::Error {
    CoreError::Invalid(format!(
        "{op}: {arg} has {got} elements but {want} are needed"
    ))
    .into()
}

/// Clear `len` bytes at `area` (own segment).
fn zero(ctx: &Context, area: GlobalPtr<u8>, len: usize) -> Result<()> {
    let zeros = vec![0u8; len.min(1 << 20)];
    let mut done = 0;
    while done < len {
        let n = (len - done).min(zeros.len());
        ctx.put(area.add(done), &zeros[..n])?;
        done += n;
    }
    Ok(())
}
