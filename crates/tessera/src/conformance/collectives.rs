//! The conformance cases of the teams' collectives: blocking, nonblocking and the conduit's own.
//!
//! This module must never special-case a conduit: what it checks is the contract.

use super::*;

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
                    Collective::Barrier => t.barrier()?,
                    Collective::Broadcast => {
                        let mut d = if me == root {
                            mine.clone()
                        } else {
                            vec![0; len]
                        };
                        t.broadcast(root, &mut d)?;
                        ensure(d == all[root * len..(root + 1) * len], || what("data"))?;
                    }
                    Collective::Reduce => {
                        let mut d = vec![0; if me == root { len } else { 0 }];
                        t.reduce(root, &mine, &mut d, Op::Sum)?;
                        ensure(me != root || d == sum, || what("sum"))?;
                    }
                    Collective::Allreduce => {
                        let mut d = vec![0; len];
                        t.allreduce(&mine, &mut d, Op::Sum)?;
                        ensure(d == sum, || what("sum"))?;
                    }
                    Collective::Gather => {
                        let mut d = vec![0; if me == root { n * len } else { 0 }];
                        t.gather(root, &mine, &mut d)?;
                        ensure(me != root || d == all, || what("blocks"))?;
                    }
                    Collective::Allgather => {
                        let mut d = vec![0; n * len];
                        t.allgather(&mine, &mut d)?;
                        ensure(d == all, || what("blocks"))?;
                    }
                    Collective::Scatter => {
                        let src = if me == root { all.clone() } else { Vec::new() };
                        let mut d = vec![0; len];
                        t.scatter(root, &src, &mut d)?;
                        ensure(d == all[me * len..(me + 1) * len], || what("block"))?;
                    }
                    Collective::Exchange => {
                        // Block j of rank r's source: value(r, j·len + i).
                        let src: Vec<u64> = (0..n * len).map(|i| value(me, i)).collect();
                        let mut d = vec![0; n * len];
                        t.exchange(&src, &mut d)?;
                        let want: Vec<u64> = (0..n)
                            .flat_map(|r| (0..len).map(move |i| value(r, me * len + i)))
                            .collect();
                        ensure(d == want, || what("blocks"))?;
                    }
                    Collective::Scan => {
                        let mut d = vec![0; len];
                        t.scan(&mine, &mut d, Op::Sum)?;
                        let want: Vec<u64> = (0..len)
                            .map(|i| (0..=me).map(|r| value(r, i)).sum())
                            .collect();
                        ensure(d == want, || what("prefix"))?;
                    }
                    Collective::BroadcastTo => {
                        let d = ctx.alloc_collective::<u64>(len)?;
                        let src = if me == root { mine.clone() } else { Vec::new() };
                        t.broadcast_to(root, &src, &t.symmetric(d), len)?;
                        let got = read_and_free(ctx, d, len)?;
                        ensure(got == all[root * len..(root + 1) * len], || what("data"))?;
                    }
                    Collective::ScatterTo => {
                        let d = ctx.alloc_collective::<u64>(len)?;
                        let src = if me == root { all.clone() } else { Vec::new() };
                        t.scatter_to(root, &src, &t.symmetric(d), len)?;
                        let got = read_and_free(ctx, d, len)?;
                        ensure(got == all[me * len..(me + 1) * len], || what("block"))?;
                    }
                    Collective::GatherTo => {
                        let d = ctx.alloc_collective::<u64>(n * len)?;
                        t.gather_to(root, &mine, d.on(root))?;
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
        world.broadcast_from(root, src.on(world.world_rank(root)), &mut got)?;
        let want: Vec<u64> = (0..len).map(|i| value(root, i)).collect();
        ensure(got == want, || what("broadcast_from"))?;
        let mut all = vec![0; if me == root { n * len } else { 0 }];
        world.gather_from(root, &world.symmetric(src), &mut all)?;
        let want: Vec<u64> = (0..n)
            .flat_map(|r| (0..len).map(move |i| value(r, i)))
            .collect();
        ensure(me != root || all == want, || what("gather_from"))?;
        world.barrier()?;
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
        .contains(&Algorithm::Native)
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
            let barrier = team.barrier_nb()?;
            let bcast = team.broadcast_nb(root, &mine)?;
            let reduce = team.reduce_nb(root, &mine, Op::Sum)?;
            let allreduce = team.allreduce_nb(&mine, Op::Sum)?;
            let gather = team.gather_nb(root, &mine)?;
            let allgather = team.allgather_nb(&mine)?;
            let scatter = team.scatter_nb(root, &scatter_src, len)?;
            let exchange = team.exchange_nb(&xsrc)?;
            // Varying counts: member f sends count(f, t) elements to member t.
            let count = |f: usize, t: usize| ((f * 3 + t) % 4) * (len / 3 + 1);
            let vblock =
                |f: usize, t: usize| (0..count(f, t)).map(move |k| value(w(f), t * len * 4 + k));
            let vsrc: Vec<u64> = (0..n).flat_map(|t| vblock(me, t)).collect();
            let send_counts: Vec<usize> = (0..n).map(|t| count(me, t)).collect();
            let recv_counts: Vec<usize> = (0..n).map(|f| count(f, me)).collect();
            let exchange_v = team.exchange_v_nb(&vsrc, &send_counts, &recv_counts)?;
            let scan = team.scan_nb(&mine, Op::Sum)?;
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
            let user_reduce = team.reduce_nb_with(root, &pairs, combine)?;
            let user_allreduce = team.allreduce_nb_with(&pairs, combine)?;
            let user_scan = team.scan_nb_with(&pairs, combine)?;
            let user_exscan = team.exscan_nb_with(&pairs, combine)?;
            let mut exscan = team.exscan_nb(&mine, Op::Sum)?;
            // A blocking mailbox collective is refused while one is in flight here (known
            // only locally: the others may have finished theirs; refused before it sends).
            if n > 1 && !exscan.test()? {
                let mailbox = team.with_algorithm(Collective::Barrier, Algorithm::Dissemination)?;
                ensure(mailbox.barrier().is_err(), || {
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
        let total = team.allreduce_value(1u64, Op::Sum)?;
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
        t = t.with_algorithm(op, Algorithm::Native)?;
    }
    Ok(t)
}

fn triple(_: &Context, x: u64) -> u64 {
    3 * x
}

/// The conduit's own collectives ([`Algorithm::Native`]). Where the conduit has them:
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
        .contains(&Algorithm::Native)
    {
        let err = world
            .with_algorithm(Collective::Allreduce, Algorithm::Native)
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
    w.barrier()?;
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
    t.allreduce(&mine, &mut got, Op::Max)?;
    let want: Vec<f64> = (0..5)
        .map(|i| over(&|m| v(m, i), f64::MIN, f64::max))
        .collect();
    ensure(got == want, || what("f64 max allreduce"))?;
    let ints: Vec<i32> = mine.iter().map(|&x| x as i32).collect();
    let mut least = vec![0i32; if r == k - 1 { 5 } else { 0 }];
    t.reduce(k - 1, &ints, &mut least, Op::Min)?;
    let want: Vec<i32> = (0..5)
        .map(|i| over(&|m| v(m, i), f64::MAX, f64::min) as i32)
        .collect();
    ensure(r != k - 1 || least == want, || what("i32 min reduce"))?;
    let mut prefix = [7u64; 2];
    t.exscan(&[me as u64 + 1, 1], &mut prefix, Op::Sum)?;
    let before: u64 = members[..r].iter().map(|&m| m as u64 + 1).sum();
    ensure(prefix == [before, r as u64], || what("u64 exclusive scan"))?;
    let mut bits = [0u8; 3];
    t.scan(&[1 << (r % 8), 0xff, r as u8], &mut bits, Op::BitOr)?;
    let or = (0..=r).fold(0u8, |a, i| a | 1 << (i % 8));
    let ors = (0..=r).fold(0u8, |a, i| a | i as u8);
    ensure(bits == [or, 0xff, ors], || what("u8 bitwise-or scan"))?;
    let mut data = if r == k - 1 {
        mine.clone()
    } else {
        vec![0.0; 5]
    };
    t.broadcast(k - 1, &mut data)?;
    ensure(
        data == (0..5).map(|i| v(members[k - 1], i)).collect::<Vec<_>>(),
        || what("broadcast"),
    )?;
    let blocks: Vec<f64> = members
        .iter()
        .flat_map(|&m| (0..5).map(move |i| v(m, i)))
        .collect();
    let mut all = vec![0.0; 5 * k];
    t.allgather(&mine, &mut all)?;
    ensure(all == blocks, || what("allgather"))?;
    let mut gathered = vec![0.0; if r == 0 { 5 * k } else { 0 }];
    t.gather(0, &mine, &mut gathered)?;
    ensure(r != 0 || gathered == blocks, || what("gather"))?;
    let src = if r == 0 { blocks.clone() } else { Vec::new() };
    let mut block = vec![0.0; 5];
    t.scatter(0, &src, &mut block)?;
    ensure(block == mine, || what("scatter"))?;
    // exchange: block j of member i holds 100·i + j.
    let out: Vec<u32> = (0..k).map(|j| (100 * r + j) as u32).collect();
    let mut inb = vec![0u32; k];
    t.exchange(&out, &mut inb)?;
    ensure(
        inb == (0..k).map(|i| (100 * i + r) as u32).collect::<Vec<_>>(),
        || what("exchange"),
    )?;
    // These cannot be MPI's: a user operation and unequal counts use the model's choice.
    let mut sum = [0.0];
    t.allreduce_with(&[1.5], &mut sum, &|a, b| {
        a[0] += b[0];
        Ok(())
    })?;
    ensure(sum[0] == 1.5 * k as f64, || {
        what("user-operation allreduce")
    })?;
    // Member i sends i + 1 elements to everyone.
    let send: Vec<u16> = vec![r as u16; (r + 1) * k];
    let recv_counts: Vec<usize> = (1..=k).collect();
    let mut recv = vec![0u16; recv_counts.iter().sum()];
    t.exchange_v(&send, &vec![r + 1; k], &mut recv, &recv_counts)?;
    let want: Vec<u16> = (0..k).flat_map(|i| vec![i as u16; i + 1]).collect();
    ensure(recv == want, || what("exchange_v with unequal counts"))?;
    Ok(())
}
