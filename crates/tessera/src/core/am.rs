//! Active messages: a request runs a registered handler on the target rank; a request
//! handler may send one reply, whose handler runs back on the requester.
//!
//! - *short*: up to [`MAX_ARGS`] `u64` arguments;
//! - *medium*: arguments plus a payload copied to the handler (up to
//!   [`Context::am_max_medium`] bytes);
//! - *long*: arguments plus a payload written to a given address in the target's segment
//!   *before* the handler runs; the handler sees it in place.
//!
//! Handlers are identified by a hash of the name they are registered under
//! ([`AmHandlerId::of`]), so every rank agrees on identities without exchanging them.
//! Register every handler on every rank before any rank may send to it (before the first
//! barrier that follows registration).
//!
//! Rules that keep bounded queues deadlock-free: handlers never block; only request
//! handlers send, and only one reply each. A sender that finds the queue full makes
//! progress (runs incoming handlers, or inside a handler only reply handlers) until space
//! frees up. Queues never grow.

use rustc_hash::FxHashMap;
use std::cell::Cell;
use std::rc::Rc;

use bytemuck::{Pod, Zeroable};
use crossbeam_utils::Backoff;

use super::stats::{Blocked, Traffic};
use super::{Context, GlobalPtr, Target};
use crate::conduit::AmClass;
use crate::error::CoreError;
use crate::{Blocking, Result};

/// Most `u64` arguments one active message carries.
pub const MAX_ARGS: usize = 16;

/// The identity of an active-message handler, the same on every rank.
///
/// ```
/// use tessera::AmHandlerId;
/// assert_eq!(AmHandlerId::of("counter.add"), AmHandlerId::of("counter.add"));
/// assert_ne!(AmHandlerId::of("counter.add"), AmHandlerId::of("counter.sub"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AmHandlerId(u64);

impl AmHandlerId {
    /// The identity of the handler registered under `name` (64-bit FNV-1a of the name).
    pub const fn of(name: &str) -> AmHandlerId {
        let bytes = name.as_bytes();
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        let mut i = 0;
        while i < bytes.len() {
            hash ^= bytes[i] as u64;
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
            i += 1;
        }
        AmHandlerId(hash)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
enum Kind {
    Short = 0,
    Medium = 1,
    Long = 2,
}

/// Wire header of every active-message frame; arguments and a medium payload follow.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct WireHeader {
    handler: u64,
    nargs: u32,
    kind: u32,
    long_offset: u64,
    long_len: u64,
}
const HEADER: usize = std::mem::size_of::<WireHeader>();

/// A delivered active message, as its handler sees it.
pub struct AmMessage<'a> {
    source: usize,
    class: AmClass,
    args: &'a [u64],
    payload: &'a [u8],
    replied: Cell<bool>,
}

impl AmMessage<'_> {
    /// The rank that sent the message.
    pub fn source(&self) -> usize {
        self.source
    }
    /// The `u64` arguments.
    pub fn args(&self) -> &[u64] {
        self.args
    }
    /// The payload: copied (medium) or in place in this rank's segment (long); empty for
    /// short messages.
    pub fn payload(&self) -> &[u8] {
        self.payload
    }
    /// Whether this is a request (which may be replied to) rather than a reply.
    pub fn is_request(&self) -> bool {
        self.class == AmClass::Request
    }
}

type HandlerFn = Rc<dyn Fn(&Context, &AmMessage<'_>) -> Result<()>>;

/// Per-rank active-message state.
#[derive(Default)]
pub(crate) struct AmState {
    handlers: std::cell::RefCell<FxHashMap<AmHandlerId, (String, HandlerFn)>>,
    /// Times a send found its queue full and had to make progress first.
    backpressure: Cell<u64>,
    /// Frames delivered to handlers so far (progress, as the deadlock detector sees it).
    handled: Cell<u64>,
    /// A counted request went out since the last barrier: a reply may be on its way back.
    requested: Cell<bool>,
}

impl AmState {
    /// Frames delivered to handlers on this rank so far.
    pub(crate) fn handled(&self) -> u64 {
        self.handled.get()
    }

    /// Whether a request went out since the last call, which clears it.
    pub(crate) fn take_requested(&self) -> bool {
        self.requested.replace(false)
    }
}

impl Context {
    /// Register `handler` under `name` on this rank and return its identity. Every rank
    /// registers the same names (order does not matter).
    ///
    /// ```no_run
    /// # fn f(ctx: &tessera::Context) -> tessera::Result<()> {
    /// use std::cell::Cell;
    /// use std::rc::Rc;
    /// let hits = Rc::new(Cell::new(0u64));
    /// let h = hits.clone();
    /// let id = ctx.am_register("hits.add", move |_ctx, msg| {
    ///     h.set(h.get() + msg.args()[0]);
    ///     Ok(())
    /// })?;
    /// ctx.barrier()?;
    /// ctx.am_request_short(0, id, &[1])?;
    /// # Ok(()) }
    /// ```
    pub fn am_register(
        &self,
        name: &str,
        handler: impl Fn(&Context, &AmMessage<'_>) -> Result<()> + 'static,
    ) -> Result<AmHandlerId> {
        let id = AmHandlerId::of(name);
        let mut handlers = self.am.handlers.borrow_mut();
        if let Some((existing, _)) = handlers.get(&id) {
            return Err(CoreError::BadArgument { call: "am_register", argument: "name", why: format!(
                "active-message handler {name:?} clashes with already registered {existing:?}; choose another name"
            ) }.into());
        }
        handlers.insert(id, (name.to_string(), Rc::new(handler)));
        Ok(id)
    }

    /// Largest medium payload with `nargs` arguments.
    pub fn am_max_medium(&self, nargs: usize) -> usize {
        self.conduit()
            .am_max_frame()
            .saturating_sub(HEADER + 8 * nargs)
    }

    /// How many times a send on this rank found its queue full (backpressure events).
    pub fn am_backpressure_events(&self) -> u64 {
        self.am.backpressure.get()
    }

    /// Send a short request (arguments only) to `dest`.
    pub fn am_request_short(&self, dest: usize, handler: AmHandlerId, args: &[u64]) -> Result<()> {
        self.counted(Traffic::ActiveMessage, dest, 8 * args.len(), || {
            self.am_send(
                dest,
                AmClass::Request,
                handler,
                Kind::Short,
                args,
                &[],
                (0, 0),
                true,
            )
        })
    }

    /// Send a medium request: `payload` is copied to the handler.
    pub fn am_request_medium(
        &self,
        dest: usize,
        handler: AmHandlerId,
        args: &[u64],
        payload: &[u8],
    ) -> Result<()> {
        self.am_request_medium_as(dest, handler, args, payload, true)
    }

    /// [`Context::am_request_medium`], `counted` or not: an uncounted request is one the
    /// barrier does not wait for, for a protocol that learns otherwise that it was
    /// handled (see [`Conduit::am_try_send_uncounted`]).
    ///
    /// [`Conduit::am_try_send_uncounted`]: crate::conduit::Conduit::am_try_send_uncounted
    pub(crate) fn am_request_medium_as(
        &self,
        dest: usize,
        handler: AmHandlerId,
        args: &[u64],
        payload: &[u8],
        counted: bool,
    ) -> Result<()> {
        let bytes = 8 * args.len() + payload.len();
        self.counted(Traffic::ActiveMessage, dest, bytes, || {
            self.am_send(
                dest,
                AmClass::Request,
                handler,
                Kind::Medium,
                args,
                payload,
                (0, 0),
                counted,
            )
        })
    }

    /// Send a long request: `payload` is written at `dest` (in the target's segment) and
    /// then the handler runs on `dest.rank()` with the payload in place.
    pub fn am_request_long(
        &self,
        dest: GlobalPtr<u8>,
        handler: AmHandlerId,
        args: &[u64],
        payload: &[u8],
    ) -> Result<()> {
        let bytes = 8 * args.len() + payload.len();
        self.counted(Traffic::ActiveMessage, dest.rank(), bytes, || {
            self.put(dest, payload, Blocking)?;
            let long = (dest.offset(), payload.len() as u64);
            self.am_send(
                dest.rank(),
                AmClass::Request,
                handler,
                Kind::Long,
                args,
                &[],
                long,
                true,
            )
        })
    }

    /// From inside a request handler: reply with arguments only.
    pub fn am_reply_short(
        &self,
        to: &AmMessage<'_>,
        handler: AmHandlerId,
        args: &[u64],
    ) -> Result<()> {
        self.am_reply(to, handler, Kind::Short, args, &[])
    }

    /// From inside a request handler: reply with a copied payload.
    pub fn am_reply_medium(
        &self,
        to: &AmMessage<'_>,
        handler: AmHandlerId,
        args: &[u64],
        payload: &[u8],
    ) -> Result<()> {
        self.am_reply(to, handler, Kind::Medium, args, payload)
    }

    fn am_reply(
        &self,
        to: &AmMessage<'_>,
        handler: AmHandlerId,
        kind: Kind,
        args: &[u64],
        payload: &[u8],
    ) -> Result<()> {
        if to.class != AmClass::Request {
            return Err(CoreError::BadReply("reply handler").into());
        }
        if to.replied.replace(true) {
            return Err(CoreError::BadReply("request handler that already replied").into());
        }
        self.am_send(
            to.source,
            AmClass::Reply,
            handler,
            kind,
            args,
            payload,
            (0, 0),
            true,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn am_send(
        &self,
        dest: usize,
        class: AmClass,
        handler: AmHandlerId,
        kind: Kind,
        args: &[u64],
        payload: &[u8],
        long: (u64, u64),
        counted: bool,
    ) -> Result<()> {
        if dest >= self.ranks() {
            return Err(CoreError::NoSuchRank {
                rank: dest,
                ranks: self.ranks(),
            }
            .into());
        }
        if args.len() > MAX_ARGS {
            return Err(CoreError::BadArgument {
                call: "an active-message request",
                argument: "args",
                why: format!(
                    "{} active-message arguments; at most {MAX_ARGS}",
                    args.len()
                ),
            }
            .into());
        }
        let in_handler = self.in_handler.get() > 0;
        if class == AmClass::Request && in_handler {
            return Err(CoreError::InHandler("sending an active-message request").into());
        }
        let header = WireHeader {
            handler: handler.0,
            nargs: args.len() as u32,
            kind: kind as u32,
            long_offset: long.0,
            long_len: long.1,
        };
        let parts: [&[u8]; 3] = [
            bytemuck::bytes_of(&header),
            bytemuck::cast_slice(args),
            payload,
        ];
        if class == AmClass::Request && counted {
            // A reply may come back, which the next barrier runs (uncounted requests, such
            // as the barrier's own signals, are outside its guarantee).
            self.am.requested.set(true);
        }
        let backoff = Backoff::new();
        let mut blocked_since = None;
        let try_send = |parts: &[&[u8]]| {
            if counted {
                self.conduit().am_try_send(dest, class, parts)
            } else {
                self.conduit().am_try_send_uncounted(dest, class, parts)
            }
        };
        while !try_send(&parts)? {
            if blocked_since.is_none() {
                blocked_since = self.stats_clock();
            }
            self.am.backpressure.set(self.am.backpressure.get() + 1);
            // Make room: whoever we wait on may be waiting on us. Inside a handler only
            // reply handlers may run (they never send), which keeps the recursion bounded.
            if in_handler {
                poll(self, AmClass::Reply)?;
            } else {
                self.poll()?;
            }
            self.conduit().check_alive()?;
            backoff.snooze();
        }
        if let Some(since) = blocked_since {
            self.count_blocked_as(Blocked::ActiveMessage, since);
        }
        Ok(())
    }
}

/// Deliver every queued frame of `class` to its handler. The first handler error is
/// returned after the queue has been drained.
pub(crate) fn poll(ctx: &Context, class: AmClass) -> Result<()> {
    let mut first_error = None;
    let delivered = ctx.conduit().am_poll(class, &mut |source, frame| {
        if let Err(e) = dispatch(ctx, class, source, frame) {
            first_error.get_or_insert(e);
        }
    });
    if delivered > 0 {
        ctx.am.handled.set(ctx.am.handled.get() + delivered as u64);
    }
    first_error.map_or(Ok(()), Err)
}

/// Restores the handler depth even if a handler panics.
struct HandlerDepth<'a>(&'a Cell<u32>);
impl Drop for HandlerDepth<'_> {
    fn drop(&mut self) {
        self.0.set(self.0.get() - 1);
    }
}

fn dispatch(ctx: &Context, class: AmClass, source: usize, frame: &[u8]) -> Result<()> {
    if frame.len() < HEADER {
        return Err(CoreError::Malformed {
            what: format!(
                "truncated active message ({} bytes) from rank {source}",
                frame.len()
            ),
        }
        .into());
    }
    let header: WireHeader = bytemuck::pod_read_unaligned(&frame[..HEADER]);
    let nargs = header.nargs as usize;
    let args_end = HEADER + 8 * nargs;
    if nargs > MAX_ARGS || frame.len() < args_end {
        return Err(CoreError::Malformed {
            what: format!("malformed active message from rank {source}"),
        }
        .into());
    }
    let mut args = [0u64; MAX_ARGS];
    bytemuck::cast_slice_mut(&mut args[..nargs]).copy_from_slice(&frame[HEADER..args_end]);
    let id = AmHandlerId(header.handler);
    let handler = match ctx.am.handlers.borrow().get(&id) {
        Some((_, h)) => h.clone(),
        None => {
            return Err(CoreError::UnknownHandler {
                rank: ctx.rank(),
                from: source,
                id: id.0,
            }
            .into())
        }
    };
    let payload: &[u8] = if header.kind == Kind::Long as u32 {
        let len = header.long_len as usize;
        match ctx.target(GlobalPtr::<u8>::new(ctx.rank(), header.long_offset), len, 1)? {
            // SAFETY: target checked that [offset, offset+len) lies in our own mapped
            // segment; the sender wrote it before sending and writes nothing more to it for
            // this message.
            Target::Direct(p) => unsafe { std::slice::from_raw_parts(p.as_ptr(), len) },
            Target::Remote { .. } => {
                return Err(CoreError::Internal("own segment not mapped".into()).into())
            }
        }
    } else {
        &frame[args_end..]
    };
    let msg = AmMessage {
        source,
        class,
        args: &args[..nargs],
        payload,
        replied: Cell::new(false),
    };
    ctx.in_handler.set(ctx.in_handler.get() + 1);
    let _depth = HandlerDepth(&ctx.in_handler);
    handler(ctx, &msg)
}
