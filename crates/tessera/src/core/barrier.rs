//! The barrier: dissemination in ⌈log₂ P⌉ rounds, split-phase, with optional labels.
//!
//! In round k of epoch e, rank i signals rank (i + 2ᵏ) mod P by writing into a slot of
//! the *receiver's* runtime area, then waits for its own slot of round k. Slots carry the
//! epoch number (so they never need resetting) and the smallest and largest barrier label
//! seen so far; after the last round every rank has combined every rank's label, so a
//! mismatch is detected everywhere. Slots alternate between two sets by epoch parity: a
//! rank can be at most one epoch ahead of any other, so a slot is never overwritten before
//! its reader is done with it.
//!
//! Every barrier also carries, always and at no extra message, a *fingerprint* combined
//! the same way: whether it is the end-of-job barrier, and a digest of the rank's
//! collective allocations so far. So a rank that returned early (its end-of-job barrier
//! meeting the others' ordinary one) and ranks whose collective allocations differ are
//! caught at the next barrier, on every rank, with each rank's side named, instead of
//! running on with wrong offsets.
//!
//! A barrier also completes the active messages sent before it: a rank enters only once
//! every frame it sent has been consumed by its target (handled), and runs the replies
//! that came back, so after the barrier every handler of a message sent before it has run
//! everywhere.
//!
//! Split phase: [`Context::barrier_notify`] signals round 0 and returns; later rounds
//! advance whenever the rank makes progress; [`Context::barrier_wait`] completes them.
//!
//! The rounds' decisions live in `protocol::barrier`, which model-checks them with loom.
//!
//! Memory ordering: the label words are written first, then the epoch with a release
//! atomic store; the waiter loads the epoch with acquire before reading the labels. The
//! chain of release/acquire pairs makes every rank's writes before `notify` visible to
//! every rank after `wait`.

use std::cell::Cell;

use bytemuck::{Pod, Zeroable};

use super::atomic::{Acknowledge, Remote};
use super::{Context, GlobalPtr};
use crate::error::CoreError;
use crate::protocol::barrier as protocol;
use crate::{Blocking, Result};

const MAX_ROUNDS: usize = 32;
/// Label value of an anonymous barrier in the (min, max) combination: neutral.
const NO_LABEL: (u64, u64) = (u64::MAX, 0);
/// Fingerprint bit of the end-of-job barrier.
const END_OF_JOB: u64 = 1 << 63;

/// One round's slot in the receiver's runtime area.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Slot {
    epoch: u64,
    /// Combined so far: label min, label max, fingerprint min, fingerprint max.
    combined: [u64; 4],
    _pad: [u64; 3],
}

/// Each rank's barrier area, allocated collectively at start-up.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Area {
    slots: [[Slot; MAX_ROUNDS]; 2],
    /// The last epoch this rank entered (for the watchdog's report).
    entered: u64,
    /// This rank's label in each parity (for naming ranks on mismatch); `has_label` flags.
    label: [u64; 2],
    has_label: [u64; 2],
    /// This rank's fingerprint, and its collective allocation calls since the previous
    /// barrier (how many, and the first [`RECENT`]: bytes allocated, 0 for a free), in each
    /// parity (for naming the differing call on mismatch).
    fingerprint: [u64; 2],
    since: [u64; 2],
    recent: [[u64; RECENT]; 2],
}

/// Collective allocation calls between two barriers that a mismatch report can show.
const RECENT: usize = 8;

/// The report of collective allocations that differ: each rank's calls since the previous
/// barrier (`since[r]` of them, the first of which are `calls[r]`: bytes, 0 for a free),
/// and the first call at which the ranks part.
fn describe_allocations(since: &[u64], calls: &[Vec<u64>]) -> String {
    let call = |bytes: u64| match bytes {
        0 => "free_collective".to_string(),
        b => format!("alloc_collective of {b} bytes"),
    };
    let sides: Vec<String> = (0..since.len())
        .map(|r| {
            let mut listed: Vec<String> = calls[r].iter().map(|&b| call(b)).collect();
            if since[r] as usize > calls[r].len() {
                listed.push(format!("{} more", since[r] as usize - calls[r].len()));
            }
            let listed = if listed.is_empty() {
                "none".to_string()
            } else {
                listed.join(", ")
            };
            format!("rank {r}: {listed}")
        })
        .collect();
    let longest = calls.iter().map(Vec::len).max().unwrap_or(0);
    let first = (0..longest).find(|&i| {
        let at: Vec<Option<&u64>> = calls.iter().map(|c| c.get(i)).collect();
        at.iter().any(|c| *c != at[0])
    });
    let part = match first {
        Some(i) => {
            let sides: Vec<String> = calls
                .iter()
                .enumerate()
                .map(|(r, c)| match c.get(i) {
                    Some(&b) => format!("rank {r} made {}", call(b)),
                    None => format!("rank {r} made no such call"),
                })
                .collect();
            format!(
                "call {} since the last barrier differs: {}. ",
                i + 1,
                sides.join("; ")
            )
        }
        None => String::new(),
    };
    format!(
        "collective allocations differ between ranks (every rank must make the same alloc_collective and free_collective calls, with the same sizes, between the same barriers): {part}The calls since the last barrier were: {}",
        sides.join("; ")
    )
}

/// Per-rank barrier state.
#[derive(Default)]
pub(crate) struct BarrierState {
    area: Option<GlobalPtr<Area>>,
    rounds: usize,
    epoch: Cell<u64>,
    /// Next round to complete; `rounds` when done.
    round: Cell<usize>,
    active: Cell<bool>,
    /// Label min, max; fingerprint min, max.
    combined: Cell<[u64; 4]>,
    /// Digest of the collective allocations and frees so far (63 bits).
    digest: Cell<u64>,
    /// Collective allocation calls since the last barrier, and the first [`RECENT`] of
    /// them (bytes; 0 for a free).
    since: Cell<u64>,
    recent: Cell<[u64; RECENT]>,
    /// Per parity, the report words last written into this rank's area (fingerprint,
    /// calls since the previous barrier, label, has-label), so that unchanged ones are not
    /// written again: the area starts zeroed, and only reports read them.
    reported: Cell<[[u64; 4]; 2]>,
}

impl BarrierState {
    pub(crate) fn new(ctx: &Context) -> Result<Self> {
        // Not cleared: the segment is zero-filled when mapped, and a fast peer may already
        // have signalled into our area before we get here.
        // Unchecked: in checked mode a collective allocation runs a barrier, which does not
        // exist yet.
        let area = ctx.alloc_in::<Area>(super::alloc::Arena::Collective, 1)?;
        let rounds = protocol::rounds(ctx.ranks());
        Ok(BarrierState {
            area: Some(area),
            rounds,
            ..Default::default()
        })
    }

    fn area(&self) -> GlobalPtr<Area> {
        self.area.expect("barrier area allocated at start-up")
    }

    /// Fold a collective allocation (`bytes` at `offset`) or free (`bytes` = 0) into the
    /// digest the next barrier compares.
    pub(crate) fn note_collective(&self, offset: u64, bytes: u64) {
        let mut h = self.digest.get() ^ 0x9e37_79b9_7f4a_7c15;
        for word in [offset, bytes] {
            h = (h ^ word)
                .wrapping_mul(0x0000_0100_0000_01b3)
                .rotate_left(29);
        }
        self.digest.set(h & !END_OF_JOB);
        let since = self.since.get();
        if (since as usize) < RECENT {
            let mut recent = self.recent.get();
            recent[since as usize] = bytes;
            self.recent.set(recent);
        }
        self.since.set(since + 1);
    }
}

fn slot_ptr(area: GlobalPtr<Area>, parity: usize, round: usize) -> GlobalPtr<Slot> {
    let offset = std::mem::offset_of!(Area, slots)
        + (parity * MAX_ROUNDS + round) * std::mem::size_of::<Slot>();
    area.cast::<u8>().add(offset).cast()
}

fn field<T>(area: GlobalPtr<Area>, offset: usize) -> GlobalPtr<T> {
    area.cast::<u8>().add(offset).cast()
}

impl Context {
    /// Block until every rank has called `barrier`.
    pub fn barrier(&self) -> Result<()> {
        self.barrier_notify()?;
        self.barrier_wait()
    }

    /// A barrier that also checks that every rank passes the same `label` (Berkeley UPC's
    /// debugging aid): mismatched labels fail on every rank with the ranks and labels
    /// named. Anonymous barriers match any label.
    pub fn barrier_labeled(&self, label: u64) -> Result<()> {
        self.barrier_notify_labeled(Some(label))?;
        self.barrier_wait()
    }

    /// First half of a split-phase barrier: announce arrival and return at once. Do
    /// independent work, then call [`Context::barrier_wait`].
    ///
    /// ```no_run
    /// # fn f(ctx: &tessera::Context) -> tessera::Result<()> {
    /// ctx.barrier_notify()?;
    /// let local_work: f64 = (0..1000).map(|i| i as f64).sum();
    /// ctx.barrier_wait()?;
    /// # Ok(()) }
    /// ```
    pub fn barrier_notify(&self) -> Result<()> {
        self.barrier_notify_labeled(None)
    }

    /// [`Context::barrier_notify`] with a label.
    pub fn barrier_notify_labeled(&self, label: Option<u64>) -> Result<()> {
        self.barrier_enter(label, false)
    }

    /// The end-of-job barrier: after it no rank needs any other. Meeting an ordinary
    /// barrier of another rank is an error on both sides.
    pub(crate) fn barrier_end_of_job(&self) -> Result<()> {
        self.barrier_enter(None, true)?;
        self.barrier_wait()
    }

    fn barrier_enter(&self, label: Option<u64>, end_of_job: bool) -> Result<()> {
        let _counted_as_barrier = self.stats_scope(false);
        let b = &self.barrier;
        if b.active.get() {
            return Err(CoreError::OutOfOrder {
                call: "barrier_notify",
                why: "barrier_notify called twice without barrier_wait in between".into(),
            }
            .into());
        }
        // Everything signalled before the barrier is applied before it completes anywhere,
        // and every active message sent before it has been handled.
        self.complete_signals()?;
        self.complete_active_messages()?;
        let epoch = b.epoch.get() + 1;
        let parity = protocol::parity(epoch);
        let area = b.area();
        let fingerprint = b.digest.get() | if end_of_job { END_OF_JOB } else { 0 };
        // The words that name this rank's side in a mismatch report; most barriers change
        // none of them.
        let since = b.since.replace(0);
        let report = [
            (std::mem::offset_of!(Area, fingerprint), fingerprint),
            (std::mem::offset_of!(Area, since), since),
            (std::mem::offset_of!(Area, label), label.unwrap_or(0)),
            (
                std::mem::offset_of!(Area, has_label),
                label.is_some() as u64,
            ),
        ];
        let mut reported = b.reported.get();
        for (k, (offset, value)) in report.into_iter().enumerate() {
            if reported[parity][k] != value {
                self.put(field::<u64>(area, offset + 8 * parity), &[value], Blocking)?;
                reported[parity][k] = value;
            }
        }
        b.reported.set(reported);
        if since > 0 {
            let calls = &b.recent.get()[..(since as usize).min(RECENT)];
            let at = std::mem::offset_of!(Area, recent) + parity * RECENT * 8;
            self.put(field::<u64>(area, at), calls, Blocking)?;
        }
        self.atomic_store(
            field::<u64>(area, std::mem::offset_of!(Area, entered)),
            epoch,
        )?;
        b.epoch.set(epoch);
        b.round.set(0);
        b.active.set(true);
        let (lo, hi) = label.map_or(NO_LABEL, |l| (l, l));
        b.combined.set([lo, hi, fingerprint, fingerprint]);
        if b.rounds > 0 {
            self.barrier_signal(0)?;
        }
        Ok(())
    }

    /// Signal our partner of `round` with the labels combined so far.
    fn barrier_signal(&self, round: usize) -> Result<()> {
        let b = &self.barrier;
        let epoch = b.epoch.get();
        let partner = protocol::partner(self.rank(), round, self.ranks());
        let slot = slot_ptr(b.area().on(partner), protocol::parity(epoch), round);
        let combined = b.combined.get();
        // Not acknowledged: the partner's reply is its own round signal, and no rank
        // reuses this slot before the partner has read it (the epochs' parity, above).
        self.signal_as(
            Some((field::<u8>(slot.cast(), 8), bytemuck::cast_slice(&combined))),
            slot.cast::<u64>(),
            Remote::Store(epoch),
            Acknowledge::No,
        )
    }

    /// Advance as far as arrived signals allow; true when the barrier is complete.
    pub(crate) fn barrier_advance(&self) -> Result<bool> {
        let _counted_as_barrier = self.stats_scope(false);
        let b = &self.barrier;
        let epoch = b.epoch.get();
        let parity = protocol::parity(epoch);
        while b.round.get() < b.rounds {
            let round = b.round.get();
            let slot = slot_ptr(b.area(), parity, round);
            if !protocol::signalled(self.atomic_load(slot.cast::<u64>())?, epoch) {
                return Ok(false);
            }
            let mut theirs = [0u64; 4];
            self.get(field::<u64>(slot.cast(), 8), &mut theirs, Blocking)?;
            b.combined.set(protocol::combine(b.combined.get(), theirs));
            b.round.set(round + 1);
            if round + 1 < b.rounds {
                self.barrier_signal(round + 1)?;
            }
        }
        Ok(true)
    }

    /// Whether the split-phase barrier has completed, without blocking.
    pub fn barrier_try(&self) -> Result<bool> {
        if !self.barrier.active.get() {
            return Err(CoreError::OutOfOrder {
                call: "barrier_try",
                why: "barrier_try without barrier_notify".into(),
            }
            .into());
        }
        self.poll()?;
        if self.barrier_advance()? {
            self.barrier_finish()?;
            return Ok(true);
        }
        Ok(false)
    }

    /// Second half of a split-phase barrier: block until every rank has notified.
    pub fn barrier_wait(&self) -> Result<()> {
        if !self.barrier.active.get() {
            return Err(CoreError::OutOfOrder {
                call: "barrier_wait",
                why: "barrier_wait without barrier_notify".into(),
            }
            .into());
        }
        let end = self.barrier_is_end_of_job();
        self.wait_until(
            if end {
                crate::board::END_OF_JOB_WAIT
            } else {
                "a barrier"
            },
            || self.barrier_advance(),
            || self.barrier_laggards(),
        )?;
        self.barrier_finish()
    }

    fn barrier_is_end_of_job(&self) -> bool {
        let parity = protocol::parity(self.barrier.epoch.get());
        self.get_value(field::<u64>(
            self.barrier.area(),
            std::mem::offset_of!(Area, fingerprint) + 8 * parity,
        ))
        .is_ok_and(|f| f & END_OF_JOB != 0)
    }

    fn barrier_finish(&self) -> Result<()> {
        let b = &self.barrier;
        b.active.set(false);
        let [lo, hi, fp_lo, fp_hi] = b.combined.get();
        if fp_lo != fp_hi {
            return Err(self.fingerprint_mismatch(fp_lo, fp_hi)?);
        }
        if lo < hi {
            return Err(CoreError::BarrierMismatch(self.barrier_labels()?).into());
        }
        Ok(())
    }

    /// Each rank's value of the `offset` field of the Area in the current parity.
    fn barrier_fields(&self, offset: usize) -> Result<Vec<u64>> {
        let parity = protocol::parity(self.barrier.epoch.get());
        let area = self.barrier.area();
        (0..self.ranks())
            .map(|r| self.get_value(field::<u64>(area.on(r), offset + 8 * parity)))
            .collect()
    }

    /// The error for fingerprints that differ: some rank's end-of-job barrier met an
    /// ordinary one, or collective allocations differ.
    fn fingerprint_mismatch(&self, lo: u64, hi: u64) -> Result<crate::Error> {
        let prints = self.barrier_fields(std::mem::offset_of!(Area, fingerprint))?;
        if (lo ^ hi) & END_OF_JOB != 0 {
            let ended: Vec<usize> = (0..prints.len())
                .filter(|&r| prints[r] & END_OF_JOB != 0)
                .collect();
            let running: Vec<usize> = (0..prints.len())
                .filter(|&r| prints[r] & END_OF_JOB == 0)
                .collect();
            return Ok(CoreError::BarrierMismatch(format!(
                "rank(s) {ended:?} ended their part of the job (the end-of-job barrier) while rank(s) {running:?} entered an ordinary barrier: ranks skipped a barrier or returned early, so the program's barriers do not match"
            ))
            .into());
        }
        let since = self.barrier_fields(std::mem::offset_of!(Area, since))?;
        let parity = protocol::parity(self.barrier.epoch.get());
        let mut calls = Vec::with_capacity(prints.len());
        for (r, &n) in since.iter().enumerate() {
            let mut recent = [0u64; RECENT];
            let at = std::mem::offset_of!(Area, recent) + parity * RECENT * 8;
            let shown = (n as usize).min(RECENT);
            self.get(
                field::<u64>(self.barrier.area().on(r), at),
                &mut recent[..shown],
                Blocking,
            )?;
            calls.push(recent[..shown].to_vec());
        }
        Ok(CoreError::AllocationMismatch(describe_allocations(&since, &calls)).into())
    }

    /// "rank 0: label 5, rank 1: anonymous, ..." for the current epoch.
    fn barrier_labels(&self) -> Result<String> {
        let parity = protocol::parity(self.barrier.epoch.get());
        let area = self.barrier.area();
        let mut parts = Vec::with_capacity(self.ranks());
        for r in 0..self.ranks() {
            let has = self.get_value(field::<u64>(
                area.on(r),
                std::mem::offset_of!(Area, has_label) + 8 * parity,
            ))?;
            let label = self.get_value(field::<u64>(
                area.on(r),
                std::mem::offset_of!(Area, label) + 8 * parity,
            ))?;
            parts.push(if has != 0 {
                format!("rank {r}: label {label}")
            } else {
                format!("rank {r}: anonymous")
            });
        }
        Ok(format!("labels differ: {}", parts.join(", ")))
    }

    /// What this rank's barrier waits for, for the watchdog and the board: the rank whose
    /// round signal is missing, and whether that rank has entered the barrier at all.
    /// Reads one peer's word, not every rank's, so that a description costs the same at
    /// any job size (every rank describes its wait on the board after 100 ms; the board's
    /// report puts the descriptions together).
    fn barrier_laggards(&self) -> String {
        let epoch = self.barrier.epoch.get();
        let round = self.barrier.round.get();
        let from = protocol::source(self.rank(), round, self.ranks());
        let entered = self
            .atomic_load(field::<u64>(
                self.barrier.area().on(from),
                std::mem::offset_of!(Area, entered),
            ))
            .unwrap_or(epoch);
        let state = if entered < epoch {
            "has not reached"
        } else {
            "entered"
        };
        format!(
            "rank {from} {state} barrier number {epoch}; this rank waits for its signal of round {round}"
        )
    }
}
