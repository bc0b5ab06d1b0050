//! Synchronisation modes of the single-address collectives: every combination moves the
//! data, and the loose modes really skip their synchronisation (a call that waited for
//! its partners here would deadlock, which the short watchdog turns into a failure).

use std::time::Duration;
use tessera::coll::{Allgather, Allreduce, Barrier, Broadcast, Exchange, Gather, Scatter};
use tessera::Nonblocking;

use tessera::{Blocking, Job, SyncMode, Team};

const MODES: [SyncMode; 3] = [SyncMode::No, SyncMode::My, SyncMode::All];

/// A job of three rank threads, bounded by a watchdog.
fn three_ranks() -> Job {
    Job::threads(3)
        .segment(16 << 20)
        .wait_timeout(Duration::from_secs(30))
}

#[test]
fn every_mode_combination_delivers() {
    three_ranks()
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
                    world.run(Barrier, Blocking)?; // destinations free (for the loose entry modes)
                    team.run(
                        Allgather::new(&[100 * me as u64 + 7; 2]).to_symmetric(&dsts),
                        Blocking,
                    )?;
                    world.run(Barrier, Blocking)?; // complete (for the loose exit modes)
                    let mut got = vec![0u64; 2 * n];
                    ctx.get(buf, &mut got, Blocking)?;
                    let want: Vec<u64> = (0..n).flat_map(|m| [100 * m as u64 + 7; 2]).collect();
                    assert_eq!(got, want, "allgather_to, {label}");
                    // scatter_to from the last member, gather_to to the first.
                    world.run(Barrier, Blocking)?;
                    let all: Vec<u64> = (0..n as u64).map(|i| 1000 + i).collect();
                    let src = if me == n - 1 { all.clone() } else { Vec::new() };
                    team.run(Scatter::new(n - 1, &src, 1).to_symmetric(&dsts), Blocking)?;
                    world.run(Barrier, Blocking)?;
                    assert_eq!(ctx.get_value(buf)?, 1000 + me as u64, "scatter_to, {label}");
                    team.run(
                        Gather::new(0, &[me as u64 * 3]).to_symmetric(&[buf.on(0).add(n)]),
                        Blocking,
                    )?;
                    world.run(Barrier, Blocking)?;
                    if me == 0 {
                        let mut got = vec![0u64; n];
                        ctx.get(buf.add(n), &mut got, Blocking)?;
                        let want: Vec<u64> = (0..n as u64).map(|m| 3 * m).collect();
                        assert_eq!(got, want, "gather_to, {label}");
                    }
                    // The rendezvous forms: broadcast_from the middle member's block, and
                    // gather_from every member's first element to the last member.
                    world.run(Barrier, Blocking)?;
                    ctx.put(buf, &[5 * me as u64 + 1], Blocking)?;
                    world.run(Barrier, Blocking)?; // sources ready (for the loose entry modes)
                    let mut one = [0u64];
                    team.run(Broadcast::from_symmetric(1, buf.on(1), &mut one), Blocking)?;
                    assert_eq!(one, [6], "broadcast_from, {label}");
                    let mut all = vec![0u64; if me == n - 1 { n } else { 0 }];
                    team.run(Gather::from_symmetric(n - 1, &dsts, &mut all), Blocking)?;
                    if me == n - 1 {
                        let want: Vec<u64> = (0..n as u64).map(|m| 5 * m + 1).collect();
                        assert_eq!(all, want, "gather_from, {label}");
                    }
                    world.run(Barrier, Blocking)?; // every source read (for the loose exit modes)
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
                    loose.run(
                        Broadcast::new(0, &[], 1).to_symmetric(&world.symmetric(buf)),
                        Blocking,
                    )?;
                    go.on(0).post(ctx, 1)?;
                } else {
                    go.wait(ctx, 1)?;
                    loose.run(
                        Broadcast::new(0, &[42u64], 1).to_symmetric(&world.symmetric(buf)),
                        Blocking,
                    )?;
                }
                world.run(Barrier, Blocking)?;
                assert_eq!(ctx.get_value(buf)?, 42, "in {input:?}");
                world.run(Barrier, Blocking)?; // read before the next write
                                               // Root first, with no entry synchronisation at all: it writes and leaves
                                               // before the receiver enters.
                if input == SyncMode::No {
                    if me == 0 {
                        loose.run(
                            Broadcast::new(0, &[43u64], 1).to_symmetric(&world.symmetric(buf)),
                            Blocking,
                        )?;
                        go.on(1).post(ctx, 1)?;
                    } else {
                        go.wait(ctx, 1)?;
                        loose.run(
                            Broadcast::new(0, &[], 1).to_symmetric(&world.symmetric(buf)),
                            Blocking,
                        )?;
                        assert_eq!(ctx.get_value(buf)?, 43);
                    }
                }
                world.run(Barrier, Blocking)?;
                Ok(())
            })
            .unwrap_or_else(|e| panic!("in {input:?}: {e}"));
    }
}

/// Nonblocking single-address forms: several in flight on one team, waited in another
/// order than issued, with computation between; a rank's other collectives on the team
/// refuse to start meanwhile; modes the nonblocking forms cannot honour are refused.
#[test]
fn nonblocking_forms_overlap_and_complete_in_any_order() {
    three_ranks()
        .run(|ctx| {
            let world = Team::world(ctx)?;
            let (n, me) = (world.size(), world.rank());
            let loose = world.with_sync(SyncMode::No, SyncMode::My);
            let len = 1000;
            let buf = ctx.alloc_collective::<u64>(4 * n * len)?;
            let part = |k: usize| -> Vec<tessera::GlobalPtr<u64>> {
                world.symmetric(buf.add(k * n * len))
            };
            for round in 0..5u64 {
                world.run(Barrier, Blocking)?; // every destination is free before anyone enters
                let mine: Vec<u64> = (0..len as u64)
                    .map(|i| round * 1_000_000 + 1000 * me as u64 + i)
                    .collect();
                let everyone: Vec<u64> = (0..n as u64)
                    .flat_map(|m| (0..len as u64).map(move |i| round * 1_000_000 + 1000 * m + i))
                    .collect();
                let mut handles = vec![
                    loose.run(Allgather::new(&mine).to_symmetric(&part(0)), Nonblocking)?,
                    loose.run(Exchange::new(&everyone).to_symmetric(&part(1)), Nonblocking)?,
                    loose.run(
                        Gather::new(1, &mine).to_symmetric(&[part(2)[1]]),
                        Nonblocking,
                    )?,
                ];
                let src = if me == 0 {
                    // A late root: the others' handles must not complete before its data
                    // has landed.
                    std::thread::sleep(Duration::from_millis(20));
                    everyone.clone()
                } else {
                    Vec::new()
                };
                handles.push(loose.run(
                    Scatter::new(0, &src, len).to_symmetric(&part(3)),
                    Nonblocking,
                )?);
                let mut spin = 0u64;
                while !handles[0].test()? {
                    spin = spin.wrapping_add(1); // computation overlapping the exchange
                }
                for h in handles.into_iter().rev() {
                    h.wait()?;
                }
                let mut got = vec![0u64; n * len];
                ctx.get(buf, &mut got, Blocking)?;
                assert_eq!(got, everyone, "allgather_to_nb, round {round}");
                ctx.get(buf.add(n * len), &mut got, Blocking)?;
                // Every sender's block for us is our own values.
                let want: Vec<u64> = mine.iter().copied().cycle().take(n * len).collect();
                assert_eq!(got, want, "exchange_to_nb, round {round}");
                if me == 1 {
                    ctx.get(buf.add(2 * n * len), &mut got, Blocking)?;
                    assert_eq!(got, everyone, "gather_to_nb, round {round}");
                }
                let mut mine_back = vec![0u64; len];
                ctx.get(buf.add(3 * n * len), &mut mine_back, Blocking)?;
                assert_eq!(mine_back, mine, "scatter_to_nb, round {round}");
                world.run(Barrier, Blocking)?; // others may still read what we hold
            }
            // While one of its nonblocking collectives is in flight, a rank's other
            // collectives on the team refuse to start. Rank 1's broadcast cannot complete
            // before rank 0 issues its part, which waits for rank 1's go-ahead.
            let go = ctx.semaphore_collective()?;
            world.run(Barrier, Blocking)?;
            let dsts = part(0);
            if me == 1 {
                let handle =
                    loose.run(Broadcast::new(0, &[], 1).to_symmetric(&dsts), Nonblocking)?;
                let e = world
                    .run(Allreduce::value(1u64, tessera::Op::Sum), Blocking)
                    .unwrap_err();
                assert!(
                    e.to_string()
                        .contains("nonblocking collective(s) still in flight"),
                    "{e}"
                );
                go.on(0).post(ctx, 1)?;
                handle.wait()?;
            } else if me == 0 {
                go.wait(ctx, 1)?;
                loose
                    .run(
                        Broadcast::new(0, &[5u64], 1).to_symmetric(&dsts),
                        Nonblocking,
                    )?
                    .wait()?;
            } else {
                loose
                    .run(Broadcast::new(0, &[], 1).to_symmetric(&dsts), Nonblocking)?
                    .wait()?;
            }
            world.run(Barrier, Blocking)?;
            assert_eq!(ctx.get_value(buf)?, 5);
            let e = world
                .run(
                    Broadcast::new(0, &[1u64], 1).to_symmetric(&part(0)),
                    Nonblocking,
                )
                .err()
                .expect("entry All");
            assert!(e.to_string().contains("need entry SyncMode::No"), "{e}");
            Ok(())
        })
        .unwrap();
}

/// The ticket lock on a plain word: mutual exclusion under contention (a non-atomic
/// read-modify-write inside it never loses an update), on mapped and hidden peers, and
/// the word is free again afterwards.
#[test]
fn ticket_lock_excludes_and_is_free_afterwards() {
    for hide in [false, true] {
        tessera::Job::threads(4)
            .segment(1 << 20)
            .hide_peers(hide)
            .wait_timeout(std::time::Duration::from_secs(30))
            .run(|ctx| {
                let words = ctx.alloc_collective::<u64>(2)?;
                ctx.barrier()?;
                let lock = tessera::TicketLock::at(words.on(2));
                for _ in 0..200 {
                    lock.lock(ctx)?;
                    let v = ctx.get_value(words.on(2).add(1))?;
                    ctx.put(words.on(2).add(1), &[v + 1], Blocking)?;
                    lock.unlock(ctx)?;
                }
                ctx.barrier()?;
                assert_eq!(ctx.get_value(words.on(2).add(1))?, 800);
                if ctx.rank() == 0 {
                    assert!(lock.try_lock(ctx)?, "free after the last unlock");
                    assert!(!lock.try_lock(ctx)?, "taken twice");
                    lock.unlock(ctx)?;
                }
                Ok(())
            })
            .unwrap_or_else(|e| panic!("hide={hide}: {e}"));
    }
}

/// Waiting on a word of any width until it compares true, fed by another rank's atomic
/// stores; every comparison.
#[test]
fn wait_value_on_every_width() {
    use tessera::Compare;
    tessera::Job::threads(2)
        .segment(1 << 20)
        .wait_timeout(std::time::Duration::from_secs(30))
        .run(|ctx| {
            let w64 = ctx.alloc_collective::<u64>(1)?;
            let w32 = ctx.alloc_collective::<i32>(1)?;
            let w16 = ctx.alloc_collective::<u16>(2)?;
            ctx.barrier()?;
            if ctx.rank() == 0 {
                for step in 1..=5u64 {
                    ctx.atomic_store(w64.on(1), step)?;
                    ctx.atomic_store(w32.on(1), -(step as i32))?;
                    ctx.barrier()?;
                }
                ctx.put(w16.on(1), &[7], Blocking)?;
                ctx.barrier()?;
            } else {
                for step in 1..=5u64 {
                    assert_eq!(ctx.wait_value(w64, Compare::Ge, step)?, step);
                    ctx.wait_value(w32, Compare::Le, -(step as i32))?;
                    assert!(ctx.test_value(w64, Compare::Eq, step)?);
                    assert!(!ctx.test_value(w64, Compare::Gt, step)?);
                    assert!(ctx.test_value(w64, Compare::Lt, step + 1)?);
                    assert!(ctx.test_value(w32, Compare::Ne, 0)?);
                    ctx.barrier()?;
                }
                ctx.barrier()?;
                assert_eq!(ctx.wait_value(w16, Compare::Eq, 7)?, 7);
            }
            // Only the owner waits on a word.
            assert!(ctx
                .wait_value(w64.on(1 - ctx.rank()), Compare::Eq, 0)
                .is_err());
            Ok(())
        })
        .unwrap();
}

#[test]
fn broadcast_to_in_place_leaves_the_roots_destination_alone() {
    // OpenSHMEM 1.4's broadcast: the root names its source as its own destination, so
    // its destination keeps what it held while every other member's receives the data.
    three_ranks()
        .run(|ctx| {
            let world = Team::world(ctx)?.with_sync(SyncMode::No, SyncMode::My);
            let (src, dst) = (
                ctx.alloc_collective::<u64>(3)?,
                ctx.alloc_collective::<u64>(3)?,
            );
            ctx.put(dst, &[1, 1, 1], Blocking)?;
            let root = 2;
            if ctx.rank() == root {
                ctx.put(src, &[4, 5, 6], Blocking)?;
            }
            world.run(Barrier, Blocking)?;
            let mut dsts = world.symmetric(dst);
            dsts[root] = src.on(root);
            // In place: the root's slice is the very memory of its dsts[root].
            let from: &[u64] = if ctx.rank() == root {
                // SAFETY: nothing writes src during the call (the root is sent nothing).
                unsafe { ctx.local_slice(src, 3)? }.expect("its own segment is mapped")
            } else {
                &[]
            };
            world.run(Broadcast::new(root, from, 3).to_symmetric(&dsts), Blocking)?;
            world.run(Barrier, Blocking)?;
            let mut got = [0u64; 3];
            ctx.get(dst, &mut got, Blocking)?;
            let want = if ctx.rank() == root {
                [1, 1, 1]
            } else {
                [4, 5, 6]
            };
            assert_eq!(got, want, "rank {}", ctx.rank());
            Ok(())
        })
        .unwrap();
}
