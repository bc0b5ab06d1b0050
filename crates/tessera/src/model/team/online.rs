//! Online tuning (seed 004 §3.6): a team picks an algorithm while the program runs.
//!
//! The first blocking calls of an operation in one size class (message sizes rounded up
//! to a power of two) on a team try the candidates in turn, a few times each,
//! interleaved so that a burst of noise hits all of them alike. Each trial runs its
//! candidate after a barrier (so that the members start together): two untimed calls
//! ([`UNTIMED_CALLS`]), then the timed ones straight after them, whose mean is the trial's
//! time (eight in a row for messages up to 4 KiB, [`SHORT_TIMED_CALLS`]; one above). The
//! first calls after
//! another algorithm find buffers and caches as that one left them (an allreduce of
//! 256 KiB at 2 ranks with the ring as the prior: recursive doubling, 1.4× faster in a
//! loop, displaced it in 8 of 12 tunings timed on first calls, in 11 of 12 after an
//! untimed call of its own), and the timed calls start as calls in a loop do, with
//! whatever skew its own algorithm leaves between the members (the linear scan's first
//! member runs ahead: timed after a barrier of its own, other candidates won 13 of 32
//! tunings of a 1 MiB scan at 2 ranks, though the linear scan is 1.2× faster in a loop;
//! timed straight after, none). Each member keeps, for every timed call, when it entered
//! the call and when it left. After the last trial the members combine them by a maximum
//! per entry (one allreduce with a fixed algorithm), and a call's time is from the last
//! member's arrival to the last member's departure: the slowest member's, without the
//! skew the program brings to the call. A member's own time in the call would include
//! that skew: where one member works alone between calls (an OpenSHMEM benchmark's PE 0
//! timing puts while the others wait in the next barrier), its partner's barriers took
//! 0.1-10 ms each and decided between two algorithms that take 0.2 and 0.4 µs. The members
//! of a team on one host read one clock (the monotonic clock is the machine's); a team
//! that spans hosts has no common clock, and there a call's time is the longest any
//! member spent in it. A trial's time is the mean of its calls'. Every member then takes
//! the candidate with the smallest median over its
//! trials, except that the first candidate (the table's or the model's choice) stays
//! unless beaten clearly: a median
//! faster by more than [`MARGIN`] and faster in at least three quarters of the rounds
//! (each round is a paired sample, as the trials interleave). On a machine with more
//! ranks than cores the times are noisy, and the prior is the better bet on a near-tie.
//! Every member sees the same combined times, so all choose alike whatever their own
//! clocks said, and later calls of that operation and size class, in both the blocking
//! and the `*_nb` form, use the winner. A `*_nb` call never takes part in a trial (it
//! would time only its start); until the decision it uses the table's or the model's
//! choice.
//!
//! Which candidates: the registry's algorithms for the operation at every radix it tunes
//! (and MPI's own where the team and the call can use it), narrowed by a tuning table
//! where one is in force (its choice for the size and its choices for the neighbouring
//! sizes, with the model's). Above [`DIRECT_FROM`] bytes, where the members can read each
//! other's long messages directly and `TESSERA_DIRECT` leaves the way open, each of the
//! team's own algorithms is a candidate both ways, read directly and through the mailbox
//! (the team's way first, so the prior is unchanged); a decision then holds both
//! ([`Pick`]), and a decided blocking call of the size class sends its long messages the
//! winner's way.
//!
//! The trial sequence depends only on the sequence of calls, which every member makes
//! alike, so the members always try the same candidate in the same call. This module
//! must never make a decision from one member's clock alone.

use std::collections::hash_map::Entry;
use std::collections::HashMap;

use super::*;

/// How many times each candidate is tried before the members decide: more for small
/// messages, whose sub-microsecond times are noisy and whose trials cost little.
fn rounds(key: Key) -> usize {
    if key.class_bytes() <= 4096 {
        4
    } else {
        3
    }
}

/// Calls in a row a trial times, after its untimed ones (the trial's time is their mean):
/// [`SHORT_TIMED_CALLS`] for messages up to 4 KiB, one above.
fn timed_calls(key: Key) -> usize {
    if key.class_bytes() <= 4096 {
        SHORT_TIMED_CALLS
    } else {
        1
    }
}

/// Timed calls of a short message's trial. On 16 cores at 16 ranks, `examples/trial_timing.rs`
/// (the trial's pattern against a loop, patterns in turn from the job's start) measured a
/// single timed dissemination barrier at a median of 9.4-10 µs and a flat one at 5.2-7.5,
/// and the mean of 8 in a row at 1.74-2.0 and 5.3-5.5, the loop's times. The patterns ran
/// in that order, and the first ones fell in the mailbox rings' first lap, whose page
/// touches were the slowness (`channel::touch_own_area`; with the rings mapped ahead,
/// trials timed 8 calls at 1.7-2.1 µs from the first decision on). How long one call's
/// tail is after the first lap was not measured apart; 8 calls cost a trial a few µs more.
const SHORT_TIMED_CALLS: usize = 8;

/// What a decision is for: an operation, a size class, and whether the call could use
/// MPI's own collective (a user reduction cannot), since those have different
/// candidates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct Key {
    op: Collective,
    class: u32,
    native_ok: bool,
}

impl Key {
    pub(super) fn new(op: Collective, bytes: usize, native_ok: bool) -> Key {
        Key {
            op,
            class: size_class(bytes),
            native_ok,
        }
    }

    /// Where the key's decision sits in [`OnlineTuner::decided`].
    fn slot(&self) -> usize {
        (self.op.index() * CLASSES + self.class as usize) * 2 + usize::from(self.native_ok)
    }

    /// The largest message of the size class, in bytes.
    pub(super) fn class_bytes(&self) -> usize {
        1usize << self.class
    }
}

/// The size class of a `bytes`-byte message: the exponent of the next power of two.
fn size_class(bytes: usize) -> u32 {
    bytes.max(1).next_power_of_two().trailing_zeros()
}

/// One candidate of a trial: an algorithm, and the way its long messages go (through the
/// mailbox, or read directly where the members can).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Pick {
    pub(super) algorithm: Algorithm,
    pub(super) via_mailbox: bool,
}

impl fmt::Display for Pick {
    /// The algorithm's name, with `+mailbox` where its long messages go through the mailbox
    /// although the members could read them directly.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let way = if self.via_mailbox { "+mailbox" } else { "" };
        write!(f, "{}{way}", self.algorithm)
    }
}

/// The median of candidate `c`'s trials among `combined` (trial `i` ran candidate
/// `i % k`).
fn median_of(combined: &[f64], c: usize, k: usize) -> f64 {
    let mut mine: Vec<f64> = combined.iter().skip(c).step_by(k).copied().collect();
    mine.sort_by(f64::total_cmp);
    mine[mine.len() / 2]
}

/// Whether decisions are printed (`TESSERA_TUNING_TRACE`, read once per process).
fn tracing() -> bool {
    static TRACE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *TRACE.get_or_init(|| {
        crate::config::switch("TESSERA_TUNING_TRACE")
            .ok()
            .flatten()
            .unwrap_or(false)
    })
}

/// One decision as `TESSERA_TUNING_TRACE` prints it: every candidate's combined trial
/// times (the slowest member's, in µs, round by round), their median, and the winner.
fn describe(
    key: Key,
    members: usize,
    candidates: &[Pick],
    combined: &[f64],
    winner: Pick,
) -> String {
    let k = candidates.len();
    let mut line = format!(
        "tessera: online tuning of {} up to {} B at {members} members, trial times in µs:",
        key.op.name(),
        key.class_bytes()
    );
    for (c, alg) in candidates.iter().enumerate() {
        let rounds: Vec<String> = combined
            .iter()
            .skip(c)
            .step_by(k)
            .map(|t| format!("{:.2}", t * 1e6))
            .collect();
        let median = median_of(combined, c, k) * 1e6;
        let prior = if c == 0 { " (prior)" } else { "" };
        line += &format!(" {alg}{prior} {median:.2} [{}];", rounds.join(" "));
    }
    line + &format!(" chose {winner}")
}

/// How much faster than the first candidate (the prior) another must be to win.
const MARGIN: f64 = 1.05;

/// The trials of one key so far.
struct Trying {
    /// The prior first.
    candidates: Vec<Pick>,
    /// This member's entry and exit of every timed call so far, in seconds, in call order
    /// (two entries per call, [`timed_calls`] calls per trial; trial `i` ran candidate
    /// `i % candidates.len()`).
    spans: Vec<f64>,
    /// How many untimed calls the next trial's candidate has had.
    warmed: usize,
}

impl Trying {
    /// How many trials have ended.
    fn trials(&self, key: Key) -> usize {
        self.spans.len() / (2 * timed_calls(key))
    }
}

/// Every trial's time from the members' combined spans (per timed call, the latest entry
/// and the latest exit of any member, as [`OnlineTuner::record`] lays them out): the mean
/// over its calls of the time from the last arrival to the last departure.
pub(super) fn trial_times(key: Key, combined: &[f64]) -> Vec<f64> {
    let calls = timed_calls(key);
    combined
        .chunks_exact(2 * calls)
        .map(|trial| {
            let total: f64 = trial.chunks_exact(2).map(|s| (s[1] - s[0]).max(0.0)).sum();
            total / calls as f64
        })
        .collect()
}

/// Untimed calls of a candidate before its timed one. After MPI's own allreduce of 32 KiB
/// at 2 ranks, recursive doubling took 6.0 µs on its second call and 4.0 from its third
/// on (the ring and Rabenseifner about 5.5-6 throughout), so with one untimed call the
/// tuner chose another candidate in 20 of 32 tunings.
const UNTIMED_CALLS: usize = 2;

/// What online tuning says for one call.
pub(super) enum Choice {
    /// The members decided this (its algorithm; [`Team::long_messages_via_mailbox`] says
    /// the way of its long messages).
    Decided(Algorithm),
    /// This call is a trial.
    Trial(Trial),
    /// Nothing yet (or the team does not tune online): the table or the model decides.
    Open,
}

/// One call that is a trial of `algorithm`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Trial {
    key: Key,
    index: usize,
    /// The candidate this call runs.
    pub(super) algorithm: Algorithm,
    /// Whether this call's long messages go through the mailbox.
    pub(super) via_mailbox: bool,
    /// Whether this call opens the trial (the first untimed call, after a barrier).
    pub(super) opens: bool,
    /// Whether this call is timed (else one of the untimed calls before the timed ones).
    pub(super) timed: bool,
}

/// Size classes: every `usize` byte count has one (0 to 64).
const CLASSES: usize = usize::BITS as usize + 1;

/// One team's online decisions and trials in progress.
pub(super) struct OnlineTuner {
    /// The decisions, indexed by [`Key::slot`], so that a decided call's lookup is one
    /// load (the per-call cost is what small collectives feel).
    decided: Box<[Option<Pick>]>,
    /// The keys still being tried.
    trying: HashMap<Key, Trying>,
}

impl Default for OnlineTuner {
    fn default() -> Self {
        OnlineTuner {
            decided: vec![None; Collective::ALL.len() * CLASSES * 2].into_boxed_slice(),
            trying: HashMap::new(),
        }
    }
}

impl OnlineTuner {
    /// What a call of `key` runs: the decision, else (if it may be a trial) the next
    /// trial; `candidates` lists them the first time `key` is tried (fewer than two:
    /// decided at once).
    #[inline]
    pub(super) fn choice(
        &mut self,
        key: Key,
        may_trial: bool,
        candidates: impl FnOnce() -> Vec<Pick>,
    ) -> Choice {
        match self.decided[key.slot()] {
            Some(pick) => Choice::Decided(pick.algorithm),
            None => self.undecided(key, may_trial, candidates),
        }
    }

    /// [`OnlineTuner::choice`] where `key` is not decided yet.
    #[inline(never)]
    fn undecided(
        &mut self,
        key: Key,
        may_trial: bool,
        candidates: impl FnOnce() -> Vec<Pick>,
    ) -> Choice {
        if !may_trial {
            return Choice::Open;
        }
        let trying = match self.trying.entry(key) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => {
                let candidates = candidates();
                if let [only] = candidates[..] {
                    self.decided[key.slot()] = Some(only);
                    return Choice::Decided(only.algorithm);
                }
                let calls = rounds(key) * candidates.len() * timed_calls(key);
                e.insert(Trying {
                    spans: Vec::with_capacity(2 * calls),
                    candidates,
                    warmed: 0,
                })
            }
        };
        let index = trying.trials(key) % trying.candidates.len();
        let pick = trying.candidates[index];
        Choice::Trial(Trial {
            key,
            index,
            algorithm: pick.algorithm,
            via_mailbox: pick.via_mailbox,
            opens: trying.warmed == 0,
            timed: trying.warmed == UNTIMED_CALLS,
        })
    }

    /// Record that `trial`, an untimed call, ran.
    pub(super) fn warmed(&mut self, trial: Trial) {
        let trying = self
            .trying
            .get_mut(&trial.key)
            .expect("a key is tried until decided");
        debug_assert!(!trial.timed && trying.warmed < UNTIMED_CALLS);
        trying.warmed += 1;
    }

    /// Record that a timed call of `trial` was entered at `entered` and left at `left`
    /// (seconds of a clock every member reads, or 0 and the time spent in it where there
    /// is none). After the trial's last timed call the next trial begins; returns this
    /// member's spans of every trial once that was the last trial: the members must then
    /// combine them (maximum per entry), take their [`trial_times`] and
    /// [`OnlineTuner::decide`].
    pub(super) fn record(&mut self, trial: Trial, entered: f64, left: f64) -> Option<Vec<f64>> {
        let trying = self
            .trying
            .get_mut(&trial.key)
            .expect("a key is tried until decided");
        debug_assert_eq!(
            trying.trials(trial.key) % trying.candidates.len(),
            trial.index
        );
        debug_assert!(trial.timed && trying.warmed == UNTIMED_CALLS);
        trying.spans.extend([entered, left]);
        let calls = timed_calls(trial.key);
        if !(trying.spans.len() / 2).is_multiple_of(calls) {
            return None;
        }
        trying.warmed = 0;
        (trying.trials(trial.key) == rounds(trial.key) * trying.candidates.len())
            .then(|| trying.spans.clone())
    }

    /// Decide `trial`'s key from the members' combined times of every trial (the same on
    /// every member): the candidate with the smallest median, unless it does not beat the
    /// prior clearly (module docs).
    pub(super) fn decide(&mut self, trial: Trial, combined: &[f64]) -> Pick {
        let Trying { candidates, .. } = self
            .trying
            .remove(&trial.key)
            .expect("decided once, after the last trial");
        let k = candidates.len();
        let medians: Vec<f64> = (0..k).map(|c| median_of(combined, c, k)).collect();
        let fastest = (0..k).fold(
            0,
            |best, c| if medians[c] < medians[best] { c } else { best },
        );
        // Trials are interleaved, so round r gave the prior and the challenger one paired
        // sample each: the challenger must also win most of those pairs.
        let rounds = combined.len() / k;
        let wins = (0..rounds)
            .filter(|r| combined[r * k + fastest] < combined[r * k])
            .count();
        let clear = medians[0] > MARGIN * medians[fastest] && 4 * wins >= 3 * rounds;
        let pick = candidates[if clear { fastest } else { 0 }];
        self.decided[trial.key.slot()] = Some(pick);
        pick
    }

    /// Whether the members have decided `key`.
    fn is_decided(&self, key: Key) -> bool {
        self.decided[key.slot()].is_some()
    }

    /// Whether the members decided that `key`'s long messages go through the mailbox (None:
    /// not decided).
    fn decided_via_mailbox(&self, key: Key) -> Option<bool> {
        self.decided[key.slot()].map(|pick| pick.via_mailbox)
    }

    /// Every decision so far: (operation, largest message of the size class, winner), in
    /// operation and size order.
    pub(super) fn decisions(&self) -> Vec<(Collective, usize, Algorithm)> {
        let mut out: Vec<_> = self
            .decided
            .iter()
            .enumerate()
            .filter_map(|(slot, pick)| {
                let alg = (*pick)?.algorithm;
                let op = Collective::ALL[slot / (2 * CLASSES)];
                Some((op, 1usize << (slot / 2 % CLASSES), alg))
            })
            .collect();
        out.dedup();
        out
    }
}

impl Team<'_> {
    /// What online tuning says for a call of `op` with `bytes` per member (a blocking call
    /// `may_trial`): [`Choice::Open`] where the team does not tune online.
    #[inline]
    pub(super) fn online_choice(
        &self,
        op: Collective,
        bytes: usize,
        native_ok: bool,
        may_trial: bool,
    ) -> Choice {
        let Some(tuner) = &self.online else {
            return Choice::Open;
        };
        let native = self.can_use_native(bytes, native_ok);
        let key = Key::new(op, bytes, native);
        tuner
            .borrow_mut()
            .choice(key, may_trial, || self.online_picks(key, bytes))
    }

    /// The candidates of `key`'s trials ([`Team::online_candidates`]), the team's way for
    /// long messages; where the members could read them directly and nothing fixes the way
    /// (see [`Team::probe_direct_reads`]), and the calls are longer than [`DIRECT_FROM`]
    /// (single-address forms aside, which write into their destinations themselves), each
    /// of the team's own algorithms the other way too. On a 2-core guest neither way was
    /// right all day: read directly, 1 MiB collectives at 2 ranks took 1.0-1.9× the
    /// mailbox's time with the two virtual processors close (store crossings of 37-43 ns)
    /// and 0.29-0.94× with them far apart (155-196 ns), the placement moving within
    /// minutes (docs/PERFORMANCE.md, "Collectives": direct reads by calibration, and long
    /// messages both ways by online tuning).
    fn online_picks(&self, key: Key, bytes: usize) -> Vec<Pick> {
        let algs = self.online_candidates(key.op, bytes, key.native_ok);
        let way = self.long.via_mailbox;
        let mut picks: Vec<Pick> = algs
            .iter()
            .map(|&algorithm| Pick {
                algorithm,
                via_mailbox: way,
            })
            .collect();
        if self.long.tried && key.class_bytes() > DIRECT_FROM && !key.op.is_single_address() {
            picks.extend(
                algs.iter()
                    .filter(|&&algorithm| algorithm != Algorithm::NATIVE)
                    .map(|&algorithm| Pick {
                        algorithm,
                        via_mailbox: !way,
                    }),
            );
        }
        picks
    }

    /// Whether the online tuner's decision for a call of `op` with `bytes` per member sends
    /// its long messages through the mailbox (None: no decision).
    pub(super) fn decided_via_mailbox(
        &self,
        op: Collective,
        bytes: usize,
        native_ok: bool,
    ) -> Option<bool> {
        if self.forced[op.index()].is_some() {
            return None;
        }
        let key = Key::new(op, bytes, self.can_use_native(bytes, native_ok));
        self.online.as_ref()?.borrow().decided_via_mailbox(key)
    }

    /// Whether a blocking call of `op` with `bytes` per member sends its long messages (from
    /// [`DIRECT_FROM`] bytes) through the mailbox rather than letting the members read them
    /// directly: the online tuner's decision for its size class where it tried both ways,
    /// else the team's way (`!`[`Team::reads_directly`] where the members can read
    /// directly).
    ///
    /// ```
    /// use tessera::{Algorithm, Collective, Job, Team};
    /// use tessera::coll::Broadcast;
    /// use tessera::Blocking;
    /// Job::threads(2).segment(32 << 20).run(|ctx| {
    ///     let world = Team::world(ctx)?.with_online_tuning();
    ///     let mut data = vec![ctx.rank() as u64; 1 << 17]; // 1 MiB
    ///     while !world.tuning_settled(Collective::Broadcast, 1 << 20) {
    ///         world.run(Broadcast::in_place(0, &mut data), Blocking)?;
    ///     }
    ///     assert!(data.iter().all(|&x| x == 0));
    ///     // Short messages, and a forced algorithm's, go the team's way.
    ///     let teams_way = !world.reads_directly();
    ///     assert_eq!(world.long_messages_via_mailbox(Collective::Broadcast, 64), teams_way);
    ///     let flat = world.with_algorithm(Collective::Broadcast, Algorithm::FLAT)?;
    ///     assert_eq!(flat.long_messages_via_mailbox(Collective::Broadcast, 1 << 20), teams_way);
    ///     Ok(())
    /// }).unwrap();
    /// ```
    pub fn long_messages_via_mailbox(&self, op: Collective, bytes: usize) -> bool {
        if !self.channel.any_direct() {
            return true;
        }
        match bytes > DIRECT_FROM && self.long.tried {
            true => self
                .decided_via_mailbox(op, bytes, true)
                .unwrap_or(self.long.via_mailbox),
            false => self.long.via_mailbox,
        }
    }

    /// What the online tuner tries for `op` at `bytes`, the prior first: with a tuning
    /// table, its choice for the size, its choices for the neighbouring sizes, and the
    /// model's; without one, the model's and every candidate ([`Team::candidates`]).
    /// MPI's own only where the call can use it (else the model's replaces it as prior).
    fn online_candidates(&self, op: Collective, bytes: usize, native: bool) -> Vec<Algorithm> {
        let mut algs = match self.tuned.as_ref().and_then(|t| t[op.index()].as_deref()) {
            Some(rules) => {
                let at = rules
                    .iter()
                    .position(|(up_to, _)| up_to.is_none_or(|b| bytes as u64 <= b))
                    .unwrap_or(rules.len() - 1);
                let near = &rules[at.saturating_sub(1)..(at + 2).min(rules.len())];
                let mut algs = vec![rules[at].1];
                algs.extend(near.iter().map(|&(_, alg)| alg));
                algs.push(self.model(op, bytes));
                algs
            }
            None => {
                let mut algs = vec![self.model(op, bytes)];
                algs.extend(self.candidates(op));
                algs
            }
        };
        if !native {
            let fallback = self.local_model(op, bytes);
            algs.iter_mut()
                .filter(|alg| **alg == Algorithm::NATIVE)
                .for_each(|alg| *alg = fallback);
        }
        let mut unique = Vec::with_capacity(algs.len());
        for alg in algs {
            if !unique.contains(&alg) {
                unique.push(alg);
            }
        }
        unique
    }

    /// Before a trial's first untimed call: a barrier (dissemination, whatever the choice), so
    /// that the timed call that follows meets only the skew its own candidate leaves
    /// behind, not the previous candidate's.
    pub(super) fn start_trial(&self) -> Result<()> {
        let (n, me) = (self.size(), self.me);
        self.run_rounds::<u8>(&[], &mut [], None, None, |b| {
            algorithms::rounds(
                Collective::Barrier,
                b,
                Call::new(Algorithm::DISSEMINATION, n, me, 0),
            )
        })
    }

    /// An untimed trial call ran (see [`OnlineTuner::warmed`]).
    pub(super) fn warmed_trial(&self, trial: Trial) {
        self.online
            .as_ref()
            .expect("trials only where the team tunes online")
            .borrow_mut()
            .warmed(trial);
    }

    /// A timed trial call was entered at `entered` and left at `left` here (seconds of the
    /// machine's monotonic clock, [`crate::board::now_seconds`]). After the last trial of its key,
    /// the members combine their spans (maximum per entry, one allreduce by recursive
    /// doubling, which every member runs whatever it would choose) and all take the same
    /// winner.
    pub(super) fn end_trial(&self, trial: Trial, entered: f64, left: f64) -> Result<()> {
        let tuner = self
            .online
            .as_ref()
            .expect("trials only where the team tunes online");
        // Members on other hosts read other clocks: there only the time in the call counts.
        let (entered, left) = if self.spans_hosts {
            (0.0, left - entered)
        } else {
            (entered, left)
        };
        let Some(spans) = tuner.borrow_mut().record(trial, entered, left) else {
            return Ok(());
        };
        let mut combined = vec![0f64; spans.len()];
        let latest = |acc: &mut [f64], other: &[f64]| {
            acc.iter_mut().zip(other).for_each(|(a, &b)| *a = a.max(b));
            Ok(())
        };
        let (n, me, len) = (self.size(), self.me, spans.len());
        self.run_rounds(
            &spans,
            &mut combined,
            Some(Reducer::Borrowed(&latest)),
            None,
            |b| {
                let call = Call::new(Algorithm::RECURSIVE_DOUBLING, n, me, len);
                algorithms::rounds(Collective::Allreduce, b, call)
            },
        )?;
        let times = trial_times(trial.key, &combined);
        let traced = (self.me == 0 && tracing())
            .then(|| tuner.borrow().trying[&trial.key].candidates.clone());
        let winner = tuner.borrow_mut().decide(trial, &times);
        if let Some(candidates) = traced {
            eprintln!("{}", describe(trial.key, n, &candidates, &times, winner));
        }
        Ok(())
    }

    /// Whether calls of `op` with `bytes` per member have stopped being online-tuning
    /// trials: the team does not tune online, the algorithm for `op` is forced, or the
    /// members have decided the size class (for some form of the call). A benchmark
    /// warms a team up until this holds, so that it times the decision, not the trials;
    /// every member sees the same answer after the same calls.
    ///
    /// ```
    /// use tessera::{Collective, Job, Op, Team};
    /// use tessera::coll::Allreduce;
    /// use tessera::Blocking;
    /// Job::threads(2).segment(8 << 20).run(|ctx| {
    ///     let world = Team::world(ctx)?.with_online_tuning();
    ///     assert!(!world.tuning_settled(Collective::Allreduce, 8));
    ///     for _ in 0..1000 {
    ///         if world.tuning_settled(Collective::Allreduce, 8) {
    ///             break;
    ///         }
    ///         world.run(Allreduce::value(1u64, Op::Sum), Blocking)?;
    ///     }
    ///     assert!(world.tuning_settled(Collective::Allreduce, 8));
    ///     // A forced algorithm is never tried.
    ///     let ring = world.with_algorithm(Collective::Allreduce, tessera::Algorithm::RING)?;
    ///     assert!(ring.tuning_settled(Collective::Allreduce, 64));
    ///     Ok(())
    /// }).unwrap();
    /// ```
    pub fn tuning_settled(&self, op: Collective, bytes: usize) -> bool {
        let Some(tuner) = &self.online else {
            return true;
        };
        let tuner = tuner.borrow();
        self.forced[op.index()].is_some()
            || [false, true]
                .into_iter()
                .any(|native| tuner.is_decided(Key::new(op, bytes, native)))
    }

    /// What this team's online tuner has decided so far: (operation, largest message of
    /// the size class in bytes, algorithm), in operation order. Empty where the team does
    /// not tune online (a tuning table in force, `TESSERA_TUNING=none`, a team of one).
    ///
    /// ```
    /// use tessera::{Collective, Job, Op, Team};
    /// use tessera::coll::Allreduce;
    /// use tessera::Blocking;
    /// Job::threads(2).segment(8 << 20).run(|ctx| {
    ///     let world = Team::world(ctx)?.with_online_tuning();
    ///     for _ in 0..400 {
    ///         world.run(Allreduce::value(1u64, Op::Sum), Blocking)?;
    ///     }
    ///     let decided = world.online_decisions();
    ///     let (_, _, alg) = *decided
    ///         .iter()
    ///         .find(|&&(op, bytes, _)| op == Collective::Allreduce && bytes == 8)
    ///         .expect("400 calls decide the 8-byte class");
    ///     assert!(world.candidates(Collective::Allreduce).contains(&alg));
    ///     Ok(())
    /// }).unwrap();
    /// ```
    pub fn online_decisions(&self) -> Vec<(Collective, usize, Algorithm)> {
        self.online
            .as_ref()
            .map_or_else(Vec::new, |t| t.borrow().decisions())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The next timed trial of `key` (the candidates are `cands` the first time), after
    /// its untimed calls, which must run the same candidate, the first opening the trial.
    fn next_trial(tuner: &mut OnlineTuner, key: Key, cands: &[Algorithm]) -> Option<Trial> {
        next_pick_trial(
            tuner,
            key,
            &cands.iter().map(|&a| direct(a)).collect::<Vec<_>>(),
        )
    }

    /// `algorithm` with its long messages read directly.
    fn direct(algorithm: Algorithm) -> Pick {
        Pick {
            algorithm,
            via_mailbox: false,
        }
    }

    /// [`next_trial`] with candidates that name the way of their long messages.
    fn next_pick_trial(tuner: &mut OnlineTuner, key: Key, cands: &[Pick]) -> Option<Trial> {
        let Choice::Trial(first) = tuner.choice(key, true, || cands.to_vec()) else {
            return None;
        };
        assert!(
            first.opens && !first.timed,
            "a trial opens with an untimed call"
        );
        tuner.warmed(first);
        for call in 1..=UNTIMED_CALLS {
            let Choice::Trial(t) = tuner.choice(key, true, || unreachable!("listed already"))
            else {
                panic!("a trial's untimed calls are followed by its timed one");
            };
            assert!(!t.opens && t.algorithm == first.algorithm);
            assert_eq!(t.via_mailbox, first.via_mailbox);
            assert_eq!(t.timed, call == UNTIMED_CALLS);
            if t.timed {
                return Some(t);
            }
            tuner.warmed(t);
        }
        unreachable!("the loop returns the timed call")
    }

    /// Record `trial`'s timed calls, taking `seconds(i)` for the `i`-th: once the last
    /// trial ends, every trial's time by this member's spans alone.
    fn record_calls(
        tuner: &mut OnlineTuner,
        trial: Trial,
        seconds: impl Fn(usize) -> f64,
    ) -> Option<Vec<f64>> {
        let calls = timed_calls(trial.key);
        for i in 0..calls - 1 {
            assert!(
                tuner.record(trial, 0.0, seconds(i)).is_none(),
                "more timed calls follow"
            );
        }
        tuner
            .record(trial, 0.0, seconds(calls - 1))
            .map(|spans| trial_times(trial.key, &spans))
    }

    /// The decision for `key`, if any (asked as a nonblocking call would).
    fn decided(tuner: &mut OnlineTuner, key: Key) -> Option<Algorithm> {
        match tuner.choice(key, false, || unreachable!("never lists candidates")) {
            Choice::Decided(alg) => Some(alg),
            Choice::Open => None,
            Choice::Trial(_) => unreachable!("a nonblocking call is never a trial"),
        }
    }

    #[test]
    fn trials_interleave_then_the_combined_median_wins_over_the_prior_by_a_margin() {
        let mut tuner = OnlineTuner::default();
        let key = Key::new(Collective::Allreduce, 100, true);
        let cands = vec![
            Algorithm::RING,
            Algorithm::RECURSIVE_DOUBLING,
            Algorithm::BINOMIAL,
        ];
        let rounds = rounds(key);
        let mut seen = Vec::new();
        let mut last = None;
        for call in 0..rounds * cands.len() {
            let trial = next_trial(&mut tuner, key, &cands).expect("still trying");
            seen.push(trial.algorithm);
            // This member saw ring fastest, once by luck very fast.
            let t = match trial.algorithm {
                Algorithm::RING if call == 0 => 0.125,
                Algorithm::RING => 1.0,
                _ => 5.0,
            };
            last = record_calls(&mut tuner, trial, |_| t).map(|times| (trial, times));
        }
        assert_eq!(&seen[..3], &cands[..]);
        assert_eq!(&seen[3..6], &cands[..]);
        let (trial, times) = last.expect("the last trial returns the times");
        assert_eq!(times.len(), rounds * 3);
        assert_eq!((times[0], times[3], times[1]), (0.125, 1.0, 5.0));
        // Another member was slower with ring: the combined (per-trial maximum) times
        // decide, by their median, so one lucky trial does not count.
        let mut combined: Vec<f64> = (0..rounds).flat_map(|_| [2.0, 1.5, 9.0]).collect();
        combined[0] = 0.01;
        assert_eq!(
            tuner.decide(trial, &combined).algorithm,
            Algorithm::RECURSIVE_DOUBLING
        );
        assert_eq!(
            decided(&mut tuner, key),
            Some(Algorithm::RECURSIVE_DOUBLING)
        );
        assert!(next_trial(&mut tuner, key, &[]).is_none());
        // The same size class is decided; another is not.
        assert!(decided(&mut tuner, Key::new(Collective::Allreduce, 128, true)).is_some());
        assert!(decided(&mut tuner, Key::new(Collective::Allreduce, 129, true)).is_none());
        assert!(decided(&mut tuner, Key::new(Collective::Allreduce, 100, false)).is_none());
        assert_eq!(
            tuner.decisions(),
            vec![(Collective::Allreduce, 128, Algorithm::RECURSIVE_DOUBLING)]
        );
    }

    #[test]
    fn the_prior_stays_on_a_near_tie() {
        let mut tuner = OnlineTuner::default();
        let key = Key::new(Collective::Broadcast, 1 << 20, true);
        let cands = vec![Algorithm::CHAIN, Algorithm::BINOMIAL];
        let mut last = None;
        for _ in 0..rounds(key) * 2 {
            let trial = next_trial(&mut tuner, key, &cands).unwrap();
            let t = if trial.algorithm == Algorithm::CHAIN {
                1.04
            } else {
                1.0
            };
            last = record_calls(&mut tuner, trial, |_| t).map(|times| (trial, times));
        }
        let (trial, times) = last.unwrap();
        assert_eq!(tuner.decide(trial, &times).algorithm, Algorithm::CHAIN);
    }

    /// A short message's trial is the mean of several calls in a row, so that one slow
    /// timed call (the members' skew, which a loop of calls spreads over every call) does
    /// not decide alone.
    #[test]
    fn a_short_trial_times_calls_in_a_row() {
        let mut tuner = OnlineTuner::default();
        let key = Key::new(Collective::Barrier, 0, false);
        let cands = vec![Algorithm::FLAT, Algorithm::DISSEMINATION];
        assert!(timed_calls(key) >= 8);
        let mut last = None;
        for _ in 0..rounds(key) * 2 {
            let trial = next_trial(&mut tuner, key, &cands).unwrap();
            let t = move |i: usize| match trial.algorithm {
                Algorithm::DISSEMINATION if i == 0 => 10.0,
                Algorithm::DISSEMINATION => 1.8,
                _ => 5.3,
            };
            last = record_calls(&mut tuner, trial, t).map(|times| (trial, times));
        }
        let (trial, times) = last.unwrap();
        assert_eq!(
            tuner.decide(trial, &times).algorithm,
            Algorithm::DISSEMINATION
        );
        // A long message's trial is one call.
        assert_eq!(
            timed_calls(Key::new(Collective::Broadcast, 1 << 20, true)),
            1
        );
    }

    /// A call's time runs from the last member's arrival: the wait of a member that came
    /// early (its partner worked alone between calls, by a different amount in every
    /// trial) does not count, where it would decide if each member's own time in the call
    /// did.
    #[test]
    fn the_programs_skew_between_members_does_not_decide() {
        let key = Key::new(Collective::Barrier, 0, false);
        let cands = [Algorithm::DISSEMINATION, Algorithm::FLAT];
        let cost = |t: usize| if t.is_multiple_of(2) { 0.2e-6 } else { 0.4e-6 };
        // Member 1 arrives this long after member 0, trial by trial (seconds).
        let skew = [
            910e-6, 660e-6, 165e-6, 570e-6, 9.8e-3, 8.6e-3, 10e-6, 0.8e-6,
        ];
        assert_eq!(skew.len(), rounds(key) * cands.len());
        let mut members = [OnlineTuner::default(), OnlineTuner::default()];
        let mut clock = 100.0;
        let mut last = Vec::new();
        for (t, skew) in skew.iter().enumerate() {
            let trials = members
                .each_mut()
                .map(|tuner| next_trial(tuner, key, &cands).expect("still trying"));
            assert!(trials.iter().all(|trial| trial.algorithm == cands[t % 2]));
            last.clear();
            for _ in 0..timed_calls(key) {
                let arrivals = [clock, clock + skew];
                let leave = arrivals[1] + cost(t);
                for m in 0..2 {
                    let spans = members[m].record(trials[m], arrivals[m], leave);
                    last.extend(spans.map(|spans| (trials[m], spans)));
                }
                clock = leave + 1e-3;
            }
        }
        let [(trial, spans0), (_, spans1)] = &last[..] else {
            panic!("both members return their spans after the last trial");
        };
        let combined: Vec<f64> = spans0.iter().zip(spans1).map(|(a, b)| a.max(*b)).collect();
        let times = trial_times(key, &combined);
        for (t, time) in times.iter().enumerate() {
            assert!((time - cost(t)).abs() < 1e-9, "trial {t}: {time} s");
        }
        // Member 0's own time in each call (what a team across hosts goes by) carries the
        // skew, and by it the slower candidate would win.
        let own = trial_times(key, spans0);
        assert!(own.iter().zip(&skew).all(|(own, skew)| own > skew));
        let [mut first, mut second] = members;
        assert_eq!(second.decide(*trial, &own).algorithm, Algorithm::FLAT);
        assert_eq!(
            first.decide(*trial, &times).algorithm,
            Algorithm::DISSEMINATION
        );
    }

    #[test]
    fn a_traced_decision_lists_every_candidate_round_by_round() {
        let key = Key::new(Collective::Barrier, 0, false);
        let cands = [direct(Algorithm::DISSEMINATION), direct(Algorithm::FLAT)];
        let combined = [1.0e-6, 5.0e-6, 3.0e-6, 4.0e-6, 2.0e-6, 6.0e-6];
        let line = describe(key, 16, &cands, &combined, cands[0]);
        assert_eq!(
            line,
            "tessera: online tuning of barrier up to 1 B at 16 members, trial times in µs: \
             dissemination (prior) 2.00 [1.00 3.00 2.00]; flat 5.00 [5.00 4.00 6.00]; \
             chose dissemination"
        );
    }

    /// Candidates that differ only in the way of their long messages are tried in turn
    /// like any others; the decision keeps the way, which the trace names.
    #[test]
    fn a_decision_keeps_the_way_of_long_messages() {
        let mut tuner = OnlineTuner::default();
        let key = Key::new(Collective::Broadcast, 1 << 20, false);
        let via_mailbox = Pick {
            via_mailbox: true,
            ..direct(Algorithm::FLAT)
        };
        let cands = [direct(Algorithm::FLAT), via_mailbox];
        let mut last = None;
        for t in 0..rounds(key) * 2 {
            let trial = next_pick_trial(&mut tuner, key, &cands).expect("still trying");
            assert_eq!(trial.via_mailbox, t % 2 == 1);
            let time = if trial.via_mailbox { 60e-6 } else { 100e-6 };
            last = record_calls(&mut tuner, trial, |_| time).map(|times| (trial, times));
        }
        assert_eq!(tuner.decided_via_mailbox(key), None);
        let (trial, times) = last.expect("the last trial returns the times");
        assert_eq!(tuner.decide(trial, &times), via_mailbox);
        assert_eq!(tuner.decided_via_mailbox(key), Some(true));
        assert_eq!(decided(&mut tuner, key), Some(Algorithm::FLAT));
        let line = describe(key, 2, &cands, &times, via_mailbox);
        assert!(line.contains("flat (prior) 100.00") && line.ends_with("chose flat+mailbox"));
    }

    #[test]
    fn one_candidate_is_decided_without_trials() {
        let mut tuner = OnlineTuner::default();
        let key = Key::new(Collective::Barrier, 0, false);
        assert!(next_trial(&mut tuner, key, &[Algorithm::DISSEMINATION]).is_none());
        assert_eq!(decided(&mut tuner, key), Some(Algorithm::DISSEMINATION));
    }
}
