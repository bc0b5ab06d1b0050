//! IS's ranking step per rank, one thread, under two bucket assignments: by keys alone
//! (`assign_buckets` with a width of 0) and the default, which weighs each key value of a
//! rank's range (`is::RANGE_WEIGHT`). For each rank: its keys, the width of its key range
//! and the best of three timings of `cumulative_counts` over them; then the slowest rank of
//! each assignment, which is what the ranks wait for (docs/PERFORMANCE.md):
//!
//! ```sh
//! cargo run --release -p tessera-npb --example is_ranking_balance -- C 16
//! ```
//!
//! Arguments: the class (S, W, A, B, C; default C) and the rank count (default 16).

use std::time::Instant;
use tessera_npb::is::{assign_buckets, cumulative_counts, generate, CLASSES};
use tessera_npb::Class;

fn main() {
    let mut args = std::env::args().skip(1);
    let class: Class = match args.next().unwrap_or_else(|| "C".into()).parse() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("is_ranking_balance: {e}");
            std::process::exit(2);
        }
    };
    let ranks: usize = match args.next().map(|a| a.parse()) {
        None => 16,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            eprintln!("is_ranking_balance: the rank count must be a positive whole number");
            std::process::exit(2);
        }
    };
    let Some(data) = CLASSES.iter().find(|c| c.class == class) else {
        eprintln!("is_ranking_balance: IS has no class {class}");
        std::process::exit(2);
    };
    let total = 1usize << data.total_keys_log2;
    let max_key = 1usize << data.max_key_log2;
    let shift = data.max_key_log2 - data.buckets_log2;
    let mut keys = vec![0i32; total];
    generate(0, &mut keys, max_key);
    let mut totals = vec![0u64; 1 << data.buckets_log2];
    for &k in &keys {
        totals[(k >> shift) as usize] += 1;
    }
    let (mut narrow, mut histogram) = (Vec::new(), Vec::new());
    for (name, width) in [("keys alone", 0), ("weighted", 1u64 << shift)] {
        let starts = assign_buckets(&totals, ranks, width);
        let mut slowest = 0f64;
        println!("{name}:");
        for r in 0..ranks {
            let (lo, hi) = (starts[r] << shift, starts[r + 1] << shift);
            let mine: Vec<i32> = keys
                .iter()
                .copied()
                .filter(|&k| (lo..hi).contains(&(k as usize)))
                .collect();
            let mut best = f64::MAX;
            for _ in 0..3 {
                let start = Instant::now();
                cumulative_counts(&mine, lo..hi, &mut narrow, &mut histogram);
                best = best.min(start.elapsed().as_secs_f64());
            }
            slowest = slowest.max(best);
            println!(
                "  rank {r:3}: {:>10} keys, range {:>9} values, {:7.2} ms",
                mine.len(),
                hi - lo,
                best * 1e3
            );
        }
        println!("  slowest rank {:.2} ms", slowest * 1e3);
    }
}
