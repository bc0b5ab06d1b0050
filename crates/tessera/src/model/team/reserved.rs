//! What a team's schedules share between calls: the sequence numbers each pair stream has
//! promised so far, spare scratch buffers and plan lists, and the plans of recent small
//! blocking calls, reused by later calls of the same shape.
//!
//! A blocking collective of a few bytes spent about a sixth of its time writing its rounds
//! (`perf`, 8-byte allreduces at 2 ranks); the rounds depend only on the call's shape
//! (operation, algorithm, root, length, element size, scan kind) and on the team, so a
//! call whose shape was seen lately takes that plan and reserves its sequence numbers
//! again instead of writing the rounds.
//!
//! This module must never move a message or touch another member's memory: it only
//! counts and keeps.

use std::any::Any;

use bytemuck::Pod;

use super::channel::Channel;
use super::registry::{Algorithm, Collective};
use super::schedule::Plan;

/// What decides a blocking call's rounds on this member besides the team: calls of the
/// same key run the same plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PlanKey {
    pub(crate) op: Collective,
    pub(crate) alg: Algorithm,
    pub(crate) shape: CallShape,
    pub(crate) elem: usize,
}

/// A call's shape as its caller knows it: the root (0 where it has none), the element
/// count that sizes its rounds, and whether a scan is exclusive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CallShape {
    root: usize,
    len: usize,
    exclusive: bool,
}

impl CallShape {
    /// A call without a root, of `len` elements per member.
    pub(crate) fn of(len: usize) -> CallShape {
        CallShape {
            root: 0,
            len,
            exclusive: false,
        }
    }

    /// A rooted call of `len` elements per member.
    pub(crate) fn rooted(root: usize, len: usize) -> CallShape {
        CallShape {
            root,
            len,
            exclusive: false,
        }
    }

    /// A scan of `len` elements, exclusive or not.
    pub(crate) fn scan(len: usize, exclusive: bool) -> CallShape {
        CallShape {
            root: 0,
            len,
            exclusive,
        }
    }
}

/// Plans kept for reuse; a few, since a program's small calls come in few shapes.
const CACHED_PLANS: usize = 8;

/// Calls of more bytes per member than this build their rounds afresh: building costs
/// little beside moving them, and their plans would hold more memory.
pub(crate) const CACHE_UP_TO: usize = 4096;

/// Per-pair sequence numbers already promised to schedules of a team, and the scratch
/// buffers and plans of finished schedules kept for the next ones (fresh large buffers
/// cost a page fault per page each time).
///
/// The per-member entries are read from the channel when a schedule first messages that
/// member ([`Reserved::fetch`]), not for every member when a call starts: a call costs
/// its messages, not the team's size.
#[derive(Default)]
pub(crate) struct Reserved {
    pub(crate) send: Vec<u64>,
    pub(crate) recv: Vec<u64>,
    /// Per member: whether long messages to it may be read directly (`core::direct`).
    pub(crate) direct: Vec<bool>,
    /// Per member: the epoch its entries were read from the channel in.
    fetched: Vec<u64>,
    /// Entries of an earlier epoch are stale: read again before use.
    epoch: u64,
    /// Where stale entries are read from (None: entries are set by hand, in tests).
    channel: Option<std::rc::Rc<Channel>>,
    /// Spare buffers, each with its capacity in bytes.
    spare: Vec<SpareBuffer>,
    /// Emptied plans, boxed: a schedule holds its plan by pointer, so handing one
    /// between a schedule and these lists moves 8 bytes, not the plan.
    #[allow(clippy::vec_box)]
    pub(crate) plans: Vec<Box<Plan>>,
    /// Plans of recent small blocking calls, most recent last.
    cached: Vec<(PlanKey, Box<Plan>)>,
}

/// Spare buffers (and plans) kept per team.
const SPARE: usize = 8;

/// Buffers smaller than this are not kept: making one afresh costs less than keeping it.
const KEEP_FROM: usize = 16 * 1024;

/// A buffer of some element type with its capacity in bytes.
pub(crate) type SpareBuffer = (usize, Box<dyn Any>);

impl Reserved {
    /// Start a new epoch on `channel` (of `members`): every entry is read from it again
    /// when first used. Only while no schedule of the team holds reservations (with some
    /// in flight the entries are ahead of the channel and must stay).
    pub(crate) fn refresh(&mut self, channel: &std::rc::Rc<Channel>, members: usize) {
        if self.fetched.len() != members {
            self.send = vec![0; members];
            self.recv = vec![0; members];
            self.direct = vec![false; members];
            self.fetched = vec![0; members];
            self.cached.clear();
        }
        if !self
            .channel
            .as_ref()
            .is_some_and(|c| std::rc::Rc::ptr_eq(c, channel))
        {
            self.channel = Some(channel.clone());
            // Plans name members and chunk counts of the channel they were built for.
            self.cached.clear();
        }
        self.epoch += 1;
    }

    /// Entries set by hand for `direct.len()` members, all streams at 0 (tests).
    #[cfg(test)]
    pub(crate) fn by_hand(direct: Vec<bool>) -> Reserved {
        Reserved {
            send: vec![0; direct.len()],
            recv: vec![0; direct.len()],
            direct,
            ..Reserved::default()
        }
    }

    /// Reserve `chunks` sequence numbers on the stream to (`send`) or from `peer`; the
    /// first of them.
    pub(crate) fn take(&mut self, peer: usize, send: bool, chunks: u64) -> u64 {
        self.fetch(peer);
        let next = if send {
            &mut self.send[peer]
        } else {
            &mut self.recv[peer]
        };
        let first = *next;
        *next += chunks;
        first
    }

    /// Whether long messages to `peer` may be read directly (its entries made current).
    pub(crate) fn direct_with(&mut self, peer: usize) -> bool {
        self.fetch(peer);
        self.direct.get(peer).copied().unwrap_or(false)
    }

    /// Whether every member of the team reads every other's long messages directly and
    /// some host runs more ranks than it has processors (false for entries set by hand).
    /// Every member answers alike: direct reads join the members of one host, so a team
    /// on one host reads directly everywhere and a team on several nowhere everywhere.
    pub(crate) fn crowded_and_all_direct(&self) -> bool {
        self.channel
            .as_ref()
            .is_some_and(|c| c.crowded() && c.all_direct())
    }

    /// Make `peer`'s entries current: read them from the channel if they are stale.
    fn fetch(&mut self, peer: usize) {
        let Some(channel) = &self.channel else {
            return;
        };
        if self.fetched[peer] != self.epoch {
            self.send[peer] = channel.sent_to(peer);
            self.recv[peer] = channel.received_from(peer);
            self.direct[peer] = channel.direct_with(peer);
            self.fetched[peer] = self.epoch;
        }
    }

    /// A buffer of `len` elements holding `from`, reusing a spare one. Past `from` it
    /// holds whatever an earlier schedule left there (zeros where it grew): every
    /// algorithm writes its scratch before reading it, and zeroing a 1 MiB scratch cost
    /// every 1 MiB reduction a pass over it (`memset`, about a tenth of a 1 MiB scan's
    /// samples on each rank). Debug builds fill it with a pattern instead, so that an
    /// algorithm that reads scratch it did not write fails the tests.
    pub(crate) fn buffer<T: Pod>(&mut self, len: usize, from: &[T]) -> Vec<T> {
        // Small buffers are never kept (see `keep_vec`), so not worth looking for; else
        // the smallest spare buffer of this type that is large enough.
        let found = (len * std::mem::size_of::<T>() >= KEEP_FROM)
            .then(|| {
                self.spare
                    .iter()
                    .enumerate()
                    .filter_map(|(i, (_, b))| Some((i, b.downcast_ref::<Vec<T>>()?.capacity())))
                    .filter(|&(_, capacity)| capacity >= len)
                    .min_by_key(|&(_, capacity)| capacity)
                    .map(|(i, _)| i)
            })
            .flatten();
        let mut v = match found {
            Some(i) => *self
                .spare
                .swap_remove(i)
                .1
                .downcast::<Vec<T>>()
                .expect("checked"),
            None => Vec::with_capacity(len),
        };
        let kept = from.len().min(len);
        if v.len() < len {
            v.resize(len, T::zeroed());
        } else {
            v.truncate(len);
        }
        // A collective's input is often on huge pages and the spare on the heap 16 bytes
        // past a page: a gap `copy` goes round (its module doc).
        crate::core::copy::copy_slice(&mut v[..kept], &from[..kept]);
        if cfg!(debug_assertions) {
            bytemuck::cast_slice_mut::<T, u8>(&mut v[kept..]).fill(0xA5);
        }
        v
    }

    /// Keep `v` for later schedules if it is large (making a small one afresh costs less
    /// than keeping it); only the largest few stay.
    pub(crate) fn keep_vec<T: Pod>(&mut self, v: Vec<T>) {
        let bytes = v.capacity() * std::mem::size_of::<T>();
        if bytes < KEEP_FROM {
            return;
        }
        self.spare.push((bytes, Box::new(v)));
        if self.spare.len() > SPARE {
            self.spare
                .sort_by_key(|&(bytes, _)| std::cmp::Reverse(bytes));
            self.spare.truncate(SPARE);
        }
    }

    /// Keep a plan's lists (emptied) for the next schedule.
    pub(crate) fn keep_plan(&mut self, mut plan: Box<Plan>) {
        if self.plans.len() < SPARE {
            plan.clear();
            self.plans.push(plan);
        }
    }

    /// The plan kept for `key`, if any (taken out until the call hands it back).
    pub(crate) fn take_cached(&mut self, key: &PlanKey) -> Option<Box<Plan>> {
        let i = self.cached.iter().rposition(|(k, _)| k == key)?;
        Some(self.cached.remove(i).1)
    }

    /// Keep a finished call's plan for later calls of `key` if it can serve them (see
    /// [`Plan::reusable`]), else its lists; the oldest kept plan makes room.
    pub(crate) fn keep_for(&mut self, key: PlanKey, plan: Box<Plan>) {
        if !plan.reusable() {
            self.keep_plan(plan);
            return;
        }
        if self.cached.len() == CACHED_PLANS {
            let (_, oldest) = self.cached.remove(0);
            self.keep_plan(oldest);
        }
        self.cached.push((key, plan));
    }
}
