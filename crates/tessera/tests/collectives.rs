//! Every collective × every algorithm × several team shapes (world at 1–8 ranks including
//! non-powers of two, grid rows and columns, a team of one) × element types and sizes
//! (up to several pipelined chunks), each checked against the result computed sequentially
//! from the same inputs, in the blocking form and the nonblocking one (`*_nb`, which runs
//! the same algorithm). Every rank can compute every member's input, so expectations are
//! computed, never hard-coded.

use std::time::Duration;
use tessera::coll::{
    Allgather, Allreduce, Barrier, Broadcast, Exchange, Exscan, Gather, Reduce, Scan, Scatter,
};
use tessera::Nonblocking;

use tessera::{
    Algorithm, Blocking, CollRequest, Collective, Context, GlobalPtr, Job, Loc, Op, SyncMode, Team,
};

mod common;
use common::{fail, input_u64};

fn input_f64(r: usize, i: usize, seed: u64) -> f64 {
    (input_u64(r, i, seed) % 1_000_000) as f64 / 997.0 - 300.0
}

fn input_loc(r: usize, i: usize, seed: u64) -> Loc {
    Loc::new((input_u64(r, i, seed) % 50) as f64, r as u64)
}

const SIZES: [usize; 4] = [1, 7, 1000, 9000]; // 9000 u64 = 72 KB: three 32 KiB chunks

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * (1.0 + a.abs().max(b.abs()))
}

/// A started nonblocking collective: waiting gives its output.
type Waiter<'a> = Box<dyn FnOnce() -> tessera::Result<Vec<u64>> + 'a>;

fn waiter(r: CollRequest<'_, u64>) -> Waiter<'_> {
    Box::new(move || r.wait())
}

/// Start the nonblocking form of `op` on `t` (with its forced algorithm), in one of two
/// variants (the second: a user operation, an exclusive scan, varying counts), and the
/// output it must give, computed sequentially.
fn start_nb<'a>(
    t: &Team<'a>,
    op: Collective,
    second: bool,
    root: usize,
    len: usize,
    seed: u64,
) -> tessera::Result<(Waiter<'a>, Vec<u64>)> {
    let (n, me) = (t.size(), t.rank());
    let w = |m: usize| t.world_rank(m);
    let input = |m: usize, i: usize| input_u64(w(m), i, seed);
    let mine: Vec<u64> = (0..len).map(|i| input(me, i)).collect();
    let everyone: Vec<u64> = (0..n)
        .flat_map(|m| (0..len).map(move |i| input_u64(w(m), i, seed)))
        .collect();
    let sum = |members: std::ops::Range<usize>| -> Vec<u64> {
        (0..len)
            .map(|i| {
                members
                    .clone()
                    .fold(0u64, |a, m| a.wrapping_add(input(m, i)))
            })
            .collect()
    };
    let add = |a: &mut [u64], b: &[u64]| {
        for (x, y) in a.iter_mut().zip(b) {
            *x = x.wrapping_add(*y);
        }
        Ok(())
    };
    let on_root = |v: Vec<u64>| if me == root { v } else { Vec::new() };
    Ok(match op {
        Collective::Barrier => {
            let r = t.run(Barrier, Nonblocking)?;
            (
                Box::new(move || r.wait().map(|_| Vec::new())) as Waiter,
                Vec::new(),
            )
        }
        Collective::Broadcast => {
            let data = if me == root {
                mine.clone()
            } else {
                vec![0; len]
            };
            let want = (0..len).map(|i| input(root, i)).collect();
            (
                waiter(t.run(Broadcast::new(root, &data, data.len()), Nonblocking)?),
                want,
            )
        }
        Collective::Reduce if second => (
            waiter(t.run(Reduce::with(root, &mine, add), Nonblocking)?),
            on_root(sum(0..n)),
        ),
        Collective::Reduce => (
            waiter(t.run(Reduce::new(root, &mine, Op::Sum), Nonblocking)?),
            on_root(sum(0..n)),
        ),
        Collective::Allreduce if second => (
            waiter(t.run(Allreduce::with(&mine, add), Nonblocking)?),
            sum(0..n),
        ),
        Collective::Allreduce => {
            let want = (0..len)
                .map(|i| (0..n).fold(0, |a, m| a ^ input(m, i)))
                .collect();
            (
                waiter(t.run(Allreduce::new(&mine, Op::BitXor), Nonblocking)?),
                want,
            )
        }
        Collective::Gather => (
            waiter(t.run(Gather::new(root, &mine), Nonblocking)?),
            on_root(everyone),
        ),
        Collective::Allgather => (waiter(t.run(Allgather::new(&mine), Nonblocking)?), everyone),
        Collective::Scatter => {
            let src = if me == root {
                everyone.clone()
            } else {
                Vec::new()
            };
            let want = everyone[me * len..(me + 1) * len].to_vec();
            (
                waiter(t.run(Scatter::new(root, &src, len), Nonblocking)?),
                want,
            )
        }
        Collective::Exchange if second => {
            // Member m sends (m + j) % 3 + len % 4 elements to member j.
            let count = |from: usize, to: usize| (from + to) % 3 + len % 4;
            let send: Vec<usize> = (0..n).map(|j| count(me, j)).collect();
            let recv: Vec<usize> = (0..n).map(|m| count(m, me)).collect();
            let item = |from: usize, to: usize, i: usize| (from * 1000 + to * 10 + i) as u64;
            let src: Vec<u64> = (0..n)
                .flat_map(|j| (0..count(me, j)).map(move |i| item(me, j, i)))
                .collect();
            let want = (0..n)
                .flat_map(|m| (0..count(m, me)).map(move |i| item(m, me, i)))
                .collect();
            (
                waiter(t.run(Exchange::varying(&src, &send, &recv), Nonblocking)?),
                want,
            )
        }
        Collective::Exchange => {
            let src: Vec<u64> = (0..n * len).map(|i| input(me, i)).collect();
            let want = (0..n)
                .flat_map(|m| (0..len).map(move |i| input_u64(w(m), me * len + i, seed)))
                .collect();
            (waiter(t.run(Exchange::new(&src), Nonblocking)?), want)
        }
        Collective::Scan if second => {
            let want = if me == 0 {
                vec![0; len]
            } else {
                (0..len)
                    .map(|i| (0..me).map(|m| input(m, i)).max().unwrap())
                    .collect()
            };
            (
                waiter(t.run(Exscan::new(&mine, Op::Max), Nonblocking)?),
                want,
            )
        }
        Collective::Scan => (
            waiter(t.run(Scan::new(&mine, Op::Sum), Nonblocking)?),
            sum(0..me + 1),
        ),
        Collective::BroadcastTo | Collective::ScatterTo | Collective::GatherTo => {
            unreachable!("single-address forms are checked by check_rooted_single_address")
        }
    })
}

/// A rooted single-address form (`op`, with `t`'s forced algorithm) at every pair of
/// entry and exit sync modes, against the result computed sequentially. With exit `No`
/// the data is read only after a barrier, and every destination is cleared and ready
/// before anyone enters (entry `No` promises nothing more).
fn check_rooted_single_address(
    t: &Team,
    op: Collective,
    root: usize,
    len: usize,
    seed: u64,
    ctx_msg: &dyn Fn(&str) -> String,
) -> tessera::RankResult {
    let (n, me) = (t.size(), t.rank());
    let w = |m: usize| t.world_rank(m);
    let ctx = t.context();
    let buf = ctx.alloc_collective::<u64>(n * len)?;
    let of = |m: usize| -> Vec<u64> { (0..n * len).map(|i| input_u64(w(m), i, seed)).collect() };
    let (roots, mine) = (of(root), of(me));
    let modes = [SyncMode::All, SyncMode::My, SyncMode::No];
    for (input, output) in modes.iter().flat_map(|&i| modes.map(|o| (i, o))) {
        let s = t.with_sync(input, output);
        ctx.put(buf, &vec![0; n * len], Blocking)?;
        t.run(Barrier, Blocking)?;
        let on_root = |v: &[u64]| if me == root { v.to_vec() } else { Vec::new() };
        let (read, want) = match op {
            Collective::BroadcastTo => {
                s.run(
                    Broadcast::new(root, &on_root(&roots[..len]), len)
                        .to_symmetric(&s.symmetric(buf)),
                    Blocking,
                )?;
                (len, roots[..len].to_vec())
            }
            Collective::ScatterTo => {
                s.run(
                    Scatter::new(root, &on_root(&roots), len).to_symmetric(&s.symmetric(buf)),
                    Blocking,
                )?;
                (len, roots[me * len..(me + 1) * len].to_vec())
            }
            _ => {
                s.run(
                    Gather::new(root, &mine[..len]).to_symmetric(&[buf.on(w(root))]),
                    Blocking,
                )?;
                let all: Vec<u64> = (0..n).flat_map(|m| of(m)[..len].to_vec()).collect();
                (if me == root { n * len } else { 0 }, on_root(&all))
            }
        };
        t.run(Barrier, Blocking)?;
        let mut got = vec![0u64; read];
        ctx.get(buf, &mut got, Blocking)?;
        if got != want {
            return Err(fail(ctx_msg(&format!(
                "wrong data at sync {input:?}/{output:?}"
            ))));
        }
        t.run(Barrier, Blocking)?; // read before the next call writes
    }
    ctx.free_collective(buf)?;
    Ok(())
}

/// Run every operation with every algorithm on `team`; `label` names the team in errors.
fn check_team(team: &Team, label: &str, seed0: u64) -> tessera::RankResult {
    let n = team.size();
    let me = team.rank();
    let w = |t: usize| team.world_rank(t);
    for op in Collective::ALL {
        // Every registry row, a family with a radix at every radix the tuner tries.
        let rows = tessera::model::team::registry()
            .iter()
            .filter(|r| r.op == op);
        let algorithms: Vec<Algorithm> = rows
            .flat_map(|r| {
                let mut radices = r.tuned_radices.to_vec();
                radices.push(r.algorithm.radix().unwrap_or(0));
                radices.into_iter().map(|k| r.algorithm.with_radix(k))
            })
            .collect();
        for alg in algorithms {
            let t = team.with_algorithm(op, alg)?;
            for (k, &len) in SIZES.iter().enumerate() {
                let seed = seed0 ^ (k as u64) << 40 ^ (alg.to_string().len() as u64) << 50;
                let root = (k * 7 + 3) % n;
                let ctx_msg = |what: &str| {
                    format!(
                        "{label} (size {n}), {} with {alg}, {len} elements, root {root}: {what}",
                        op.name()
                    )
                };
                let mine: Vec<u64> = (0..len).map(|i| input_u64(w(me), i, seed)).collect();
                match op {
                    Collective::Barrier => t.run(Barrier, Blocking)?,
                    Collective::Broadcast => {
                        let mut data = if me == root {
                            mine.clone()
                        } else {
                            vec![0; len]
                        };
                        t.run(Broadcast::in_place(root, &mut data), Blocking)?;
                        let want: Vec<u64> =
                            (0..len).map(|i| input_u64(w(root), i, seed)).collect();
                        if data != want {
                            return Err(fail(ctx_msg("wrong data")));
                        }
                    }
                    Collective::Reduce => {
                        let mut out = vec![0u64; if me == root { len } else { 0 }];
                        t.run(Reduce::new(root, &mine, Op::Sum).to(&mut out), Blocking)?;
                        if me == root {
                            let want: Vec<u64> = (0..len)
                                .map(|i| {
                                    (0..n)
                                        .fold(0u64, |a, m| a.wrapping_add(input_u64(w(m), i, seed)))
                                })
                                .collect();
                            if out != want {
                                return Err(fail(ctx_msg("wrong sum")));
                            }
                        }
                        // Floating point, max and min-with-index too.
                        let fl: Vec<f64> = (0..len).map(|i| input_f64(w(me), i, seed)).collect();
                        let mut fo = vec![0.0; if me == root { len } else { 0 }];
                        t.run(Reduce::new(root, &fl, Op::Max).to(&mut fo), Blocking)?;
                        if me == root {
                            for (i, v) in fo.iter().enumerate() {
                                let want = (0..n)
                                    .map(|m| input_f64(w(m), i, seed))
                                    .fold(f64::MIN, f64::max);
                                if *v != want {
                                    return Err(fail(ctx_msg("wrong f64 max")));
                                }
                            }
                        }
                    }
                    Collective::Allreduce => {
                        let mut out = vec![0u64; len];
                        t.run(Allreduce::new(&mine, Op::BitXor).to(&mut out), Blocking)?;
                        let want: Vec<u64> = (0..len)
                            .map(|i| (0..n).fold(0, |a, m| a ^ input_u64(w(m), i, seed)))
                            .collect();
                        if out != want {
                            return Err(fail(ctx_msg("wrong xor")));
                        }
                        let fl: Vec<f64> = (0..len).map(|i| input_f64(w(me), i, seed)).collect();
                        let mut fo = vec![0.0; len];
                        t.run(Allreduce::new(&fl, Op::Sum).to(&mut fo), Blocking)?;
                        for (i, v) in fo.iter().enumerate() {
                            let want: f64 = (0..n).map(|m| input_f64(w(m), i, seed)).sum();
                            if !close(*v, want) {
                                return Err(fail(ctx_msg(&format!("f64 sum {v} vs {want}"))));
                            }
                        }
                        let locs: Vec<Loc> = (0..len).map(|i| input_loc(w(me), i, seed)).collect();
                        let mut lo = vec![Loc::new(0.0, 0); len];
                        t.run(Allreduce::new(&locs, Op::MinLoc).to(&mut lo), Blocking)?;
                        for (i, v) in lo.iter().enumerate() {
                            let want = (0..n)
                                .map(|m| input_loc(w(m), i, seed))
                                .fold(None::<Loc>, |best, c| match best {
                                    Some(b)
                                        if b.value < c.value
                                            || (b.value == c.value && b.index <= c.index) =>
                                    {
                                        Some(b)
                                    }
                                    _ => Some(c),
                                })
                                .unwrap();
                            if *v != want {
                                return Err(fail(ctx_msg(&format!("minloc {v:?} vs {want:?}"))));
                            }
                        }
                        // A user operation on a user type: component-wise max of pairs.
                        let pairs: Vec<[u32; 2]> = (0..len)
                            .map(|i| [input_u64(w(me), i, seed) as u32, me as u32])
                            .collect();
                        let mut po = vec![[0u32; 2]; len];
                        t.run(
                            Allreduce::with(&pairs, |a: &mut [[u32; 2]], b: &[[u32; 2]]| {
                                for (x, y) in a.iter_mut().zip(b) {
                                    *x = [x[0].max(y[0]), x[1].max(y[1])];
                                }
                                Ok(())
                            })
                            .to(&mut po),
                            Blocking,
                        )?;
                        for (i, v) in po.iter().enumerate() {
                            let want = [
                                (0..n)
                                    .map(|m| input_u64(w(m), i, seed) as u32)
                                    .max()
                                    .unwrap(),
                                n as u32 - 1,
                            ];
                            if *v != want {
                                return Err(fail(ctx_msg("user operation")));
                            }
                        }
                    }
                    Collective::Gather => {
                        let mut out = vec![0u64; if me == root { n * len } else { 0 }];
                        t.run(Gather::new(root, &mine).to(&mut out), Blocking)?;
                        if me == root {
                            let want: Vec<u64> = (0..n)
                                .flat_map(|m| (0..len).map(move |i| input_u64(w(m), i, seed)))
                                .collect();
                            if out != want {
                                return Err(fail(ctx_msg("wrong gather")));
                            }
                        }
                    }
                    Collective::Allgather => {
                        let mut out = vec![0u64; n * len];
                        t.run(Allgather::new(&mine).to(&mut out), Blocking)?;
                        let want: Vec<u64> = (0..n)
                            .flat_map(|m| (0..len).map(move |i| input_u64(w(m), i, seed)))
                            .collect();
                        if out != want {
                            return Err(fail(ctx_msg("wrong allgather")));
                        }
                    }
                    Collective::Scatter => {
                        let src: Vec<u64> = if me == root {
                            (0..n * len).map(|i| input_u64(w(root), i, seed)).collect()
                        } else {
                            Vec::new()
                        };
                        let mut out = vec![0u64; len];
                        t.run(Scatter::new(root, &src, out.len()).to(&mut out), Blocking)?;
                        let want: Vec<u64> = (0..len)
                            .map(|i| input_u64(w(root), me * len + i, seed))
                            .collect();
                        if out != want {
                            return Err(fail(ctx_msg("wrong scatter")));
                        }
                    }
                    Collective::Exchange => {
                        // Block j of member m's input is for member j.
                        let src: Vec<u64> =
                            (0..n * len).map(|i| input_u64(w(me), i, seed)).collect();
                        let mut out = vec![0u64; n * len];
                        t.run(Exchange::new(&src).to(&mut out), Blocking)?;
                        let want: Vec<u64> = (0..n)
                            .flat_map(|m| {
                                (0..len).map(move |i| input_u64(w(m), me * len + i, seed))
                            })
                            .collect();
                        if out != want {
                            return Err(fail(ctx_msg("wrong exchange")));
                        }
                        // Varying counts: member m sends (m + j) % 3 · (len % 5 + 1) elements to j.
                        let count = |from: usize, to: usize| (from + to) % 3 * (len % 5 + 1);
                        let send_counts: Vec<usize> = (0..n).map(|j| count(me, j)).collect();
                        let recv_counts: Vec<usize> = (0..n).map(|m| count(m, me)).collect();
                        let src: Vec<u64> = (0..n)
                            .flat_map(|j| {
                                (0..count(me, j))
                                    .map(move |i| (me * 1000 + j * 10) as u64 + i as u64)
                            })
                            .collect();
                        let mut out = vec![0u64; recv_counts.iter().sum()];
                        t.run(
                            Exchange::varying(&src, &send_counts, &recv_counts).to(&mut out),
                            Blocking,
                        )?;
                        let want: Vec<u64> = (0..n)
                            .flat_map(|m| {
                                (0..count(m, me))
                                    .map(move |i| (m * 1000 + me * 10) as u64 + i as u64)
                            })
                            .collect();
                        if out != want {
                            return Err(fail(ctx_msg("wrong exchange_v")));
                        }
                    }
                    Collective::Scan => {
                        let mut out = vec![0u64; len];
                        t.run(Scan::new(&mine, Op::Sum).to(&mut out), Blocking)?;
                        let want: Vec<u64> = (0..len)
                            .map(|i| {
                                (0..=me).fold(0u64, |a, m| a.wrapping_add(input_u64(w(m), i, seed)))
                            })
                            .collect();
                        if out != want {
                            return Err(fail(ctx_msg("wrong inclusive scan")));
                        }
                        t.run(Exscan::new(&mine, Op::Max).to(&mut out), Blocking)?;
                        let want: Vec<u64> = if me == 0 {
                            vec![0; len]
                        } else {
                            (0..len)
                                .map(|i| (0..me).map(|m| input_u64(w(m), i, seed)).max().unwrap())
                                .collect()
                        };
                        if out != want {
                            return Err(fail(ctx_msg("wrong exclusive scan")));
                        }
                    }
                    Collective::BroadcastTo | Collective::ScatterTo | Collective::GatherTo => {
                        check_rooted_single_address(&t, op, root, len, seed, &ctx_msg)?
                    }
                }
            }
            if op.is_single_address() {
                continue; // their nonblocking forms are flat, checked below
            }
            // The nonblocking forms run the same algorithm: two in flight at once, waited
            // for in the reverse order, at a large and a small size.
            for (k, &len) in [SIZES[3], SIZES[1]].iter().enumerate() {
                let seed = seed0 ^ 0xAB ^ (k as u64) << 40;
                let root = (k * 5 + 1) % n;
                let (first, want_first) = start_nb(&t, op, false, root, len, seed)?;
                let (second, want_second) = start_nb(&t, op, true, root, len, seed ^ 7)?;
                for (got, want, which) in [
                    (second()?, want_second, "second"),
                    (first()?, want_first, "first"),
                ] {
                    if got != want {
                        return Err(fail(format!(
                            "{label} (size {n}), {}_nb with {alg}, {len} elements, root {root}: wrong output of the {which} request",
                            op.name()
                        )));
                    }
                }
            }
        }
    }
    // Single-address forms: data put straight into symmetric destinations.
    let ctx = team.context();
    // 20 003 elements (156 KiB): a large odd length, from a root in the middle.
    for len in [1usize, 5000, 20_003] {
        let buf = ctx.alloc_collective::<u64>(n * len)?;
        let root = if len > 5000 { n / 2 } else { n - 1 };
        let src: Vec<u64> = if me == root {
            (0..len).map(|i| input_u64(w(root), i, 99)).collect()
        } else {
            Vec::new()
        };
        team.run(
            Broadcast::new(root, &src, len).to_symmetric(&team.symmetric(buf)),
            Blocking,
        )?;
        let mut got = vec![0u64; len];
        ctx.get(buf, &mut got, Blocking)?;
        if got
            != (0..len)
                .map(|i| input_u64(w(root), i, 99))
                .collect::<Vec<_>>()
        {
            return Err(fail(format!("{label}: broadcast_to of {len}")));
        }
        let src: Vec<u64> = (0..n * len).map(|i| input_u64(w(me), i, 98)).collect();
        team.run(
            Exchange::new(&src).to_symmetric(&team.symmetric(buf)),
            Blocking,
        )?;
        let mut got = vec![0u64; n * len];
        ctx.get(buf, &mut got, Blocking)?;
        let want: Vec<u64> = (0..n)
            .flat_map(|m| (0..len).map(move |i| input_u64(w(m), me * len + i, 98)))
            .collect();
        if got != want {
            return Err(fail(format!("{label}: exchange_to of {len}")));
        }
        // gather_to the root, scatter_to everyone, allgather_to everyone.
        let mine: Vec<u64> = (0..len).map(|i| input_u64(w(me), i, 97)).collect();
        let everyone: Vec<u64> = (0..n)
            .flat_map(|m| (0..len).map(move |i| input_u64(w(m), i, 97)))
            .collect();
        team.run(Barrier, Blocking)?;
        team.run(
            Gather::new(root, &mine).to_symmetric(&[buf.on(w(root))]),
            Blocking,
        )?;
        if me == root {
            let mut got = vec![0u64; n * len];
            ctx.get(buf, &mut got, Blocking)?;
            if got != everyone {
                return Err(fail(format!("{label}: gather_to of {len}")));
            }
        }
        team.run(Barrier, Blocking)?;
        let src = if me == root {
            everyone.clone()
        } else {
            Vec::new()
        };
        team.run(
            Scatter::new(root, &src, len).to_symmetric(&team.symmetric(buf)),
            Blocking,
        )?;
        let mut got = vec![0u64; len];
        ctx.get(buf, &mut got, Blocking)?;
        if got[..] != everyone[me * len..(me + 1) * len] {
            return Err(fail(format!("{label}: scatter_to of {len}")));
        }
        team.run(Barrier, Blocking)?;
        team.run(
            Allgather::new(&mine).to_symmetric(&team.symmetric(buf)),
            Blocking,
        )?;
        let mut got = vec![0u64; n * len];
        ctx.get(buf, &mut got, Blocking)?;
        if got != everyone {
            return Err(fail(format!("{label}: allgather_to of {len}")));
        }
        // Rendezvous forms: the receivers get. Every `buf` now holds `everyone`; member
        // i's block sits at i · len.
        let mut got = vec![0u64; len];
        team.run(
            Broadcast::from_symmetric(root, buf.on(w(root)).add(root * len), &mut got),
            Blocking,
        )?;
        if got[..] != everyone[root * len..(root + 1) * len] {
            return Err(fail(format!("{label}: broadcast_from of {len}")));
        }
        let srcs: Vec<GlobalPtr<u64>> = (0..n).map(|i| buf.on(w(i)).add(i * len)).collect();
        let mut got = vec![0u64; if me == root { n * len } else { 0 }];
        team.run(Gather::from_symmetric(root, &srcs, &mut got), Blocking)?;
        if me == root && got != everyone {
            return Err(fail(format!("{label}: gather_from of {len}")));
        }
        team.run(Barrier, Blocking)?; // nobody frees (and reuses) a buffer others may still read
        ctx.free_collective(buf)?;
    }
    if n > 1 {
        let bad = vec![GlobalPtr::<u64>::new(w(0), 0); n];
        if team
            .run(Exchange::new(&[0u64; 0]).to_symmetric(&bad), Blocking)
            .is_ok()
        {
            return Err(fail(format!(
                "{label}: exchange_to accepted destinations on the wrong ranks"
            )));
        }
    }
    // Value forms.
    let total = team.run(Allreduce::value(w(me) as u64 + 1, Op::Sum), Blocking)?;
    let want: u64 = (0..n).map(|m| w(m) as u64 + 1).sum();
    if total != want {
        return Err(fail(format!("{label}: allreduce_value {total} vs {want}")));
    }
    let b = team.run(Broadcast::value(n - 1, w(me) as i32 * 3), Blocking)?;
    if b != w(n - 1) as i32 * 3 {
        return Err(fail(format!("{label}: broadcast_value")));
    }
    let r = team.run(Reduce::value(0, me as u32 + 1, Op::Prod), Blocking)?;
    if (me == 0) != r.is_some() || r.is_some_and(|v| v != (1..=n as u32).product::<u32>()) {
        return Err(fail(format!("{label}: reduce_value {r:?}")));
    }
    if team.run(Scan::value(1u64, Op::Sum), Blocking)? != me as u64 + 1
        || team.run(Exscan::value(1u64, Op::Sum), Blocking)? != (me > 0).then_some(me as u64)
    {
        return Err(fail(format!("{label}: scan values")));
    }
    Ok(())
}

fn run(ranks: usize, grid: Option<(usize, usize)>) {
    Job::threads(ranks)
        .segment(64 << 20)
        // Odd rank counts also run in checked mode: the argument check must not disturb
        // correct programs.
        .checked(ranks % 2 == 1)
        .wait_timeout(Duration::from_secs(120))
        .run(|ctx: &Context| {
            let world = Team::world(ctx)?;
            check_team(&world, "world", 1)?;
            if let Some((rows, cols)) = grid {
                let (row, col) = world.grid(rows, cols)?;
                check_team(&row, "row", 2)?;
                check_team(&col, "column", 3)?;
                // Teams nest: split a row again into odd and even members.
                let parity = row
                    .split(Some((row.rank() % 2) as u32), 0)?
                    .expect("member");
                check_team(&parity, "row parity", 4)?;
            }
            let alone = world.split(Some(ctx.rank() as u32), 0)?.expect("own team");
            check_team(&alone, "team of one", 5)?;
            // Members that opt out get no team.
            let evens =
                world.split(ctx.rank().is_multiple_of(2).then_some(0), ctx.rank() as u64)?;
            if evens.is_some() != ctx.rank().is_multiple_of(2) {
                return Err("split with colour None".into());
            }
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{ranks} ranks: {e}"));
}

#[test]
fn collectives_1_rank() {
    run(1, None);
}

#[test]
fn collectives_2_ranks() {
    run(2, Some((1, 2)));
}

#[test]
fn collectives_3_ranks() {
    run(3, Some((3, 1)));
}

#[test]
fn collectives_4_ranks_grid() {
    run(4, Some((2, 2)));
}

#[test]
fn collectives_5_ranks() {
    run(5, None);
}

#[test]
fn collectives_8_ranks_grid() {
    run(8, Some((2, 4)));
}

#[test]
fn bad_arguments_are_reported() {
    Job::threads(3)
        .segment(16 << 20)
        .wait_timeout(Duration::from_secs(30))
        .run(|ctx| {
            let world = Team::world(ctx)?;
            let err = world
                .run(Broadcast::in_place(7, &mut [0u8; 4]), Blocking)
                .unwrap_err()
                .to_string();
            assert!(err.contains("root 7 is not a member"), "{err}");
            let err = world
                .run(Allgather::new(&[1u32; 2]).to(&mut [0u32; 5]), Blocking)
                .unwrap_err()
                .to_string();
            assert!(err.contains("allgather"), "{err}");
            let err = world
                .with_algorithm(Collective::Broadcast, Algorithm::RING)
                .err()
                .unwrap()
                .to_string();
            assert!(
                err.contains("does not implement broadcast") && err.contains("binomial"),
                "{err}"
            );
            assert!(world
                .run(Allreduce::value(1.5f64, Op::BitAnd), Blocking)
                .is_err());
            let err = world.grid(2, 2).err().unwrap().to_string();
            assert!(err.contains("2×2 grid needs 4"), "{err}");
            Ok(())
        })
        .unwrap();
}

/// Teams made by a subset of the members alone (OpenSHMEM's active sets): strided and
/// reordered subsets run every collective, checked against a sequential computation, in
/// between collectives of the whole team on the same streams.
#[test]
fn subsets_made_by_their_members_alone() {
    tessera::Job::threads(5)
        .segment(16 << 20)
        .wait_timeout(std::time::Duration::from_secs(30))
        .run(|ctx| {
            let world = tessera::Team::world(ctx)?;
            let me = ctx.rank();
            for round in 0..3u64 {
                // Odd ranks in reverse order; even ranks strided by two.
                let set: Vec<usize> = if me % 2 == 1 {
                    vec![3, 1]
                } else {
                    vec![0, 2, 4]
                };
                let team = world.subset(&set)?;
                let n = set.len();
                let value = 10 * me as u64 + round;
                let sum: u64 = set.iter().map(|&r| 10 * r as u64 + round).sum();
                if team.run(Allreduce::value(value, tessera::Op::Sum), Blocking)? != sum {
                    return Err(format!("subset {set:?} allreduce").into());
                }
                let mut b = [value; 3];
                team.run(Broadcast::in_place(n - 1, &mut b), Blocking)?;
                if b != [10 * set[n - 1] as u64 + round; 3] {
                    return Err(format!("subset {set:?} broadcast {b:?}").into());
                }
                let mut all = vec![0u64; n];
                team.run(Allgather::new(&[value]).to(&mut all), Blocking)?;
                let want: Vec<u64> = set.iter().map(|&r| 10 * r as u64 + round).collect();
                if all != want {
                    return Err(format!("subset {set:?} allgather {all:?}").into());
                }
                let src: Vec<u64> = (0..n as u64).map(|j| 100 * value + j).collect();
                let mut dst = vec![0u64; n];
                team.run(Exchange::new(&src).to(&mut dst), Blocking)?;
                let t = team.rank() as u64;
                let want: Vec<u64> = set
                    .iter()
                    .map(|&r| 100 * (10 * r as u64 + round) + t)
                    .collect();
                if dst != want {
                    return Err(format!("subset {set:?} exchange {dst:?}").into());
                }
                team.run(Barrier, Blocking)?;
                // The whole team in between, on the same streams.
                if world.run(Allreduce::value(1u64, tessera::Op::Sum), Blocking)? != 5 {
                    return Err("world allreduce between subsets".into());
                }
            }
            if world.subset(&[me, me]).is_ok() || world.subset(&[(me + 1) % 5]).is_ok() {
                return Err("bad subsets accepted".into());
            }
            Ok(())
        })
        .unwrap();
}

/// The value forms of gather, allgather and scatter (Berkeley UPC's `bupc_allv_*`) at
/// every root, on the world and on grid rows, against the values each member computes.
#[test]
fn value_forms_of_gather_allgather_and_scatter() {
    for ranks in [1, 4, 5] {
        Job::threads(ranks)
            .segment(16 << 20)
            .wait_timeout(Duration::from_secs(30))
            .run(|ctx| {
                let world = Team::world(ctx)?;
                let teams = if ranks == 4 {
                    vec![world.clone(), world.grid(2, 2)?.0]
                } else {
                    vec![world]
                };
                for t in &teams {
                    let n = t.size();
                    let value = |m: usize| input_f64(t.world_rank(m), 0, 42);
                    let everyone: Vec<f64> = (0..n).map(value).collect();
                    if t.run(Allgather::value(value(t.rank())), Blocking)? != everyone {
                        return Err(fail(format!("allgather_value on {n} members")));
                    }
                    for root in 0..n {
                        let got = t.run(Gather::value(root, value(t.rank())), Blocking)?;
                        if got != (t.rank() == root).then(|| everyone.clone()) {
                            return Err(fail(format!("gather_value to {root}: {got:?}")));
                        }
                        let values: Vec<Loc> = (0..n).map(|m| input_loc(root, m, 7)).collect();
                        let mine = t.run(Scatter::value(root, &values), Blocking)?;
                        if mine != input_loc(root, t.rank(), 7) {
                            return Err(fail(format!("scatter_value from {root}: {mine:?}")));
                        }
                    }
                }
                Ok(())
            })
            .unwrap();
    }
}

/// A long nonblocking broadcast travels by rendezvous: with a tree whose root only sends
/// (binomial; the segmented chain needs every member to forward pieces), a receiver that
/// waits for it finishes while the root computes without calling the library at all (the
/// root only started it), and the data arrives intact. Checked by order, not by timing: the root
/// raises a flag after its computation, and every receiver must be done before that.
#[test]
fn a_long_nonblocking_broadcast_completes_while_its_root_computes() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let root_busy_until_done = AtomicBool::new(false);
    let len = 1 << 17; // 1 MiB of u64: 32 chunks of the channel
    tessera::Job::threads(3)
        .run(|ctx| {
            let team =
                Team::world(ctx)?.with_algorithm(Collective::Broadcast, Algorithm::BINOMIAL)?;
            let data: Vec<u64> = (0..len as u64).map(|i| i * 3 + 1).collect();
            let mine = if team.rank() == 0 {
                data.clone()
            } else {
                vec![0; len]
            };
            let request = team.run(Broadcast::new(0, &mine, mine.len()), Nonblocking)?;
            if team.rank() == 0 {
                // Compute (here: sleep) without polling, then say so.
                std::thread::sleep(Duration::from_secs(2));
                root_busy_until_done.store(true, Ordering::SeqCst);
            }
            let got = request.wait()?;
            if team.rank() != 0 && root_busy_until_done.load(Ordering::SeqCst) {
                return Err(fail(format!(
                    "rank {}: the broadcast finished only after the root polled again",
                    team.rank()
                )));
            }
            if got != data {
                return Err(fail(format!("rank {}: wrong data", team.rank())));
            }
            team.run(Barrier, Blocking)?;
            Ok(())
        })
        .unwrap();
}

/// `broadcast_nb_in_place` with every broadcast algorithm, at 5 ranks and at 3 (checked
/// mode): two broadcasts in flight (different roots), the members of one call mixing the
/// in-place form and `broadcast_nb`, sizes from one element to a rendezvous-sized one,
/// buffers passed round from call to call. Every member gets the root's data, and a
/// member's buffer comes back as the same allocation (nothing was copied into a new one).
#[test]
fn an_in_place_nonblocking_broadcast_fills_the_buffer_it_was_given() {
    fn body(ctx: &Context) -> tessera::RankResult {
        let world = Team::world(ctx)?;
        let (n, me) = (world.size(), world.rank());
        for alg in Collective::Broadcast.candidates() {
            let t = world.with_algorithm(Collective::Broadcast, alg)?;
            let mut bufs = (Vec::new(), Vec::new());
            for (k, &len) in [1usize, 9000, 1 << 16].iter().enumerate() {
                let seed = 0xB0AD ^ (k as u64) << 20;
                let (r0, r1) = (k % n, (k + 2) % n);
                let fill = |buf: &mut Vec<u64>, root: usize, seed: u64| {
                    buf.resize(len, 0);
                    if me == root {
                        for (i, x) in buf.iter_mut().enumerate() {
                            *x = input_u64(root, i, seed);
                        }
                    }
                };
                fill(&mut bufs.0, r0, seed);
                fill(&mut bufs.1, r1, seed + 1);
                let ptrs = (bufs.0.as_ptr(), bufs.1.as_ptr());
                let first = t.run(
                    Broadcast::owned(r0, std::mem::take(&mut bufs.0)),
                    Nonblocking,
                )?;
                // Odd members take the copying form for the second call.
                let second = if me % 2 == 1 {
                    let data = std::mem::take(&mut bufs.1);
                    t.run(Broadcast::new(r1, &data, data.len()), Nonblocking)?
                } else {
                    t.run(
                        Broadcast::owned(r1, std::mem::take(&mut bufs.1)),
                        Nonblocking,
                    )?
                };
                bufs = (first.wait()?, second.wait()?);
                let what = |what: &str| format!("rank {me}, {alg}, {len} elements: {what}");
                for (got, root, seed) in [(&bufs.0, r0, seed), (&bufs.1, r1, seed + 1)] {
                    let want: Vec<u64> = (0..len).map(|i| input_u64(root, i, seed)).collect();
                    if *got != want {
                        return Err(fail(what(&format!("wrong data from root {root}"))));
                    }
                }
                if bufs.0.as_ptr() != ptrs.0 || (me % 2 == 0 && bufs.1.as_ptr() != ptrs.1) {
                    return Err(fail(what("the buffer came back as another allocation")));
                }
            }
        }
        world.run(Barrier, Blocking)?;
        Ok(())
    }
    for (ranks, checked) in [(5, false), (3, true)] {
        Job::threads(ranks)
            .checked(checked)
            .wait_timeout(Duration::from_secs(60))
            .run(body)
            .unwrap();
    }
}

/// A pair's ring holds hundreds of short messages: a root finishes 300 blocking one-word
/// broadcasts before any receiver has called one (each receiver first waits for the root to
/// say it is done; with a pair's old two slots the root would wait for them at the third
/// and never say so). Then broadcasts of mixed lengths (one word to two chunks), whose
/// words look like the channel's flag values, wrap each ring dozens of times, and every
/// word arrives: with mapped peers, and with hidden ones (each message one or two signals
/// that the owner applies, as across hosts).
#[test]
fn short_messages_run_ahead_and_mixed_lengths_wrap_the_ring() {
    use std::sync::atomic::{AtomicBool, Ordering};
    const AHEAD: u64 = 300;
    for hidden in [false, true] {
        let root_done = AtomicBool::new(false);
        Job::threads(3)
        .hide_peers(hidden)
        .wait_timeout(Duration::from_secs(60))
        .run(|ctx| {
            let team = Team::world(ctx)?.with_algorithm(Collective::Broadcast, Algorithm::FLAT)?;
            let me = team.rank();
            if me == 0 {
                for k in 0..AHEAD {
                    team.run(Broadcast::in_place(0, &mut [k]), Blocking)?;
                }
                root_done.store(true, Ordering::SeqCst);
            } else {
                let start = std::time::Instant::now();
                while !root_done.load(Ordering::SeqCst) {
                    if start.elapsed() > Duration::from_secs(30) {
                        return Err(fail(format!(
                            "rank {me}: the root did not finish {AHEAD} short broadcasts without the receivers"
                        )));
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
                for k in 0..AHEAD {
                    let mut got = [u64::MAX];
                    team.run(Broadcast::in_place(0, &mut got), Blocking)?;
                    if got[0] != k {
                        return Err(fail(format!("rank {me}: broadcast {k} brought {}", got[0])));
                    }
                }
            }
            let lengths = [1usize, 9, 120, 5000, 3, 4100, 1, 17];
            for round in 0..400 {
                let len = lengths[round % lengths.len()];
                let want: Vec<u64> = (0..len).map(|i| (round * 8 + i) as u64 + 1).collect();
                let mut data = if me == 0 { want.clone() } else { vec![0; len] };
                team.run(Broadcast::in_place(0, &mut data), Blocking)?;
                if data != want {
                    return Err(fail(format!("rank {me}: round {round} ({len} words) differs")));
                }
            }
            team.run(Barrier, Blocking)?;
            Ok(())
        })
        .unwrap();
    }
}

/// With no table and no trials, a team follows its cost model's choice at every size,
/// also when a program alternates more sizes than the team remembers choices for (the
/// model's memory of recent sizes must never hand one size another's choice).
#[test]
fn the_model_s_choice_holds_at_every_size_in_any_order() {
    Job::threads(5)
        .segment(8 << 20)
        .wait_timeout(Duration::from_secs(60))
        .run(|ctx| {
            let world = Team::world(ctx)?.with_tuning_table(&Default::default());
            let params = world.cost_params();
            let sizes = [
                8,
                1 << 20,
                64,
                262_144,
                8,
                4096,
                32_768,
                1 << 20,
                512,
                8,
                262_144,
            ];
            for round in 0..2 {
                for op in Collective::ALL {
                    for &bytes in sizes.iter().rev().skip(round) {
                        let want = params.choose(op, world.size(), bytes, world.reads_directly());
                        assert_eq!(world.algorithm_for(op, bytes), want, "{op:?} {bytes} B");
                    }
                }
            }
            Ok(())
        })
        .unwrap();
}

/// A refused argument is a typed error naming the call and the argument, so a caller can
/// match on which one was wrong; a call out of order names the call.
#[test]
fn refusals_name_the_call_and_the_argument() {
    use tessera::{CoreError, Error, Strided};
    Job::threads(2)
        .segment(1 << 20)
        .run(|ctx| {
            let world = Team::world(ctx)?;
            let mut short = [0u64; 1];
            let e = world
                .run(Allreduce::new(&[1u64, 2], Op::Sum).to(&mut short), Blocking)
                .unwrap_err();
            assert!(
                matches!(
                    e,
                    Error::Core(CoreError::BadArgument {
                        call: "allreduce",
                        argument: "dst",
                        ..
                    })
                ),
                "{e:?}"
            );
            let p = ctx.alloc_collective::<u64>(8)?;
            let shape = Strided {
                local: &[0u64; 4],
                local_strides: &[1, 1],
                remote_strides: &[1],
                counts: &[2, 2],
            };
            let e = ctx.put(p, shape, Blocking).unwrap_err();
            assert!(
                matches!(
                    e,
                    Error::Core(CoreError::BadArgument {
                        argument: "strides",
                        ..
                    })
                ),
                "{e:?}"
            );
            let e = ctx.barrier_wait().unwrap_err();
            assert!(
                matches!(
                    e,
                    Error::Core(CoreError::OutOfOrder {
                        call: "barrier_wait",
                        ..
                    })
                ),
                "{e:?}"
            );
            world.run(Barrier, Blocking)?;
            Ok(())
        })
        .unwrap();
}

/// A 2-rank reduction long enough to go whole, read directly into the root's output
/// (`algorithms::reduce::WHOLE_FROM`, 256 KiB; the sizes above stay in chunks): at each
/// root, every element is the sum of both members' inputs, and the sender's input is left
/// as it was.
#[test]
fn a_long_two_rank_reduce_sums_every_element_at_each_root() {
    const LEN: usize = 40_000; // u64s: 320 KB
    Job::threads(2)
        .segment(64 << 20)
        .wait_timeout(Duration::from_secs(120))
        .run(|ctx: &Context| {
            let world = Team::world(ctx)?;
            let me = ctx.rank();
            for root in 0..2 {
                let seed = 77 + root as u64;
                let mine: Vec<u64> = (0..LEN).map(|i| input_u64(me, i, seed)).collect();
                let mut out = vec![0u64; if me == root { LEN } else { 0 }];
                world.run(Reduce::new(root, &mine, Op::Sum).to(&mut out), Blocking)?;
                let kept = (0..LEN).all(|i| mine[i] == input_u64(me, i, seed));
                if !kept {
                    return Err(fail(format!("root {root}: the input changed")));
                }
                if me == root {
                    let wrong = (0..LEN).find(|&i| {
                        out[i] != input_u64(0, i, seed).wrapping_add(input_u64(1, i, seed))
                    });
                    if let Some(i) = wrong {
                        return Err(fail(format!("root {root}: wrong sum at element {i}")));
                    }
                }
            }
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{e}"));
}
