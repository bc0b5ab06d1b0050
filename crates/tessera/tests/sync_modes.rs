//! Synchronisation modes of the single-address collectives: every combination moves the
//! data, and the loose modes really skip their synchronisation (a call that waited for
//! its partners here would deadlock, which the short watchdog turns into a failure).

use std::time::Duration;

use tessera::{Job, SyncMode, Team};

const MODES: [SyncMode; 3] = [SyncMode::No, SyncMode::My, SyncMode::All];

#[test]
fn every_mode_combination_delivers() {
    Job::threads(3)
        .segment(16 << 20)
        .wait_timeout(Duration::from_secs(30))
        .run(|ctx| {
            let world = Team::world(ctx)?;
            let (n, me) = (world.size(), world.rank());
            let buf = ctx.alloc_collective::<u64>(4 * n)?;
            let dsts = world.symmetric(buf);
            for input in MODES {
                for output in MODES {
                    let team = world.with_sync(input, output);
                    let label = format!("in {input:?}, out {output:?}");
                    // allgather_to: every block from every member.
                    world.barrier()?; // destinations free (for the loose entry modes)
                    team.allgather_to(&[100 * me as u64 + 7; 2], &dsts)?;
                    world.barrier()?; // complete (for the loose exit modes)
                    let mut got = vec![0u64; 2 * n];
                    ctx.get(buf, &mut got)?;
                    let want: Vec<u64> = (0..n).flat_map(|m| [100 * m as u64 + 7; 2]).collect();
                    assert_eq!(got, want, "allgather_to, {label}");
                    // scatter_to from the last member, gather_to to the first.
                    world.barrier()?;
                    let all: Vec<u64> = (0..n as u64).map(|i| 1000 + i).collect();
                    let src = if me == n - 1 { all.clone() } else { Vec::new() };
                    team.scatter_to(n - 1, &src, &dsts, 1)?;
                    world.barrier()?;
                    assert_eq!(ctx.get_value(buf)?, 1000 + me as u64, "scatter_to, {label}");
                    team.gather_to(0, &[me as u64 * 3], buf.on(0).add(n))?;
                    world.barrier()?;
                    if me == 0 {
                        let mut got = vec![0u64; n];
                        ctx.get(buf.add(n), &mut got)?;
                        let want: Vec<u64> = (0..n as u64).map(|m| 3 * m).collect();
                        assert_eq!(got, want, "gather_to, {label}");
                    }
                }
            }
            Ok(())
        })
        .unwrap();
}

/// With loose entry and no exit synchronisation, one member completes its part of the
/// collective before the other has even entered: the other only enters after a semaphore
/// post that the first sends once its call has returned.
#[test]
fn loose_modes_let_a_member_finish_before_the_others_enter() {
    for input in [SyncMode::No, SyncMode::My] {
        Job::threads(2)
            .segment(16 << 20)
            .wait_timeout(Duration::from_secs(5))
            .run(|ctx| {
                let world = Team::world(ctx)?;
                let loose = world.with_sync(input, SyncMode::No);
                let buf = ctx.alloc_collective::<u64>(1)?;
                let go = ctx.semaphore_collective()?;
                let me = ctx.rank();
                // Receiver first: it has nothing to wait for at exit.
                if me == 1 {
                    loose.broadcast_to(0, &[], &world.symmetric(buf), 1)?;
                    go.on(0).post(ctx, 1)?;
                } else {
                    go.wait(ctx, 1)?;
                    loose.broadcast_to(0, &[42u64], &world.symmetric(buf), 1)?;
                }
                world.barrier()?;
                assert_eq!(ctx.get_value(buf)?, 42, "in {input:?}");
                world.barrier()?; // read before the next write
                // Root first, with no entry synchronisation at all: it writes and leaves
                // before the receiver enters.
                if input == SyncMode::No {
                    if me == 0 {
                        loose.broadcast_to(0, &[43u64], &world.symmetric(buf), 1)?;
                        go.on(1).post(ctx, 1)?;
                    } else {
                        go.wait(ctx, 1)?;
                        loose.broadcast_to(0, &[], &world.symmetric(buf), 1)?;
                        assert_eq!(ctx.get_value(buf)?, 43);
                    }
                }
                world.barrier()?;
                Ok(())
            })
            .unwrap_or_else(|e| panic!("in {input:?}: {e}"));
    }
}
