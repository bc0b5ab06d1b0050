//! Online tuning: while the members of a team try the candidates and decide, every call
//! still gives the sequentially computed result, and every member always decides the same
//! way, also when the members' clocks disagree wildly (load imbalance: members that sleep
//! inside the trials by different amounts).

use std::sync::Mutex;
use std::time::Duration;
use tessera::coll::{Allgather, Allreduce, Barrier, Broadcast};
use tessera::Nonblocking;

use tessera::{Algorithm, Blocking, Collective, Context, Job, Op, Team};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn fail(what: String) -> BoxError {
    what.into()
}

fn input(rank: usize, i: usize, call: usize) -> u64 {
    (rank as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ ((i * 31 + call) as u64).wrapping_mul(0xBF58_476D)
}

/// Run `calls` calls of several operations at several sizes on an online-tuning world
/// team, members sleeping by rank-dependent amounts before some calls (`imbalance`);
/// every result is checked; returns this member's decisions.
fn tune(ctx: &Context, calls: usize, imbalance: bool) -> Result<String, BoxError> {
    let world = Team::world(ctx)?.with_online_tuning();
    let (n, me) = (world.size(), world.rank());
    let landing = ctx.alloc_collective::<u64>(5000)?;
    for call in 0..calls {
        if imbalance && (me * 7 + call) % 5 == 0 {
            std::thread::sleep(Duration::from_micros(200 * (me as u64 + 1)));
        }
        for len in [1usize, 300, 5000] {
            let mine: Vec<u64> = (0..len).map(|i| input(me, i, call)).collect();
            let mut out = vec![0u64; len];
            world.run(Allreduce::new(&mine, Op::Sum).to(&mut out), Blocking)?;
            for (i, &got) in out.iter().enumerate() {
                let want = (0..n).fold(0u64, |a, r| a.wrapping_add(input(r, i, call)));
                if got != want {
                    return Err(fail(format!(
                        "call {call} allreduce len {len}: [{i}] {got} != {want}"
                    )));
                }
            }
            let mut all = vec![0u64; n * len];
            world.run(Allgather::new(&mine).to(&mut all), Blocking)?;
            let want: Vec<u64> = (0..n)
                .flat_map(|r| (0..len).map(move |i| input(r, i, call)))
                .collect();
            if all != want {
                return Err(fail(format!("call {call} allgather len {len} differs")));
            }
            let root = call % n;
            let mut b = if me == root {
                mine.clone()
            } else {
                vec![0; len]
            };
            world.run(Broadcast::in_place(root, &mut b), Blocking)?;
            if b.iter()
                .enumerate()
                .any(|(i, &x)| x != input(root, i, call))
            {
                return Err(fail(format!("call {call} broadcast len {len} differs")));
            }
            // A single-address form tunes its trees too.
            let src = if me == root { &mine[..] } else { &[] };
            world.run(
                Broadcast::new(root, src, len).to_symmetric(&world.symmetric(landing)),
                Blocking,
            )?;
            let mut got = vec![0u64; len];
            ctx.get(landing, &mut got, Blocking)?;
            if got
                .iter()
                .enumerate()
                .any(|(i, &x)| x != input(root, i, call))
            {
                return Err(fail(format!("call {call} broadcast_to len {len} differs")));
            }
            world.run(Barrier, Blocking)?; // read before the next call writes
                                           // A nonblocking call in the middle of the trials uses the decided or the
                                           // model's algorithm, never a trial, and still agrees.
            if call % 4 == 1 {
                let got = world
                    .run(Allreduce::new(&mine, Op::Max), Nonblocking)?
                    .wait()?;
                let want: Vec<u64> = (0..len)
                    .map(|i| (0..n).map(|r| input(r, i, call)).max().unwrap())
                    .collect();
                if got != want {
                    return Err(fail(format!("call {call} allreduce_nb len {len} differs")));
                }
            }
        }
        world.run(Barrier, Blocking)?;
    }
    let decided = world.online_decisions();
    for (op, bytes, alg) in &decided {
        if !world.candidates(*op).contains(alg) {
            return Err(fail(format!(
                "{op:?} at {bytes} B decided {alg}, not a candidate"
            )));
        }
        if world.algorithm_for(*op, *bytes) != *alg {
            return Err(fail(format!(
                "{op:?} at {bytes} B decided {alg} but calls would not use it"
            )));
        }
    }
    // Forcing still overrides a decision.
    let forced = world.with_algorithm(Collective::Allreduce, Algorithm::RING)?;
    if forced.algorithm_for(Collective::Allreduce, 8) != Algorithm::RING {
        return Err(fail("forcing did not override the online decision".into()));
    }
    Ok(format!("{decided:?}"))
}

fn all_members_decide_alike(ranks: usize, calls: usize, imbalance: bool) {
    let seen = Mutex::new(Vec::new());
    Job::threads(ranks)
        .segment(16 << 20)
        .wait_timeout(Duration::from_secs(120))
        .run(|ctx| {
            let mine = tune(ctx, calls, imbalance)?;
            seen.lock().unwrap().push((ctx.rank(), mine));
            Ok(())
        })
        .unwrap();
    let seen = seen.into_inner().unwrap();
    assert_eq!(seen.len(), ranks);
    for (rank, decided) in &seen {
        assert_eq!(
            decided, &seen[0].1,
            "rank {rank} decided otherwise than rank {}",
            seen[0].0
        );
    }
    // Enough calls were made for every operation and size class to be decided.
    for op in [
        "Allreduce",
        "Allgather",
        "Broadcast",
        "BroadcastTo",
        "Barrier",
    ] {
        let classes = seen[0].1.matches(&format!("({op}, ")).count();
        let want = if op == "Barrier" { 1 } else { 3 };
        assert_eq!(classes, want, "{op}: {}", seen[0].1);
    }
}

#[test]
fn members_agree_at_five_ranks_under_load_imbalance() {
    all_members_decide_alike(5, 400, true);
}

#[test]
fn members_agree_at_two_and_four_ranks() {
    all_members_decide_alike(2, 400, false);
    all_members_decide_alike(4, 400, true);
}

/// Where no table exists and `TESSERA_TUNING` is unset, a world team tunes online where
/// every rank has a processor, and keeps the model's choices where ranks outnumber the
/// processors (trials there time the scheduler); a team split from it follows it.
#[test]
fn by_default_teams_tune_online_only_where_ranks_have_processors() {
    let table = tessera::model::team::tuning::default_path().is_some_and(|p| p.exists());
    if table || tessera::config::raw("TESSERA_TUNING").is_some() {
        eprintln!("skipped: a tuning table or TESSERA_TUNING is in force here");
        return;
    }
    // The host's online processors, as `Team::world` counts them (not this thread's
    // affinity).
    let processors = nix::unistd::sysconf(nix::unistd::SysconfVar::_NPROCESSORS_ONLN)
        .ok()
        .flatten()
        .map_or(1, |c| c.max(1) as usize);
    for (ranks, online) in [(2, processors >= 2), (processors + 1, false)] {
        let decided = Mutex::new(Vec::new());
        Job::threads(ranks)
            .segment(8 << 20)
            .wait_timeout(Duration::from_secs(60))
            .run(|ctx| {
                let world = Team::world(ctx)?;
                let half = world
                    .split(Some((ctx.rank() % 2) as u32), 0)?
                    .expect("every rank has a colour");
                // Enough calls for every candidate's trials: 4 rounds of 10 calls each
                // (2 untimed, 8 timed) for an 8-byte call, and as many again.
                let calls = 2 * 40 * world.candidates(Collective::Allreduce).len();
                for _ in 0..calls {
                    world.run(Allreduce::value(1u64, Op::Sum), Blocking)?;
                    half.run(Allreduce::value(1u64, Op::Sum), Blocking)?;
                }
                let made = !world.online_decisions().is_empty();
                // A team of one has nothing to tune.
                let split_made = (half.size() > 1).then(|| !half.online_decisions().is_empty());
                decided.lock().unwrap().push((made, split_made));
                Ok(())
            })
            .unwrap_or_else(|e| panic!("{ranks} ranks: {e}"));
        for (made, split_made) in decided.into_inner().unwrap() {
            assert_eq!(made, online, "{ranks} ranks on {processors} processors");
            if let Some(split_made) = split_made {
                assert_eq!(split_made, online, "{ranks} ranks: the split team");
            }
        }
    }
}

/// A team remembers its last final choice for the next call of the same shape; the
/// memory answers only that shape, a team forced to another algorithm does not inherit
/// it, and every choice stays the one the tuner decided.
#[test]
fn a_remembered_choice_answers_only_its_own_call() {
    Job::threads(2)
        .segment(8 << 20)
        .wait_timeout(Duration::from_secs(60))
        .run(|ctx| {
            let world = Team::world(ctx)?.with_online_tuning();
            // Two sizes in turns until both are decided, each call checked.
            let mut calls = 0;
            while !(world.tuning_settled(Collective::Allreduce, 8)
                && world.tuning_settled(Collective::Allreduce, 8 * 512))
            {
                let small =
                    world.run(Allreduce::value(ctx.rank() as u64 + 1, Op::Sum), Blocking)?;
                let mine = vec![ctx.rank() as u64 + 1; 512];
                let mut big = vec![0u64; 512];
                world.run(Allreduce::new(&mine, Op::Sum).to(&mut big), Blocking)?;
                if small != 3 || big.iter().any(|&x| x != 3) {
                    return Err(fail(format!("call {calls}: {small}, {:?}", &big[..2])));
                }
                calls += 1;
                if calls > 10_000 {
                    return Err(fail("the tuner never decided".into()));
                }
            }
            let decided = |bytes: usize| {
                world
                    .online_decisions()
                    .into_iter()
                    .find(|&(op, b, _)| op == Collective::Allreduce && b >= bytes && b / 2 < bytes)
                    .map(|(_, _, alg)| alg)
            };
            let (small, big) = (decided(8), decided(8 * 512));
            for _ in 0..3 {
                // The same call twice (the second from memory), then the other size.
                assert_eq!(Some(world.algorithm_for(Collective::Allreduce, 8)), small);
                assert_eq!(Some(world.algorithm_for(Collective::Allreduce, 8)), small);
                assert_eq!(
                    Some(world.algorithm_for(Collective::Allreduce, 8 * 512)),
                    big
                );
            }
            // Forced just after the parent remembered its 8-byte decision: the forced one.
            assert_eq!(Some(world.algorithm_for(Collective::Allreduce, 8)), small);
            let other = if small == Some(Algorithm::RING) {
                Algorithm::RECURSIVE_DOUBLING
            } else {
                Algorithm::RING
            };
            let forced = world.with_algorithm(Collective::Allreduce, other)?;
            assert_eq!(forced.algorithm_for(Collective::Allreduce, 8), other);
            assert_eq!(forced.run(Allreduce::value(1u64, Op::Sum), Blocking)?, 2);
            assert_eq!(Some(world.algorithm_for(Collective::Allreduce, 8)), small);
            Ok(())
        })
        .unwrap();
}
