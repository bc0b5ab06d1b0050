//! Small blocking collectives run straight on the channel (`model/team/small.rs`), not
//! as schedules: with many peers (past the sixteen each way kept on the stack) each
//! member's result against the sequential one, and the reductions' results bit for bit
//! those of the same algorithm's schedule (the nonblocking form runs it), since both
//! combine in the same order.

use std::time::Duration;
use tessera::coll::{
    Allgather, Allreduce, Broadcast, Exchange, Exscan, Gather, Reduce, Scan, Scatter,
};
use tessera::{Algorithm, Blocking, Collective, Context, Job, Nonblocking, Op, Team};

mod common;
use common::{fail, input_u64};

/// A job of `n` threads with room and time for these tests.
fn job(n: usize) -> Job {
    Job::threads(n)
        .segment(16 << 20)
        .wait_timeout(Duration::from_secs(120))
}

/// Values whose sums depend on the order of the additions.
fn input_f64(r: usize, i: usize, seed: u64) -> f64 {
    (input_u64(r, i, seed) % 1_000_003) as f64 * 1e-7 * if r.is_multiple_of(2) { 1e9 } else { 1.0 }
}

/// Small broadcasts, gathers and scatters go straight on the channel, up to sixteen
/// peers each way on the stack and the heap beyond: at 18 ranks (17 peers of a flat root;
/// a binomial root other than member 0 rotates 18 blocks through scratch, on the stack or,
/// at 256-byte blocks, in a vector), every broadcast, gather and scatter algorithm, blocks
/// of 8, 56 and 256 bytes, roots 0 and 5, each member's result against the sequential one.
#[test]
fn small_rooted_calls_with_many_peers() {
    let n = 18;
    job(n)
        .run(|ctx: &Context| {
            let world = Team::world(ctx)?;
            let me = ctx.rank();
            for (seed, len) in [(11u64, 1usize), (12, 7), (13, 32)] {
                for root in [0, 5] {
                    for alg in world.candidates(Collective::Broadcast) {
                        let team = world.with_algorithm(Collective::Broadcast, alg)?;
                        let mut data: Vec<u64> = (0..len)
                            .map(|i| {
                                if me == root {
                                    input_u64(root, i, seed)
                                } else {
                                    0
                                }
                            })
                            .collect();
                        team.run(Broadcast::in_place(root, &mut data), Blocking)?;
                        let want: Vec<u64> = (0..len).map(|i| input_u64(root, i, seed)).collect();
                        if data != want {
                            return Err(fail(format!(
                                "broadcast {alg}, root {root}, {len}: {data:?}"
                            )));
                        }
                    }
                    let mine: Vec<u64> = (0..len).map(|i| input_u64(me, i, seed)).collect();
                    for alg in world.candidates(Collective::Gather) {
                        let team = world.with_algorithm(Collective::Gather, alg)?;
                        let mut all = vec![0u64; if me == root { n * len } else { 0 }];
                        team.run(Gather::new(root, &mine).to(&mut all), Blocking)?;
                        if me == root {
                            let want: Vec<u64> = (0..n)
                                .flat_map(|r| (0..len).map(move |i| input_u64(r, i, seed)))
                                .collect();
                            if all != want {
                                return Err(fail(format!("gather {alg}, root {root}, {len}")));
                            }
                        }
                    }
                    let src: Vec<u64> = if me == root {
                        (0..n * len).map(|i| input_u64(root, i, seed ^ 1)).collect()
                    } else {
                        Vec::new()
                    };
                    for alg in world.candidates(Collective::Scatter) {
                        let team = world.with_algorithm(Collective::Scatter, alg)?;
                        let mut got = vec![0u64; len];
                        team.run(Scatter::new(root, &src, len).to(&mut got), Blocking)?;
                        let want: Vec<u64> = (0..len)
                            .map(|i| input_u64(root, me * len + i, seed ^ 1))
                            .collect();
                        if got != want {
                            return Err(fail(format!(
                                "scatter {alg}, root {root}, {len}: {got:?}"
                            )));
                        }
                    }
                }
            }
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{n} ranks: {e}"));
}

/// Small allgathers and all-to-alls on the channel by every row of theirs, Bruck's
/// all-to-all at radices 2, 4 and 8: at 18 ranks (the scratch past its stack array at
/// 256-byte blocks; the allgather's five rounds end with one of two blocks, radix 8's
/// second phase has a single digit's group) and 5 (not a power of two; radix 8 has one
/// phase, its last three digits' groups empty), blocks of 8, 56 and 256 bytes, each
/// member's result against the sequential one.
#[test]
fn small_to_all_calls_by_every_row() {
    for n in [5, 18] {
        job(n)
            .run(|ctx: &Context| {
                let world = Team::world(ctx)?;
                let me = ctx.rank();
                for (seed, len) in [(21u64, 1usize), (22, 7), (23, 32)] {
                    let mine: Vec<u64> = (0..len).map(|i| input_u64(me, i, seed)).collect();
                    let want: Vec<u64> = (0..n)
                        .flat_map(|r| (0..len).map(move |i| input_u64(r, i, seed)))
                        .collect();
                    for alg in world.candidates(Collective::Allgather) {
                        let team = world.with_algorithm(Collective::Allgather, alg)?;
                        let mut all = vec![0u64; n * len];
                        team.run(Allgather::new(&mine).to(&mut all), Blocking)?;
                        if all != want {
                            return Err(fail(format!("allgather {alg}, {len}: {all:?}")));
                        }
                    }
                    // Block j of member r's input is meant for member j.
                    let blocks: Vec<u64> =
                        (0..n * len).map(|i| input_u64(me, i, seed ^ 1)).collect();
                    let want: Vec<u64> = (0..n)
                        .flat_map(|r| (0..len).map(move |i| input_u64(r, me * len + i, seed ^ 1)))
                        .collect();
                    for alg in world.candidates(Collective::Exchange) {
                        let team = world.with_algorithm(Collective::Exchange, alg)?;
                        let mut got = vec![0u64; n * len];
                        team.run(Exchange::new(&blocks).to(&mut got), Blocking)?;
                        if got != want {
                            return Err(fail(format!("all-to-all {alg}, {len}: {got:?}")));
                        }
                    }
                }
                Ok(())
            })
            .unwrap_or_else(|e| panic!("{n} ranks: {e}"));
    }
}

/// Every reduction tree, the allreduce's recursive doubling and the linear scans, small
/// and blocking (on the channel) against the same algorithm's schedule (nonblocking), on
/// `f64` sums whose last bits depend on the order of the additions: identical bits. At 7
/// ranks (a flat root's 6 children: 29 elements' partial results past a stack block), 20
/// (19 children: those of 29 elements past the stack, on the heap) and 4 (recursive
/// doubling on the channel), roots 0 and 3, 1 and 29 elements.
#[test]
fn small_reductions_match_their_schedules_bit_for_bit() {
    for n in [4, 7, 20] {
        job(n)
            .run(|ctx: &Context| {
                let world = Team::world(ctx)?;
                let me = ctx.rank();
                for len in [1usize, 29] {
                    let mine: Vec<f64> = (0..len).map(|i| input_f64(me, i, 7)).collect();
                    let same = |what: String, a: &[f64], b: &[f64]| {
                        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                        if bits(a) == bits(b) {
                            Ok(())
                        } else {
                            Err(fail(format!(
                                "{what}: on the channel {a:?}, schedule {b:?}"
                            )))
                        }
                    };
                    for alg in world.candidates(Collective::Reduce) {
                        let team = world.with_algorithm(Collective::Reduce, alg)?;
                        for root in [0, 3] {
                            let mut out = vec![0.0; if me == root { len } else { 0 }];
                            team.run(Reduce::new(root, &mine, Op::Sum).to(&mut out), Blocking)?;
                            let scheduled = team
                                .run(Reduce::new(root, &mine, Op::Sum), Nonblocking)?
                                .wait()?;
                            if me == root {
                                same(
                                    format!("reduce {alg}, root {root}, {len}"),
                                    &out,
                                    &scheduled,
                                )?;
                            }
                        }
                    }
                    if n.is_power_of_two() {
                        let team = world
                            .with_algorithm(Collective::Allreduce, Algorithm::RECURSIVE_DOUBLING)?;
                        let mut out = vec![0.0; len];
                        team.run(Allreduce::new(&mine, Op::Sum).to(&mut out), Blocking)?;
                        let scheduled = team
                            .run(Allreduce::new(&mine, Op::Sum), Nonblocking)?
                            .wait()?;
                        same(format!("allreduce, {len}"), &out, &scheduled)?;
                    }
                    let team = world.with_algorithm(Collective::Scan, Algorithm::LINEAR)?;
                    let mut out = vec![0.0; len];
                    team.run(Scan::new(&mine, Op::Sum).to(&mut out), Blocking)?;
                    let scheduled = team.run(Scan::new(&mine, Op::Sum), Nonblocking)?.wait()?;
                    same(format!("scan, {len}"), &out, &scheduled)?;
                    team.run(Exscan::new(&mine, Op::Sum).to(&mut out), Blocking)?;
                    let scheduled = team.run(Exscan::new(&mine, Op::Sum), Nonblocking)?.wait()?;
                    same(format!("exscan, {len}"), &out, &scheduled)?;
                }
                Ok(())
            })
            .unwrap_or_else(|e| panic!("{n} ranks: {e}"));
    }
}
