//! Typed errors, one enum per layer, and [`enum@Error`] that wraps them.
//!
//! Every message names the problem and, where there is one, the way out.

use thiserror::Error;

/// Errors of the job layer: starting, attaching and ending ranks.
#[derive(Debug, Error)]
pub enum JobError {
    /// An environment variable of the launch contract is malformed.
    #[error("environment variable {var}={value:?} is invalid: {why}")]
    BadEnv {
        /// Variable name.
        var: &'static str,
        /// Its value.
        value: String,
        /// What is wrong and what is allowed.
        why: String,
    },
    /// A `TESSERA_*` variable that Tessera does not know (a misspelling).
    #[error(
        "environment variable {name} is not one Tessera knows{hint} (the README lists them all)"
    )]
    UnknownVariable {
        /// The variable's name.
        name: String,
        /// The closest known name, as "; did you mean X?", or nothing.
        hint: String,
    },
    /// A size given on the command line or in the environment could not be parsed.
    #[error("cannot parse size {0:?}: use a number with an optional K, M, G or T suffix (e.g. 512M, 2G)")]
    BadSize(String),
    /// A size that parses but is zero or too large to represent.
    #[error("size {text:?} is {why}")]
    SizeOutOfRange {
        /// The size as given.
        text: String,
        /// What is wrong with it and what is allowed.
        why: &'static str,
    },
    /// A rank failed: panicked, returned an error, exited non-zero or was killed.
    #[error("rank {rank} failed: {why}")]
    RankFailed {
        /// The rank that failed first.
        rank: usize,
        /// How it failed.
        why: String,
    },
    /// Bootstrap could not reach every rank in time.
    #[error("bootstrap timed out after {secs} s waiting for rank(s) {missing:?} to attach; were all ranks started with the same TESSERA_JOB_ID?")]
    BootstrapTimeout {
        /// Seconds waited.
        secs: u64,
        /// Ranks that never appeared.
        missing: Vec<usize>,
    },
    /// A system call failed during start-up or teardown.
    #[error("{what}: {source}")]
    Os {
        /// What was being done.
        what: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A wrong argument to the job builder or launcher.
    #[error("{0}")]
    Usage(String),
    /// A running job whose ranks share no status board to read (`tessera status`).
    #[error(
        "no status board: the {conduit} conduit's ranks do not share one (mpirun reports on them)"
    )]
    NoStatusBoard {
        /// The job's conduit.
        conduit: String,
    },
}

/// Errors of the conduit layer: moving bytes between ranks.
#[derive(Debug, Error)]
pub enum ConduitError {
    /// The job is being torn down because another rank failed.
    #[error("job aborted: {0}")]
    Aborted(String),
    /// The operation needs a conduit capability that this conduit lacks.
    #[error("the {conduit} conduit cannot {what}")]
    Unsupported {
        /// Conduit name.
        conduit: &'static str,
        /// What was asked.
        what: &'static str,
    },
    /// An active-message frame is larger than the conduit carries.
    #[error("active message of {len} bytes exceeds the conduit's maximum of {max} bytes; move bulk data with put/get or a long message")]
    FrameTooLarge {
        /// Frame length.
        len: usize,
        /// Largest frame.
        max: usize,
    },
    /// An MPI call failed (mpi conduit).
    #[error("{call} failed with MPI error code {code}")]
    Mpi {
        /// The MPI function.
        call: &'static str,
        /// Its return code.
        code: i32,
    },
    /// Peers disagree on the shape of the job.
    #[error("rank {rank} disagrees on {what}: {detail}")]
    Mismatch {
        /// The peer.
        rank: usize,
        /// Which property.
        what: &'static str,
        /// Both values.
        detail: String,
    },
}

/// Errors of the core layer: addresses, allocation, communication and synchronisation.
#[derive(Debug, Error)]
pub enum CoreError {
    /// A rank index outside `0..ranks`.
    #[error("rank {rank} does not exist: this job has ranks 0..{ranks}")]
    NoSuchRank {
        /// The bad rank.
        rank: usize,
        /// Number of ranks in the job.
        ranks: usize,
    },
    /// An access through a global pointer whose arithmetic left the address space.
    #[error("invalid global pointer (rank {rank}): {why}; no access through it is possible")]
    InvalidPointer {
        /// The rank it names.
        rank: usize,
        /// What made it invalid.
        why: String,
    },
    /// An access that does not lie inside the target rank's segment.
    #[error("access of {len} bytes at offset {offset} on rank {rank} lies outside its {segment}-byte segment")]
    OutOfSegment {
        /// Target rank.
        rank: usize,
        /// Byte offset into the segment.
        offset: u64,
        /// Length of the access in bytes.
        len: u64,
        /// Segment size in bytes.
        segment: usize,
    },
    /// An access whose address is not aligned for its type.
    #[error("offset {offset} on rank {rank} is not aligned to {align} bytes for this type")]
    Misaligned {
        /// Target rank.
        rank: usize,
        /// Byte offset.
        offset: u64,
        /// Required alignment.
        align: usize,
    },
    /// The segment allocator could not satisfy a request.
    #[error("segment exhausted on rank {rank}: asked for {requested} bytes ({kind} allocation) but the {segment}-byte segment has at most {largest_free} contiguous bytes free; raise the segment size with `tessera run --segment SIZE` or TESSERA_SEGMENT=SIZE (e.g. 4G)")]
    SegmentExhausted {
        /// The rank.
        rank: usize,
        /// Bytes asked for.
        requested: usize,
        /// Collective or local.
        kind: &'static str,
        /// Segment size.
        segment: usize,
        /// Largest free block.
        largest_free: usize,
    },
    /// Freeing something that was not allocated (or twice).
    #[error("free of offset {offset} on rank {rank}: no live {kind} allocation starts there")]
    BadFree {
        /// The rank.
        rank: usize,
        /// The offset passed.
        offset: u64,
        /// Collective or local.
        kind: &'static str,
    },
    /// An operation that only the owning rank may do.
    #[error("{what} must be done by rank {owner} (its owner), not rank {caller}")]
    NotOwner {
        /// The operation.
        what: &'static str,
        /// The rank with affinity.
        owner: usize,
        /// The caller.
        caller: usize,
    },
    /// A blocking call from inside an active-message handler.
    #[error("{0} cannot be called inside an active-message handler (handlers must not block)")]
    InHandler(&'static str),
    /// An active message names a handler that the receiver never registered.
    #[error("rank {rank} received an active message for unregistered handler {id:#018x} from rank {from}; register every handler on every rank before the first barrier")]
    UnknownHandler {
        /// The receiving rank.
        rank: usize,
        /// The sender.
        from: usize,
        /// Handler identity.
        id: u64,
    },
    /// A reply from a handler that may not reply, or a second reply.
    #[error("a reply was sent from a {0}; only a request handler may reply, and only once")]
    BadReply(&'static str),
    /// Barriers of different ranks do not match (labels, or the end-of-job barrier meeting
    /// an ordinary one).
    #[error("barriers do not match: {0}")]
    BarrierMismatch(String),
    /// A wait exceeded the watchdog set by TESSERA_WAIT_TIMEOUT.
    #[error("watchdog: {plainly}rank {rank} waited more than {secs} s for {what} ({detail}")]
    WaitTimeout {
        /// Where every other rank waits on ranks that are running, the sentence that says
        /// so, ending in ". " (else empty).
        plainly: String,
        /// The waiting rank.
        rank: usize,
        /// Seconds.
        secs: f64,
        /// What it waited for.
        what: &'static str,
        /// Who did not arrive, when known, the advice, and, where the job's status board
        /// exists, the other ranks (the ones not waiting, which hold everybody up, first),
        /// one per line. (One string, so that every `Result` of the library stays small.)
        detail: String,
    },
    /// Team members are in different collective calls (detected by the call signature
    /// every team message carries).
    #[error("collective calls differ between ranks: {0}; every member must make the same collective calls, in the same order, with the same root, count, type, reduction and algorithm (TESSERA_CHECK=1 reports every member's call)")]
    CollectiveMismatch(String),
    /// Ranks' collective allocations differ (seen at a barrier): each rank's calls since the
    /// previous barrier and the first that differs.
    #[error("{0}")]
    AllocationMismatch(String),
    /// Every rank is blocked and nothing is in flight: the report lists every rank's wait.
    #[error("{0}")]
    Deadlock(String),
    /// RPC arguments or results could not be (de)serialised.
    #[error("rpc (de)serialisation failed: {0}")]
    Serialize(String),
    /// A remote procedure call failed on the rank that ran it (its arguments or result
    /// could not be decoded or encoded there, or its result did not fit one message).
    #[error("rpc on rank {rank} failed: {why}")]
    RpcFailed {
        /// The rank that ran the call.
        rank: usize,
        /// What went wrong there.
        why: String,
    },
    /// An argument that does not fit its call, alone or beside the others: the call and
    /// the argument are named, so a caller can tell which it was.
    #[error("{why}")]
    BadArgument {
        /// The call (`allreduce`, `Mailbox::new`, `strided transfer`, …).
        call: &'static str,
        /// The argument at fault (`dst`, `counts`, `root`, …).
        argument: &'static str,
        /// What is wrong and what is allowed (the whole message).
        why: String,
    },
    /// A call made when the state of the rank or team does not allow it (a blocking
    /// collective while nonblocking ones are in flight, `barrier_wait` before
    /// `barrier_notify`, releasing a lock nobody holds).
    #[error("{why}")]
    OutOfOrder {
        /// The call.
        call: &'static str,
        /// What is wrong and what to do first (the whole message).
        why: String,
    },
    /// Checked mode found members whose collective calls' arguments differ: every
    /// member's call, named.
    #[error("collective arguments differ between ranks (checked mode): {calls}")]
    ArgumentsDiffer {
        /// Each member's call, `rank N: call(...)`, separated by `; `.
        calls: String,
    },
    /// A message from another rank that this one cannot read (a truncated frame, an
    /// unknown operation code): a different program, or a fault.
    #[error("{what}")]
    Malformed {
        /// What was received.
        what: String,
    },
    /// Something the runtime could not do that no argument explains (its own segment not
    /// mapped, a peer's memory unreadable after its probe succeeded).
    #[error("{0}")]
    Internal(String),
}

/// A name or value that is not one of those a setting, an option or a registry takes (a
/// conduit, an algorithm, a collective operation, a number of seconds, a settings file),
/// with the message that says what is allowed.
///
/// ```
/// use tessera::{BadValue, ConduitKind};
/// let err = "tcp".parse::<ConduitKind>().unwrap_err();
/// assert!(matches!(&err, BadValue { what: "conduit", given, .. } if given == "tcp"));
/// assert!(err.to_string().contains("smp"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{message}")]
pub struct BadValue {
    /// What the value should have been (`conduit`, `algorithm`, `seconds`, …).
    pub what: &'static str,
    /// The value as given.
    pub given: String,
    /// The message, saying what is allowed.
    pub message: String,
}

impl BadValue {
    pub(crate) fn new(what: &'static str, given: &str, message: String) -> BadValue {
        BadValue {
            what,
            given: given.to_string(),
            message,
        }
    }
}

/// Any Tessera error.
#[derive(Debug, Error)]
pub enum Error {
    /// A name or value that is not one of those allowed.
    #[error(transparent)]
    Value(#[from] BadValue),
    /// From the job layer.
    #[error(transparent)]
    Job(#[from] JobError),
    /// From the conduit layer.
    #[error(transparent)]
    Conduit(#[from] ConduitError),
    /// From the core layer.
    #[error(transparent)]
    Core(#[from] CoreError),
    /// An application's own error, raised inside a rank or a handler (the NPB kernels',
    /// the dense applications'): the original is kept for `downcast_ref`.
    #[error(transparent)]
    Application(Box<dyn std::error::Error + Send + Sync>),
}
