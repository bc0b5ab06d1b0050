//! Communication statistics against programs with a known pattern: every count is what
//! the program did, computed from its loop bounds and sizes, on the threads conduit (in
//! one process) and with peers hidden (every transfer through the conduit's calls, as
//! across hosts). The smp and launcher paths are tested by the command's tests.

use std::time::Duration;
use tessera::coll::{Broadcast, Exchange};
use tessera::Nonblocking;

use tessera::{
    Algorithm, AtomicOp, Blocked, Blocking, Collective, Job, JobStats, Signal, Strided, Team,
    Traffic,
};

const RING_PUTS: usize = 7;
const RING_GETS: usize = 3;
const ATOMICS: usize = 4;
const SIGNALS: usize = 2;
const WORDS: usize = 100;

fn job(ranks: usize, file: &std::path::Path) -> Job {
    Job::threads(ranks)
        .segment(8 << 20)
        .wait_timeout(Duration::from_secs(60))
        .stats(file)
}

/// Each rank puts to its right neighbour, gets from its left one, adds to a counter on
/// rank 0, sends signalling puts to the right and one strided put to the right.
fn ring(hide: bool) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("ring.json");
    let ranks = 5;
    job(ranks, &file)
        .hide_peers(hide)
        .run(|ctx| {
            let buf = ctx.alloc_collective::<u64>(WORDS)?;
            let counter = ctx.alloc_collective::<u64>(1)?;
            let sem = ctx.semaphore_collective()?;
            let (me, n) = (ctx.rank(), ctx.ranks());
            let (right, left) = ((me + 1) % n, (me + n - 1) % n);
            let data = vec![me as u64; WORDS];
            for _ in 0..RING_PUTS {
                ctx.put(buf.on(right), &data, Blocking)?;
            }
            ctx.barrier()?;
            let mut got = vec![0u64; WORDS];
            for _ in 0..RING_GETS {
                ctx.get(buf.on(left), &mut got, Blocking)?;
            }
            for _ in 0..ATOMICS {
                ctx.atomic_fetch(counter.on(0), AtomicOp::Add(1))?;
            }
            for _ in 0..SIGNALS {
                ctx.put(buf.on(right), &data[..10], Signal::Post(sem.on(right)))?;
            }
            sem.wait(ctx, SIGNALS as u64)?;
            // A 4x5 block of a 10-wide local array into the first 4 rows of 20.
            ctx.put(
                buf.on(right),
                Strided {
                    local: &data,
                    local_strides: &[10, 1],
                    remote_strides: &[20, 1],
                    counts: &[4, 5],
                },
                Blocking,
            )?;
            Ok(ctx.barrier()?)
        })
        .unwrap();
    let stats = JobStats::read(&file).unwrap();
    assert_eq!(stats.ranks, ranks);
    assert_eq!(stats.per_rank.len(), ranks);
    for part in &stats.per_rank {
        let me = part.rank;
        let (right, left) = ((me + 1) % ranks, (me + ranks - 1) % ranks);
        let bytes = (8 * WORDS) as u64;
        for peer in (0..ranks).filter(|&p| p != me) {
            let expect = |kind: Traffic| -> (u64, u64) {
                match kind {
                    Traffic::Put if peer == right => (RING_PUTS as u64, RING_PUTS as u64 * bytes),
                    Traffic::Get if peer == left => (RING_GETS as u64, RING_GETS as u64 * bytes),
                    Traffic::Atomic if peer == 0 => (ATOMICS as u64, 8 * ATOMICS as u64),
                    Traffic::SignalPut if peer == right => (SIGNALS as u64, 80 * SIGNALS as u64),
                    Traffic::StridedPut if peer == right => (1, 8 * 20),
                    _ => (0, 0),
                }
            };
            // Every kind but the barrier's (its signals go where its rounds say).
            for kind in Traffic::ALL.into_iter().filter(|&k| k != Traffic::Barrier) {
                assert_eq!(
                    part.to(peer, kind),
                    expect(kind),
                    "rank {me} to {peer}, {kind:?} (peers hidden: {hide})"
                );
            }
        }
        // Seven puts of 800 bytes land in the bucket from 512.
        let puts = part.sizes.iter().find(|h| h.kind == Traffic::Put).unwrap();
        assert!(puts.buckets.contains(&(512, RING_PUTS as u64)), "{puts:?}");
        // Every barrier signals a partner; the job has at least the two above and the
        // end of job's.
        let signals: u64 = (0..ranks).map(|p| part.to(p, Traffic::Barrier).0).sum();
        assert!(signals >= 3, "rank {me}: {signals} barrier signals");
        assert!(part.elapsed_s > 0.0);
    }
    assert_eq!(
        stats.bytes_between(ranks - 1, 0, Traffic::Get),
        (RING_GETS * 8 * WORDS) as u64,
        "rank 0 read from its left neighbour"
    );
    assert_eq!(stats.bytes_between(0, ranks - 1, Traffic::Get), 0);
}

#[test]
fn a_ring_is_counted_exactly() {
    ring(false);
}

#[test]
fn a_ring_is_counted_exactly_through_the_conduit() {
    ring(true);
}

/// Bytes that flowed from `a` to `b` on behalf of collectives (sent or read directly).
fn collective_flow(stats: &JobStats, a: usize, b: usize) -> u64 {
    stats.bytes_between(a, b, Traffic::Collective)
        + stats.bytes_between(a, b, Traffic::CollectiveRead)
}

#[test]
fn collectives_are_counted_per_algorithm_and_their_bytes_flow_where_the_algorithm_sends() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("coll.json");
    let (ranks, len) = (4, 4096usize);
    job(ranks, &file)
        .run(|ctx| {
            let world = Team::world(ctx)?;
            let flat = world.with_algorithm(Collective::Broadcast, Algorithm::FLAT)?;
            let mut data = vec![ctx.rank() as u64; len];
            flat.run(Broadcast::in_place(0, &mut data), Blocking)?;
            flat.run(Broadcast::in_place(0, &mut data), Blocking)?;
            let pairwise = world.with_algorithm(Collective::Exchange, Algorithm::PAIRWISE)?;
            let src = vec![1u64; len * ranks];
            let mut dst = vec![0u64; len * ranks];
            pairwise.run(Exchange::new(&src).to(&mut dst), Blocking)?;
            Ok(())
        })
        .unwrap();
    let stats = JobStats::read(&file).unwrap();
    let bytes = (8 * len) as u64;
    for part in &stats.per_rank {
        let calls = |op: &str, alg: &str| {
            part.collectives
                .iter()
                .find(|c| c.op == op && c.algorithm == alg)
                .map(|c| (c.calls, c.bytes))
        };
        assert_eq!(calls("broadcast", "flat"), Some((2, 2 * bytes)), "{part:?}");
        assert_eq!(calls("exchange", "pairwise"), Some((1, bytes)), "{part:?}");
        // Nothing the program did outside a collective sent anything.
        for kind in [Traffic::Put, Traffic::Get, Traffic::SignalPut] {
            let sent: u64 = (0..ranks)
                .filter(|&p| p != part.rank)
                .map(|p| part.to(p, kind).1)
                .sum();
            assert_eq!(sent, 0, "rank {} {kind:?}", part.rank);
        }
    }
    // The flat broadcasts send the root's data to every member straight from the root,
    // the exchange one block between every pair: between non-roots only the exchange's.
    // (Polls of a partner's flag inside a collective are not counted: they would make the
    // counts measure timing.)
    for a in 0..ranks {
        for b in (0..ranks).filter(|&b| b != a) {
            let flow = collective_flow(&stats, a, b);
            let expected = if a == 0 { 3 * bytes } else { bytes };
            assert!(
                flow >= expected && flow < expected + bytes / 4,
                "{a} -> {b}: {flow} bytes, expected {expected} and headers"
            );
        }
    }
}

#[test]
fn time_blocked_in_a_barrier_is_the_wait_for_the_latest_rank() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("blocked.json");
    let late = Duration::from_millis(400);
    job(2, &file)
        .run(|ctx| {
            if ctx.rank() == 1 {
                std::thread::sleep(late);
            }
            Ok(ctx.barrier()?)
        })
        .unwrap();
    let stats = JobStats::read(&file).unwrap();
    let waited = stats.per_rank[0].blocked_s(Blocked::Barrier);
    let late_one = stats.per_rank[1].blocked_s(Blocked::Barrier);
    assert!(
        waited >= 0.9 * late.as_secs_f64(),
        "rank 0 waited {waited} s for a rank {late:?} late"
    );
    assert!(
        late_one < 0.5 * late.as_secs_f64(),
        "the late rank waited {late_one} s"
    );
}

#[test]
fn statistics_files_merge_by_rank_and_refuse_what_is_not_one() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("two.json");
    job(2, &file).run(|ctx| Ok(ctx.barrier()?)).unwrap();
    let whole = JobStats::read(&file).unwrap();
    let mut parts: Vec<JobStats> = whole
        .per_rank
        .iter()
        .rev()
        .map(|p| JobStats::from_parts(2, &whole.conduit, vec![p.clone()]))
        .collect();
    assert_eq!(JobStats::merge(parts.clone()).unwrap(), whole);
    parts.push(parts[0].clone());
    let twice = JobStats::merge(parts).unwrap_err();
    assert_eq!(twice, tessera::core::report::StatsError::Duplicate(1));
    let other = r#"{"format": "other", "ranks": 1, "conduit": "smp", "per_rank": []}"#;
    assert_eq!(
        JobStats::parse(other).unwrap_err(),
        tessera::core::report::StatsError::Format {
            found: "other".into()
        }
    );
    std::fs::write(&file, "not json").unwrap();
    let e = JobStats::read(&file).unwrap_err().to_string();
    assert!(e.contains("is not a statistics file"), "{e}");
    let missing_dir = dir.path().join("nowhere").join("s.json");
    let e = tessera::core::report::check_file(&missing_dir)
        .unwrap_err()
        .to_string();
    assert!(e.contains("does not exist"), "{e}");
}

/// Copies between global addresses count as puts from the source's rank and gets to the
/// destination's, and blocks a phased array's exchange hands out in peers' memory as one
/// put each.
#[test]
fn global_copies_and_phased_exchanges_are_counted() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("copies.json");
    let ranks = 4;
    job(ranks, &file)
        .run(|ctx| {
            let (me, n) = (ctx.rank(), ctx.ranks());
            let (right, left) = ((me + 1) % n, (me + n - 1) % n);
            let a = ctx.alloc_collective::<u64>(64)?;
            ctx.barrier()?;
            // 4 x 4 out of rows of 8: 16 elements each time.
            ctx.copy_strided(a.on(right), &[8, 1], a, &[8, 1], &[4, 4])?;
            ctx.copy_strided(a.add(32), &[8, 1], a.on(left), &[8, 1], &[4, 4])?;
            ctx.copy_strided(
                a.on((me + 3) % n),
                &[8, 1],
                a.on((me + 2) % n),
                &[8, 1],
                &[4, 4],
            )?;
            ctx.barrier()?;
            let team = Team::world(ctx)?;
            let mut array = tessera::PhasedArray::<u32>::new(&team, 16)?;
            let counts: Vec<usize> = (0..n).map(|d| d + 1).collect();
            let mut exchange = array.exchange(&counts)?;
            for (d, block) in exchange.blocks()?.into_iter().enumerate() {
                block.fill(d as u32);
            }
            exchange.finish()?;
            Ok(())
        })
        .unwrap();
    let stats = JobStats::read(&file).unwrap();
    let block = 16 * 8;
    for part in &stats.per_rank {
        let me = part.rank;
        let (right, left) = ((me + 1) % ranks, (me + ranks - 1) % ranks);
        let (third_from, third_to) = ((me + 2) % ranks, (me + 3) % ranks);
        for peer in (0..ranks).filter(|&p| p != me) {
            let puts = u64::from(peer == right) + u64::from(peer == third_to);
            let gets = u64::from(peer == left) + u64::from(peer == third_from);
            assert_eq!(
                part.to(peer, Traffic::StridedPut),
                (puts, puts * block),
                "rank {me} to {peer}"
            );
            assert_eq!(
                part.to(peer, Traffic::StridedGet),
                (gets, gets * block),
                "rank {me} from {peer}"
            );
            // The exchange: peer + 1 elements of 4 bytes to every peer.
            assert_eq!(
                part.to(peer, Traffic::Put),
                (1, 4 * (peer as u64 + 1)),
                "rank {me}'s exchange block for {peer}"
            );
        }
    }
}

/// A nonblocking collective's messages count as a collective's, and its call as one of
/// its algorithm.
#[test]
fn nonblocking_collectives_count_as_collectives() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("nb.json");
    let ranks = 3;
    job(ranks, &file)
        .run(|ctx| {
            let world = Team::world(ctx)?;
            let flat = world.with_algorithm(Collective::Exchange, Algorithm::PAIRWISE)?;
            let mine = [ctx.rank() as u64; 64 * 3];
            let all = flat.run(Exchange::new(&mine), Nonblocking)?.wait()?;
            assert_eq!(all.len(), 64 * ctx.ranks());
            Ok(())
        })
        .unwrap();
    let stats = JobStats::read(&file).unwrap();
    for part in &stats.per_rank {
        assert!(
            part.collectives
                .iter()
                .any(|c| c.op == "exchange" && c.algorithm == "pairwise" && c.calls == 1),
            "{part:?}"
        );
        for peer in (0..ranks).filter(|&p| p != part.rank) {
            assert_eq!(
                part.to(peer, Traffic::Put),
                (0, 0),
                "rank {} to {peer}",
                part.rank
            );
            assert!(
                part.to(peer, Traffic::Collective).1 + part.to(peer, Traffic::CollectiveRead).1
                    >= 8 * 64,
                "rank {} to {peer}: {part:?}",
                part.rank
            );
        }
    }
}
