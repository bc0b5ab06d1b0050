//! Communication contexts (OpenSHMEM 1.5): `shmem_ctx_create`, `shmem_team_create_ctx`,
//! `shmem_ctx_destroy`, `shmem_ctx_get_team`, `shmem_ctx_fence`/`quiet`, and the PE
//! translation every `shmem_ctx_*` routine makes: a context made from a team numbers PEs
//! as its team does.
//!
//! A context is its own completion domain trivially: every RMA and AMO of this library
//! completes at the target before it returns on shared memory (and is completed by the
//! next quiet on other conduits), so `shmem_ctx_quiet(c)` never waits for another
//! context's operations on shared memory. The options (`SHMEM_CTX_SERIALIZED`, `PRIVATE`,
//! `NOSTORE`) ask for less than that, and are accepted.
//!
//! Handles are numbers as team handles are: 0 is `SHMEM_CTX_INVALID`, 1
//! `SHMEM_CTX_DEFAULT`, created contexts 2 on, never reused.
//!
//! This module must never move data: it validates and translates, and the RMA and AMO
//! modules move.

use std::sync::atomic::{AtomicBool, Ordering};

use libc::{c_int, c_long, c_void};

use crate::access::symmetric;
use crate::teams;
use crate::{fatal, state};

/// A context handle as C passes it (`shmem_ctx_t`, never dereferenced).
pub type Handle = *mut c_void;

const INVALID: usize = 0;
const DEFAULT: usize = 1;

/// `SHMEM_CTX_SERIALIZED | SHMEM_CTX_PRIVATE | SHMEM_CTX_NOSTORE`.
const KNOWN_OPTIONS: c_long = 1 | 2 | 4;

/// One context: the team it was made from, and that team's PEs as world PEs, copied at
/// creation so that a context's routines translate PEs without the library's lock.
struct Entry {
    team: usize,
    /// World PE of each team PE; empty for the world team (no translation).
    world_pes: Vec<c_int>,
    live: AtomicBool,
}

/// The contexts of this PE by handle, readable from any thread without a lock: an
/// append-only table (contexts are made rarely and handles are never reused), each
/// entry immutable but for its `live` flag. Entries are added and retired under the
/// library's lock; a retired entry stays, so a destroyed handle is recognised.
///
/// Ordering: `live` is written with `Release` after the entry is complete (the table's
/// push publishes the entry itself) and read with `Acquire`; a context used by one thread
/// while another destroys it is the program's race, which the specification forbids.
pub(crate) struct Contexts {
    entries: boxcar::Vec<Entry>,
}

impl Default for Contexts {
    fn default() -> Contexts {
        let entries = boxcar::Vec::new();
        for team in [teams::INVALID, teams::WORLD] {
            entries.push(Entry {
                team,
                world_pes: Vec::new(),
                live: AtomicBool::new(team != teams::INVALID),
            });
        }
        Contexts { entries }
    }
}

/// The entry of context `ctx`, or the end of the job naming the call.
fn entry(call: &str, ctx: Handle) -> &'static Entry {
    let n = ctx as usize;
    if n == INVALID {
        fatal(
            call,
            "the context is SHMEM_CTX_INVALID (shmem_ctx_create returns it when it fails)",
        );
    }
    let contexts = &symmetric(call).contexts;
    match contexts.entries.get(n) {
        Some(e) if e.live.load(Ordering::Acquire) => e,
        Some(_) => fatal(
            call,
            format!("context handle {n} was destroyed by shmem_ctx_destroy (or with its team)"),
        ),
        None => fatal(
            call,
            format!("{ctx:p} is not a context handle (use SHMEM_CTX_DEFAULT or one shmem_ctx_create returned)"),
        ),
    }
}

/// Check that `ctx` names a context (the default one or a live one).
fn validate(call: &str, ctx: Handle) {
    if ctx as usize != DEFAULT {
        let _ = entry(call, ctx);
    }
}

/// The world PE of `pe` as context `ctx` numbers PEs (its team's numbering). Takes no
/// lock.
pub(crate) fn world_pe(call: &str, ctx: Handle, pe: c_int) -> c_int {
    if ctx as usize == DEFAULT {
        return pe;
    }
    let e = entry(call, ctx);
    if e.world_pes.is_empty() {
        return pe;
    }
    match usize::try_from(pe).ok().and_then(|i| e.world_pes.get(i)) {
        Some(&world) => world,
        None => fatal(
            call,
            format!(
                "PE {pe} is not in the context's team: its PEs are 0 to {}",
                e.world_pes.len() - 1
            ),
        ),
    }
}

/// Destroy every context made from team number `team` (its team is being destroyed).
pub(crate) fn destroy_team_contexts(call: &str, team: usize) {
    for (_, e) in symmetric(call).contexts.entries.iter() {
        if e.team == team {
            e.live.store(false, Ordering::Release);
        }
    }
}

/// `shmem_team_create_ctx`: a context on `team` (its PE numbers are the team's).
///
/// # Safety
/// `ctx` valid for one handle.
#[export_name = "pshmem_team_create_ctx"]
pub unsafe extern "C" fn shmem_team_create_ctx(
    team: teams::Handle,
    options: c_long,
    ctx: *mut Handle,
) -> c_int {
    const CALL: &str = "shmem_team_create_ctx";
    // SAFETY: as the caller guarantees.
    unsafe { create(CALL, team, options, ctx) }
}

/// `shmem_ctx_create`: a context on the world team.
///
/// # Safety
/// `ctx` valid for one handle.
#[export_name = "pshmem_ctx_create"]
pub unsafe extern "C" fn shmem_ctx_create(options: c_long, ctx: *mut Handle) -> c_int {
    // SAFETY: as the caller guarantees.
    unsafe {
        create(
            "shmem_ctx_create",
            teams::handle(teams::WORLD),
            options,
            ctx,
        )
    }
}

/// # Safety
/// `ctx` valid for one handle.
unsafe fn create(call: &str, team: teams::Handle, options: c_long, ctx: *mut Handle) -> c_int {
    if ctx.is_null() {
        fatal(call, "ctx is null; pass the address of a shmem_ctx_t");
    }
    if options & !KNOWN_OPTIONS != 0 {
        fatal(
            call,
            format!("options {options:#x} are not a combination of SHMEM_CTX_SERIALIZED, SHMEM_CTX_PRIVATE and SHMEM_CTX_NOSTORE"),
        );
    }
    let s = state(call);
    let Some(entry) = teams::lookup(call, team) else {
        // SAFETY: checked non-null.
        unsafe { *ctx = INVALID as Handle };
        return -1;
    };
    let number = team as usize;
    let world_pes = if number == teams::WORLD {
        Vec::new()
    } else {
        (0..entry.team.size())
            .map(|pe| entry.team.world_rank(pe) as c_int)
            .collect()
    };
    let index = s.sym.contexts.entries.push(Entry {
        team: number,
        world_pes,
        live: AtomicBool::new(true),
    });
    // SAFETY: checked non-null.
    unsafe { *ctx = index as Handle };
    0
}

/// `shmem_ctx_destroy`: complete the context's operations and free it;
/// `SHMEM_CTX_INVALID` is left alone.
///
/// # Safety
/// None beyond C's.
#[export_name = "pshmem_ctx_destroy"]
pub unsafe extern "C" fn shmem_ctx_destroy(ctx: Handle) {
    const CALL: &str = "shmem_ctx_destroy";
    match ctx as usize {
        INVALID => {}
        DEFAULT => fatal(
            CALL,
            "SHMEM_CTX_DEFAULT is predefined and cannot be destroyed",
        ),
        _ => {
            let e = entry(CALL, ctx);
            crate::quiet(CALL);
            e.live.store(false, Ordering::Release);
        }
    }
}

/// `shmem_ctx_get_team`: the team a context was made from.
///
/// # Safety
/// `team` valid for one handle.
#[export_name = "pshmem_ctx_get_team"]
pub unsafe extern "C" fn shmem_ctx_get_team(ctx: Handle, team: *mut teams::Handle) -> c_int {
    const CALL: &str = "shmem_ctx_get_team";
    if team.is_null() {
        fatal(CALL, "team is null; pass the address of a shmem_team_t");
    }
    let found = match ctx as usize {
        INVALID => None,
        DEFAULT => Some(teams::WORLD),
        _ => Some(entry(CALL, ctx).team),
    };
    // SAFETY: checked non-null.
    unsafe { *team = teams::handle(found.unwrap_or(teams::INVALID)) };
    if found.is_some() {
        0
    } else {
        -1
    }
}

/// `shmem_ctx_quiet`: the context's puts, AMOs and nonblocking transfers are complete;
/// nothing for `SHMEM_CTX_INVALID`.
///
/// # Safety
/// None beyond C's.
#[export_name = "pshmem_ctx_quiet"]
pub unsafe extern "C" fn shmem_ctx_quiet(ctx: Handle) {
    if ctx as usize == INVALID {
        return; // 1.5 §9.5.4: no operation on SHMEM_CTX_INVALID
    }
    validate("shmem_ctx_quiet", ctx);
    crate::quiet("shmem_ctx_quiet");
}

/// `shmem_ctx_fence`: the context's puts to each PE arrive in order; nothing for
/// `SHMEM_CTX_INVALID`.
///
/// # Safety
/// None beyond C's.
#[export_name = "pshmem_ctx_fence"]
pub unsafe extern "C" fn shmem_ctx_fence(ctx: Handle) {
    if ctx as usize == INVALID {
        return; // 1.5 §9.5.4: no operation on SHMEM_CTX_INVALID
    }
    validate("shmem_ctx_fence", ctx);
    crate::quiet("shmem_ctx_fence");
}
