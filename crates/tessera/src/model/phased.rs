//! Phased arrays: a collectively allocated array whose parts ranks borrow as plain Rust
//! slices, safely, because the array itself runs the synchronisation between the phases
//! in which each kind of borrow is allowed.
//!
//! A [`PhasedArray`] has a part of the same length on every rank of a team, and is in one
//! of three phases, the same on every rank (every change is a collective call):
//!
//! | phase | who touches a rank's part | how | entered by |
//! |---|---|---|---|
//! | own | that rank alone | [`PhasedArray::own`]: `&mut [T]` | [`new`](PhasedArray::new), [`Exchange::finish`] or [`finish_filled`](Exchange::finish_filled), [`reclaim`](PhasedArray::reclaim) |
//! | shared | every rank, reading | [`PhasedArray::peer`]: `&[T]` or a copy | [`share`](PhasedArray::share) |
//! | exchange | the senders, writing disjoint blocks or putting | [`Exchange::blocks`], [`Exchange::put`] | [`exchange`](PhasedArray::exchange), [`exchange_slots`](PhasedArray::exchange_slots) |
//!
//! Why no rank can see another's borrow (the argument the kernels used to make by hand in
//! `unsafe` blocks):
//! - Every phase change takes `&mut self`, so this rank's slices from the previous phase
//!   have been dropped; and it is a collective that completes on no rank before every rank
//!   has entered it (a barrier, an allgather, or a wait for every sender's signal), so when
//!   any rank is in the new phase, no rank still holds a slice from the old one.
//! - The array's global address never leaves this module, so nothing but these methods
//!   reaches its memory.
//! - In an exchange, the senders' blocks of a receiver's part are laid out from the
//!   allgathered counts (sender 0's block first, then sender 1's, ...), or as slots of one
//!   length in sender order, so two senders' blocks never overlap; a block is the
//!   receiver's memory where it is mapped here, or a staging buffer sent with one
//!   signalling put at [`Exchange::finish`] (or [`Exchange::finish_filled`]).
//!
//! This module must never hand out the global address or a slice outside its phase.
//!
//! ```
//! use tessera::{PhasedArray, Team};
//! tessera::Job::threads(3).run(|ctx| {
//!     let team = Team::world(ctx)?;
//!     let mut a = PhasedArray::<u32>::new(&team, 3)?;
//!     // Each rank sends one element to every rank, tagged with its own rank.
//!     let mut x = a.exchange(&[1, 1, 1])?;
//!     for block in x.blocks()? {
//!         block[0] = ctx.rank() as u32;
//!     }
//!     x.finish()?;
//!     // Own phase again: the senders' blocks arrived in rank order.
//!     assert_eq!(a.own()?, &[0, 1, 2]);
//!     Ok(())
//! }).unwrap();
//! ```

use crate::coll::{Allgather, Barrier};
use std::borrow::Cow;
use std::ops::Range;

use bytemuck::Pod;

use crate::core::gptr::GlobalPtr;
use crate::core::sync::Semaphore;
use crate::error::CoreError;
use crate::model::team::Team;
use crate::{Blocking, Result, Signal, Strided, StridedMut};

/// Which borrows a [`PhasedArray`] allows now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Each rank may borrow its own part mutably.
    Own,
    /// Every rank may read every part.
    Shared,
    /// An [`Exchange`] was dropped before [`Exchange::finish`]: the ranks no longer agree
    /// on the phase, and every borrow is refused.
    Abandoned,
}

/// A collectively allocated array of `len` elements per rank, borrowed by phase (see the
/// module documentation).
pub struct PhasedArray<'t, T: Pod> {
    team: &'t Team<'t>,
    /// This rank's part; `.on(r)` is rank r's (every part is at the same offset).
    base: GlobalPtr<T>,
    len: usize,
    /// Counts the senders that have finished an exchange into this rank's part.
    arrived: Semaphore,
    phase: Phase,
}

impl<'t, T: Pod> PhasedArray<'t, T> {
    /// Allocate `len` elements on every rank of `team` (a collective call, which every
    /// member makes with the same `len`), in the own phase. The contents start as the
    /// allocator leaves them; write them before reading.
    pub fn new(team: &'t Team<'t>, len: usize) -> Result<Self> {
        let ctx = team.context();
        let base = ctx.alloc_collective::<T>(len)?;
        // Collective over the world, ending with a barrier: every member holds the array
        // before any of them exchanges.
        let arrived = ctx.semaphore_collective()?;
        Ok(PhasedArray {
            team,
            base,
            len,
            arrived,
            phase: Phase::Own,
        })
    }

    /// Elements per rank.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether each rank's part is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The team the array is spread over.
    pub(crate) fn team(&self) -> &'t Team<'t> {
        self.team
    }

    /// The current phase.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    fn expect(&self, want: Phase, call: &'static str) -> Result<()> {
        if self.phase == want {
            return Ok(());
        }
        let how = match (self.phase, want) {
            (Phase::Abandoned, _) => {
                "an exchange was dropped without Exchange::finish, so the ranks no longer agree \
                 on the phase; finish every exchange"
            }
            (Phase::Shared, Phase::Own) => {
                "the array is shared; call reclaim() (a collective) to return to the own phase"
            }
            _ => "the array is in its own phase; call share() (a collective) first",
        };
        Err(CoreError::OutOfOrder {
            call,
            why: format!("PhasedArray::{call}: {how}"),
        }
        .into())
    }

    /// This rank's part, mutably: only in the own phase.
    pub fn own(&mut self) -> Result<&mut [T]> {
        self.expect(Phase::Own, "own")?;
        let ctx = self.team.context();
        // SAFETY: in the own phase no other rank reads or writes this part (module
        // documentation: every phase change is a collective that takes `&mut self`, and the
        // address never leaves this module); the returned slice borrows `self` mutably, so
        // this rank makes no other reference to it and cannot change phase while it lives.
        let part = unsafe { ctx.local_slice_mut(self.base, self.len)? };
        Ok(part.expect("a rank's own segment is always mapped"))
    }

    /// Own phase to shared: every rank's writes to its own part become visible to all (a
    /// barrier of the team).
    pub fn share(&mut self) -> Result<()> {
        self.expect(Phase::Own, "share")?;
        self.team.run(Barrier, Blocking)?;
        self.phase = Phase::Shared;
        Ok(())
    }

    /// Shared phase back to own: every rank has finished reading (a barrier of the team).
    pub fn reclaim(&mut self) -> Result<()> {
        self.expect(Phase::Shared, "reclaim")?;
        self.team.run(Barrier, Blocking)?;
        self.phase = Phase::Own;
        Ok(())
    }

    /// Elements `range` of team rank `rank`'s part, in the shared phase: borrowed where
    /// that part is mapped here, else fetched.
    pub fn peer(&self, rank: usize, range: Range<usize>) -> Result<Cow<'_, [T]>> {
        self.expect(Phase::Shared, "peer")?;
        if range.start > range.end || range.end > self.len || rank >= self.team.size() {
            return Err(CoreError::BadArgument {
                call: "PhasedArray::peer",
                argument: "range",
                why: format!(
                    "PhasedArray::peer: elements {range:?} of rank {rank}, but the team has {} \
                 ranks of {} elements",
                    self.team.size(),
                    self.len
                ),
            }
            .into());
        }
        let ctx = self.team.context();
        let at = self.base.on(self.team.world_rank(rank)).add(range.start);
        // SAFETY: in the shared phase nobody writes any part (module documentation), and
        // the slice borrows `self`, so this rank cannot change phase while it lives.
        match unsafe { ctx.local_slice(at, range.len())? } {
            Some(part) => Ok(Cow::Borrowed(part)),
            None => {
                let mut copy = vec![T::zeroed(); range.len()];
                ctx.get(at, &mut copy, Blocking)?;
                Ok(Cow::Owned(copy))
            }
        }
    }

    /// A strided read of team rank `rank`'s part in the shared phase, as
    /// [`Context::get`](crate::Context::get) of a [`StridedMut`] shape from element `offset` of that
    /// part with the same strides and counts (for a rectangle of a column-major local
    /// matrix: one run per column). The whole region must lie in the part.
    pub fn peer_strided(
        &self,
        rank: usize,
        offset: usize,
        src_strides: &[usize],
        dst: &mut [T],
        dst_strides: &[usize],
        counts: &[usize],
    ) -> Result<()> {
        self.expect(Phase::Shared, "peer_strided")?;
        let extent = strided_extent(src_strides, counts);
        if rank >= self.team.size() || offset.checked_add(extent).is_none_or(|e| e > self.len) {
            return Err(CoreError::BadArgument {
                call: "PhasedArray::peer_strided",
                argument: "offset",
                why: format!(
                "PhasedArray::peer_strided: {extent} elements from {offset} of rank {rank}, but \
                 the team has {} ranks of {} elements",
                self.team.size(),
                self.len
            ),
            }
            .into());
        }
        let at = self.base.on(self.team.world_rank(rank)).add(offset);
        // In the shared phase nobody writes any part, so a get reads settled data.
        self.team.context().get(
            at,
            StridedMut {
                local: dst,
                local_strides: dst_strides,
                remote_strides: src_strides,
                counts,
            },
            Blocking,
        )
    }

    /// Own phase to exchange: this rank will send `counts[d]` elements to each team rank
    /// `d` (a collective: every rank passes its counts). Each receiver's part takes its
    /// senders' blocks in rank order from its start; it is an error for them to need more
    /// than [`len`](PhasedArray::len) elements.
    pub fn exchange(&mut self, counts: &[usize]) -> Result<Exchange<'_, 't, T>> {
        self.expect(Phase::Own, "exchange")?;
        let p = self.team.size();
        if counts.len() != p {
            return Err(CoreError::BadArgument {
                call: "PhasedArray::exchange",
                argument: "counts",
                why: format!(
                    "PhasedArray::exchange: {} counts for a team of {p} ranks; pass one per rank",
                    counts.len()
                ),
            }
            .into());
        }
        // Every rank's counts to every rank. An allgather completes on no rank before all
        // have entered it, so no rank still holds its own part when the writes start.
        let mine: Vec<u64> = counts.iter().map(|&c| c as u64).collect();
        let mut all = vec![0u64; p * p];
        self.team
            .run(Allgather::new(&mine).to(&mut all), Blocking)?;
        let me = self.team.rank();
        let mut offsets = vec![0usize; p];
        for (d, offset) in offsets.iter_mut().enumerate() {
            let column =
                |senders: Range<usize>| -> usize { senders.map(|s| all[s * p + d] as usize).sum() };
            let total = column(0..p);
            if total > self.len {
                return Err(CoreError::BadArgument {
                    call: "PhasedArray::exchange",
                    argument: "counts",
                    why: format!(
                    "PhasedArray::exchange: rank {d} would receive {total} elements, more than \
                     its {} (allocate a longer array)",
                    self.len
                ),
                }
                .into());
            }
            *offset = column(0..me);
        }
        self.phase = Phase::Abandoned; // until finish
        Ok(Exchange {
            array: self,
            counts: counts.to_vec(),
            offsets,
            peers: (0..p).collect(),
            staged: Vec::new(),
            handed_out: false,
            slot: None,
        })
    }

    /// Own phase to an exchange into fixed slots, for senders that learn how many elements
    /// go to each rank only while writing them: this rank's block in every receiver's part
    /// is `capacity` elements at `capacity × this rank`, to fill from its start with up to
    /// `capacity` elements; [`Exchange::finish_filled`] says how many were written and
    /// tells every rank what every sender wrote. A collective (a barrier); the team's
    /// blocks must fit the part (`capacity × team size ≤ len`).
    ///
    /// ```
    /// use tessera::{PhasedArray, Team};
    /// tessera::Job::threads(2).run(|ctx| {
    ///     let team = Team::world(ctx)?;
    ///     let me = team.rank();
    ///     let mut a = PhasedArray::<u32>::new(&team, 8)?;
    ///     // Rank r sends r + 1 copies of its rank to rank 0 and none to rank 1.
    ///     let mut x = a.exchange_slots(4)?;
    ///     x.blocks()?[0][..me + 1].fill(me as u32);
    ///     let filled = x.finish_filled(&[me + 1, 0])?;
    ///     // Row s: what sender s wrote to each rank.
    ///     assert_eq!(filled, vec![1, 0, 2, 0]);
    ///     if me == 0 {
    ///         assert_eq!(&a.own()?[..1], &[0]);
    ///         assert_eq!(&a.own()?[4..6], &[1, 1]);
    ///     }
    ///     Ok(())
    /// }).unwrap();
    /// ```
    pub fn exchange_slots(&mut self, capacity: usize) -> Result<Exchange<'_, 't, T>> {
        self.expect(Phase::Own, "exchange_slots")?;
        let p = self.team.size();
        if capacity.checked_mul(p).is_none_or(|all| all > self.len) {
            return Err(CoreError::BadArgument {
                call: "PhasedArray::exchange_slots",
                argument: "capacity",
                why: format!(
                    "PhasedArray::exchange_slots: {p} slots of {capacity} elements do not fit \
                     a part of {} (allocate a longer array or pass a smaller capacity)",
                    self.len
                ),
            }
            .into());
        }
        // Every rank has dropped its own-phase borrows once the barrier completes.
        self.team.run(Barrier, Blocking)?;
        let me = self.team.rank();
        self.phase = Phase::Abandoned; // until finish_filled
        Ok(Exchange {
            array: self,
            counts: vec![capacity; p],
            offsets: vec![capacity * me; p],
            peers: (0..p).collect(),
            staged: Vec::new(),
            handed_out: false,
            slot: Some(capacity),
        })
    }

    /// Own phase to an exchange of puts among the members of `group` only: each member
    /// may [`put`](Exchange::put) anywhere in another member's part, and nobody else's
    /// part is touched (for transposes within a row or column of a process grid, where a
    /// whole-team exchange would synchronise ranks that share no data). A collective over
    /// `group` (a barrier), which must be a team of ranks all in the array's team; ranks
    /// outside it keep their phase. [`Exchange::blocks`] hands out only empty blocks here.
    ///
    /// Why this is as safe as [`exchange`](PhasedArray::exchange): a member's part is
    /// written only by members, after every member has entered the exchange (the barrier),
    /// and read by its owner only after every member's signal; a rank belongs to one such
    /// exchange at a time (it takes `&mut self`); and the shared phase, which lets any rank
    /// read any part, is entered and left by the whole team, so no part being written here
    /// is being read by a rank in the shared phase.
    ///
    /// ```
    /// use tessera::{PhasedArray, Team};
    /// tessera::Job::threads(4).run(|ctx| {
    ///     let team = Team::world(ctx)?;
    ///     // Pairs {0, 1} and {2, 3}: each rank writes its rank into its partner's part.
    ///     let pair = team.split(Some(ctx.rank() as u32 / 2), 0)?.expect("in a pair");
    ///     let mut a = PhasedArray::<u32>::new(&team, 1)?;
    ///     let mut x = a.exchange_within(&pair)?;
    ///     let partner = pair.world_rank(1 - pair.rank());
    ///     x.put(partner, 0, &[ctx.rank() as u32])?;
    ///     x.finish()?;
    ///     assert_eq!(a.own()?[0] as usize, ctx.rank() ^ 1);
    ///     Ok(())
    /// }).unwrap();
    /// ```
    pub fn exchange_within(&mut self, group: &Team<'_>) -> Result<Exchange<'_, 't, T>> {
        self.expect(Phase::Own, "exchange_within")?;
        let mut peers = Vec::with_capacity(group.size());
        for g in 0..group.size() {
            let world = group.world_rank(g);
            match self.team.team_rank(world) {
                Some(r) => peers.push(r),
                None => {
                    return Err(CoreError::BadArgument { call: "PhasedArray::exchange_within", argument: "group", why: format!(
                        "PhasedArray::exchange_within: world rank {world} is in the group but                          not in the array's team; pass a team split from the array's team"
                    ) }
                    .into())
                }
            }
        }
        if !peers.contains(&self.team.rank()) {
            return Err(CoreError::BadArgument {
                call: "PhasedArray::exchange_within",
                argument: "group",
                why: "PhasedArray::exchange_within: this rank is not in the group".to_string(),
            }
            .into());
        }
        // Every member has dropped its own-phase borrows once the barrier completes.
        group.run(Barrier, Blocking)?;
        peers.sort_unstable();
        let p = self.team.size();
        self.phase = Phase::Abandoned; // until finish
        Ok(Exchange {
            array: self,
            counts: vec![0; p],
            offsets: vec![0; p],
            peers,
            staged: Vec::new(),
            handed_out: false,
            slot: None,
        })
    }
}

/// This rank's writes into the other ranks' parts of a [`PhasedArray`] during one exchange;
/// [`Exchange::finish`] delivers them and returns the array to the own phase.
pub struct Exchange<'a, 't, T: Pod> {
    array: &'a mut PhasedArray<'t, T>,
    counts: Vec<usize>,
    /// Where this rank's block starts in each receiver's part.
    offsets: Vec<usize>,
    /// The team ranks taking part, ascending: every rank for
    /// [`exchange`](PhasedArray::exchange), the group's for
    /// [`exchange_within`](PhasedArray::exchange_within). Only their parts are written,
    /// and each signals every other at the finish.
    peers: Vec<usize>,
    /// Receivers whose part is not mapped here, with the block to send them.
    staged: Vec<(usize, Vec<T>)>,
    /// Whether [`Exchange::blocks`] was called.
    handed_out: bool,
    /// The slot length of an [`exchange_slots`](PhasedArray::exchange_slots), whose blocks
    /// are filled in part and delivered by [`Exchange::finish_filled`].
    slot: Option<usize>,
}

impl<T: Pod> Exchange<'_, '_, T> {
    /// This rank's block in every receiver's part (`counts[d]` elements for team rank
    /// `d`), to fill in any order: the receiver's memory where it is mapped here, else a
    /// staging buffer sent at [`finish`](Exchange::finish). Call it once per exchange.
    pub fn blocks(&mut self) -> Result<Vec<&mut [T]>> {
        if std::mem::replace(&mut self.handed_out, true) {
            return Err(CoreError::OutOfOrder {
                call: "Exchange::blocks",
                why: "Exchange::blocks: called twice in one exchange".to_string(),
            }
            .into());
        }
        let team = self.array.team;
        let ctx = team.context();
        let mut mapped = Vec::with_capacity(self.counts.len());
        for (d, (&n, &offset)) in self.counts.iter().zip(&self.offsets).enumerate() {
            if n == 0 {
                mapped.push(Some(&mut [][..]));
                continue;
            }
            let at = self.array.base.on(team.world_rank(d)).add(offset);
            // SAFETY: in the exchange phase only this rank writes these `n` elements of
            // rank d's part (the blocks are laid out from the allgathered counts, or are
            // slots of `n` at n × sender, so they are disjoint, and `exchange` or
            // `exchange_slots` checked they fit), rank d reads them only after
            // this rank's signal at `finish` or `finish_filled`, and the slices borrow
            // this exchange, which either consumes.
            let block = unsafe { ctx.local_slice_mut(at, n)? };
            match block {
                Some(block) => {
                    // The sender stores straight into the receiver's memory: counted as
                    // one put of the block (statistics; a slot counts what was written
                    // at `finish_filled`).
                    if self.slot.is_none() {
                        let bytes = std::mem::size_of_val::<[T]>(block);
                        ctx.count(crate::Traffic::Put, at.rank(), bytes);
                    }
                    mapped.push(Some(block))
                }
                None => {
                    mapped.push(None);
                    self.staged.push((d, vec![T::zeroed(); n]));
                }
            }
        }
        let mut staged = self.staged.iter_mut();
        Ok(mapped
            .into_iter()
            .map(|block| {
                block.unwrap_or_else(|| {
                    &mut staged
                        .next()
                        .expect("one staging buffer per unmapped rank")
                        .1[..]
                })
            })
            .collect())
    }

    /// Put `src` at element `offset` of team rank `dest`'s part, anywhere in it (for
    /// scattered layouts such as a transpose's strided pieces). Puts from two senders to
    /// the same elements leave one sender's values; which is unspecified.
    pub fn put(&mut self, dest: usize, offset: usize, src: &[T]) -> Result<()> {
        let at = self.target(dest, offset, src.len())?;
        self.array.team.context().put(at, src, Blocking)
    }

    /// A strided put into team rank `dest`'s part at element `offset`, as
    /// [`Context::put`](crate::Context::put) of a [`Strided`] shape with the same strides and
    /// counts; the whole region must lie in the part.
    pub fn put_strided(
        &mut self,
        dest: usize,
        offset: usize,
        dst_strides: &[usize],
        src: &[T],
        src_strides: &[usize],
        count: &[usize],
    ) -> Result<()> {
        let extent = strided_extent(dst_strides, count);
        let at = self.target(dest, offset, extent)?;
        self.array.team.context().put(
            at,
            Strided {
                local: src,
                local_strides: src_strides,
                remote_strides: dst_strides,
                counts: count,
            },
            Blocking,
        )
    }

    fn target(&self, dest: usize, offset: usize, n: usize) -> Result<GlobalPtr<T>> {
        let team = self.array.team;
        if self.peers.binary_search(&dest).is_err() && dest < team.size() {
            return Err(CoreError::BadArgument {
                call: "Exchange::put",
                argument: "dest",
                why: format!(
                    "Exchange::put: rank {dest} is not in this exchange's group; put only to the \
                 group passed to exchange_within"
                ),
            }
            .into());
        }
        if dest >= team.size() || offset.checked_add(n).is_none_or(|end| end > self.array.len) {
            return Err(CoreError::BadArgument {
                call: "Exchange::put",
                argument: "offset",
                why: format!(
                    "Exchange::put: {n} elements at {offset} of rank {dest}, but the team has {} \
                 ranks of {} elements",
                    team.size(),
                    self.array.len
                ),
            }
            .into());
        }
        Ok(self.array.base.on(team.world_rank(dest)).add(offset))
    }

    /// Deliver: a signal to every receiver (after the direct stores and puts, with release
    /// ordering, or carried by the staged block's signalling put), then wait until every
    /// sender has signalled this rank. The array is then in the own phase, holding what the
    /// senders wrote.
    pub fn finish(self) -> Result<()> {
        if self.slot.is_some() {
            return Err(CoreError::OutOfOrder {
                call: "Exchange::finish",
                why: "Exchange::finish: an exchange into slots ends with finish_filled, which \
                      says how much of each slot was written"
                    .to_string(),
            }
            .into());
        }
        let lengths = self.counts.clone();
        self.deliver(&lengths)
    }

    /// Deliver an exchange into slots ([`PhasedArray::exchange_slots`]): `filled[d]`
    /// elements from the start of this rank's block for team rank `d` were written. As
    /// [`finish`](Exchange::finish), then every rank learns every sender's counts: the
    /// result holds, for each sender `s` in rank order, what it wrote to each rank
    /// (`result[s × size + d]`). Only the written elements of a staged block travel.
    pub fn finish_filled(self, filled: &[usize]) -> Result<Vec<usize>> {
        let team = self.array.team;
        let p = team.size();
        let Some(capacity) = self.slot else {
            return Err(CoreError::OutOfOrder {
                call: "Exchange::finish_filled",
                why: "Exchange::finish_filled: only an exchange into slots (exchange_slots) \
                      ends with it; use finish"
                    .to_string(),
            }
            .into());
        };
        if filled.len() != p || filled.iter().any(|&n| n > capacity) {
            return Err(CoreError::BadArgument {
                call: "Exchange::finish_filled",
                argument: "filled",
                why: format!(
                    "Exchange::finish_filled: {filled:?} for {p} slots of {capacity} elements; \
                     pass one count per rank, none above the capacity"
                ),
            }
            .into());
        }
        let ctx = team.context();
        let mut staged = self.staged.iter().map(|(d, _)| *d).peekable();
        for (d, &n) in filled.iter().enumerate() {
            // Mapped blocks are counted here, as one put of what was written.
            let is_staged = staged.next_if_eq(&d).is_some();
            if n > 0 && !is_staged {
                let bytes = n * std::mem::size_of::<T>();
                ctx.count(crate::Traffic::Put, team.world_rank(d), bytes);
            }
        }
        // Every team rank learns what every sender wrote: the blocks' lengths.
        let mine: Vec<u64> = filled.iter().map(|&n| n as u64).collect();
        self.deliver(filled)?;
        let mut all = vec![0u64; p * p];
        team.run(Allgather::new(&mine).to(&mut all), Blocking)?;
        Ok(all.into_iter().map(|n| n as usize).collect())
    }

    /// Send the first `lengths[d]` elements of every staged block with a signal, signal
    /// every other peer, and wait for every peer's signal.
    fn deliver(self, lengths: &[usize]) -> Result<()> {
        let team = self.array.team;
        let ctx = team.context();
        let mut staged = self.staged.iter().peekable();
        for &d in &self.peers {
            let sem = self.array.arrived.on(team.world_rank(d));
            match staged.next_if(|(s, _)| *s == d) {
                Some((_, block)) if lengths[d] > 0 => {
                    let at = self.array.base.on(team.world_rank(d)).add(self.offsets[d]);
                    ctx.put(at, &block[..lengths[d]], Signal::Post(sem))?;
                }
                _ => sem.post(ctx, 1)?,
            }
        }
        self.array.arrived.wait(ctx, self.peers.len() as u64)?;
        self.array.phase = Phase::Own;
        Ok(())
    }
}

/// One past the last element a strided region with these strides and counts touches
/// (nothing for an empty box; a mismatched shape is left for the transfer to refuse).
fn strided_extent(strides: &[usize], counts: &[usize]) -> usize {
    if counts.contains(&0) || counts.len() != strides.len() {
        return 0;
    }
    1 + counts
        .iter()
        .zip(strides)
        .map(|(&c, &s)| (c - 1).saturating_mul(s))
        .fold(0usize, usize::saturating_add)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Job;

    /// The value sender `s` puts at index `i` of its block for receiver `d`.
    fn tag(s: usize, d: usize, i: usize) -> u64 {
        (s * 1000 + d * 100 + i) as u64
    }

    #[test]
    fn uneven_blocks_arrive_in_sender_order_pass_after_pass() {
        Job::threads(4)
            .run(|ctx| {
                let team = Team::world(ctx)?;
                let (p, me) = (team.size(), team.rank());
                let mut a = PhasedArray::<u64>::new(&team, 64)?;
                for pass in 0..3 {
                    // Sender s sends (s + d + pass) % 4 elements to d: empty blocks too.
                    let counts: Vec<usize> = (0..p).map(|d| (me + d + pass) % 4).collect();
                    let mut x = a.exchange(&counts)?;
                    for (d, block) in x.blocks()?.into_iter().enumerate() {
                        assert_eq!(block.len(), counts[d]);
                        for (i, v) in block.iter_mut().enumerate() {
                            *v = tag(me, d, i);
                        }
                    }
                    x.finish()?;
                    let want: Vec<u64> = (0..p)
                        .flat_map(|s| (0..(s + me + pass) % 4).map(move |i| tag(s, me, i)))
                        .collect();
                    assert_eq!(&a.own()?[..want.len()], &want[..], "pass {pass}");
                }
                Ok(())
            })
            .unwrap();
    }

    #[test]
    fn shared_parts_are_read_by_everyone_then_reclaimed() {
        Job::threads(3)
            .run(|ctx| {
                let team = Team::world(ctx)?;
                let me = team.rank();
                let mut a = PhasedArray::<u32>::new(&team, 5)?;
                for round in 0..2u32 {
                    for (i, v) in a.own()?.iter_mut().enumerate() {
                        *v = 100 * round + 10 * me as u32 + i as u32;
                    }
                    a.share()?;
                    for r in 0..team.size() {
                        let got = a.peer(r, 1..4)?;
                        let want: Vec<u32> =
                            (1..4).map(|i| 100 * round + 10 * r as u32 + i).collect();
                        assert_eq!(&got[..], &want[..]);
                    }
                    a.reclaim()?;
                }
                Ok(())
            })
            .unwrap();
    }

    #[test]
    fn puts_land_anywhere_in_a_part_and_out_of_bounds_is_refused() {
        Job::threads(2)
            .run(|ctx| {
                let team = Team::world(ctx)?;
                let (me, other) = (team.rank(), 1 - team.rank());
                let mut a = PhasedArray::<u16>::new(&team, 8)?;
                a.own()?.fill(0);
                let mut x = a.exchange(&[0, 0])?;
                // Every other element of the peer's part, from a contiguous source.
                x.put_strided(other, 1, &[2], &[7, 7, 7, 7], &[1], &[4])?;
                x.put(other, 0, &[me as u16 + 1])?;
                let past = x.put_strided(other, 2, &[2], &[7, 7, 7, 7], &[1], &[4]);
                assert!(past.is_err(), "a strided put past the part");
                assert!(x.put(other, 8, &[1]).is_err(), "a put past the part");
                x.finish()?;
                assert_eq!(a.own()?, &[other as u16 + 1, 7, 0, 7, 0, 7, 0, 7]);
                Ok(())
            })
            .unwrap();
    }

    #[test]
    fn exchanges_within_rows_and_columns_touch_only_the_group() {
        // A 2 × 2 grid: rows {0, 1}, {2, 3}; columns {0, 2}, {1, 3}. Each round, every rank
        // puts into its row partner's part, then into its column partner's.
        Job::threads(4)
            .run(|ctx| {
                let team = Team::world(ctx)?;
                let me = ctx.rank();
                let row = team.split(Some(me as u32 / 2), 0)?.expect("in a row");
                let column = team.split(Some(me as u32 % 2), 0)?.expect("in a column");
                let mut a = PhasedArray::<u32>::new(&team, 2)?;
                for round in 0..3u32 {
                    a.own()?.fill(u32::MAX);
                    for (slot, group) in [&row, &column].into_iter().enumerate() {
                        let mut x = a.exchange_within(group)?;
                        let partner = group.world_rank(1 - group.rank());
                        let outsider = me ^ 3; // in neither this row nor this column
                        let err = x.put(outsider, 0, &[1]).unwrap_err().to_string();
                        assert!(err.contains("not in this exchange's group"), "{err}");
                        assert!(x.blocks()?.iter().all(|b| b.is_empty()));
                        x.put(partner, slot, &[100 * round + me as u32])?;
                        x.finish()?;
                    }
                    let want = [100 * round + (me ^ 1) as u32, 100 * round + (me ^ 2) as u32];
                    assert_eq!(a.own()?, &want, "rank {me}, round {round}");
                }
                Ok(())
            })
            .unwrap();
    }

    #[test]
    fn slots_filled_in_part_arrive_with_every_senders_counts() {
        Job::threads(3)
            .run(|ctx| {
                let team = Team::world(ctx)?;
                let (p, me) = (team.size(), team.rank());
                let mut a = PhasedArray::<u64>::new(&team, 3 * 5)?;
                for pass in 0..3 {
                    a.own()?.fill(u64::MAX);
                    let mut x = a.exchange_slots(5)?;
                    // Sender s fills (s + d + pass) % 6 elements for d: empty and full too.
                    let filled: Vec<usize> = (0..p).map(|d| ((me + d + pass) % 6).min(5)).collect();
                    for (d, block) in x.blocks()?.into_iter().enumerate() {
                        assert_eq!(block.len(), 5);
                        for (i, v) in block[..filled[d]].iter_mut().enumerate() {
                            *v = tag(me, d, i);
                        }
                    }
                    let all = x.finish_filled(&filled)?;
                    let own = a.own()?;
                    for s in 0..p {
                        let n = ((s + me + pass) % 6).min(5);
                        assert_eq!(all[s * p + me], n, "pass {pass}: sender {s}");
                        let want: Vec<u64> = (0..n).map(|i| tag(s, me, i)).collect();
                        assert_eq!(&own[5 * s..5 * s + n], &want[..], "pass {pass}");
                    }
                }
                // Slots that do not fit, and the wrong way to end each kind of exchange.
                let err = a.exchange_slots(6).err().unwrap().to_string();
                assert!(err.contains("do not fit"), "{err}");
                let x = a.exchange_slots(1)?;
                let err = x.finish_filled(&[2, 0, 0]).unwrap_err().to_string();
                assert!(err.contains("none above the capacity"), "{err}");
                let mut b = PhasedArray::<u64>::new(&team, 3)?;
                let err = b.exchange_slots(1)?.finish().unwrap_err().to_string();
                assert!(err.contains("finish_filled"), "{err}");
                let mut c = PhasedArray::<u64>::new(&team, 3)?;
                let err = c.exchange(&[0, 0, 0])?.finish_filled(&[0, 0, 0]);
                assert!(err.unwrap_err().to_string().contains("use finish"));
                Ok(())
            })
            .unwrap();
    }

    #[test]
    fn borrows_out_of_phase_are_refused_with_the_way_out() {
        Job::threads(2)
            .run(|ctx| {
                let team = Team::world(ctx)?;
                let mut a = PhasedArray::<u8>::new(&team, 4)?;
                let err = a.peer(0, 0..1).unwrap_err().to_string();
                assert!(err.contains("share()"), "{err}");
                a.share()?;
                let err = a.own().unwrap_err().to_string();
                assert!(err.contains("reclaim()"), "{err}");
                assert!(a.peer(2, 0..1).is_err(), "a rank outside the team");
                a.reclaim()?;
                let err = a.exchange(&[1]).err().unwrap().to_string();
                assert!(err.contains("one per rank"), "{err}");
                // Every rank sends 3 to rank 0: 6 elements into a part of 4.
                let err = a.exchange(&[3, 0]).err().unwrap().to_string();
                assert!(err.contains("rank 0 would receive 6"), "{err}");
                // The failed exchange left the phase unchanged; an abandoned one does not.
                drop(a.exchange(&[1, 1])?);
                let err = a.own().unwrap_err().to_string();
                assert!(err.contains("Exchange::finish"), "{err}");
                Ok(())
            })
            .unwrap();
    }
}
