//! Transfers to unmapped peers: the conduit's own one-sided operations where it has them
//! ([`Conduit::rma`]: MPI's windows), else put and get written once over active messages,
//! so that a conduit that only moves frames runs every transfer.
//!
//! Over active messages a put is one medium request per chunk that the owner copies into
//! its segment and acknowledges; a get is one request per chunk that the owner answers with
//! the bytes. A transfer is complete when every chunk is acknowledged or answered:
//! before the call returns ([`Finish::Now`]), when its ticket is completed
//! ([`Finish::Ticket`]), or by the next completion of every implicit transfer
//! ([`Finish::Quiet`], which every ordering operation runs first).
//!
//! This module must never decide whether a peer is mapped (`Context::target` does) and
//! never count traffic: the public operation that started the transfer has counted it.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;

use super::am::{AmHandlerId, AmMessage};
use super::{Context, GlobalPtr};
use crate::conduit::{Finish, GetInto, Transfer, Which};
use crate::error::CoreError;
use crate::Result;

const PUT: &str = "tessera.transfer.put";
const PUT_DONE: &str = "tessera.transfer.put_done";
const GET: &str = "tessera.transfer.get";
const GET_REPLY: &str = "tessera.transfer.get_reply";

/// The ticket of the transfers that complete together at the next completion of all.
const QUIET: u64 = u64::MAX;

/// A transfer over active messages not yet complete.
#[derive(Default)]
struct Pending {
    /// Chunks not yet acknowledged or answered.
    chunks: u64,
    /// A get's bytes as they arrive.
    bytes: Vec<u8>,
}

/// Per-rank state of the transfers over active messages.
#[derive(Default)]
pub(crate) struct AmTransfers {
    next_ticket: Cell<u64>,
    pending: RefCell<HashMap<u64, Pending>>,
    /// Chunks of implicit transfers not yet acknowledged or answered.
    quiet: Cell<u64>,
}

impl AmTransfers {
    fn chunk_done(&self, ticket: u64) {
        if ticket == QUIET {
            self.quiet.set(self.quiet.get().saturating_sub(1));
        } else if let Some(p) = self.pending.borrow_mut().get_mut(&ticket) {
            p.chunks = p.chunks.saturating_sub(1);
        }
    }
}

/// The arguments of a message, or a [`CoreError::Malformed`] naming it.
fn args<const N: usize>(msg: &AmMessage<'_>, what: &str) -> Result<[u64; N]> {
    msg.args().try_into().map_err(|_| {
        CoreError::Malformed {
            what: format!("malformed {what} from rank {}", msg.source()),
        }
        .into()
    })
}

/// Register the handlers that serve transfers over active messages. Runs in start-up,
/// before the first barrier, so no peer's request finds its handler missing.
pub(crate) fn register_handlers(ctx: &Context) -> Result<()> {
    ctx.am_register(PUT, |ctx, msg| {
        let [offset, ticket] = args(msg, "transfer put")?;
        ctx.store_own(offset, msg.payload())?;
        ctx.am_reply_short(msg, AmHandlerId::of(PUT_DONE), &[ticket])
    })?;
    ctx.am_register(PUT_DONE, |ctx, msg| {
        let [ticket] = args(msg, "transfer acknowledgement")?;
        ctx.am_transfers.chunk_done(ticket);
        Ok(())
    })?;
    ctx.am_register(GET, |ctx, msg| {
        let [offset, len, ticket, at] = args(msg, "transfer get")?;
        let target = ctx.target(GlobalPtr::<u8>::new(ctx.rank(), offset), len as usize, 1)?;
        let mut bytes = vec![0; len as usize];
        ctx.load_bytes(target, &mut bytes)?;
        ctx.am_reply_medium(msg, AmHandlerId::of(GET_REPLY), &[ticket, at], &bytes)
    })?;
    ctx.am_register(GET_REPLY, |ctx, msg| {
        let [ticket, at] = args(msg, "transfer reply")?;
        let states = &ctx.am_transfers;
        if ticket == QUIET {
            // An implicit get lands in this rank's own segment, at `at`.
            ctx.store_own(at, msg.payload())?;
        } else if let Some(p) = states.pending.borrow_mut().get_mut(&ticket) {
            let at = at as usize;
            p.bytes[at..at + msg.payload().len()].copy_from_slice(msg.payload());
        }
        states.chunk_done(ticket);
        Ok(())
    })?;
    Ok(())
}

impl Context {
    /// Store `bytes` at `offset` of this rank's own segment (checked).
    fn store_own(&self, offset: u64, bytes: &[u8]) -> Result<()> {
        let target = self.target(GlobalPtr::<u8>::new(self.rank(), offset), bytes.len(), 1)?;
        self.store_bytes(target, bytes)
    }

    /// Start `transfer` to an unmapped peer, complete as `finish` says: the conduit's own
    /// operations where it has them, else active messages. A ticket comes back for
    /// [`Finish::Ticket`] unless the transfer is already complete.
    pub(crate) fn transfer(&self, transfer: Transfer<'_>, finish: Finish) -> Result<Option<u64>> {
        // A get lands in the caller's buffer unless it is implicit, and then in the segment.
        debug_assert!(match &transfer {
            Transfer::Get {
                into: GetInto::Segment(_),
                ..
            } => finish == Finish::Quiet,
            Transfer::Get { .. } => finish != Finish::Quiet,
            Transfer::Put { .. } => true,
        });
        if let Some(rma) = self.conduit().rma() {
            return Ok(rma.start(transfer, finish)?);
        }
        if self.in_handler.get() > 0 {
            return Err(CoreError::InHandler("a transfer to an unmapped peer").into());
        }
        self.uncounted(|| self.transfer_by_messages(transfer, finish))
    }

    /// Complete a transfer started with a ticket (`landing`: a get's destination), or
    /// every implicit one; with `wait`, block until it is. Whether it is complete.
    pub(crate) fn transfer_complete(
        &self,
        which: Which,
        wait: bool,
        landing: &mut [u8],
    ) -> Result<bool> {
        if let Some(rma) = self.conduit().rma() {
            return Ok(rma.complete(which, wait, landing)?);
        }
        let states = &self.am_transfers;
        let done = || match which {
            Which::All => states.quiet.get() == 0,
            Which::One(ticket) => states
                .pending
                .borrow()
                .get(&ticket)
                .is_none_or(|p| p.chunks == 0),
        };
        if !done() {
            if !wait {
                self.poll()?;
                if !done() {
                    return Ok(false);
                }
            } else {
                self.wait_until(
                    "transfers to an unmapped peer",
                    || Ok(done()),
                    || "the peer has not answered every chunk".into(),
                )?;
            }
        }
        if let Which::One(ticket) = which {
            if let Some(p) = states.pending.borrow_mut().remove(&ticket) {
                if !p.bytes.is_empty() {
                    landing.copy_from_slice(&p.bytes);
                }
            }
        }
        Ok(true)
    }

    /// A transfer as medium active messages of at most one frame each.
    fn transfer_by_messages(&self, transfer: Transfer<'_>, finish: Finish) -> Result<Option<u64>> {
        let states = &self.am_transfers;
        let ticket = match finish {
            Finish::Quiet => QUIET,
            Finish::Now | Finish::Ticket => {
                let t = states.next_ticket.get();
                states.next_ticket.set(t + 1);
                t
            }
        };
        let max = self.am_max_medium(2).max(1);
        let (rank, len) = match &transfer {
            Transfer::Put { rank, src, .. } => (*rank, src.len()),
            Transfer::Get { rank, len, .. } => (*rank, *len),
        };
        if len == 0 {
            return Ok(None);
        }
        let chunks = len.div_ceil(max);
        if ticket == QUIET {
            states.quiet.set(states.quiet.get() + chunks as u64);
        } else {
            let bytes = match &transfer {
                Transfer::Get { .. } => vec![0; len],
                Transfer::Put { .. } => Vec::new(),
            };
            states.pending.borrow_mut().insert(
                ticket,
                Pending {
                    chunks: chunks as u64,
                    bytes,
                },
            );
        }
        match &transfer {
            Transfer::Put { offset, src, .. } => {
                for (k, piece) in src.chunks(max).enumerate() {
                    let at = (offset + k * max) as u64;
                    self.am_request_medium(rank, AmHandlerId::of(PUT), &[at, ticket], piece)?;
                }
            }
            Transfer::Get { offset, into, .. } => {
                let landing = match into {
                    GetInto::Segment(at) => *at,
                    _ => 0,
                };
                for k in 0..chunks {
                    let start = k * max;
                    let n = max.min(len - start);
                    let at = if ticket == QUIET {
                        landing + start
                    } else {
                        start
                    };
                    self.am_request_short(
                        rank,
                        AmHandlerId::of(GET),
                        &[(offset + start) as u64, n as u64, ticket, at as u64],
                    )?;
                }
            }
        }
        match finish {
            Finish::Now => {
                let landing: &mut [u8] = match transfer {
                    Transfer::Get {
                        into: GetInto::Buffer(buf),
                        ..
                    } => buf,
                    _ => &mut [],
                };
                self.transfer_complete(Which::One(ticket), true, landing)?;
                Ok(None)
            }
            Finish::Ticket => Ok(Some(ticket)),
            Finish::Quiet => Ok(None),
        }
    }
}
