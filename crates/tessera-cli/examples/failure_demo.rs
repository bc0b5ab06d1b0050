//! Failure handling, demonstrated: ranks run barriers in a loop while one of them fails.
//! The launcher notices, ends the other ranks and reports which rank failed and how.
//! (The launcher's failure tests use this program.)
//!
//! ```text
//! tessera run -n 4 -- target/release/examples/failure_demo --panic-rank 2
//! tessera run -n 4 -- target/release/examples/failure_demo --exit-rank 1 --code 3
//! tessera run -n 4 -- target/release/examples/failure_demo --forever   # then kill a rank
//! ```
//!
//! Options: `--barriers N` (default 1000), `--forever`, `--panic-rank R`, `--exit-rank R
//! --code C`, `--error-rank R` (return an error), `--return-rank R` (return `Ok` early,
//! skipping the remaining barriers), `--pid-dir DIR` (each rank writes its pid and the job
//! id to DIR/rank-R once it is inside the barrier loop), `--sleep-rank R --sleep-ms N`
//! (rank R sleeps N ms halfway, so the others wait for it), `--spin-rank R` (rank R
//! computes forever halfway, never waiting), `--put-rank R` (rank R puts 8 bytes to the
//! next rank forever halfway, never waiting), `--all-error` (every rank
//! returns an error at once), `--ring LAPS [--short-rank R]` (instead of barriers, pass a
//! token around the ring with signalling puts; rank R stops after 10 laps, so the others
//! wait for a token that never comes: a deadlock).

use std::path::PathBuf;
use tessera::{Blocking, Signal};

#[derive(Default)]
struct Options {
    barriers: u64,
    forever: bool,
    panic_rank: Option<usize>,
    exit_rank: Option<usize>,
    code: i32,
    error_rank: Option<usize>,
    return_rank: Option<usize>,
    sleep_rank: Option<usize>,
    sleep_ms: u64,
    spin_rank: Option<usize>,
    put_rank: Option<usize>,
    all_error: bool,
    ring: Option<u64>,
    short_rank: Option<usize>,
    pid_dir: Option<PathBuf>,
}

fn parse() -> Options {
    let mut o = Options {
        barriers: 1000,
        code: 1,
        ..Default::default()
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || {
            args.next()
                .unwrap_or_else(|| usage(&format!("{flag} needs a value")))
        };
        let number = |v: String| {
            v.parse::<u64>()
                .unwrap_or_else(|_| usage(&format!("{v:?} is not a number")))
        };
        match flag.as_str() {
            "--barriers" => o.barriers = number(value()),
            "--forever" => o.forever = true,
            "--panic-rank" => o.panic_rank = Some(number(value()) as usize),
            "--exit-rank" => o.exit_rank = Some(number(value()) as usize),
            "--code" => o.code = number(value()) as i32,
            "--error-rank" => o.error_rank = Some(number(value()) as usize),
            "--return-rank" => o.return_rank = Some(number(value()) as usize),
            "--sleep-rank" => o.sleep_rank = Some(number(value()) as usize),
            "--sleep-ms" => o.sleep_ms = number(value()),
            "--spin-rank" => o.spin_rank = Some(number(value()) as usize),
            "--put-rank" => o.put_rank = Some(number(value()) as usize),
            "--all-error" => o.all_error = true,
            "--ring" => o.ring = Some(number(value())),
            "--short-rank" => o.short_rank = Some(number(value()) as usize),
            "--pid-dir" => o.pid_dir = Some(PathBuf::from(value())),
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0)
            }
            other => usage(&format!("unknown option {other}")),
        }
    }
    o
}

const USAGE: &str = "usage: failure_demo [--barriers N | --forever] [--panic-rank R] [--exit-rank R --code C] [--error-rank R] [--return-rank R] [--sleep-rank R --sleep-ms N] [--spin-rank R] [--put-rank R] [--all-error] [--ring LAPS [--short-rank R]] [--pid-dir DIR]";

fn usage(problem: &str) -> ! {
    eprintln!("failure_demo: {problem}\n{USAGE}");
    std::process::exit(2)
}

fn main() {
    let o = parse();
    tessera::spmd(|ctx| {
        let me = ctx.rank();
        ctx.barrier()?;
        if let Some(dir) = &o.pid_dir {
            let job = tessera::config::text("TESSERA_JOB_ID").unwrap_or_default();
            std::fs::write(
                dir.join(format!("rank-{me}")),
                format!("{} {job}", std::process::id()),
            )?;
        }
        if let Some(laps) = o.ring {
            let laps = if o.short_rank == Some(me) { 10 } else { laps };
            return ring(ctx, laps);
        }
        // The word `--put-rank` writes into, on every rank (a collective allocation).
        let word = match o.put_rank {
            Some(_) => Some(ctx.alloc_collective::<u64>(1)?),
            None => None,
        };
        let mut round = 0u64;
        while o.forever || round < o.barriers {
            if round == o.barriers / 2 {
                if o.panic_rank == Some(me) {
                    panic!("rank {me} panics on purpose in barrier round {round}");
                }
                if o.exit_rank == Some(me) {
                    std::process::exit(o.code);
                }
                if o.error_rank == Some(me) {
                    return Err(format!("rank {me} returns an error on purpose").into());
                }
                if o.return_rank == Some(me) {
                    return Ok(());
                }
                if o.sleep_rank == Some(me) {
                    std::thread::sleep(std::time::Duration::from_millis(o.sleep_ms));
                }
                if o.spin_rank == Some(me) {
                    // Computes forever without a wait: only the watchdog can end the job.
                    let mut x = 0u64;
                    loop {
                        x = std::hint::black_box(x.wrapping_add(1));
                    }
                }
                if let (Some(word), true) = (word, o.put_rank == Some(me)) {
                    // Communicates forever without a wait.
                    let next = word.on((me + 1) % ctx.ranks());
                    for i in 0u64.. {
                        ctx.put(next, &[i], Blocking)?;
                    }
                }
                if o.all_error {
                    return Err(
                        format!("rank {me} of all ranks returns an error on purpose").into(),
                    );
                }
            }
            ctx.barrier()?;
            round += 1;
        }
        if me == 0 {
            println!(
                "failure_demo: {round} barriers on {} ranks of the {} conduit, no failure",
                ctx.ranks(),
                ctx.conduit_kind()
            );
        }
        Ok(())
    });
}

/// Pass a token around the ring `laps` times with signalling puts.
fn ring(ctx: &tessera::Context, laps: u64) -> tessera::RankResult {
    let (me, p) = (ctx.rank(), ctx.ranks());
    let inbox = ctx.alloc_collective::<u64>(1)?;
    let arrived = ctx.semaphore_collective()?;
    let right = (me + 1) % p;
    for lap in 0..laps {
        if me != 0 || lap > 0 {
            arrived.wait(ctx, 1)?;
        }
        ctx.put(inbox.on(right), &[lap], Signal::Post(arrived.on(right)))?;
    }
    if me == 0 {
        arrived.wait(ctx, 1)?;
    }
    Ok(())
}
