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

use libc::{c_int, c_long, c_void};

use crate::teams::{self, TeamEntry};
use crate::{check, fatal, state};

/// A context handle as C passes it (`shmem_ctx_t`, never dereferenced).
pub type Handle = *mut c_void;

const INVALID: usize = 0;
const DEFAULT: usize = 1;

/// `SHMEM_CTX_SERIALIZED | SHMEM_CTX_PRIVATE | SHMEM_CTX_NOSTORE`.
const KNOWN_OPTIONS: c_long = 1 | 2 | 4;

/// The contexts of this PE by handle: the team number each was made from, `None` for the
/// invalid handle and destroyed contexts.
pub(crate) struct Contexts {
    teams: Vec<Option<usize>>,
}

impl Default for Contexts {
    fn default() -> Contexts {
        Contexts {
            teams: vec![None, Some(teams::WORLD)],
        }
    }
}

/// The team number of context `ctx`, or the end of the job naming the call.
fn team_of(call: &str, ctx: Handle) -> usize {
    let n = ctx as usize;
    if n == INVALID {
        fatal(
            call,
            "the context is SHMEM_CTX_INVALID (shmem_ctx_create returns it when it fails)",
        );
    }
    let s = state(call);
    let contexts = s.contexts.borrow();
    match contexts.teams.get(n) {
        Some(Some(team)) => *team,
        Some(None) => fatal(
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
        let _ = team_of(call, ctx);
    }
}

/// The world PE of `pe` as context `ctx` numbers PEs (its team's numbering).
pub(crate) fn world_pe(call: &str, ctx: Handle, pe: c_int) -> c_int {
    if ctx as usize == DEFAULT {
        return pe;
    }
    match team_of(call, ctx) {
        teams::WORLD => pe,
        team => {
            let entry: std::rc::Rc<TeamEntry> = teams::valid(call, teams::handle(team));
            teams::world_pe(call, &entry, pe)
        }
    }
}

/// Destroy every context made from team number `team` (its team is being destroyed).
pub(crate) fn destroy_team_contexts(call: &str, team: usize) {
    let s = state(call);
    for slot in s.contexts.borrow_mut().teams.iter_mut() {
        if *slot == Some(team) {
            *slot = None;
        }
    }
}

/// `shmem_team_create_ctx`: a context on `team` (its PE numbers are the team's).
///
/// # Safety
/// `ctx` valid for one handle.
#[no_mangle]
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
#[no_mangle]
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
    let Some(_) = teams::lookup(call, team) else {
        // SAFETY: checked non-null.
        unsafe { *ctx = INVALID as Handle };
        return -1;
    };
    let s = state(call);
    let mut contexts = s.contexts.borrow_mut();
    contexts.teams.push(Some(team as usize));
    // SAFETY: checked non-null.
    unsafe { *ctx = (contexts.teams.len() - 1) as Handle };
    0
}

/// `shmem_ctx_destroy`: complete the context's operations and free it;
/// `SHMEM_CTX_INVALID` is left alone.
///
/// # Safety
/// None beyond C's.
#[no_mangle]
pub unsafe extern "C" fn shmem_ctx_destroy(ctx: Handle) {
    const CALL: &str = "shmem_ctx_destroy";
    match ctx as usize {
        INVALID => {}
        DEFAULT => fatal(
            CALL,
            "SHMEM_CTX_DEFAULT is predefined and cannot be destroyed",
        ),
        n => {
            let _ = team_of(CALL, ctx);
            let s = state(CALL);
            check(CALL, s.session.context().sync_nbi());
            s.contexts.borrow_mut().teams[n] = None;
        }
    }
}

/// `shmem_ctx_get_team`: the team a context was made from.
///
/// # Safety
/// `team` valid for one handle.
#[no_mangle]
pub unsafe extern "C" fn shmem_ctx_get_team(ctx: Handle, team: *mut teams::Handle) -> c_int {
    const CALL: &str = "shmem_ctx_get_team";
    if team.is_null() {
        fatal(CALL, "team is null; pass the address of a shmem_team_t");
    }
    let found = match ctx as usize {
        INVALID => None,
        DEFAULT => Some(teams::WORLD),
        _ => Some(team_of(CALL, ctx)),
    };
    // SAFETY: checked non-null.
    unsafe { *team = teams::handle(found.unwrap_or(teams::INVALID)) };
    if found.is_some() {
        0
    } else {
        -1
    }
}

/// `shmem_ctx_quiet`: the context's puts, AMOs and nonblocking transfers are complete.
///
/// # Safety
/// None beyond C's.
#[no_mangle]
pub unsafe extern "C" fn shmem_ctx_quiet(ctx: Handle) {
    validate("shmem_ctx_quiet", ctx);
    // SAFETY: no arguments.
    unsafe { crate::shmem_quiet() }
}

/// `shmem_ctx_fence`: the context's puts to each PE arrive in order.
///
/// # Safety
/// None beyond C's.
#[no_mangle]
pub unsafe extern "C" fn shmem_ctx_fence(ctx: Handle) {
    validate("shmem_ctx_fence", ctx);
    // SAFETY: no arguments.
    unsafe { crate::shmem_fence() }
}
