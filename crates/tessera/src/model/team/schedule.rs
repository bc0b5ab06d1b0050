//! Nonblocking mailbox collectives as *schedules*: a member's part of one collective,
//! written down before it starts as rounds of messages (sends and receives on the team's
//! channel) each followed by local steps (copies, combines), and advanced without
//! blocking by whoever tests or waits on any of the team's requests.
//!
//! A schedule owns its buffers (a copy of the input, the output, scratch), so the
//! request handle borrows nothing: requests may be waited for in any order, dropped, or
//! forgotten, and the team keeps advancing them in the order they were started.
//!
//! Several schedules share the team's pair streams. Messages between a pair are consumed
//! in order, so each message reserves its sequence numbers on its pair when the schedule
//! is built (after those of every schedule started before it), and a chunk moves only when
//! the stream has reached its number. Every member starts the same collectives in the same
//! order, so the reservations agree.
//!
//! This module must never block: a step that cannot move now is left for the next
//! advance.

use std::any::Any;
use std::ops::Range;

use bytemuck::Pod;

use super::channel::Channel;
use super::signature::Signature;
use crate::core::native::test_native;
use crate::{Context, Result};

/// Which of a schedule's buffers a range refers to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Buf {
    /// The copy of the caller's input.
    Src,
    /// The output, handed back by `wait`.
    Dst,
    /// Scratch.
    Tmp,
}

/// A range of elements in one buffer.
pub(crate) type Place = (Buf, Range<usize>);

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
}

/// A local step after a round's messages.
pub(crate) enum Local {
    Copy { from: Place, to: Place },
    Combine { from: Place, into: Place },
    Zero(Place),
}

#[derive(Default)]
struct Round {
    sends: Vec<Message>,
    recvs: Vec<Message>,
    after: Vec<Local>,
}

/// Per-pair sequence numbers already promised to schedules of a team, and the scratch
/// buffers of finished schedules kept for the next ones (fresh large buffers cost a page
/// fault per page each time).
#[derive(Default)]
pub(crate) struct Reserved {
    pub(crate) send: Vec<u64>,
    pub(crate) recv: Vec<u64>,
    /// Spare buffers, each with its capacity in bytes.
    spare: Vec<SpareBuffer>,
}

/// Spare buffers kept per team.
const SPARE: usize = 8;

/// A buffer of some element type with its capacity in bytes.
pub(crate) type SpareBuffer = (usize, Box<dyn Any>);

impl Reserved {
    /// A buffer of `len` elements holding `from` (zeros past its end), reusing a spare one.
    fn buffer<T: Pod>(&mut self, len: usize, from: &[T]) -> Vec<T> {
        // The smallest spare buffer of this type that is large enough.
        let found = self
            .spare
            .iter()
            .enumerate()
            .filter_map(|(i, (_, b))| Some((i, b.downcast_ref::<Vec<T>>()?.capacity())))
            .filter(|&(_, capacity)| capacity >= len)
            .min_by_key(|&(_, capacity)| capacity)
            .map(|(i, _)| i);
        let mut v = match found {
            Some(i) => *self
                .spare
                .swap_remove(i)
                .1
                .downcast::<Vec<T>>()
                .expect("checked"),
            None => Vec::with_capacity(len),
        };
        v.clear();
        v.extend_from_slice(&from[..from.len().min(len)]);
        v.resize(len, T::zeroed());
        v
    }

    /// Keep `buffers` (with their capacities in bytes) for later schedules: the largest
    /// few, since small ones are cheap to make afresh.
    pub(crate) fn keep(&mut self, buffers: Vec<SpareBuffer>) {
        self.spare.extend(buffers);
        if self.spare.len() > SPARE {
            self.spare
                .sort_by_key(|&(bytes, _)| std::cmp::Reverse(bytes));
            self.spare.truncate(SPARE);
        }
    }
}

/// The combining function of a reduction schedule.
pub(crate) type Reducer<T> = Box<dyn Fn(&mut [T], &[T]) -> Result<()>>;

/// Builds a schedule round by round, reserving sequence numbers as it goes.
pub(crate) struct Builder<'r, T> {
    schedule: Schedule<T>,
    reserved: &'r mut Reserved,
    chunk: usize,
}

impl<'r, T: Pod> Builder<'r, T> {
    /// A schedule over `src` (copied), an output of `dst_len` and scratch of `tmp_len`
    /// elements, whose local steps run before any message moves.
    pub(crate) fn new(
        reserved: &'r mut Reserved,
        chunk: usize,
        src: &[T],
        dst_len: usize,
        tmp_len: usize,
        first: Vec<Local>,
    ) -> Self {
        let mut schedule = Schedule {
            src: reserved.buffer(src.len(), src),
            dst: vec![T::zeroed(); dst_len],
            tmp: reserved.buffer(tmp_len, &[]),
            rounds: Vec::new(),
            current: 0,
            reducer: None,
            signature: Signature(0),
        };
        schedule
            .apply(&first)
            .expect("copies and zeroing cannot fail");
        Builder {
            schedule,
            reserved,
            chunk,
        }
    }

    pub(crate) fn reducer(mut self, reducer: Reducer<T>) -> Self {
        self.schedule.reducer = Some(reducer);
        self
    }

    fn message(&self, peer: usize, place: Place, first: u64) -> Message {
        let bytes = place.1.len() * std::mem::size_of::<T>();
        Message {
            peer,
            place,
            first,
            chunks: bytes.div_ceil(self.chunk).max(1) as u64,
            moved: 0,
            offset: 0,
        }
    }

    /// A round: these sends and receives at once, then `after`.
    pub(crate) fn round(
        mut self,
        sends: Vec<(usize, Place)>,
        recvs: Vec<(usize, Place)>,
        after: Vec<Local>,
    ) -> Self {
        let mut round = Round {
            after,
            ..Round::default()
        };
        for (peer, place) in sends {
            let m = self.message(peer, place, self.reserved.send[peer]);
            self.reserved.send[peer] += m.chunks;
            round.sends.push(m);
        }
        for (peer, place) in recvs {
            let m = self.message(peer, place, self.reserved.recv[peer]);
            self.reserved.recv[peer] += m.chunks;
            round.recvs.push(m);
        }
        self.schedule.rounds.push(round);
        self
    }

    pub(crate) fn build(self) -> Schedule<T> {
        self.schedule
    }
}

/// One member's part of one nonblocking collective. See the [module docs](self).
pub(crate) struct Schedule<T> {
    src: Vec<T>,
    dst: Vec<T>,
    tmp: Vec<T>,
    rounds: Vec<Round>,
    current: usize,
    reducer: Option<Reducer<T>>,
    /// The signature its messages carry (see [`super::signature`]).
    signature: Signature,
}

fn buffer<'s, T>(src: &'s [T], dst: &'s [T], tmp: &'s [T], b: Buf) -> &'s [T] {
    match b {
        Buf::Src => src,
        Buf::Dst => dst,
        Buf::Tmp => tmp,
    }
}

impl<T: Pod> Schedule<T> {
    fn slice_mut(&mut self, b: Buf) -> &mut [T] {
        match b {
            Buf::Src => &mut self.src,
            Buf::Dst => &mut self.dst,
            Buf::Tmp => &mut self.tmp,
        }
    }

    /// `from` to read and `into` to write, borrowed at once (they never overlap).
    fn split(&mut self, from: &Place, into: &Place) -> (&[T], &mut [T]) {
        let bufs = [
            (Buf::Src, &mut self.src),
            (Buf::Dst, &mut self.dst),
            (Buf::Tmp, &mut self.tmp),
        ];
        if from.0 == into.0 {
            let (_, v) = bufs
                .into_iter()
                .find(|(b, _)| *b == from.0)
                .expect("a buffer");
            assert!(
                from.1.end <= into.1.start || into.1.end <= from.1.start,
                "a schedule step reads and writes overlapping ranges"
            );
            if from.1.start < into.1.start {
                let (lo, hi) = v.split_at_mut(into.1.start);
                (&lo[from.1.clone()], &mut hi[..into.1.len()])
            } else {
                let (lo, hi) = v.split_at_mut(from.1.start);
                (&hi[..from.1.len()], &mut lo[into.1.clone()])
            }
        } else {
            let (mut reader, mut writer) = (None, None);
            for (name, v) in bufs {
                if name == from.0 {
                    reader = Some(&v[from.1.clone()]);
                } else if name == into.0 {
                    writer = Some(&mut v[into.1.clone()]);
                }
            }
            (reader.expect("a buffer"), writer.expect("a buffer"))
        }
    }

    fn apply(&mut self, steps: &[Local]) -> Result<()> {
        for step in steps {
            match step {
                Local::Copy { from, to } => {
                    let (from, to) = self.split(from, to);
                    to.copy_from_slice(from);
                }
                Local::Combine { from, into } => {
                    let reducer = self
                        .reducer
                        .take()
                        .expect("a combining schedule has a reducer");
                    let (from, into) = self.split(from, into);
                    let outcome = reducer(into, from);
                    self.reducer = Some(reducer);
                    outcome?;
                }
                Local::Zero(place) => self.slice_mut(place.0)[place.1.clone()].fill(T::zeroed()),
            }
        }
        Ok(())
    }

    /// The same schedule, its messages carrying `signature`.
    pub(crate) fn carrying(mut self, signature: Signature) -> Self {
        self.signature = signature;
        self
    }

    /// Move whatever can move now; `true` once every round is done.
    fn advance(&mut self, ctx: &Context, channel: &Channel) -> Result<bool> {
        let chunk = channel.chunk();
        let signature = self.signature;
        while self.current < self.rounds.len() {
            let Schedule {
                src,
                dst,
                tmp,
                rounds,
                current,
                ..
            } = self;
            let round = &mut rounds[*current];
            let mut done = true;
            for m in &mut round.sends {
                let data: &[u8] =
                    bytemuck::cast_slice(&buffer(src, dst, tmp, m.place.0)[m.place.1.clone()]);
                while m.moved < m.chunks && channel.sent_to(m.peer) == m.first + m.moved {
                    let end = (m.offset + chunk).min(data.len());
                    if !channel.try_send_chunk(ctx, m.peer, &data[m.offset..end], signature)? {
                        break;
                    }
                    m.offset = end;
                    m.moved += 1;
                }
                done &= m.moved == m.chunks;
            }
            for m in &mut round.recvs {
                let region: &mut [T] = match m.place.0 {
                    Buf::Src => src,
                    Buf::Dst => dst,
                    Buf::Tmp => tmp,
                };
                let data: &mut [u8] = bytemuck::cast_slice_mut(&mut region[m.place.1.clone()]);
                while m.moved < m.chunks && channel.received_from(m.peer) == m.first + m.moved {
                    match channel.try_recv_chunk(ctx, m.peer, &mut data[m.offset..], signature)? {
                        Some(n) => {
                            m.offset += n;
                            m.moved += 1;
                        }
                        None => break,
                    }
                }
                done &= m.moved == m.chunks;
            }
            if !done {
                return Ok(false);
            }
            let after = std::mem::take(&mut self.rounds[self.current].after);
            self.apply(&after)?;
            self.current += 1;
        }
        Ok(true)
    }
}

/// A schedule of any element type, as a team keeps it.
pub(crate) trait Pending {
    /// Move whatever can move; `true` once done.
    fn advance(&mut self, ctx: &Context, channel: &Channel) -> Result<bool>;
    /// The output, once done (`None` where nobody waits for it), and the buffers that may
    /// serve again (with their capacities in bytes).
    fn output(self: Box<Self>) -> (Option<Box<dyn Any>>, Vec<SpareBuffer>);
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

impl<T: Pod> Pending for Schedule<T> {
    fn advance(&mut self, ctx: &Context, channel: &Channel) -> Result<bool> {
        Schedule::advance(self, ctx, channel)
    }
    fn output(self: Box<Self>) -> (Option<Box<dyn Any>>, Vec<SpareBuffer>) {
        let bytes = |v: &Vec<T>| v.capacity() * std::mem::size_of::<T>();
        let spare: Vec<SpareBuffer> = vec![
            (bytes(&self.src), Box::new(self.src)),
            (bytes(&self.tmp), Box::new(self.tmp)),
        ];
        (Some(Box::new(self.dst)), spare)
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
    fn output(self: Box<Self>) -> (Option<Box<dyn Any>>, Vec<SpareBuffer>) {
        let out = self.output.expect("output taken once done");
        (Some(Box::new(out)), Vec::new())
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
    schedule: Schedule<u64>,
    verify: Verify,
    done: bool,
}

impl Checked {
    pub(crate) fn new(schedule: Schedule<u64>, verify: Verify) -> Self {
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
        (self.verify)(&self.schedule.dst)?;
        Ok(true)
    }
    fn output(self: Box<Self>) -> (Option<Box<dyn Any>>, Vec<SpareBuffer>) {
        (None, Box::new(self.schedule).output().1)
    }
    fn gates(&self) -> bool {
        true
    }
}
