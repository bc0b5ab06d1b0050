//! The one engine of the mailbox collectives: a member's part of one collective, written
//! down before it starts as *rounds* of messages (sends and receives on the team's
//! channel), each followed by local steps (copies, combines). Every algorithm of the
//! registry is written once, as rounds (module `algorithms`); a blocking call builds its
//! schedule over the caller's own buffers and advances it until done, and a nonblocking
//! call (`*_nb`) builds the same rounds over buffers of its own (a copy of the input, the
//! output, scratch), so its request borrows nothing: requests may be waited for in any
//! order, dropped, or forgotten, and the team keeps advancing them in the order they were
//! started, whoever tests or waits.
//!
//! Several schedules share the team's pair streams. Messages between a pair are consumed
//! in order, so each message reserves its sequence numbers on its pair when the schedule
//! is built (after those of every schedule started before it), and a chunk moves only when
//! the stream has reached its number. Every member starts the same collectives in the same
//! order, so the reservations agree.
//!
//! A nonblocking schedule's messages longer than two of the channel's chunks, between
//! members that read each other's memory directly (see below), are *offers* of the place
//! itself, unless a later step of the schedule writes it (then chunks): the schedule owns
//! its buffers until it is done, and it is done only once every offer has been read, so the
//! data moves whenever the receiver advances, with one copy and no staging. (On an
//! AVX-512 Xeon, a 1 × 2 Cholesky of order 2048 spent 2.5 ms of 34 in the
//! staging copies of its panels' in-place broadcasts before this.) Between other members
//! they travel by *rendezvous* instead of in chunks: the sender copies the data once into a staging area
//! in its own segment and sends a one-chunk descriptor (where the data is, where the
//! reader's flag is); the receiver copies the data straight from the staging area into
//! its place with one get and stores 1 into its flag. The data moves whenever the
//! receiver advances, without the sender advancing again, so a large nonblocking
//! broadcast completes on a member that tests it even while its root computes. Orderings:
//! the staging copy is before the descriptor's flag store (`Release`, the channel's), which
//! the receiver's load acquires before its get; the receiver's get is before its flag
//! store (a signal: `Release` on a mapped area, applied in order on another host), which
//! the sender loads with `Acquire` before it frees the area, once every reader's flag is
//! set (`protocol::rendezvous`, model-checked with loom). Sends of the same place in the
//! same round share one staging area. Blocking schedules keep the chunks, which pipeline
//! while both members are in the call. Only the message moves without the sender: an
//! algorithm whose root must also receive or forward (the segmented chain) still needs it.
//!
//! A blocking schedule's sends of 16 KiB or more (`channel::DIRECT_FROM`), to a member that reads this one's
//! memory directly (`core::direct`: ranks of one host whose team found cross-memory attach
//! working), travel as an *offer* instead: one message holding where the data is (process,
//! address, length), which takes the sequence numbers of the chunks it replaces. The
//! receiver reads the data straight from the sender's buffer into its place (one copy
//! instead of two, the data never in the mailbox) and only then acknowledges the offer; the
//! sender's schedule is done only when every offer's acknowledgement has come back, so the
//! caller's buffer stays unchanged until it is read. An offer is made only of a place that
//! the schedule never writes (the input always; the output only where no receive, copy,
//! combine or zeroing of the schedule overlaps it, before or after; never scratch): a later
//! write would change the data under the reader, and what an earlier one wrote is in the
//! sender's cache, where a direct read saves no copy and adds the wait for it. So the
//! rounds go on meanwhile. The receiver tells an offer from data by a bit of its length word, so
//! it needs no agreement beyond the team's probe.
//!
//! This module must never block: a step that cannot move now is left for the next
//! advance.

use std::any::Any;
use std::ops::Range;

use bytemuck::{Pod, Zeroable};

use super::channel::{Channel, SentOffer, Sharing};
use super::reserved::{PlanKey, Reserved};
use super::signature::Signature;
use crate::core::gptr::GlobalPtr;
use crate::core::native::test_native;
use crate::model::ops::Combine;
use crate::protocol::rendezvous;
use crate::{Blocking, Context, Result};

/// Which of a schedule's buffers a range refers to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Buf {
    /// The caller's input (read only).
    Src,
    /// The output: the caller's buffer in a blocking call, handed back by `wait` in a
    /// nonblocking one.
    Dst,
    /// Scratch.
    Tmp,
}

/// A range of elements in one buffer.
pub(crate) type Place = (Buf, Range<usize>);

/// The caller's input: borrowed by a blocking call, a copy in a nonblocking one (whose
/// request borrows nothing).
pub(crate) enum Input<'b, T> {
    Borrowed(&'b [T]),
    Owned(Vec<T>),
}

/// The output: the caller's buffer in a blocking call, the request's own in a
/// nonblocking one.
pub(crate) enum Output<'b, T> {
    Borrowed(&'b mut [T]),
    Owned(Vec<T>),
}

impl<T> Input<'_, T> {
    fn slice(&self) -> &[T] {
        match self {
            Input::Borrowed(s) => s,
            Input::Owned(v) => v,
        }
    }
}

impl<T> Output<'_, T> {
    fn slice(&self) -> &[T] {
        match self {
            Output::Borrowed(s) => s,
            Output::Owned(v) => v,
        }
    }

    fn slice_mut(&mut self) -> &mut [T] {
        match self {
            Output::Borrowed(s) => s,
            Output::Owned(v) => v,
        }
    }
}

/// One message of a round, to or from `peer`, in chunks of the channel.
struct Message {
    peer: usize,
    place: Place,
    /// Sequence number of the first chunk on the pair stream, and the chunk count.
    first: u64,
    chunks: u64,
    moved: u64,
    /// Bytes moved so far.
    offset: usize,
    /// Whether it travels by rendezvous (one descriptor chunk; see the module docs).
    rendezvous: bool,
    /// A send read directly by its receiver (one offer, taking the chunks' sequence
    /// numbers; see the module docs).
    direct: bool,
    /// A send of data this member reads anyway in the call (another send of its round
    /// carries it, or a local step copied it), so it is hot in this member's cache: only
    /// then may its receiver leave it the whole copy (`protocol::split`'s push). An
    /// all-to-all's blocks are each read once, by whichever side copies them; pushing
    /// them saved nothing at 2 ranks and cost 5-15 % at 8 ranks on 2 cores.
    hot: bool,
    /// A receive whose data the round combines only once all of it is here, so that a
    /// direct read of it is shared with its sender from
    /// [`SPLIT_FROM`](crate::protocol::split::SPLIT_FROM) bytes whatever the team's
    /// threshold ([`Builder::shares_early`]).
    shared_early: bool,
}

/// What a rendezvous message's one chunk carries.
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
struct Descriptor {
    /// The staged data, in the sender's segment.
    data: GlobalPtr<u8>,
    /// The reader's flag there, set to 1 once the data is read.
    flag: GlobalPtr<u64>,
    bytes: u64,
}

/// A staging area of a rendezvous sender: flag words for up to `capacity` readers, then
/// the data.
struct Staged {
    round: usize,
    place: Place,
    at: GlobalPtr<u64>,
    capacity: usize,
    readers: usize,
}

impl Message {
    fn done(&self) -> bool {
        self.moved == self.chunks
    }
}

/// A local step after a round's messages.
pub(crate) enum Local {
    Copy { from: Place, to: Place },
    Combine { from: Place, into: Place },
    Zero(Place),
}

impl Local {
    /// The place the step writes.
    fn destination(&self) -> &Place {
        match self {
            Local::Copy { to: place, .. }
            | Local::Combine { into: place, .. }
            | Local::Zero(place) => place,
        }
    }
}

/// Whether two places share an element.
fn overlap(a: &Place, b: &Place) -> bool {
    a.0 == b.0 && a.1.start < b.1.end && b.1.start < a.1.end
}

/// One round: its sends, then its receives (ranges of [`Plan::messages`]), and the local
/// steps that follow once all of them are done (a range of [`Plan::after`]).
#[derive(Clone)]
struct Round {
    sends: Range<usize>,
    recvs: Range<usize>,
    after: Range<usize>,
}

/// The rounds of a schedule, in three flat lists, so that a schedule costs three
/// allocations however many rounds it has, and none once a team has plans to reuse.
#[derive(Default)]
pub(crate) struct Plan {
    rounds: Vec<Round>,
    messages: Vec<Message>,
    after: Vec<Local>,
    /// Local steps before any message moves (copies and zeroing), applied when the
    /// schedule first advances.
    before: Vec<Local>,
    /// Elements of scratch the rounds use.
    scratch: usize,
    /// Sends among `messages` to be read directly.
    direct: usize,
    /// The places of the output the schedule writes (receives and local steps so far).
    writes: Vec<Place>,
    /// The places local steps copied from before the rounds (see [`Message::hot`]).
    read_locally: Vec<Place>,
}

impl Plan {
    /// Empty every list, keeping their memory.
    pub(crate) fn clear(&mut self) {
        self.rounds.clear();
        self.messages.clear();
        self.after.clear();
        self.before.clear();
        self.scratch = 0;
        self.direct = 0;
        self.writes.clear();
        self.read_locally.clear();
    }

    /// Whether a later call of the same shape may run this plan again: only where every
    /// message travels in chunks (a direct read depends on more than the shape: what the
    /// pair can read). Kept plans are blocking calls', which never stage a rendezvous.
    pub(crate) fn reusable(&self) -> bool {
        debug_assert!(self.messages.iter().all(|m| !m.rendezvous));
        self.direct == 0
    }

    /// Make a finished plan ready to run again: every message reserves its sequence
    /// numbers anew, in the order the builder reserved them (each round's sends, then its
    /// receives), and has moved nothing.
    fn reserve_again(&mut self, reserved: &mut Reserved) {
        for round in &self.rounds {
            for (range, send) in [(round.sends.clone(), true), (round.recvs.clone(), false)] {
                for m in &mut self.messages[range] {
                    m.first = reserved.take(m.peer, send, m.chunks);
                    m.moved = 0;
                    m.offset = 0;
                }
            }
        }
    }
}

/// The combining function of a reduction schedule: the caller's own in a blocking call,
/// owned by a nonblocking one (`'static` there).
pub(crate) enum Reducer<'b, T> {
    Borrowed(&'b Combine<'b, T>),
    Owned(Box<Combine<'b, T>>),
}

impl<T> Reducer<'_, T> {
    fn combine(&self, acc: &mut [T], other: &[T]) -> Result<()> {
        match self {
            Reducer::Borrowed(f) => f(acc, other),
            Reducer::Owned(f) => f(acc, other),
        }
    }
}

/// Writes a schedule's rounds, reserving sequence numbers as it goes. It records places
/// and steps only (the buffers are the schedule's, made once the rounds are written), so it
/// is the same type whatever the element type, and an algorithm is a plain function of it
/// (the registry's rows hold them). A thin view, so that passing it from round to round
/// moves nothing.
pub(crate) struct Builder<'r> {
    plan: &'r mut Plan,
    reserved: &'r mut Reserved,
    chunk: usize,
    /// Bytes per element.
    element: usize,
    nonblocking: bool,
    /// This call's long messages go through the mailbox even where the pair could read
    /// them directly (the team's way for long messages, or the online tuner's for this
    /// call; every member of the call sets it alike).
    long_via_mailbox: bool,
}

impl<'r> Builder<'r> {
    /// Whether this blocking schedule's messages with `peer` of at least
    /// [`DIRECT_FROM`](crate::model::team::channel::DIRECT_FROM) bytes, from a place the
    /// schedule never writes, are read directly (the pair can, as both members know alike,
    /// and the call does not send its long messages through the mailbox); never in a
    /// nonblocking schedule.
    pub(crate) fn reads_directly(&mut self, peer: usize) -> bool {
        !self.nonblocking && self.pair_reads_directly(peer)
    }

    /// Whether this blocking call's long messages are read directly between every pair of
    /// members and the members share processors (some host runs more ranks than it has):
    /// where a pipeline of chunks would wait for the scheduler at every step. Every member
    /// of the call answers alike ([`Reserved::crowded_and_all_direct`]).
    pub(crate) fn crowded_and_reads_directly_everywhere(&self) -> bool {
        !self.nonblocking && !self.long_via_mailbox && self.reserved.crowded_and_all_direct()
    }

    /// Whether `peer` and this member read this call's long messages directly.
    fn pair_reads_directly(&mut self, peer: usize) -> bool {
        !self.long_via_mailbox && self.reserved.direct_with(peer)
    }

    /// Data bytes per chunk of the channel.
    pub(crate) fn chunk(&self) -> usize {
        self.chunk
    }

    /// Bytes per element of the schedule's buffers.
    pub(crate) fn element(&self) -> usize {
        self.element
    }

    /// At least `len` elements of scratch (what is in it is unspecified: every algorithm
    /// writes its scratch before reading it; see [`Reserved::buffer`]).
    pub(crate) fn scratch(self, len: usize) -> Self {
        self.plan.scratch = self.plan.scratch.max(len);
        self
    }

    /// Local steps before any message moves (copies and zeroing only), run when the
    /// schedule first advances, and by every call that reuses the plan.
    pub(crate) fn local(mut self, steps: impl IntoIterator<Item = Local>) -> Self {
        for step in steps {
            debug_assert!(
                matches!(step, Local::Copy { .. } | Local::Zero(_)),
                "a step before the rounds only copies or zeroes"
            );
            self.written(step.destination());
            if let Local::Copy { from, .. } = &step {
                self.plan.read_locally.push(from.clone());
            }
            self.plan.before.push(step);
        }
        self
    }

    fn message(&mut self, peer: usize, place: Place, send: bool) -> Message {
        let bytes = place.1.len() * self.element;
        // Longer than two chunks (a pair's ring), in a nonblocking schedule: read directly
        // where the pair can (whatever the place: a later write of it demotes the send to
        // chunks, see `written`), else by rendezvous. From `DIRECT_FROM` bytes in a
        // blocking one: read directly where the pair can, if the place is one the schedule
        // never writes (see the module docs and `written`). Chunks, a rendezvous
        // descriptor or an offer: both ends of the message reckon the same way, from what
        // both know (the length, the pair, the kind of schedule).
        let long = bytes > 2 * self.chunk;
        let nonblocking = self.nonblocking;
        let pair_direct = self.pair_reads_directly(peer);
        let rendezvous = nonblocking && long && !pair_direct;
        let plan = &self.plan;
        let direct = send
            && pair_direct
            && if nonblocking {
                long
            } else {
                bytes >= super::channel::DIRECT_FROM
                    && (place.0 == Buf::Src
                        || (place.0 == Buf::Dst && !plan.writes.iter().any(|w| overlap(w, &place))))
            };
        self.plan.direct += usize::from(direct);
        let chunks = if rendezvous {
            1
        } else {
            bytes.div_ceil(self.chunk).max(1) as u64
        };
        let first = self.reserved.take(peer, send, chunks);
        Message {
            peer,
            place,
            first,
            chunks,
            moved: 0,
            offset: 0,
            rendezvous,
            direct,
            hot: false,
            shared_early: false,
        }
    }

    /// A place this schedule writes from now on: an earlier send of it cannot be read
    /// directly (the sender would change it before the read), so it goes in chunks; and,
    /// in a blocking schedule, a later send of it neither (what the schedule has just
    /// written is in the sender's cache, so a direct read saves no copy there and adds the
    /// wait for it; a nonblocking one would otherwise stage a copy).
    fn written(&mut self, place: &Place) {
        let plan = &mut self.plan;
        if place.0 == Buf::Dst {
            plan.writes.push(place.clone());
        }
        if plan.direct == 0 {
            return;
        }
        for m in plan.messages.iter_mut().filter(|m| m.direct) {
            if overlap(&m.place, place) {
                m.direct = false;
                plan.direct -= 1;
            }
        }
    }

    /// A round of sends only, each combined by its receiver as it arrives (a reduction
    /// tree's partial results going up, a segment at a time): they travel in chunks, never
    /// read directly. A direct read of each segment leaves all the copying to the
    /// receiver, in series with its combining, where chunks share it with the sender and
    /// pipeline: at 2 ranks on a 2-core AMD host a 1 MiB reduce of `f64`s took 210-275 µs
    /// read directly segment by segment and 116 µs in chunks, 32 KiB 19-26 µs against
    /// 2.5-3.7 (docs/PERFORMANCE.md, "Collectives"). (A 2-rank reduction of 256 KiB or
    /// more reads its one message directly and whole instead, and so does a reduction
    /// where ranks outnumber processors: `algorithms::reduce::tree`.)
    pub(crate) fn sends_to_combine(self, sends: impl IntoIterator<Item = (usize, Place)>) -> Self {
        let start = self.plan.messages.len();
        let b = self.round(sends, [], []);
        for m in &mut b.plan.messages[start..] {
            if m.direct {
                m.direct = false;
                b.plan.direct -= 1;
            }
        }
        b
    }

    /// The receives of the round just written, whose data its local steps combine only
    /// once each has wholly arrived (the 2-rank reduction's one message), share a direct
    /// read's copy with their senders from
    /// [`SPLIT_FROM`](crate::protocol::split::SPLIT_FROM) bytes wherever the team splits
    /// at all, not only from its threshold for data read soon
    /// ([`DEFAULT_SPLIT_FROM`](crate::protocol::split::DEFAULT_SPLIT_FROM)): the half the
    /// sender wrote is then read from its cache, but both cores copy. A 2-rank reduce of
    /// `u64` sums on a 2-core AMD host, shared against whole: 256 KiB 18.5-21.8 against
    /// 27.3-30.1 µs and 1 MiB 69-91 against 104-125 with the virtual CPUs 50 ns apart,
    /// 1 MiB 88-100 against 134-141 at 22-24 ns, but 110-123 against 105-109 at
    /// 210-230 ns (docs/PERFORMANCE.md, "Beside the OSU micro-benchmarks").
    pub(crate) fn shares_early(self) -> Self {
        if let Some(round) = self.plan.rounds.last() {
            for m in &mut self.plan.messages[round.recvs.clone()] {
                m.shared_early = true;
            }
        }
        self
    }

    /// A round: these sends and receives at once, then `after`.
    pub(crate) fn round(
        mut self,
        sends: impl IntoIterator<Item = (usize, Place)>,
        recvs: impl IntoIterator<Item = (usize, Place)>,
        after: impl IntoIterator<Item = Local>,
    ) -> Self {
        let start = self.plan.messages.len();
        for (peer, place) in sends {
            let m = self.message(peer, place, true);
            self.plan.messages.push(m);
        }
        let middle = self.plan.messages.len();
        // Only a send read directly can be pushed, so only those are looked at (each
        // against the round's other sends: at least 16 KiB each, so the search costs
        // little beside the copies).
        let plan = &mut self.plan;
        for i in start..middle {
            if !plan.messages[i].direct {
                continue;
            }
            let place = &plan.messages[i].place;
            let shared = (start..middle).any(|j| j != i && overlap(place, &plan.messages[j].place))
                || plan.read_locally.iter().any(|r| overlap(place, r));
            plan.messages[i].hot = shared;
        }
        for (peer, place) in recvs {
            debug_assert!(place.0 != Buf::Src, "a schedule never writes its input");
            self.written(&place);
            let m = self.message(peer, place, false);
            self.plan.messages.push(m);
        }
        let end = self.plan.messages.len();
        let first_step = self.plan.after.len();
        for step in after {
            self.written(step.destination());
            self.plan.after.push(step);
        }
        let plan = &mut self.plan;
        plan.rounds.push(Round {
            sends: start..middle,
            recvs: middle..end,
            after: first_step..plan.after.len(),
        });
        self
    }
}

/// A schedule's three buffers.
struct Buffers<'b, T> {
    src: Input<'b, T>,
    dst: Output<'b, T>,
    tmp: Vec<T>,
}

impl<T> Buffers<'_, T> {
    fn get(&self, b: Buf) -> &[T] {
        match b {
            Buf::Src => self.src.slice(),
            Buf::Dst => self.dst.slice(),
            Buf::Tmp => &self.tmp,
        }
    }

    fn get_mut(&mut self, b: Buf) -> &mut [T] {
        match b {
            Buf::Src => panic!("a schedule never writes its input"),
            Buf::Dst => self.dst.slice_mut(),
            Buf::Tmp => &mut self.tmp,
        }
    }

    /// `from` to read and `into` to write, borrowed at once (they never overlap).
    fn split(&mut self, from: &Place, into: &Place) -> (&[T], &mut [T]) {
        if from.0 == into.0 {
            assert!(
                from.1.end <= into.1.start || into.1.end <= from.1.start,
                "a schedule step reads and writes overlapping ranges"
            );
            let v = self.get_mut(into.0);
            if from.1.start < into.1.start {
                let (lo, hi) = v.split_at_mut(into.1.start);
                (&lo[from.1.clone()], &mut hi[..into.1.len()])
            } else {
                let (lo, hi) = v.split_at_mut(from.1.start);
                (&hi[..from.1.len()], &mut lo[into.1.clone()])
            }
        } else {
            let Buffers { src, dst, tmp } = self;
            let (src, dst) = (src.slice(), dst.slice_mut());
            let (f, i) = (from.1.clone(), into.1.clone());
            match (from.0, into.0) {
                (Buf::Src, Buf::Dst) => (&src[f], &mut dst[i]),
                (Buf::Src, Buf::Tmp) => (&src[f], &mut tmp[i]),
                (Buf::Dst, Buf::Tmp) => (&dst[f], &mut tmp[i]),
                (Buf::Tmp, Buf::Dst) => (&tmp[f], &mut dst[i]),
                _ => panic!("a schedule never writes its input"),
            }
        }
    }
}

/// Run one local step.
fn apply<T: Pod>(
    bufs: &mut Buffers<'_, T>,
    reducer: Option<&Reducer<'_, T>>,
    step: &Local,
) -> Result<()> {
    match step {
        Local::Copy { from, to } => {
            let (from, to) = bufs.split(from, to);
            crate::core::copy::copy_slice(to, from);
        }
        Local::Combine { from, into } => {
            let reducer = reducer.expect("a combining schedule has a reducer");
            let (from, into) = bufs.split(from, into);
            reducer.combine(into, from)?;
        }
        Local::Zero(place) => bufs.get_mut(place.0)[place.1.clone()].fill(T::zeroed()),
    }
    Ok(())
}

/// One member's part of one collective: a blocking call's, run to completion before the
/// call returns, or a nonblocking call's, held by the team. See the [module docs](self).
pub(crate) struct Schedule<'b, T> {
    bufs: Buffers<'b, T>,
    plan: Box<Plan>,
    /// Whether the steps before the rounds have run (at the first advance, whether the
    /// plan was just written or is reused).
    begun: bool,
    /// Under which key its plan may serve later calls (blocking calls of few bytes).
    key: Option<PlanKey>,
    current: usize,
    reducer: Option<Reducer<'b, T>>,
    /// The signature its messages carry (see [`super::signature`]).
    signature: Signature,
    /// Whether it is a nonblocking call's (its long messages are offers or rendezvous,
    /// which move without the sender advancing again).
    nonblocking: bool,
    /// Its staging areas not yet released by every reader.
    staged: Vec<Staged>,
    /// Its sends read directly whose readers have not yet acknowledged them.
    awaiting: Vec<Awaiting>,
}

/// A send read directly whose reader has not yet acknowledged it.
struct Awaiting {
    peer: usize,
    offer: SentOffer,
    /// Its message's index in the plan (for the data, which the sender may help copy).
    message: usize,
    /// Whether nothing is left for the sender to do but wait for the acknowledgement.
    settled: bool,
}

impl<'b, T: Pod> Schedule<'b, T> {
    /// A schedule from `src` into `dst` (combining with `reducer`), its messages carrying
    /// `signature`; its rounds are written by a [`Builder`].
    pub(crate) fn new(
        reserved: &mut Reserved,
        src: Input<'b, T>,
        dst: Output<'b, T>,
        reducer: Option<Reducer<'b, T>>,
        signature: Signature,
    ) -> Self {
        // A schedule that owns its input is a nonblocking one: every member of the call
        // builds the same kind, so both ends of a message agree on how it travels.
        let nonblocking = matches!(src, Input::Owned(_));
        Schedule {
            bufs: Buffers {
                src,
                dst,
                tmp: Vec::new(),
            },
            plan: reserved.plans.pop().unwrap_or_default(),
            begun: true,
            key: None,
            current: 0,
            reducer,
            signature,
            nonblocking,
            staged: Vec::new(),
            awaiting: Vec::new(),
        }
    }

    /// Run `plan` (a finished call's, kept under `key`) instead of writing rounds: its
    /// messages reserve their sequence numbers again and its scratch is made.
    pub(crate) fn reuse(&mut self, reserved: &mut Reserved, key: PlanKey, mut plan: Box<Plan>) {
        plan.reserve_again(reserved);
        if self.bufs.tmp.len() < plan.scratch {
            self.bufs.tmp = reserved.buffer(plan.scratch, &[]);
        }
        reserved.keep_plan(std::mem::replace(&mut self.plan, plan));
        self.key = Some(key);
        self.begun = false;
    }

    /// Write this schedule's rounds with `rounds`, then make its scratch. With
    /// `long_via_mailbox`, no message is read directly (every member of the call must pass
    /// the same).
    pub(crate) fn build(
        &mut self,
        reserved: &mut Reserved,
        chunk: usize,
        long_via_mailbox: bool,
        rounds: impl for<'r> FnOnce(Builder<'r>) -> Builder<'r>,
    ) {
        rounds(Builder {
            plan: &mut self.plan,
            reserved,
            chunk,
            element: std::mem::size_of::<T>(),
            nonblocking: self.nonblocking,
            long_via_mailbox,
        });
        if self.bufs.tmp.len() < self.plan.scratch {
            self.bufs.tmp = reserved.buffer(self.plan.scratch, &[]);
        }
        self.begun = false;
    }

    /// Let this schedule's plan serve later calls of `key` once it is done.
    pub(crate) fn keep_as(&mut self, key: PlanKey) {
        self.key = Some(key);
    }

    /// Move whatever can move now; `true` once every round is done (and every staging
    /// area released). On an error, no sender is left to write into a buffer of this
    /// member's ([`Channel::withdraw_pushes`]).
    pub(crate) fn advance(&mut self, ctx: &Context, channel: &Channel) -> Result<bool> {
        let advanced = self.advance_rounds(ctx, channel);
        if advanced.is_err() {
            channel.withdraw_pushes(ctx);
        }
        advanced
    }

    fn advance_rounds(&mut self, ctx: &Context, channel: &Channel) -> Result<bool> {
        let chunk = channel.chunk();
        let Schedule {
            bufs,
            plan,
            begun,
            current,
            reducer,
            signature,
            staged,
            awaiting,
            ..
        } = self;
        if !*begun {
            for step in &plan.before {
                apply(bufs, None, step)?;
            }
            *begun = true;
        }
        while *current < plan.rounds.len() {
            let round = plan.rounds[*current].clone();
            let mut done = true;
            let sends = round.sends.clone();
            for (index, m) in plan.messages[round.sends].iter_mut().enumerate() {
                let data: &[u8] = bytemuck::cast_slice(&bufs.get(m.place.0)[m.place.1.clone()]);
                if m.rendezvous {
                    if !m.done() && channel.sent_to(m.peer) == m.first {
                        let s = stage(ctx, channel, staged, *current, &m.place, data)?;
                        let descriptor = Descriptor {
                            data: s.at.add(s.capacity).cast(),
                            flag: s.at.add(s.readers),
                            bytes: data.len() as u64,
                        };
                        let bytes = bytemuck::bytes_of(&descriptor);
                        if channel.try_send_chunk(ctx, m.peer, bytes, *signature)? {
                            s.readers += 1;
                            m.moved = 1;
                        }
                    }
                    done &= m.done();
                    continue;
                }
                if m.direct {
                    if !m.done() && channel.sent_to(m.peer) == m.first {
                        // The last round with nothing to receive or compute after it: this
                        // member will only wait for the read.
                        let waits = *current + 1 == plan.rounds.len()
                            && round.recvs.is_empty()
                            && round.after.is_empty();
                        // Receiving in the same round, it copies anyway: its receiver may
                        // leave it the whole copy, if the data is hot here (`Message::hot`).
                        let pushes = !round.recvs.is_empty() && m.hot;
                        if let Some(offer) = channel.try_send_direct(
                            ctx, m.peer, data, m.chunks, waits, pushes, *signature,
                        )? {
                            m.moved = m.chunks;
                            awaiting.push(Awaiting {
                                peer: m.peer,
                                offer,
                                message: sends.start + index,
                                settled: false,
                            });
                        }
                    }
                    done &= m.done();
                    continue;
                }
                while !m.done() && channel.sent_to(m.peer) == m.first + m.moved {
                    let end = (m.offset + chunk).min(data.len());
                    if !channel.try_send_chunk(ctx, m.peer, &data[m.offset..end], *signature)? {
                        break;
                    }
                    m.offset = end;
                    m.moved += 1;
                }
                done &= m.done();
            }
            for m in &mut plan.messages[round.recvs] {
                let data: &mut [u8] =
                    bytemuck::cast_slice_mut(&mut bufs.get_mut(m.place.0)[m.place.1.clone()]);
                if m.rendezvous {
                    if !m.done() && channel.received_from(m.peer) == m.first {
                        fetch(ctx, channel, m, data, *signature)?;
                    }
                    done &= m.done();
                    continue;
                }
                while !m.done() && channel.received_from(m.peer) == m.first + m.moved {
                    // Data a reduction combines at once is read whole (`protocol::split`),
                    // unless its round combines it only once it is whole.
                    let sharing = if m.shared_early {
                        Sharing::Early
                    } else if reducer.is_none() {
                        Sharing::FromThreshold
                    } else {
                        Sharing::Never
                    };
                    match channel.try_recv(
                        ctx,
                        m.peer,
                        &mut data[m.offset..],
                        *signature,
                        sharing,
                    )? {
                        Some(n) => {
                            m.offset += n;
                            // One chunk, or a direct read taking every chunk's number.
                            m.moved = channel.received_from(m.peer) - m.first;
                        }
                        None => break,
                    }
                }
                done &= m.done();
            }
            if !done {
                // Receivers that left this member their whole copy wait for it.
                if !awaiting.is_empty() {
                    help(ctx, channel, bufs, plan, awaiting)?;
                }
                return Ok(false);
            }
            for step in &plan.after[round.after] {
                apply(bufs, reducer.as_ref(), step)?;
            }
            *current += 1;
        }
        // Direct reads of this member's buffers done: then the caller may change them.
        // Meanwhile this member has nothing else to do, so it copies its half of each
        // split one (`protocol::split`).
        help(ctx, channel, bufs, plan, awaiting)?;
        while let Some(a) = awaiting.last() {
            if !channel.acknowledged_past(ctx, a.peer, a.offer.end)? {
                return Ok(false);
            }
            awaiting.pop();
        }
        release(ctx, staged)
    }

    /// The team members this schedule waits for now: the first it expects a message from
    /// and the first that has not yet consumed one of its messages.
    pub(crate) fn waiting_on(&self) -> (Option<usize>, Option<usize>) {
        let Some(round) = self.plan.rounds.get(self.current) else {
            return (None, self.awaiting.last().map(|a| a.peer));
        };
        let first = |r: &Range<usize>| {
            self.plan.messages[r.clone()]
                .iter()
                .find(|m| !m.done())
                .map(|m| m.peer)
        };
        (first(&round.recvs), first(&round.sends))
    }

    /// Finish: hand the plan and the large buffers to `reserved` for later schedules, and
    /// return the output if it is the schedule's own (a nonblocking one's).
    pub(crate) fn recycle(self, reserved: &mut Reserved) -> Option<Vec<T>> {
        let Buffers { src, dst, tmp } = self.bufs;
        if let Input::Owned(v) = src {
            reserved.keep_vec(v);
        }
        reserved.keep_vec(tmp);
        match self.key {
            Some(key) => reserved.keep_for(key, self.plan),
            None => reserved.keep_plan(self.plan),
        }
        match dst {
            Output::Owned(v) => Some(v),
            Output::Borrowed(_) => None,
        }
    }

    /// The output so far.
    fn output_slice(&self) -> &[T] {
        self.bufs.get(Buf::Dst)
    }
}

/// For every send read directly that still needs it: write the part its receiver left to
/// this member (`Channel::help`).
fn help<T: Pod>(
    ctx: &Context,
    channel: &Channel,
    bufs: &Buffers<'_, T>,
    plan: &Plan,
    awaiting: &mut [Awaiting],
) -> Result<()> {
    for a in awaiting.iter_mut().filter(|a| !a.settled) {
        let m = &plan.messages[a.message];
        let data: &[u8] = bytemuck::cast_slice(&bufs.get(m.place.0)[m.place.1.clone()]);
        a.settled = channel.help(ctx, a.peer, a.offer, data)?;
    }
    Ok(())
}

/// The staging area of `place` in `round`, made (and filled with `data`) by the first
/// send of it.
fn stage<'s>(
    ctx: &Context,
    channel: &Channel,
    staged: &'s mut Vec<Staged>,
    round: usize,
    place: &Place,
    data: &[u8],
) -> Result<&'s mut Staged> {
    let found = staged
        .iter()
        .position(|s| s.round == round && s.place == *place);
    let i = match found {
        Some(i) => i,
        None => {
            // A flag word per possible reader, then the data (whole words).
            let capacity = channel.max_members();
            let at = ctx.alloc_local::<u64>(capacity + data.len().div_ceil(8))?;
            ctx.put(at, &vec![0u64; capacity], Blocking)?;
            ctx.put(at.add(capacity).cast::<u8>(), data, Blocking)?;
            staged.push(Staged {
                round,
                place: place.clone(),
                at,
                capacity,
                readers: 0,
            });
            staged.len() - 1
        }
    };
    Ok(&mut staged[i])
}

/// Receive a rendezvous message's descriptor if it has arrived, copy the staged data into
/// `data` and release the sender's staging area.
fn fetch(
    ctx: &Context,
    channel: &Channel,
    m: &mut Message,
    data: &mut [u8],
    signature: Signature,
) -> Result<()> {
    let mut descriptor = Descriptor::zeroed();
    let got = channel.try_recv_chunk(
        ctx,
        m.peer,
        bytemuck::bytes_of_mut(&mut descriptor),
        signature,
    )?;
    match got {
        None => return Ok(()),
        Some(n) if n == std::mem::size_of::<Descriptor>() && descriptor.bytes == data.len() as u64 => {}
        Some(_) => {
            return Err(crate::error::CoreError::CollectiveMismatch(format!(
                "in {signature}, world rank {} sent a {}-byte message where world rank {} expected {} bytes",
                channel.world_rank(m.peer),
                descriptor.bytes,
                ctx.rank(),
                data.len()
            ))
            .into())
        }
    }
    ctx.get(descriptor.data, data, Blocking)?;
    ctx.signal_store(None, descriptor.flag, rendezvous::READ)?;
    m.moved = 1;
    Ok(())
}

/// Free every staging area all of whose readers have copied it; `true` when none is left.
fn release(ctx: &Context, staged: &mut Vec<Staged>) -> Result<bool> {
    let mut i = 0;
    while i < staged.len() {
        let s = &staged[i];
        // Every reader's flag, stopping at the first not yet set (this runs on each
        // advance, so it allocates nothing).
        let mut read = true;
        for r in 0..s.readers {
            if !rendezvous::has_read(ctx.atomic_load(s.at.add(r))?) {
                read = false;
                break;
            }
        }
        if read {
            ctx.free_local(s.at)?;
            staged.swap_remove(i);
        } else {
            i += 1;
        }
    }
    Ok(staged.is_empty())
}

/// A schedule of any element type, as a team keeps it.
pub(crate) trait Pending {
    /// Move whatever can move; `true` once done.
    fn advance(&mut self, ctx: &Context, channel: &Channel) -> Result<bool>;
    /// The output, once done (`None` where nobody waits for it); what may serve later
    /// schedules goes to `reserved`.
    fn output(self: Box<Self>, reserved: &mut Reserved) -> Option<Box<dyn Any>>;
    /// Whether it moves messages on the team's channel (a schedule) or not (a
    /// [`NativePending`]).
    fn on_channel(&self) -> bool {
        true
    }
    /// Whether later collectives may count as done only once this one is (checked mode's
    /// agreement checks: a request's wait must report a failed check started before it).
    fn gates(&self) -> bool {
        false
    }
}

impl<T: Pod> Pending for Schedule<'static, T> {
    fn advance(&mut self, ctx: &Context, channel: &Channel) -> Result<bool> {
        Schedule::advance(self, ctx, channel)
    }
    fn output(self: Box<Self>, reserved: &mut Reserved) -> Option<Box<dyn Any>> {
        let output = (*self).recycle(reserved);
        output.map(|v| Box::new(v) as Box<dyn Any>)
    }
}

/// A nonblocking collective run by the conduit's own library (MPI's `MPI_I*` on the
/// team's communicator): advancing it tests the request, and it never touches the
/// team's channel. The conduit owns the buffers until the request completes.
pub(crate) struct NativePending<T> {
    ticket: u64,
    output: Option<Vec<T>>,
    /// Zero the output once done (an exclusive scan's first member, which MPI leaves
    /// undefined and the model defines as zeros).
    zero: bool,
}

impl<T> NativePending<T> {
    /// The collective the conduit started as `ticket`.
    pub(crate) fn new(ticket: u64, zero: bool) -> Self {
        NativePending {
            ticket,
            output: None,
            zero,
        }
    }
}

impl<T: Pod> Pending for NativePending<T> {
    fn advance(&mut self, ctx: &Context, _channel: &Channel) -> Result<bool> {
        if self.output.is_none() {
            let mut got = None;
            test_native(ctx, self.ticket, &mut |bytes| {
                let mut out = vec![T::zeroed(); bytes.len() / std::mem::size_of::<T>().max(1)];
                bytemuck::cast_slice_mut(&mut out).copy_from_slice(bytes);
                got = Some(out);
            })?;
            self.output = got.map(|mut out| {
                if self.zero {
                    out.fill(T::zeroed());
                }
                out
            });
        }
        Ok(self.output.is_some())
    }
    fn output(self: Box<Self>, _reserved: &mut Reserved) -> Option<Box<dyn Any>> {
        let out = self.output.expect("output taken once done");
        Some(Box::new(out))
    }
    fn on_channel(&self) -> bool {
        false
    }
}

/// What judges a [`Checked`] schedule's output.
pub(crate) type Verify = Box<dyn Fn(&[u64]) -> Result<()>>;

/// A schedule whose output is judged rather than handed back (checked mode's agreement
/// check of a nonblocking call): once its messages are done, `verify` sees the output,
/// and a rejection fails this advance and every later one.
pub(crate) struct Checked {
    schedule: Schedule<'static, u64>,
    verify: Verify,
    done: bool,
}

impl Checked {
    pub(crate) fn new(schedule: Schedule<'static, u64>, verify: Verify) -> Self {
        Checked {
            schedule,
            verify,
            done: false,
        }
    }
}

impl Pending for Checked {
    fn advance(&mut self, ctx: &Context, channel: &Channel) -> Result<bool> {
        if !self.done {
            if !self.schedule.advance(ctx, channel)? {
                return Ok(false);
            }
            self.done = true;
        }
        (self.verify)(self.schedule.output_slice())?;
        Ok(true)
    }
    fn output(self: Box<Self>, reserved: &mut Reserved) -> Option<Box<dyn Any>> {
        self.schedule.recycle(reserved);
        None
    }
    fn gates(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests;
