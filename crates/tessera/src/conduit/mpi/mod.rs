//! The `mpi` conduit: ranks started by `mpirun` (or `srun`), hierarchical.
//!
//! - **Within a host**, ranks reach each other exactly as on `smp`, through the same code
//!   (`smp::attach_named`): every rank's region (header, active-message rings, segment)
//!   is a POSIX shared-memory object mapped by every process of the host, so puts and gets
//!   are loads and stores and active messages go through the rings. The objects are named
//!   after a job id that rank 0 makes and broadcasts, and after the host group's first
//!   rank. (Not `MPI_Win_allocate_shared`: MPI does not promise zero-filled memory, and
//!   clearing a 2 GiB segment per rank at start-up took seconds; kernel shared memory is
//!   zero-filled and reserved page by page on first touch.)
//! - **Between hosts**, data moves through one MPI window over every rank's segment,
//!   locked for passive-target access for the whole job: a put is `MPI_Put` then
//!   `MPI_Win_flush` (complete at the target on return), a get `MPI_Get` then flush.
//!   Active messages are two-sided messages on a private communicator with credit-based
//!   flow control (module `messenger`). Atomics on another host's memory are active-message
//!   round trips served by the owner (see [`crate::core`]), so every atomic on a word is a
//!   CPU atomic on the owner's host.
//!
//! Co-location is MPI's own answer: the ranks `MPI_Comm_split_type` puts in one
//! shared-memory communicator share a host. `TESSERA_MPI_BYPASS=0` (or
//! `TESSERA_HIDE_PEERS=1`) makes every rank its own group, so that all traffic between
//! ranks goes through MPI even on one host (for testing and for comparison).
//!
//! Failure: a rank whose body fails or panics calls `MPI_Abort`, which ends every rank;
//! mpirun reports the rank. The conduit never frees its windows on a failure path (freeing
//! is collective and would wait for ranks that will never arrive).
//!
//! Progress: an operation on another host's memory is served by MPI. With Open MPI over
//! TCP a window's target makes progress only inside MPI calls, which Tessera's waits make
//! (every wait polls active messages); a rank computing for a long time without waiting
//! delays others' operations on its memory until it next waits. `TESSERA_MPI_PROGRESS=N`
//! starts a progress thread that enters MPI every N microseconds (an `MPI_Iprobe`), so
//! puts and gets aimed at a computing rank complete meanwhile. MPI then runs at
//! `MPI_THREAD_SERIALIZED` (Open MPI's one-sided component over TCP refuses
//! `MPI_THREAD_MULTIPLE`): every MPI call of the conduit takes one process-wide lock
//! (`raw::serial`), so the thread and the rank never enter MPI together. Off by default:
//! the thread takes CPU time from the ranks, and a rank's long blocking calls (a flush)
//! keep it out. Active messages still wait for their target's next poll: their handlers
//! run on the rank's own thread.
//!
//! Collectives: the model's own algorithms run over the core like on any conduit; MPI's
//! collectives are offered beside them as the `native` algorithm (module `collectives`).
//!
//! This module must never touch global pointers, allocation or the model's collective
//! algorithms: it moves bytes and frames, like every conduit, and runs MPI's collectives
//! on buffers it is given.

mod collectives;
mod messenger;
pub(crate) mod raw;

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::ptr::NonNull;
use std::time::Duration;

use mpi::environment::Universe;
use mpi::topology::{Color, SimpleCommunicator};
use mpi::traits::{Communicator, CommunicatorCollectives, Root};
use mpi::Threading;

use super::shm::{default_ring_capacity, RegionLayout, ShmConduit};
use super::{
    smp, AmClass, Bootstrap, Conduit, ConduitKind, Finish, GetInto, Processes, Start, Which,
};
use crate::config;
use crate::error::{ConduitError, JobError};
use messenger::Messenger;
use raw::{ProgressThread, Transfer, Window};

/// The mpi conduit as the job layer sees it: processes started by an MPI launcher, which
/// decides the ranks.
pub(crate) struct Mpi;

impl Bootstrap for Mpi {
    fn name(&self) -> &'static str {
        "mpi"
    }

    fn processes(&self) -> Processes {
        Processes::ByMpiLauncher
    }

    fn started_this_process(&self) -> bool {
        started_by_mpirun()
    }

    fn launcher_ranks(&self) -> Option<usize> {
        launcher_ranks()
    }

    fn connect(&self, start: &Start<'_>) -> Result<Box<dyn Conduit>, JobError> {
        // Ranks of one host through shared memory, unless peers are hidden.
        let bypass = config::switch("TESSERA_MPI_BYPASS")?.unwrap_or(true) && !start.hide_peers;
        let progress = config::number::<u64>(
            "TESSERA_MPI_PROGRESS",
            "microseconds between progress polls, or 0 for no progress thread",
        )?
        .filter(|&us| us > 0)
        .map(Duration::from_micros);
        Ok(Box::new(MpiConduit::start(
            start.segment,
            start.am_queue,
            bypass,
            progress,
            start.boot_timeout,
        )?))
    }
}

/// Whether this process was started by an MPI launcher (Open MPI, MPICH/Hydra, PMIx,
/// Slurm's PMI), judged by the variables those launchers set.
fn started_by_mpirun() -> bool {
    [
        "OMPI_COMM_WORLD_SIZE",
        "PMI_SIZE",
        "PMIX_RANK",
        "MPI_LOCALNRANKS",
    ]
    .iter()
    .any(|v| crate::config::raw(v).is_some())
}

/// Ranks in the job according to the launcher's variables, if it set them.
fn launcher_ranks() -> Option<usize> {
    ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE"]
        .iter()
        .find_map(|v| crate::config::text(v)?.parse().ok())
}

/// The conduit of one rank.
pub(crate) struct MpiConduit {
    /// The optional progress thread and the communicator it polls; first, so it is
    /// stopped before anything else goes.
    _progress: Option<(ProgressThread, SimpleCommunicator)>,
    rank: usize,
    ranks: usize,
    /// World rank → rank in this host's group, `None` for ranks on other hosts.
    node_rank: Vec<Option<usize>>,
    /// Host-group rank → world rank.
    world_rank: Vec<usize>,
    /// Request-based transfers in flight, by id (dropped, so completed, before the window).
    transfers: RefCell<HashMap<u64, Transfer>>,

    next_transfer: Cell<u64>,
    /// Dropped early: the window exposes memory that `local` owns.
    window: Window,
    messenger: Messenger,
    /// The communicators of the model's teams (MPI's own collectives).
    groups: collectives::Groups,
    /// Copies of the data of implicit puts not yet flushed, and whether any `*_nbi` is
    /// (after `window`: freeing the window completes what they feed).
    deferred: RefCell<Vec<Vec<u8>>>,
    deferred_any: Cell<bool>,
    /// This host's ranks, over the shared regions (ranks numbered within the group).
    local: ShmConduit,
    /// Whether some rank runs on another host (else MPI carries no frames at all).
    remote: bool,
    /// Set once the job's final barrier has passed: only then may windows be freed.
    done: Cell<bool>,
    world: SimpleCommunicator,
    _node: SimpleCommunicator,
    /// Last: dropping it finalises MPI, after everything above is freed.
    _universe: Universe,
}

fn mpi_error(e: ConduitError) -> JobError {
    JobError::Usage(format!("starting the mpi conduit: {e}"))
}

impl MpiConduit {
    /// Initialise MPI and build the conduit: collective over every rank of the job.
    /// `bypass`: reach ranks of the same host through shared memory. `progress`: run a
    /// progress thread that enters MPI this often.
    pub(crate) fn start(
        segment: usize,
        am_queue: Option<usize>,
        bypass: bool,
        progress: Option<Duration>,
        boot_timeout: Duration,
    ) -> Result<MpiConduit, JobError> {
        let wanted = if progress.is_some() {
            Threading::Serialized
        } else {
            Threading::Funneled
        };
        let (universe, level) = mpi::initialize_with_threading(wanted)
            .ok_or_else(|| JobError::Usage("MPI is already initialised in this process".into()))?;
        if level < wanted {
            return Err(JobError::Usage(format!(
                "TESSERA_MPI_PROGRESS needs an MPI library that supports MPI_THREAD_SERIALIZED, and this one offers only {level:?}; unset TESSERA_MPI_PROGRESS (or set it to 0)"
            )));
        }
        let world = universe.world();
        let rank = world.rank() as usize;
        let ranks = world.size() as usize;
        let node = if bypass {
            world.split_shared(rank as i32)
        } else {
            world
                .split_by_color(Color::with_value(rank as i32))
                .expect("every rank has a colour")
        };
        let node_size = node.size() as usize;
        let mut world_of_node = vec![0u64; node_size];
        node.all_gather_into(&(rank as u64), &mut world_of_node[..]);
        let mut segments = vec![0u64; ranks];
        world.all_gather_into(&(segment as u64), &mut segments[..]);
        if let Some(peer) = segments.iter().position(|&s| s != segment as u64) {
            return Err(JobError::Usage(format!(
                "{}",
                ConduitError::Mismatch {
                    rank: peer,
                    what: "the segment size",
                    detail: format!(
                        "{} bytes there, {segment} here; give every rank the same TESSERA_SEGMENT",
                        segments[peer]
                    ),
                }
            )));
        }
        let queue = am_queue.unwrap_or_else(|| default_ring_capacity(node_size));
        let layout = RegionLayout::new(node_size, segment, queue);
        // A job id for the shared-memory names, broadcast from rank 0: the launcher's
        // (so that it can remove what ranks killed during start-up leave), else random.
        let mut id = [0u8; 32];
        if rank == 0 {
            let launcher_id = crate::config::text("TESSERA_JOB_ID")
                .filter(|id| id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()));
            let own = match launcher_id {
                Some(id) => id,
                None => smp::new_job_id()?,
            };
            id.copy_from_slice(own.as_bytes());
        }
        world.process_at_rank(0).broadcast_into(&mut id[..]);
        let id: String = id.iter().map(|&b| b as char).collect();
        let me = node.rank() as usize;
        let local = smp::attach_named(
            &format!("{id}-{}", world_of_node[0]),
            me,
            layout,
            boot_timeout,
        )?
        .with_kind(ConduitKind::MPI);
        let own_segment = local.segment_base(me).expect("own region is mapped");
        // SAFETY: the segment lives in `local`'s regions, which outlive the window: the
        // struct declares `window` before `local`, so it is dropped (freed) first.
        let window = unsafe { Window::create(&world, own_segment, layout.segment_len) }
            .map_err(mpi_error)?;
        let messenger =
            Messenger::new(world.duplicate(), local.am_max_frame()).map_err(mpi_error)?;
        let mut node_rank = vec![None; ranks];
        let world_rank: Vec<usize> = world_of_node.iter().map(|&r| r as usize).collect();
        for (n, &w) in world_rank.iter().enumerate() {
            node_rank[w] = Some(n);
        }
        let remote = world_rank.len() < ranks;
        // Last, so that every MPI call above ran before a second thread could exist.
        let progress = match progress {
            Some(period) => {
                let comm = world.duplicate();
                // SAFETY: MPI runs at MPI_THREAD_SERIALIZED (checked above) and every MPI
                // call of the conduit goes through raw::serial; the thread is stopped
                // before `comm` is freed and before MPI is finalised: the tuple drops the
                // thread first, and `_progress` is the conduit's first field while the
                // universe (MPI_Finalize) is its last.
                let thread = unsafe { ProgressThread::start(&comm, period) }.map_err(mpi_error)?;
                Some((thread, comm))
            }
            None => None,
        };
        Ok(MpiConduit {
            _progress: progress,
            transfers: RefCell::new(HashMap::new()),
            deferred: RefCell::new(Vec::new()),
            deferred_any: Cell::new(false),
            next_transfer: Cell::new(0),
            rank,
            ranks,
            node_rank,
            world_rank,
            window,
            messenger,
            groups: collectives::Groups::default(),
            local,
            remote,
            done: Cell::new(false),
            world,
            _node: node,
            _universe: universe,
        })
    }
}

impl Conduit for MpiConduit {
    fn kind(&self) -> ConduitKind {
        ConduitKind::MPI
    }
    fn rank(&self) -> usize {
        self.rank
    }
    fn ranks(&self) -> usize {
        self.ranks
    }
    fn segment_len(&self) -> usize {
        self.local.segment_len()
    }
    fn segment_base(&self, rank: usize) -> Option<NonNull<u8>> {
        self.local.segment_base((*self.node_rank.get(rank)?)?)
    }
    fn rma(&self) -> Option<&dyn super::Rma> {
        Some(self)
    }
    fn am_max_frame(&self) -> usize {
        self.local.am_max_frame()
    }
    fn am_try_send(
        &self,
        dest: usize,
        class: AmClass,
        parts: &[&[u8]],
    ) -> Result<bool, ConduitError> {
        self.am_send_to(dest, class, parts, true)
    }
    fn am_try_send_uncounted(
        &self,
        dest: usize,
        class: AmClass,
        parts: &[&[u8]],
    ) -> Result<bool, ConduitError> {
        self.am_send_to(dest, class, parts, false)
    }
    fn segment_file(&self) -> Option<(std::os::fd::BorrowedFd<'_>, u64)> {
        self.local.segment_file()
    }
    fn am_all_consumed(&self) -> bool {
        // Ranks of this host through the rings; other hosts through the credits, which
        // come back only once the handlers have run.
        if !self.local.am_all_consumed() {
            return false;
        }
        if !self.remote {
            return true;
        }
        match self.messenger.all_handled() {
            Ok(all) => all,
            Err(e) => {
                self.abort(&e.to_string());
                false
            }
        }
    }
    fn am_poll(&self, class: AmClass, deliver: &mut dyn FnMut(usize, &[u8])) -> usize {
        let world_rank = &self.world_rank;
        let mut delivered = self
            .local
            .am_poll(class, &mut |n, frame| deliver(world_rank[n], frame));
        if !self.remote {
            return delivered;
        }
        match self.messenger.poll(class, deliver) {
            Ok(n) => delivered += n,
            Err(e) => self.abort(&e.to_string()),
        }
        delivered
    }
    fn check_alive(&self) -> Result<(), ConduitError> {
        // A failed rank calls MPI_Abort, which ends this process too.
        Ok(())
    }
    fn abort(&self, reason: &str) {
        eprintln!("tessera: rank {} failed: {reason}", self.rank);
        use mpi::traits::Communicator as _;
        raw::serial(|| self.world.abort(1));
    }
    fn global_exit(&self, status: i32) {
        use mpi::traits::Communicator as _;
        raw::serial(|| self.world.abort(status));
    }
    fn job_done(&self) {
        self.messenger.drain();
        self.done.set(true);
    }
    fn gather_at_root(&self, bytes: &[u8]) -> Result<Option<Vec<Vec<u8>>>, ConduitError> {
        let root = self.world.process_at_rank(0);
        let length = bytes.len() as i32;
        if self.rank != 0 {
            raw::serial(|| {
                root.gather_into(&length);
                root.gather_varcount_into(bytes);
            });
            return Ok(Some(Vec::new()));
        }
        let mut lengths = vec![0i32; self.ranks];
        raw::serial(|| root.gather_into_root(&length, &mut lengths[..]));
        let starts: Vec<i32> = lengths
            .iter()
            .scan(0i32, |at, &n| {
                let start = *at;
                *at += n;
                Some(start)
            })
            .collect();
        let total: usize = lengths.iter().map(|&n| n as usize).sum();
        let mut all = vec![0u8; total];
        {
            let mut partition =
                mpi::datatype::PartitionMut::new(&mut all[..], &lengths[..], &starts[..]);
            raw::serial(|| root.gather_varcount_into_root(bytes, &mut partition));
        }
        Ok(Some(
            lengths
                .iter()
                .zip(&starts)
                .map(|(&n, &at)| all[at as usize..(at + n) as usize].to_vec())
                .collect(),
        ))
    }
    fn host_ranks(&self) -> usize {
        self.world_rank.len()
    }
    fn native_collectives(&self) -> Option<&dyn super::NativeCollectives> {
        Some(self)
    }
}

impl MpiConduit {
    /// One active-message frame to `dest`: through the rings to a rank of this host, else
    /// by MPI, `counted` towards the credits or not (see
    /// [`Conduit::am_try_send_uncounted`]).
    fn am_send_to(
        &self,
        dest: usize,
        class: AmClass,
        parts: &[&[u8]],
        counted: bool,
    ) -> Result<bool, ConduitError> {
        if let Some(n) = self.node_rank[dest] {
            return self.local.am_try_send(n, class, parts);
        }
        let len: usize = parts.iter().map(|p| p.len()).sum();
        if len > self.am_max_frame() {
            return Err(ConduitError::FrameTooLarge {
                len,
                max: self.am_max_frame(),
            });
        }
        self.messenger.try_send(dest, class, parts, counted)
    }

    fn track(&self, transfer: Transfer) -> u64 {
        let id = self.next_transfer.get();
        self.next_transfer.set(id + 1);
        self.transfers.borrow_mut().insert(id, transfer);
        id
    }
}

impl Drop for MpiConduit {
    fn drop(&mut self) {
        if !self.done.get() {
            // Freeing windows is collective; after a failure the others may never come.
            self.abort("the rank ended before the job's final barrier");
        }
    }
}

/// MPI's one-sided operations on the window over every rank's segment, for ranks on other
/// hosts.
impl super::Rma for MpiConduit {
    fn start(
        &self,
        transfer: super::Transfer<'_>,
        finish: Finish,
    ) -> Result<Option<u64>, ConduitError> {
        use super::Transfer::{Get, Put};
        match (transfer, finish) {
            (Put { rank, offset, src }, Finish::Now) => {
                self.window.put(rank, offset, src).map(|()| None)
            }
            (Put { rank, offset, src }, Finish::Ticket) => {
                match self.window.start_put(rank, offset, src.to_vec())? {
                    Some(transfer) => Ok(Some(self.track(transfer))),
                    None => self.window.put(rank, offset, src).map(|()| None),
                }
            }
            (Put { rank, offset, src }, Finish::Quiet) => {
                let copy = src.to_vec();
                // SAFETY: the copy's heap buffer stays in `deferred` (moving the Vec does
                // not move it) until the completion of every quiet transfer has flushed the
                // window.
                unsafe { self.window.put_deferred(rank, offset, &copy) }?;
                self.deferred.borrow_mut().push(copy);
                self.deferred_any.set(true);
                Ok(None)
            }
            (
                Get {
                    rank,
                    offset,
                    into: GetInto::Buffer(dst),
                    ..
                },
                Finish::Now,
            ) => self.window.get(rank, offset, dst).map(|()| None),
            (
                Get {
                    rank,
                    offset,
                    len,
                    into: GetInto::Buffer(dst),
                },
                Finish::Ticket,
            ) => match self.window.start_get(rank, offset, len)? {
                Some(transfer) => Ok(Some(self.track(transfer))),
                None => self.window.get(rank, offset, dst).map(|()| None),
            },
            (
                Get {
                    rank,
                    offset,
                    len,
                    into: GetInto::Segment(at),
                },
                Finish::Quiet,
            ) => {
                let own = self.segment_base(self.rank).ok_or_else(|| {
                    self.unsupported("a quiet get without this rank's own segment")
                })?;
                // SAFETY: the core checked that [at, at + len) lies inside this rank's own
                // segment and leaves it untouched until the completion of every quiet
                // transfer, which flushes the window.
                unsafe {
                    let dst = NonNull::new_unchecked(own.as_ptr().add(at));
                    self.window.get_deferred(rank, offset, dst, len)
                }?;
                self.deferred_any.set(true);
                Ok(None)
            }
            (transfer, finish) => Err(self.unsupported(match (transfer, finish) {
                (Get { .. }, Finish::Quiet) => "a quiet get into a buffer",
                _ => "a get into this rank's segment that is not quiet",
            })),
        }
    }

    fn complete(&self, which: Which, wait: bool, landing: &mut [u8]) -> Result<bool, ConduitError> {
        let transfer = match which {
            Which::All => {
                if self.deferred_any.replace(false) {
                    self.window.flush_all()?;
                    self.deferred.borrow_mut().clear();
                }
                return Ok(true);
            }
            Which::One(transfer) => transfer,
        };
        let mut transfers = self.transfers.borrow_mut();
        let Some(t) = transfers.get_mut(&transfer) else {
            return Ok(true);
        };
        if !self.window.finish(t, wait)? {
            return Ok(false);
        }
        if !t.is_put() {
            landing.copy_from_slice(t.bytes());
        }
        transfers.remove(&transfer);
        Ok(true)
    }
}
