//! # Tessera: a partitioned global address space runtime
//!
//! Tessera runs one program as a fixed number of *ranks* (SPMD). Every rank owns a
//! *segment* of memory; together the segments form a global address space that any rank
//! can read and write with one-sided operations ([`Context::put`], [`Context::get`]),
//! synchronise on with signalling puts and semaphores, update with remote atomics, and
//! send active messages and remote procedure calls into.
//!
//! ```no_run
//! tessera::spmd(|ctx| {
//!     // Every rank owns one u64 at the same offset of its segment.
//!     let slot = ctx.alloc_collective::<u64>(1)?;
//!     let right = (ctx.rank() + 1) % ctx.ranks();
//!     ctx.put(slot.on(right), &[ctx.rank() as u64], tessera::Blocking)?;
//!     ctx.barrier()?;
//!     let got = ctx.get_value(slot.on(ctx.rank()))?;
//!     println!("rank {} received {got}", ctx.rank());
//!     Ok(())
//! });
//! ```
//!
//! Start it on four processes with `tessera run -n 4 -- ./target/release/examples/hello`,
//! on four threads of one process with `tessera run --conduit threads -n 4 -- ...`, or
//! directly (`./hello`) as a single rank.
//!
//! ## Layers
//! The module tree mirrors the layers of `docs/DESIGN.md`; dependencies point down only.
//! - [`job`]: how ranks come to exist (launcher, environment contract, teardown).
//! - [`conduit`]: how bytes move between ranks (`smp` processes over POSIX shared memory,
//!   `threads` in one process). Nothing above it assumes shared memory.
//! - [`core`]: what programs use: segments and global pointers, put/get, signalling put,
//!   atomics, active messages and RPC, barriers, locks.
//! - [`model`]: teams and collectives, domains and grids, grids in the global address
//!   space with ghost exchange, and UPC shared arrays, all built on the core.
//! - [`conformance`]: the checklist every conduit must pass, runnable on any job.

pub mod board;
pub mod conduit;
pub mod config;
pub mod conformance;
pub mod core;
pub mod error;
pub mod job;
pub mod model;
#[cfg(feature = "mpi")]
pub mod mpi_reference;
mod protocol;
pub mod reduction;

pub use crate::core::am::{AmHandlerId, AmMessage};
pub use crate::core::atomic::{AtomicFloat, AtomicInt, AtomicOp};
pub use crate::core::completion::{
    Blocking, GetShape, Implicit, Indexed, IndexedMut, Nonblocking, PutShape, Signal, Span,
    Strided, StridedMut,
};
pub use crate::core::gptr::GlobalPtr;
pub use crate::core::huge_pages::HugePageArray;
pub use crate::core::report::JobStats;
pub use crate::core::rma::Handle;
pub use crate::core::rpc::RpcHandle;
pub use crate::core::stats::{Blocked, Traffic};
pub use crate::core::sync::{GlobalLock, Semaphore, SignalOp, TicketLock};
pub use crate::core::wait::{Compare, WaitWord};
pub use crate::core::{Context, MappedSegments, MappedWords, Wait};
pub use crate::error::{BadValue, ConduitError, CoreError, Error, JobError};
pub use crate::job::{spmd, ConduitKind, Job, RankResult, Session};
pub use crate::model::dense::{numroc, BlockCyclicMatrix, LocalMatrix, MatrixLayout};
pub use crate::model::domain::{Domain, Point, RectDomain, Side};
pub use crate::model::global_grid::{GlobalGrid, GridRef, GridSource};
pub use crate::model::grid::{Grid, GridView, GridViewMut};
pub use crate::model::halo::{HaloGrid, HaloStats, HaloStrategy};
pub use crate::model::mailbox::{Arrival, Mailbox};
pub use crate::model::ops::{Combine, Loc, Op, Reducible};
pub use crate::model::phased::{Exchange, Phase, PhasedArray};
pub use crate::model::shared_array::{Affinity, Distribution, SharedArray};
/// Collective operations as values, for [`Team::run`]: [`coll::Barrier`],
/// [`coll::Broadcast`], [`coll::Allreduce`], ... (see the module's docs for their forms).
pub use crate::model::team::operations as coll;
pub use crate::model::team::{
    Algorithm, CollHandle, CollRequest, Collective, DataSync, SyncMode, Team,
};

/// The README's Rust examples, run by `cargo test` as doctests (on one rank, as a program
/// started without `tessera run` is), so that the first code a user reads compiles and works.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeExamples;

/// Check every `TESSERA_*` setting in this process's environment as the ranks would read
/// it: names, values, forced collective algorithms and the tuning table. A launcher calls
/// it before starting any rank, so that a bad setting is refused once, by name, instead of
/// in every rank.
///
/// ```
/// tessera::check_settings().unwrap();
/// ```
pub fn check_settings() -> Result<()> {
    config::check_user_settings()?;
    model::team::check_settings()
}

/// Result type of Tessera operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;
