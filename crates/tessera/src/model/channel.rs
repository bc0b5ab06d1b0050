//! Point-to-point messages between the members of a team, built only from one-sided
//! operations, so collectives work on any conduit.
//!
//! Every member owns a *mailbox area* in its segment. For each source it holds two slots
//! (double buffering), each a header (sequence flag at its start, length in its last
//! word, just before the data) and `chunk` bytes of data; after them come one
//! acknowledgement word per destination, each on its own cache line.
//!
//! A message from `s` to `d` with per-pair sequence number `n` goes to slot `n % 2` of the
//! inbox `d` keeps for `s`:
//! 1. `s` waits until `d` has acknowledged message `n − 2` (the last user of that slot). `d`
//!    stores the count of consumed messages into `s`'s ack word for `d` (`Release`); `s`
//!    loads it with `Acquire`. This is flow control with two credits.
//! 2. `s` puts the data and the length, then stores `n + 1` into the slot's flag
//!    (`Release`).
//! 3. `d` waits until the flag reads `n + 1` (`Acquire`), copies the data out and
//!    acknowledges.
//!
//! Both stores that cross to the other member (the flag, the acknowledgement) are
//! *signals* of the core: on a mapped member a `Release` store; on an unmapped one (another
//! host) one active message that the owner applies in order, carrying the length and data
//! with the flag when they fit, and no one waits for it to be applied. So a message costs
//! one one-way network message each way, and a member that has finished its part of a
//! collective is never needed again to complete it (it may go straight into a blocking
//! library call, as the `native` algorithm's group creation does).
//!
//! Messages longer than one chunk travel as consecutive chunks. With two slots the sender
//! fills one while the receiver drains the other, so large transfers are pipelined.
//!
//! This module must never assume that a member's area is mapped: everything goes through
//! global pointers.

use std::cell::{Cell, RefCell};

use crate::{Context, GlobalPtr, Result};

/// Bytes of a slot header (flag, length; padded to a cache line).
const HEADER: usize = 64;
/// Stride of acknowledgement words (one cache line each).
const ACK_STRIDE: usize = 64;

/// Default data bytes per slot: large enough that the per-chunk handshake (about one
/// cache-line round trip) is small next to copying the chunk.
pub(crate) const DEFAULT_CHUNK: usize = 32 * 1024;

/// Bytes of one member's mailbox area for a team of `size` with `chunk`-byte slots.
pub(crate) fn area_len(size: usize, chunk: usize) -> usize {
    size * 2 * (HEADER + chunk) + size * ACK_STRIDE
}

/// The channel of one member of a team.
pub(crate) struct Channel {
    /// This member's index in the team.
    me: usize,
    /// Every member's mailbox area.
    areas: Vec<GlobalPtr<u8>>,
    chunk: usize,
    /// Messages sent to / received from each member so far.
    sent: RefCell<Vec<u64>>,
    received: RefCell<Vec<u64>>,
    /// Nonblocking collectives in flight: their messages share the pair streams, so a
    /// blocking transfer must not start meanwhile.
    nonblocking: Cell<usize>,
}

impl Channel {
    pub(crate) fn new(me: usize, areas: Vec<GlobalPtr<u8>>, chunk: usize) -> Channel {
        let size = areas.len();
        Channel {
            me,
            areas,
            chunk,
            sent: RefCell::new(vec![0; size]),
            received: RefCell::new(vec![0; size]),
            nonblocking: Cell::new(0),
        }
    }

    fn size(&self) -> usize {
        self.areas.len()
    }

    /// Data bytes per chunk (messages longer than this travel as several).
    pub(crate) fn chunk(&self) -> usize {
        self.chunk
    }

    /// Chunks sent to member `to` so far (the next one's sequence number).
    pub(crate) fn sent_to(&self, to: usize) -> u64 {
        self.sent.borrow()[to]
    }

    /// Chunks received from member `from` so far.
    pub(crate) fn received_from(&self, from: usize) -> u64 {
        self.received.borrow()[from]
    }

    /// Nonblocking collectives of any kind in flight.
    pub(crate) fn nonblocking(&self) -> usize {
        self.nonblocking.get()
    }

    /// Slot `parity` of the inbox that `owner` keeps for messages from `source`.
    fn slot(&self, owner: usize, source: usize, parity: u64) -> GlobalPtr<u8> {
        self.areas[owner].add((source * 2 + parity as usize) * (HEADER + self.chunk))
    }

    /// The word in `owner`'s area where `peer` acknowledges messages from `owner`.
    fn ack(&self, owner: usize, peer: usize) -> GlobalPtr<u64> {
        self.areas[owner]
            .add(self.size() * 2 * (HEADER + self.chunk) + peer * ACK_STRIDE)
            .cast()
    }

    /// Send `data` to member `to` (any length, including zero).
    pub(crate) fn send(&self, ctx: &Context, to: usize, data: &[u8]) -> Result<()> {
        self.transfer(ctx, &mut [Outgoing::new(to, data)], &mut [])
    }

    /// Receive a message of exactly `out.len()` bytes from member `from`.
    pub(crate) fn recv(&self, ctx: &Context, from: usize, out: &mut [u8]) -> Result<()> {
        self.transfer(ctx, &mut [], &mut [Incoming::new(from, out)])
    }

    /// Send to one member and receive from another at the same time.
    pub(crate) fn sendrecv(
        &self,
        ctx: &Context,
        to: usize,
        data: &[u8],
        from: usize,
        out: &mut [u8],
    ) -> Result<()> {
        self.transfer(
            ctx,
            &mut [Outgoing::new(to, data)],
            &mut [Incoming::new(from, out)],
        )
    }

    /// Move several messages at once (at most one per destination and one per source),
    /// advancing whichever chunk can move, so that no pattern of bounded slots can
    /// deadlock: every member that waits keeps both sending and receiving.
    pub(crate) fn transfer(
        &self,
        ctx: &Context,
        sends: &mut [Outgoing<'_>],
        recvs: &mut [Incoming<'_>],
    ) -> Result<()> {
        if self.nonblocking.get() > 0 {
            return Err(crate::error::CoreError::Invalid(format!(
                "{} nonblocking collective(s) still in flight on this team: wait for their handles before starting another kind of collective on it",
                self.nonblocking.get()
            ))
            .into());
        }
        debug_assert!(sends
            .iter()
            .enumerate()
            .all(|(i, a)| sends[..i].iter().all(|b| b.to != a.to)));
        debug_assert!(recvs
            .iter()
            .enumerate()
            .all(|(i, a)| recvs[..i].iter().all(|b| b.from != a.from)));
        let mut step = || -> Result<bool> {
            let mut done = true;
            for s in sends.iter_mut() {
                while !s.done() {
                    let end = (s.offset + self.chunk).min(s.data.len());
                    if !self.try_send_chunk(ctx, s.to, &s.data[s.offset..end])? {
                        break;
                    }
                    s.offset = end;
                    s.started = true;
                }
                done &= s.done();
            }
            for r in recvs.iter_mut() {
                while !r.done() {
                    match self.try_recv_chunk(ctx, r.from, &mut r.buf[r.filled..])? {
                        Some(n) => {
                            r.filled += n;
                            r.started = true;
                        }
                        None => break,
                    }
                }
                done &= r.done();
            }
            Ok(done)
        };
        if step()? {
            return Ok(());
        }
        ctx.wait_until("team messages", step, || {
            "a team member has not sent or consumed a message".into()
        })
    }

    /// Send one chunk if the slot is free; `false` when it is still in use.
    pub(crate) fn begin_nonblocking(&self) {
        self.nonblocking.set(self.nonblocking.get() + 1);
    }

    pub(crate) fn end_nonblocking(&self) {
        self.nonblocking.set(self.nonblocking.get() - 1);
    }

    pub(crate) fn try_send_chunk(&self, ctx: &Context, to: usize, chunk: &[u8]) -> Result<bool> {
        let seq = self.sent.borrow()[to];
        if seq >= 2 && ctx.atomic_load(self.ack(self.me, to))? + 2 <= seq {
            return Ok(false);
        }
        let slot = self.slot(to, self.me, seq % 2);
        let length = slot.add(HEADER - 8);
        if ctx.is_addressable(slot) {
            ctx.put(slot.add(HEADER), chunk)?;
            ctx.put_value(length.cast::<u64>(), chunk.len() as u64)?;
            ctx.signal_store(None, slot.cast(), seq + 1)?;
        } else {
            // Length and data are adjacent, so they travel with the flag in one message.
            let mut payload = Vec::with_capacity(8 + chunk.len());
            payload.extend_from_slice(&(chunk.len() as u64).to_ne_bytes());
            payload.extend_from_slice(chunk);
            ctx.signal_store(Some((length, &payload)), slot.cast(), seq + 1)?;
        }
        self.sent.borrow_mut()[to] = seq + 1;
        Ok(true)
    }

    /// Receive one chunk into `out` if it has arrived; its length, or `None`.
    pub(crate) fn try_recv_chunk(
        &self,
        ctx: &Context,
        from: usize,
        out: &mut [u8],
    ) -> Result<Option<usize>> {
        let seq = self.received.borrow()[from];
        let slot = self.slot(self.me, from, seq % 2);
        if ctx.atomic_load(slot.cast::<u64>())? != seq + 1 {
            return Ok(None);
        }
        let len = ctx.get_value(slot.add(HEADER - 8).cast::<u64>())? as usize;
        if len > out.len() || (len == 0 && !out.is_empty()) {
            return Err(crate::error::CoreError::Invalid(format!(
                "collective arguments differ between ranks: team member {from} sent {len} bytes where {} were expected",
                out.len()
            ))
            .into());
        }
        ctx.get(slot.add(HEADER), &mut out[..len])?;
        ctx.signal_store(None, self.ack(from, self.me), seq + 1)?;
        self.received.borrow_mut()[from] = seq + 1;
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
