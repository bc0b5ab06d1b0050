//! Gets from a rank that is busy computing: rank 0 computes for a while without calling
//! Tessera, and every other rank reads rank 0's segment meanwhile, timing each read. Over
//! shared memory the reads never need rank 0; through MPI (another host, or
//! `TESSERA_MPI_BYPASS=0`) they may wait until rank 0 next enters MPI, unless a progress
//! thread (`TESSERA_MPI_PROGRESS=100`) enters it for rank 0. Each reader checks what it
//! read and prints how many reads it completed during the computation, with their median
//! and longest latency.
//!
//! ```text
//! TESSERA_MPI_BYPASS=0 TESSERA_MPI_PROGRESS=100 \
//!     cargo run --release -- run --conduit mpi -n 2 -- target/release/examples/busy_target 1
//! ```

use std::time::{Duration, Instant};
use tessera::Blocking;

fn main() {
    let secs: f64 = std::env::args()
        .nth(1)
        .map_or(Ok(1.0), |s| s.parse())
        .unwrap_or_else(|_| {
            eprintln!("usage: busy_target [SECONDS_OF_COMPUTATION]");
            std::process::exit(2)
        });
    tessera::spmd(|ctx| {
        let words = 512;
        let data = ctx.alloc_collective::<u64>(words)?;
        if ctx.rank() == 0 {
            let pattern: Vec<u64> = (0..words as u64).map(|i| i * i + 7).collect();
            ctx.put(data, &pattern, Blocking)?;
        }
        ctx.barrier()?;
        if ctx.rank() == 0 {
            // Compute without entering Tessera (or MPI) for `secs`.
            let end = Instant::now() + Duration::from_secs_f64(secs);
            let mut x = 1.0f64;
            while Instant::now() < end {
                for _ in 0..10_000 {
                    x = (x * 1.000_000_1).sqrt() + 1e-9;
                }
            }
            std::hint::black_box(x);
        } else {
            let end = Instant::now() + Duration::from_secs_f64(secs * 0.8);
            let mut latencies = Vec::new();
            let mut got = vec![0u64; words];
            while Instant::now() < end {
                let t0 = Instant::now();
                ctx.get(data.on(0), &mut got, Blocking)?;
                latencies.push(t0.elapsed());
                if got
                    .iter()
                    .enumerate()
                    .any(|(i, &v)| v != (i * i + 7) as u64)
                {
                    return Err(format!("rank {} read wrong data from rank 0", ctx.rank()).into());
                }
            }
            latencies.sort();
            let median = latencies
                .get(latencies.len() / 2)
                .copied()
                .unwrap_or_default();
            let longest = latencies.last().copied().unwrap_or_default();
            println!(
                "rank {}: {} gets of 4 KiB while rank 0 computed for {secs} s: median {:.1} µs, longest {:.1} ms",
                ctx.rank(),
                latencies.len(),
                median.as_secs_f64() * 1e6,
                longest.as_secs_f64() * 1e3
            );
        }
        ctx.barrier()?;
        Ok(())
    });
}
