//! Remote procedure calls: run a plain function on another rank with serialisable
//! arguments and get its result through a handle.
//!
//! A call travels as one medium active message carrying the function's position in the
//! program (its offset from an anchor function, the same on every rank because every rank
//! runs the same executable, which start-up verifies) and the arguments encoded with
//! postcard. The target decodes, calls, and replies with the encoded result. Arguments and
//! results must each fit in one medium message ([`Context::am_max_medium`]); move bulk
//! data with put/get.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::marker::PhantomData;

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::am::AmHandlerId;
use super::{Context, GlobalPtr};
use crate::error::{ConduitError, CoreError};
use crate::{Blocking, Result};

const REQUEST: &str = "tessera.rpc.request";
const REPLY: &str = "tessera.rpc.reply";

/// Per-rank RPC state.
#[derive(Default)]
pub(crate) struct RpcState {
    next_ticket: Cell<u64>,
    results: RefCell<HashMap<u64, std::result::Result<Vec<u8>, CoreError>>>,
    fingerprint: Cell<Option<GlobalPtr<u64>>>,
}

/// The reference point for code offsets.
#[inline(never)]
fn anchor() {}

type Trampoline = fn(&Context, usize, &[u8]) -> std::result::Result<Vec<u8>, CoreError>;

fn offset_of_code(addr: usize) -> u64 {
    addr.wrapping_sub(anchor as fn() as usize) as u64
}

fn code_at(offset: u64) -> usize {
    (anchor as fn() as usize).wrapping_add(offset as usize)
}

/// Decode the arguments, call the user function at `func`, encode its result.
fn trampoline<A: DeserializeOwned, R: Serialize>(
    ctx: &Context,
    func: usize,
    args: &[u8],
) -> std::result::Result<Vec<u8>, CoreError> {
    // SAFETY: `func` is anchor + the offset that `Context::rpc` computed from a value of
    // exactly this type `fn(&Context, A) -> R` (the trampoline is instantiated with the same
    // A and R in the same call), and every rank runs the same executable (checked at
    // start-up by `check_same_binary`), so the address is that function in this process.
    let f = unsafe { std::mem::transmute::<usize, fn(&Context, A) -> R>(func) };
    let arg: A = postcard::from_bytes(args)
        .map_err(|e| CoreError::Serialize(format!("decoding rpc arguments: {e}")))?;
    postcard::to_allocvec(&f(ctx, arg))
        .map_err(|e| CoreError::Serialize(format!("encoding rpc result: {e}")))
}

/// Register the RPC handlers and publish this rank's executable fingerprint.
pub(crate) fn register_handlers(ctx: &Context) -> Result<()> {
    ctx.am_register(REQUEST, |ctx, msg| {
        let &[tramp, func, ticket] = msg.args() else {
            return Err(CoreError::Malformed { what: "malformed rpc request".into() }.into());
        };
        // SAFETY: `tramp` is the offset of a `trampoline::<A, R>` instantiation computed by
        // `Context::rpc` on a rank running this same executable (checked at start-up), so
        // anchor + offset is that function here, whose type is `Trampoline`.
        let call = unsafe { std::mem::transmute::<usize, Trampoline>(code_at(tramp)) };
        let (status, bytes) = match call(ctx, code_at(func), msg.payload()) {
            Ok(bytes) if bytes.len() <= ctx.am_max_medium(2) => (0, bytes),
            Ok(bytes) => (
                1,
                format!(
                    "rpc result of {} bytes exceeds the {}-byte limit of one message; return a global pointer and get the data",
                    bytes.len(),
                    ctx.am_max_medium(2)
                )
                .into_bytes(),
            ),
            Err(e) => (1, e.to_string().into_bytes()),
        };
        ctx.am_reply_medium(msg, AmHandlerId::of(REPLY), &[ticket, status], &bytes)
    })?;
    ctx.am_register(REPLY, |ctx, msg| {
        let &[ticket, status] = msg.args() else {
            return Err(CoreError::Malformed {
                what: "malformed rpc reply".into(),
            }
            .into());
        };
        let result = match status {
            0 => Ok(msg.payload().to_vec()),
            _ => Err(CoreError::RpcFailed {
                rank: msg.source(),
                why: String::from_utf8_lossy(msg.payload()).into_owned(),
            }),
        };
        ctx.rpc.results.borrow_mut().insert(ticket, result);
        Ok(())
    })?;
    let fingerprint = ctx.alloc_in::<u64>(super::alloc::Arena::Collective, 1)?;
    ctx.put(fingerprint, &[executable_fingerprint()], Blocking)?;
    ctx.rpc.fingerprint.set(Some(fingerprint));
    Ok(())
}

/// Code layout and executable size: equal on every rank running the same program.
fn executable_fingerprint() -> u64 {
    let layout = offset_of_code(trampoline::<u64, u64> as Trampoline as usize);
    let size = std::env::current_exe()
        .and_then(std::fs::metadata)
        .map(|m| m.len())
        .unwrap_or(0);
    layout ^ size.rotate_left(32)
}

/// After the start-up barrier: refuse to run if ranks run different executables (RPC
/// would then call the wrong code). Each rank compares its fingerprint with its right
/// neighbour's only: if every neighbour agrees, every rank does, and a rank reads one
/// peer's memory instead of every peer's (which would cost every rank page tables for
/// every peer at start-up).
pub(crate) fn check_same_binary(ctx: &Context) -> Result<()> {
    let Some(fingerprint) = ctx.rpc.fingerprint.get() else {
        return Ok(());
    };
    let mine = ctx.get_value(fingerprint)?;
    let right = (ctx.rank() + 1) % ctx.ranks();
    let theirs = ctx.get_value(fingerprint.on(right))?;
    if theirs != mine {
        return Err(ConduitError::Mismatch {
            rank: right,
            what: "the executable",
            detail: "every rank must run the same program (SPMD)".into(),
        }
        .into());
    }
    Ok(())
}

/// The pending result of [`Context::rpc`].
#[must_use = "an rpc's result arrives only through its handle"]
pub struct RpcHandle<'a, R> {
    ctx: &'a Context,
    ticket: u64,
    target: usize,
    _result: PhantomData<fn() -> R>,
}

impl<R: DeserializeOwned> RpcHandle<'_, R> {
    /// Whether the result has arrived (makes progress once).
    pub fn test(&self) -> Result<bool> {
        self.ctx.poll()?;
        Ok(self.ctx.rpc.results.borrow().contains_key(&self.ticket))
    }

    /// Block until the result arrives and return it.
    pub fn wait(self) -> Result<R> {
        let results = &self.ctx.rpc.results;
        self.ctx.wait_until(
            "an rpc result",
            || Ok(results.borrow().contains_key(&self.ticket)),
            || format!("rank {} has not replied", self.target),
        )?;
        let bytes = results.borrow_mut().remove(&self.ticket).expect("present");
        let bytes = bytes?;
        postcard::from_bytes(&bytes).map_err(|e| CoreError::Serialize(e.to_string()).into())
    }
}

impl Context {
    /// Call `func(ctx, arg)` on `rank` and return a handle to its result. `func` must be a
    /// plain function (not a closure); it runs inside an active-message handler, so it must
    /// not block (no barriers, waits or rpc of its own), though it may put, get and use
    /// atomics.
    ///
    /// ```no_run
    /// fn square(_ctx: &tessera::Context, x: u64) -> u64 { x * x }
    /// # fn f(ctx: &tessera::Context) -> tessera::Result<()> {
    /// let nine = ctx.rpc(1 % ctx.ranks(), square, 3)?.wait()?;
    /// assert_eq!(nine, 9);
    /// # Ok(()) }
    /// ```
    pub fn rpc<A, R>(
        &self,
        rank: usize,
        func: fn(&Context, A) -> R,
        arg: A,
    ) -> Result<RpcHandle<'_, R>>
    where
        A: Serialize + DeserializeOwned,
        R: Serialize + DeserializeOwned,
    {
        let bytes = postcard::to_allocvec(&arg).map_err(|e| CoreError::Serialize(e.to_string()))?;
        let limit = self.am_max_medium(3);
        if bytes.len() > limit {
            return Err(CoreError::BadArgument { call: "rpc", argument: "arg", why: format!(
                "rpc arguments of {} bytes exceed the {limit}-byte limit of one message; pass a global pointer instead",
                bytes.len()
            ) }
            .into());
        }
        let ticket = self.rpc.next_ticket.get();
        self.rpc.next_ticket.set(ticket + 1);
        let tramp = offset_of_code(trampoline::<A, R> as Trampoline as usize);
        let func = offset_of_code(func as usize);
        self.am_request_medium(
            rank,
            AmHandlerId::of(REQUEST),
            &[tramp, func, ticket],
            &bytes,
        )?;
        Ok(RpcHandle {
            ctx: self,
            ticket,
            target: rank,
            _result: PhantomData,
        })
    }
}
