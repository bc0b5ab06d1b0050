//! The rank side of `tessera bench grid`: ghost exchange of a 3-D block per rank with
//! every [`HaloStrategy`] (the hand-packed one is the baseline, measured in the same run),
//! and the bandwidth of a one-sided grid copy against memcpy of the same bytes.
//!
//! The blocks are `edge³` points per rank (128³ by default), decomposed along the first
//! dimension, with one ghost layer and periodic boundaries, so at 2 ranks the faces across
//! the first dimension go to the other rank and the rest wrap around to the rank itself,
//! as in MG at 2 ranks.
//!
//! It also times the address path of shared arrays: every element of a cyclic array found
//! and read through the phaseless path, against the same layout described as
//! `BlockCyclic(1)`, which takes the general block arithmetic.

use std::path::Path;

use tessera::{
    Context, Distribution, GlobalGrid, HaloGrid, HaloStrategy, Point, RankResult, RectDomain,
    SharedArray, Team,
};

use super::rma::{best_per_iter, record};
use super::{Baselines, Part};

pub(crate) fn rank_main(ctx: &Context, out: &Path, edge: usize, quick: bool) -> RankResult {
    let ranks = ctx.ranks();
    let mut part = Part::default();
    let whole = RectDomain::with_shape([edge * ranks, edge, edge]);
    let exchanges = if quick { 3 } else { 40 };
    for strategy in HaloStrategy::ALL {
        let mut grid = HaloGrid::<f64, 3>::new(ctx, whole, [ranks, 1, 1], 1, strategy)?;
        let interior = grid.interior();
        grid.view_mut()
            .restrict(&interior)
            .foreach_mut(|p, e| *e = (p[0] + 3 * p[1] + 7 * p[2]) as f64);
        grid.exchange()?;
        ctx.barrier()?;
        let t = best_per_iter(exchanges, |_| grid.exchange())?;
        let ghost_bytes = (grid.view().domain().len() - interior.len()) * 8;
        part.results.push(record(
            &format!("ghost_{strategy}"),
            ghost_bytes,
            ranks,
            "latency_us",
            t * 1e6,
        ));
        ctx.barrier()?;
    }

    // Copy bandwidth: rank 0 copies the interior of rank 1's ghosted block into its own
    // (one strided transfer of edge² rows), against memcpy of the same number of bytes.
    let team = Team::world(ctx)?;
    let me = ctx.rank() as i64;
    let interior = RectDomain::new(
        Point([me * edge as i64, 0, 0]),
        Point([(me + 1) * edge as i64 - 1, edge as i64 - 1, edge as i64 - 1]),
    );
    let block = GlobalGrid::filled(ctx, interior.grow(1), me as f64)?;
    let blocks = block.exchange(&team)?;
    let bytes = interior.len() * 8;
    let copies = if quick { 2 } else { 20 };
    ctx.barrier()?;
    if ctx.rank() == 0 {
        let from = blocks[1].translate(Point([-(edge as i64), 0, 0]));
        let src = from.restrict(&from.domain().shrink(1));
        let dst = block.reference();
        let t = best_per_iter(copies, |_| dst.copy_from(ctx, &src).map(|_| ()))?;
        part.results.push(record(
            "grid_copy",
            bytes,
            ranks,
            "bandwidth_mbs",
            bytes as f64 / t / 1e6,
        ));
        let source = vec![1.0f64; interior.len()];
        let mut sink = vec![0.0f64; interior.len()];
        let t = best_per_iter(copies, |_| {
            std::hint::black_box(sink.as_mut_slice())
                .copy_from_slice(std::hint::black_box(&source));
            Ok(())
        })?;
        let mut baselines = Baselines::default();
        baselines
            .memcpy_bandwidth_mbs
            .insert(bytes.to_string(), bytes as f64 / t / 1e6);
        part.baselines = Some(baselines);
    }
    ctx.barrier()?;
    shared_array_paths(ctx, quick, &mut part)?;
    if ctx.rank() == 0 {
        let text = serde_json::to_string(&part)?;
        std::fs::write(out, text)?;
    }
    ctx.barrier()?;
    Ok(())
}

/// Per-element address computation and element get, phaseless (`Cyclic`) against general
/// (`BlockCyclic(1)`), over the same storage, timed on rank 0 while the others wait.
fn shared_array_paths(ctx: &Context, quick: bool, part: &mut Part) -> RankResult {
    let len = 1 << 16;
    let cyclic = SharedArray::<u64>::alloc(ctx, len, Distribution::Cyclic)?;
    let general = cyclic.with_distribution(len, Distribution::BlockCyclic(1))?;
    let rounds = if quick { 2 } else { 50 };
    for (name, a) in [("phaseless", cyclic), ("general", general)] {
        if ctx.rank() != 0 {
            break;
        }
        let address = per_element(rounds, len, |i| Ok(a.address(i)?.offset()))?;
        let get = per_element(rounds, len, |i| a.get(ctx, i))?;
        for (what, t) in [("address", address), ("get", get)] {
            part.results.push(record(
                &format!("shared_{what}_{name}"),
                8,
                ctx.ranks(),
                "latency_us",
                t,
            ));
        }
    }
    ctx.barrier()?;
    cyclic.free(ctx)?;
    Ok(())
}

/// Microseconds per element of summing `f(i)` over `0..len`, best of the batches (generic,
/// so `f` is inlined and only the address path is measured).
fn per_element(
    rounds: u64,
    len: usize,
    f: impl Fn(usize) -> tessera::Result<u64>,
) -> tessera::Result<f64> {
    best_per_iter(rounds, |_| {
        let mut sum = 0u64;
        for i in 0..len {
            sum = sum.wrapping_add(f(std::hint::black_box(i))?);
        }
        std::hint::black_box(sum);
        Ok(())
    })
    .map(|t| t * 1e6 / len as f64)
}
