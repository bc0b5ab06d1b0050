//! The conformance cases of the teams' collectives: blocking, nonblocking and the conduit's own.
//!
//! This module must never special-case a conduit: what it checks is the contract.

use super::*;
use crate::coll::{
    Allgather, Allreduce, Barrier, Broadcast, Exchange, Exscan, Gather, Reduce, Scan, Scatter,
};
use crate::{Blocking, Nonblocking};

/// Every collective with every algorithm on the world team, at a small and a multi-chunk
/// size, against results computed sequentially (the full matrix of team shapes and types
/// runs in the library's tests; this checks that the model layer works on the conduit).
pub(super) fn collectives(ctx: &Context) -> RankResult {
    let world = Team::world(ctx)?;
    let (n, me) = (world.size(), world.rank());
    let value = |r: usize, i: usize| (r as u64 + 1) * 1_000_003 + i as u64 * 7;
    for op in Collective::ALL {
        for alg in world.algorithms(op) {
            let t = world.with_algorithm(op, alg)?;
            for len in lengths(n) {
                let what = |w: &str| format!("{} with {alg}, {len} elements: {w}", op.name());
                let mine: Vec<u64> = (0..len).map(|i| value(me, i)).collect();
                let all: Vec<u64> = (0..n)
                    .flat_map(|r| (0..len).map(move |i| value(r, i)))
                    .collect();
                let sum: Vec<u64> = (0..len)
                    .map(|i| (0..n).map(|r| value(r, i)).sum())
                    .collect();
                let root = len % n;
                match op {
                    Collective::Barrier => t.run(Barrier, Blocking)?,
                    Collective::Broadcast => {
                        let mut d = if me == root {
                            mine.clone()
                        } else {
                            vec![0; len]
                        };
                        t.run(Broadcast::in_place(root, &mut d), Blocking)?;
                        ensure(d == all[root * len..(root + 1) * len], || what("data"))?;
                    }
                    Collective::Reduce => {
                        let mut d = vec![0; if me == root { len } else { 0 }];
                        t.run(Reduce::new(root, &mine, Op::Sum).to(&mut d), Blocking)?;
                        ensure(me != root || d == sum, || what("sum"))?;
                    }
                    Collective::Allreduce => {
                        let mut d = vec![0; len];
                        t.run(Allreduce::new(&mine, Op::Sum).to(&mut d), Blocking)?;
                        ensure(d == sum, || what("sum"))?;
                    }
                    Collective::Gather => {
                        let mut d = vec![0; if me == root { n * len } else { 0 }];
                        t.run(Gather::new(root, &mine).to(&mut d), Blocking)?;
                        ensure(me != root || d == all, || what("blocks"))?;
                    }
                    Collective::Allgather => {
                        let mut d = vec![0; n * len];
                        t.run(Allgather::new(&mine).to(&mut d), Blocking)?;
                        ensure(d == all, || what("blocks"))?;
                    }
                    Collective::Scatter => {
                        let src = if me == root { all.clone() } else { Vec::new() };
                        let mut d = vec![0; len];
                        t.run(Scatter::new(root, &src, d.len()).to(&mut d), Blocking)?;
                        ensure(d == all[me * len..(me + 1) * len], || what("block"))?;
                    }
                    Collective::Exchange => {
                        // Block j of rank r's source: value(r, j·len + i).
                        let src: Vec<u64> = (0..n * len).map(|i| value(me, i)).collect();
                        let mut d = vec![0; n * len];
                        t.run(Exchange::new(&src).to(&mut d), Blocking)?;
                        let want: Vec<u64> = (0..n)
                            .flat_map(|r| (0..len).map(move |i| value(r, me * len + i)))
                            .collect();
                        ensure(d == want, || what("blocks"))?;
                    }
                    Collective::Scan => {
                        let mut d = vec![0; len];
                        t.run(Scan::new(&mine, Op::Sum).to(&mut d), Blocking)?;
                        let want: Vec<u64> = (0..len)
                            .map(|i| (0..=me).map(|r| value(r, i)).sum())
                            .collect();
                        ensure(d == want, || what("prefix"))?;
                    }
                    Collective::BroadcastTo => {
                        let d = ctx.alloc_collective::<u64>(len)?;
                        let src = if me == root { mine.clone() } else { Vec::new() };
                        t.run(
                            Broadcast::new(root, &src, len).to_symmetric(&t.symmetric(d)),
                            Blocking,
                        )?;
                        let got = read_and_free(ctx, d, len)?;
                        ensure(got == all[root * len..(root + 1) * len], || what("data"))?;
                    }
                    Collective::ScatterTo => {
                        let d = ctx.alloc_collective::<u64>(len)?;
                        let src = if me == root { all.clone() } else { Vec::new() };
                        t.run(
                            Scatter::new(root, &src, len).to_symmetric(&t.symmetric(d)),
                            Blocking,
                        )?;
                        let got = read_and_free(ctx, d, len)?;
                        ensure(got == all[me * len..(me + 1) * len], || what("block"))?;
                    }
                    Collective::GatherTo => {
                        let d = ctx.alloc_collective::<u64>(n * len)?;
                        t.run(
                            Gather::new(root, &mine).to_symmetric(&[d.on(root)]),
                            Blocking,
                        )?;
                        let got = read_and_free(ctx, d, n * len)?;
                        ensure(me != root || got == all, || what("blocks"))?;
                    }
                }
            }
        }
    }
    // The rendezvous forms: receivers get from sources in the segment.
    for len in lengths(n) {
        let what = |w: &str| format!("{w}, {len} elements");
        let src = ctx.alloc_collective::<u64>(len)?;
        let mine: Vec<u64> = (0..len).map(|i| value(me, i)).collect();
        ctx.put(src, &mine, Blocking)?;
        let root = (len + 1) % n;
        let mut got = vec![0; len];
        world.run(
            Broadcast::from_symmetric(root, src.on(world.world_rank(root)), &mut got),
            Blocking,
        )?;
        let want: Vec<u64> = (0..len).map(|i| value(root, i)).collect();
        ensure(got == want, || what("broadcast_from"))?;
        let mut all = vec![0; if me == root { n * len } else { 0 }];
        world.run(
            Gather::from_symmetric(root, &world.symmetric(src), &mut all),
            Blocking,
        )?;
        let want: Vec<u64> = (0..n)
            .flat_map(|r| (0..len).map(move |i| value(r, i)))
            .collect();
        ensure(me != root || all == want, || what("gather_from"))?;
        world.run(Barrier, Blocking)?;
        ctx.free_collective(src)?;
    }
    Ok(())
}

/// Every nonblocking collective (`*_nb`), all in flight at once on the world team and on
/// a subteam, advanced while the rank computes, waited for in reverse order, at a small
/// and a multi-chunk size, against results computed sequentially; a blocking mailbox
/// collective meanwhile is refused. As mailbox schedules, and where the conduit has its
/// own collectives, also through those.
pub(super) fn nonblocking_collectives(ctx: &Context) -> RankResult {
    let world = Team::world(ctx)?;
    let sub = world
        .split(Some((ctx.rank() % 2) as u32), ctx.rank() as u64)?
        .expect("every rank has a colour");
    let mut teams = vec![world.clone(), sub.clone()];
    // Where the conduit has its own collectives, the same again through them (MPI's
    // `MPI_I*` operations).
    if world
        .algorithms(Collective::Barrier)
        .contains(&Algorithm::NATIVE)
    {
        teams.push(all_native(&world)?);
        teams.push(all_native(&sub)?);
    }
    for team in &teams {
        let (n, me) = (team.size(), team.rank());
        let w = |i: usize| team.world_rank(i);
        let value = |r: usize, i: usize| (r as u64 + 1) * 1_000_003 + i as u64 * 7;
        for len in lengths(n) {
            let what = |op: &str| format!("{op}_nb, {len} elements, team of {n}");
            let mine: Vec<u64> = (0..len).map(|i| value(w(me), i)).collect();
            let block = |r: usize| (0..len).map(move |i| value(w(r), i));
            let all: Vec<u64> = (0..n).flat_map(block).collect();
            let sum: Vec<u64> = (0..len)
                .map(|i| (0..n).map(|r| value(w(r), i)).sum())
                .collect();
            let prefix = |upto: usize| -> Vec<u64> {
                (0..len)
                    .map(|i| (0..upto).map(|r| value(w(r), i)).sum())
                    .collect()
            };
            let root = len % n;
            // Block j of member r's exchange source: value(r, j·len + i).
            let xsrc: Vec<u64> = (0..n * len).map(|i| value(w(me), i)).collect();
            let scatter_src = if me == root { all.clone() } else { Vec::new() };
            let barrier = team.run(Barrier, Nonblocking)?;
            let bcast = team.run(Broadcast::new(root, &mine, mine.len()), Nonblocking)?;
            let reduce = team.run(Reduce::new(root, &mine, Op::Sum), Nonblocking)?;
            let allreduce = team.run(Allreduce::new(&mine, Op::Sum), Nonblocking)?;
            let gather = team.run(Gather::new(root, &mine), Nonblocking)?;
            let allgather = team.run(Allgather::new(&mine), Nonblocking)?;
            let scatter = team.run(Scatter::new(root, &scatter_src, len), Nonblocking)?;
            let exchange = team.run(Exchange::new(&xsrc), Nonblocking)?;
            // Varying counts: member f sends count(f, t) elements to member t.
            let count = |f: usize, t: usize| ((f * 3 + t) % 4) * (len / 3 + 1);
            let vblock =
                |f: usize, t: usize| (0..count(f, t)).map(move |k| value(w(f), t * len * 4 + k));
            let vsrc: Vec<u64> = (0..n).flat_map(|t| vblock(me, t)).collect();
            let send_counts: Vec<usize> = (0..n).map(|t| count(me, t)).collect();
            let recv_counts: Vec<usize> = (0..n).map(|f| count(f, me)).collect();
            let exchange_v = team.run(
                Exchange::varying(&vsrc, &send_counts, &recv_counts),
                Nonblocking,
            )?;
            let scan = team.run(Scan::new(&mine, Op::Sum), Nonblocking)?;
            // User operations (never MPI's): (sum, largest) over pairs.
            let pair = |r: usize, i: usize| [value(w(r), i) % 1000, value(w(r), i) % 7];
            let fold = |members: std::ops::Range<usize>| -> Vec<[u64; 2]> {
                (0..len)
                    .map(|i| {
                        let ps = members.clone().map(|r| pair(r, i));
                        ps.fold([0, 0], |a, p| [a[0] + p[0], a[1].max(p[1])])
                    })
                    .collect()
            };
            let combine = |acc: &mut [[u64; 2]], x: &[[u64; 2]]| {
                for (a, b) in acc.iter_mut().zip(x) {
                    *a = [a[0] + b[0], a[1].max(b[1])];
                }
                Ok(())
            };
            let pairs: Vec<[u64; 2]> = (0..len).map(|i| pair(me, i)).collect();
            let user_reduce = team.run(Reduce::with(root, &pairs, combine), Nonblocking)?;
            let user_allreduce = team.run(Allreduce::with(&pairs, combine), Nonblocking)?;
            let user_scan = team.run(Scan::with(&pairs, combine), Nonblocking)?;
            let user_exscan = team.run(Exscan::with(&pairs, combine), Nonblocking)?;
            let mut exscan = team.run(Exscan::new(&mine, Op::Sum), Nonblocking)?;
            // A blocking mailbox collective is refused while one is in flight here (known
            // only locally: the others may have finished theirs; refused before it sends).
            if n > 1 && !exscan.test()? {
                let mailbox = team.with_algorithm(Collective::Barrier, Algorithm::DISSEMINATION)?;
                ensure(mailbox.run(Barrier, Blocking).is_err(), || {
                    "a blocking collective ran while nonblocking ones were in flight".into()
                })?;
            }
            // Compute while they progress.
            let mut x = 1.0f64;
            for _ in 0..50 {
                for _ in 0..1000 {
                    x = (x * 1.000_001).sqrt();
                }
                exscan.test()?;
            }
            std::hint::black_box(x);
            // Waited for in reverse order of starting.
            let want_ex = if me == 0 { vec![0; len] } else { prefix(me) };
            ensure(exscan.wait()? == want_ex, || what("exscan"))?;
            ensure(user_exscan.wait()? == fold(0..me), || what("user exscan"))?;
            ensure(user_scan.wait()? == fold(0..me + 1), || what("user scan"))?;
            ensure(user_allreduce.wait()? == fold(0..n), || {
                what("user allreduce")
            })?;
            let r = user_reduce.wait()?;
            ensure(
                if me == root {
                    r == fold(0..n)
                } else {
                    r.is_empty()
                },
                || what("user reduce"),
            )?;
            ensure(scan.wait()? == prefix(me + 1), || what("scan"))?;
            let want_x: Vec<u64> = (0..n)
                .flat_map(|r| (0..len).map(move |i| value(w(r), me * len + i)))
                .collect();
            ensure(exchange.wait()? == want_x, || what("exchange"))?;
            let want_v: Vec<u64> = (0..n).flat_map(|f| vblock(f, me)).collect();
            ensure(exchange_v.wait()? == want_v, || what("exchange_v"))?;
            ensure(scatter.wait()?.iter().copied().eq(block(me)), || {
                what("scatter")
            })?;
            ensure(allgather.wait()? == all, || what("allgather"))?;
            let g = gather.wait()?;
            ensure(if me == root { g == all } else { g.is_empty() }, || {
                what("gather")
            })?;
            ensure(allreduce.wait()? == sum, || what("allreduce"))?;
            let r = reduce.wait()?;
            ensure(if me == root { r == sum } else { r.is_empty() }, || {
                what("reduce")
            })?;
            ensure(bcast.wait()?.iter().copied().eq(block(root)), || {
                what("broadcast")
            })?;
            ensure(barrier.wait()?.is_empty(), || what("barrier"))?;
        }
        // Blocking collectives work again once everything is waited for.
        let total = team.run(Allreduce::value(1u64, Op::Sum), Blocking)?;
        ensure(total == n as u64, || {
            "allreduce after the nonblocking ones".into()
        })?;
    }
    Ok(())
}

/// This rank's `len` elements at `d` (a collective allocation, freed after a barrier).
fn read_and_free(ctx: &Context, d: GlobalPtr<u64>, len: usize) -> crate::Result<Vec<u64>> {
    let mut got = vec![0; len];
    ctx.get(d, &mut got, Blocking)?;
    ctx.barrier()?;
    ctx.free_collective(d)?;
    Ok(got)
}

/// `team` with every operation forced to the conduit's own collectives.
fn all_native<'a>(team: &Team<'a>) -> crate::Result<Team<'a>> {
    let mut t = team.clone();
    for op in Collective::ALL
        .into_iter()
        .filter(|op| !op.is_single_address())
    {
        t = t.with_algorithm(op, Algorithm::NATIVE)?;
    }
    Ok(t)
}

fn triple(_: &Context, x: u64) -> u64 {
    3 * x
}

/// The conduit's own collectives ([`Algorithm::NATIVE`]). Where the conduit has them:
/// every operation on a subteam in reverse rank order, reductions over several element
/// types, the exclusive scan, the calls that fall back to the model's algorithms (a user
/// operation, unequal exchange counts), and a rank inside one still answering an RPC that
/// another rank waits for before it enters. Where the conduit has none, asking for them is
/// an error that says where they exist.
pub(super) fn native_collectives(ctx: &Context) -> RankResult {
    let world = Team::world(ctx)?;
    let (n, me) = (world.size(), world.rank());
    if !world
        .algorithms(Collective::Barrier)
        .contains(&Algorithm::NATIVE)
    {
        let err = world
            .with_algorithm(Collective::Allreduce, Algorithm::NATIVE)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        return ensure(err.contains("native") && err.contains("mpi"), || {
            format!("forcing native on {}: {err:?}", ctx.conduit_kind())
        });
    }
    // A rank inside a native collective serves requests: the last rank calls rank 0 and
    // waits for the answer before it enters the barrier that rank 0 is already in.
    let w = all_native(&world)?;
    if me == n - 1 && n > 1 {
        let got = ctx.rpc(0, triple, 14)?.wait()?;
        ensure(got == 42, || {
            format!("rpc during a native barrier gave {got}")
        })?;
    }
    w.run(Barrier, Blocking)?;
    // Even and odd world ranks, each in reverse order.
    let sub = world
        .split(Some((me % 2) as u32), (n - me) as u64)?
        .expect("every rank has a colour");
    let members: Vec<usize> = (0..n).rev().filter(|r| r % 2 == me % 2).collect();
    let t = all_native(&sub)?;
    let (k, r) = (t.size(), t.rank());
    ensure((0..k).all(|i| t.world_rank(i) == members[i]), || {
        "subteam order".into()
    })?;
    let what = |w: &str| format!("native {w} on a subteam of {k}");
    let v = |rank: usize, i: usize| ((rank * 37 + i * 11) % 17) as f64 - 8.0;
    let mine: Vec<f64> = (0..5).map(|i| v(me, i)).collect();
    let over = |f: &dyn Fn(usize) -> f64, init: f64, g: fn(f64, f64) -> f64| {
        members.iter().map(|&m| f(m)).fold(init, g)
    };
    let mut got = vec![0.0; 5];
    t.run(Allreduce::new(&mine, Op::Max).to(&mut got), Blocking)?;
    let want: Vec<f64> = (0..5)
        .map(|i| over(&|m| v(m, i), f64::MIN, f64::max))
        .collect();
    ensure(got == want, || what("f64 max allreduce"))?;
    let ints: Vec<i32> = mine.iter().map(|&x| x as i32).collect();
    let mut least = vec![0i32; if r == k - 1 { 5 } else { 0 }];
    t.run(Reduce::new(k - 1, &ints, Op::Min).to(&mut least), Blocking)?;
    let want: Vec<i32> = (0..5)
        .map(|i| over(&|m| v(m, i), f64::MAX, f64::min) as i32)
        .collect();
    ensure(r != k - 1 || least == want, || what("i32 min reduce"))?;
    let mut prefix = [7u64; 2];
    t.run(
        Exscan::new(&[me as u64 + 1, 1], Op::Sum).to(&mut prefix),
        Blocking,
    )?;
    let before: u64 = members[..r].iter().map(|&m| m as u64 + 1).sum();
    ensure(prefix == [before, r as u64], || what("u64 exclusive scan"))?;
    let mut bits = [0u8; 3];
    t.run(
        Scan::new(&[1 << (r % 8), 0xff, r as u8], Op::BitOr).to(&mut bits),
        Blocking,
    )?;
    let or = (0..=r).fold(0u8, |a, i| a | 1 << (i % 8));
    let ors = (0..=r).fold(0u8, |a, i| a | i as u8);
    ensure(bits == [or, 0xff, ors], || what("u8 bitwise-or scan"))?;
    let mut data = if r == k - 1 {
        mine.clone()
    } else {
        vec![0.0; 5]
    };
    t.run(Broadcast::in_place(k - 1, &mut data), Blocking)?;
    ensure(
        data == (0..5).map(|i| v(members[k - 1], i)).collect::<Vec<_>>(),
        || what("broadcast"),
    )?;
    let blocks: Vec<f64> = members
        .iter()
        .flat_map(|&m| (0..5).map(move |i| v(m, i)))
        .collect();
    let mut all = vec![0.0; 5 * k];
    t.run(Allgather::new(&mine).to(&mut all), Blocking)?;
    ensure(all == blocks, || what("allgather"))?;
    let mut gathered = vec![0.0; if r == 0 { 5 * k } else { 0 }];
    t.run(Gather::new(0, &mine).to(&mut gathered), Blocking)?;
    ensure(r != 0 || gathered == blocks, || what("gather"))?;
    let src = if r == 0 { blocks.clone() } else { Vec::new() };
    let mut block = vec![0.0; 5];
    t.run(Scatter::new(0, &src, block.len()).to(&mut block), Blocking)?;
    ensure(block == mine, || what("scatter"))?;
    // exchange: block j of member i holds 100·i + j.
    let out: Vec<u32> = (0..k).map(|j| (100 * r + j) as u32).collect();
    let mut inb = vec![0u32; k];
    t.run(Exchange::new(&out).to(&mut inb), Blocking)?;
    ensure(
        inb == (0..k).map(|i| (100 * i + r) as u32).collect::<Vec<_>>(),
        || what("exchange"),
    )?;
    // These cannot be MPI's: a user operation and unequal counts use the model's choice.
    let mut sum = [0.0];
    t.run(
        Allreduce::with(&[1.5], |a, b| {
            a[0] += b[0];
            Ok(())
        })
        .to(&mut sum),
        Blocking,
    )?;
    ensure(sum[0] == 1.5 * k as f64, || {
        what("user-operation allreduce")
    })?;
    // Member i sends i + 1 elements to everyone.
    let send: Vec<u16> = vec![r as u16; (r + 1) * k];
    let recv_counts: Vec<usize> = (1..=k).collect();
    let mut recv = vec![0u16; recv_counts.iter().sum()];
    t.run(
        Exchange::varying(&send, &vec![r + 1; k], &recv_counts).to(&mut recv),
        Blocking,
    )?;
    let want: Vec<u16> = (0..k).flat_map(|i| vec![i as u16; i + 1]).collect();
    ensure(recv == want, || what("exchange_v with unequal counts"))?;
    Ok(())
}
