//! Ranks that make different collective calls are caught without checked mode: every team
//! message carries its call's signature, a team's leftover messages are checked at the end
//! of the job, and every barrier compares the ranks' collective allocations. Each case
//! fails with both calls named instead of returning wrong values or hanging. Every job is
//! bounded by a watchdog.

use std::time::{Duration, Instant};
use tessera::coll::{Allreduce, Barrier, Broadcast, Exchange};
use tessera::{Blocking, Nonblocking};

use tessera::{Algorithm, Collective, Job, Op, SyncMode, Team};

fn job(ranks: usize) -> Job {
    Job::threads(ranks)
        .segment(16 << 20)
        .wait_timeout(Duration::from_secs(20))
}

/// Run `body` on `ranks` threads; it must fail within the bound, reporting every part.
fn fails_reporting(
    ranks: usize,
    parts: &[&str],
    body: impl Fn(&tessera::Context) -> tessera::RankResult + Sync,
) {
    let started = Instant::now();
    let err = job(ranks)
        .run(body)
        .expect_err("the job should fail")
        .to_string();
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "took {:?}",
        started.elapsed()
    );
    for part in parts {
        assert!(err.contains(part), "expected {part:?} in: {err}");
    }
}

#[test]
fn reductions_with_different_operations_are_caught() {
    fails_reporting(
        2,
        &[
            "collective calls differ between ranks",
            "allreduce(Sum, 4 elements of 8 bytes",
            "allreduce(Max, 4 elements of 8 bytes",
        ],
        |ctx| {
            let world = Team::world(ctx)?;
            let op = if ctx.rank() == 0 { Op::Sum } else { Op::Max };
            let mut out = [0u64; 4];
            world.run(
                Allreduce::new(&[ctx.rank() as u64; 4], op).to(&mut out),
                Blocking,
            )?;
            Ok(())
        },
    );
}

#[test]
fn reductions_of_different_lengths_are_caught() {
    fails_reporting(
        2,
        &["65536 elements of 8 bytes", "131072 elements of 8 bytes"],
        |ctx| {
            let world = Team::world(ctx)?;
            let n = if ctx.rank() == 0 { 64 << 10 } else { 128 << 10 };
            let src = vec![1.0f64; n];
            let mut out = vec![0.0f64; n];
            world.run(Allreduce::new(&src, Op::Sum).to(&mut out), Blocking)?;
            Ok(())
        },
    );
}

#[test]
fn ranks_following_different_algorithms_are_caught() {
    fails_reporting(
        4,
        &["algorithm ring", "algorithm recursive_doubling"],
        |ctx| {
            let world = Team::world(ctx)?;
            let alg = if ctx.rank() == 1 {
                Algorithm::RING
            } else {
                Algorithm::RECURSIVE_DOUBLING
            };
            let team = world.with_algorithm(Collective::Allreduce, alg)?;
            let mut out = [0u64; 64];
            team.run(Allreduce::new(&[1u64; 64], Op::Sum).to(&mut out), Blocking)?;
            Ok(())
        },
    );
}

#[test]
fn broadcasts_from_different_roots_are_caught() {
    // Each rank believes it is the root, so each sends and none receives: the calls return
    // with each rank's own data. The unreceived messages fail the job at its end. (The
    // algorithm is forced: an online-tuning trial starts with a barrier, whose messages
    // carry the call and so catch the mismatch at once; see below.)
    fails_reporting(
        2,
        // Either rank may report first; both calls are named whichever does.
        &[
            "in broadcast(root 0",
            "in broadcast(root 1",
            "team messages it never received; world rank",
        ],
        |ctx| {
            let world =
                Team::world(ctx)?.with_algorithm(Collective::Broadcast, Algorithm::BINOMIAL)?;
            let mut data = [ctx.rank() as u32; 8];
            world.run(Broadcast::in_place(ctx.rank(), &mut data), Blocking)?;
            Ok(())
        },
    );
    // Tuning online, the call is a trial, whose opening barrier catches the mismatch,
    // naming both calls.
    fails_reporting(
        2,
        &[
            "collective calls differ",
            "broadcast(root 0",
            "broadcast(root 1",
        ],
        |ctx| {
            let world = Team::world(ctx)?.with_online_tuning();
            let mut data = [ctx.rank() as u32; 8];
            world.run(Broadcast::in_place(ctx.rank(), &mut data), Blocking)?;
            Ok(())
        },
    );
    // With three ranks, rank 2 sends as a root and returns; the message rank 0 sent it as
    // the root it believes in arrives in its next call.
    fails_reporting(
        3,
        &["collective calls differ", "a message of broadcast(root "],
        |ctx| {
            let world = Team::world(ctx)?;
            let root = if ctx.rank() == 2 { 2 } else { 0 };
            let mut data = [7u32; 8];
            world.run(Broadcast::in_place(root, &mut data), Blocking)?;
            world.run(Barrier, Blocking)?;
            Ok(())
        },
    );
}

#[test]
fn collective_allocations_that_differ_are_caught_at_the_next_barrier() {
    fails_reporting(
        3,
        &[
            "collective allocations differ between ranks",
            "rank 0 made alloc_collective of 1024 bytes; rank 1 made alloc_collective of 1024 bytes; rank 2 made alloc_collective of 2048 bytes",
        ],
        |ctx| {
            let n = if ctx.rank() == 2 { 256 } else { 128 };
            ctx.alloc_collective::<u64>(n)?;
            ctx.barrier()?;
            Ok(())
        },
    );
    // The calls differ before the last one, which is the same everywhere: the report names
    // the one that differs, not only the last.
    fails_reporting(
        2,
        &[
            "call 2 since the last barrier differs: rank 0 made alloc_collective of 16 bytes; rank 1 made alloc_collective of 24 bytes",
            "rank 0: alloc_collective of 8 bytes, alloc_collective of 16 bytes, alloc_collective of 8 bytes",
        ],
        |ctx| {
            ctx.barrier()?;
            ctx.alloc_collective::<u8>(8)?;
            ctx.alloc_collective::<u8>(if ctx.rank() == 1 { 24 } else { 16 })?;
            ctx.alloc_collective::<u8>(8)?;
            ctx.barrier()?;
            Ok(())
        },
    );
}

#[test]
fn matching_calls_still_pass() {
    job(4)
        .run(|ctx| {
            let world = Team::world(ctx)?;
            let (row, col) = world.grid(2, 2)?;
            let mut out = [0u64; 3];
            world.run(Allreduce::new(&[1, 2, 3], Op::Sum).to(&mut out), Blocking)?;
            assert_eq!(out, [4, 8, 12]);
            row.run(
                Allreduce::with(&[1u64], |a: &mut [u64], b: &[u64]| {
                    a[0] += b[0];
                    Ok(())
                })
                .to(&mut out[..1]),
                Blocking,
            )?;
            assert_eq!(out[0], 2);
            let mut b = [ctx.rank() as u32; 2];
            col.run(Broadcast::in_place(1, &mut b), Blocking)?;
            assert_eq!(b, [(ctx.rank() % 2 + 2) as u32; 2]);
            let r = world
                .run(Allreduce::new(&[2u64], Op::Max), Nonblocking)?
                .wait()?;
            assert_eq!(r, [2]);
            Ok(())
        })
        .unwrap();
}

#[test]
fn single_address_calls_that_differ_are_caught_naming_both() {
    // Different block lengths in exchange_to: the "landed" signals carry each call.
    fails_reporting(
        2,
        &[
            "collective calls differ",
            "exchange_to(1 elements of 8 bytes",
            "exchange_to(2 elements of 8 bytes",
        ],
        |ctx| {
            let world = Team::world(ctx)?.with_sync(SyncMode::No, SyncMode::My);
            let buf = ctx.alloc_collective::<u64>(8)?;
            let len = 1 + ctx.rank();
            world.run(
                Exchange::new(&vec![7u64; 2 * len]).to_symmetric(&world.symmetric(buf)),
                Blocking,
            )?;
            world.run(Barrier, Blocking)?;
            Ok(())
        },
    );
    // Broadcasts whose roots differ, entry unsynchronised: caught at the end of the job
    // at the latest (each side's root signals a member that waits on the other root).
    fails_reporting(
        4,
        &[
            "collective calls differ",
            "broadcast_to(root 0",
            "broadcast_to(root 1",
        ],
        |ctx| {
            let world = Team::world(ctx)?.with_sync(SyncMode::No, SyncMode::My);
            let dsts = world.symmetric(ctx.alloc_collective::<u32>(2)?);
            world.run(
                Broadcast::new(ctx.rank() % 2, &[9, 9], 2).to_symmetric(&dsts),
                Blocking,
            )?;
            Ok(())
        },
    );
}
