//! Message counts that show the collectives scale: at 64, 256 and 1024 ranks (threads
//! conduit, many more ranks than cores), a barrier, a broadcast and an allreduce of 8
//! bytes send O(log P) messages per rank, as the statistics count them, under the choice
//! the cost model makes for a node with a core per rank (`default_algorithm`): a root
//! sending to every member (flat) would send P − 1 messages and fail here. At 1024 ranks
//! that choice must be of logarithmic depth (a chain, which the model prefers for a
//! broadcast among tens of members in a loop of calls, would pass 1023 hops). The choice
//! this crowded run makes for itself is counted too: for the broadcast and the allreduce
//! it must be as frugal; for
//! the barrier the crowded model may pick the flat one, where a round costs a pass of the
//! scheduler over every rank sharing a core (`docs/PERFORMANCE.md`, "Many ranks on a
//! node": flat 3.4x faster than dissemination at 256 ranks on 2 cores).

use std::sync::Mutex;
use std::time::Duration;
use tessera::coll::{Allreduce, Barrier, Broadcast};
use tessera::Blocking;

use tessera::core::report::RankStats;
use tessera::{Algorithm, Collective, Job, Op, Team, Traffic};

/// Messages a rank has sent so far: collective messages (puts, signals, headers), long
/// messages read directly, and the core barrier's signals.
fn messages(stats: &RankStats) -> u64 {
    stats
        .traffic
        .iter()
        .filter(|t| {
            matches!(
                t.kind,
                Traffic::Collective | Traffic::CollectiveRead | Traffic::Barrier
            )
        })
        .map(|t| t.ops)
        .sum()
}

/// Whether `algorithm` finishes `op` in O(log P) rounds with O(log P) messages per rank.
fn log_depth(op: Collective, algorithm: Algorithm) -> bool {
    let knomial = algorithm.with_radix(4) == Algorithm::knomial(4);
    match op {
        Collective::Barrier => {
            knomial || matches!(algorithm, Algorithm::DISSEMINATION | Algorithm::BINOMIAL)
        }
        Collective::Broadcast => knomial || algorithm == Algorithm::BINOMIAL,
        Collective::Allreduce => matches!(
            algorithm,
            Algorithm::RECURSIVE_DOUBLING | Algorithm::RABENSEIFNER | Algorithm::REDUCE_BROADCAST
        ),
        _ => false,
    }
}

const OPS: [Collective; 3] = [
    Collective::Barrier,
    Collective::Broadcast,
    Collective::Allreduce,
];

/// One 8-byte call of `op` on `team`, checked.
fn call(ctx: &tessera::Context, team: &Team, op: Collective) -> tessera::Result<()> {
    match op {
        Collective::Barrier => team.run(Barrier, Blocking),
        Collective::Broadcast => {
            let mut value = [if ctx.rank() == 0 { 42u64 } else { 0 }];
            team.run(Broadcast::in_place(0, &mut value), Blocking)?;
            assert_eq!(value, [42]);
            Ok(())
        }
        _ => {
            let sum = team.run(Allreduce::value(ctx.rank() as u64, Op::Sum), Blocking)?;
            let n = ctx.ranks() as u64;
            assert_eq!(sum, n * (n - 1) / 2);
            Ok(())
        }
    }
}

/// A count of one operation: the algorithm and the most messages any rank sent.
#[derive(Clone, Copy, Debug)]
struct Count {
    op: Collective,
    algorithm: Algorithm,
    most: u64,
}

/// Per operation: the count under the dedicated node's choice, then under this run's own.
fn counts(ranks: usize) -> Vec<(Count, Count)> {
    let dir = tempfile::tempdir().unwrap();
    let dedicated = OPS.map(|op| tessera::model::team::default_algorithm(op, ranks, 8));
    let own = Mutex::new([Algorithm::FLAT; 3]);
    let most = Mutex::new([[0u64; 3]; 2]);
    Job::threads(ranks)
        // Room for the world team's mailboxes (64 KiB per member), which are mapped but
        // only touched where messages arrive.
        .segment(80 << 20)
        .wait_timeout(Duration::from_secs(120))
        .stats(dir.path().join("stats.json"))
        .run(|ctx| {
            let world = Team::world(ctx)?;
            if ctx.rank() == 0 {
                *own.lock().unwrap() = OPS.map(|op| world.algorithm_for(op, 8));
            }
            for (i, op) in OPS.into_iter().enumerate() {
                let forced = world.with_algorithm(op, dedicated[i])?;
                for (which, team) in [&forced, &world].into_iter().enumerate() {
                    ctx.barrier()?;
                    let before = messages(&ctx.stats().expect("statistics are on"));
                    call(ctx, team, op)?;
                    let sent = messages(&ctx.stats().expect("statistics are on")) - before;
                    let mut most = most.lock().unwrap();
                    most[which][i] = most[which][i].max(sent);
                }
            }
            Ok(())
        })
        .unwrap();
    let own = own.into_inner().unwrap();
    let most = most.into_inner().unwrap();
    (0..3)
        .map(|i| {
            let count = |algorithm, most| Count {
                op: OPS[i],
                algorithm,
                most,
            };
            (count(dedicated[i], most[0][i]), count(own[i], most[1][i]))
        })
        .collect()
}

fn check(ranks: usize, count: Count, whose: &str) {
    let depth_matters = ranks >= 1024;
    let Count {
        op,
        algorithm,
        most,
    } = count;
    let log2 = ranks.ilog2() as u64;
    eprintln!("{ranks} ranks, {whose}: {op:?} by {algorithm}, at most {most} messages per rank");
    assert!(
        !depth_matters || log_depth(op, algorithm),
        "{ranks} ranks: {whose} {op:?} is {algorithm}, not of logarithmic depth"
    );
    assert!(
        most >= 1,
        "{ranks} ranks: {op:?} by {algorithm} counted no message"
    );
    assert!(
        most <= 4 * log2,
        "{ranks} ranks: a rank sent {most} messages for one {op:?} of 8 bytes by {algorithm}, more than 4·log2(P) = {}",
        4 * log2
    );
}

#[test]
fn barrier_broadcast_and_allreduce_send_log_p_messages_per_rank_up_to_1024_ranks() {
    for ranks in [64usize, 256, 1024] {
        for (dedicated, own) in counts(ranks) {
            check(ranks, dedicated, "the choice for a core per rank");
            if own.op != Collective::Barrier {
                check(ranks, own, "this crowded run's own choice");
            }
        }
    }
}
