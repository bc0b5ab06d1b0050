//! How an online-tuning trial would time the barrier, against a loop of barriers: for the
//! dissemination and the flat barrier, 40 trials each of the trial's pattern (a
//! dissemination barrier, some untimed calls, then timed calls in a row, their mean), the
//! slowest member's time per trial; then each barrier in a loop of 2,000 calls. The
//! patterns run in turn from the job's start, so the first ones also meet the mailbox
//! rings' first lap where the rings are not mapped ahead (`model/team/online.rs`,
//! `SHORT_TIMED_CALLS`; `model/team/channel.rs`, `touch_own_area`).
//!
//! ```text
//! cargo build --release --examples
//! TESSERA_TUNING=none cargo run --release -- run -n 16 -- target/release/examples/trial_timing
//! ```

use std::time::Instant;
use tessera::coll::{Allreduce, Barrier};
use tessera::{Algorithm, Blocking, Collective, Op, Team};

/// (untimed calls, timed calls in a row) of each pattern tried.
const PATTERNS: [(usize, usize); 5] = [(0, 1), (2, 1), (6, 1), (2, 4), (2, 8)];
const TRIALS: usize = 40;
const LOOP_CALLS: usize = 2000;

fn main() {
    tessera::spmd(|ctx| {
        let names = ["dissemination", "flat"];
        let world = Team::world(ctx)?;
        let algs = [Algorithm::DISSEMINATION, Algorithm::FLAT];
        let teams = algs
            .iter()
            .map(|&a| world.with_algorithm(Collective::Barrier, a))
            .collect::<Result<Vec<Team>, _>>()?;
        let opening = &teams[0];
        for (untimed, timed) in PATTERNS {
            for (alg, team) in names.iter().zip(&teams) {
                let mut slowest = Vec::with_capacity(TRIALS);
                for _ in 0..TRIALS {
                    opening.run(Barrier, Blocking)?;
                    for _ in 0..untimed {
                        team.run(Barrier, Blocking)?;
                    }
                    let start = Instant::now();
                    for _ in 0..timed {
                        team.run(Barrier, Blocking)?;
                    }
                    let us = start.elapsed().as_secs_f64() * 1e6 / timed as f64;
                    slowest.push(world.run(Allreduce::value(us, Op::Max), Blocking)?);
                }
                slowest.sort_by(f64::total_cmp);
                if ctx.rank() == 0 {
                    println!(
                        "{untimed} untimed, {timed} timed in a row, {alg:14} median {:6.2} us (quartiles {:.2}, {:.2})",
                        slowest[TRIALS / 2],
                        slowest[TRIALS / 4],
                        slowest[3 * TRIALS / 4]
                    );
                }
            }
        }
        for (alg, team) in names.iter().zip(&teams) {
            let mut best = f64::MAX;
            for _ in 0..5 {
                opening.run(Barrier, Blocking)?;
                let start = Instant::now();
                for _ in 0..LOOP_CALLS {
                    team.run(Barrier, Blocking)?;
                }
                let us = start.elapsed().as_secs_f64() * 1e6 / LOOP_CALLS as f64;
                best = best.min(world.run(Allreduce::value(us, Op::Max), Blocking)?);
            }
            if ctx.rank() == 0 {
                println!("a loop of {LOOP_CALLS}, {alg:14} {best:6.2} us per call");
            }
        }
        Ok(())
    });
}
