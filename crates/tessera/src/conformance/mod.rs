//! The conduit conformance suite: the checklist every conduit must pass.
//!
//! Each [`Case`] is an SPMD body: run it on every rank of a job (any rank count, any
//! conduit) and it checks real results: bytes moved exactly, atomics' final values, every
//! message delivered, errors raised for bad input. The same source runs in the test suite
//! on both conduits at several rank counts, and from `tessera selftest` on any machine.
//!
//! ```
//! use tessera::{conformance, Job};
//! Job::threads(3).segment(8 << 20).run(|ctx| conformance::run_all(ctx, None)).unwrap();
//! ```
//!
//! This module must never special-case a conduit: what it checks is the contract.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use crate::error::{CoreError, Error};
use crate::{
    Affinity, Blocking, Distribution, Implicit, Indexed, IndexedMut, Nonblocking, SharedArray,
    Signal, Strided, StridedMut,
};
use crate::{Algorithm, Collective, Op, Team};
use crate::{AtomicOp, Context, GlobalPtr, RankResult};
use crate::{GlobalGrid, Grid, HaloGrid, HaloStrategy, Point, RectDomain};

mod collectives;
mod data;
mod transfers;

use collectives::*;
use data::*;
use transfers::*;

/// One conformance check.
pub struct Case {
    /// Its name (for `--case` filters and reports).
    pub name: &'static str,
    /// The SPMD body.
    pub run: fn(&Context) -> RankResult,
}

/// Every case, in the order they run.
pub fn cases() -> &'static [Case] {
    &[
        Case {
            name: "identity",
            run: identity,
        },
        Case {
            name: "collective_alloc",
            run: collective_alloc,
        },
        Case {
            name: "put_get",
            run: put_get,
        },
        Case {
            name: "nonblocking",
            run: nonblocking,
        },
        Case {
            name: "strided",
            run: strided,
        },
        Case {
            name: "indexed",
            run: indexed,
        },
        Case {
            name: "atomics",
            run: atomics,
        },
        Case {
            name: "signalling_put",
            run: signalling_put,
        },
        Case {
            name: "active_messages",
            run: active_messages,
        },
        Case {
            name: "rpc",
            run: rpc,
        },
        Case {
            name: "barriers",
            run: barriers,
        },
        Case {
            name: "lock",
            run: lock,
        },
        Case {
            name: "bad_input",
            run: bad_input,
        },
        Case {
            name: "collectives",
            run: collectives,
        },
        Case {
            name: "nonblocking_collectives",
            run: nonblocking_collectives,
        },
        Case {
            name: "native_collectives",
            run: native_collectives,
        },
        Case {
            name: "grid_copies",
            run: grid_copies,
        },
        Case {
            name: "ghost_exchange",
            run: ghost_exchange,
        },
        Case {
            name: "shared_arrays",
            run: shared_arrays,
        },
    ]
}

/// Run every case (or those whose name contains `filter`), with a barrier between them.
/// A failure names the case.
pub fn run_all(ctx: &Context, filter: Option<&str>) -> RankResult {
    for case in cases()
        .iter()
        .filter(|c| filter.is_none_or(|f| c.name.contains(f)))
    {
        (case.run)(ctx).map_err(|e| {
            format!(
                "conformance case {:?} on rank {}: {e}",
                case.name,
                ctx.rank()
            )
        })?;
        ctx.barrier()?;
    }
    Ok(())
}

/// The element counts collective cases run with in a team of `n`: a short message, and
/// a long one of 10,000 elements, fewer in teams of more than 52 members so that a
/// member's copy of every member's block stays near 4 MiB (at 256 ranks, 10,000 would
/// have every rank hold 60 MB of such buffers at once), but never so few that the long
/// message is not read directly (from 16 KiB).
fn lengths(n: usize) -> [usize; 2] {
    let direct = crate::model::team::DIRECT_FROM / 8 + 5;
    [3, ((1 << 19) / n.max(1)).clamp(direct, 10_000)]
}

fn ensure(cond: bool, what: impl FnOnce() -> String) -> RankResult {
    if cond {
        Ok(())
    } else {
        Err(what().into())
    }
}

fn right(ctx: &Context) -> usize {
    (ctx.rank() + 1) % ctx.ranks()
}

fn left(ctx: &Context) -> usize {
    (ctx.rank() + ctx.ranks() - 1) % ctx.ranks()
}

/// A byte pattern that depends on who wrote it, the size and the position.
fn pattern(writer: usize, size: usize, i: usize) -> u8 {
    (i.wrapping_mul(31) ^ writer.wrapping_mul(97) ^ size) as u8
}

fn identity(ctx: &Context) -> RankResult {
    ensure(ctx.rank() < ctx.ranks(), || "rank out of range".into())?;
    let seen = ctx.alloc_collective::<u64>(ctx.ranks())?;
    ctx.barrier()?;
    ctx.put(
        seen.on(0).add(ctx.rank()),
        &[ctx.rank() as u64 + 1],
        Blocking,
    )?;
    ctx.barrier()?;
    if ctx.rank() == 0 {
        let mut all = vec![0u64; ctx.ranks()];
        ctx.get(seen, &mut all, Blocking)?;
        ensure(
            all.iter().enumerate().all(|(i, &v)| v == i as u64 + 1),
            || format!("rank 0 saw {all:?}"),
        )?;
    }
    ctx.barrier()?;
    ctx.free_collective(seen)?;
    Ok(())
}

fn collective_alloc(ctx: &Context) -> RankResult {
    // Local allocations differ per rank; collective offsets must not.
    let junk = ctx.alloc_local::<u8>(1000 * (ctx.rank() + 1))?;
    let a = ctx.alloc_collective::<f64>(333)?;
    let b = ctx.alloc_collective::<u8>(5)?;
    let offsets = ctx.alloc_collective::<u64>(2 * ctx.ranks())?;
    ctx.barrier()?;
    ctx.put(
        offsets.on(0).add(2 * ctx.rank()),
        &[a.offset(), b.offset()],
        Blocking,
    )?;
    ctx.barrier()?;
    if ctx.rank() == 0 {
        let mut all = vec![0u64; 2 * ctx.ranks()];
        ctx.get(offsets, &mut all, Blocking)?;
        for r in 0..ctx.ranks() {
            ensure(all[2 * r..2 * r + 2] == [a.offset(), b.offset()], || {
                format!(
                    "rank {r} allocated at {:?}, rank 0 at {:?}",
                    &all[2 * r..2 * r + 2],
                    [a.offset(), b.offset()]
                )
            })?;
        }
    }
    ctx.barrier()?;
    ctx.free_collective(offsets)?;
    ctx.free_collective(b)?;
    ctx.free_collective(a)?;
    ctx.free_local(junk)?;
    Ok(())
}
