//! The conduit layer: how bytes move between ranks.
//!
//! A [`Conduit`] is the boundary between the runtime and the machine. It knows how to
//! reach every rank's segment (directly by load/store, or through a network), how to
//! carry active-message frames, and whether the job is still alive. Everything above it
//! (the [`core`](crate::core) layer and up) talks to ranks only through this trait, so a
//! conduit that cannot map peers (MPI across hosts) fits behind it unchanged.
//!
//! Conduits here:
//! - [`smp`]: one process per rank; every rank's segment is a POSIX shared-memory object
//!   mapped by every rank, so a put to a peer is a `memcpy` plus memory ordering.
//! - [`threads`]: ranks as threads of one process over anonymous memory (tests, debugging).
//! - `mpi` (cargo feature `mpi`): ranks started by `mpirun`; shared memory within a host,
//!   MPI one-sided windows and two-sided active messages between hosts.
//!
//! Both share [`shm`]: the region layout and the bounded active-message rings.
//!
//! This layer must never know about global pointers, allocation, barriers or any
//! user-visible semantics; it moves bytes and frames.

pub use crate::reduction::{NativeType, Op, Reduction};
use std::fmt;
use std::ptr::NonNull;
use std::str::FromStr;
use std::sync::Arc;

use crate::board::JobFile;
use crate::error::{ConduitError, JobError};
use shm::RegionLayout;

#[cfg(feature = "mpi")]
pub mod mpi;
pub mod shm;
pub mod smp;
pub mod threads;

/// Which conduit a job runs on: a handle to the conduit's bootstrap (its name, how its
/// ranks become processes and how it connects them), compared by name.
///
/// ```
/// use tessera::ConduitKind;
/// assert_eq!("threads".parse::<ConduitKind>().unwrap(), ConduitKind::THREADS);
/// assert!("tcp".parse::<ConduitKind>().is_err());
/// ```
#[derive(Clone, Copy)]
pub struct ConduitKind(&'static dyn Bootstrap);

/// Every conduit of this build, the first the default for ranks started by `tessera run`.
/// A new conduit is its module, with its bootstrap (`Bootstrap`), and one line here; the job layer,
/// the launcher and `--conduit` know conduits only through this list, and the
/// conformance tests run every conduit in it.
///
/// ```
/// use tessera::conduit::CONDUITS;
/// use tessera::ConduitKind;
/// // Every conduit of the build, by its name.
/// for c in CONDUITS {
///     assert_eq!(c.name().parse::<ConduitKind>().unwrap(), *c);
/// }
/// assert_eq!(CONDUITS[0], ConduitKind::SMP);
/// ```
pub const CONDUITS: &[ConduitKind] = &[
    ConduitKind::SMP,
    ConduitKind::THREADS,
    #[cfg(feature = "mpi")]
    ConduitKind::MPI,
];

impl ConduitKind {
    /// Processes sharing POSIX shared memory (the default).
    pub const SMP: ConduitKind = ConduitKind(&smp::Smp);
    /// Threads of one process.
    pub const THREADS: ConduitKind = ConduitKind(&threads::Threads);
    /// Processes started by `mpirun` (the `mpi` cargo feature).
    #[cfg(feature = "mpi")]
    pub const MPI: ConduitKind = ConduitKind(&mpi::Mpi);

    /// The name used on the command line and in `TESSERA_CONDUIT`.
    pub fn name(self) -> &'static str {
        self.0.name()
    }

    /// How its ranks become processes.
    ///
    /// ```
    /// use tessera::conduit::Processes;
    /// use tessera::ConduitKind;
    /// assert_eq!(ConduitKind::SMP.processes(), Processes::PerRank);
    /// assert_eq!(ConduitKind::THREADS.processes(), Processes::OneForAll);
    /// ```
    pub fn processes(self) -> Processes {
        self.0.processes()
    }

    /// How it starts and connects its ranks.
    pub(crate) fn bootstrap(self) -> &'static dyn Bootstrap {
        self.0
    }

    /// The conduit whose own launcher started this process, if any (`mpirun` for mpi).
    pub fn started_this_process() -> Option<ConduitKind> {
        CONDUITS
            .iter()
            .copied()
            .find(|c| c.0.started_this_process())
    }
}

impl PartialEq for ConduitKind {
    fn eq(&self, other: &Self) -> bool {
        self.name() == other.name()
    }
}

impl Eq for ConduitKind {}

impl std::hash::Hash for ConduitKind {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name().hash(state)
    }
}

impl fmt::Debug for ConduitKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How a conduit's ranks become processes: all that the launcher (`tessera run`) needs to
/// know of a conduit to start, watch and end its ranks and to say which one failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Processes {
    /// One process per rank, each started by the launcher, sharing the launcher's
    /// memory file (its status board and the ranks' regions).
    PerRank,
    /// Every rank a thread of one process started by the launcher, which shares the
    /// launcher's status board.
    OneForAll,
    /// Processes started by an MPI launcher (`mpirun` or `srun`) that `tessera run`
    /// starts: no shared board, and the MPI launcher's exit status speaks for the ranks.
    ByMpiLauncher,
}

/// What the job layer knows when it connects ranks: the job's shape and what the
/// launcher handed this process. A conduit takes what it needs.
#[derive(Clone, Copy)]
// Only the mpi conduit reads the segment and ring sizes itself (the others take the
// layout made from them).
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub(crate) struct Start<'a> {
    /// The layout of every rank's region (segment and active-message rings).
    pub(crate) layout: RegionLayout,
    /// Bytes of each rank's segment.
    pub(crate) segment: usize,
    /// Bytes of each active-message ring, if set.
    pub(crate) am_queue: Option<usize>,
    /// This process's rank and the job's id, where `tessera run` started it
    /// ([`Processes::PerRank`]).
    pub(crate) launched: Option<(usize, &'a str)>,
    /// The launcher's private memory file, if it handed one.
    pub(crate) job_file: Option<&'a JobFile>,
    /// Meet through named objects instead of the job file (`TESSERA_SHM_NAMES`).
    pub(crate) named_objects: bool,
    /// How long ranks may take to meet.
    pub(crate) boot_timeout: std::time::Duration,
    /// Reach peers only through transfer calls and active messages, never by address
    /// (`TESSERA_HIDE_PEERS`).
    pub(crate) hide_peers: bool,
}

/// A conduit as the job layer sees it: its name, how its ranks become processes, and how
/// it connects them. Each conduit module has one, listed in [`CONDUITS`].
pub(crate) trait Bootstrap: Sync {
    /// The name used on the command line and in `TESSERA_CONDUIT`.
    fn name(&self) -> &'static str;
    /// How its ranks become processes.
    fn processes(&self) -> Processes;
    /// Whether its own launcher started this process (then a job that names no conduit
    /// runs on it).
    fn started_this_process(&self) -> bool {
        false
    }
    /// For a conduit whose launcher decides the ranks, how many it started, if it says.
    fn launcher_ranks(&self) -> Option<usize> {
        None
    }
    /// Connect this process's rank ([`Processes::PerRank`], [`Processes::ByMpiLauncher`]).
    fn connect(&self, start: &Start<'_>) -> Result<Box<dyn Conduit>, JobError> {
        let _ = start;
        Err(JobError::Usage(format!(
            "the {} conduit runs every rank in one process; use Job::run",
            self.name()
        )))
    }
    /// Connect every rank of this one process ([`Processes::OneForAll`]).
    fn connect_all(&self, start: &Start<'_>) -> Result<Arc<dyn InProcess>, JobError> {
        let _ = start;
        Err(JobError::Usage(format!(
            "the {} conduit runs one rank per process",
            self.name()
        )))
    }
}

/// The ranks of a [`Processes::OneForAll`] conduit, every one a thread of this process.
pub(crate) trait InProcess: Send + Sync {
    /// The conduit of `rank`, on that rank's thread (it keeps the ranks' memory alive).
    fn conduit(self: Arc<Self>, rank: usize) -> Box<dyn Conduit>;
    /// Rank `rank` failed with `why`: every other rank's next wait ends.
    fn fail(&self, rank: usize, why: &str);
    /// The first rank that failed, and why.
    fn first_failure(&self) -> Option<(usize, String)>;
}

impl fmt::Display for ConduitKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ConduitKind {
    type Err = crate::BadValue;
    fn from_str(s: &str) -> Result<Self, crate::BadValue> {
        if let Some(c) = CONDUITS.iter().find(|c| c.name() == s) {
            return Ok(*c);
        }
        let message = if s == "mpi" {
            "this Tessera was built without MPI; rebuild with `cargo build --release --features mpi` (needs an MPI library such as Open MPI), or use smp or threads".to_string()
        } else {
            let names: Vec<&str> = CONDUITS.iter().map(|c| c.name()).collect();
            let (last, rest) = names.split_last().expect("a build has conduits");
            let unbuilt = if cfg!(feature = "mpi") {
                ""
            } else {
                " (mpi needs a build with the mpi feature)"
            };
            format!(
                "unknown conduit {s:?}: use {} or {last}{unbuilt}",
                rest.join(", ")
            )
        };
        Err(crate::BadValue::new("conduit", s, message))
    }
}

/// The two classes of active-message traffic. Each travels on its own bounded queue so
/// that replies can always drain even when requests are backed up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AmClass {
    /// A request; its handler may send one reply.
    Request = 0,
    /// A reply; its handler may not send anything.
    Reply = 1,
}

/// One collective of a conduit's own library, without its buffers (see [`NativeCall`]
/// and [`NativeCollectives::start`]). Ranks are group ranks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NativeOp {
    /// Wait until every member has entered.
    Barrier,
    /// The data is the destination: read on `root`, written elsewhere.
    Broadcast {
        /// The group rank that holds (or receives) the whole.
        root: usize,
    },
    /// The destination is written on `root` only.
    Reduce {
        /// The group rank that holds (or receives) the whole.
        root: usize,
        /// What is combined, and how.
        reduction: Reduction,
    },
    /// The reduction of every member's source, on every member.
    Allreduce {
        /// What is combined, and how.
        reduction: Reduction,
    },
    /// The destination (group size × source bytes) is written on `root` only.
    Gather {
        /// The group rank that holds (or receives) the whole.
        root: usize,
    },
    /// Every member's source, in group-rank order, on every member.
    Allgather,
    /// The source (group size × destination bytes) is read on `root` only.
    Scatter {
        /// The group rank that holds (or receives) the whole.
        root: usize,
    },
    /// All-to-all in equal blocks of source bytes / group size.
    Exchange,
    /// Inclusive prefix reduction, or exclusive (destination undefined on group rank 0).
    Scan {
        /// What is combined, and how.
        reduction: Reduction,
        /// Exclusive: member i gets the reduction of members before it.
        exclusive: bool,
    },
}

/// One collective for a conduit's own library to perform, over byte buffers already
/// checked by the caller (lengths agree with the group size; `root` is a member; a
/// reduction's buffers hold whole, aligned elements).
#[derive(Debug)]
pub struct NativeCall<'b> {
    /// The collective.
    pub op: NativeOp,
    /// This member's source bytes.
    pub src: &'b [u8],
    /// This member's destination bytes.
    pub dst: &'b mut [u8],
}

/// Blocks until the test it is given returns true, making progress meanwhile (the core
/// passes one that serves active messages and honours the watchdog).
pub type NativeWait<'w> =
    dyn FnMut(&mut dyn FnMut() -> Result<bool, ConduitError>) -> crate::Result<()> + 'w;

/// A conduit's own collective operations (MPI's, on the `mpi` conduit), offered to the
/// model layer as one more algorithm per operation. Groups are numbered by the conduit;
/// every call on a group is collective over its members and they call in the same order.
pub trait NativeCollectives {
    /// A new group of every rank of the job, in rank order. Collective over the job.
    fn group_world(&self) -> Result<u64, ConduitError>;
    /// Split `parent`: members passing the same `colour` form a new group, ordered by
    /// `key` (distinct within a colour). `None` (and `None` back): in no new group.
    /// Collective over `parent`.
    fn group_split(
        &self,
        parent: u64,
        colour: Option<u32>,
        key: u32,
    ) -> Result<Option<u64>, ConduitError>;
    /// Forget a group (local).
    fn group_free(&self, group: u64);
    /// Perform `call` on `group`, waiting for it with `wait` so that the rank keeps
    /// serving others meanwhile. A failed wait ends the job (the library may still be
    /// writing into the buffers).
    fn run(&self, group: u64, call: NativeCall<'_>, wait: &mut NativeWait<'_>)
        -> crate::Result<()>;
    /// Start `op` on `group` and return at once with a ticket. The conduit copies `src`
    /// (for a broadcast, the root's data; empty elsewhere) and owns an output of
    /// `dst_len` bytes until [`NativeCollectives::test`] reports the ticket complete.
    fn start(
        &self,
        group: u64,
        op: NativeOp,
        src: &[u8],
        dst_len: usize,
    ) -> Result<u64, ConduitError>;
    /// Whether `ticket` has completed, without blocking. Once it has, its output goes to
    /// `take` and the ticket is forgotten.
    fn test(&self, ticket: u64, take: &mut dyn FnMut(&[u8])) -> Result<bool, ConduitError>;
}

/// One transfer between this rank and an unmapped peer's segment, already checked by the
/// core (rank, bounds, alignment).
#[derive(Debug)]
pub enum Transfer<'b> {
    /// Write `src` at `offset` of `rank`'s segment.
    Put {
        /// The peer.
        rank: usize,
        /// Byte offset into its segment.
        offset: usize,
        /// The bytes (the conduit copies what it keeps past `start`).
        src: &'b [u8],
    },
    /// Read `len` bytes at `offset` of `rank`'s segment.
    Get {
        /// The peer.
        rank: usize,
        /// Byte offset into its segment.
        offset: usize,
        /// Bytes to read.
        len: usize,
        /// Where they land.
        into: GetInto<'b>,
    },
}

/// Where a get's bytes land.
#[derive(Debug)]
pub enum GetInto<'b> {
    /// The caller's buffer: filled before `start` returns ([`Finish::Now`], or a
    /// [`Finish::Ticket`] get that completes at once), else the same buffer passed to
    /// [`Rma::complete`] for the ticket.
    Buffer(&'b mut [u8]),
    /// This rank's own segment at this byte offset ([`Finish::Quiet`]), untouched by the
    /// core until the next completion of [`Which::All`].
    Segment(usize),
}

/// When a started transfer completes (a put at its target, a get in its landing).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Finish {
    /// Before `start` returns.
    Now,
    /// When [`Rma::complete`] reports its ticket done.
    Ticket,
    /// By the next [`Rma::complete`] of [`Which::All`] (OpenSHMEM's quiet), which the
    /// core runs before every ordering operation to an unmapped peer.
    Quiet,
}

/// What [`Rma::complete`] completes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Which {
    /// The transfer with this ticket.
    One(u64),
    /// Every [`Finish::Quiet`] transfer started so far.
    All,
}

/// A conduit's own one-sided transfers ([`Conduit::rma`]).
pub trait Rma {
    /// Start `transfer`, complete as `finish` says; a ticket for [`Finish::Ticket`] unless
    /// the transfer is already complete (`None`).
    fn start(&self, transfer: Transfer<'_>, finish: Finish) -> Result<Option<u64>, ConduitError>;
    /// Whether `which` is complete (a get's bytes copied into `landing`), blocking until it
    /// is with `wait`. A ticket reported done is forgotten; one never completed is
    /// completed and dropped with the conduit.
    fn complete(&self, which: Which, wait: bool, landing: &mut [u8]) -> Result<bool, ConduitError>;
}

/// The boundary every conduit implements.
///
/// Offsets are byte offsets into a rank's *segment* (the part of its memory that the
/// global address space covers). Callers (the core layer) have already checked ranks,
/// bounds and alignment; conduits may assume valid arguments.
pub trait Conduit {
    /// Which conduit this is.
    fn kind(&self) -> ConduitKind;
    /// This rank.
    fn rank(&self) -> usize;
    /// Number of ranks in the job.
    fn ranks(&self) -> usize;
    /// Size in bytes of every rank's segment (all ranks have the same size).
    fn segment_len(&self) -> usize;
    /// Base address of `rank`'s segment if this process can load and store it directly
    /// (same node), or `None` when transfers to it go through [`Conduit::rma`] or active
    /// messages.
    fn segment_base(&self, rank: usize) -> Option<NonNull<u8>>;

    /// The conduit's own one-sided transfers to peers without a direct mapping (MPI's
    /// windows). `None`, the default: the core moves them as active messages
    /// (`core::transfer`), so a conduit that only moves frames runs every transfer.
    fn rma(&self) -> Option<&dyn Rma> {
        None
    }

    /// The memory file holding this rank's segment and the segment's offset in it, where
    /// the segment is a file mapping (the `smp` conduit, and the mpi conduit's host part):
    /// what lets a library map segment pages a second time at addresses of its choosing
    /// (OpenSHMEM's symmetric global variables).
    fn segment_file(&self) -> Option<(std::os::fd::BorrowedFd<'_>, u64)> {
        None
    }

    /// Largest active-message frame (bytes of payload) this conduit carries.
    fn am_max_frame(&self) -> usize;
    /// Try to queue one frame, the concatenation of `parts`, to `dest`. Returns `Ok(false)`
    /// when the queue to `dest` is full (the caller makes progress and retries): queues are
    /// bounded, never grown.
    fn am_try_send(
        &self,
        dest: usize,
        class: AmClass,
        parts: &[&[u8]],
    ) -> Result<bool, ConduitError>;
    /// [`Conduit::am_try_send`] for a frame that [`Conduit::am_all_consumed`] need not
    /// wait for: only a protocol that learns otherwise that its frames were handled sends
    /// one (the barrier's rounds, each answered by the partner's own round), and it keeps
    /// their number bounded itself. A conduit that counts frames by acknowledgements
    /// (the mpi conduit's credits) sends it without one; the others take it as any frame.
    fn am_try_send_uncounted(
        &self,
        dest: usize,
        class: AmClass,
        parts: &[&[u8]],
    ) -> Result<bool, ConduitError> {
        self.am_try_send(dest, class, parts)
    }
    /// Whether every frame this rank has sent has been delivered to its handler at the
    /// target (the barrier waits for this). Conduits that cannot tell say `true`.
    fn am_all_consumed(&self) -> bool {
        true
    }
    /// Deliver every queued incoming frame of `class` to `deliver(source_rank, frame)`, in
    /// order per source. Returns the number delivered. A conduit whose frames reach it
    /// through a library's matching (mpi) may leave frames that arrive while it delivers
    /// for its next call: every wait calls it again.
    fn am_poll(&self, class: AmClass, deliver: &mut dyn FnMut(usize, &[u8])) -> usize;

    /// `Err` once the job is being torn down because some rank failed; waits check it so
    /// that they end instead of hanging.
    fn check_alive(&self) -> Result<(), ConduitError>;
    /// Tell the rest of the job that this rank failed and the job must end.
    fn abort(&self, reason: &str);
    /// This rank ends the whole job with exit status `status` (the caller exits right
    /// after): a conduit whose ranks are not watched by `tessera run` ends them itself
    /// (the mpi conduit: `MPI_Abort` with the status).
    fn global_exit(&self, _status: i32) {}
    /// The job's final barrier has passed on this rank: teardown may now be collective.
    fn job_done(&self) {}

    /// After [`Conduit::job_done`], collective: every rank's `bytes` at rank 0, in rank
    /// order (`Some` of them all at rank 0, `Some` of none elsewhere), for conduits whose
    /// ranks may not share a file system (the `mpi` conduit: the ranks' statistics are
    /// merged over MPI). `None` (the default): not gathered, each rank hands in its own.
    fn gather_at_root(&self, _bytes: &[u8]) -> Result<Option<Vec<Vec<u8>>>, ConduitError> {
        Ok(None)
    }
    /// Ranks running on this rank's host (for the wait policy).
    fn host_ranks(&self) -> usize {
        self.ranks()
    }
    /// The ranks are threads of one process (the threads conduit), so the ranks busy on
    /// this host are every rank thread of the process, whichever job it belongs to (for
    /// the wait policy).
    fn ranks_are_threads(&self) -> bool {
        false
    }

    /// The conduit's own collectives, if it has any (the `mpi` conduit has MPI's).
    fn native_collectives(&self) -> Option<&dyn NativeCollectives> {
        None
    }

    /// The error for an operation this conduit lacks.
    fn unsupported(&self, what: &'static str) -> ConduitError {
        ConduitError::Unsupported {
            conduit: self.kind().name(),
            what,
        }
    }
}
