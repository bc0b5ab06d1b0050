//! Writing a schedule down: the [`Builder`] an algorithm's rounds are written with, which
//! records each round's messages (reserving their sequence numbers on the pair streams as
//! it goes) and local steps, and decides per message whether it travels in chunks, as an
//! offer read directly or by rendezvous.
//!
//! This module must never move data: it only writes the plan that `Schedule::advance`
//! carries out.

use super::*;

/// Writes a schedule's rounds, reserving sequence numbers as it goes. It records places
/// and steps only (the buffers are the schedule's, made once the rounds are written), so it
/// is the same type whatever the element type, and an algorithm is a plain function of it
/// (the registry's rows hold them). A thin view, so that passing it from round to round
/// moves nothing.
pub(crate) struct Builder<'r> {
    pub(super) plan: &'r mut Plan,
    pub(super) reserved: &'r mut Reserved,
    pub(super) chunk: usize,
    /// Bytes per element.
    pub(super) element: usize,
    pub(super) nonblocking: bool,
}

impl<'r> Builder<'r> {
    /// Whether this blocking schedule's messages with `peer` of at least
    /// [`DIRECT_FROM`](crate::model::team::channel::DIRECT_FROM) bytes, from a place the
    /// schedule never writes, are read directly (the pair can, as both members know alike);
    /// never in a nonblocking schedule.
    pub(crate) fn reads_directly(&mut self, peer: usize) -> bool {
        !self.nonblocking && self.reserved.direct_with(peer)
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
        let pair_direct = self.reserved.direct_with(peer);
        let rendezvous = nonblocking && long && !pair_direct;
        let plan = &self.plan;
        let direct = send
            && pair_direct
            && if nonblocking {
                long
            } else {
                bytes >= crate::model::team::channel::DIRECT_FROM
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
    /// more reads its one message directly and whole instead: `algorithms::reduce::tree`.)
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
