//! How an online-tuning trial times a small rooted collective, against loops of it: for
//! an 8-byte broadcast (chain, binomial, flat) and an 8-byte gather (binomial, flat),
//! trials as the tuner runs them (a barrier, two untimed calls, then timed calls in a row,
//! each timed on its own, their mean; candidates interleaved) with 8, 32 and 128 timed
//! calls, then a loop of 2,000 calls after a barrier. Each figure is the median over the
//! trials of the slowest member's time per call; the loop also gives rank 0's own time,
//! which is all a root that only sends measures (`model/team/online.rs`; `bench coll`
//! times every batch on its slowest member).
//!
//! ```text
//! cargo build --release --examples
//! cargo run --release -- run -n 8 -- target/release/examples/trial_bursts
//! ```

use std::time::Instant;
use tessera::coll::{Allreduce, Barrier, Broadcast, Gather};
use tessera::{Algorithm, Blocking, Collective, Op, Team};

const BURSTS: [usize; 3] = [8, 32, 128];
const TRIALS: usize = 24;
const LOOP_CALLS: usize = 2000;

/// One call of `op` (8 bytes per member, root 0) on `team`.
fn call(team: &Team, op: Collective, buf: &mut [u64], out: &mut [u64]) -> tessera::Result<()> {
    let root_len = if team.rank() == 0 { team.size() } else { 0 };
    match op {
        Collective::Broadcast => team.run(Broadcast::in_place(0, buf), Blocking),
        _ => team.run(Gather::new(0, buf).to(&mut out[..root_len]), Blocking),
    }
}

fn main() {
    tessera::spmd(|ctx| {
        let world = Team::world(ctx)?;
        let opening = world.with_algorithm(Collective::Barrier, Algorithm::DISSEMINATION)?;
        let combine = world.with_algorithm(Collective::Allreduce, Algorithm::RECURSIVE_DOUBLING)?;
        let slowest = |us: f64| combine.run(Allreduce::value(us, Op::Max), Blocking);
        let mut buf = [1u64; 1];
        let mut out = vec![0u64; world.size()];
        let cases = [
            (
                Collective::Broadcast,
                vec![Algorithm::CHAIN, Algorithm::BINOMIAL, Algorithm::FLAT],
            ),
            (
                Collective::Gather,
                vec![Algorithm::BINOMIAL, Algorithm::FLAT],
            ),
        ];
        for (op, algs) in cases {
            let teams = algs
                .iter()
                .map(|&a| world.with_algorithm(op, a))
                .collect::<Result<Vec<Team>, _>>()?;
            let mut rows = vec![String::new(); algs.len()];
            for burst in BURSTS {
                let mut times = vec![Vec::with_capacity(TRIALS); algs.len()];
                for _ in 0..TRIALS {
                    for (k, team) in teams.iter().enumerate() {
                        opening.run(Barrier, Blocking)?;
                        for _ in 0..2 {
                            call(team, op, &mut buf, &mut out)?;
                        }
                        let mut inside = 0.0;
                        for _ in 0..burst {
                            let start = Instant::now();
                            call(team, op, &mut buf, &mut out)?;
                            inside += start.elapsed().as_secs_f64();
                        }
                        times[k].push(slowest(inside * 1e6 / burst as f64)?);
                    }
                }
                for (row, mut t) in rows.iter_mut().zip(times) {
                    t.sort_by(f64::total_cmp);
                    row.push_str(&format!(" {:>8.2}", t[TRIALS / 2]));
                }
            }
            for (k, team) in teams.iter().enumerate() {
                let (mut max, mut own) = (f64::MAX, f64::MAX);
                for _ in 0..3 {
                    opening.run(Barrier, Blocking)?;
                    let start = Instant::now();
                    for _ in 0..LOOP_CALLS {
                        call(team, op, &mut buf, &mut out)?;
                    }
                    let us = start.elapsed().as_secs_f64() * 1e6 / LOOP_CALLS as f64;
                    max = max.min(slowest(us)?);
                    own = own.min(us);
                }
                rows[k].push_str(&format!(" {max:>8.2} {own:>8.2}"));
            }
            if ctx.rank() == 0 {
                println!(
                    "{:<10} {:<10} {:>8} {:>8} {:>8} {:>8} {:>8}  (µs per call)",
                    "op", "algorithm", "trial 8", "32", "128", "loop", "rank 0"
                );
                for (alg, row) in algs.iter().zip(&rows) {
                    println!("{:<10} {:<10}{row}", op.name(), alg.to_string());
                }
            }
        }
        Ok(())
    });
}
