//! Reductions long enough to go whole (`algorithms::reduce::WHOLE_FROM`, 256 KiB) in a
//! job with more ranks than the host has processors, where every member's input is read
//! whole and directly rather than in a pipeline of chunks (`algorithms::reduce::whole_tree`):
//! every reduction algorithm at every root, a team of one, and the inputs left as they
//! were.

use std::time::Duration;
use tessera::coll::{Barrier, Reduce};
use tessera::{Algorithm, Blocking, Collective, Context, Job, Op, Team};

mod common;
use common::{fail, input_u64};

/// Processors this host has online.
fn processors() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// At two ranks more than the host has processors (at least 4, so that a binomial tree
/// has a middle member, which sends its partial result from scratch; at most 10, where
/// a large host's members each have a processor and the chunks go on), each reduction
/// algorithm's sum at each root, element by element.
#[test]
fn long_reductions_where_ranks_outnumber_processors_sum_every_element() {
    const LEN: usize = 40_003; // u64s: 320 KB, not a multiple of any chunk
    let n = (processors() + 2).clamp(4, 10);
    let algorithms = [
        Algorithm::FLAT,
        Algorithm::BINOMIAL,
        Algorithm::knomial(3),
        Algorithm::knomial(4),
    ];
    Job::threads(n)
        .segment(64 << 20)
        .wait_timeout(Duration::from_secs(300))
        .run(move |ctx: &Context| {
            let world = Team::world(ctx)?;
            let me = ctx.rank();
            if world.shares_cores() != (n > processors()) {
                return Err(fail(format!(
                    "{n} ranks on {} processors: shares_cores() says {}",
                    processors(),
                    world.shares_cores()
                )));
            }
            for (a, &alg) in algorithms.iter().enumerate() {
                let team = world.with_algorithm(Collective::Reduce, alg)?;
                for root in 0..n {
                    let seed = (a * n + root) as u64 + 1;
                    let mine: Vec<u64> = (0..LEN).map(|i| input_u64(me, i, seed)).collect();
                    let mut out = vec![0u64; if me == root { LEN } else { 0 }];
                    team.run(Reduce::new(root, &mine, Op::Sum).to(&mut out), Blocking)?;
                    let what = format!("{alg:?}, root {root}");
                    if (0..LEN).any(|i| mine[i] != input_u64(me, i, seed)) {
                        return Err(fail(format!("{what}: the input changed")));
                    }
                    if me == root {
                        let sum = |i: usize| {
                            (0..n).fold(0u64, |s, r| s.wrapping_add(input_u64(r, i, seed)))
                        };
                        if let Some(i) = (0..LEN).find(|&i| out[i] != sum(i)) {
                            return Err(fail(format!("{what}: wrong sum at element {i}")));
                        }
                    }
                }
            }
            // A team of one: its own input is the result.
            let alone = world.subset(&[me])?;
            let mine: Vec<u64> = (0..LEN).map(|i| input_u64(me, i, 99)).collect();
            let mut out = vec![0u64; LEN];
            alone.run(Reduce::new(0, &mine, Op::Sum).to(&mut out), Blocking)?;
            if out != mine {
                return Err(fail("a team of one: the result is not the input".into()));
            }
            world.run(Barrier, Blocking)?;
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{e}"));
}
