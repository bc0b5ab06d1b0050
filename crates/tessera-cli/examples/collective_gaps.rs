//! What the gap between a collective's input and output costs its long messages: an
//! all-to-all and an allgather from a `tessera::HugePageArray` into another whose slice
//! starts 0, 8, 16 or 64 bytes past the input's offset in a 4 KiB page, each member's rows
//! checked. A long message between ranks of one host is one kernel copy (DESIGN.md
//! "Direct reads"), and on AMD Zen 3 and Zen 4 that copy slows down where its destination
//! lies a few bytes past its source modulo 4 KiB (1 to 31 on Zen 3, 1 to 15 on Zen 4); the
//! library moves such reads through a buffer of its own placed at gap 0 (`core::direct`). `examples/direct_read_pages`
//! times the kernel's copy alone.
//!
//! ```text
//! cargo build --release --bins --examples -p tessera-cli
//! target/release/tessera run -n 2 -- target/release/examples/collective_gaps
//! target/release/tessera run -n 2 -- target/release/examples/collective_gaps 4194304
//! ```
//!
//! Sizes are bytes per member (256 KiB and 1 MiB by default). `TESSERA_DIRECT=1` keeps
//! every long message to direct reads (online tuning may otherwise send a size class
//! through the mailbox).

use std::time::Instant;

use tessera::coll::{Allgather, Allreduce, Barrier, Exchange};
use tessera::{Blocking, Collective, HugePageArray, Job, Op, Team};

/// Destination minus source, modulo 4 KiB, in bytes (multiples of 8: the elements are
/// `u64`).
const GAPS: [usize; 4] = [0, 8, 16, 64];

/// Calls at most before timing, waiting for the online tuner to decide.
const MAX_TRIAL_CALLS: usize = 1000;

/// The size from which a `HugePageArray` has a mapping of its own (from a 2 MiB boundary).
const MAPPED: usize = 1 << 20;

fn main() {
    let sizes: Result<Vec<usize>, _> = std::env::args().skip(1).map(|a| a.parse()).collect();
    let sizes = match sizes {
        Ok(sizes) if !sizes.is_empty() => sizes,
        Ok(_) => vec![256 << 10, 1 << 20],
        Err(e) => {
            eprintln!("collective_gaps: sizes are byte counts per member: {e}");
            std::process::exit(2);
        }
    };
    let outcome = Job::from_env().and_then(|job| {
        job.run(move |ctx| {
            let world = Team::world(ctx)?;
            let (n, me) = (world.size(), world.rank());
            if me == 0 {
                println!("µs per call, slowest member's best of five batches ({n} ranks)");
                println!("bytes      operation   gap 0    gap 8   gap 16   gap 64");
            }
            for &bytes in &sizes {
                let len = (bytes / 8).max(1);
                let iters = (8_000_000 / (bytes + 2048)).max(5);
                // Both arrays at least 1 MiB, so that both are mapped from a page boundary.
                let room = (n * len + 512).max(MAPPED / 8);
                let mut input = HugePageArray::<u64>::zeroed(room);
                // Member `me`'s values for member `j`: every element tells where it came from.
                for (i, v) in input[..n * len].iter_mut().enumerate() {
                    *v = ((me * n + i / len) * len + i % len) as u64;
                }
                let input = &input[..n * len];
                let mut area = HugePageArray::<u64>::zeroed(room);
                for (name, all_to_all) in [("all-to-all", true), ("allgather", false)] {
                    let mut row = format!("{bytes:<10} {name:<10}");
                    for gap in GAPS {
                        // The input starts a page; the output `gap` bytes into one.
                        let out = &mut area[gap / 8..gap / 8 + n * len];
                        let call = |out: &mut [u64]| {
                            if all_to_all {
                                world.run(Exchange::new(input).to(out), Blocking)
                            } else {
                                world.run(Allgather::new(&input[..len]).to(out), Blocking)
                            }
                        };
                        // Past the online tuner's trials of this size (the first calls
                        // of a size try each candidate), so that every gap times the
                        // decision, not the trials.
                        call(out)?;
                        let op = if all_to_all {
                            Collective::Exchange
                        } else {
                            Collective::Allgather
                        };
                        for _ in 0..MAX_TRIAL_CALLS {
                            if world.tuning_settled(op, bytes) {
                                break;
                            }
                            call(out)?;
                        }
                        let expected = |i: usize| {
                            let (from, at) = (i / len, i % len);
                            let block = if all_to_all { me } else { 0 };
                            ((from * n + block) * len + at) as u64
                        };
                        if (0..n * len).any(|i| out[i] != expected(i)) {
                            return Err(format!(
                                "{name} of {bytes} bytes at gap {gap} delivered wrong data"
                            )
                            .into());
                        }
                        let mut best = f64::INFINITY;
                        for _ in 0..5 {
                            world.run(Barrier, Blocking)?;
                            let start = Instant::now();
                            for _ in 0..iters {
                                call(out)?;
                            }
                            best = best.min(start.elapsed().as_secs_f64() * 1e6 / iters as f64);
                        }
                        let slowest = world.run(Allreduce::value(best, Op::Max), Blocking)?;
                        row += &format!("  {slowest:>7.1}");
                    }
                    if me == 0 {
                        println!("{row}");
                    }
                }
            }
            Ok(())
        })
    });
    if let Err(e) = outcome {
        eprintln!("collective_gaps: {e}");
        std::process::exit(1);
    }
}
