//! Teams and their collective operations.
//!
//! A [`Team`] is an ordered set of ranks that perform collectives together: the world,
//! or any subset made by [`Team::split`] (and [`Team::grid`] for the rows and columns of a
//! process grid). Teams nest: a team can be split again. Creating a team is collective
//! over its parent.
//!
//! Every operation comes in several algorithms ([`Algorithm`]). A tuning table
//! (`tessera tune`) picks one from the team size and message size; where there is none,
//! the team tunes online: its first calls of an operation at a size try the candidates
//! and the members agree on the fastest ([`Team::online_decisions`]); with
//! `TESSERA_TUNING=none`, and for what the table or the trials leave open, a cost model
//! picks the algorithm with the least predicted time from the machine's parameters
//! (`cost` module; [`MachineParams`], calibrated by `tessera tune --calibrate`). `TESSERA_COLL_<OPERATION>=<algorithm>` (for example
//! `TESSERA_COLL_ALLREDUCE=ring`) or [`Team::with_algorithm`] forces one. Data moves as
//! signalling puts into per-member mailboxes (see the `channel` module), so the
//! collectives work on any conduit. On the mpi conduit every team also has a communicator
//! of its own, and [`Algorithm::NATIVE`] runs MPI's collective on it; the model uses it
//! for teams that span hosts.
//!
//! A collective is a value ([`operations`], exported as `tessera::coll`) that
//! [`Team::run`] runs with a completion: [`Blocking`](crate::Blocking), or
//! [`Nonblocking`](crate::Nonblocking) (a [`CollRequest`], a [`CollHandle`] for the
//! single-address forms, or an [`operations::Landing`] for output into the caller's
//! buffer). Every member must run the same operations in the same order with matching
//! arguments (roots, counts, operation). Mismatched lengths are
//! detected and reported. Reduction operations must be associative and commutative
//! (floating-point results may differ in the last bits between algorithms). A built-in
//! operation that does not apply to the element type is refused before anything moves. A
//! user operation that fails mid-way ends the job: its partners would otherwise wait for
//! it (the watchdog, `TESSERA_WAIT_TIMEOUT`, names them).
//!
//! This module must never touch another rank's memory except through the channel.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::fmt;
use std::rc::Rc;
use std::str::FromStr;

use bytemuck::Pod;

use super::ops::{Combine, Op, Reducible};
use crate::core::alloc::Arena;
use crate::core::native::{NativeCall, NativeGroup, NativeOp};
use crate::error::CoreError;
use crate::reduction::Reduction;
use crate::{Context, GlobalPtr, Result};
use algorithms::Call;
pub use channel::DIRECT_FROM;
use channel::{area_len, CallGuard, Channel, Incoming, Outgoing, DEFAULT_CHUNK};
use reserved::{CallShape, PlanKey, Reserved};
use schedule::{Builder, Checked, NativePending, Pending, Reducer};
use signature::{Form, Reduction as SigReduction, Signature};
use tuning::Rules;

mod addressed;
mod algorithms;
pub mod calibration;
mod channel;
mod checked;
pub mod cost;
mod engine;
mod movement;
mod nonblocking;
mod online;
pub mod operations;
mod reduction;
mod registry;
mod reserved;
mod schedule;
mod signature;
mod small;
mod topology;
pub mod tuning;

pub use calibration::{Calibration, CalibrationEntry};
pub use cost::{MachineParams, Shape, Work, PIPELINED_CALLS, PROBES};
pub use nonblocking::{CollHandle, CollRequest};
use nonblocking::{NonblockingState, Schedules};
use reduction::native_reduction;
pub(crate) use registry::check_supported;
pub use registry::{default_algorithm, registry, Algorithm, Collective, Row};
use registry::{forced_from_env, Forced};
use signature::ALL_OPS;

/// Check the team layer's settings as a team would read them: every `TESSERA_COLL_<OP>`
/// (operation and algorithm) and `TESSERA_TUNING` (the table is read and checked).
pub(crate) fn check_settings() -> Result<()> {
    registry::check_forced_env()?;
    calibration::in_force()?;
    tuning::in_force().map(|_| ())
}

/// The cost model's last choices per operation ([`Collective::ALL`] order), each with the
/// message size it was for, the most recent first: a program that alternates a few sizes
/// prices each once.
type ModelMemo = [std::cell::Cell<[Option<(usize, Algorithm)>; MODEL_MEMO]>; Collective::ALL.len()];

/// Choices the model remembers per operation.
const MODEL_MEMO: usize = 4;

/// A team of ranks that performs collectives together. See the [module docs](self).
///
/// ```
/// use tessera::{Job, Op, Team};
/// use tessera::coll::Allreduce;
/// use tessera::Blocking;
/// Job::threads(4).segment(8 << 20).run(|ctx| {
///     let world = Team::world(ctx)?;
///     let total = world.run(Allreduce::value(ctx.rank() as u64 + 1, Op::Sum), Blocking)?;
///     assert_eq!(total, 10);
///     let (row, col) = world.grid(2, 2)?;
///     assert_eq!(row.run(Allreduce::value(1u32, Op::Sum), Blocking)?, 2);
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
    tuned: Option<Rc<[Option<Rules>; Collective::ALL.len()]>>,
    /// The online tuner's decisions and trials, if the team tunes online (shared by the
    /// copies [`Team::with_algorithm`] and [`Team::with_sync`] make, as the channel is).
    online: Option<Rc<RefCell<online::OnlineTuner>>>,
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
    /// The cost model's machine parameters for this team's size and regime (its
    /// calibration, or the built-in set).
    params: MachineParams,
    /// The model's recent choices per operation (see [`ModelMemo`]).
    model_memo: Rc<ModelMemo>,
    /// The tree of the last rooted single-address call.
    last_tree: Rc<addressed::LastTree>,
    /// The last final choice of algorithm (see [`LastChoice`]).
    last_choice: Cell<Option<LastChoice>>,
    /// How the team's long messages travel (agreed when the world team is made).
    long: LongMessages,
    /// Whether the blocking call in progress sends its long messages through the mailbox:
    /// the team's way, except in a call online tuning sends the other way.
    call_via_mailbox: Cell<bool>,
}

/// How a team's long messages (from [`DIRECT_FROM`] bytes) travel between members that can
/// read each other's memory directly (see [`Team::probe_direct_reads`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct LongMessages {
    /// Through the mailbox (two copies) rather than read directly (one), by default: the
    /// calibration's verdict for the team's size and regime.
    via_mailbox: bool,
    /// Online tuning tries both ways for each size class above [`DIRECT_FROM`] bytes: the
    /// members can read directly and `TESSERA_DIRECT` does not fix the way.
    tried: bool,
}

/// A final choice of algorithm (forced, or decided by the online tuner, which never
/// revisits a decision) for a call of `op` with `bytes` per member: a loop of the same
/// call takes it from here instead of looking it up again (some 100 instructions of an
/// 8-byte barrier's 330 at 2 ranks went to the lookup). Only final choices are kept, so a
/// table's or the model's choice, which the tuner may still overrule, is looked up each
/// time.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct LastChoice {
    op: Collective,
    bytes: usize,
    native_ok: bool,
    alg: Algorithm,
}

/// Register the end-of-job check of a team's inbox (when the team is made, so that teams
/// still alive at the end, as a C library's are, are checked too): a message some member
/// sent that this member never received means the members' collective calls did not
/// match (a broadcast whose roots differed, a call one member skipped), which the job
/// then reports instead of ending with wrong results.
fn audit_at_end_of_job(ctx: &Context, channel: Rc<Channel>) {
    ctx.at_end_of_job(Box::new(move |ctx: &Context| {
        let audit = channel.audit();
        let senders = audit.unreceived(ctx)?;
        if senders.is_empty() {
            return Ok(());
        }
        let sent: Vec<String> = senders
            .iter()
            .map(|(rank, call)| format!("world rank {rank} in {call}"))
            .collect();
        let last = match audit.last_call.0 {
            0 => "made no collective call on the team".to_string(),
            _ => format!("was last in {}", audit.last_call),
        };
        Err(CoreError::CollectiveMismatch(format!(
            "{} sent world rank {} team messages it never received; world rank {} {last}",
            sent.join(" and "),
            ctx.rank(),
            ctx.rank()
        ))
        .into())
    }));
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
    /// Synchronisation on entry.
    pub input: SyncMode,
    /// Synchronisation on exit.
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

/// The processors online on this host: more ranks of one host than these put a team in
/// the crowded regime, and its cost model queues their messages on these.
fn online_processors() -> usize {
    nix::unistd::sysconf(nix::unistd::SysconfVar::_NPROCESSORS_ONLN)
        .ok()
        .flatten()
        .map_or(1, |c| c.max(1) as usize)
}

/// The tuning table's rules for a team of `size`, per operation, if a table is in force.
fn tuned_rules(size: usize) -> Result<Option<Rc<[Option<Rules>; Collective::ALL.len()]>>> {
    Ok(tuning::in_force()?
        .table
        .map(|table| resolved_rules(table, size)))
}

/// `table`'s rules for a team of `size`, per operation (parsed once, for every call).
fn resolved_rules(
    table: &tuning::TuningTable,
    size: usize,
) -> Rc<[Option<Rules>; Collective::ALL.len()]> {
    Rc::new(Collective::ALL.map(|op| table.rules_for(op, size)))
}

/// A fresh online tuner for a team of `size`, if teams tune online (a team of one has
/// nothing to tune).
fn online_tuner(size: usize) -> Result<Option<Rc<RefCell<online::OnlineTuner>>>> {
    Ok((tuning::in_force()?.online && size > 1).then(Default::default))
}

impl<'a> Team<'a> {
    /// The team of every rank. Collective over all ranks; create it once and reuse it
    /// (each team keeps a mailbox area in every member's segment).
    pub fn world(ctx: &'a Context) -> Result<Team<'a>> {
        let _counted_as_collective = ctx.stats_scope(true);
        let n = ctx.ranks();
        let area = ctx.alloc_zeroed::<u8>(Arena::Collective, area_len(n, DEFAULT_CHUNK))?;
        channel::touch_own_area(ctx, area, area_len(n, DEFAULT_CHUNK))?;
        ctx.barrier()?; // nobody writes into a mailbox before its owner has cleared it
        let areas = (0..n).map(|r| area.on(r)).collect();
        let native = NativeGroup::world(ctx)?;
        let mut team = Team::build(ctx, (0..n).collect(), ctx.rank(), areas, native)?;
        let (crowded, long) = team.probe_direct_reads()?;
        team.set_long_messages(long);
        team.set_crowded(crowded)?;
        // Online trials time calls; where ranks wait for a core, they time the scheduler
        // more than the algorithms (4 ranks on 2 cores: online tuning's choice was within
        // 10 % of the best fixed algorithm at 54-64 of 78 points, the cost model's at
        // 73-75), so there the default is the model unless online tuning is asked for.
        // Teams split from this one follow it.
        if crowded && !tuning::in_force()?.online_asked {
            team.online = None;
        }
        Ok(team)
    }

    /// Find out whether members of this host can read each other's long messages directly
    /// (`core::direct`), and agree: every member reads a word from every mapped member,
    /// and direct reads go on only where every read worked everywhere and no member has
    /// them off (`TESSERA_DIRECT=off`). Agreed too: which way long messages go by default
    /// (`TESSERA_DIRECT`, else the calibration in force for this team's size and regime,
    /// else read directly), whether online tuning may try the other way (where no member
    /// has `TESSERA_DIRECT` set), and whether some member's host runs more of the team's
    /// ranks than it has processors (the first result). Collective.
    fn probe_direct_reads(&self) -> Result<(bool, LongMessages)> {
        let n = self.size();
        if n == 1 {
            return Ok((false, LongMessages::default()));
        }
        let mapped = |i: usize| {
            self.ctx
                .is_addressable(GlobalPtr::<u8>::new(self.members[i], 0))
        };
        let sharing = (0..n).filter(|&i| mapped(i)).count();
        let processors = online_processors();
        let set = crate::config::switch("TESSERA_DIRECT")?;
        let wanted = match set {
            Some(wanted) => wanted,
            None => calibration::direct_reads_for(n, sharing > processors)?,
        };
        // `TESSERA_DIRECT=off` means never; the calibration's verdict only the default.
        let allowed = set != Some(false);
        // Each member's word holds a value of its own, so a read of the wrong place fails.
        let value = |member: usize| 0x5445_5353_4552_4100 ^ member as u64;
        let probe = crate::core::direct::Probe::new(value(self.me));
        let range = probe.range();
        let mut all = vec![0u64; 3 * n];
        self.allgather(&[range.pid, range.addr, range.bytes], &mut all)?;
        let works = allowed
            && (0..n).filter(|&i| i != self.me && mapped(i)).all(|i| {
                let peer = crate::core::direct::RemoteRange {
                    pid: all[3 * i],
                    addr: all[3 * i + 1],
                    bytes: all[3 * i + 2],
                };
                crate::core::direct::Probe::reads(peer, value(i))
            });
        // Every member's word stays alive until every member has read it: this agreement
        // comes after every read.
        let mut agreed = [0u64; 4];
        let local = [works, sharing <= processors, wanted, set.is_none()].map(u64::from);
        self.allreduce(&local, &mut agreed, Op::Min)?;
        let (everywhere, crowded) = (agreed[0] == 1, agreed[1] == 0);
        let long = LongMessages {
            via_mailbox: everywhere && agreed[2] == 0,
            tried: everywhere && agreed[3] == 1,
        };
        drop(probe);
        let direct: Vec<bool> = (0..n)
            .map(|i| everywhere && i != self.me && mapped(i))
            .collect();
        self.channel.set_direct(&direct);
        // Splitting a long message's copy between both cores makes the call faster, but the
        // half the sender wrote sits in the sender's cache, and a receiver that reads it
        // soon pays more than the split saved, unless the message is too large for its
        // cache to keep anyway (protocol::split): by default from 1 MiB; asked for, from
        // 32 KiB; off, never.
        let split = match crate::config::switch("TESSERA_DIRECT_SPLIT")? {
            Some(true) => Some(crate::protocol::split::SPLIT_FROM),
            Some(false) => None,
            None => Some(crate::protocol::split::DEFAULT_SPLIT_FROM),
        };
        self.channel.set_split(split.filter(|_| everywhere));
        Ok((crowded, long))
    }

    /// Send long messages `long`'s way from now on (every member alike).
    fn set_long_messages(&mut self, long: LongMessages) {
        self.long = long;
        self.call_via_mailbox.set(long.via_mailbox);
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
        channel.map_peer_pages(ctx)?;
        audit_at_end_of_job(ctx, channel.clone());
        let team = Team {
            ctx,
            members: Rc::new(members),
            me,
            channel,
            forced: forced_from_env()?,
            tuned: tuned_rules(size)?,
            online: online_tuner(size)?,
            sync: DataSync::default(),
            nb: Rc::new(RefCell::new(NonblockingState {
                unsent: vec![0; size],
                expected: vec![0; size],
                received: vec![0; size],
            })),
            native: native.map(Rc::new),
            schedules: Rc::new(RefCell::new(Schedules::default())),
            spans_hosts,
            params: calibration::params_for(size, false)?,
            model_memo: Rc::default(),
            last_tree: Rc::default(),
            last_choice: Cell::new(None),
            long: LongMessages::default(),
            call_via_mailbox: Cell::new(false),
        };
        if team.forced.contains(&Some(Algorithm::NATIVE)) {
            team.check_available(Algorithm::NATIVE)?;
        }
        Ok(team)
    }

    /// The algorithm a call of `op` with `bytes` per member would use on this team: the
    /// forced one, else the online tuner's decision, else the tuning table's, else the
    /// model's. (A call that cannot use
    /// [`Algorithm::NATIVE`], such as a user reduction, falls back to the model's choice
    /// instead; this reports what an eligible call gets.)
    ///
    /// ```
    /// use tessera::{Algorithm, Collective, Job, Team};
    /// Job::threads(2).segment(8 << 20).run(|ctx| {
    ///     let world = Team::world(ctx)?;
    ///     let ring = world.with_algorithm(Collective::Allreduce, Algorithm::RING)?;
    ///     assert_eq!(ring.algorithm_for(Collective::Allreduce, 8), Algorithm::RING);
    ///     Ok(())
    /// }).unwrap();
    /// ```
    pub fn algorithm_for(&self, op: Collective, bytes: usize) -> Algorithm {
        self.choose(op, bytes, true)
    }

    /// The algorithms this team can run `op` with: the operation's own
    /// ([`Collective::algorithms`]) and, on a conduit with collectives of its own (mpi),
    /// [`Algorithm::NATIVE`].
    ///
    /// ```
    /// use tessera::{Algorithm, Collective, Job, Team};
    /// Job::threads(2).segment(8 << 20).run(|ctx| {
    ///     let world = Team::world(ctx)?;
    ///     let algs = world.algorithms(Collective::Allreduce);
    ///     assert!(algs.contains(&Algorithm::RING));
    ///     assert!(!algs.contains(&Algorithm::NATIVE)); // threads has no MPI
    ///     Ok(())
    /// }).unwrap();
    /// ```
    pub fn algorithms(&self, op: Collective) -> Vec<Algorithm> {
        let mut algs = op.algorithms();
        if self.native.is_some() && !op.is_single_address() {
            algs.push(Algorithm::NATIVE);
        }
        algs
    }

    /// What a tuner tries for `op` on this team: [`Collective::candidates`] and, on a
    /// conduit with collectives of its own (mpi), [`Algorithm::NATIVE`].
    ///
    /// ```
    /// use tessera::{Algorithm, Collective, Job, Team};
    /// Job::threads(2).segment(8 << 20).run(|ctx| {
    ///     let world = Team::world(ctx)?;
    ///     assert!(world.candidates(Collective::Broadcast).contains(&Algorithm::knomial(4)));
    ///     Ok(())
    /// }).unwrap();
    /// ```
    pub fn candidates(&self, op: Collective) -> Vec<Algorithm> {
        let mut algs = op.candidates();
        if self.native.is_some() && !op.is_single_address() {
            algs.push(Algorithm::NATIVE);
        }
        algs
    }

    /// An error unless this team can run `alg` at all.
    fn check_available(&self, alg: Algorithm) -> Result<()> {
        if alg == Algorithm::NATIVE && self.native.is_none() {
            return Err(CoreError::BadArgument { call: "Team::with_algorithm", argument: "algorithm", why: format!(
                "algorithm native calls the conduit's own collectives, and the {} conduit has none; run on the mpi conduit (--conduit mpi) or choose another algorithm",
                self.ctx.conduit_kind()
            ) }
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
            last_choice: Cell::new(None),
            ..self.clone()
        })
    }

    /// Whether this member shares the copy of long messages read directly with their
    /// other end, from 32 KiB (`true`) or never (`false`): as receiver it copies the first
    /// half and posts where the second goes, as sender it writes that half while it would
    /// otherwise only wait for the read. The call is faster (a 1 MiB broadcast at 2 ranks
    /// 2.2× on a Xeon), but the sender's half then sits in the sender's cache, so a
    /// receiver that reads the data soon pays more than the split saved where the whole
    /// message would have stayed in its cache (2× slower broadcast-then-read at 256 KiB,
    /// docs/PERFORMANCE.md); and where ranks outnumber cores the receiver may wait for its
    /// sender to get one. By default (`TESSERA_DIRECT_SPLIT` unset) messages of 1 MiB or
    /// more are split, where the receiver's cache would not keep the whole anyway.
    /// Results are the same either way, and members need not agree (a half nobody claims
    /// is read by its receiver). It applies to every team sharing this team's channel (its
    /// copies and subsets).
    ///
    /// ```
    /// use tessera::{Job, Team};
    /// use tessera::coll::Broadcast;
    /// use tessera::Blocking;
    /// Job::threads(2).segment(16 << 20).run(|ctx| {
    ///     let world = Team::world(ctx)?;
    ///     world.set_split_copies(true);
    ///     let mut data = vec![ctx.rank() as u64; 1 << 17]; // 1 MiB
    ///     world.run(Broadcast::in_place(0, &mut data), Blocking)?;
    ///     assert!(data.iter().all(|&x| x == 0));
    ///     assert!(world.split_copies());
    ///     Ok(())
    /// }).unwrap();
    /// ```
    pub fn set_split_copies(&self, on: bool) {
        let from = (on && self.channel.any_direct()).then_some(crate::protocol::split::SPLIT_FROM);
        self.channel.set_split(from);
    }

    /// Whether this member shares the copy of some long messages read directly (see
    /// [`Team::set_split_copies`]; by default those of 1 MiB or more).
    pub fn split_copies(&self) -> bool {
        self.channel.split()
    }

    /// Halves of long messages this member has written into the buffers of the members
    /// reading them (see [`Team::set_split_copies`]), over every team sharing this team's
    /// channel.
    pub fn split_halves_written(&self) -> u64 {
        self.channel.halves_written()
    }

    /// This team tuning online from now on, with a tuner of its own (whatever
    /// `TESSERA_TUNING` says; see [`Team::online_decisions`]). Every member must make the
    /// copy at the same point of its calls. The copy shares the team's channel, so it must
    /// be used in the same collective order.
    ///
    /// ```
    /// use tessera::{Collective, Job, Op, Team};
    /// use tessera::coll::Allreduce;
    /// use tessera::Blocking;
    /// Job::threads(2).segment(8 << 20).run(|ctx| {
    ///     let world = Team::world(ctx)?.with_online_tuning();
    ///     for _ in 0..400 {
    ///         assert_eq!(world.run(Allreduce::value(1u64, Op::Sum), Blocking)?, 2);
    ///     }
    ///     let decided = world.online_decisions();
    ///     assert!(decided.iter().any(|&(op, bytes, _)| op == Collective::Allreduce && bytes == 8));
    ///     Ok(())
    /// }).unwrap();
    /// ```
    pub fn with_online_tuning(&self) -> Team<'a> {
        Team {
            online: (self.size() > 1).then(Default::default),
            last_choice: Cell::new(None),
            ..self.clone()
        }
    }

    /// This team following `table` (instead of the table or online tuner in force): every
    /// unforced choice is the table's rule for the operation at this team's size (the
    /// entry of the nearest team size), the model's where the table has none. Every
    /// member must pass the same table.
    ///
    /// ```
    /// use tessera::model::tuning::{Entry, Rule, TuningTable};
    /// use tessera::{Algorithm, Collective, Job, Team};
    /// let table = TuningTable {
    ///     machine: String::new(),
    ///     entries: vec![Entry {
    ///         op: "allreduce".into(),
    ///         team_size: 2,
    ///         rules: vec![Rule { up_to_bytes: None, algorithm: "ring".into() }],
    ///     }],
    /// };
    /// Job::threads(2).segment(8 << 20).run(|ctx| {
    ///     let world = Team::world(ctx)?.with_tuning_table(&table);
    ///     assert_eq!(world.algorithm_for(Collective::Allreduce, 8), Algorithm::RING);
    ///     Ok(())
    /// }).unwrap();
    /// ```
    pub fn with_tuning_table(&self, table: &tuning::TuningTable) -> Team<'a> {
        Team {
            tuned: Some(resolved_rules(table, self.size())),
            online: None,
            last_choice: Cell::new(None),
            ..self.clone()
        }
    }

    /// This team with the single-address forms synchronising as `input` on entry and
    /// `output` on exit (see [`SyncMode`]). The copy shares the team's channel, so it must
    /// be used in the same collective order.
    ///
    /// ```
    /// use tessera::coll::{Allgather, Barrier};
    /// use tessera::{Blocking, Job, SyncMode, Team};
    /// Job::threads(2).segment(8 << 20).run(|ctx| {
    ///     let world = Team::world(ctx)?;
    ///     let buf = ctx.alloc_collective::<u64>(2)?;
    ///     // Destinations are ready (nothing else uses buf): no entry barrier; read after
    ///     // our own barrier.
    ///     let loose = world.with_sync(SyncMode::No, SyncMode::No);
    ///     let dsts = world.symmetric(buf);
    ///     loose.run(Allgather::new(&[ctx.rank() as u64]).to_symmetric(&dsts), Blocking)?;
    ///     world.run(Barrier, Blocking)?;
    ///     let mut got = [9u64; 2];
    ///     ctx.get(buf, &mut got, Blocking)?;
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
        let _counted_as_collective = self.ctx.stats_scope(true);
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
                let area = self.ctx.alloc_zeroed::<u8>(Arena::Local, len)?;
                channel::touch_own_area(self.ctx, area, len)?;
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
        let direct: Vec<bool> = group
            .iter()
            .map(|&(_, i)| self.channel.direct_with(i))
            .collect();
        let mut team = Team::build(self.ctx, members, me, areas, native)?;
        team.channel.set_direct(&direct);
        team.set_long_messages(self.long);
        team.forced = self.forced;
        team.set_crowded(self.shares_cores())?;
        // A team whose parent does not tune online (a crowded host's default) does not.
        if self.online.is_none() {
            team.online = None;
        }
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
    /// use tessera::coll::{Barrier, Allreduce};
    /// use tessera::Blocking;
    /// Job::threads(4).segment(8 << 20).run(|ctx| {
    ///     let world = Team::world(ctx)?;
    ///     if ctx.rank() % 2 == 0 {
    ///         // Ranks 0 and 2 only; 1 and 3 go on without them.
    ///         let evens = world.subset(&[0, 2])?;
    ///         assert_eq!(evens.run(Allreduce::value(ctx.rank() as u64, Op::Sum), Blocking)?, 2);
    ///     }
    ///     world.run(Barrier, Blocking)?;
    ///     Ok(())
    /// }).unwrap();
    /// ```
    pub fn subset(&self, members: &[usize]) -> Result<Team<'a>> {
        let n = self.size();
        let mut seen = vec![false; n];
        for &m in members {
            if m >= n || std::mem::replace(&mut seen[m], true) {
                return Err(CoreError::BadArgument {
                    call: "Team::subset",
                    argument: "members",
                    why: format!(
                    "subset: member {m} is {} (this team has members 0..{n}, each at most once)",
                    if m >= n {
                        "not a member"
                    } else {
                        "listed twice"
                    }
                ),
                }
                .into());
            }
        }
        let Some(me) = members.iter().position(|&m| m == self.me) else {
            return Err(CoreError::BadArgument {
                call: "Team::subset",
                argument: "members",
                why: format!(
                "subset: this member ({}) is not in {members:?}; only the subset's members make it",
                self.me
            ),
            }
            .into());
        };
        let size = members.len();
        Ok(Team {
            ctx: self.ctx,
            members: Rc::new(members.iter().map(|&m| self.members[m]).collect()),
            me,
            channel: Rc::new(self.channel.subset(members)),
            forced: self.forced,
            tuned: tuned_rules(size)?,
            online: if self.online.is_some() {
                online_tuner(size)?
            } else {
                None
            },
            sync: self.sync,
            nb: Rc::new(RefCell::new(NonblockingState {
                unsent: vec![0; size],
                expected: vec![0; size],
                received: vec![0; size],
            })),
            schedules: Rc::new(RefCell::new(Schedules::default())),
            native: None,
            spans_hosts: self.spans_hosts,
            params: calibration::params_for(size, self.shares_cores())?,
            model_memo: Rc::default(),
            last_tree: Rc::default(),
            last_choice: Cell::new(None),
            long: self.long,
            call_via_mailbox: Cell::new(self.long.via_mailbox),
        })
    }

    /// The row and column teams of a `rows × cols` process grid laid out row-major over
    /// this team (member r sits at row r / cols, column r % cols). Collective.
    pub fn grid(&self, rows: usize, cols: usize) -> Result<(Team<'a>, Team<'a>)> {
        if rows * cols != self.size() {
            return Err(CoreError::BadArgument {
                call: "Team::grid",
                argument: "rows",
                why: format!(
                    "a {rows}×{cols} grid needs {} members; this team has {}",
                    rows * cols,
                    self.size()
                ),
            }
            .into());
        }
        let (row, col) = (self.me / cols, self.me % cols);
        let row_team = self.split(Some(row as u32), col as u64)?.expect("in a row");
        let col_team = self
            .split(Some(col as u32), row as u64)?
            .expect("in a column");
        Ok((row_team, col_team))
    }

    /// The algorithm for `op` with `bytes` per member: forced, else the online tuner's
    /// decision, else the tuning table's, else the model's; then [`Team::usable`].
    fn choose(&self, op: Collective, bytes: usize, native_ok: bool) -> Algorithm {
        self.choose_or_trial(op, bytes, native_ok, false).0
    }

    /// [`Team::choose`], except that a blocking call (`may_trial`) is an online-tuning
    /// trial while the members are still trying: then the trial's candidate, and the
    /// trial to end after the call.
    #[inline]
    fn choose_or_trial(
        &self,
        op: Collective,
        bytes: usize,
        native_ok: bool,
        may_trial: bool,
    ) -> (Algorithm, Option<online::Trial>) {
        if let Some(last) = self.last_choice.get() {
            if last.op == op && last.bytes == bytes && last.native_ok == native_ok {
                return (self.noted(op, bytes, last.alg), None);
            }
        }
        let (chosen, trial, last) = match self.forced[op.index()] {
            Some(alg) => (alg, None, true),
            None => match self.online_choice(op, bytes, native_ok, may_trial) {
                online::Choice::Decided(alg) => (alg, None, true),
                online::Choice::Trial(trial) => (trial.algorithm, Some(trial), false),
                online::Choice::Open => (
                    self.table_choice(op, bytes)
                        .unwrap_or_else(|| self.model(op, bytes)),
                    None,
                    false,
                ),
            },
        };
        let alg = self.usable(op, bytes, native_ok, chosen);
        // A final choice that needed no stand-in for MPI's own (whose stand-in is the
        // model's, and so may change) is kept for the next call.
        if last && alg == chosen {
            self.last_choice.set(Some(LastChoice {
                op,
                bytes,
                native_ok,
                alg,
            }));
        }
        (alg, trial)
    }

    /// `alg`, unless it is [`Algorithm::NATIVE`] and this call cannot use it (see
    /// [`Team::can_use_native`]), when the model's choice instead; recorded as the call's
    /// algorithm.
    #[inline]
    fn usable(&self, op: Collective, bytes: usize, native_ok: bool, alg: Algorithm) -> Algorithm {
        let alg = if alg == Algorithm::NATIVE && !self.can_use_native(bytes, native_ok) {
            self.local_model(op, bytes)
        } else {
            alg
        };
        self.noted(op, bytes, alg)
    }

    /// `alg`, recorded as the call's algorithm (and counted, with statistics on).
    #[inline]
    fn noted(&self, op: Collective, bytes: usize, alg: Algorithm) -> Algorithm {
        self.channel.record_algorithm(alg);
        if self.ctx.counts_communication() {
            let algorithm = (alg.stem(), alg.radix().unwrap_or(0));
            self.ctx
                .count_collective(op.name(), algorithm, bytes, || alg.to_string());
        }
        alg
    }

    /// Whether a call with `bytes` per member can run MPI's own collective: this team has
    /// it, the call can use it (`native_ok`: a built-in reduction on a primitive type,
    /// equal blocks) and MPI can express the count.
    #[inline]
    fn can_use_native(&self, bytes: usize, native_ok: bool) -> bool {
        let fits = bytes.saturating_mul(self.size()) <= i32::MAX as usize;
        native_ok && fits && self.native.is_some()
    }

    /// The tuning table's choice for `op` with `bytes` per member, if a table is in force
    /// and has an entry for `op`.
    fn table_choice(&self, op: Collective, bytes: usize) -> Option<Algorithm> {
        tuning::rule_for(self.tuned.as_ref()?[op.index()].as_deref()?, bytes)
    }

    /// The model's choice: on a team that spans hosts and has the conduit's own
    /// collectives, those for every operation they implement (MPI's beat messages built
    /// from one-sided operations between hosts at every measured size,
    /// docs/PERFORMANCE.md); otherwise the cost model's ([`Team::local_model`]).
    fn model(&self, op: Collective, bytes: usize) -> Algorithm {
        if self.spans_hosts && self.native.is_some() && !op.is_single_address() {
            Algorithm::NATIVE
        } else {
            self.local_model(op, bytes)
        }
    }

    /// Put this team in the crowded regime or not ([`Team::shares_cores`]), with the cost
    /// model's parameters for its size in that regime.
    fn set_crowded(&mut self, crowded: bool) -> Result<()> {
        self.channel.set_crowded(crowded);
        self.params = calibration::params_for(self.size(), crowded)?;
        Ok(())
    }

    /// The cost model's choice among the team's own algorithms: the least predicted time
    /// with this team's parameters, for members that read each other's long messages
    /// directly or not.
    pub(super) fn local_model(&self, op: Collective, bytes: usize) -> Algorithm {
        let memo = &self.model_memo[op.index()];
        let mut kept = memo.get();
        if let Some((_, alg)) = kept.iter().flatten().find(|(b, _)| *b == bytes) {
            return *alg;
        }
        let alg = self
            .params
            .choose(op, self.size(), bytes, self.reads_directly());
        kept.rotate_right(1);
        kept[0] = Some((bytes, alg));
        memo.set(kept);
        alg
    }

    /// Whether some host of this team's job runs more ranks than it has processors (the
    /// cost model's crowded regime; agreed when the world team was made, inherited by the
    /// teams made from it, and kept by the team's channel, where schedules read it too).
    pub fn shares_cores(&self) -> bool {
        self.channel.crowded()
    }

    /// Whether this team's members read each other's long messages directly (see
    /// `core::direct`) by default: they can, and neither `TESSERA_DIRECT` nor the
    /// calibration in force sends them through the mailbox. (With online tuning, a size
    /// class may go the other way: [`Team::long_messages_via_mailbox`].)
    pub fn reads_directly(&self) -> bool {
        self.channel.all_direct() && !self.long.via_mailbox
    }

    /// The cost model's machine parameters for this team: its calibration's (`tessera tune
    /// --calibrate`) or the built-in set for its host.
    pub fn cost_params(&self) -> MachineParams {
        self.params
    }

    /// The cost model's predicted microseconds for one call of `op` by `alg` with `bytes`
    /// per member on this team, in a loop of such calls (None for an algorithm the model
    /// does not price, such as [`Algorithm::NATIVE`]).
    ///
    /// ```
    /// use tessera::{Algorithm, Collective, Job, Team};
    /// Job::threads(2).segment(8 << 20).run(|ctx| {
    ///     let world = Team::world(ctx)?;
    ///     let t = world.predicted_us(Collective::Barrier, Algorithm::DISSEMINATION, 0);
    ///     assert!(t.is_some_and(|us| us > 0.0));
    ///     Ok(())
    /// }).unwrap();
    /// ```
    pub fn predicted_us(&self, op: Collective, alg: Algorithm, bytes: usize) -> Option<f64> {
        let shape = Shape {
            members: self.size(),
            bytes,
            radix: 2,
        };
        self.params.predict(op, alg, shape, self.reads_directly())
    }

    /// [`Team::native`] over buffers of any plain type.
    fn native_of<T: Pod>(&self, op: NativeOp, src: &[T], dst: &mut [T]) -> Result<()> {
        self.native(op, bytemuck::cast_slice(src), bytemuck::cast_slice_mut(dst))
    }

    /// Run `call` with the conduit's own collectives (after `choose` said `Native`).
    fn native(&self, op: NativeOp, src: &[u8], dst: &mut [u8]) -> Result<()> {
        self.native
            .as_ref()
            .expect("choose returns Native only where the team has a group")
            .run(NativeCall { op, src, dst })
    }

    // ----- message helpers ------------------------------------------------------------

    fn sendrecv<T: Pod>(&self, to: usize, data: &[T], from: usize, out: &mut [T]) -> Result<()> {
        self.channel.sendrecv(
            self.ctx,
            to,
            bytemuck::cast_slice(data),
            from,
            bytemuck::cast_slice_mut(out),
        )
    }
}

/// Refuse an operation that does not apply to `T` before any message moves, so that no
/// member is left waiting for a partner that gave up.
fn check_op<T: Reducible>(op: Op) -> Result<()> {
    T::reduce(op, &mut [], &[])
}

fn length_error(op: &'static str, arg: &'static str, got: usize, want: usize) -> crate::Error {
    CoreError::BadArgument {
        call: op,
        argument: arg,
        why: format!("{op}: {arg} has {got} elements but {want} are needed"),
    }
    .into()
}
