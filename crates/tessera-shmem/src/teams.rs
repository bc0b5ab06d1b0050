//! Teams (OpenSHMEM 1.5): `SHMEM_TEAM_WORLD`, `SHMEM_TEAM_SHARED`, the strided and 2-D
//! splits, queries, translation and destruction. Each team is a Tessera [`Team`] made by
//! its members alone with `Team::subset` (no communication, nothing allocated), so every
//! team collective runs on the tuned algorithms.
//!
//! A handle is a number: 0 is `SHMEM_TEAM_INVALID`, 1 the world, 2 the PEs sharing
//! memory with this one, and each split numbers its teams from 3 on, never reusing one, so
//! a destroyed team's handle is recognised as such.
//!
//! This module must never communicate to make a team: splits are computed by every member
//! alike from the same arguments.

use std::rc::Rc;
use tessera::coll::Barrier;
use tessera::Blocking;

use libc::{c_int, c_long, c_void};
use tessera::{GlobalPtr, Team};

use crate::{check, fatal, state};

/// A team handle as C passes it (`shmem_team_t`, a pointer that is never dereferenced).
pub type Handle = *mut c_void;

/// `SHMEM_TEAM_INVALID`, `SHMEM_TEAM_WORLD` and `SHMEM_TEAM_SHARED` as numbers.
pub(crate) const INVALID: usize = 0;
pub(crate) const WORLD: usize = 1;
pub(crate) const SHARED: usize = 2;

/// `SHMEM_TEAM_NUM_CONTEXTS`.
const NUM_CONTEXTS: c_long = 1;

/// One team of this PE's.
pub(crate) struct TeamEntry {
    pub(crate) team: Team<'static>,
    /// `num_contexts` of its configuration.
    num_contexts: c_int,
}

/// The teams of this PE by handle: `None` for the invalid handle and destroyed teams.
#[derive(Default)]
pub(crate) struct Teams {
    entries: Vec<Option<Rc<TeamEntry>>>,
}

impl Teams {
    /// The predefined teams of a PE: the world, and the PEs whose memory this one maps.
    pub(crate) fn predefined(
        world: &Team<'static>,
        shared_members: &[usize],
    ) -> tessera::Result<Teams> {
        let shared = world.subset(shared_members)?;
        Ok(Teams {
            entries: vec![
                None,
                Some(Rc::new(TeamEntry {
                    team: world.clone(),
                    num_contexts: 0,
                })),
                Some(Rc::new(TeamEntry {
                    team: shared,
                    num_contexts: 0,
                })),
            ],
        })
    }
}

#[inline(always)]
pub(crate) fn number(team: Handle) -> usize {
    team as usize
}

/// The handle of team number `n`.
pub(crate) fn handle(n: usize) -> Handle {
    n as Handle
}

/// The team `team` names, or `None` for `SHMEM_TEAM_INVALID`; a handle that never named a
/// team, or a destroyed one, ends the job with a message naming the call.
pub(crate) fn lookup(call: &str, team: Handle) -> Option<Rc<TeamEntry>> {
    let s = state(call);
    let teams = s.teams.borrow();
    entry(call, &teams, team).cloned()
}

/// The entry of `team` in `teams` (see [`lookup`]), borrowed.
#[inline]
pub(crate) fn entry<'t>(call: &str, teams: &'t Teams, team: Handle) -> Option<&'t Rc<TeamEntry>> {
    let n = number(team);
    match teams.entries.get(n) {
        Some(Some(entry)) => Some(entry),
        _ if n == INVALID => None,
        Some(None) => destroyed(call, n),
        None => not_a_handle(call, team),
    }
}

#[cold]
#[inline(never)]
fn destroyed(call: &str, n: usize) -> ! {
    fatal(
        call,
        format!("team handle {n} names a team that shmem_team_destroy destroyed; split a new team"),
    )
}

#[cold]
#[inline(never)]
fn not_a_handle(call: &str, team: Handle) -> ! {
    fatal(
        call,
        format!("{team:p} is not a team handle (use SHMEM_TEAM_WORLD, SHMEM_TEAM_SHARED or one a split returned)"),
    )
}

/// The message for a collective or context on `SHMEM_TEAM_INVALID`.
#[cold]
#[inline(never)]
pub(crate) fn invalid_team(call: &str) -> ! {
    fatal(
        call,
        "the team is SHMEM_TEAM_INVALID (a split gives it to the PEs it leaves out; only the new team's members may use it)",
    )
}

/// The team `team` names, which must be valid: a collective or a context needs a team.
pub(crate) fn valid(call: &str, team: Handle) -> Rc<TeamEntry> {
    lookup(call, team).unwrap_or_else(|| invalid_team(call))
}

/// Add a team made by a split; its handle.
fn add(call: &str, members: &[usize], parent: &TeamEntry, num_contexts: c_int) -> Handle {
    let team = check(call, parent.team.subset(members));
    let s = state(call);
    let mut teams = s.teams.borrow_mut();
    teams
        .entries
        .push(Some(Rc::new(TeamEntry { team, num_contexts })));
    handle(teams.entries.len() - 1)
}

/// The `num_contexts` a split's configuration asks for.
///
/// # Safety
/// `config` is null or valid.
unsafe fn contexts_asked(config: *const ShmemTeamConfig, mask: c_long) -> c_int {
    if mask & NUM_CONTEXTS != 0 && !config.is_null() {
        // SAFETY: the caller passes a valid configuration or null (checked).
        unsafe { (*config).num_contexts }
    } else {
        0
    }
}

/// `shmem_team_config_t`.
#[repr(C)]
pub struct ShmemTeamConfig {
    num_contexts: c_int,
}

/// `shmem_team_my_pe`: this PE's number in `team`, or -1 for `SHMEM_TEAM_INVALID`.
///
/// # Safety
/// None beyond C's.
#[export_name = "pshmem_team_my_pe"]
pub unsafe extern "C" fn shmem_team_my_pe(team: Handle) -> c_int {
    // Held throughout: the teams it looks up are the state's.
    let _held = state("shmem_team_my_pe");
    lookup("shmem_team_my_pe", team).map_or(-1, |t| t.team.rank() as c_int)
}

/// `shmem_team_n_pes`: the number of PEs in `team`, or -1 for `SHMEM_TEAM_INVALID`.
///
/// # Safety
/// None beyond C's.
#[export_name = "pshmem_team_n_pes"]
pub unsafe extern "C" fn shmem_team_n_pes(team: Handle) -> c_int {
    // Held throughout: the teams it looks up are the state's.
    let _held = state("shmem_team_n_pes");
    lookup("shmem_team_n_pes", team).map_or(-1, |t| t.team.size() as c_int)
}

/// `shmem_team_get_config`: the configuration the team was made with.
///
/// # Safety
/// `config` valid for one `shmem_team_config_t`, or null.
#[export_name = "pshmem_team_get_config"]
pub unsafe extern "C" fn shmem_team_get_config(
    team: Handle,
    config_mask: c_long,
    config: *mut ShmemTeamConfig,
) -> c_int {
    // Held throughout: the teams it looks up are the state's.
    let _held = state("shmem_team_get_config");
    let Some(t) = lookup("shmem_team_get_config", team) else {
        return -1;
    };
    if config.is_null() {
        return -1;
    }
    if config_mask & NUM_CONTEXTS != 0 {
        // SAFETY: the caller passes a valid configuration (checked non-null).
        unsafe { (*config).num_contexts = t.num_contexts };
    }
    0
}

/// `shmem_team_translate_pe`: the number in `dest_team` of PE `src_pe` of `src_team`, or
/// -1 if it is not in both (or either team is invalid).
///
/// # Safety
/// None beyond C's.
#[export_name = "pshmem_team_translate_pe"]
pub unsafe extern "C" fn shmem_team_translate_pe(
    src_team: Handle,
    src_pe: c_int,
    dest_team: Handle,
) -> c_int {
    // Held throughout: the teams it looks up are the state's.
    let _held = state("shmem_team_translate_pe");
    const CALL: &str = "shmem_team_translate_pe";
    let (Some(src), Some(dest)) = (lookup(CALL, src_team), lookup(CALL, dest_team)) else {
        return -1;
    };
    if src_pe < 0 || src_pe as usize >= src.team.size() {
        return -1;
    }
    let world = src.team.world_rank(src_pe as usize);
    (0..dest.team.size())
        .find(|&i| dest.team.world_rank(i) == world)
        .map_or(-1, |i| i as c_int)
}

/// `shmem_team_split_strided`: the PEs `start`, `start + stride`, ... (`size` of them) of
/// the parent make a new team. Every PE of the parent calls it; those left out get
/// `SHMEM_TEAM_INVALID`.
///
/// # Safety
/// `config` null or valid; `new_team` valid for one handle.
#[export_name = "pshmem_team_split_strided"]
pub unsafe extern "C" fn shmem_team_split_strided(
    parent_team: Handle,
    start: c_int,
    stride: c_int,
    size: c_int,
    config: *const ShmemTeamConfig,
    config_mask: c_long,
    new_team: *mut Handle,
) -> c_int {
    // Held throughout: the teams it looks up are the state's.
    let _held = state("shmem_team_split_strided");
    const CALL: &str = "shmem_team_split_strided";
    if new_team.is_null() {
        fatal(CALL, "new_team is null; pass the address of a shmem_team_t");
    }
    let Some(parent) = lookup(CALL, parent_team) else {
        // SAFETY: checked non-null; the caller passes a valid handle's address.
        unsafe { *new_team = handle(INVALID) };
        return -1;
    };
    let n = parent.team.size() as i64;
    let (start, stride, size) = (start as i64, stride as i64, size as i64);
    let last = start + (size - 1) * stride;
    if size < 1 || start < 0 || start >= n || (size > 1 && stride < 1) || last >= n {
        // 1.5 §9.4.3: an invalid triplet gives SHMEM_TEAM_INVALID and a nonzero return on
        // every PE of the parent (each passes the same triplet, so each returns here).
        if crate::defined("SHMEM_DEBUG") {
            tessera::job::write_stderr(&format!(
                "tessera-shmem: {CALL}: start {start}, stride {stride}, size {size} leave the parent team (PEs 0 to {}); returning SHMEM_TEAM_INVALID\n",
                n - 1
            ));
        }
        // SAFETY: checked non-null above.
        unsafe { *new_team = handle(INVALID) };
        return -1;
    }
    let members: Vec<usize> = (0..size).map(|i| (start + i * stride) as usize).collect();
    let me = parent.team.rank();
    let made = if members.contains(&me) {
        // SAFETY: the caller passes a valid configuration or null.
        add(CALL, &members, &parent, unsafe {
            contexts_asked(config, config_mask)
        })
    } else {
        handle(INVALID)
    };
    // SAFETY: checked non-null above.
    unsafe { *new_team = made };
    0
}

/// `shmem_team_split_2d`: the parent's PEs as a grid of rows of `xrange` (the last row
/// may be short); `xaxis_team` is this PE's row, `yaxis_team` its column.
///
/// # Safety
/// Configurations null or valid; both team pointers valid for one handle.
#[export_name = "pshmem_team_split_2d"]
pub unsafe extern "C" fn shmem_team_split_2d(
    parent_team: Handle,
    xrange: c_int,
    xaxis_config: *const ShmemTeamConfig,
    xaxis_mask: c_long,
    xaxis_team: *mut Handle,
    yaxis_config: *const ShmemTeamConfig,
    yaxis_mask: c_long,
    yaxis_team: *mut Handle,
) -> c_int {
    // Held throughout: the teams it looks up are the state's.
    let _held = state("shmem_team_split_2d");
    const CALL: &str = "shmem_team_split_2d";
    if xaxis_team.is_null() || yaxis_team.is_null() {
        fatal(
            CALL,
            "xaxis_team and yaxis_team must be addresses of shmem_team_t",
        );
    }
    let Some(parent) = lookup(CALL, parent_team) else {
        // SAFETY: both checked non-null.
        unsafe {
            *xaxis_team = handle(INVALID);
            *yaxis_team = handle(INVALID);
        }
        return -1;
    };
    if xrange < 1 {
        fatal(CALL, format!("xrange {xrange} must be at least 1"));
    }
    let n = parent.team.size();
    let x = (xrange as usize).min(n);
    let me = parent.team.rank();
    let row: Vec<usize> = (me / x * x..(me / x * x + x).min(n)).collect();
    let column: Vec<usize> = (me % x..n).step_by(x).collect();
    // SAFETY: the caller passes valid configurations or null.
    let (xc, yc) = unsafe {
        (
            contexts_asked(xaxis_config, xaxis_mask),
            contexts_asked(yaxis_config, yaxis_mask),
        )
    };
    let (xt, yt) = (
        add(CALL, &row, &parent, xc),
        add(CALL, &column, &parent, yc),
    );
    // SAFETY: both checked non-null.
    unsafe {
        *xaxis_team = xt;
        *yaxis_team = yt;
    }
    0
}

/// `shmem_team_destroy`: the team and the contexts made from it go; `SHMEM_TEAM_INVALID`
/// is left alone.
///
/// # Safety
/// None beyond C's.
#[export_name = "pshmem_team_destroy"]
pub unsafe extern "C" fn shmem_team_destroy(team: Handle) {
    // Held throughout: the teams it looks up are the state's.
    let _held = state("shmem_team_destroy");
    const CALL: &str = "shmem_team_destroy";
    let n = number(team);
    if n == INVALID {
        return;
    }
    if n == WORLD || n == SHARED {
        fatal(
            CALL,
            "SHMEM_TEAM_WORLD and SHMEM_TEAM_SHARED are predefined and cannot be destroyed",
        );
    }
    let _ = valid(CALL, team);
    crate::ctx::destroy_team_contexts(CALL, n);
    let s = state(CALL);
    crate::complete(CALL, s.sym);
    s.teams.borrow_mut().entries[n] = None;
}

/// `shmem_team_sync`: a barrier of the team, without completing puts.
///
/// # Safety
/// None beyond C's.
#[export_name = "pshmem_team_sync"]
pub unsafe extern "C" fn shmem_team_sync(team: Handle) -> c_int {
    // Held throughout: the teams it looks up are the state's.
    let _held = state("shmem_team_sync");
    const CALL: &str = "shmem_team_sync";
    check(CALL, valid(CALL, team).team.run(Barrier, Blocking));
    0
}

/// `shmem_team_ptr`: a plain pointer to `dest` on PE `pe` of `team` where this process
/// maps it, else null.
///
/// # Safety
/// None beyond C's: the address is translated, not read.
#[export_name = "pshmem_team_ptr"]
pub unsafe extern "C" fn shmem_team_ptr(
    team: Handle,
    dest: *const c_void,
    pe: c_int,
) -> *mut c_void {
    // Held throughout: the teams it looks up are the state's.
    let _held = state("shmem_team_ptr");
    const CALL: &str = "shmem_team_ptr";
    let Some(t) = lookup(CALL, team) else {
        return std::ptr::null_mut();
    };
    if pe < 0 || pe as usize >= t.team.size() {
        return std::ptr::null_mut();
    }
    // SAFETY: shmem_ptr only translates the address.
    unsafe { crate::shmem_ptr(dest, t.team.world_rank(pe as usize) as c_int) }
}

/// The world ranks whose segments this process maps (the PEs of `SHMEM_TEAM_SHARED`).
pub(crate) fn sharing_memory(ctx: &tessera::Context) -> Vec<usize> {
    (0..ctx.ranks())
        .filter(|&r| {
            r == ctx.rank() || matches!(ctx.local_ptr(GlobalPtr::<u8>::new(r, 0), 1), Ok(Some(_)))
        })
        .collect()
}
