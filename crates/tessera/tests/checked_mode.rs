//! Checked mode (`TESSERA_CHECK=1` / `Job::checked`): collective allocations that differ
//! between ranks are reported instead of silently handing out different offsets.

use std::time::Duration;
use tessera::coll::{Allgather, Allreduce, Barrier, Broadcast, Gather};
use tessera::{Blocking, Nonblocking};

use tessera::Job;

/// A checked-mode job of `ranks` threads with `segment` bytes each, bounded in time.
fn checked(ranks: usize, segment: usize) -> Job {
    Job::threads(ranks)
        .segment(segment)
        .checked(true)
        .wait_timeout(Duration::from_secs(30))
}

/// Assert that `outcome` (a job's) is an error whose report contains every one of `parts`.
fn assert_fails_reporting<T: std::fmt::Debug, E: std::fmt::Display>(
    outcome: Result<T, E>,
    parts: &[&str],
) {
    let err = outcome.unwrap_err().to_string();
    for part in parts {
        assert!(
            err.contains(part),
            "the report should contain {part:?}: {err}"
        );
    }
}

#[test]
fn matching_collective_allocations_pass() {
    checked(3, 1 << 20)
        .run(|ctx| {
            let a = ctx.alloc_collective::<u64>(10)?;
            let b = ctx.alloc_collective::<u8>(3)?;
            ctx.free_collective(b)?;
            ctx.free_collective(a)?;
            Ok(())
        })
        .unwrap();
}

#[test]
fn mismatched_collective_allocations_are_reported() {
    assert_fails_reporting(
        checked(3, 1 << 20).run(|ctx| {
            // Rank 1 allocates a different size: its later offsets would differ.
            let n = if ctx.rank() == 1 { 20 } else { 10 };
            ctx.alloc_collective::<u64>(n)?;
            Ok(())
        }),
        &[
            "collective allocations differ between ranks",
            "rank 0 made alloc_collective of 80 bytes; rank 1 made alloc_collective of 160 bytes",
        ],
    );
}

#[test]
fn mismatched_collective_arguments_name_the_ranks() {
    assert_fails_reporting(
        checked(3, 16 << 20).run(|ctx| {
            let world = tessera::Team::world(ctx)?;
            // Matching calls pass.
            world.run(Allreduce::value(1u64, tessera::Op::Sum), Blocking)?;
            // Rank 2 broadcasts from a different root and a root that does not exist.
            let root = if ctx.rank() == 2 { 5 } else { 0 };
            world.run(Broadcast::in_place(root, &mut [0u32; 4]), Blocking)?;
            Ok(())
        }),
        &[
            "collective arguments differ between ranks",
            "rank 0: broadcast(root 0, 4 elements of 4 bytes)",
            "rank 2: broadcast(root 5, 4 elements of 4 bytes)",
        ],
    );

    assert_fails_reporting(
        checked(2, 16 << 20).run(|ctx| {
            let world = tessera::Team::world(ctx)?;
            let op = if ctx.rank() == 0 {
                tessera::Op::Sum
            } else {
                tessera::Op::Max
            };
            world.run(Allreduce::value(1.0f64, op), Blocking)?;
            Ok(())
        }),
        &["Sum", "Max"],
    );
}

#[test]
fn nonblocking_calls_are_checked_too() {
    // Matching nonblocking calls pass, and a blocking collective runs right after them
    // (the agreement checks are finished once the requests are).
    checked(3, 16 << 20)
        .run(|ctx| {
            let world = tessera::Team::world(ctx)?;
            let me = ctx.rank() as u64;
            let sum = world.run(Allreduce::new(&[me], tessera::Op::Sum), Nonblocking)?;
            let all = world.run(Allgather::new(&[me]), Nonblocking)?;
            assert_eq!(all.wait()?, vec![0, 1, 2]);
            assert_eq!(sum.wait()?, vec![3]);
            world.run(Barrier, Blocking)?;
            Ok(())
        })
        .unwrap();

    // Rank 1 gathers to a different root: every rank's wait reports all three calls
    // instead of hanging.
    assert_fails_reporting(
        checked(3, 16 << 20).run(|ctx| {
            let world = tessera::Team::world(ctx)?;
            let root = if ctx.rank() == 1 { 2 } else { 0 };
            world
                .run(Gather::new(root, &[1u16, 2]), Nonblocking)?
                .wait()?;
            Ok(())
        }),
        &[
            "collective arguments differ between ranks",
            "rank 0: gather(root 0, 2 elements of 2 bytes)",
            "rank 1: gather(root 2, 2 elements of 2 bytes)",
        ],
    );
}
