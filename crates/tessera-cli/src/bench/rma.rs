//! The rank side of `tessera bench rma`.
//!
//! Rank 0 drives every point-to-point measurement against rank 1; other ranks wait in a
//! barrier (which keeps them polling). Every figure is the best of several batches, since
//! the machines we run on are shared and noisy; the baselines (memcpy of the same sizes,
//! a cache-line round trip between the same two ranks) are measured in the same job.

use std::cell::Cell;
use std::path::Path;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use tessera::conduit::Processes;
use tessera::{Blocking, Compare, Context, GlobalPtr, Nonblocking, RankResult, Signal};

use super::{Baselines, Part, Record};

const SIZES: [usize; 10] = [
    8,
    64,
    512,
    4096,
    32768,
    65536,
    262_144,
    1 << 20,
    2 << 20,
    4 << 20,
];
const BATCHES: usize = 5;

/// Seconds per iteration of `f`, best of `BATCHES` batches of `iters`.
pub(crate) fn best_per_iter(
    iters: u64,
    f: impl FnMut(u64) -> tessera::Result<()>,
) -> tessera::Result<f64> {
    batches(iters, f)
}

/// Longest a batch of one-sided operations should take: slow transports (MPI between
/// hosts) get fewer iterations.
const BATCH_BUDGET_S: f64 = 0.25;

/// [`best_per_iter`] for operations only this rank takes part in (one-sided transfers):
/// fewer iterations when one call, timed first, shows a batch would exceed
/// [`BATCH_BUDGET_S`]. Never for collectives or exchanges, where every rank must run the
/// same count.
pub(crate) fn best_per_iter_alone(
    iters: u64,
    mut f: impl FnMut(u64) -> tessera::Result<()>,
) -> tessera::Result<f64> {
    let start = Instant::now();
    f(0)?;
    let once = start.elapsed().as_secs_f64();
    let iters = if once * iters as f64 > BATCH_BUDGET_S {
        ((BATCH_BUDGET_S / once) as u64).max(5)
    } else {
        iters
    };
    batches(iters, f)
}

fn batches(iters: u64, mut f: impl FnMut(u64) -> tessera::Result<()>) -> tessera::Result<f64> {
    let mut best = f64::INFINITY;
    for _ in 0..BATCHES {
        let start = Instant::now();
        for i in 0..iters {
            f(i)?;
        }
        best = best.min(start.elapsed().as_secs_f64() / iters as f64);
    }
    Ok(best)
}

pub(crate) fn record(op: &str, bytes: usize, ranks: usize, metric: &str, value: f64) -> Record {
    Record {
        op: op.into(),
        algorithm: None,
        bytes: bytes as u64,
        ranks: ranks as u64,
        metric: metric.into(),
        value,
        pair: None,
        choice: None,
    }
}

fn iters_for(size: usize, scale: f64) -> u64 {
    (((256usize << 20) / size) as f64 * scale).clamp(20.0, 200_000.0) as u64
}

/// A raw view of an 8-byte word in this rank's segment, for the cache-line baseline.
fn local_word(ctx: &Context, ptr: GlobalPtr<u64>) -> tessera::Result<&AtomicU64> {
    let p = ctx
        .local_ptr(ptr, 1)?
        .ok_or_else(|| tessera::CoreError::Internal("own segment not mapped".into()))?;
    // SAFETY: local_ptr checked that p is an aligned, mapped u64 in our own segment, which
    // lives as long as the context; it is only accessed atomically in this benchmark.
    Ok(unsafe { AtomicU64::from_ptr(p) })
}

/// Spin until `word` holds `value`, giving up the processor every 256 looks: where ranks
/// outnumber processors (two ranks of one simulated host on its one core) the partner
/// then runs at once, instead of after the scheduler takes the core away: without this,
/// 4 ranks on 2 simulated hosts (`scripts/simulated-hosts.sh run 2,2 bench rma --quick
/// -n 4`) measured a 4.1 ms round trip and took 150 s instead of 6. With a core each, a
/// round trip ends long before the 256th look.
fn spin_until(word: &AtomicU64, value: u64) {
    let mut looks = 0u32;
    while word.load(Ordering::Acquire) != value {
        looks = looks.wrapping_add(1);
        if looks.is_multiple_of(256) {
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
    }
}

pub(crate) fn rank_main(ctx: &Context, out: &Path, barrier_only: bool, quick: bool) -> RankResult {
    let scale = if quick { 0.05 } else { 1.0 };
    let mut part = Part::default();
    if !barrier_only {
        point_to_point(ctx, scale, &mut part)?;
        #[cfg(feature = "mpi")]
        if ctx.conduit_kind() == tessera::ConduitKind::MPI {
            mpi_comparisons(ctx, scale, &mut part)?;
        }
    }
    // Barrier latency at this job's rank count.
    let n = ((40_000 / ctx.ranks().pow(2)) as f64 * scale).max(50.0) as u64;
    ctx.barrier()?;
    let t = best_per_iter(n, |_| ctx.barrier())?;
    part.results
        .push(record("barrier", 0, ctx.ranks(), "latency_us", t * 1e6));
    if ctx.rank() == 0 {
        let text = serde_json::to_string(&part)?;
        std::fs::write(out, text)?;
    }
    Ok(())
}

/// Scale and sizes for a pair of ranks on different hosts (MPI over a network, with round
/// trips of tens of microseconds or more): a fiftieth of the rounds and five sizes, so the
/// run takes seconds rather than an hour; on one host, unchanged.
fn across_hosts(cross: bool, scale: f64) -> (f64, &'static [usize]) {
    const CROSS_SIZES: [usize; 5] = [8, 4096, 65536, 1 << 20, 4 << 20];
    if cross {
        (scale / 50.0, &CROSS_SIZES)
    } else {
        (scale, &SIZES)
    }
}

/// Whether this rank's partner in the point-to-point tests (rank 1 for rank 0, else rank 0)
/// is mapped here.
fn peer_mapped(ctx: &Context) -> bool {
    ctx.is_addressable(GlobalPtr::<u8>::new(1 - ctx.rank().min(1), 0))
}

/// On the mpi conduit, whether ranks 0 and 1 share a host (`same_host`: shared memory)
/// or not (`cross_host`); `None` on other conduits.
fn pair(ctx: &Context) -> Option<String> {
    (ctx.conduit_kind().processes() == Processes::ByMpiLauncher && ctx.ranks() > 1).then(|| {
        if ctx.is_addressable(GlobalPtr::<u8>::new(1, 0)) {
            "same_host".to_string()
        } else {
            "cross_host".to_string()
        }
    })
}

fn point_to_point(ctx: &Context, scale: f64, part: &mut Part) -> RankResult {
    let p = ctx.ranks();
    let me = ctx.rank();
    let max = *SIZES.iter().max().unwrap();
    let buffer = ctx.alloc_collective::<u8>(max)?;
    let pair = pair(ctx);
    // The raw cache-line baselines spin on a word without making progress, so they need
    // the peer mapped (on another host, its stores are active messages we must serve).
    let mapped = p > 1 && peer_mapped(ctx);
    let (scale, sizes) = across_hosts(p > 1 && !mapped, scale);
    let first = part.results.len();
    let words = ctx.alloc_collective::<u64>(16)?; // [0] ping, [8] pong: separate cache lines
    let sem = ctx.semaphore_collective()?;
    let pongs = Rc::new(Cell::new(0u64));
    let counter = pongs.clone();
    let pong = ctx.am_register("bench.pong", move |_, _| {
        counter.set(counter.get() + 1);
        Ok(())
    })?;
    let ping = ctx.am_register("bench.ping", move |ctx, msg| {
        ctx.am_reply_short(msg, pong, &[])
    })?;
    ctx.put(words, &[0u64; 16], Blocking)?;
    ctx.barrier()?;

    let mut baselines = Baselines::default();
    if me == 0 {
        let dst = buffer.on(1);
        let t = best_per_iter_alone((2_000_000.0 * scale) as u64 + 1000, |i| {
            ctx.put(dst.cast::<u64>(), &[i], Blocking)
        })?;
        part.results
            .push(record("put", 8, p, "latency_us", t * 1e6));
        let t = best_per_iter_alone((2_000_000.0 * scale) as u64 + 1000, |_| {
            ctx.get_value(dst.cast::<u64>()).map(|_| ())
        })?;
        part.results
            .push(record("get", 8, p, "latency_us", t * 1e6));

        let src: Vec<u8> = (0..max).map(|i| i as u8).collect();
        let mut sink = vec![0u8; max];
        for &size in sizes {
            let iters = iters_for(size, scale);
            let mb = |t: f64| size as f64 / t / 1e6;
            let t = best_per_iter_alone(iters, |_| ctx.put(dst, &src[..size], Blocking))?;
            part.results
                .push(record("put", size, p, "bandwidth_mbs", mb(t)));
            let t = best_per_iter_alone(iters, |_| ctx.get(dst, &mut sink[..size], Blocking))?;
            part.results
                .push(record("get", size, p, "bandwidth_mbs", mb(t)));
            let t =
                best_per_iter_alone(iters, |_| ctx.put(dst, &src[..size], Nonblocking)?.wait())?;
            part.results
                .push(record("put_nb", size, p, "bandwidth_mbs", mb(t)));
            let t = best_per_iter_alone(iters, |_| {
                ctx.get(dst, &mut sink[..size], Nonblocking)?.wait()
            })?;
            part.results
                .push(record("get_nb", size, p, "bandwidth_mbs", mb(t)));
            let mut private = vec![0u8; size];
            let t = best_per_iter_alone(iters, |_| {
                let to = std::hint::black_box(private.as_mut_slice());
                to.copy_from_slice(std::hint::black_box(&src[..size]));
                Ok(())
            })?;
            baselines
                .memcpy_bandwidth_mbs
                .insert(size.to_string(), mb(t));
        }
    }
    ctx.barrier()?;

    // Ping-pongs between ranks 0 and 1; the others wait in the barrier.
    let rounds = (40_000.0 * scale) as u64 + 200;
    if me < 2 && mapped {
        let other = 1 - me;
        // Cache-line round trip: raw atomics on words in each rank's own segment.
        let mine = local_word(ctx, words.add(8 * me))?;
        let theirs = words.on(other).add(8 * other);
        let mut seq = 0u64;
        let t = best_per_iter(rounds, |_| {
            seq += 1; // distinct across batches
            let v = seq;
            if me == 0 {
                ctx.atomic_store(theirs, v)?;
                spin_until(mine, v);
            } else {
                spin_until(mine, v);
                ctx.atomic_store(theirs, v)?;
            }
            Ok(())
        })?;
        baselines.cacheline_roundtrip_us = Some(t * 1e6);
        // Reset the words for the flag protocol below.
        mine.store(0, Ordering::Release);
    }
    ctx.barrier()?;
    if me < 2 {
        let other = 1 - me;
        let data = [7u64];
        let inbox = buffer.on(other).cast::<u64>();
        let sem_there = sem.on(other);
        let t = best_per_iter(rounds, |_| {
            if me == 0 {
                ctx.put(inbox, &data, Signal::Post(sem_there))?;
                sem.wait(ctx, 1)
            } else {
                sem.wait(ctx, 1)?;
                ctx.put(inbox, &data, Signal::Post(sem_there))
            }
        })?;
        part.results
            .push(record("put_signal", 8, p, "latency_us", t * 1e6 / 2.0));

        if mapped {
            let mine = local_word(ctx, words.add(8 * me))?;
            let flag_there = words.on(other).add(8 * other);
            let mut seq = 0u64;
            let t = best_per_iter(rounds, |_| {
                seq += 1;
                if me == 0 {
                    ctx.put(inbox, &data, Blocking)?;
                    ctx.atomic_store(flag_there, seq)?;
                    spin_until(mine, seq);
                } else {
                    spin_until(mine, seq);
                    ctx.put(inbox, &data, Blocking)?;
                    ctx.atomic_store(flag_there, seq)?;
                }
                Ok(())
            })?;
            part.results
                .push(record("put_then_flag", 8, p, "latency_us", t * 1e6 / 2.0));
        } else {
            // The same across hosts: a put complete at the target, then a remote atomic
            // store of the flag, which the other rank waits for on its own word (with
            // progress, as every wait for a word that a message changes must).
            let mine = words.add(8 * me);
            let flag_there = words.on(other).add(8 * other);
            let mut seq = 0u64;
            let t = best_per_iter(rounds, |_| {
                seq += 1;
                if me == 1 {
                    ctx.wait_value(mine, Compare::Ge, seq)?;
                }
                ctx.put(inbox, &data, Blocking)?;
                ctx.atomic_store(flag_there, seq)?;
                if me == 0 {
                    ctx.wait_value(mine, Compare::Ge, seq)?;
                }
                Ok(())
            })?;
            part.results
                .push(record("put_then_flag", 8, p, "latency_us", t * 1e6 / 2.0));
        }
    }
    ctx.barrier()?;
    if me == 0 {
        let t = best_per_iter_alone(rounds, |i| {
            let want = pongs.get() + 1;
            ctx.am_request_short(1, ping, &[i])?;
            while pongs.get() < want {
                ctx.poll()?;
            }
            Ok(())
        })?;
        part.results
            .push(record("am_roundtrip", 0, p, "latency_us", t * 1e6));
    }
    ctx.barrier()?;
    if me == 0 {
        part.baselines = Some(baselines);
    }
    for r in &mut part.results[first..] {
        r.pair.clone_from(&pair);
    }
    ctx.free_collective(words)?;
    ctx.free_collective(buffer)?;
    Ok(())
}

/// The same operations done directly with MPI, in the same job (mpi conduit): put and get
/// with `MPI_Put`/`MPI_Get` + flush on a plain window, an `MPI_Send`/`MPI_Recv` ping-pong
/// (round trip, like `am_roundtrip`), `MPI_Barrier` and an 8-byte `MPI_Allreduce` (beside
/// Tessera's 8-byte allreduce).
#[cfg(feature = "mpi")]
fn mpi_comparisons(ctx: &Context, scale: f64, part: &mut Part) -> RankResult {
    use tessera::mpi_reference::{self as raw, RawWindow};
    let p = ctx.ranks();
    let me = ctx.rank();
    let max = *SIZES.iter().max().unwrap();
    let pair = pair(ctx);
    let cross = p > 1 && !peer_mapped(ctx);
    // The pair's counts may differ between ranks (a rank's partner can be on its host or
    // not); every rank's count of the collectives below must not, or MPI's barriers stop
    // matching (4 ranks, 2 per host, waited forever), so those keep the job's scale.
    let job_scale = scale;
    let (scale, sizes) = across_hosts(cross, scale);
    let first = part.results.len();
    let window = RawWindow::new(ctx, max)?;
    raw::barrier(ctx)?;
    if me == 0 && p > 1 {
        let mut word = [0u8; 8];
        let n = (200_000.0 * scale) as u64 + 1000;
        let t = best_per_iter_alone(n, |_| window.put(1, 0, &word))?;
        part.results
            .push(record("mpi_put", 8, p, "latency_us", t * 1e6));
        let t = best_per_iter_alone(n, |_| window.get(1, 0, &mut word))?;
        part.results
            .push(record("mpi_get", 8, p, "latency_us", t * 1e6));
        let src: Vec<u8> = (0..max).map(|i| i as u8).collect();
        let mut sink = vec![0u8; max];
        for &size in sizes {
            let iters = iters_for(size, scale);
            let mb = |t: f64| size as f64 / t / 1e6;
            let t = best_per_iter_alone(iters, |_| window.put(1, 0, &src[..size]))?;
            part.results
                .push(record("mpi_put", size, p, "bandwidth_mbs", mb(t)));
            let t = best_per_iter_alone(iters, |_| window.get(1, 0, &mut sink[..size]))?;
            part.results
                .push(record("mpi_get", size, p, "bandwidth_mbs", mb(t)));
        }
    }
    raw::barrier(ctx)?;
    let rounds = (40_000.0 * scale) as u64 + 200;
    if me < 2 && p > 1 {
        let mut best = f64::INFINITY;
        for _ in 0..BATCHES {
            best = best.min(raw::pingpong(ctx, 1 - me, rounds)?.as_secs_f64());
        }
        if me == 0 {
            part.results
                .push(record("mpi_pingpong", 8, p, "latency_us", best * 1e6));
        }
    }
    for r in &mut part.results[first..] {
        r.pair.clone_from(&pair);
    }
    raw::barrier(ctx)?;
    let n = ((40_000 / p.pow(2)) as f64 * job_scale).max(50.0) as u64;
    let t = best_per_iter(n, |_| raw::barrier(ctx))?;
    part.results
        .push(record("mpi_barrier", 0, p, "latency_us", t * 1e6));
    let t = best_per_iter(n, |_| raw::ibarrier(ctx))?;
    part.results
        .push(record("mpi_ibarrier", 0, p, "latency_us", t * 1e6));
    let t = best_per_iter(n, |i| raw::allreduce_sum(ctx, i).map(|_| ()))?;
    part.results
        .push(record("mpi_allreduce", 8, p, "latency_us", t * 1e6));
    let world = tessera::Team::world(ctx)?;
    ctx.barrier()?;
    let t = best_per_iter(n, |i| {
        world
            .run(
                tessera::coll::Allreduce::value(i, tessera::Op::Sum),
                Blocking,
            )
            .map(|_| ())
    })?;
    part.results
        .push(record("allreduce", 8, p, "latency_us", t * 1e6));
    drop(window);
    Ok(())
}
