//! The time a store takes to cross between two cores, with no library in the way: two
//! threads pinned to CPUs A and B pass a counter back and forth, each storing into a word
//! the other polls (two cache lines, as two ranks' flags are), and the best of five
//! batches is printed as half a round trip in nanoseconds.
//!
//! It is the floor under every small operation between two ranks on those cores, and on
//! a virtual machine it is not fixed: the host places the two virtual CPUs on cores that
//! share a cache or not, and moves them. On the 2-core AMD Zen 4 guest the same two CPUs
//! gave about 22, 50 and 210-265 ns, changing within seconds, and every small collective
//! moved with it. `scripts/compare-coll.py` and `scripts/shmem-bench.sh` run this before
//! and after each run, so that builds are compared in the same placement.
//!
//! ```text
//! cargo build --release --examples -p tessera-cli
//! target/release/examples/core_to_core        # CPUs 0 and 1
//! target/release/examples/core_to_core 0 8
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use nix::sched::{sched_setaffinity, CpuSet};
use nix::unistd::Pid;

/// Round trips per batch.
const TRIPS: u64 = 200_000;

/// What a thread stores when it cannot run on its CPU.
const GAVE_UP: u64 = u64::MAX;

/// A word alone in its cache lines (128 bytes: adjacent-line prefetchers pair lines).
#[repr(align(128))]
#[derive(Default)]
struct Word(AtomicU64);

/// Pin the calling thread to `cpu`, or say why not.
fn pin(cpu: usize) -> Result<(), String> {
    let mut only = CpuSet::new();
    only.set(cpu)
        .and_then(|()| sched_setaffinity(Pid::from_raw(0), &only))
        .map_err(|e| format!("cannot run on CPU {cpu}: {e}"))
}

/// Half a round trip between CPUs `a` and `b`, in nanoseconds (best of five batches).
fn half_round_trip(a: usize, b: usize) -> Result<f64, String> {
    let (ping, pong) = (Word::default(), Word::default());
    std::thread::scope(|s| {
        // The answering side: waits for each round on `ping` and answers it on `pong`.
        let answer = s.spawn(|| -> Result<(), String> {
            if let Err(e) = pin(b) {
                pong.0.store(GAVE_UP, Ordering::Release);
                return Err(e);
            }
            for round in 1..=5 * TRIPS {
                loop {
                    match ping.0.load(Ordering::Acquire) {
                        v if v == round => break,
                        GAVE_UP => return Ok(()),
                        _ => std::hint::spin_loop(),
                    }
                }
                pong.0.store(round, Ordering::Release);
            }
            Ok(())
        });
        let pinned = pin(a);
        let mut best = f64::INFINITY;
        'batches: for batch in 0..5 {
            if pinned.is_err() {
                break;
            }
            let started = Instant::now();
            for trip in 1..=TRIPS {
                let round = batch * TRIPS + trip;
                ping.0.store(round, Ordering::Release);
                loop {
                    match pong.0.load(Ordering::Acquire) {
                        v if v == round => break,
                        GAVE_UP => break 'batches,
                        _ => std::hint::spin_loop(),
                    }
                }
            }
            best = best.min(started.elapsed().as_secs_f64() * 1e9 / TRIPS as f64 / 2.0);
        }
        if pinned.is_err() {
            // Release the answering thread, which waits for a value that will not come.
            ping.0.store(GAVE_UP, Ordering::Release);
        }
        answer
            .join()
            .map_err(|_| "the answering thread panicked".to_string())??;
        pinned?;
        Ok(best)
    })
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let cpus: Result<Vec<usize>, _> = args.iter().map(|s| s.parse()).collect();
    let (a, b) = match cpus.as_deref() {
        Ok([]) => (0, 1),
        Ok([a, b]) if a != b => (*a, *b),
        _ => {
            eprintln!(
                "usage: core_to_core [CPU_A CPU_B]   (two different CPU numbers; default 0 1)"
            );
            std::process::exit(2)
        }
    };
    match half_round_trip(a, b) {
        Ok(ns) => println!("{ns:.1}"),
        Err(e) => {
            eprintln!("core_to_core: {e}");
            std::process::exit(1)
        }
    }
}
