//! The collective cost model against recorded measurements: `tessera bench coll` tables
//! of every fixed algorithm at every size (tests/data), from a 16-core host with a core
//! per rank (16 and 8 ranks; four instances) and three 2-core hosts, an Intel Xeon (2
//! ranks, and 4 to 32 where ranks share the cores), an AMD Zen 4 and an AMD Zen 2 (4 and
//! 8). For each
//! table the parameters are calibrated from the table's own probe points, as `tessera
//! tune --calibrate` measures them, and the model's choice at every point is judged by
//! the measured time of what it chose against the fastest algorithm.

use std::collections::BTreeMap;

use tessera::model::team::{MachineParams, Shape, PROBES};
use tessera::{Algorithm, Collective};

/// (operation, bytes) -> algorithm -> measured µs per call, and the team size.
struct Table {
    ranks: usize,
    /// Whether the ranks outnumbered the host's processors.
    crowded: bool,
    points: BTreeMap<(String, usize), BTreeMap<String, f64>>,
}

fn table(csv: &str) -> Table {
    let mut points: BTreeMap<(String, usize), BTreeMap<String, f64>> = BTreeMap::new();
    let mut ranks = 0;
    for line in csv.lines().filter(|l| !l.starts_with('#')).skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        ranks = f[2].parse().unwrap();
        points
            .entry((f[0].to_string(), f[1].parse().unwrap()))
            .or_default()
            .insert(f[3].to_string(), f[4].parse().unwrap());
    }
    let crowded = csv.lines().next().is_some_and(|l| l.contains("(crowded)"));
    Table {
        ranks,
        crowded,
        points,
    }
}

fn op(name: &str) -> Collective {
    Collective::ALL
        .into_iter()
        .find(|c| c.name() == name)
        .unwrap()
}

/// The parameters `tessera tune --calibrate` would have measured on the table's host.
fn calibrate(t: &Table) -> MachineParams {
    let us: Vec<f64> = PROBES
        .iter()
        .map(|&(o, bytes, alg)| t.points[&(o.name().to_string(), bytes)][&alg.to_string()])
        .collect();
    MachineParams::from_probes(t.ranks, cores(t), true, &us).unwrap()
}

/// The processors the table's ranks shared where they outnumbered them: the 2-core hosts'
/// crowded tables, which say so in their first line.
fn cores(t: &Table) -> Option<usize> {
    t.crowded.then_some(2)
}

/// The model's choice among the algorithms a table measured: its choice, or where that is
/// a row added after the table was recorded, the measured algorithm it predicts fastest.
fn measured_choice(
    p: &MachineParams,
    name: &str,
    ranks: usize,
    bytes: usize,
    measured: &BTreeMap<String, f64>,
) -> String {
    let alg = p.choose(op(name), ranks, bytes, true).to_string();
    if measured.contains_key(&alg) {
        return alg;
    }
    let shape = Shape {
        members: ranks,
        bytes,
        radix: 2,
    };
    // In the registry's order, the first on a tie, as `choose` takes them.
    let mut best: Option<(f64, Algorithm)> = None;
    for alg in op(name).candidates() {
        if measured.contains_key(&alg.to_string()) {
            let t = p.predict(op(name), alg, shape, true).unwrap();
            if best.is_none_or(|(b, _)| t < b) {
                best = Some((t, alg));
            }
        }
    }
    best.unwrap().1.to_string()
}

/// At how many points the model's choice measured within 10 % of the fastest algorithm,
/// of how many, and the worst ratio.
fn judge(t: &Table, p: &MachineParams) -> (usize, usize, f64) {
    let (mut within, mut worst) = (0, 1.0f64);
    for ((name, bytes), measured) in &t.points {
        let alg = measured_choice(p, name, t.ranks, *bytes, measured);
        let chosen = measured[&alg];
        let best = measured.values().copied().fold(f64::INFINITY, f64::min);
        within += usize::from(chosen <= 1.10 * best);
        worst = worst.max(chosen / best);
    }
    (within, t.points.len(), worst)
}

const DEDICATED_16: &str = include_str!("data/coll-16-cores-16-ranks.csv");
const DEDICATED_8: &str = include_str!("data/coll-16-cores-8-ranks.csv");
const TWO_ON_2: &str = include_str!("data/coll-2-cores-2-ranks.csv");
/// The Intel host's crowded tables as first recorded, each batch timed on rank 0 (a
/// broadcast's root, which only sends: a chain's root goes on to the next call long before
/// its last member has the message).
const CROWDED_4: &str = include_str!("data/coll-2-cores-4-ranks.csv");
const CROWDED_8: &str = include_str!("data/coll-2-cores-8-ranks.csv");
/// A 2-core Intel Xeon of the same kind (family 6 model 167), each batch timed on its
/// slowest member, with 4, 8, 16 and 32 ranks.
const INTEL_4: &str = include_str!("data/coll-2-cores-4-ranks-slowest.csv");
const INTEL_8: &str = include_str!("data/coll-2-cores-8-ranks-slowest.csv");
const INTEL_16: &str = include_str!("data/coll-2-cores-16-ranks.csv");
const INTEL_32: &str = include_str!("data/coll-2-cores-32-ranks.csv");
/// The same 16-core host type, another instance and a later build (`b786142`).
const SECOND_16: &str = include_str!("data/coll-16-cores-16-ranks-second.csv");
const SECOND_8: &str = include_str!("data/coll-16-cores-8-ranks-second.csv");

/// Calibrated on each table's own probes, the model's choice is within 10 % of the
/// fastest algorithm at 89 % of the points or more of every table with a core per rank
/// and never more than 1.6× slower. (The rules the model replaced, fitted on 2 cores,
/// managed 42 of 78 points on 16 cores, the worst 8.7×.) The crowded tables hold their
/// own figures (`crowded_tables_keep_their_figures`).
#[test]
fn calibrated_choices_are_near_the_fastest_on_every_recorded_host() {
    for (name, csv) in [
        ("16 cores, 16 ranks", DEDICATED_16),
        ("16 cores, 8 ranks", DEDICATED_8),
        ("2 cores, 2 ranks", TWO_ON_2),
    ] {
        let t = table(csv);
        let (within, points, worst) = judge(&t, &calibrate(&t));
        assert_eq!(points, 78, "{name}");
        assert!(
            within * 100 >= 89 * points && worst < 1.6,
            "{name}: within 10% at {within} of {points}, worst {worst:.2}x"
        );
    }
}

/// The built-in parameter sets are those calibrations: a core per rank from 16 ranks on
/// 16 cores, crowded from 8 ranks on 2 cores (the Zen 4 host's table); each serves the
/// other team sizes of its regime about as well as their own calibration would.
#[test]
fn the_built_in_sets_are_the_recorded_calibrations_and_carry_over() {
    let close = |a: &MachineParams, b: &MachineParams| {
        let pairs = [
            (a.round_us, b.round_us),
            (a.tree_round_us, b.tree_round_us),
            (a.message_us, b.message_us),
            (a.copy_gbps, b.copy_gbps),
            (a.long_gbps, b.long_gbps),
            (a.readers, b.readers),
            (a.put_gbps, b.put_gbps),
            (a.long_put_gbps, b.long_put_gbps),
            (a.block_copy_us, b.block_copy_us),
        ];
        pairs.iter().all(|(x, y)| (x / y - 1.0).abs() < 0.01)
    };
    assert!(close(
        &calibrate(&table(DEDICATED_16)),
        &MachineParams::DEDICATED
    ));
    assert!(close(
        &calibrate(&table(ZEN4_CROWDED_8)),
        &MachineParams::CROWDED
    ));
    assert_eq!(MachineParams::CROWDED.cores, Some(2));
    assert_eq!(MachineParams::DEDICATED.cores, None);
    for (name, csv, params) in [
        ("16 cores, 8 ranks", DEDICATED_8, MachineParams::DEDICATED),
        ("2 cores, 2 ranks", TWO_ON_2, MachineParams::DEDICATED),
        ("2 cores, 4 ranks", CROWDED_4, MachineParams::CROWDED),
    ] {
        let (within, points, worst) = judge(&table(csv), &params);
        assert!(
            within * 100 >= 88 * points && worst < 1.6,
            "{name} with the built-in set: within 10% at {within} of {points}, worst {worst:.2}x"
        );
    }
}

/// Choices that follow from the parameters, each measured in the tables: with a core per
/// rank, long broadcasts go down the chain (flat took 6.8× as long at 256 KiB on 16
/// ranks) and the barrier disseminates; where ranks share cores a round costs a wake-up,
/// so the flat barrier's two rounds beat dissemination's three at 8 ranks. Among hundreds
/// of members every choice has logarithmic depth.
#[test]
fn the_parameters_decide_the_regime_s_choices() {
    let d = MachineParams::DEDICATED;
    let c = MachineParams::CROWDED;
    assert_eq!(
        d.choose(Collective::Broadcast, 16, 256 << 10, true),
        Algorithm::CHAIN
    );
    assert_eq!(
        d.choose(Collective::Barrier, 16, 0, true),
        Algorithm::DISSEMINATION
    );
    assert_eq!(
        d.choose(Collective::Barrier, 8, 0, true),
        Algorithm::DISSEMINATION
    );
    assert_eq!(c.choose(Collective::Barrier, 8, 0, true), Algorithm::FLAT);
    // Where members share 2 processors, every member's messages are theirs: an
    // all-at-once allgather among 8 members (fastest in the tables) gives way to Bruck's
    // dissemination by 32 (1.34x slower there); and a chain's members wait to be
    // scheduled beyond two to a processor: the chain broadcasts 8 bytes among 4 members
    // (fastest there), not among 16.
    let allgather = |n| c.choose(Collective::Allgather, n, 8, true);
    assert_eq!(allgather(8), Algorithm::ALL_BROADCAST);
    assert_eq!(allgather(32), Algorithm::bruck(2));
    assert_eq!(allgather(64), Algorithm::bruck(2));
    assert_eq!(
        c.choose(Collective::Broadcast, 4, 8, true),
        Algorithm::CHAIN
    );
    assert_ne!(
        c.choose(Collective::Broadcast, 16, 8, true),
        Algorithm::CHAIN
    );
    // The all-at-once allreduce's one wake-up beats recursive doubling's two among 4
    // crowded members (2.05 against 2.42 us at 8 bytes), but not its n(n - 1) messages
    // among 16.
    let allreduce = |n| c.choose(Collective::Allreduce, n, 8, true);
    assert_eq!(allreduce(4), Algorithm::ALL_BROADCAST);
    assert_eq!(allreduce(16), Algorithm::RECURSIVE_DOUBLING);
    // Without processors to share, no queue: the same team of 32 with a core each.
    let free = MachineParams { cores: None, ..c };
    assert_eq!(
        free.choose(Collective::Allgather, 32, 8, true),
        Algorithm::ALL_BROADCAST
    );
    // A pipeline's depth counts where it is long: 8-byte broadcasts and scans take the
    // chain at 16 members (measured fastest in a loop) and log-depth algorithms among
    // hundreds, where one call alone would wait for every member in turn.
    assert_eq!(
        d.choose(Collective::Broadcast, 16, 8, true),
        Algorithm::CHAIN
    );
    for (params, n) in [(d, 256), (d, 1024), (c, 1024)] {
        let pick = |op| params.choose(op, n, 8, true);
        assert!(
            !matches!(
                pick(Collective::Broadcast),
                Algorithm::CHAIN | Algorithm::FLAT
            ),
            "{n}: {}",
            pick(Collective::Broadcast)
        );
        assert_eq!(pick(Collective::Barrier), Algorithm::DISSEMINATION, "{n}");
        assert!(
            matches!(
                pick(Collective::Allreduce),
                Algorithm::RECURSIVE_DOUBLING | Algorithm::RABENSEIFNER
            ),
            "{n}: {}",
            pick(Collective::Allreduce)
        );
    }
    assert_eq!(
        d.choose(Collective::Scan, 1024, 8, true),
        Algorithm::RECURSIVE_DOUBLING
    );
    // Predictions grow with the message and with the team.
    let t = |n, bytes| {
        d.predict(
            Collective::Allreduce,
            Algorithm::RECURSIVE_DOUBLING,
            Shape {
                members: n,
                bytes,
                radix: 2,
            },
            true,
        )
        .unwrap()
    };
    assert!(t(16, 8) < t(16, 4096) && t(8, 4096) < t(16, 4096));
    // The conduit's own collectives are not priced.
    assert_eq!(
        d.predict(
            Collective::Allreduce,
            Algorithm::NATIVE,
            Shape {
                members: 4,
                bytes: 8,
                radix: 2
            },
            true
        ),
        None
    );
}

/// On a second instance of the 16-core host the model does worse than on the tables it
/// was fitted to: calibrated on the instance's own probes 67 of 78 points within 10 % at
/// 16 ranks (worst 2.47×, the 512-byte scatter: flat against binomial) and 69 at 8; with
/// the built-in set 70 and 66 (worst 1.81×). Its recurring misses there: the 32 KiB
/// all-to-all (flat, where pairwise is 1.14-1.17× faster; at 1 MiB flat wins), the 32 KiB
/// scatter (flat against binomial, 1.14-1.41×), the single-address broadcast of 32 KiB
/// (radix 2 against 8) and small reductions (the 3- and 4-nomial trees against binomial
/// or 8-nomial). This holds the model to that instance's figures, so a change that loses
/// more of them shows.
#[test]
fn a_second_instance_of_the_16_core_host_keeps_its_figures() {
    holds_figures("16 ranks", SECOND_16, (67, 2.5), (70, 1.9));
    holds_figures("8 ranks", SECOND_8, (69, 2.5), (66, 1.9));
}

/// Assert that on the table `csv` the model, calibrated on the table's own probes, is
/// within 10 % of the fastest algorithm at `own.0` points or more and never `own.1` times
/// slower or worse; with the built-in set of the table's regime, `built_in` likewise.
fn holds_figures(name: &str, csv: &str, own: (usize, f64), built_in: (usize, f64)) {
    let t = table(csv);
    for (label, params, (at_least, worst_below)) in [
        ("calibrated on its probes", calibrate(&t), own),
        ("built-in set", MachineParams::built_in(t.crowded), built_in),
    ] {
        let (within, points, worst) = judge(&t, &params);
        assert_eq!(points, 78, "{name}");
        assert!(
            within >= at_least && worst < worst_below,
            "{name}, {label}: within 10% at {within} of {points}, worst {worst:.2}x"
        );
    }
}

/// The same host type's third instance (`12cb734`), where `bench coll` timed every batch
/// on its slowest member (the earlier tables timed rank 0: a broadcast's root, which only
/// sends). Calibrated on its own probes the model is within 10 % at 68 of 78 points at 16
/// ranks and at 8 (worst 1.52× and 1.37×), with the built-in set 67 and 68 (1.52×, 1.32×).
/// The misses recur: all-to-alls of 32-256 KiB (flat, where pairwise is 1.2-1.3× faster;
/// on two instances flat won at 256 KiB on 16 ranks and at 1 MiB, so one more bandwidth
/// parameter fitted here would turn those), small reductions (the 3-nomial tree against
/// binomial or 4-nomial, 1.37-1.52×), the single-address broadcast's radix (1.11-1.32×),
/// the 32 KiB scatter (flat against binomial, 1.13-1.22×).
const THIRD_16: &str = include_str!("data/coll-16-cores-16-ranks-third.csv");
const THIRD_8: &str = include_str!("data/coll-16-cores-8-ranks-third.csv");

#[test]
fn a_third_instance_timed_on_the_slowest_member_keeps_its_figures() {
    holds_figures("16 ranks", THIRD_16, (68, 1.6), (67, 1.6));
    holds_figures("8 ranks", THIRD_8, (68, 1.6), (68, 1.6));
}

/// A reduction's partial results travel in chunks whether or not members read each other
/// directly, so the model prices a long reduce alike either way; a long broadcast, which
/// is read directly, costs less where members can.
#[test]
fn a_long_reduce_is_priced_in_chunks_either_way() {
    let p = MachineParams::DEDICATED;
    let shape = Shape {
        members: 8,
        bytes: 1 << 20,
        radix: 2,
    };
    let price = |op, direct| p.predict(op, Algorithm::BINOMIAL, shape, direct).unwrap();
    assert_eq!(
        price(Collective::Reduce, true),
        price(Collective::Reduce, false)
    );
    assert!(price(Collective::Broadcast, true) < price(Collective::Broadcast, false));
}

/// A fourth instance (`00e3ff5`: small calls straight on the team channel, each batch
/// timed on its slowest member). Calibrated on its own probes the model is within 10 % at
/// 70 of 78 points at 16 ranks and 66 at 8 (worst 1.55× and 1.44×), with the built-in set
/// 69 and 64 (1.55×, 1.45×). The same misses as on the other three: the 32 KiB all-to-all
/// (flat, where pairwise is 1.14-1.26× faster on all four instances at both team sizes)
/// and the 256 KiB one at 8 ranks (1.12-1.30× on all four), the 32 KiB scatter (flat
/// against binomial, 1.21-1.35×), the 8- and 64-byte all-to-all at 16 ranks (flat against
/// Bruck's radix 4, 1.45-1.55×), small reductions (the 3-nomial tree against binomial,
/// 1.21-1.45×) and at 8 ranks the single-address broadcast's radix (1.13-1.23×).
const FOURTH_16: &str = include_str!("data/coll-16-cores-16-ranks-fourth.csv");
const FOURTH_8: &str = include_str!("data/coll-16-cores-8-ranks-fourth.csv");

#[test]
fn a_fourth_instance_with_small_calls_on_the_channel_keeps_its_figures() {
    holds_figures("16 ranks", FOURTH_16, (70, 1.6), (69, 1.6));
    holds_figures("8 ranks", FOURTH_8, (66, 1.5), (64, 1.5));
}

/// The 2-core AMD Zen 4 host with 8 and 4 ranks (crowded), each batch timed on its slowest
/// member (`79ee960`; the Intel host's crowded tables above timed rank 0, a broadcast's
/// root, which only sends). The built-in crowded set is this host's 8-rank calibration;
/// the one it replaced (calibrated on the Intel host's 8-rank table) chose within 10 % at
/// 65 and 66 of 78 points here (worst 3.22× and 4.64×), 70 and 74 on the Intel host's
/// tables, where this set has 72 and 76. What it still misses here: the single-address
/// broadcast of 256 KiB-1 MiB by radix 2 (measured 497-593 µs at 1 MiB, where radix 4 or
/// 8 and flat take 107-228: 2.0-4.6×; that row is bimodal between runs on this host, 111
/// µs in one of three later sweeps at 4 ranks and 510 in two), the 8- and 64-byte
/// broadcast (the chain, 1.3-1.4× the 3-nomial tree or flat) and reductions' radix
/// (1.1-2.05×); where the set before missed most, long broadcasts at 8 ranks (the
/// 3-nomial tree, 2.5-3.2× flat) and small scatters (binomial, 1.7-3.1× flat), it now
/// chooses the fastest.
const ZEN4_CROWDED_8: &str = include_str!("data/coll-2-cores-8-ranks-zen4.csv");
const ZEN4_CROWDED_4: &str = include_str!("data/coll-2-cores-4-ranks-zen4.csv");

/// The 2-core AMD Zen 2 host (AVX2 only) with 8 and 4 ranks (crowded), each batch timed on
/// its slowest member (`b0593cf`, best of two sweeps at 37-40 ns crossings). The built-in
/// crowded set, the Zen 4 host's, chooses within 10 % at 73 and 70 of 78 points here. What
/// it misses most: the 8-byte broadcast at 4 ranks (the chain, 1.7x flat), the 32 KiB
/// gather at 4 (flat, 1.7x binomial), the 32 KiB allreduce at 4 (recursive doubling, 1.2x
/// Rabenseifner's), the small allgathers at 4 (all-broadcast, 1.1x Bruck's) and at 8 the
/// barrier (flat, 1.1x dissemination) and reductions' radix (1.1x). A pipeline's fill
/// priced at a round per member (each waiting to be scheduled) turns the 8-rank
/// broadcasts here from the chain to trees, where the chain took 2.2-2.3x the binomial
/// tree's time at 8 and 64 bytes (69 -> 73 points), but loses the 4-rank tables' points,
/// where a chain is fastest: the model prices that wake-up only where more than two
/// members share a processor (`MachineParams::cores`). The round priced by the ranks
/// waiting per core (a third of the 8-rank round at 4 ranks, as the dissemination barrier
/// measures: 1.5-1.9 us a round at 4 ranks, 5-6.6 at 8) gained one point on the 4-rank
/// table here and lost one on the Intel one, and was not kept.
const ZEN2_CROWDED_8: &str = include_str!("data/coll-2-cores-8-ranks-zen2.csv");
const ZEN2_CROWDED_4: &str = include_str!("data/coll-2-cores-4-ranks-zen2.csv");

/// The built-in crowded set on every 2-core host's tables. On the Intel host's tables timed
/// at rank 0 it loses the 8-rank table's 8-byte to 32 KiB broadcasts (72 -> 68 points, worst
/// 1.49x -> 1.81x): timed at the root, the chain took 0.16 us per 8-byte call there, and
/// the model now prices its members' wake-ups; on the same host type timed on the slowest
/// member (`crowded_tables_of_4_to_32_ranks_keep_their_figures`) the chain took 0.21 us
/// against the binomial tree's 0.14.
#[test]
fn the_crowded_set_holds_its_figures_on_every_2_core_host() {
    for (name, csv, at_least, worst_below) in [
        ("Zen 4, 8 ranks", ZEN4_CROWDED_8, 70, 2.8),
        ("Zen 4, 4 ranks", ZEN4_CROWDED_4, 67, 4.7),
        ("Zen 2, 8 ranks", ZEN2_CROWDED_8, 73, 1.2),
        ("Zen 2, 4 ranks", ZEN2_CROWDED_4, 70, 1.8),
        ("Intel timed at rank 0, 8 ranks", CROWDED_8, 68, 1.9),
        ("Intel timed at rank 0, 4 ranks", CROWDED_4, 76, 1.2),
    ] {
        let (within, points, worst) = judge(&table(csv), &MachineParams::CROWDED);
        assert_eq!(points, 78, "{name}");
        assert!(
            within >= at_least && worst < worst_below,
            "{name}, built-in crowded set: within 10% at {within} of {points}, worst {worst:.2}x"
        );
    }
}

/// The Intel host's crowded tables timed on the slowest member, 4 to 32 ranks on 2 cores
/// (best of two sweeps each). Pricing every member's messages on the 2 processors turns
/// the allgather from all-broadcast to Bruck's from 24 members (at 32, all-broadcast took
/// 1.34x Bruck's at 8 bytes), and pricing a chain's wake-ups turns 8-byte broadcasts
/// from the chain to trees from 8 members (at 32 the chain took 4x flat): with the
/// built-in set, 67 and 60 points at 16 and 32 ranks (worst 2.14x and 2.75x), where the
/// model without either had 64 and 57 (3.97x and 3.99x), and 70 at 8 (68 before). What
/// it still misses there: long broadcasts (a k-nomial tree, where flat took 0.36-0.47 of
/// its time at 256 KiB and 1 MiB), the radix of long reductions (binomial, where the
/// 8-nomial tree took 0.52-0.75 of its time) and of the single-address broadcast.
#[test]
fn crowded_tables_of_4_to_32_ranks_keep_their_figures() {
    holds_figures("4 ranks", INTEL_4, (71, 1.4), (71, 1.4));
    holds_figures("8 ranks", INTEL_8, (69, 1.75), (70, 1.75));
    holds_figures("16 ranks", INTEL_16, (70, 2.0), (67, 2.2));
    holds_figures("32 ranks", INTEL_32, (64, 1.7), (60, 2.8));
    // The Intel tables timed at rank 0, calibrated on their own probes.
    holds_figures("rank 0, 4 ranks", CROWDED_4, (76, 1.2), (76, 1.2));
    holds_figures("rank 0, 8 ranks", CROWDED_8, (66, 1.85), (68, 1.85));
}
