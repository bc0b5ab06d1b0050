//! The job's status board: one record per rank, in memory that every rank of the job and
//! the launcher can read, saying what each rank is doing.
//!
//! A rank marks itself *starting* when it joins, *running* once its context exists,
//! *waiting* once a blocking wait gets past its first spins (with a one-line description of
//! the wait and the ranks it waits for once it has lasted [`PUBLISH_AFTER`]), and *finished* once it has passed the
//! end-of-job barrier (or *failed*). From this the job learns three things no single rank
//! knows:
//! - **end-of-job agreement**: a rank whose process ends before it is finished left its
//!   peers waiting for it; the launcher fails the job at once, naming the rank and what the
//!   others wait for;
//! - **deadlock**: when every rank is waiting, none of their waits has ended or begun and no
//!   active message has been handled for [`DEADLOCK_WINDOW`], while every rank keeps polling
//!   (its heartbeat advances), nothing can ever happen: [`DeadlockDetector`] says so, with
//!   every rank's wait (the wait-for graph);
//! - **who is slow**: when the watchdog fires, the ranks that are *not* waiting are the ones
//!   the others wait for; [`describe_others`] names them and how their threads stand
//!   (running, sleeping, stopped).
//!
//! Where the board lives: the launcher (`tessera run`) creates it in a private memory file
//! ([`JobFile`], a `memfd` that no other user can open), which the ranks inherit; a
//! `threads` job without the launcher keeps it in its own memory. On the `mpi` conduit there
//! is none, and only the watchdog applies.
//!
//! ## Memory ordering
//! Each record has one writer, its rank. `state` and `serial` are stored with `Release` after
//! the text they describe and loaded with `Acquire`. The wait text is a sequence lock: the
//! writer makes `seq` odd, writes the words (`Relaxed`), then makes `seq` even with
//! `Release`; a reader loads `seq` (`Acquire`), the words, then `seq` again after an
//! `Acquire` fence, and retries when the two differ or are odd. `heartbeat` and `handled`
//! are `Relaxed` counters: readers only compare them between snapshots taken far apart.
//! Everything on the board is diagnostic: no data moves through it.
//!
//! This module must never block a rank and never decide a job's fate by itself: it
//! reports, and the launcher or the waiting rank acts.

use std::fmt::Write as _;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use memmap2::{MmapOptions, MmapRaw};

use crate::error::JobError;

/// A wait is published on the board once it has lasted this long (shorter waits cost
/// nothing but a clock read per yield).
pub const PUBLISH_AFTER: Duration = Duration::from_millis(100);
/// How long every rank must have been waiting, without progress, before a deadlock is
/// declared.
pub const DEADLOCK_WINDOW: Duration = Duration::from_millis(500);

/// Bytes of wait text a record holds.
const TEXT_WORDS: usize = 21;
const TEXT_BYTES: usize = TEXT_WORDS * 8;

/// Value of the job file's first word once the launcher has written its header.
const MAGIC: u64 = 0x5445_5353_424f_4152; // "TESSBOAR"
/// Bytes before the first record.
const HEADER_BYTES: usize = 4096;
/// Regions (smp) start on this boundary after the records.
const REGION_ALIGN: usize = 64 * 1024;

/// What a rank is doing, as the board says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RankState {
    /// Not started (the process has not reached Tessera yet).
    Absent,
    /// Joining the job: mapping memory, meeting its peers.
    Starting,
    /// Running the program.
    Running,
    /// Blocked in a wait that has lasted at least [`PUBLISH_AFTER`].
    Waiting,
    /// Passed the end-of-job barrier: its part is done.
    Finished,
    /// Failed (an error or a panic); the job is ending.
    Failed,
    /// Ended the whole job on purpose with an exit status (OpenSHMEM's
    /// `shmem_global_exit`; [`RankRecord::global_exit`]).
    GlobalExit,
}

impl RankState {
    fn code(self) -> u64 {
        self as u64
    }
    fn from_code(code: u64) -> RankState {
        match code {
            1 => RankState::Starting,
            2 => RankState::Running,
            3 => RankState::Waiting,
            4 => RankState::Finished,
            5 => RankState::Failed,
            6 => RankState::GlobalExit,
            _ => RankState::Absent,
        }
    }
}

/// One rank's record (256 bytes, its own cache lines).
#[repr(C, align(64))]
pub struct RankRecord {
    state: AtomicU64,
    /// The rank's thread id (its process id for one-thread processes), for /proc.
    tid: AtomicU64,
    /// Published waits begun plus ended: unchanged means the rank is still in the same wait.
    serial: AtomicU64,
    /// Active-message handlers run by the rank, as of its last heartbeat.
    handled: AtomicU64,
    /// Advanced by a waiting rank every time it polls and finds nothing.
    heartbeat: AtomicU64,
    /// When the current wait began (milliseconds of the monotonic clock).
    since_ms: AtomicU64,
    /// Sequence lock of `text`.
    seq: AtomicU64,
    /// The status of a global exit.
    status: AtomicU64,
    /// [`OTHER_THREADS`] where other threads of the rank may end its waits. Advisory
    /// (Relaxed): the deadlock detector reads it across many snapshots.
    flags: AtomicU64,
    /// With statistics on: operations the rank started and their bytes, as of its last
    /// long wait (for `tessera status`). Advisory (Relaxed).
    sent_ops: AtomicU64,
    sent_bytes: AtomicU64,
    text: [AtomicU64; TEXT_WORDS],
}

/// [`RankRecord`] flag: the rank runs other threads (`SHMEM_THREAD_MULTIPLE`) that may
/// end a wait of its own at any time, so a wait of it never makes a deadlock.
const OTHER_THREADS: u64 = 1;

const RECORD_BYTES: usize = std::mem::size_of::<RankRecord>();
const _: () = assert!(RECORD_BYTES == 256);

/// The monotonic clock, the same in every process of the machine.
fn monotonic() -> Option<nix::sys::time::TimeSpec> {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC).ok()
}

/// Milliseconds of the monotonic clock, the same in every process of the machine.
pub fn now_ms() -> u64 {
    monotonic().map_or(0, |t| {
        t.tv_sec() as u64 * 1000 + t.tv_nsec() as u64 / 1_000_000
    })
}

/// Seconds of the same clock, to the nanosecond (online tuning compares the members'
/// entries into and exits from a call by it).
pub(crate) fn now_seconds() -> f64 {
    monotonic().map_or(0.0, |t| t.tv_sec() as f64 + t.tv_nsec() as f64 * 1e-9)
}

/// This thread's id.
fn thread_id() -> u64 {
    nix::unistd::gettid().as_raw() as u64
}

impl RankRecord {
    /// Set the state (the rank's own record only).
    pub fn set_state(&self, state: RankState) {
        if state == RankState::Starting || state == RankState::Running {
            self.tid.store(thread_id(), Ordering::Relaxed);
        }
        self.state.store(state.code(), Ordering::Release);
    }

    fn write_text(&self, text: &str) {
        let s = self.seq.load(Ordering::Relaxed);
        self.seq.store(s.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        let mut bytes = [0u8; TEXT_BYTES];
        let mut len = text.len().min(TEXT_BYTES);
        while !text.is_char_boundary(len) {
            len -= 1;
        }
        bytes[..len].copy_from_slice(&text.as_bytes()[..len]);
        for (word, chunk) in self.text.iter().zip(bytes.chunks_exact(8)) {
            word.store(
                u64::from_le_bytes(chunk.try_into().expect("8 bytes")),
                Ordering::Relaxed,
            );
        }
        self.seq.store(s.wrapping_add(2), Ordering::Release);
    }

    fn read_text(&self) -> String {
        for _ in 0..64 {
            let before = self.seq.load(Ordering::Acquire);
            let mut bytes = Vec::with_capacity(TEXT_BYTES);
            for word in &self.text {
                bytes.extend_from_slice(&word.load(Ordering::Relaxed).to_le_bytes());
            }
            fence(Ordering::Acquire);
            if before.is_multiple_of(2) && self.seq.load(Ordering::Relaxed) == before {
                let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
                return String::from_utf8_lossy(&bytes[..end]).into_owned();
            }
            std::hint::spin_loop();
        }
        "(changing)".into()
    }

    /// Announce that the rank is blocked in a wait since `since_ms` (the description follows
    /// with [`RankRecord::refresh_wait`] once the wait has lasted [`PUBLISH_AFTER`]).
    pub fn begin_wait(&self, since_ms: u64, handled: u64) {
        self.publish_wait("", since_ms, handled);
    }

    /// Announce that the rank is blocked in the wait `text` since `since_ms`.
    pub fn publish_wait(&self, text: &str, since_ms: u64, handled: u64) {
        self.write_text(text);
        self.since_ms.store(since_ms, Ordering::Relaxed);
        self.handled.store(handled, Ordering::Relaxed);
        self.serial.fetch_add(1, Ordering::Release);
        self.state
            .store(RankState::Waiting.code(), Ordering::Release);
    }

    /// Refresh the description of the wait in progress.
    pub fn refresh_wait(&self, text: &str) {
        self.write_text(text);
    }

    /// The published wait has ended.
    pub fn end_wait(&self) {
        self.serial.fetch_add(1, Ordering::Release);
        self.state
            .store(RankState::Running.code(), Ordering::Release);
    }

    /// A waiting rank is alive and has run `handled` handlers so far.
    pub fn beat(&self, handled: u64) {
        self.handled.store(handled, Ordering::Relaxed);
        self.heartbeat.fetch_add(1, Ordering::Relaxed);
    }

    /// Record why the rank failed (the first line of its error).
    pub fn fail(&self, why: &str) {
        let first = why.lines().next().unwrap_or(why);
        self.write_text(first);
        self.serial.fetch_add(1, Ordering::Release);
        self.state
            .store(RankState::Failed.code(), Ordering::Release);
    }

    /// The rank is ending the whole job with `status` (it exits right after).
    pub fn global_exit(&self, status: i32) {
        self.status.store(status as u32 as u64, Ordering::Relaxed);
        self.state
            .store(RankState::GlobalExit.code(), Ordering::Release);
    }

    /// Say whether other threads of the rank may end its waits (a program that asked for
    /// `SHMEM_THREAD_MULTIPLE`): such a rank's waits are never taken for a deadlock, since
    /// a thread that runs or sleeps may still set what the wait waits for. The watchdog
    /// still applies.
    pub fn set_other_threads(&self, yes: bool) {
        let flags = self.flags.load(Ordering::Relaxed);
        let flags = if yes {
            flags | OTHER_THREADS
        } else {
            flags & !OTHER_THREADS
        };
        self.flags.store(flags, Ordering::Relaxed);
    }

    /// With statistics on: the operations the rank has started so far and their bytes.
    pub fn publish_counts(&self, ops: u64, bytes: u64) {
        self.sent_ops.store(ops, Ordering::Relaxed);
        self.sent_bytes.store(bytes, Ordering::Relaxed);
    }

    /// The status of a global exit (meaningful in state [`RankState::GlobalExit`]).
    pub fn exit_status(&self) -> i32 {
        self.status.load(Ordering::Relaxed) as u32 as i32
    }

    /// What the record says now.
    pub fn view(&self) -> RankView {
        let state = RankState::from_code(self.state.load(Ordering::Acquire));
        RankView {
            state,
            tid: self.tid.load(Ordering::Relaxed),
            serial: self.serial.load(Ordering::Acquire),
            handled: self.handled.load(Ordering::Relaxed),
            heartbeat: self.heartbeat.load(Ordering::Relaxed),
            since_ms: self.since_ms.load(Ordering::Relaxed),
            other_threads: self.flags.load(Ordering::Relaxed) & OTHER_THREADS != 0,
            sent: (
                self.sent_ops.load(Ordering::Relaxed),
                self.sent_bytes.load(Ordering::Relaxed),
            ),
            text: match state {
                RankState::Waiting | RankState::Failed => self.read_text(),
                _ => String::new(),
            },
        }
    }
}

/// A copy of one record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RankView {
    /// State.
    pub state: RankState,
    /// Thread id (0 if never set).
    pub tid: u64,
    /// Waits begun plus ended.
    pub serial: u64,
    /// Handlers run.
    pub handled: u64,
    /// Heartbeat.
    pub heartbeat: u64,
    /// When the current wait began (monotonic milliseconds).
    pub since_ms: u64,
    /// Other threads of the rank may end its waits (see [`RankRecord::set_other_threads`]).
    pub other_threads: bool,
    /// With statistics on: operations started and their bytes, as of the last long wait
    /// or the last 4096 counted operations (see [`RankRecord::publish_counts`]).
    pub sent: (u64, u64),
    /// The wait (state `Waiting`) or the failure (state `Failed`).
    pub text: String,
}

enum Memory {
    Heap(#[allow(dead_code)] Box<[RankRecord]>),
    Mapped(#[allow(dead_code)] MmapRaw),
}

/// The records of one job's ranks.
pub struct Board {
    records: NonNull<RankRecord>,
    ranks: usize,
    _memory: Memory,
}

// SAFETY: a Board is a view of records made only of atomics; the memory it points to is
// owned by `_memory` and lives as long as the Board, and every access is an atomic one.
unsafe impl Send for Board {}
// SAFETY: as above: shared access to atomics is what they are for.
unsafe impl Sync for Board {}

impl Board {
    /// A board in this process's memory (a `threads` job started without the launcher).
    pub fn in_process(ranks: usize) -> Arc<Board> {
        let mut records: Box<[RankRecord]> = (0..ranks).map(|_| RankRecord::zeroed()).collect();
        let ptr = NonNull::new(records.as_mut_ptr()).unwrap_or(NonNull::dangling());
        Arc::new(Board {
            records: ptr,
            ranks,
            _memory: Memory::Heap(records),
        })
    }

    /// Number of records.
    pub fn ranks(&self) -> usize {
        self.ranks
    }

    /// The record of `rank` (`rank < ranks()`).
    pub fn record(&self, rank: usize) -> &RankRecord {
        assert!(rank < self.ranks, "board record {rank} of {}", self.ranks);
        // SAFETY: `records` points to `ranks` initialised records that `_memory` keeps alive;
        // they hold only atomics, so a shared reference is sound while others update them.
        unsafe { &*self.records.as_ptr().add(rank) }
    }

    /// Every record, now.
    pub fn snapshot(&self) -> Vec<RankView> {
        (0..self.ranks).map(|r| self.record(r).view()).collect()
    }
}

impl RankRecord {
    fn zeroed() -> RankRecord {
        RankRecord {
            state: AtomicU64::new(0),
            tid: AtomicU64::new(0),
            serial: AtomicU64::new(0),
            handled: AtomicU64::new(0),
            heartbeat: AtomicU64::new(0),
            since_ms: AtomicU64::new(0),
            seq: AtomicU64::new(0),
            status: AtomicU64::new(0),
            flags: AtomicU64::new(0),
            sent_ops: AtomicU64::new(0),
            sent_bytes: AtomicU64::new(0),
            text: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

// ----- the launcher's job file ------------------------------------------------------

/// The first words of a job file, written by the launcher before any rank starts.
#[repr(C)]
struct FileHeader {
    magic: AtomicU64,
    ranks: AtomicU64,
    /// Offset of rank 0's region (0 when the file holds no regions).
    regions_offset: AtomicU64,
    /// Bytes of each region.
    region_len: AtomicU64,
    /// The job shape the regions were sized for.
    segment_len: AtomicU64,
    ring_capacity: AtomicU64,
}

/// Where the regions of a job file are and how they were sized.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegionSpan {
    /// Offset of rank 0's region in the file.
    pub offset: usize,
    /// Bytes per region.
    pub region_len: usize,
    /// Segment bytes per rank the launcher sized them for.
    pub segment_len: usize,
    /// Active-message ring capacity they were sized for.
    pub ring_capacity: usize,
}

fn records_end(ranks: usize) -> usize {
    (HEADER_BYTES + ranks * RECORD_BYTES).next_multiple_of(REGION_ALIGN)
}

/// A job's private memory file: the board and, for `smp`, every rank's region. Created by
/// the launcher as an anonymous `memfd` (no name any other process can open; it goes away
/// with the last process holding it), inherited by the ranks.
pub struct JobFile {
    fd: OwnedFd,
    board: Arc<Board>,
    regions: Option<RegionSpan>,
}

fn os_error(what: impl Into<String>, source: impl Into<std::io::Error>) -> JobError {
    JobError::Os {
        what: what.into(),
        source: source.into(),
    }
}

impl JobFile {
    /// Create the file for `ranks` ranks, with room for their regions when `regions` gives
    /// (region bytes, segment bytes, ring capacity). The descriptor is inheritable, so that
    /// ranks started with it (as `TESSERA_JOB_FD`) can map it.
    pub fn create(
        ranks: usize,
        regions: Option<(usize, usize, usize)>,
    ) -> Result<JobFile, JobError> {
        use nix::sys::memfd::{memfd_create, MFdFlags};
        let fd = memfd_create("tessera-job", MFdFlags::empty())
            .map_err(|e| os_error("creating the job's private memory (memfd_create)", e))?;
        let board_end = records_end(ranks);
        let span = regions.map(|(region_len, segment_len, ring_capacity)| RegionSpan {
            offset: board_end,
            region_len,
            segment_len,
            ring_capacity,
        });
        let total = match span {
            Some(s) => ranks
                .checked_mul(s.region_len)
                .and_then(|r| r.checked_add(board_end))
                .ok_or_else(|| {
                    JobError::Usage(format!(
                        "{ranks} ranks with {}-byte regions do not fit in the address space; lower the segment size",
                        s.region_len
                    ))
                })?,
            None => board_end,
        };
        nix::unistd::ftruncate(&fd, total as i64).map_err(|e| {
            os_error(
                format!("sizing the job's private memory to {total} bytes (lower --segment)"),
                e,
            )
        })?;
        let map = MmapOptions::new()
            .len(board_end)
            .map_raw(fd.as_raw_fd())
            .map_err(|e| os_error("mapping the job's status board", e))?;
        // SAFETY: a fresh, zero-filled mapping of board_end bytes: the header fits in its
        // first page, and no other process has it yet.
        let header = unsafe { &*(map.as_mut_ptr() as *const FileHeader) };
        header.ranks.store(ranks as u64, Ordering::Relaxed);
        if let Some(s) = span {
            for (word, value) in [
                (&header.regions_offset, s.offset),
                (&header.region_len, s.region_len),
                (&header.segment_len, s.segment_len),
                (&header.ring_capacity, s.ring_capacity),
            ] {
                word.store(value as u64, Ordering::Relaxed);
            }
        }
        header.magic.store(MAGIC, Ordering::Release);
        let board = board_over(map, ranks)?;
        Ok(JobFile {
            fd,
            board,
            regions: span,
        })
    }

    /// Open the file a launcher passed as descriptor `fd` (checked: a memory file of ours,
    /// with a header for `ranks` ranks).
    pub fn open(fd: i32, ranks: usize) -> Result<JobFile, JobError> {
        let bad = |why: String| JobError::BadEnv {
            var: "TESSERA_JOB_FD",
            value: fd.to_string(),
            why: format!(
                "{why}; it is set by `tessera run` for its ranks, so start the program that way"
            ),
        };
        if fd < 0 {
            return Err(bad("not a descriptor".into()));
        }
        // SAFETY: `fd` is only borrowed for the duplication; a closed or foreign descriptor
        // makes fcntl fail (EBADF), which is reported.
        let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
        let owned = borrowed
            .try_clone_to_owned()
            .map_err(|e| bad(format!("descriptor {fd} is not open ({e})")))?;
        let stat = nix::sys::stat::fstat(&owned).map_err(|e| bad(format!("fstat: {e}")))?;
        // SAFETY: getuid has no preconditions.
        let me = unsafe { libc::getuid() };
        if stat.st_uid != me || (stat.st_mode & libc::S_IFMT) != libc::S_IFREG {
            return Err(bad(format!(
                "descriptor {fd} is not a private memory file of this user"
            )));
        }
        let board_end = records_end(ranks);
        if (stat.st_size as u64) < board_end as u64 {
            return Err(bad(format!(
                "the job file holds {} bytes, too few for {ranks} ranks",
                stat.st_size
            )));
        }
        let map = MmapOptions::new()
            .len(board_end)
            .map_raw(owned.as_raw_fd())
            .map_err(|e| os_error("mapping the job's status board", e))?;
        // SAFETY: the mapping is at least one page; the header holds only atomics.
        let header = unsafe { &*(map.as_mut_ptr() as *const FileHeader) };
        if header.magic.load(Ordering::Acquire) != MAGIC
            || header.ranks.load(Ordering::Relaxed) != ranks as u64
        {
            return Err(bad(format!(
                "the job file was not made for {ranks} ranks (TESSERA_RANKS)"
            )));
        }
        let offset = header.regions_offset.load(Ordering::Relaxed) as usize;
        let regions = (offset != 0).then(|| RegionSpan {
            offset,
            region_len: header.region_len.load(Ordering::Relaxed) as usize,
            segment_len: header.segment_len.load(Ordering::Relaxed) as usize,
            ring_capacity: header.ring_capacity.load(Ordering::Relaxed) as usize,
        });
        if let Some(s) = regions {
            let need = s.offset as u64 + (ranks * s.region_len) as u64;
            if (stat.st_size as u64) < need {
                return Err(bad(format!(
                    "the job file holds {} bytes, its regions need {need}",
                    stat.st_size
                )));
            }
        }
        // Children the rank starts need not hold the job's memory open.
        let _ = nix::fcntl::fcntl(
            borrowed,
            nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
        );
        let board = board_over(map, ranks)?;
        Ok(JobFile {
            fd: owned,
            board,
            regions,
        })
    }

    /// The descriptor (inheritable in the launcher, close-on-exec in ranks).
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// The board.
    pub fn board(&self) -> &Arc<Board> {
        &self.board
    }

    /// Where the regions are, if the file holds them.
    pub fn regions(&self) -> Option<RegionSpan> {
        self.regions
    }
}

fn board_over(map: MmapRaw, ranks: usize) -> Result<Arc<Board>, JobError> {
    let base = NonNull::new(map.as_mut_ptr()).ok_or_else(|| {
        os_error(
            "mapping the job's status board",
            std::io::Error::other("null"),
        )
    })?;
    // SAFETY: HEADER_BYTES is a multiple of the record alignment and the mapping covers
    // HEADER_BYTES + ranks records (records_end); zero bytes are valid records.
    let records =
        unsafe { NonNull::new_unchecked(base.as_ptr().add(HEADER_BYTES) as *mut RankRecord) };
    Ok(Arc::new(Board {
        records,
        ranks,
        _memory: Memory::Mapped(map),
    }))
}

// ----- reading the board --------------------------------------------------------------

/// How a thread stands according to the kernel (`/proc/<tid>/stat`).
pub fn thread_condition(tid: u64) -> Option<&'static str> {
    if tid == 0 {
        return None;
    }
    let stat = std::fs::read_to_string(format!("/proc/{tid}/stat")).ok()?;
    // The state follows the parenthesised command name, which may itself hold spaces.
    let state = stat.rsplit_once(") ")?.1.chars().next()?;
    Some(match state {
        'R' => "running",
        'S' => "sleeping",
        'D' => "in uninterruptible sleep",
        'T' => "stopped (SIGSTOP or job control)",
        't' => "stopped by a debugger",
        'Z' | 'X' => "gone",
        _ => "in an unknown state",
    })
}

fn seconds_since(now_ms: u64, since_ms: u64) -> f64 {
    now_ms.saturating_sub(since_ms) as f64 / 1000.0
}

/// Whether the kernel says `tid` is stopped (so it cannot make progress, whatever the
/// board says).
fn is_stopped(tid: u64) -> bool {
    thread_condition(tid).is_some_and(|c| c.starts_with("stopped"))
}

/// One line for `rank`'s record: "rank 2: waits for a barrier (...) (for 1.2 s)".
pub fn describe_rank(rank: usize, view: &RankView, now_ms: u64) -> String {
    let stopped = |line: String| {
        if is_stopped(view.tid) {
            format!(
                "{line}; its thread is {}",
                thread_condition(view.tid).unwrap_or("stopped")
            )
        } else {
            line
        }
    };
    match view.state {
        RankState::Absent => format!("rank {rank}: has not started"),
        RankState::Starting => stopped(format!("rank {rank}: is starting")),
        RankState::Finished => format!("rank {rank}: has finished its part of the job"),
        RankState::Failed => format!("rank {rank}: failed: {}", view.text),
        RankState::GlobalExit => format!("rank {rank}: ended the job (global exit)"),
        RankState::Waiting if view.text.is_empty() => stopped(format!(
            "rank {rank}: waits (for {:.1} s)",
            seconds_since(now_ms, view.since_ms)
        )),
        RankState::Waiting => stopped(format!(
            "rank {rank}: waits for {} (for {:.1} s)",
            view.text,
            seconds_since(now_ms, view.since_ms)
        )),
        RankState::Running => match thread_condition(view.tid) {
            Some(how) => format!("rank {rank}: not in a wait; its thread is {how}"),
            None => format!("rank {rank}: not in a wait"),
        },
    }
}

/// Every rank's line, one per line, each indented by two spaces.
pub fn describe_all(views: &[RankView], now_ms: u64) -> String {
    let mut out = String::new();
    for (rank, view) in views.iter().enumerate() {
        let _ = writeln!(out, "  {}", describe_rank(rank, view, now_ms));
    }
    out
}

/// For a watchdog report from `me`: the ranks that are not waiting (the ones everybody
/// else waits for) first, then every other rank's wait; one line each, each starting with
/// a newline and two spaces.
pub fn describe_others(board: &Board, me: usize) -> String {
    let views = board.snapshot();
    let now = now_ms();
    // Those that hold the others up: not in a wait, or stopped in one.
    let holding = |v: &RankView| {
        matches!(v.state, RankState::Running | RankState::Starting)
            || v.state == RankState::Waiting && is_stopped(v.tid)
    };
    let mut out = String::new();
    for first in [true, false] {
        for (r, v) in views.iter().enumerate() {
            if r != me && holding(v) == first {
                let _ = write!(out, "\n  {}", describe_rank(r, v, now));
            }
        }
    }
    out
}

/// For a watchdog report from `me`, which waited `waited_s` for `what`: where every other
/// rank waits too but some ranks are running (not in any wait, not stopped), the plain
/// sentence that says so: "rank 0 has not reached the barrier the others entered 300.0 s
/// ago; it is running (...)". `None` where the board shows anything else.
pub fn running_holdouts(board: &Board, me: usize, what: &str, waited_s: f64) -> Option<String> {
    let views = board.snapshot();
    let running: Vec<usize> = (0..views.len())
        .filter(|&r| r != me && views[r].state == RankState::Running)
        .collect();
    let others_wait = (0..views.len())
        .filter(|&r| r != me && !running.contains(&r))
        .all(|r| views[r].state == RankState::Waiting && !is_stopped(views[r].tid));
    if running.is_empty() || !others_wait || running.iter().any(|&r| is_stopped(views[r].tid)) {
        return None;
    }
    let thing = what
        .strip_prefix("a ")
        .or_else(|| what.strip_prefix("an "))
        .map_or_else(|| what.to_string(), |t| format!("the {t}"));
    let (who, verb, pronoun) = match running.as_slice() {
        [one] => (format!("rank {one}"), "has", "it is"),
        many => (format!("ranks {many:?}"), "have", "they are"),
    };
    Some(format!(
        "{who} {verb} not reached {thing} the others entered {waited_s:.1} s ago; {pronoun} running, never waiting"
    ))
}

/// Ranks that watch the board for a deadlock: the lowest two. A deadlock means every rank
/// waits, these two included, so watching from every rank would only multiply the cost
/// (each look reads every record: watched from every rank, a thousand-rank job would spend
/// its processors reading the board). Two, so that a stopped rank 0 (a debugger) does not
/// silence the report.
pub const DEADLOCK_WATCHERS: usize = 2;

/// Whether `rank` watches the board for a deadlock.
pub fn watches_for_deadlock(rank: usize) -> bool {
    rank < DEADLOCK_WATCHERS
}

/// Whether `me` is the rank that should report a stuck wait now: among the waiting ranks,
/// the one whose wait began first (then the lowest), so that one report names the culprit
/// and the others keep waiting until the job ends them; nobody once a rank has failed.
pub fn reports_first(board: &Board, me: usize) -> bool {
    first_reporter(board, me, board.ranks())
}

/// [`reports_first`] among the ranks that watch for a deadlock.
pub fn reports_deadlock(board: &Board, me: usize) -> bool {
    first_reporter(board, me, DEADLOCK_WATCHERS)
}

/// Whether `me` is, among ranks below `among`, the waiting rank that reports.
fn first_reporter(board: &Board, me: usize, among: usize) -> bool {
    let views = board.snapshot();
    // A rank that failed has made its report; the job is ending already.
    if views.iter().any(|v| v.state == RankState::Failed) {
        return false;
    }
    // A stopped rank cannot report: the first of the others does.
    views
        .iter()
        .enumerate()
        .filter(|&(r, v)| {
            r < among && v.state == RankState::Waiting && (r == me || !is_stopped(v.tid))
        })
        .min_by_key(|(r, v)| (v.since_ms, *r))
        .is_none_or(|(r, _)| r == me)
}

/// Watches the board from inside a long wait and says when the job is deadlocked.
#[derive(Default, Debug)]
pub struct DeadlockDetector {
    /// Snapshots taken so far in this wait (time, views), oldest first.
    history: Vec<(u64, Vec<RankView>)>,
}

/// Every rank waiting, and the two views show the same waits with no handler run between
/// them, while every rank polled in between.
fn stuck_between(a: &[RankView], b: &[RankView]) -> bool {
    a.iter().zip(b).all(|(x, y)| {
        x.state == RankState::Waiting
            && y.state == RankState::Waiting
            && !y.other_threads
            && x.serial == y.serial
            && x.handled == y.handled
            && y.heartbeat > x.heartbeat
    })
}

impl DeadlockDetector {
    /// Take a snapshot at `now_ms` (call it every ~100 ms or more while waiting). Returns
    /// the report when the job has been stuck for [`DEADLOCK_WINDOW`].
    pub fn observe(&mut self, board: &Board, now_ms: u64) -> Option<String> {
        if let Some((last, _)) = self.history.last() {
            if now_ms.saturating_sub(*last) < 100 {
                return None;
            }
        }
        let views = board.snapshot();
        // Keep only the run of snapshots in which the job has been stuck.
        if let Some((_, prev)) = self.history.last() {
            if !stuck_between(prev, &views) {
                self.history.clear();
            }
        }
        self.history.push((now_ms, views));
        let (first, _) = self.history[0];
        let (last, views) = self.history.last()?;
        if self.history.len() < 3 || last - first < DEADLOCK_WINDOW.as_millis() as u64 {
            return None;
        }
        // Ranks in the end-of-job barrier while others wait for something else left the job
        // early (a call to exit, or a return from main): say so first, since the others'
        // waits are only the consequence.
        let ended: Vec<usize> = (0..views.len())
            .filter(|&r| views[r].text.starts_with(END_OF_JOB_WAIT))
            .collect();
        let cause = if !ended.is_empty() && ended.len() < views.len() {
            let (who, verb) = match ended.as_slice() {
                [one] => (format!("rank {one}"), "has"),
                many => (format!("ranks {many:?}"), "have"),
            };
            format!("{who} {verb} ended its part of the job early (a call to exit, or a return from main) while the others still wait; ")
        } else {
            String::new()
        };
        Some(format!(
            "deadlock: {cause}every rank is blocked and nothing is in flight, so no wait can ever end:\n{}",
            describe_all(views, *last).trim_end()
        ))
    }
}

/// How a wait in the end-of-job barrier is described on the board.
pub(crate) const END_OF_JOB_WAIT: &str = "the end-of-job barrier";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_round_trips_and_is_cut_at_a_character_boundary() {
        let board = Board::in_process(2);
        let rec = board.record(1);
        rec.publish_wait("a barrier (ranks [0] have not reached barrier 3)", 5, 0);
        let v = rec.view();
        assert_eq!(v.state, RankState::Waiting);
        assert_eq!(v.text, "a barrier (ranks [0] have not reached barrier 3)");
        let long = "é".repeat(150); // 300 bytes of two-byte characters
        rec.refresh_wait(&long);
        let v = rec.view();
        assert_eq!(v.text, "é".repeat(TEXT_BYTES / 2));
        rec.end_wait();
        assert_eq!(rec.view().state, RankState::Running);
        assert_eq!(rec.view().serial, 2);
    }

    #[test]
    fn a_deadlock_needs_every_rank_waiting_unchanged_and_alive() {
        let board = Board::in_process(2);
        for r in 0..2 {
            board.record(r).publish_wait("something", 0, 7);
        }
        let mut d = DeadlockDetector::default();
        let beat = |b: &Board| (0..2).for_each(|r| b.record(r).beat(7));
        assert!(d.observe(&board, 1000).is_none());
        beat(&board);
        assert!(d.observe(&board, 1300).is_none());
        beat(&board);
        let report = d.observe(&board, 1600).expect("stuck for 600 ms");
        assert!(report.contains("rank 1: waits for something"), "{report}");

        // A rank that stops polling (frozen) is not part of a deadlock.
        let mut d = DeadlockDetector::default();
        for t in [2000, 2300, 2600, 2900] {
            board.record(0).beat(7);
            assert!(d.observe(&board, t).is_none(), "frozen rank 1 at {t}");
        }
        // A handler run, or a wait that ends, resets the window.
        let mut d = DeadlockDetector::default();
        for (i, t) in [3000u64, 3300, 3600, 3900].into_iter().enumerate() {
            beat(&board);
            if i == 2 {
                board.record(1).beat(8);
            }
            let got = d.observe(&board, t);
            assert!(got.is_none() || i == 3, "reset expected at {t}");
        }
        board.record(0).end_wait();
        let mut d = DeadlockDetector::default();
        for t in [5000, 5300, 5600, 5900] {
            beat(&board);
            assert!(d.observe(&board, t).is_none(), "rank 0 runs at {t}");
        }
    }
}
