//! Point-to-point messages between the members of a team, built only from one-sided
//! operations, so collectives work on any conduit.
//!
//! Every member owns a *mailbox area* in its segment. For each source it holds a *ring* of
//! bytes; after the rings come one acknowledgement word per destination, each on its own
//! cache line. Messages from `s` to `d` go one after another into the ring `d` keeps for
//! `s`, each a header (sequence flag at its start; the call's signature and the length in
//! its last two words, just before the data) and its data, rounded up to cache lines.
//! Data of at most 40 bytes (`mailbox::INLINE`) lies inside the header, between the flag
//! and the signature, so such a message is one cache line and its receiver misses once
//! for it, not twice (2 ranks, 8-byte allreduce: see docs/PERFORMANCE.md). Thousands of
//! short messages can be in flight on a pair (a root's back-to-back broadcasts do not
//! wait for the receiver to be scheduled), and the ring holds two chunks of the longest
//! kind, so long transfers pipeline.
//!
//! A message from `s` to `d` with per-pair sequence number `n`:
//! 1. `s` waits until `d`'s acknowledged position leaves room for it and for the flag word
//!    after it. `d` stores its position into `s`'s ack word for `d` (`Release`); `s` loads
//!    it with `Acquire`, and only when the value it loaded last says there is no room.
//! 2. `s` clears the flag word just after the message (the next message's) if an earlier
//!    lap left data there (it keeps one bit per ring line: `protocol::mailbox::DataLines`;
//!    a word that held an earlier flag is left, saving a store into the line the receiver
//!    polls next), puts the data, the signature of the collective call it belongs to ([`Signature`]) and the length,
//!    then stores `n + 1` into the message's flag (`Release`). Data that reaches the
//!    ring's end goes on at its start (a header never crosses the end).
//! 3. `d` waits until the flag at its position reads `n + 1` (`Acquire`), compares the signature with its own call's (a mismatch fails the call,
//!    naming both calls: different operations, roots, counts, types, reductions or
//!    algorithms), copies the data out and acknowledges its new position.
//!
//! Both stores that cross to the other member (the flag, the acknowledgement) are
//! *signals* of the core: on a mapped member a `Release` store; on an unmapped one (another
//! host) one active message that the owner applies in order, carrying the signature,
//! length, data and the cleared next flag with the flag when they fit (two where the
//! ring's end splits them), and no one waits for it to be applied. So a message costs one one-way network message each way, and a member
//! that has finished its part of a collective is never needed again to complete it (it may
//! go straight into a blocking library call, as the `native` algorithm's group creation
//! does).
//!
//! Messages longer than one chunk travel as consecutive chunks.
//!
//! The handshake's decisions live in `protocol::mailbox`, which model-checks them with
//! loom.
//!
//! This module must never assume that a member's area is mapped: everything goes through
//! global pointers.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use bytemuck::Zeroable;
use smallvec::SmallVec;

use super::signature::Signature;
use crate::core::alloc::PAGE;
use crate::core::copy::copy_short;
use crate::core::direct::RemoteRange;
use crate::core::stats::{ScopeGuard, Traffic};
use crate::error::CoreError;
use crate::protocol::mailbox;
use crate::protocol::split::{self, ReceiverStep};
use crate::{Blocking, Context, GlobalPtr, Result};

mod offers;

/// Whether the receiver of a long message read directly shares the copy with its sender
/// (`protocol::split`): both cores copy, but the half the sender wrote sits in the
/// sender's cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Sharing {
    /// Never: the data is combined as it arrives (a reduction's).
    Never,
    /// From the team's threshold ([`Channel::set_split`]; 1 MiB by default), where the
    /// receiver's cache would not keep the data anyway.
    FromThreshold,
    /// From [`split::SPLIT_FROM`] wherever the team splits at all: data that is combined
    /// only once all of it is here (`Builder::shares_early`).
    Early,
}

/// Bytes of a message header (flag, padding, signature, length: one cache line).
const HEADER: usize = mailbox::HEADER as usize;
/// Offset of the signature in a header; the length follows it, then the data.
const SIGNATURE_AT: usize = HEADER - 16;
/// Words of a header line after its flag word: inline data, then signature and length,
/// adjacent, so that a short message is written with one put.
const LINE_WORDS: usize = (HEADER - mailbox::INLINE_AT) / 8;
/// A header line after its flag word, moved as one value.
type Line = [u64; LINE_WORDS];
const _: () = assert!(mailbox::INLINE_AT + mailbox::INLINE == SIGNATURE_AT);
/// Stride of acknowledgement words (one cache line each).
const ACK_STRIDE: usize = 64;
/// Set in a message's length word: it carries an [`Offer`] to read directly, not data.
const DIRECT: u64 = 1 << 63;

/// An offer of a direct read as it lies in the receiver's ring: where the data is, where
/// the receiver wants it (written by the receiver) and the state of the split copy
/// (`protocol::split`). It starts on a cache line and takes less than one, so it never
/// crosses the ring's end and its words can be reached one by one.
#[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
struct Offer {
    /// The sender's data.
    data: RemoteRange,
    /// The receiver's process and the address its copy goes to (zero until posted).
    destination: [u64; 2],
    /// Bytes the receiver copies itself, from the start (written with the destination):
    /// the sender writes the rest.
    head: u64,
    /// `protocol::split`'s state word.
    state: u64,
}

// An offer is longer than inline data, so its words always follow the header.
const _: () = assert!(std::mem::size_of::<Offer>() > mailbox::INLINE);

/// Word offsets in an [`Offer`].
const OFFER_DESTINATION: usize = 3;
const OFFER_STATE: usize = 6;

/// An offer sent and not yet known to be read: where it lies in the receiver's ring and
/// the position its acknowledgement passes once the data has been read.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SentOffer {
    at: u64,
    pub(crate) end: u64,
}

/// Messages of at least this many bytes are offered for direct reads where the receiver
/// can make them (see `schedule`). Below it the system call costs more than the second
/// copy saves: on a Xeon with AVX-512, 2 ranks, offers from 4 KiB made the 4 KiB points up
/// to 4.4× slower, and offers from 16 KiB made the 32 KiB points 1.1–1.9× faster
/// (measured with `tessera bench coll -n 2`). Whether a host's ranks read them directly at
/// all is the calibration's to say (`tessera tune --calibrate`, `calibration`).
///
/// ```
/// // The calibration's long probes (256 KiB broadcasts) are offered for direct reads.
/// assert!(tessera::model::team::DIRECT_FROM <= 256 * 1024);
/// ```
pub const DIRECT_FROM: usize = 16 * 1024;

/// Peers each way that [`Channel::transfer_each`] keeps on the stack: a 16-member flat
/// root's fifteen (a tree's parent and children, a small team's members); more spill to
/// the heap.
pub(crate) const FEW_PEERS: usize = 16;

/// The messages of one direction of a [`Channel::transfer_each`].
type Few<T> = SmallVec<[T; FEW_PEERS]>;

/// Default data bytes per chunk: large enough that the per-chunk handshake (about one
/// cache-line round trip) is small next to copying the chunk.
pub(crate) const DEFAULT_CHUNK: usize = 32 * 1024;

/// Bytes of one member's mailbox area for a team of `size` with `chunk`-byte chunks.
pub(crate) fn area_len(size: usize, chunk: usize) -> usize {
    size * mailbox::ring_for_chunk(chunk) as usize + size * ACK_STRIDE
}

/// Mailbox areas up to this size are mapped ahead of the first messages
/// ([`touch_own_area`], [`Channel::map_peer_pages`]); a larger team's (over 63 members)
/// is left to be mapped as messages reach it, most of its pairs never talking.
pub(crate) const PREFAULT_UP_TO: usize = 4 << 20;

/// Whether a team's mailbox area of `len` bytes is mapped ahead: small enough, and on a
/// host with a core per rank. Where ranks wait for cores, the first touches are lost in
/// the waits, and the prefault is not: 32 ranks on 2 cores started an NPB EP class S job
/// in 0.55 s with it against 0.27-0.30 without.
fn prefault(ctx: &Context, len: usize) -> bool {
    len <= PREFAULT_UP_TO && ctx.has_core_per_rank()
}

/// Write zeros over this member's fresh mailbox area of `len` bytes at `area`, so that its
/// pages exist before the first messages (an area is zero already: this only allocates
/// it), up to [`PREFAULT_UP_TO`]. A message that is the first into a page of a ring
/// otherwise pays the page's first touch, on a virtual machine far more than a message:
/// on a 16-core KVM guest, online trials timed dissemination barriers at 16 ranks at
/// 5-9 µs through the rings' first lap and 1.6-1.8 after it (`examples/online_barrier.rs`).
pub(crate) fn touch_own_area(ctx: &Context, area: GlobalPtr<u8>, len: usize) -> Result<()> {
    if !prefault(ctx, len) {
        return Ok(());
    }
    ctx.put(area, &vec![0u8; len], Blocking)
}

/// A message left to its sender to push: when, and its offer's state word.
type PostedPush = (std::time::Instant, GlobalPtr<u64>);

/// The pair streams of a set of members: every member's mailbox area and the messages
/// sent to and received from each so far. A team's channel and the channels of its subsets
/// ([`Channel::subset`]) share one, so a pair's messages stay in one ordered stream
/// whichever team sends them.
struct Streams {
    /// This member's index among the streams' members.
    me: usize,
    /// Every member's mailbox area.
    areas: Vec<GlobalPtr<u8>>,
    chunk: usize,
    /// Bytes of each pair's ring.
    ring: u64,
    /// Per receiver: the sequence number and ring position of the next message to it, its
    /// acknowledgement as last loaded, and which lines of the ring may hold data where a
    /// later message's flag goes (`protocol::mailbox::SenderSide`).
    outgoing: RefCell<Vec<mailbox::SenderSide>>,
    /// Per source: the sequence number and ring position of the next message from it.
    incoming: RefCell<Vec<mailbox::ReceiverSide>>,
    /// Whether this member and each other read long messages from each other directly
    /// (`core::direct`), as the team that made the streams agreed.
    direct: RefCell<Vec<bool>>,
    /// The shortest message read directly that this member splits with its sender
    /// (`protocol::split`): as receiver, it posts where the data goes and copies the first
    /// half; as sender (with any threshold), it writes the second half while it waits.
    /// `usize::MAX`: never.
    split_from: Cell<usize>,
    /// Whether some host of the job runs more ranks than it has processors (the team's
    /// crowded regime, agreed when the world team was made): a member that waits for
    /// another then often waits for the scheduler to run it.
    crowded: Cell<bool>,
    /// Halves (or whole pushed messages) this member has written into its receivers'
    /// buffers.
    halves_written: Cell<u64>,
    /// Per source: when this member left a whole message to it to push
    /// (`protocol::split::PUSH`), and the offer's state word, while it waits for the push.
    push_posted: RefCell<Vec<Option<PostedPush>>>,
    /// Nonblocking collectives in flight over these streams (any team's): their messages
    /// share the pair streams, so a blocking transfer must not start meanwhile.
    nonblocking: Cell<usize>,
}

/// The channel of one member of a team: its view of the pair streams.
pub(crate) struct Channel {
    streams: Rc<Streams>,
    /// Team index → index among the streams' members (`None`: the same).
    members: Option<Rc<[usize]>>,
    /// The signature of the blocking call in progress, carried by its messages.
    call: Cell<Signature>,
    /// Blocking calls in progress, nested (a composed algorithm calls others): the
    /// outermost call's signature is the one its messages carry.
    depth: Rc<Cell<u32>>,
    /// Whether every other member reads this one's long messages directly (worked out
    /// on first use, again after [`Channel::set_direct`]).
    all_direct: Cell<Option<bool>>,
}

/// While alive, a blocking call is in progress on a channel (see [`Channel::enter_call`]).
///
/// The statistics scope is boxed (allocated only while statistics are counted), so that a
/// guard is two words, each written whole: with the scope inline, its absence was a tag
/// byte, and moving a fresh guard out of the `Result` that carries it re-read that byte
/// while its store was still in flight, which waits for the store (on a 2-core AMD EPYC,
/// Zen 2, 5–8 ns of a 0.11 µs 8-byte broadcast, scatter or gather at 2 ranks).
pub(crate) struct CallGuard(Rc<Cell<u32>>, Option<Box<ScopeGuard>>);

impl CallGuard {
    /// While the call lasts, its traffic and waits count as a collective's (statistics).
    pub(crate) fn counted(mut self, scope: ScopeGuard) -> CallGuard {
        self.1 = Some(Box::new(scope));
        self
    }
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        self.0.set(self.0.get() - 1);
    }
}

impl Channel {
    pub(crate) fn new(me: usize, areas: Vec<GlobalPtr<u8>>, chunk: usize) -> Channel {
        let (size, ring) = (areas.len(), mailbox::ring_for_chunk(chunk));
        Channel {
            streams: Rc::new(Streams {
                me,
                areas,
                chunk,
                ring,
                outgoing: RefCell::new(vec![mailbox::SenderSide::new(ring); size]),
                incoming: RefCell::new(vec![mailbox::ReceiverSide::default(); size]),
                direct: RefCell::new(vec![false; size]),
                split_from: Cell::new(usize::MAX),
                crowded: Cell::new(false),
                halves_written: Cell::new(0),
                push_posted: RefCell::new(vec![None; size]),
                nonblocking: Cell::new(0),
            }),
            members: None,
            call: Cell::new(Signature(0)),
            depth: Rc::new(Cell::new(0)),
            all_direct: Cell::new(None),
        }
    }

    /// The channel of a subset of this channel's members (`members` are indices here; this
    /// member must be one). It shares the pair streams, so no member outside the subset
    /// takes part in making it.
    pub(crate) fn subset(&self, members: &[usize]) -> Channel {
        let members: Rc<[usize]> = members.iter().map(|&m| self.at(m)).collect();
        Channel {
            streams: self.streams.clone(),
            members: Some(members),
            call: Cell::new(Signature(0)),
            depth: Rc::new(Cell::new(0)),
            all_direct: Cell::new(None),
        }
    }

    /// The streams' index of team member `i`.
    #[inline]
    fn at(&self, i: usize) -> usize {
        match &self.members {
            None => i,
            Some(m) => m[i],
        }
    }

    /// A blocking call starts: unless it is nested in another, its messages carry `call`.
    #[inline]
    pub(crate) fn enter_call(&self, call: Signature) -> CallGuard {
        if self.depth.get() == 0 {
            self.call.set(call);
        }
        self.depth.set(self.depth.get() + 1);
        CallGuard(self.depth.clone(), None)
    }

    /// The outermost call in progress chose `alg` (a nested call's choice is its own
    /// business: every member that made the same outer call makes the same nested ones).
    #[inline]
    pub(crate) fn record_algorithm(&self, alg: super::Algorithm) {
        if self.depth.get() <= 1 {
            self.call.set(self.call.get().with_algorithm(alg));
        }
    }

    /// The blocking call now starting: its messages carry `call`.
    pub(crate) fn set_call(&self, call: Signature) {
        self.call.set(call);
    }

    /// The blocking call in progress.
    pub(crate) fn call(&self) -> Signature {
        self.call.get()
    }

    /// What this member has received from each source so far, and where its inbox is, for
    /// the end-of-job check that nothing was sent to it that it never received.
    pub(crate) fn audit(&self) -> ChannelAudit {
        let st = &self.streams;
        ChannelAudit {
            last_call: self.call.get(),
            inbox: st.areas[st.me],
            ring: st.ring,
            sources: st.areas.iter().map(|a| a.rank()).collect(),
            incoming: st.incoming.borrow().clone(),
        }
    }

    /// Members of the streams (all of them: the areas' layout depends on it).
    fn streams_size(&self) -> usize {
        self.streams.areas.len()
    }

    /// Data bytes per chunk (messages longer than this travel as several).
    pub(crate) fn chunk(&self) -> usize {
        self.streams.chunk
    }

    /// Chunks sent to team member `to` so far (the next one's sequence number).
    pub(crate) fn sent_to(&self, to: usize) -> u64 {
        self.streams.outgoing.borrow()[self.at(to)].sent()
    }

    /// Chunks received from team member `from` so far.
    pub(crate) fn received_from(&self, from: usize) -> u64 {
        self.streams.incoming.borrow()[self.at(from)].received
    }

    /// Nonblocking collectives of any kind, on any team sharing these streams, in flight.
    pub(crate) fn nonblocking(&self) -> usize {
        self.streams.nonblocking.get()
    }

    /// The most members any team on these streams can have (the streams' own count).
    pub(crate) fn max_members(&self) -> usize {
        self.streams_size()
    }

    /// World rank of team member `i`.
    pub(crate) fn world_rank(&self, i: usize) -> usize {
        self.streams.areas[self.at(i)].rank()
    }

    /// Map into this process every page it will touch in the other members' areas (the
    /// ring each keeps for this member, and the word where this member acknowledges
    /// theirs) by reading a word of each, where the areas are mapped here and prefaulted
    /// (`prefault`): the owners have written theirs ([`touch_own_area`]). Reads only (a
    /// member may already be sending), and uncounted: no communication of the program's.
    pub(crate) fn map_peer_pages(&self, ctx: &Context) -> Result<()> {
        let st = &self.streams;
        let size = self.streams_size();
        if !prefault(ctx, area_len(size, st.chunk)) {
            return Ok(());
        }
        let mapped = ctx.mapped_segments();
        let last_word = st.ring as usize - 8;
        for owner in (0..size).filter(|&o| o != st.me) {
            let ring = self.ring(owner, st.me).cast::<u64>();
            // A word per page from the ring's start, and its last (a ring that does not
            // start on a page ends in one more).
            let words = (0..last_word).step_by(PAGE).chain([last_word]);
            for at in words {
                if !mapped.touch(ring.add(at / 8))? {
                    break; // another host's member: nothing to map here
                }
            }
            mapped.touch(self.ack(owner, st.me))?;
        }
        Ok(())
    }

    /// The ring that streams member `owner` keeps for `source`.
    fn ring(&self, owner: usize, source: usize) -> GlobalPtr<u8> {
        self.streams.areas[owner].add(source * self.streams.ring as usize)
    }

    /// The word in streams member `owner`'s area where `peer` acknowledges its messages.
    fn ack(&self, owner: usize, peer: usize) -> GlobalPtr<u64> {
        let rings = self.streams_size() * self.streams.ring as usize;
        self.streams.areas[owner]
            .add(rings + peer * ACK_STRIDE)
            .cast()
    }

    /// Send to one member and receive from another at the same time. With a message of at
    /// most one chunk each way (a barrier's round, a small exchange), the send goes at once
    /// where the ring has room, which leaves only the receive to wait for (so no pattern
    /// can deadlock on it), and the receive takes a message that is already there at its
    /// first look, without the general loop.
    pub(crate) fn sendrecv(
        &self,
        ctx: &Context,
        to: usize,
        data: &[u8],
        from: usize,
        out: &mut [u8],
    ) -> Result<()> {
        let chunk = self.chunk();
        if data.len() <= chunk && out.len() <= chunk && self.nonblocking() == 0 {
            let call = self.call.get();
            if self.try_send_chunk(ctx, to, data, call)? {
                let mut incoming = Incoming::new(from, out);
                if let Some(n) = self.try_recv_chunk(ctx, from, incoming.buf, call)? {
                    (incoming.filled, incoming.started) = (n, true);
                    if incoming.done() {
                        return Ok(());
                    }
                }
                return self.transfer(ctx, &mut [], &mut [incoming]);
            }
        }
        self.transfer(
            ctx,
            &mut [Outgoing::new(to, data)],
            &mut [Incoming::new(from, out)],
        )
    }

    /// [`Channel::transfer`] of messages given one by one: at most one each way straight
    /// from the iterators (a 2-member team's flat or tree call, a tree's leaf); else up to
    /// [`FEW_PEERS`] each way on the stack, so that a small call allocates nothing and
    /// writes no slot it does not use. (Filling arrays of four with empty messages first
    /// cost an 8-byte flat scatter at 2 ranks about 25 ns of its 110 on the Zen 2 guest;
    /// heap vectors beyond four peers cost a flat root of 8 or 16 members two or more
    /// allocations per call, 50-200 ns on the Zen 3 guest.)
    pub(crate) fn transfer_each<'d>(
        &self,
        ctx: &Context,
        sends: impl IntoIterator<Item = Outgoing<'d>>,
        recvs: impl IntoIterator<Item = Incoming<'d>>,
    ) -> Result<()> {
        let (mut sends, mut recvs) = (sends.into_iter(), recvs.into_iter());
        let (mut send, mut recv) = (sends.next(), recvs.next());
        let next_send = send.as_ref().and_then(|_| sends.next());
        let next_recv = recv.as_ref().and_then(|_| recvs.next());
        if next_send.is_none() && next_recv.is_none() {
            return self.transfer(ctx, send.as_mut_slice(), recv.as_mut_slice());
        }
        let mut sends: Few<Outgoing> = send.into_iter().chain(next_send).chain(sends).collect();
        let mut recvs: Few<Incoming> = recv.into_iter().chain(next_recv).chain(recvs).collect();
        self.transfer(ctx, &mut sends, &mut recvs)
    }

    /// Move several messages at once (at most one per destination and one per source),
    /// advancing whichever chunk can move, so that no pattern of bounded rings can
    /// deadlock: every member that waits keeps both sending and receiving.
    pub(crate) fn transfer(
        &self,
        ctx: &Context,
        sends: &mut [Outgoing<'_>],
        recvs: &mut [Incoming<'_>],
    ) -> Result<()> {
        self.refuse_if_nonblocking()?;
        debug_assert!(sends
            .iter()
            .enumerate()
            .all(|(i, a)| sends[..i].iter().all(|b| b.to != a.to)));
        debug_assert!(recvs
            .iter()
            .enumerate()
            .all(|(i, a)| recvs[..i].iter().all(|b| b.from != a.from)));
        let call = self.call.get();
        // The first peer each direction is stuck on, for the wait's description.
        let (blocked_recv, blocked_send) = (Cell::new(None), Cell::new(None));
        let mut step = || -> Result<bool> {
            let mut done = true;
            blocked_recv.set(None);
            blocked_send.set(None);
            for s in sends.iter_mut() {
                while !s.done() {
                    let end = (s.offset + self.chunk()).min(s.data.len());
                    if !self.try_send_chunk(ctx, s.to, &s.data[s.offset..end], call)? {
                        if blocked_send.get().is_none() {
                            blocked_send.set(Some(s.to));
                        }
                        break;
                    }
                    s.offset = end;
                    s.started = true;
                }
                done &= s.done();
            }
            for r in recvs.iter_mut() {
                while !r.done() {
                    match self.try_recv_chunk(ctx, r.from, &mut r.buf[r.filled..], call)? {
                        Some(n) => {
                            r.filled += n;
                            r.started = true;
                        }
                        None => {
                            if blocked_recv.get().is_none() {
                                blocked_recv.set(Some(r.from));
                            }
                            break;
                        }
                    }
                }
                done &= r.done();
            }
            Ok(done)
        };
        if step()? {
            return Ok(());
        }
        let describe = || {
            let mut parts = Vec::new();
            if let Some(from) = blocked_recv.get() {
                parts.push(format!(
                    "a message from world rank {}",
                    self.world_rank(from)
                ));
            }
            if let Some(to) = blocked_send.get() {
                parts.push(format!(
                    "world rank {} to consume a message",
                    self.world_rank(to)
                ));
            }
            format!("in {call}, waiting for {}", parts.join(" and "))
        };
        ctx.wait_until("team messages", step, describe)
    }

    /// An error if nonblocking collectives are in flight on these streams: a blocking
    /// transfer must not start meanwhile.
    pub(crate) fn refuse_if_nonblocking(&self) -> Result<()> {
        if self.nonblocking() > 0 {
            return Err(CoreError::OutOfOrder { call: "a blocking collective", why: format!(
                "{} nonblocking collective(s) still in flight on this team (or a team sharing its channel: a subset or its parent): wait for their handles before starting another kind of collective on it",
                self.nonblocking()
            ) }
            .into());
        }
        Ok(())
    }

    /// A nonblocking collective starts on this channel.
    pub(crate) fn begin_nonblocking(&self) {
        let n = &self.streams.nonblocking;
        n.set(n.get() + 1);
    }

    pub(crate) fn end_nonblocking(&self) {
        let n = &self.streams.nonblocking;
        n.set(n.get() - 1);
    }

    /// Send one chunk of call `call` if the receiver's ring has room for it; `false` when
    /// it has not.
    pub(crate) fn try_send_chunk(
        &self,
        ctx: &Context,
        to: usize,
        chunk: &[u8],
        call: Signature,
    ) -> Result<bool> {
        let sent = self.try_send(ctx, to, chunk, chunk.len() as u64, 1, call)?;
        Ok(sent.is_some())
    }

    /// Offer `data` (a whole message of `chunks` chunks, which it takes the sequence
    /// numbers of) to team member `to` for a direct read, if the receiver's ring has room
    /// for the offer; until its acknowledgement passes [`SentOffer::end`]
    /// ([`Channel::acknowledged_past`]), `data` must stay as it is, and the sender may
    /// write part of it into the receiver's destination ([`Channel::help`]); `waits`: the
    /// offer is the last thing the sender's call does, so the receiver may split the copy
    /// at once; `pushes`: the sender receives in the same round and reads `data` anyway
    /// (the schedule's `Message::hot`), so the receiver may leave the whole copy to it
    /// (`protocol::split`). Only to a member
    /// [`Channel::direct_with`] says reads directly.
    #[allow(clippy::too_many_arguments)] // one message's description, passed through
    pub(crate) fn try_send_direct(
        &self,
        ctx: &Context,
        to: usize,
        data: &[u8],
        chunks: u64,
        waits: bool,
        pushes: bool,
        call: Signature,
    ) -> Result<Option<SentOffer>> {
        debug_assert!(self.direct_with(to));
        let at = self.streams.outgoing.borrow()[self.at(to)].position();
        let offer = Offer {
            data: RemoteRange::of(data),
            destination: [0; 2],
            head: 0,
            state: split::first_state(waits && self.split(), pushes && self.split()),
        };
        let wire = bytemuck::bytes_of(&offer);
        let sent = self.try_send(ctx, to, wire, wire.len() as u64 | DIRECT, chunks, call)?;
        Ok(sent.map(|end| SentOffer { at, end }))
    }

    /// While team member `to` has not acknowledged `offer` of `data`: if the receiver has
    /// posted its destination and the part it left to this member (the second half, or
    /// all of a pushed message) is still unclaimed, claim it and write it there
    /// (`protocol::split`), so both cores copy. `true` once nothing is left for this
    /// member to do for the offer (it wrote its part, the receiver took it, or this member
    /// does not split).
    pub(crate) fn help(
        &self,
        ctx: &Context,
        to: usize,
        offer: SentOffer,
        data: &[u8],
    ) -> Result<bool> {
        let (me, to) = (self.streams.me, self.at(to));
        // Once acknowledged, the offer's bytes in the ring may hold a later message.
        if !self.split()
            || data.len() < split::SPLIT_FROM
            || self.acknowledged_cached(to) >= offer.end
        {
            return Ok(true);
        }
        let state = self.offer_word(to, me, offer.at, OFFER_STATE);
        match ctx.atomic_load(state)? {
            split::WAITING | split::PUSH => return Ok(false),
            split::POSTED => {}
            _ => return Ok(true),
        }
        // Acquires the receiver's release of POSTED: its destination and head are written.
        if ctx.atomic_compare_swap(state, split::POSTED, split::SENDER_TAKES)? != split::POSTED {
            return Ok(true);
        }
        let mut posted = [0u64; 3];
        ctx.get(
            self.offer_word(to, me, offer.at, OFFER_DESTINATION),
            &mut posted,
            Blocking,
        )?;
        let [pid, addr, head] = posted;
        let head = (head as usize).min(data.len());
        let target = RemoteRange {
            pid,
            addr,
            bytes: data.len() as u64,
        };
        match target
            .part(head, data.len() - head)
            .write_from(&data[head..])
        {
            Ok(()) => {
                let receiver = self.streams.areas[to].rank();
                ctx.count(Traffic::Collective, receiver, data.len() - head);
                ctx.atomic_store(state, split::SENDER_DONE)?;
                let written = &self.streams.halves_written;
                written.set(written.get() + 1);
            }
            Err(_) => {
                // It wrote at most the right bytes; the receiver copies the half itself,
                // and this member stops splitting (its reads are unaffected).
                self.streams.split_from.set(usize::MAX);
                ctx.atomic_store(state, split::POSTED)?;
            }
        }
        Ok(true)
    }

    /// Word `word` of the offer at ring position `at` that streams member `source` sent to
    /// `owner`.
    fn offer_word(&self, owner: usize, source: usize, at: u64, word: usize) -> GlobalPtr<u64> {
        let place = (at + HEADER as u64 + 8 * word as u64) % self.streams.ring;
        self.ring(owner, source).add(place as usize).cast()
    }

    /// The shortest message read directly that this member splits with its sender
    /// (`protocol::split`; `None`: none); set once the team has agreed on direct reads.
    pub(crate) fn set_split(&self, from: Option<usize>) {
        self.streams
            .split_from
            .set(from.map_or(usize::MAX, |f| f.max(split::SPLIT_FROM)));
    }

    /// Whether this member splits long messages read directly at all (see
    /// [`Channel::set_split`]).
    pub(crate) fn split(&self) -> bool {
        self.streams.split_from.get() != usize::MAX
    }

    /// Halves this member has written into its receivers' buffers.
    pub(crate) fn halves_written(&self) -> u64 {
        self.streams.halves_written.get()
    }

    /// Whether this member reads any other member's long messages directly.
    pub(crate) fn any_direct(&self) -> bool {
        self.streams.direct.borrow().iter().any(|&d| d)
    }

    /// Whether team member `to` has acknowledged every message up to ring position `end`
    /// (see [`Channel::try_send_direct`]).
    pub(crate) fn acknowledged_past(&self, ctx: &Context, to: usize, end: u64) -> Result<bool> {
        self.acknowledged(ctx, self.at(to), |acknowledged| acknowledged >= end)
    }

    /// The position streams member `to` had acknowledged when last loaded (a lower bound).
    fn acknowledged_cached(&self, to: usize) -> u64 {
        self.streams.outgoing.borrow()[to].acknowledged()
    }

    /// Whether the position streams member `to` has acknowledged is `enough`: by the
    /// value last loaded (a lower bound), else by loading its ack word again (`Acquire`).
    /// So a sender with room to spare costs no cache miss on the word.
    fn acknowledged(&self, ctx: &Context, to: usize, enough: impl Fn(u64) -> bool) -> Result<bool> {
        if enough(self.acknowledged_cached(to)) {
            return Ok(true);
        }
        let acknowledged = ctx.atomic_load(self.ack(self.streams.me, to))?;
        self.streams.outgoing.borrow_mut()[to].set_acknowledged(acknowledged);
        Ok(enough(acknowledged))
    }

    /// Whether team member `i` and this one read long messages from each other directly.
    pub(crate) fn direct_with(&self, i: usize) -> bool {
        self.streams.direct.borrow()[self.at(i)]
    }

    /// Which members read long messages from each other directly (by team index; a team
    /// sets it once all its members have agreed).
    pub(crate) fn set_direct(&self, direct: &[bool]) {
        let mut all = self.streams.direct.borrow_mut();
        for (i, &d) in direct.iter().enumerate() {
            all[self.at(i)] = d;
        }
        self.all_direct.set(None);
    }

    /// Put the members in the crowded regime or not (see `Team::shares_cores`); the same
    /// for every team over these streams.
    pub(crate) fn set_crowded(&self, crowded: bool) {
        self.streams.crowded.set(crowded);
    }

    /// Whether some host of the job runs more ranks than it has processors.
    pub(crate) fn crowded(&self) -> bool {
        self.streams.crowded.get()
    }

    /// Whether every other member of the team reads this one's long messages directly.
    pub(crate) fn all_direct(&self) -> bool {
        if let Some(all) = self.all_direct.get() {
            return all;
        }
        let size = self
            .members
            .as_ref()
            .map_or(self.streams_size(), |m| m.len());
        let direct = self.streams.direct.borrow();
        let all = (0..size)
            .map(|i| self.at(i))
            .all(|s| s == self.streams.me || direct[s]);
        self.all_direct.set(Some(all));
        all
    }

    /// Send one message, `chunk` on the wire with `length` in its length word, taking
    /// `numbers` sequence numbers; its end position, or `None` if the ring has no room.
    fn try_send(
        &self,
        ctx: &Context,
        to: usize,
        chunk: &[u8],
        length: u64,
        numbers: u64,
        call: Signature,
    ) -> Result<Option<u64>> {
        let (me, to) = (self.streams.me, self.at(to));
        let ring_len = self.streams.ring;
        let footprint = mailbox::footprint(chunk.len());
        let slot = {
            let mut sides = self.streams.outgoing.borrow_mut();
            let side = &mut sides[to];
            if !side.fits(footprint, ring_len) {
                // This member's own ack word: a load of its own segment, which runs nothing
                // else meanwhile.
                side.set_acknowledged(ctx.atomic_load(self.ack(me, to))?);
                if !side.fits(footprint, ring_len) {
                    return Ok(None);
                }
            }
            // From here the stream counts the message sent (a failed put below fails the
            // call, and the team with it).
            side.claim(footprint, numbers, ring_len)
        };
        let ring = self.ring(to, me);
        let (seq, place) = (slot.seq, slot.place);
        let header_at = ring.add(place as usize);
        let next_flag = ring.add(slot.end_place as usize).cast::<u64>();
        let header = [call.0, length];
        if ctx.is_addressable(ring) {
            if slot.clear_next {
                ctx.put(next_flag, &[0], Blocking)?;
            }
            if chunk.len() <= mailbox::INLINE {
                // Data, signature and length: the header line after its flag, one put of
                // one value (copied in registers, not by a call to copy bytes).
                let mut line = [0u64; LINE_WORDS];
                copy_short(
                    &mut bytemuck::cast_slice_mut::<u64, u8>(&mut line)[..chunk.len()],
                    chunk,
                );
                line[LINE_WORDS - 2..].copy_from_slice(&header);
                let words = header_at.add(mailbox::INLINE_AT).cast::<Line>();
                ctx.put(words, &[line], Blocking)?;
                ctx.signal_store(None, header_at.cast(), mailbox::published(seq))?;
            } else {
                let data = mailbox::pieces(place + HEADER as u64, chunk.len(), ring_len);
                let (head, tail) = chunk.split_at(data[0].1);
                ctx.put(ring.add(data[0].0), head, Blocking)?;
                if !tail.is_empty() {
                    ctx.put(ring.add(data[1].0), tail, Blocking)?;
                }
                let words = header_at.add(SIGNATURE_AT).cast::<u64>();
                // `--cfg tessera_no_signatures` builds the channel without signatures, only
                // to measure what they cost (docs/PERFORMANCE.md); the length alone then
                // moves (a short message's line carries the signature word regardless).
                #[cfg(tessera_no_signatures)]
                ctx.put(words.add(1), &[header[1]], Blocking)?;
                #[cfg(not(tessera_no_signatures))]
                ctx.put(words.cast::<[u64; 2]>(), &[header], Blocking)?;
                ctx.signal_store(None, header_at.cast(), mailbox::published(seq))?;
            }
        } else {
            // Signature, length, data, padding and the cleared next flag are adjacent in the
            // ring (inline data, padded, then signature and length), so they travel with the
            // flag in one message, or in two where the ring's end splits them: the piece
            // after the end first, its last word (the next flag) as its signal's flag.
            let inline = chunk.len() <= mailbox::INLINE;
            let offset = if inline {
                mailbox::INLINE_AT
            } else {
                SIGNATURE_AT
            };
            let (words, span) = (place + offset as u64, footprint as usize + 8 - offset);
            let mut payload = Vec::with_capacity(span);
            if inline {
                payload.extend_from_slice(chunk);
                payload.resize(mailbox::INLINE, 0);
                payload.extend_from_slice(bytemuck::cast_slice(&header));
            } else {
                payload.extend_from_slice(bytemuck::cast_slice(&header));
                payload.extend_from_slice(chunk);
            }
            payload.resize(span, 0);
            let [head, tail] = mailbox::pieces(words, span, ring_len);
            if tail.1 > 0 {
                let rest = &payload[head.1..span - 8];
                let data = (!rest.is_empty()).then(|| (ring.add(tail.0), rest));
                ctx.signal_store(data, next_flag, 0)?;
            }
            ctx.signal_store(
                Some((ring.add(head.0), &payload[..head.1])),
                header_at.cast(),
                mailbox::published(seq),
            )?;
        }
        Ok(Some(slot.end))
    }

    /// Receive one chunk of call `call` into `out` if it has arrived; its length, or
    /// `None`. A chunk of another call is an error naming both calls.
    pub(crate) fn try_recv_chunk(
        &self,
        ctx: &Context,
        from: usize,
        out: &mut [u8],
        call: Signature,
    ) -> Result<Option<usize>> {
        self.try_recv(ctx, from, out, call, Sharing::Never)
    }

    /// [`Channel::try_recv_chunk`], where an offer of a direct read may be split with its
    /// sender as `sharing` says (`protocol::split`).
    pub(crate) fn try_recv(
        &self,
        ctx: &Context,
        from: usize,
        out: &mut [u8],
        call: Signature,
        sharing: Sharing,
    ) -> Result<Option<usize>> {
        let (me, from) = (self.streams.me, self.at(from));
        let ring_len = self.streams.ring;
        let side = self.streams.incoming.borrow()[from];
        let (seq, position) = (side.received, side.at);
        let ring = self.ring(me, from);
        let header_at = ring.add(side.place as usize);
        if !mailbox::has_arrived(ctx.atomic_load(header_at.cast::<u64>())?, seq) {
            return Ok(None);
        }
        // The header line after its flag as one value: inline data, signature, length
        // (one read of a line already here, copied in registers).
        let line: Line = ctx.get_value(header_at.add(mailbox::INLINE_AT).cast::<Line>())?;
        let [theirs, len] = [line[LINE_WORDS - 2], line[LINE_WORDS - 1]];
        #[cfg(tessera_no_signatures)]
        let theirs = {
            let _ = theirs;
            call.0
        };
        let (len, direct) = ((len & !DIRECT) as usize, len & DIRECT != 0);
        if theirs != call.0 {
            return Err(CoreError::CollectiveMismatch(format!(
                "world rank {} sent a message of {} while world rank {} is in {}",
                self.streams.areas[from].rank(),
                Signature(theirs),
                ctx.rank(),
                call
            ))
            .into());
        }
        // The sender's message is not what this member's call expects.
        let mismatch = |sent: String, expected: usize| -> crate::Error {
            CoreError::CollectiveMismatch(format!(
                "in {call}, world rank {} {sent} where world rank {} expected {expected}",
                self.streams.areas[from].rank(),
                ctx.rank(),
            ))
            .into()
        };
        if len > out.len() || (len == 0 && !out.is_empty()) {
            return Err(mismatch(format!("sent {len} bytes"), out.len()));
        }
        let mut offer = Offer::zeroed();
        let offer_len = std::mem::size_of::<Offer>();
        if direct && len != offer_len {
            let sent = format!("sent a {len}-byte offer of a direct read");
            return Err(mismatch(sent, offer_len));
        }
        // An offer's state word belongs to the split copy, which loads it atomically.
        let wire = if direct {
            &mut bytemuck::bytes_of_mut(&mut offer)[..8 * OFFER_STATE]
        } else {
            &mut out[..len]
        };
        let footprint = mailbox::footprint(len);
        // Two paths, not one address chosen by the length: the length arrives with the
        // header line, and a data address that waits for it keeps the processor from
        // fetching the data line meanwhile (64-byte allgathers at 2 ranks took 30-50 ns
        // longer so).
        if len <= mailbox::INLINE {
            // Inside the header line, read above with the signature.
            copy_short(wire, &bytemuck::cast_slice::<u64, u8>(&line)[..len]);
        } else {
            let data = mailbox::pieces(side.place + HEADER as u64, wire.len(), ring_len);
            let (head, tail) = wire.split_at_mut(data[0].1);
            ctx.get(ring.add(data[0].0), head, Blocking)?;
            if !tail.is_empty() {
                ctx.get(ring.add(data[1].0), tail, Blocking)?;
            }
        }
        // A direct read's message takes the sequence numbers of its chunks.
        let (len, numbers) = if direct {
            let bytes = offer.data.bytes as usize;
            if bytes > out.len() || bytes < DIRECT_FROM {
                let sent = format!("offered {bytes} bytes to read directly (from {DIRECT_FROM})");
                return Err(mismatch(sent, out.len()));
            }
            if !self.read_offer(ctx, from, position, &offer, &mut out[..bytes], sharing)? {
                return Ok(None);
            }
            (bytes, bytes.div_ceil(self.streams.chunk) as u64)
        } else {
            (len, 1)
        };
        let end = self.streams.incoming.borrow_mut()[from].took(footprint, numbers, ring_len);
        ctx.signal_store(None, self.ack(from, me), end)?;
        ctx.note_progress();
        Ok(Some(len))
    }
}

/// A message being sent by [`Channel::transfer`].
pub(crate) struct Outgoing<'a> {
    to: usize,
    data: &'a [u8],
    offset: usize,
    started: bool,
}

impl<'a> Outgoing<'a> {
    pub(crate) fn new(to: usize, data: &'a [u8]) -> Self {
        Outgoing {
            to,
            data,
            offset: 0,
            started: false,
        }
    }
    fn done(&self) -> bool {
        self.started && self.offset == self.data.len()
    }
}

/// A message being received by [`Channel::transfer`].
pub(crate) struct Incoming<'a> {
    from: usize,
    buf: &'a mut [u8],
    filled: usize,
    started: bool,
}

impl<'a> Incoming<'a> {
    pub(crate) fn new(from: usize, buf: &'a mut [u8]) -> Self {
        Incoming {
            from,
            buf,
            filled: 0,
            started: false,
        }
    }
    fn done(&self) -> bool {
        self.started && self.filled == self.buf.len()
    }
}

/// A member's inbox as it stood when its team went away (see [`Channel::audit`]).
pub(crate) struct ChannelAudit {
    /// The last call this member made on the team.
    pub(crate) last_call: Signature,
    inbox: GlobalPtr<u8>,
    ring: u64,
    /// World rank of each member.
    sources: Vec<usize>,
    /// Messages received from each member, and the ring position of the next.
    incoming: Vec<mailbox::ReceiverSide>,
}

impl ChannelAudit {
    /// After the end-of-job barrier (so every message sent is visible): the world ranks
    /// that sent this member a message it never received, each with the call that sent
    /// the first such message.
    pub(crate) fn unreceived(&self, ctx: &Context) -> Result<Vec<(usize, Signature)>> {
        let mut senders = Vec::new();
        for (source, side) in self.incoming.iter().enumerate() {
            let next = (source as u64 * self.ring + side.place) as usize;
            let header = self.inbox.add(next);
            if mailbox::has_arrived(ctx.atomic_load(header.cast::<u64>())?, side.received) {
                let call = ctx.get_value(header.add(SIGNATURE_AT).cast::<u64>())?;
                senders.push((self.sources[source], Signature(call)));
            }
        }
        Ok(senders)
    }
}
