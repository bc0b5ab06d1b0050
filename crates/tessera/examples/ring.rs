//! A token ring with signalling puts: each rank passes a growing vector to its right
//! neighbour with a signalling put (`Signal::Post`), and waits on its own semaphore for the token to come
//! around. No barrier inside the loop: the data and the signal travel together.
//!
//! ```text
//! cargo run --release -- run -n 4 -- target/release/examples/ring 1000
//! ```

use tessera::{Blocking, Signal};
fn main() {
    let laps: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(100);
    tessera::spmd(|ctx| {
        let (me, p) = (ctx.rank(), ctx.ranks());
        let right = (me + 1) % p;
        let inbox = ctx.alloc_collective::<u64>(p)?;
        let arrived = ctx.semaphore_collective()?;
        let start = std::time::Instant::now();
        let mut token = vec![0u64; p];
        for lap in 0..laps {
            if me != 0 || lap > 0 {
                arrived.wait(ctx, 1)?;
                ctx.get(inbox, &mut token, Blocking)?;
            }
            token[me] += 1; // every rank stamps the token once per lap
            ctx.put(inbox.on(right), &token, Signal::Post(arrived.on(right)))?;
        }
        if me == 0 {
            arrived.wait(ctx, 1)?;
            ctx.get(inbox, &mut token, Blocking)?;
            let ok = token.iter().all(|&t| t == laps);
            let hops = laps * p as u64;
            println!(
                "ring: {laps} laps over {p} ranks, token {} ({:.2} us per hop)",
                if ok { "intact" } else { "CORRUPTED" },
                start.elapsed().as_secs_f64() * 1e6 / hops as f64
            );
            if !ok {
                return Err(format!("token is {token:?}, expected {laps} everywhere").into());
            }
        }
        Ok(())
    });
}
