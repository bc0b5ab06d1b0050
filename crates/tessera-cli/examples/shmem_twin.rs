//! The operations of `crates/tessera-shmem/bench/shmem_bench.c`, through Tessera's Rust
//! API with the same method and output, so that `scripts/shmem-bench.sh` shows in one run
//! what the C layer adds per call.
//!
//! ```text
//! tessera run -n 2 -- target/release/examples/shmem_twin
//! ```
//!
//! With the arguments `count OP N` it makes N calls of operation OP and nothing else, the
//! twin of `shmem_bench count OP N`, so that `scripts/shmem-instructions.sh` can count the
//! instructions per call of each under callgrind.

use std::time::Instant;
use tessera::coll::{Allgather, Allreduce, Barrier, Broadcast, Exchange};

use tessera::{AtomicOp, Blocking, Compare, Context, Op, Signal, SignalOp, SyncMode, Team};

fn report(ctx: &Context, name: &str, bytes: usize, value: f64, unit: &str) {
    if ctx.rank() == 0 {
        println!("{name:<24} {bytes:>9} {value:>12.3} {unit}");
    }
}

/// Best of 5 batches of `iters` calls on rank 0 (the others wait in a barrier).
fn time_rank0(
    ctx: &Context,
    world: &Team,
    iters: u64,
    mut body: impl FnMut(u64) -> tessera::Result<()>,
) -> tessera::Result<f64> {
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        world.run(Barrier, Blocking)?;
        if ctx.rank() == 0 {
            let t0 = Instant::now();
            for i in 0..iters {
                body(i)?;
            }
            best = best.min(t0.elapsed().as_secs_f64() / iters as f64);
        }
    }
    world.run(Barrier, Blocking)?;
    Ok(best * 1e9)
}

/// Best of 5 batches of a call every rank makes.
fn time_all(
    world: &Team,
    iters: u64,
    mut body: impl FnMut() -> tessera::Result<()>,
) -> tessera::Result<f64> {
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        world.run(Barrier, Blocking)?;
        let t0 = Instant::now();
        for _ in 0..iters {
            body()?;
        }
        best = best.min(t0.elapsed().as_secs_f64() / iters as f64);
    }
    Ok(best * 1e9)
}

/// `count OP N`: N calls of OP on every rank, nothing timed (the twin of the C program's
/// `count` mode, call for call).
fn count_calls(ctx: &Context, op: &str, calls: u64) -> tessera::Result<()> {
    let (n, peer) = (ctx.ranks(), (ctx.rank() + 1) % ctx.ranks());
    let world = Team::world(ctx)?;
    let split = world.subset(&(0..n).collect::<Vec<_>>())?;
    let word = ctx.alloc_collective::<i64>(1)?;
    let sig = ctx.alloc_collective::<u64>(1)?;
    let (one, mut out) = ([1i64], [0i64]);
    world.run(Barrier, Blocking)?;
    let ones = vec![1i64; n];
    // One loop per operation, so that choosing the operation is not counted per call.
    macro_rules! calls {
        ($i:ident => $body:expr) => {
            for $i in 0..calls {
                $body;
            }
        };
    }
    match op {
        "put8" => calls!(i => ctx.put(word.on(peer), &[i as i64], Blocking)?),
        "get8" => calls!(_i => out[0] += ctx.get_value(word.on(peer))?),
        "fetch_add8" => calls!(_i => out[0] += ctx.atomic_fetch(word.on(peer), AtomicOp::Add(1))?),
        "put_signal8" => {
            calls!(i => ctx.put(word.on(peer), &one, Signal::Flag(sig.on(peer), SignalOp::Set(i)))?)
        }
        "put_fence_set8" => calls!(i => {
            ctx.put(word.on(peer), &one, Blocking)?;
            ctx.sync_nbi()?;
            ctx.fence();
            ctx.atomic_store(sig.on(peer), i)?;
        }),
        "barrier_all" => calls!(_i => world.run(Barrier, Blocking)?),
        // As the C layer runs a small 1.4 broadcast: the team's messages, from a copy of
        // the root's source.
        "broadcast32" => {
            let mut data = [1u32];
            calls!(_i => world.run(Broadcast::in_place(0, &mut data), Blocking)?)
        }
        "fcollect64" => {
            let mut outs = vec![0i64; n];
            calls!(_i => world.run(Allgather::new(&one).to(&mut outs), Blocking)?)
        }
        "sum_to_all" | "team_sum_world" => {
            calls!(_i => world.run(Allreduce::new(&one, Op::Sum).to(&mut out), Blocking)?)
        }
        "team_sum_split" => {
            calls!(_i => split.run(Allreduce::new(&one, Op::Sum).to(&mut out), Blocking)?)
        }
        "team_alltoall_world" => {
            // As the C layer calls it: straight into the symmetric destinations.
            let loose = world.with_sync(SyncMode::No, SyncMode::My);
            let dsts = world.symmetric(ctx.alloc_collective::<i64>(n)?);
            calls!(_i => loose.run(Exchange::new(&ones).to_symmetric(&dsts), Blocking)?)
        }
        _ => {
            return Err(tessera::Error::Application(
                format!("no operation {op} to count").into(),
            ))
        }
    }
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [mode, op, calls] = &args[..] {
        if mode == "count" {
            let calls: u64 = calls.parse().expect("count OP N: N is a number of calls");
            tessera::spmd(|ctx| Ok(count_calls(ctx, op, calls)?));
            return;
        }
    }
    tessera::spmd(|ctx| {
        let (me, n) = (ctx.rank(), ctx.ranks());
        let peer = (me + 1) % n;
        let world = Team::world(ctx)?;
        let words = ctx.alloc_collective::<i64>(1024)?;
        let flag = ctx.alloc_collective::<i64>(1)?;
        let buf = ctx.alloc_collective::<u8>(4 << 20)?;
        let src = vec![1u8; 4 << 20];
        world.run(Barrier, Blocking)?;
        if me == 0 {
            println!("# shmem_twin (Rust API): {n} ranks");
        }
        let t = time_rank0(ctx, &world, 200_000, |i| {
            ctx.put(words.on(peer).add(i as usize & 1023), &[i as i64], Blocking)
        })?;
        report(ctx, "put8_heap", 8, t, "ns");
        let t = time_rank0(ctx, &world, 200_000, |i| {
            ctx.get_value(words.on(peer).add(i as usize & 1023))
                .map(drop)
        })?;
        report(ctx, "get8_heap", 8, t, "ns");
        let t = time_rank0(ctx, &world, 100_000, |_| {
            ctx.atomic_fetch(words.on(peer), AtomicOp::Add(1)).map(drop)
        })?;
        report(ctx, "fetch_add8_heap", 8, t, "ns");
        let mut bytes = 8;
        while bytes <= 4 << 20 {
            let iters = if bytes < 65536 {
                20_000
            } else if bytes < 1 << 20 {
                2_000
            } else {
                200
            };
            let t = time_rank0(ctx, &world, iters, |_| {
                ctx.put(buf.on(peer), &src[..bytes], Blocking)
            })?;
            report(ctx, "putmem_bw", bytes, bytes as f64 / t * 1e3, "MB/s");
            bytes *= 8;
        }
        if n >= 2 {
            let mut best = f64::INFINITY;
            for _ in 0..5 {
                ctx.put(flag, &[0], Blocking)?;
                world.run(Barrier, Blocking)?;
                let t0 = Instant::now();
                for round in 1..=20_000i64 {
                    if me == 0 {
                        ctx.put(flag.on(1), &[round], Blocking)?;
                        ctx.wait_value(flag, Compare::Eq, -round)?;
                    } else if me == 1 {
                        ctx.wait_value(flag, Compare::Eq, round)?;
                        ctx.put(flag.on(0), &[-round], Blocking)?;
                    }
                }
                best = best.min(t0.elapsed().as_secs_f64() / 20_000.0 / 2.0);
            }
            world.run(Barrier, Blocking)?;
            report(ctx, "wait_until_wakeup", 8, best * 1e9, "ns");
        }
        let t = time_all(&world, 20_000, || world.run(Barrier, Blocking))?;
        report(ctx, "barrier_all", 0, t, "ns");
        let mut out = [0i64];
        let t = time_all(&world, 20_000, || {
            world.run(Allreduce::new(&[1i64], Op::Sum).to(&mut out), Blocking)
        })?;
        report(ctx, "sum_to_all", 8, t, "ns");
        let (big, mut big_out) = (vec![1i64; 1 << 17], vec![0i64; 1 << 17]);
        let t = time_all(&world, 200, || {
            world.run(Allreduce::new(&big, Op::Sum).to(&mut big_out), Blocking)
        })?;
        report(ctx, "sum_to_all", 1 << 20, t, "ns");
        // The C layer's alltoall and broadcast: single-address forms, entry
        // unsynchronised (the destinations are ready), each rank returning once its own
        // destination holds its data.
        let loose = world.with_sync(SyncMode::No, SyncMode::My);
        let dst = ctx.alloc_collective::<u64>(1024 * n)?;
        let dsts = world.symmetric(dst);
        for (count, iters) in [(1, 20_000), (1024, 2_000)] {
            let a = vec![1u64; count * n];
            let t = time_all(&world, iters, || {
                loose.run(Exchange::new(&a).to_symmetric(&dsts), Blocking)
            })?;
            report(ctx, "alltoall64", count * 8, t, "ns");
        }
        let t = time_all(&world, 20_000, || {
            loose.run(
                Broadcast::new(0, &[1u32], 1).to_symmetric(&world.symmetric(dst.cast::<u32>())),
                Blocking,
            )
        })?;
        report(ctx, "broadcast32", 4, t, "ns");

        // 1.5: put-with-signal, and what a 1.4 program writes instead.
        let sig = ctx.alloc_collective::<u64>(1)?;
        ctx.put(sig, &[0], Blocking)?;
        world.run(Barrier, Blocking)?;
        let one = [7i64];
        let t = time_rank0(ctx, &world, 200_000, |i| {
            let to = words.on(peer).add(i as usize & 1023);
            ctx.put(to, &one, Signal::Flag(sig.on(peer), SignalOp::Set(i)))
        })?;
        report(ctx, "put_signal8", 8, t, "ns");
        let t = time_rank0(ctx, &world, 200_000, |i| {
            ctx.put(words.on(peer).add(i as usize & 1023), &one, Blocking)?;
            ctx.sync_nbi()?;
            ctx.fence();
            ctx.atomic_store(sig.on(peer), i)
        })?;
        report(ctx, "put_fence_set8", 8, t, "ns");
        if n >= 2 {
            for (form, name) in [(0, "signal_pingpong"), (1, "put_fence_set_pingpong")] {
                let mut best = f64::INFINITY;
                for _ in 0..5 {
                    ctx.put(sig, &[0], Blocking)?;
                    world.run(Barrier, Blocking)?;
                    let t0 = Instant::now();
                    for round in 1..=20_000u64 {
                        if me > 1 {
                            break;
                        }
                        let to = 1 - me;
                        let value = 2 * round - (me == 0) as u64;
                        if me == 1 {
                            ctx.wait_value(sig, Compare::Eq, 2 * round - 1)?;
                        }
                        let at = words.on(to).add(round as usize & 1023);
                        if form == 0 {
                            ctx.put(at, &one, Signal::Flag(sig.on(to), SignalOp::Set(value)))?;
                        } else {
                            ctx.put(at, &one, Blocking)?;
                            ctx.sync_nbi()?;
                            ctx.fence();
                            ctx.atomic_store(sig.on(to), value)?;
                        }
                        if me == 0 {
                            ctx.wait_value(sig, Compare::Eq, 2 * round)?;
                        }
                    }
                    best = best.min(t0.elapsed().as_secs_f64() / 20_000.0 / 2.0);
                }
                world.run(Barrier, Blocking)?;
                report(ctx, name, 8, best * 1e9, "ns");
            }
        }

        // Team collectives on the world team and on a team of every rank made from it.
        let split = world.subset(&(0..n).collect::<Vec<_>>())?;
        for (team, name) in [(&world, "world"), (&split, "split")] {
            let t = time_all(team, 20_000, || {
                team.run(Allreduce::new(&[1i64], Op::Sum).to(&mut out), Blocking)
            })?;
            report(ctx, &format!("team_sum_{name}"), 8, t, "ns");
        }
        for (team, name) in [(&world, "world"), (&split, "split")] {
            let t = time_all(team, 200, || {
                team.run(Allreduce::new(&big, Op::Sum).to(&mut big_out), Blocking)
            })?;
            report(ctx, &format!("team_sum_{name}"), 1 << 20, t, "ns");
        }
        for (count, iters) in [(1, 20_000), (1024, 2_000)] {
            let a = vec![1u64; count * n];
            for (team, name) in [(&world, "world"), (&split, "split")] {
                let (loose, dsts) = (
                    team.with_sync(SyncMode::No, SyncMode::My),
                    team.symmetric(dst),
                );
                let t = time_all(team, iters, || {
                    loose.run(Exchange::new(&a).to_symmetric(&dsts), Blocking)
                })?;
                report(ctx, &format!("team_alltoall_{name}"), count * 8, t, "ns");
            }
        }

        // Puts from 1 and 2 threads of rank 0 at once, through the mapped segments.
        let mapped = ctx.mapped_segments();
        if mapped.all_mapped() {
            for threads in 1..=2usize {
                let mut best = f64::INFINITY;
                for _ in 0..5 {
                    world.run(Barrier, Blocking)?;
                    if me == 0 {
                        let t0 = Instant::now();
                        std::thread::scope(|s| {
                            for t in 0..threads {
                                s.spawn(move || {
                                    for i in 0..200_000u64 {
                                        let at = words.on(peer).add(t * 512 + (i as usize & 511));
                                        mapped.put(at, &[i as i64]).expect("mapped put");
                                    }
                                });
                            }
                        });
                        let per = t0.elapsed().as_secs_f64() / (200_000.0 * threads as f64);
                        best = best.min(per);
                    }
                }
                world.run(Barrier, Blocking)?;
                let name = format!(
                    "ctx_put8_{threads}thread{}",
                    if threads > 1 { "s" } else { "" }
                );
                report(ctx, &name, 8, best * 1e9, "ns");
            }
        }
        Ok(())
    });
}
