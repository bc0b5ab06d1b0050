//! Collectives over active sets (OpenSHMEM 1.4's `PE_start`, `logPE_stride`, `PE_size`):
//! each active set is a [`Team::subset`] of the world team, made by its members alone the
//! first time they use it and kept, so every collective runs on Tessera's tuned algorithms.
//! `pSync` and `pWrk` are accepted and left alone: the teams keep their own state.
//!
//! This module must never implement a collective algorithm: it translates arguments and
//! calls the team's.

use bytemuck::Pod;
use libc::{c_int, c_long, c_void};
use std::mem::MaybeUninit;
use tessera::coll::{Allgather, Allreduce, Barrier, Broadcast, Exchange, Exscan, Scan};
use tessera::Blocking;
use tessera::{GlobalPtr, Op, Team};

use crate::{check, fatal, state, teams, ComplexD, ComplexF, LongDouble, State, Symmetric};

/// The team of the active set (start, 2^log_stride, size), which this PE must be in.
/// Teams live as long as the process (a handful per program), so a reference serves and
/// nothing is cloned per call.
#[inline(always)]
fn active_set<'a>(
    call: &str,
    s: &'a State,
    start: c_int,
    log_stride: c_int,
    size: c_int,
) -> &'a Team<'static> {
    // The whole job, the common case, before any arithmetic.
    if start == 0 && log_stride == 0 && size as usize == s.world.size() {
        return &s.world;
    }
    subset_team(call, s, start, log_stride, size)
}

/// The team of an active set that is not the whole job (see [`active_set`]).
#[inline(never)]
fn subset_team<'a>(
    call: &str,
    s: &'a State,
    start: c_int,
    log_stride: c_int,
    size: c_int,
) -> &'a Team<'static> {
    let n = s.session.context().ranks() as i64;
    let me = s.session.context().rank() as i64;
    let bad = |why: String| -> ! {
        fatal(
            call,
            format!(
                "active set (PE_start {start}, logPE_stride {log_stride}, PE_size {size}): {why}"
            ),
        )
    };
    if size < 1 || start < 0 || !(0..31).contains(&log_stride) {
        bad("PE_size must be at least 1, PE_start at least 0 and logPE_stride from 0 to 30".into());
    }
    let stride = 1i64 << log_stride;
    let last = start as i64 + (size as i64 - 1) * stride;
    if last >= n {
        bad(format!(
            "its last PE would be {last}, but this job has PEs 0 to {}",
            n - 1
        ));
    }
    if me < start as i64 || (me - start as i64) % stride != 0 || me > last {
        bad(format!(
            "PE {me} is not in it; only its members call the collective"
        ));
    }
    let key = (start, log_stride, size);
    if let Some(team) = s.sets.borrow().get(&key) {
        return team;
    }
    let members: Vec<usize> = (0..size as i64)
        .map(|i| (start as i64 + i * stride) as usize)
        .collect();
    let team: &'static Team<'static> = Box::leak(Box::new(check(call, s.world.subset(&members))));
    s.sets.borrow_mut().insert(key, team);
    team
}

/// Run `f` on the team of an active set, holding the state (and so the library's lock,
/// where several threads may call) throughout.
#[inline(always)]
fn on_active_set<R>(
    call: &str,
    start: c_int,
    log_stride: c_int,
    size: c_int,
    f: impl FnOnce(&State, &Team<'static>) -> R,
) -> R {
    let s = state(call);
    f(&s, active_set(call, &s, start, log_stride, size))
}

/// Run `f` on the 1.5 team `team`, which must be valid, holding the state throughout. The
/// world team, the common case, is reached without the table; `f` is called in one place,
/// so that it is inlined.
#[inline(always)]
pub(crate) fn on_team<R>(
    call: &str,
    team: teams::Handle,
    f: impl FnOnce(&State, &Team<'static>) -> R,
) -> R {
    let s = state(call);
    let table;
    let team = if teams::number(team) == teams::WORLD {
        &s.world
    } else {
        table = s.teams.borrow();
        match teams::entry(call, &table, team) {
            Some(entry) => &entry.team,
            None => teams::invalid_team(call),
        }
    };
    f(&s, team)
}

/// `shmem_barrier_all`: every PE's puts complete, then a barrier.
///
/// # Safety
/// None beyond C's.
#[export_name = "pshmem_barrier_all"]
pub unsafe extern "C" fn shmem_barrier_all() {
    const CALL: &str = "shmem_barrier_all";
    let s = state(CALL);
    crate::complete(CALL, s.sym);
    check(CALL, s.world.run(Barrier, Blocking));
}

/// `shmem_sync_all`: a barrier without completing puts.
///
/// # Safety
/// None beyond C's.
#[export_name = "pshmem_sync_all"]
pub unsafe extern "C" fn shmem_sync_all() {
    const CALL: &str = "shmem_sync_all";
    check(CALL, state(CALL).world.run(Barrier, Blocking));
}

/// `shmem_barrier` over an active set.
///
/// # Safety
/// None beyond C's (`pSync` is not used).
#[export_name = "pshmem_barrier"]
pub unsafe extern "C" fn shmem_barrier(
    start: c_int,
    log_stride: c_int,
    size: c_int,
    _psync: *mut c_long,
) {
    const CALL: &str = "shmem_barrier";
    on_active_set(CALL, start, log_stride, size, |s, team| {
        crate::complete(CALL, s.sym);
        check(CALL, team.run(Barrier, Blocking));
    });
}

/// `shmem_sync` over an active set.
///
/// # Safety
/// None beyond C's.
#[export_name = "pshmem_sync"]
pub unsafe extern "C" fn shmem_sync(
    start: c_int,
    log_stride: c_int,
    size: c_int,
    _psync: *mut c_long,
) {
    const CALL: &str = "shmem_sync";
    on_active_set(CALL, start, log_stride, size, |_, team| {
        check(CALL, team.run(Barrier, Blocking))
    });
}

/// Whether `a` (`na` elements) and `b` (`nb` elements) share any byte.
#[inline(always)]
fn overlap<T>(a: *const T, na: usize, b: *const T, nb: usize) -> bool {
    let size = std::mem::size_of::<T>();
    let (a0, b0) = (a as usize, b as usize);
    na > 0 && nb > 0 && a0 < b0 + nb * size && b0 < a0 + na * size
}

/// Call `f` with `source` as a slice and `dest` as a mutable one, copying the source first
/// only where the two overlap (the specification allows `dest == source`).
///
/// # Safety
/// `source` valid for `ns` elements, `dest` for `nd`.
#[inline(always)]
unsafe fn with_buffers<T: Pod, R>(
    source: *const T,
    ns: usize,
    dest: *mut T,
    nd: usize,
    f: impl FnOnce(&[T], &mut [T]) -> R,
) -> R {
    if overlap(source, ns, dest.cast_const(), nd) {
        // SAFETY: as the caller guarantees; the copy ends the borrow of the source.
        let copy = unsafe { slice(source, ns) }.to_vec();
        // SAFETY: as the caller guarantees.
        f(&copy, unsafe { slice_mut(dest, nd) })
    } else {
        // SAFETY: as the caller guarantees, and the two do not overlap.
        unsafe { f(slice(source, ns), slice_mut(dest, nd)) }
    }
}

/// # Safety
/// `p` valid for `n` elements (or `n` is 0).
unsafe fn slice<'a, T>(p: *const T, n: usize) -> &'a [T] {
    if n == 0 {
        &[]
    } else {
        // SAFETY: the caller guarantees p is valid for n elements.
        unsafe { std::slice::from_raw_parts(p, n) }
    }
}

/// # Safety
/// `p` valid for `n` elements (or `n` is 0).
unsafe fn slice_mut<'a, T>(p: *mut T, n: usize) -> &'a mut [T] {
    if n == 0 {
        &mut []
    } else {
        // SAFETY: the caller guarantees p is valid for n elements.
        unsafe { std::slice::from_raw_parts_mut(p, n) }
    }
}

/// Call `f` with every member's copy of the symmetric object `ptr` (in team-rank order),
/// kept on the stack for teams of up to 16 members so that a small collective allocates
/// nothing for it.
#[inline(always)]
fn with_symmetric<T, R>(
    team: &Team<'static>,
    ptr: GlobalPtr<T>,
    f: impl FnOnce(&mut [GlobalPtr<T>]) -> R,
) -> R {
    const SMALL: usize = 16;
    let n = team.size();
    if n > SMALL {
        return f(&mut team.symmetric(ptr));
    }
    // Only the members' places are written (filling all sixteen cost a small all-to-all
    // about 48 stores).
    let mut places = [const { MaybeUninit::<GlobalPtr<T>>::uninit() }; SMALL];
    for (i, place) in places[..n].iter_mut().enumerate() {
        place.write(ptr.on(team.world_rank(i)));
    }
    // SAFETY: the first n places were written just above, and MaybeUninit<P> has P's
    // layout.
    let written = unsafe { &mut *(std::ptr::from_mut(&mut places[..n]) as *mut [GlobalPtr<T>]) };
    f(written)
}

/// Broadcast `n` elements of `source` on the team's `root` into `dest`; the root's own
/// `dest` too when `root_dest` (1.5's team broadcast; 1.4's active-set form leaves it).
///
/// The specification makes the caller ensure that every `dest` is ready before any PE
/// enters, so the broadcast puts straight into the members' symmetric destinations with
/// no entry synchronisation (the team's single-address form; the layer's teams have entry
/// `SyncMode::No` and exit `SyncMode::My`: each PE returns once its own `dest` holds the
/// data, the root once its puts are done). The root's source is read in place: for 1.4 it
/// names its symmetric source as its own destination, so that its `dest` is left alone.
/// `sym` is the layout of the symmetric objects, from the state the caller holds.
///
/// # Safety
/// `source` valid for `n` elements on the root, `dest` on every PE that receives.
#[allow(clippy::too_many_arguments)] // the routine's arguments, and the symmetric layout
pub(crate) unsafe fn broadcast<T: Pod>(
    call: &str,
    sym: &Symmetric,
    team: &Team<'static>,
    dest: *mut T,
    source: *const T,
    n: usize,
    root: c_int,
    root_dest: bool,
) {
    let size = team.size();
    if root < 0 || root as usize >= size {
        fatal(
            call,
            format!("PE_root {root} is not a PE of the team (0 to {})", size - 1),
        );
    }
    let root = root as usize;
    let at_root = team.rank() == root;
    let from: *const T = if at_root && root_dest {
        if source != dest.cast_const() && n > 0 {
            // SAFETY: both valid for n elements (the caller's guarantee); copy handles
            // overlap.
            unsafe { std::ptr::copy(source, dest, n) };
        }
        dest
    } else {
        source
    };
    let bytes = n * std::mem::size_of::<T>();
    if bytes > 0 && bytes <= SMALL_BROADCAST {
        // SAFETY: the caller's guarantees, passed on; the size is checked above.
        let r = unsafe { small_broadcast(call, team, sym, dest, source, n, root, root_dest) };
        check(call, r);
        return;
    }
    // SAFETY: on the root `from` is valid for n elements (the caller's guarantee); other
    // PEs pass an empty source, which the form does not read.
    let src = unsafe { slice(from, if at_root { n } else { 0 }) };
    let r = with_symmetric(team, sym.own(call, dest.cast_const(), n), |dsts| {
        if at_root && !root_dest {
            dsts[root] = sym.own(call, source, n);
        }
        team.run(Broadcast::new(root, src, n).to_symmetric(dsts), Blocking)
    });
    check(call, r);
}

/// Largest broadcast (bytes) that [`broadcast`] sends as the team's messages instead of
/// putting it into the destinations: at 2 PEs on a 2-core AMD host a 4-byte broadcast took
/// 232 ns as puts and signals (single-address form) against Open MPI's 165, where the
/// team's small broadcast on its channel takes about 125 (docs/PERFORMANCE.md, "OpenSHMEM").
const SMALL_BROADCAST: usize = 256;

/// [`broadcast`] of a few bytes as the team's messages (its blocking broadcast, which runs
/// a small one straight on its channel), received into each PE's `dest`; a 1.4 root, whose
/// `dest` stays as it was, sends from a copy of `source` (1.5's root holds the data in its
/// `dest` already). The destinations must still be symmetric, as for the puts.
///
/// # Safety
/// As for [`broadcast`]; `n · size_of::<T>()` at most [`SMALL_BROADCAST`].
#[allow(clippy::too_many_arguments)] // broadcast's arguments, passed on
unsafe fn small_broadcast<T: Pod>(
    call: &str,
    team: &Team<'static>,
    sym: &Symmetric,
    dest: *mut T,
    source: *const T,
    n: usize,
    root: usize,
    root_dest: bool,
) -> tessera::Result<()> {
    /// Room for the root's copy of its source, aligned for any element type.
    #[repr(C, align(64))]
    struct Copy([u8; SMALL_BROADCAST]);
    sym.own(call, dest.cast_const(), n);
    if team.rank() == root && !root_dest {
        // Only the source's bytes are written (not the whole room first).
        let mut copy = MaybeUninit::<Copy>::uninit();
        let room = copy.as_mut_ptr().cast::<T>();
        // SAFETY: the root's source is valid for n elements (the caller's guarantee), and
        // the room, aligned for T, holds n of them (n · size_of::<T>() is at most
        // SMALL_BROADCAST); the slice covers exactly the elements just written.
        let data = unsafe {
            std::ptr::copy_nonoverlapping(source, room, n);
            std::slice::from_raw_parts_mut(room, n)
        };
        return team.run(Broadcast::in_place(root, data), Blocking);
    }
    // SAFETY: `dest` is valid for n elements (the caller's guarantee; on a 1.5 root it
    // holds the source already).
    let data = unsafe { slice_mut(dest, n) };
    team.run(Broadcast::in_place(root, data), Blocking)
}

/// `collect`: every member's `nelems` (which may differ) concatenated in member order.
///
/// # Safety
/// Buffers as the specification requires.
pub(crate) unsafe fn collect<T: Pod>(
    call: &str,
    team: &Team<'static>,
    dest: *mut T,
    source: *const T,
    nelems: usize,
) {
    let n = team.size();
    let mut counts = vec![0u64; n];
    check(
        call,
        team.run(Allgather::new(&[nelems as u64]).to(&mut counts), Blocking),
    );
    let counts: Vec<usize> = counts.iter().map(|&c| c as usize).collect();
    // SAFETY: the caller passes a source valid for nelems elements.
    let mine = unsafe { slice(source, nelems) };
    let src: Vec<T> = (0..n).flat_map(|_| mine.iter().copied()).collect();
    let total: usize = counts.iter().sum();
    // SAFETY: the caller passes a destination valid for the total.
    let out = unsafe { slice_mut(dest, total) };
    check(
        call,
        team.run(
            Exchange::varying(&src, &vec![nelems; n], &counts).to(out),
            Blocking,
        ),
    );
}

/// `fcollect`: every member's `nelems` concatenated in member order.
///
/// # Safety
/// Buffers as the specification requires.
pub(crate) unsafe fn fcollect<T: Pod>(
    call: &str,
    team: &Team<'static>,
    dest: *mut T,
    source: *const T,
    nelems: usize,
) {
    // SAFETY: the caller passes buffers of nelems and size × nelems elements.
    let r = unsafe {
        with_buffers(source, nelems, dest, nelems * team.size(), |s, d| {
            team.run(Allgather::new(s).to(d), Blocking)
        })
    };
    check(call, r);
}

/// `alltoall`: block `j` of `source` to member `j`'s block `i` of `dest`. As for
/// [`broadcast`], every `dest` is ready before any PE enters (the caller's duty), so each
/// PE puts its blocks straight into the others' symmetric destinations (the team's
/// single-address form, as the layer's teams synchronise it) and returns once every block
/// of its own `dest` has arrived. `sym` is as for [`broadcast`].
///
/// # Safety
/// Buffers as the specification requires.
#[inline(always)]
pub(crate) unsafe fn alltoall<T: Pod>(
    call: &str,
    sym: &Symmetric,
    team: &Team<'static>,
    dest: *mut T,
    source: *const T,
    nelems: usize,
) {
    let total = nelems * team.size();
    let r = with_symmetric(team, sym.own(call, dest.cast_const(), total), |dsts| {
        if overlap(source, total, dest.cast_const(), total) {
            // SAFETY: the caller passes a source of size × nelems elements; the copy is
            // read while the destination is written.
            let copy = unsafe { slice(source, total) }.to_vec();
            team.run(Exchange::new(&copy).to_symmetric(dsts), Blocking)
        } else {
            // SAFETY: as the caller guarantees; the source is not written by the call.
            team.run(
                Exchange::new(unsafe { slice(source, total) }).to_symmetric(dsts),
                Blocking,
            )
        }
    });
    check(call, r);
}

/// `alltoalls`: as `alltoall` with elements `sst` apart in `source` and `dst` apart in
/// `dest`.
///
/// # Safety
/// Buffers as the specification requires.
pub(crate) unsafe fn alltoalls<T: Pod>(
    call: &str,
    team: &Team<'static>,
    dest: *mut T,
    source: *const T,
    dst: isize,
    sst: isize,
    nelems: usize,
) {
    if dst < 1 || sst < 1 {
        fatal(
            call,
            format!("strides must be at least 1 (dst {dst}, sst {sst})"),
        );
    }
    let (n, dst, sst) = (team.size(), dst as usize, sst as usize);
    // SAFETY: the caller passes a strided source of n blocks of nelems elements.
    let packed: Vec<T> = (0..n * nelems)
        .map(|k| unsafe { *source.add(k * sst) })
        .collect();
    let mut out = vec![T::zeroed(); n * nelems];
    check(
        call,
        team.run(Exchange::new(&packed).to(&mut out), Blocking),
    );
    for (k, v) in out.into_iter().enumerate() {
        // SAFETY: the caller passes a strided destination of n blocks.
        unsafe { *dest.add(k * dst) = v };
    }
}

macro_rules! sized_collectives {
    ($($bits:literal => $t:ty: $bcast:ident, $collect:ident, $fcollect:ident, $alltoall:ident, $alltoalls:ident;)*) => {$(
        /// `shmem_broadcast` of 32- or 64-bit elements over an active set (the root's
        /// `dest` is left alone, as 1.4 says).
        ///
        /// # Safety
        /// Buffers as the specification requires.
        #[export_name = concat!("p", stringify!($bcast))]
        pub unsafe extern "C" fn $bcast(
            dest: *mut c_void, source: *const c_void, nelems: usize, root: c_int,
            start: c_int, log_stride: c_int, size: c_int, _psync: *mut c_long,
        ) {
            const CALL: &str = stringify!($bcast);
            on_active_set(CALL, start, log_stride, size, |s, team| {
                // SAFETY: as the caller guarantees.
                unsafe { broadcast::<$t>(CALL, s.sym, team, dest.cast(), source.cast(), nelems, root, false) }
            })
        }

        /// `shmem_collect` over an active set.
        ///
        /// # Safety
        /// Buffers as the specification requires.
        #[export_name = concat!("p", stringify!($collect))]
        pub unsafe extern "C" fn $collect(
            dest: *mut c_void, source: *const c_void, nelems: usize,
            start: c_int, log_stride: c_int, size: c_int, _psync: *mut c_long,
        ) {
            const CALL: &str = stringify!($collect);
            on_active_set(CALL, start, log_stride, size, |_, team| {
                // SAFETY: as the caller guarantees.
                unsafe { collect::<$t>(CALL, team, dest.cast(), source.cast(), nelems) }
            })
        }

        /// `shmem_fcollect` over an active set.
        ///
        /// # Safety
        /// Buffers as the specification requires.
        #[export_name = concat!("p", stringify!($fcollect))]
        pub unsafe extern "C" fn $fcollect(
            dest: *mut c_void, source: *const c_void, nelems: usize,
            start: c_int, log_stride: c_int, size: c_int, _psync: *mut c_long,
        ) {
            const CALL: &str = stringify!($fcollect);
            on_active_set(CALL, start, log_stride, size, |_, team| {
                // SAFETY: as the caller guarantees.
                unsafe { fcollect::<$t>(CALL, team, dest.cast(), source.cast(), nelems) }
            })
        }

        /// `shmem_alltoall` over an active set.
        ///
        /// # Safety
        /// Buffers as the specification requires.
        #[export_name = concat!("p", stringify!($alltoall))]
        pub unsafe extern "C" fn $alltoall(
            dest: *mut c_void, source: *const c_void, nelems: usize,
            start: c_int, log_stride: c_int, size: c_int, _psync: *mut c_long,
        ) {
            const CALL: &str = stringify!($alltoall);
            on_active_set(CALL, start, log_stride, size, |s, team| {
                // SAFETY: as the caller guarantees.
                unsafe { alltoall::<$t>(CALL, s.sym, team, dest.cast(), source.cast(), nelems) }
            })
        }

        /// `shmem_alltoalls` over an active set.
        ///
        /// # Safety
        /// Buffers as the specification requires.
        #[export_name = concat!("p", stringify!($alltoalls))]
        pub unsafe extern "C" fn $alltoalls(
            dest: *mut c_void, source: *const c_void, dst: isize, sst: isize, nelems: usize,
            start: c_int, log_stride: c_int, size: c_int, _psync: *mut c_long,
        ) {
            const CALL: &str = stringify!($alltoalls);
            on_active_set(CALL, start, log_stride, size, |_, team| {
                // SAFETY: as the caller guarantees.
                unsafe { alltoalls::<$t>(CALL, team, dest.cast(), source.cast(), dst, sst, nelems) }
            })
        }
    )*};
}
sized_collectives! {
    32 => u32: shmem_broadcast32, shmem_collect32, shmem_fcollect32, shmem_alltoall32, shmem_alltoalls32;
    64 => u64: shmem_broadcast64, shmem_collect64, shmem_fcollect64, shmem_alltoall64, shmem_alltoalls64;
}

/// The operation of a `_to_all` reduction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReduceOp {
    And,
    Or,
    Xor,
    Max,
    Min,
    Sum,
    Prod,
}

/// Element types of the `_to_all` reductions: how a team reduces them.
pub(crate) trait ToAll: Pod {
    fn allreduce(
        team: &Team<'static>,
        op: ReduceOp,
        src: &[Self],
        dst: &mut [Self],
    ) -> tessera::Result<()>;
    /// The prefix sum over `team` (OpenSHMEM 1.6 `sum_inscan`/`sum_exscan`); an exclusive
    /// one leaves zeros on the team's first PE.
    fn sum_scan(
        team: &Team<'static>,
        exclusive: bool,
        src: &[Self],
        dst: &mut [Self],
    ) -> tessera::Result<()>;
}

fn builtin(op: ReduceOp) -> Op {
    match op {
        ReduceOp::And => Op::BitAnd,
        ReduceOp::Or => Op::BitOr,
        ReduceOp::Xor => Op::BitXor,
        ReduceOp::Max => Op::Max,
        ReduceOp::Min => Op::Min,
        ReduceOp::Sum => Op::Sum,
        ReduceOp::Prod => Op::Prod,
    }
}

macro_rules! builtin_to_all {
    ($($t:ty),*) => {$(
        impl ToAll for $t {
            #[inline(always)]
            fn allreduce(team: &Team<'static>, op: ReduceOp, src: &[Self], dst: &mut [Self]) -> tessera::Result<()> {
                team.run(Allreduce::new(src, builtin(op)).to(dst), Blocking)
            }
            fn sum_scan(team: &Team<'static>, exclusive: bool, src: &[Self], dst: &mut [Self]) -> tessera::Result<()> {
                if exclusive {
                    team.run(Exscan::new(src, Op::Sum).to(dst), Blocking)
                } else {
                    team.run(Scan::new(src, Op::Sum).to(dst), Blocking)
                }
            }
        }
    )*};
}
builtin_to_all!(i8, i16, i32, i64, isize, u8, u16, u32, u64, usize, f32, f64);

extern "C" {
    /// `src/longdouble.c`: `acc[i] = acc[i] op other[i]` on `long double`.
    fn tessera_longdouble_reduce(
        op: c_int,
        acc: *mut LongDouble,
        other: *const LongDouble,
        n: usize,
    );
}

impl ToAll for LongDouble {
    fn allreduce(
        team: &Team<'static>,
        op: ReduceOp,
        src: &[Self],
        dst: &mut [Self],
    ) -> tessera::Result<()> {
        let code = match op {
            ReduceOp::Max => 0,
            ReduceOp::Min => 1,
            ReduceOp::Sum => 2,
            _ => 3,
        };
        team.run(
            Allreduce::with(src, |acc: &mut [LongDouble], other: &[LongDouble]| {
                // SAFETY: both slices hold `acc.len()` long doubles (the team checks lengths).
                unsafe {
                    tessera_longdouble_reduce(code, acc.as_mut_ptr(), other.as_ptr(), acc.len())
                };
                Ok(())
            })
            .to(dst),
            Blocking,
        )
    }
    fn sum_scan(
        team: &Team<'static>,
        exclusive: bool,
        src: &[Self],
        dst: &mut [Self],
    ) -> tessera::Result<()> {
        let sum = |acc: &mut [LongDouble], other: &[LongDouble]| {
            // SAFETY: both slices hold `acc.len()` long doubles (the team checks lengths);
            // 2 is the sum.
            unsafe { tessera_longdouble_reduce(2, acc.as_mut_ptr(), other.as_ptr(), acc.len()) };
            Ok(())
        };
        if exclusive {
            team.run(Exscan::with(src, sum).to(dst), Blocking)
        } else {
            team.run(Scan::with(src, sum).to(dst), Blocking)
        }
    }
}

macro_rules! complex_to_all {
    ($($t:ty),*) => {$(
        impl ToAll for $t {
            fn allreduce(team: &Team<'static>, op: ReduceOp, src: &[Self], dst: &mut [Self]) -> tessera::Result<()> {
                let prod = op == ReduceOp::Prod;
                team.run(Allreduce::with(src, move |acc: &mut [$t], other: &[$t]| {
                    for (a, b) in acc.iter_mut().zip(other) {
                        *a = if prod {
                            [a[0] * b[0] - a[1] * b[1], a[0] * b[1] + a[1] * b[0]]
                        } else {
                            [a[0] + b[0], a[1] + b[1]]
                        };
                    }
                    Ok(())
                }).to(dst), Blocking)
            }
            fn sum_scan(team: &Team<'static>, exclusive: bool, src: &[Self], dst: &mut [Self]) -> tessera::Result<()> {
                let sum = |acc: &mut [$t], other: &[$t]| {
                    for (a, b) in acc.iter_mut().zip(other) {
                        *a = [a[0] + b[0], a[1] + b[1]];
                    }
                    Ok(())
                };
                if exclusive {
                    team.run(Exscan::with(src, sum).to(dst), Blocking)
                } else {
                    team.run(Scan::with(src, sum).to(dst), Blocking)
                }
            }
        }
    )*};
}
complex_to_all!(ComplexF, ComplexD);

/// A prefix sum over `team` (`source` and `dest` may be the same array): OpenSHMEM 1.6's
/// `shmem_TYPE_sum_inscan` and `_exscan`.
///
/// # Safety
/// `source` and `dest` valid for `nelems` elements.
pub(crate) unsafe fn sum_scan<T: ToAll>(
    call: &str,
    exclusive: bool,
    team: &Team<'static>,
    dest: *mut T,
    source: *const T,
    nelems: usize,
) {
    // SAFETY: the caller passes a source and a destination of nelems elements (which may
    // be the same array: with_buffers copies the source then).
    let r = unsafe {
        with_buffers(source, nelems, dest, nelems, |s, d| {
            T::sum_scan(team, exclusive, s, d)
        })
    };
    check(call, r);
}

/// A `_to_all` reduction over an active set (`source` and `dest` may be the same array).
///
/// # Safety
/// `source` and `dest` valid for `nreduce` elements.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn to_all<T: ToAll>(
    call: &str,
    op: ReduceOp,
    dest: *mut T,
    source: *const T,
    nreduce: c_int,
    start: c_int,
    log_stride: c_int,
    size: c_int,
) {
    if nreduce < 0 {
        fatal(call, format!("nreduce {nreduce} is negative"));
    }
    on_active_set(call, start, log_stride, size, |_, team| {
        // SAFETY: as the caller guarantees.
        unsafe { reduce(call, op, team, dest, source, nreduce as usize) }
    })
}

/// A reduction over `team` (`source` and `dest` may be the same array): 1.5's
/// `shmem_TYPE_OP_reduce`, and 1.4's `_to_all` on an active set's team.
///
/// # Safety
/// `source` and `dest` valid for `nreduce` elements.
#[inline(always)]
pub(crate) unsafe fn reduce<T: ToAll>(
    call: &str,
    op: ReduceOp,
    team: &Team<'static>,
    dest: *mut T,
    source: *const T,
    nreduce: usize,
) {
    // SAFETY: the caller passes a source and a destination of nreduce elements (which may
    // be the same array: with_buffers copies the source then).
    let r = unsafe {
        with_buffers(source, nreduce, dest, nreduce, |s, d| {
            T::allreduce(team, op, s, d)
        })
    };
    check(call, r);
}
