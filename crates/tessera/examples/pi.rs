//! Monte-Carlo π two ways: every rank throws darts at the unit square and adds its hits
//! to a counter on rank 0 with one remote atomic fetch-add per batch; the same total also
//! comes from one `allreduce_value` over the world team, which every rank receives. The
//! program checks that the two agree.
//!
//! ```text
//! cargo run --release -- run -n 4 -- target/release/examples/pi 10000000
//! ```

use tessera::coll::Allreduce;
use tessera::Blocking;
use tessera::{AtomicOp, Op, Team};

/// A small, fast generator (xorshift64*), seeded per rank.
fn next(state: &mut u64) -> f64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    (state.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
}

fn main() {
    let darts: u64 = std::env::args()
        .nth(1)
        .map_or(Ok(4_000_000), |s| s.parse())
        .unwrap_or_else(|_| {
            eprintln!("usage: pi [DARTS_PER_RANK]");
            std::process::exit(2)
        });
    tessera::spmd(|ctx| {
        let world = Team::world(ctx)?;
        let hits = ctx.alloc_collective::<u64>(1)?;
        if ctx.rank() == 0 {
            ctx.atomic_store(hits, 0)?;
        }
        ctx.barrier()?;
        let mut state =
            0x9E37_79B9_7F4A_7C15u64 ^ (ctx.rank() as u64 + 1).wrapping_mul(0xD1B5_4A32_D192_ED03);
        let batch = 100_000;
        let mut mine = 0u64;
        let mut left = darts;
        while left > 0 {
            let n = left.min(batch);
            let inside = (0..n)
                .filter(|_| {
                    let (x, y) = (next(&mut state), next(&mut state));
                    x * x + y * y <= 1.0
                })
                .count() as u64;
            ctx.atomic_apply(hits.on(0), AtomicOp::Add(inside))?;
            mine += inside;
            left -= n;
        }
        // Every rank gets the total from the collective ...
        let total_hits = world.run(Allreduce::value(mine, Op::Sum), Blocking)?;
        ctx.barrier()?;
        // ... and rank 0 also has it from the atomics.
        if ctx.rank() == 0 {
            let by_atomics = ctx.atomic_load(hits)?;
            if by_atomics != total_hits {
                return Err(
                    format!("atomics counted {by_atomics} hits, allreduce {total_hits}").into(),
                );
            }
            let total = darts * ctx.ranks() as u64;
            let pi = 4.0 * total_hits as f64 / total as f64;
            println!(
                "pi ≈ {pi:.6} from {total} darts on {} ranks (error {:.1e})",
                ctx.ranks(),
                (pi - std::f64::consts::PI).abs()
            );
        }
        Ok(())
    });
}
