//! Small blocking collectives reuse the plan of an earlier call of the same shape
//! (operation, algorithm, root, length, element size, scan kind). These tests interleave
//! more shapes than a team keeps plans for, on teams that share and do not share a
//! channel, so that plans are reused, evicted and rebuilt, and check every result against
//! the one computed sequentially from the same inputs: a plan run for a call of another
//! root, length or kind would deliver the wrong elements.

use std::time::Duration;
use tessera::coll::{
    Allgather, Allreduce, Broadcast, Exchange, Exscan, Gather, Reduce, Scan, Scatter,
};
use tessera::Blocking;

use tessera::{Algorithm, Collective, Context, Job, Op, Team};

/// Element `i` of member `r`'s input in step `step`.
fn input(r: usize, i: usize, step: usize) -> u64 {
    let mut x = (r as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ (i as u64 + 7).wrapping_mul(0xBF58_476D_1CE4_E5B9)
        ^ (step as u64).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^= x >> 29;
    x % 1_000_003
}

fn inputs(r: usize, len: usize, step: usize) -> Vec<u64> {
    (0..len).map(|i| input(r, i, step)).collect()
}

fn expect(what: &str, step: usize, got: &[u64], want: &[u64]) -> tessera::RankResult {
    if got != want {
        return Err(format!("step {step}, {what}: got {got:?}, expected {want:?}").into());
    }
    Ok(())
}

/// One call chosen by `step` (the same on every member), checked.
fn call(team: &Team, step: usize) -> tessera::RankResult {
    let (n, me) = (team.size(), team.rank());
    // Shapes vary by kind, length and root: more than the plans a team keeps.
    let len = 1 + (step / 9) % 3;
    let root = (step / 27) % n;
    let mine = inputs(me, len, step);
    let all: Vec<Vec<u64>> = (0..n).map(|r| inputs(r, len, step)).collect();
    let sum = |members: std::ops::Range<usize>| -> Vec<u64> {
        (0..len)
            .map(|i| members.clone().map(|r| all[r][i]).sum())
            .collect()
    };
    match step % 9 {
        0 => {
            let mut out = vec![0; len];
            team.run(Allreduce::new(&mine, Op::Sum).to(&mut out), Blocking)?;
            expect("allreduce", step, &out, &sum(0..n))
        }
        1 => {
            let mut out = vec![0; len];
            team.run(Reduce::new(root, &mine, Op::Sum).to(&mut out), Blocking)?;
            if me == root {
                expect("reduce", step, &out, &sum(0..n))?;
            }
            Ok(())
        }
        2 => {
            let mut data = if me == root { mine } else { vec![0; len] };
            team.run(Broadcast::in_place(root, &mut data), Blocking)?;
            expect("broadcast", step, &data, &all[root])
        }
        3 => {
            let mut out = vec![0; if me == root { n * len } else { 0 }];
            team.run(Gather::new(root, &mine).to(&mut out), Blocking)?;
            if me == root {
                expect("gather", step, &out, &all.concat())?;
            }
            Ok(())
        }
        4 => {
            let mut out = vec![0; n * len];
            team.run(Allgather::new(&mine).to(&mut out), Blocking)?;
            expect("allgather", step, &out, &all.concat())
        }
        5 => {
            let blocks: Vec<u64> = (0..n * len).map(|i| input(root, i, step)).collect();
            let src = if me == root {
                blocks.clone()
            } else {
                Vec::new()
            };
            let mut out = vec![0; len];
            team.run(Scatter::new(root, &src, out.len()).to(&mut out), Blocking)?;
            expect("scatter", step, &out, &blocks[me * len..(me + 1) * len])
        }
        6 => {
            // Block j of member r's input goes to member j.
            let src = inputs(me, n * len, step);
            let mut out = vec![0; n * len];
            team.run(Exchange::new(&src).to(&mut out), Blocking)?;
            let want: Vec<u64> = (0..n)
                .flat_map(|r| inputs(r, n * len, step)[me * len..(me + 1) * len].to_vec())
                .collect();
            expect("exchange", step, &out, &want)
        }
        7 => {
            let mut out = vec![0; len];
            team.run(Scan::new(&mine, Op::Sum).to(&mut out), Blocking)?;
            expect("scan", step, &out, &sum(0..me + 1))
        }
        _ => {
            let mut out = vec![0; len];
            team.run(Exscan::new(&mine, Op::Sum).to(&mut out), Blocking)?;
            expect("exclusive scan", step, &out, &sum(0..me))
        }
    }
}

fn interleave(ranks: usize, steps: usize) {
    Job::threads(ranks)
        .segment(16 << 20)
        .wait_timeout(Duration::from_secs(60))
        .run(|ctx: &Context| {
            let world = Team::world(ctx)?;
            // Teams that share the world's channel with other algorithms forced, so one
            // channel's plans are kept under several algorithms.
            let flat = world
                .with_algorithm(Collective::Allreduce, Algorithm::REDUCE_BROADCAST)?
                .with_algorithm(Collective::Broadcast, Algorithm::FLAT)?
                .with_algorithm(Collective::Scan, Algorithm::LINEAR)?;
            let halves = world
                .split(Some((ctx.rank() % 2) as u32), 0)?
                .expect("every member has a colour");
            for step in 0..steps {
                call(&world, step)?;
                call(&flat, step + 1)?;
                call(&halves, step + 2)?;
                // A shape seen before, after others have been kept since.
                call(&world, step / 2)?;
            }
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{ranks} ranks: {e}"));
}

#[test]
fn reused_plans_deliver_what_fresh_ones_do_at_3_ranks() {
    interleave(3, 120);
}

#[test]
fn reused_plans_deliver_what_fresh_ones_do_at_4_ranks() {
    interleave(4, 120);
}
