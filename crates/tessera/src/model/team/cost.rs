//! The collective cost model: the time of one call of every registry row, predicted from
//! a few machine parameters, and the choice of the row with the least predicted time.
//!
//! Each row of the registry carries a formula ([`Row::work`](super::Row)) that counts the
//! work of one call of its algorithm for a team size and a message size, as a call in a
//! loop of back-to-back calls does it (what `tessera bench coll` and the online tuner
//! measure: a rooted call's members go on to the next call as soon as their part is
//! done, so trees and chains pipeline):
//!
//! - **rounds**: synchronising rounds in sequence, each a message or signal and the wait
//!   that sees it (a dissemination barrier has ⌈log₂ n⌉);
//! - **tree rounds**: the depth of a reduction or gather tree, whose root cannot finish
//!   a call before its deepest child has;
//! - **messages**, **bytes**, **block copies** and **bytes put** by the busiest member
//!   (a broadcast's root sends to each of its children; a chain's middle member receives
//!   and forwards everything);
//! - **readers** and **levels** of long messages: how many members read the busiest
//!   member's long messages (a broadcast root's children), and how many levels one passes
//!   in sequence (a tree forwards a long message only once it holds all of it).
//!
//! [`MachineParams`] turns the counts into microseconds: a round, a tree round, a
//! message's fixed cost, the copy bandwidth of short messages through the channel and of
//! long ones (read straight from the sender where the members can, else copied twice),
//! how many readers of one member proceed at once, the bandwidth of puts, and a local
//! block copy. The predicted time of a call is `rounds · round + max(tree rounds · tree
//! round, the busiest member's work, levels · one read of the block)`, plus a pipeline's
//! fill spread over [`PIPELINED_CALLS`] calls.
//!
//! Where ranks share cores the same formulas hold with other parameters: a round then
//! includes waking the partner (6.6 µs at 8 ranks on 2 cores against 0.5 with a core each),
//! which is what made flat barriers win there. Two terms count the processors
//! ([`MachineParams::cores`]) the members share: the messages of every member together
//! are those processors' work, so the busiest member's are priced at least at that total
//! over them ([`Work::all_members`]: an all-at-once round's n(n − 1) messages grow as n²,
//! a Bruck dissemination's as n log n); and a member of a pipeline waits for a wake-up
//! before it passes a call on whenever its processor runs another member next, a round
//! spread over the pipelined calls (a chain among 16 ranks on 2 cores took 2.5 times a
//! binomial tree's time). The parameters come from
//! `tessera tune --calibrate` (a second's measurements, cached per host beside the tuning
//! table; see [`calibration`](super::calibration)) or, where none was made, from the
//! built-in sets [`MachineParams::DEDICATED`] and [`MachineParams::CROWDED`].
//!
//! This module must never move data or read the clock: it only predicts.

use crate::error::CoreError;
use serde::{Deserialize, Serialize};

use super::channel::{DEFAULT_CHUNK, DIRECT_FROM};
use super::registry::{Algorithm, Collective};

/// What a formula is given: the team size, the bytes per member's block, and the radix
/// of a family that has one.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Shape {
    /// Members of the team.
    pub members: usize,
    /// Bytes per member's block (a broadcast's whole message, an all-to-all's block).
    pub bytes: usize,
    /// The tree's or Bruck's radix (2 for a family without one).
    pub radix: usize,
}

/// The work of one call, in counts the machine parameters price (see the
/// [module documentation](self)).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Work {
    /// Synchronising rounds in sequence.
    pub rounds: f64,
    /// Depth of a reduction or gather tree.
    pub tree_rounds: f64,
    /// Messages the busiest member sends or receives (a long message counts once per
    /// channel chunk).
    pub messages: f64,
    /// Bytes the busiest member moves through the channel.
    pub bytes: f64,
    /// Blocks the busiest member copies locally (packing and unpacking).
    pub block_copies: f64,
    /// Bytes the busiest member puts straight into destinations.
    pub bytes_put: f64,
    /// Members that read the busiest member's long messages (a broadcast root's
    /// children): as many as the host lets read one member at once proceed together.
    pub readers: f64,
    /// Levels a long message passes one after the other (a tree forwards a long message
    /// once it holds all of it): the call takes at least this many reads of the block.
    pub levels: f64,
    /// Members a call passes through one after another in a pipeline (a chain, a linear
    /// scan): its fill, spread over [`PIPELINED_CALLS`] calls.
    pub pipeline: f64,
    /// The messages of every member together, in multiples of the busiest member's: the
    /// team size where every member works alike (a ring, recursive doubling, an
    /// all-to-all), 2 for a flat broadcast (the root's n − 1 sends and the others' n − 1
    /// receipts), a tree's over its root's. Where members outnumber the processors they
    /// run on, all of them are those processors' work (0 counts as 1).
    pub all_members: f64,
}

/// How many back-to-back calls the model spreads a pipeline's fill over: a call is priced
/// as one of this many in a row, so that a chain or a linear scan wins where its depth is
/// a small part of such a loop (16 members: 15 hops over 16 calls, as `bench coll`
/// measured them fastest) and gives way to log-depth algorithms among hundreds of members
/// (a broadcast among 1024 members alone would wait for 1023 hops). Each member of the
/// pipeline costs a message (it receives a call and passes it on).
pub const PIPELINED_CALLS: f64 = 16.0;

/// The machine parameters of the cost model: microseconds per event and bandwidths in
/// GB/s (10⁹ bytes per second). Values measured on a host are kept per team size by
/// `tessera tune --calibrate`.
///
/// ```
/// use tessera::model::team::{MachineParams, Shape};
/// use tessera::{Algorithm, Collective};
/// let p = MachineParams::DEDICATED;
/// // Sixteen members with a core each: the dissemination barrier's 4 rounds beat the flat
/// // barrier's 30 messages through one member.
/// let shape = Shape { members: 16, bytes: 0, radix: 2 };
/// let diss = p.predict(Collective::Barrier, Algorithm::DISSEMINATION, shape, true).unwrap();
/// let flat = p.predict(Collective::Barrier, Algorithm::FLAT, shape, true).unwrap();
/// assert!(diss < flat);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct MachineParams {
    /// One synchronising round: a signal and the wait that sees it (µs).
    pub round_us: f64,
    /// One level of a reduction or gather tree (µs).
    pub tree_round_us: f64,
    /// The fixed cost of a message at the member that sends or receives it (µs).
    pub message_us: f64,
    /// Copy bandwidth of short messages (below 16 KiB) through the channel (GB/s).
    pub copy_gbps: f64,
    /// Bandwidth of a long message: read directly from its sender where the members can
    /// (one reader per sender, as along a chain), else the channel's copies (GB/s).
    pub long_gbps: f64,
    /// How many members reading one member's long messages proceed at once (1 where
    /// their reads queue, as on the 16-core host; 2–3 on the 2-core host).
    pub readers: f64,
    /// Bandwidth of short puts into destinations (GB/s).
    pub put_gbps: f64,
    /// Bandwidth of long puts (GB/s).
    pub long_put_gbps: f64,
    /// One local block copy, packing or unpacking (µs).
    pub block_copy_us: f64,
    /// The processors the team's members run on where they outnumber them (the crowded
    /// regime): a call takes at least the messages of every member together over this
    /// many ([`Work::all_members`]), and a pipeline's members wait to be scheduled. None
    /// where each member has a processor of its own. A team sets it to its host's
    /// processors; a calibration records the host it measured.
    #[serde(default)]
    pub cores: Option<usize>,
}

impl MachineParams {
    /// Calibrated on a 16-core Intel Xeon (Emerald Rapids class, family 6 model 207,
    /// AVX-512, one socket) with 16 ranks, one per core: the parameters for hosts where
    /// every rank has a core.
    pub const DEDICATED: MachineParams = MachineParams {
        round_us: 0.538,
        tree_round_us: 0.3085,
        message_us: 0.1679,
        copy_gbps: 9.383,
        long_gbps: 11.62,
        readers: 1.074,
        put_gbps: 13.34,
        long_put_gbps: 18.76,
        block_copy_us: 0.0612,
        cores: None,
    };

    /// Calibrated on a 2-core AMD EPYC (Zen 4, AVX-512) with 8 ranks, each batch timed on
    /// its slowest member: the parameters for hosts whose ranks outnumber their
    /// processors. A round there waits for the partner to be scheduled (6.6 µs), while a
    /// message costs less than with a core each: a sender writes several before its
    /// receivers run. On the recorded tables of both 2-core hosts (crowded, 4 and 8 ranks)
    /// this set chooses as well as or better than the one it replaced, calibrated on an
    /// Intel Xeon timing rank 0 alone (`tests/cost_model.rs`). Its `cores` are that host's
    /// 2; a team replaces them with its own host's processors.
    pub const CROWDED: MachineParams = MachineParams {
        round_us: 6.570,
        tree_round_us: 0.2407,
        message_us: 0.088,
        copy_gbps: 4.321,
        long_gbps: 1.377,
        readers: 7.0,
        put_gbps: 1.624,
        long_put_gbps: 27.94,
        block_copy_us: 0.06612,
        cores: Some(2),
    };

    /// The built-in parameters for a team: [`MachineParams::CROWDED`] where some host of
    /// the job runs more ranks than it has processors, else [`MachineParams::DEDICATED`].
    pub fn built_in(crowded: bool) -> MachineParams {
        if crowded {
            MachineParams::CROWDED
        } else {
            MachineParams::DEDICATED
        }
    }

    /// Every parameter is a positive, finite number.
    pub fn check(&self) -> crate::Result<()> {
        let fields = [
            ("round_us", self.round_us),
            ("tree_round_us", self.tree_round_us),
            ("message_us", self.message_us),
            ("copy_gbps", self.copy_gbps),
            ("long_gbps", self.long_gbps),
            ("readers", self.readers),
            ("put_gbps", self.put_gbps),
            ("long_put_gbps", self.long_put_gbps),
            ("block_copy_us", self.block_copy_us),
        ];
        for (name, value) in fields {
            if !(value.is_finite() && value > 0.0) {
                return Err(invalid(
                    name,
                    format!("{name} is {value}; it must be a positive number"),
                ));
            }
        }
        if self.cores == Some(0) {
            return Err(invalid(
                "cores",
                "cores is 0; it must be at least 1 (or absent: a core per member)".into(),
            ));
        }
        if self.readers < 1.0 {
            return Err(invalid(
                "readers",
                format!("readers is {}; it must be at least 1", self.readers),
            ));
        }
        Ok(())
    }

    /// Microseconds for `work` with blocks of `bytes` (which decides short or long), where
    /// members read long messages directly (`direct`) or not.
    pub fn price(&self, work: Work, bytes: usize, direct: bool) -> f64 {
        let long = bytes >= DIRECT_FROM;
        // µs per byte at `gbps` GB/s.
        let per_byte = |gbps: f64| 1e-3 / gbps;
        // Long messages read directly: the busiest member's readers proceed up to
        // `readers` at a time, and a message forwarded level by level is read once per
        // level.
        let (channel, levels) = if long && direct {
            let at_once = work.readers.max(1.0).min(self.readers);
            let levels = work.levels * bytes as f64 * per_byte(self.long_gbps);
            (per_byte(self.long_gbps) / at_once, levels)
        } else {
            (per_byte(self.copy_gbps), 0.0)
        };
        let put = if long {
            per_byte(self.long_put_gbps)
        } else {
            per_byte(self.put_gbps)
        };
        // Where members outnumber their processors, every member's messages are theirs.
        let queued = queued(self.cores, &work);
        let busiest = work.messages * self.message_us * queued
            + work.bytes * channel
            + work.block_copies * self.block_copy_us
            + work.bytes_put * put;
        let busiest = busiest.max(levels);
        // Each member of a pipeline passes a call on: a message; where members outnumber
        // their processors, also a wake-up (a round) whenever the member it passes to is
        // not the one its processor runs next.
        let waking = work.pipeline * next_is_elsewhere(self.cores, work.pipeline + 1.0);
        let fill = (work.pipeline * self.message_us + waking * self.round_us) / PIPELINED_CALLS;
        work.rounds * self.round_us + fill + busiest.max(work.tree_rounds * self.tree_round_us)
    }

    /// Predicted microseconds for one call of `op` by `alg` (None where the registry has
    /// no such row, and for [`Algorithm::NATIVE`], which the model does not price).
    pub fn predict(
        &self,
        op: Collective,
        alg: Algorithm,
        shape: Shape,
        direct: bool,
    ) -> Option<f64> {
        let row = super::registry()
            .iter()
            .find(|row| row.op == op && row.algorithm.same_family(alg))?;
        let direct = reads_directly(op, direct);
        Some(self.price(work_of(row, alg, shape), shape.bytes, direct))
    }

    /// The candidate of `op` ([`Collective::candidates`]) with the least predicted time
    /// for `members` and `bytes` (the first in the registry's order on a tie).
    ///
    /// ```
    /// use tessera::model::team::MachineParams;
    /// use tessera::{Algorithm, Collective};
    /// // A 256 KiB broadcast among 16 members with a core each goes down the chain: each
    /// // member forwards the whole message once, where the root of a flat broadcast
    /// // would be read 15 times.
    /// let alg = MachineParams::DEDICATED.choose(Collective::Broadcast, 16, 256 << 10, true);
    /// assert_eq!(alg, Algorithm::CHAIN);
    /// ```
    pub fn choose(&self, op: Collective, members: usize, bytes: usize, direct: bool) -> Algorithm {
        let shape = Shape {
            members,
            bytes,
            radix: 2,
        };
        // The candidates of `Collective::candidates`, walked in place (no list is made:
        // a team prices them whenever a call's size differs from its operation's last).
        let mut best: Option<(f64, Algorithm)> = None;
        let direct = reads_directly(op, direct);
        for row in super::registry().iter().filter(|row| row.op == op) {
            let radices: &[u32] = match row.tuned_radices {
                [] => &[0],
                radices => radices,
            };
            for &k in radices {
                let alg = if k == 0 {
                    row.algorithm
                } else {
                    row.algorithm.with_radix(k)
                };
                let t = self.price(work_of(row, alg, shape), bytes, direct);
                if best.is_none_or(|(b, _)| t < b) {
                    best = Some((t, alg));
                }
            }
        }
        best.map_or(Algorithm::FLAT, |(_, alg)| alg)
    }
}

/// Whether `op`'s long messages are read directly where members can (`direct`): not a
/// reduction's partial results, which travel in chunks (their receiver combines them as
/// they arrive; `schedule::Builder::sends_to_combine`).
fn reads_directly(op: Collective, direct: bool) -> bool {
    direct && op != Collective::Reduce
}

/// What a calibration measures, in the order [`MachineParams::from_probes`] reads the
/// times: each is a loop of calls of one operation by one algorithm at one size, timed as
/// `tessera bench coll` times it (each batch on its slowest member, from a common start).
pub const PROBES: [(Collective, usize, Algorithm); 9] = [
    (Collective::Barrier, 0, Algorithm::DISSEMINATION),
    (Collective::Broadcast, 8, Algorithm::FLAT),
    (Collective::Reduce, 8, Algorithm::BINOMIAL),
    (Collective::Broadcast, 4096, Algorithm::FLAT),
    (Collective::Broadcast, 262_144, Algorithm::CHAIN),
    (Collective::Broadcast, 262_144, Algorithm::FLAT),
    (Collective::BroadcastTo, 4096, Algorithm::FLAT),
    (Collective::BroadcastTo, 262_144, Algorithm::FLAT),
    (Collective::Exchange, 8, Algorithm::bruck(2)),
];

impl MachineParams {
    /// The parameters that make each row's formula reproduce the [`PROBES`]' times
    /// (`us`, microseconds per call, in that order) on a team of `members`: each probe
    /// isolates one parameter given those before it (the barrier a round, the 8-byte
    /// broadcast a message, the 8-byte reduce a tree round, the 4 KiB broadcast the copy
    /// bandwidth, the chain's 256 KiB broadcast a long message's, the flat one how many
    /// readers of one member proceed at once, the puts their bandwidths, the Bruck
    /// all-to-all a block copy). Where members do not read each other's memory directly
    /// (`direct` false), long messages take the copy bandwidth and one reader at a time.
    /// Where they shared `cores` processors (Some: more members than processors), each
    /// probe's messages are counted as [`MachineParams::price`] counts them there.
    ///
    /// ```
    /// use tessera::model::team::{MachineParams, Shape, PROBES};
    /// // Times the built-in parameters predict calibrate back to them (within the few
    /// // bytes each probe also moves): 16 members with a core each, and 8 on 2 cores.
    /// for (p, members) in [(MachineParams::DEDICATED, 16), (MachineParams::CROWDED, 8)] {
    ///     let us: Vec<f64> = PROBES
    ///         .iter()
    ///         .map(|&(op, bytes, alg)| {
    ///             let shape = Shape { members, bytes, radix: 2 };
    ///             p.predict(op, alg, shape, true).unwrap()
    ///         })
    ///         .collect();
    ///     let back = MachineParams::from_probes(members, p.cores, true, &us).unwrap();
    ///     assert!((back.round_us - p.round_us).abs() < 1e-9);
    ///     assert!((back.copy_gbps / p.copy_gbps - 1.0).abs() < 0.01);
    ///     assert!((back.long_put_gbps / p.long_put_gbps - 1.0).abs() < 0.01);
    ///     assert_eq!(back.cores, p.cores);
    /// }
    /// ```
    pub fn from_probes(
        members: usize,
        cores: Option<usize>,
        direct: bool,
        us: &[f64],
    ) -> crate::Result<MachineParams> {
        if members < 2 {
            return Err(invalid(
                "members",
                "a calibration needs a team of at least 2 members".into(),
            ));
        }
        if us.len() != PROBES.len() || us.iter().any(|t| !(t.is_finite() && *t > 0.0)) {
            return Err(invalid(
                "us",
                format!(
                    "a calibration needs {} positive times, one per probe",
                    PROBES.len()
                ),
            ));
        }
        let work: Vec<Work> = PROBES
            .iter()
            .map(|&(op, bytes, alg)| {
                let row = super::registry()
                    .iter()
                    .find(|r| r.op == op && r.algorithm.same_family(alg))
                    .expect("every probe is a registry row");
                let shape = Shape {
                    members,
                    bytes,
                    radix: 2,
                };
                work_of(row, alg, shape)
            })
            .collect();
        // Where members outnumber the processors (`cores`), each probe's messages are
        // counted as `price` counts them.
        let sent = |w: &Work| w.messages * queued(cores, w);
        // Floors keep a probe that measured faster than the parameters before it explain
        // from giving a zero or negative parameter.
        const FLOOR_US: f64 = 1e-4;
        const MOST_GBPS: f64 = 1e4;
        let round_us = (us[0] / work[0].rounds).max(FLOOR_US);
        // A probe's time less its rounds.
        let own = |i: usize| us[i] - work[i].rounds * round_us;
        let message_us = (own(1) / sent(&work[1])).max(FLOOR_US);
        let tree_round_us = (us[2] / work[2].tree_rounds).max(FLOOR_US);
        let gbps = |t: f64, w: &Work, bytes: f64| {
            let per_byte = (t - sent(w) * message_us) / bytes;
            if per_byte > 0.0 {
                (1e-3 / per_byte).min(MOST_GBPS)
            } else {
                MOST_GBPS
            }
        };
        let copy_gbps = gbps(own(3), &work[3], work[3].bytes);
        let (long_gbps, readers) = if direct {
            // The chain's rounds come first: its chunks after the first wait a round each.
            let long = gbps(own(4), &work[4], work[4].bytes);
            // The flat broadcast's n − 1 readers of one root: as long as one reader after
            // another would take, over what it took.
            let w = &work[5];
            let alone = w.bytes * 1e-3 / long;
            let took = (own(5) - sent(w) * message_us).max(FLOOR_US);
            (long, (alone / took).clamp(1.0, w.readers.max(1.0)))
        } else {
            (copy_gbps, 1.0)
        };
        let put_gbps = gbps(own(6), &work[6], work[6].bytes_put);
        let long_put_gbps = gbps(own(7), &work[7], work[7].bytes_put);
        let w = &work[8];
        let block_copy_us = ((own(8) - sent(w) * message_us - w.bytes * 1e-3 / copy_gbps)
            / w.block_copies)
            .max(FLOOR_US);
        let params = MachineParams {
            round_us,
            tree_round_us,
            message_us,
            copy_gbps,
            long_gbps,
            readers,
            put_gbps,
            long_put_gbps,
            block_copy_us,
            cores,
        };
        params.check()?;
        Ok(params)
    }
}

/// How many times the busiest member's messages a call's take where members share
/// `cores` processors: every member's messages over the processors, at least 1.
fn queued(cores: Option<usize>, work: &Work) -> f64 {
    cores.map_or(1.0, |cores| {
        (work.all_members.max(1.0) / cores as f64).max(1.0)
    })
}

/// Where `members` share `cores` processors, k to a processor: the chance that the member
/// a waiting member hands its processor to is not the one a pipeline passes its call to
/// next, 1 − 1/(k − 1) (none with at most two to a processor, where the other member is
/// the next one: a chain among 4 ranks on 2 cores is the fastest 8-byte broadcast there;
/// among 8 it took 1.6 times a binomial tree's time).
fn next_is_elsewhere(cores: Option<usize>, members: f64) -> f64 {
    cores.map_or(0.0, |cores| {
        let k = members / cores as f64;
        if k > 2.0 {
            1.0 - 1.0 / (k - 1.0)
        } else {
            0.0
        }
    })
}

/// The work of `row`'s formula for `alg` (the row's family at its radix) on `shape`.
fn work_of(row: &super::Row, alg: Algorithm, shape: Shape) -> Work {
    (row.work)(Shape {
        radix: alg.radix().map_or(2, |k| k as usize),
        ..shape
    })
}

/// A parameter or calibration input out of range.
fn invalid(argument: &'static str, why: String) -> crate::Error {
    CoreError::BadArgument {
        call: "MachineParams",
        argument,
        why,
    }
    .into()
}

// ----- what the formulas share (each row's formula is beside its rounds, in `algorithms`)

/// ⌈log_k n⌉ (0 for n ≤ 1).
pub(super) fn ceil_log(n: usize, k: usize) -> usize {
    let (mut rounds, mut reach) = (0, 1usize);
    while reach < n {
        reach = reach.saturating_mul(k.max(2));
        rounds += 1;
    }
    rounds
}

/// The children of a k-nomial tree's root over n members (the tree the algorithms run).
pub(super) fn root_children(n: usize, k: usize) -> usize {
    super::topology::Knomial::new(k, n.max(1), 0).children.len()
}

/// Per-shape quantities the formulas share.
pub(super) struct Terms {
    pub(super) n: f64,
    /// n − 1
    pub(super) others: f64,
    pub(super) m: f64,
    /// ⌈log₂ n⌉
    pub(super) log2: f64,
    /// Channel chunks of one block.
    pub(super) chunks: f64,
    /// Extra rounds where n is not a power of two (the fold of recursive doubling).
    pub(super) fold: f64,
}

pub(super) fn terms(s: Shape) -> Terms {
    let n = s.members.max(1);
    Terms {
        n: n as f64,
        others: (n - 1) as f64,
        m: s.bytes as f64,
        log2: ceil_log(n, 2) as f64,
        chunks: s.bytes.div_ceil(DEFAULT_CHUNK).max(1) as f64,
        fold: if n.is_power_of_two() { 0.0 } else { 2.0 },
    }
}

/// `count` messages of `m` bytes each from (or to) one member.
pub(super) fn messages(t: &Terms, count: f64, bytes: f64) -> Work {
    Work {
        messages: count * t.chunks,
        bytes,
        ..Work::default()
    }
}

/// [`Work::all_members`] of a tree or of a call with one busiest member: `all` units of
/// work among every member together over `busiest`'s, at most the team size.
pub(super) fn tree_spread(t: &Terms, all: f64, busiest: f64) -> f64 {
    (all / busiest.max(1.0)).clamp(1.0, t.n)
}
