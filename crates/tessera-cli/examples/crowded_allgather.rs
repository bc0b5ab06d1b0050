//! The 8-byte allgather among many ranks that share few processors, by Bruck's
//! dissemination and by every member broadcasting to all at once, each forced, beside the
//! cost model's choice: for each rank count given, a job on the threads conduit times two
//! rounds of calls of each and prints microseconds per call. Where ranks outnumber
//! processors the all-at-once round's n(n − 1) messages are the processors' work, and
//! it falls behind Bruck's as the job grows; the cost model, which prices every member's
//! messages on the processors they share, turns to Bruck's from 24 ranks on 2 cores
//! (docs/PERFORMANCE.md, "Many ranks on one node").
//!
//! ```text
//! cargo build --release --examples -p tessera-cli
//! target/release/examples/crowded_allgather 8 16 24 32 48 64
//! ```

use std::time::{Duration, Instant};

use tessera::coll::Allgather;
use tessera::{Algorithm, Blocking, Collective, Job, Team};

/// Calls per timed round, divided among the ranks (so that each job takes about as long).
const CALLS_TIMES_RANKS: usize = 20_000;

fn main() {
    let counts: Result<Vec<usize>, _> = std::env::args().skip(1).map(|a| a.parse()).collect();
    let counts = match counts {
        Ok(c) if !c.is_empty() && c.iter().all(|&n| n >= 2) => c,
        _ => {
            eprintln!("crowded_allgather: give rank counts of at least 2, e.g. 8 16 32 64");
            std::process::exit(2);
        }
    };
    for ranks in counts {
        let calls = (CALLS_TIMES_RANKS / ranks).max(10);
        let outcome = Job::threads(ranks)
            .segment(80 << 20)
            .wait_timeout(Duration::from_secs(300))
            .run(move |ctx| {
                let world = Team::world(ctx)?;
                let model = world.algorithm_for(Collective::Allgather, 8);
                let mut line = format!("{ranks:>4} ranks, model's choice {model}:");
                for _round in 0..2 {
                    for alg in [Algorithm::bruck(2), Algorithm::ALL_BROADCAST] {
                        let team = world.with_algorithm(Collective::Allgather, alg)?;
                        ctx.barrier()?;
                        let start = Instant::now();
                        for _ in 0..calls {
                            let all = team.run(Allgather::value(ctx.rank() as u64), Blocking)?;
                            if all[ranks - 1] != (ranks - 1) as u64 {
                                return Err(format!("{alg} delivered {all:?}").into());
                            }
                        }
                        ctx.barrier()?;
                        let us = start.elapsed().as_secs_f64() * 1e6 / calls as f64;
                        line += &format!(" {alg} {us:.1}");
                    }
                }
                if ctx.rank() == 0 {
                    println!("{line} (µs per call)");
                }
                Ok(())
            });
        if let Err(e) = outcome {
            eprintln!("crowded_allgather: {ranks} ranks: {e}");
            std::process::exit(1);
        }
    }
}
