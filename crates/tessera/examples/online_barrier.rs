//! How often online tuning picks each barrier: a fresh online-tuned team decides the
//! barrier again and again, with every candidate (the model's prior, dissemination, flat
//! and the nonblocking barrier) and with two (a tuning table that names flat, so the
//! candidates are flat and the model's dissemination); rank 0 counts the winners. With
//! `TESSERA_TUNING_TRACE=1`, member 0 also prints each decision's trial times round by
//! round, which show whether one candidate's trials are slowed by the one before them.
//!
//! ```text
//! cargo build --release --examples
//! TESSERA_TUNING_TRACE=1 cargo run --release -- run -n 16 -- target/release/examples/online_barrier
//! ```

use tessera::coll::Barrier;
use tessera::model::tuning::{Entry, Rule, TuningTable};
use tessera::{Blocking, Collective, Team};

/// Decisions per set of candidates.
const DECISIONS: usize = 12;

fn main() {
    tessera::spmd(|ctx| {
        let world = Team::world(ctx)?;
        let flat_table = TuningTable {
            machine: String::new(),
            entries: vec![Entry {
                op: "barrier".into(),
                team_size: world.size(),
                rules: vec![Rule {
                    up_to_bytes: None,
                    algorithm: "flat".into(),
                }],
            }],
        };
        let sets = [
            ("every candidate", world.clone()),
            (
                "flat and dissemination",
                world.with_tuning_table(&flat_table),
            ),
        ];
        for (name, base) in sets {
            let mut winners: Vec<(String, usize)> = Vec::new();
            for _ in 0..DECISIONS {
                let team = base.with_online_tuning();
                let mut calls = 0;
                while !team.tuning_settled(Collective::Barrier, 0) {
                    team.run(Barrier, Blocking)?;
                    calls += 1;
                    assert!(calls < 10_000, "online tuning never decided the barrier");
                }
                let winner = team.algorithm_for(Collective::Barrier, 0).to_string();
                match winners.iter_mut().find(|(w, _)| *w == winner) {
                    Some((_, count)) => *count += 1,
                    None => winners.push((winner, 1)),
                }
            }
            if ctx.rank() == 0 {
                let counts: Vec<String> = winners.iter().map(|(w, c)| format!("{w} {c}")).collect();
                println!("{name}: {} of {DECISIONS} decisions", counts.join(", "));
            }
        }
        Ok(())
    });
}
