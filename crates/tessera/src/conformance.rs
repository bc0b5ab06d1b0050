//! The conduit conformance suite: the checklist every conduit must pass.
//!
//! Each [`Case`] is an SPMD body: run it on every rank of a job (any rank count, any
//! conduit) and it checks real results: bytes moved exactly, atomics' final values, every
//! message delivered, errors raised for bad input. The same source runs in the test suite
//! on both conduits at several rank counts, and from `tessera selftest` on any machine.
//!
//! ```
//! use tessera::{conformance, Job};
//! Job::threads(3).segment(8 << 20).run(|ctx| conformance::run_all(ctx, None)).unwrap();
//! ```
//!
//! This module must never special-case a conduit: what it checks is the contract.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use crate::error::{CoreError, Error};
use crate::{
    Affinity, Blocking, Distribution, Implicit, Indexed, IndexedMut, Nonblocking, SharedArray,
    Signal, Strided, StridedMut,
};
use crate::{Algorithm, Collective, Op, Team};
use crate::{AtomicOp, Context, GlobalPtr, RankResult};
use crate::{GlobalGrid, Grid, HaloGrid, HaloStrategy, Point, RectDomain};

/// One conformance check.
pub struct Case {
    /// Its name (for `--case` filters and reports).
    pub name: &'static str,
    /// The SPMD body.
    pub run: fn(&Context) -> RankResult,
}

/// Every case, in the order they run.
pub fn cases() -> &'static [Case] {
    &[
        Case {
            name: "identity",
            run: identity,
        },
        Case {
            name: "collective_alloc",
            run: collective_alloc,
        },
        Case {
            name: "put_get",
            run: put_get,
        },
        Case {
            name: "nonblocking",
            run: nonblocking,
        },
        Case {
            name: "strided",
            run: strided,
        },
        Case {
            name: "indexed",
            run: indexed,
        },
        Case {
            name: "atomics",
            run: atomics,
        },
        Case {
            name: "signalling_put",
            run: signalling_put,
        },
        Case {
            name: "active_messages",
            run: active_messages,
        },
        Case {
            name: "rpc",
            run: rpc,
        },
        Case {
            name: "barriers",
            run: barriers,
        },
        Case {
            name: "lock",
            run: lock,
        },
        Case {
            name: "bad_input",
            run: bad_input,
        },
        Case {
            name: "collectives",
            run: collectives,
        },
        Case {
            name: "nonblocking_collectives",
            run: nonblocking_collectives,
        },
        Case {
            name: "native_collectives",
            run: native_collectives,
        },
        Case {
            name: "grid_copies",
            run: grid_copies,
        },
        Case {
            name: "ghost_exchange",
            run: ghost_exchange,
        },
        Case {
            name: "shared_arrays",
            run: shared_arrays,
        },
    ]
}

/// Run every case (or those whose name contains `filter`), with a barrier between them.
/// A failure names the case.
pub fn run_all(ctx: &Context, filter: Option<&str>) -> RankResult {
    for case in cases()
        .iter()
        .filter(|c| filter.is_none_or(|f| c.name.contains(f)))
    {
        (case.run)(ctx).map_err(|e| {
            format!(
                "conformance case {:?} on rank {}: {e}",
                case.name,
                ctx.rank()
            )
        })?;
        ctx.barrier()?;
    }
    Ok(())
}

/// The element counts collective cases run with in a team of `n`: a short message, and
/// a long one of 10,000 elements, fewer in teams of more than 52 members so that a
/// member's copy of every member's block stays near 4 MiB (at 256 ranks, 10,000 would
/// have every rank hold 60 MB of such buffers at once), but never so few that the long
/// message is not read directly (from 16 KiB).
fn lengths(n: usize) -> [usize; 2] {
    let direct = crate::model::team::DIRECT_FROM / 8 + 5;
    [3, ((1 << 19) / n.max(1)).clamp(direct, 10_000)]
}

fn ensure(cond: bool, what: impl FnOnce() -> String) -> RankResult {
    if cond {
        Ok(())
    } else {
        Err(what().into())
    }
}

fn right(ctx: &Context) -> usize {
    (ctx.rank() + 1) % ctx.ranks()
}

fn left(ctx: &Context) -> usize {
    (ctx.rank() + ctx.ranks() - 1) % ctx.ranks()
}

/// A byte pattern that depends on who wrote it, the size and the position.
fn pattern(writer: usize, size: usize, i: usize) -> u8 {
    (i.wrapping_mul(31) ^ writer.wrapping_mul(97) ^ size) as u8
}

fn identity(ctx: &Context) -> RankResult {
    ensure(ctx.rank() < ctx.ranks(), || "rank out of range".into())?;
    let seen = ctx.alloc_collective::<u64>(ctx.ranks())?;
    ctx.barrier()?;
    ctx.put(
        seen.on(0).add(ctx.rank()),
        &[ctx.rank() as u64 + 1],
        Blocking,
    )?;
    ctx.barrier()?;
    if ctx.rank() == 0 {
        let mut all = vec![0u64; ctx.ranks()];
        ctx.get(seen, &mut all, Blocking)?;
        ensure(
            all.iter().enumerate().all(|(i, &v)| v == i as u64 + 1),
            || format!("rank 0 saw {all:?}"),
        )?;
    }
    ctx.barrier()?;
    ctx.free_collective(seen)?;
    Ok(())
}

fn collective_alloc(ctx: &Context) -> RankResult {
    // Local allocations differ per rank; collective offsets must not.
    let junk = ctx.alloc_local::<u8>(1000 * (ctx.rank() + 1))?;
    let a = ctx.alloc_collective::<f64>(333)?;
    let b = ctx.alloc_collective::<u8>(5)?;
    let offsets = ctx.alloc_collective::<u64>(2 * ctx.ranks())?;
    ctx.barrier()?;
    ctx.put(
        offsets.on(0).add(2 * ctx.rank()),
        &[a.offset(), b.offset()],
        Blocking,
    )?;
    ctx.barrier()?;
    if ctx.rank() == 0 {
        let mut all = vec![0u64; 2 * ctx.ranks()];
        ctx.get(offsets, &mut all, Blocking)?;
        for r in 0..ctx.ranks() {
            ensure(all[2 * r..2 * r + 2] == [a.offset(), b.offset()], || {
                format!(
                    "rank {r} allocated at {:?}, rank 0 at {:?}",
                    &all[2 * r..2 * r + 2],
                    [a.offset(), b.offset()]
                )
            })?;
        }
    }
    ctx.barrier()?;
    ctx.free_collective(offsets)?;
    ctx.free_collective(b)?;
    ctx.free_collective(a)?;
    ctx.free_local(junk)?;
    Ok(())
}

fn put_get(ctx: &Context) -> RankResult {
    let sizes = [1usize, 7, 8, 63, 4096, 65_537, 1 << 20];
    let max = *sizes.iter().max().unwrap();
    let inbox = ctx.alloc_collective::<u8>(max + 16)?;
    for size in sizes {
        // Unaligned destination offsets too.
        let shift = size % 9;
        let data: Vec<u8> = (0..size).map(|i| pattern(ctx.rank(), size, i)).collect();
        ctx.barrier()?;
        ctx.put(inbox.on(right(ctx)).add(shift), &data, Blocking)?;
        ctx.barrier()?;
        let mut got = vec![0u8; size];
        ctx.get(inbox.add(shift), &mut got, Blocking)?;
        let from = left(ctx);
        if let Some(i) = (0..size).find(|&i| got[i] != pattern(from, size, i)) {
            return Err(format!(
                "put of {size} bytes: byte {i} is {} not {}",
                got[i],
                pattern(from, size, i)
            )
            .into());
        }
        // Get from the neighbour what it received, byte for byte.
        let mut theirs = vec![0u8; size];
        ctx.get(inbox.on(right(ctx)).add(shift), &mut theirs, Blocking)?;
        ensure(theirs == data, || {
            format!("get of {size} bytes from rank {} differs", right(ctx))
        })?;
    }
    // Scalar forms.
    let cell = ctx.alloc_collective::<u64>(1)?;
    ctx.barrier()?;
    ctx.put(
        cell.on(right(ctx)),
        &[0xABCD_0000 + ctx.rank() as u64],
        Blocking,
    )?;
    ctx.barrier()?;
    let v = ctx.get_value(cell)?;
    ensure(v == 0xABCD_0000 + left(ctx) as u64, || {
        format!("a one-element put delivered {v:#x}")
    })?;
    ctx.barrier()?;
    ctx.free_collective(cell)?;
    ctx.free_collective(inbox)?;
    Ok(())
}

fn nonblocking(ctx: &Context) -> RankResult {
    let n = 10_000;
    let inbox = ctx.alloc_collective::<u32>(3 * n)?;
    let data: Vec<u32> = (0..n as u32)
        .map(|i| i ^ (ctx.rank() as u32) << 20)
        .collect();
    ctx.barrier()?;
    let mut h = ctx.put(inbox.on(right(ctx)), &data, Nonblocking)?;
    while !h.test()? {}
    h.wait()?;
    ctx.put(inbox.on(right(ctx)).add(n), &data, Implicit)?;
    ctx.sync_nbi()?;
    ctx.barrier()?;
    let expect: Vec<u32> = (0..n as u32)
        .map(|i| i ^ (left(ctx) as u32) << 20)
        .collect();
    let mut got = vec![0u32; n];
    ctx.get(inbox, &mut got, Nonblocking)?.wait()?;
    ensure(got == expect, || "nonblocking put/get data differs".into())?;
    // An implicit get: fetch the right neighbour's first block into our third block.
    ctx.get(
        inbox.on(right(ctx)).add(n),
        inbox.add(2 * n).span(n),
        Implicit,
    )?;
    ctx.sync_nbi()?;
    ctx.get(inbox.add(2 * n), &mut got, Blocking)?;
    ensure(got == data, || "implicit put/get data differs".into())?;
    ctx.barrier()?;
    // Several transfers in flight at once, finished out of order: two gets from the right
    // neighbour's first two blocks (both hold our `data`), then two puts into its third.
    let there = inbox.on(right(ctx));
    let (mut first, mut second) = (vec![0u32; n], vec![0u32; n / 2]);
    {
        let mut a = ctx.get(there, &mut first, Nonblocking)?;
        let b = ctx.get(there.add(n + n / 2), &mut second, Nonblocking)?;
        b.wait()?;
        while !a.test()? {}
    }
    ensure(first == data && second[..] == data[n / 2..], || {
        "gets in flight together brought the wrong data".into()
    })?;
    ctx.barrier()?;
    {
        let a = ctx.put(there.add(2 * n), &data[..n / 2], Nonblocking)?;
        let b = ctx.put(there.add(2 * n + n / 2), &data[n / 2..], Nonblocking)?;
        b.wait()?;
        a.wait()?;
    }
    ctx.barrier()?;
    ctx.get(inbox.add(2 * n), &mut got, Blocking)?;
    ensure(got == expect, || {
        "puts in flight together left the wrong data".into()
    })?;
    ctx.barrier()?;
    // Implicit transfers: four implicit puts (issued last quarter first, from a buffer reused at
    // once) and an implicit get, all completed by one sync_nbi.
    let mut quarter = vec![0u32; n / 4];
    for q in (0..4).rev() {
        for (i, x) in quarter.iter_mut().enumerate() {
            *x = !data[q * n / 4 + i];
        }
        ctx.put(there.add(2 * n + q * n / 4), &quarter, Implicit)?;
    }
    quarter.fill(0);
    ctx.get(there, inbox.add(n).span(n), Implicit)?;
    ctx.sync_nbi()?;
    ctx.barrier()?;
    ctx.get(inbox.add(2 * n), &mut got, Blocking)?;
    ensure(got.iter().zip(&expect).all(|(g, e)| *g == !*e), || {
        "implicit put quarters completed by one sync_nbi left the wrong data".into()
    })?;
    ctx.get(inbox.add(n), &mut got, Blocking)?;
    ensure(got == data, || {
        "an implicit get beside implicit puts brought the wrong data".into()
    })?;
    ctx.barrier()?;
    ctx.free_collective(inbox)?;
    Ok(())
}

fn strided(ctx: &Context) -> RankResult {
    // A 3×4×5 box from a 6×7×8 local array into a 5×9×11 remote one (non-unit inner stride
    // on the remote side for one transfer, unit for the other).
    let (lx, ly, lz) = (6usize, 7usize, 8usize);
    let (rx, ry, rz) = (5usize, 9usize, 11usize);
    let counts = [3, 4, 5];
    let local: Vec<i64> = (0..lx * ly * lz)
        .map(|i| (i as i64) * 10 + ctx.rank() as i64)
        .collect();
    let remote = ctx.alloc_collective::<i64>(rx * ry * rz * 2)?;
    let zeros = vec![0i64; rx * ry * rz * 2];
    ctx.put(remote, &zeros, Blocking)?;
    ctx.barrier()?;
    let src_off = lz * ly + 2 * lz + 1; // start at (1, 2, 1)
    let dst = remote.on(right(ctx)).add(2 * rz * ry + rz + 3); // at (2, 1, 3)
    ctx.put(
        dst,
        Strided {
            local: &local[src_off..],
            local_strides: &[lz * ly, lz, 1],
            remote_strides: &[rz * ry, rz, 1],
            counts: &counts,
        },
        Blocking,
    )?;
    ctx.barrier()?;
    // What a rank's box at (2, 1, 3) holds once `writer` put its local array there.
    let check_box = |got: &[i64], writer: usize, what: &str| -> RankResult {
        for x in 0..rx {
            for y in 0..ry {
                for z in 0..rz {
                    let inside = (2..5).contains(&x) && (1..5).contains(&y) && (3..8).contains(&z);
                    let want = if inside {
                        let (sx, sy, sz) = (x - 2 + 1, y - 1 + 2, z - 3 + 1);
                        ((sx * ly * lz + sy * lz + sz) as i64) * 10 + writer as i64
                    } else {
                        0
                    };
                    let have = got[x * ry * rz + y * rz + z];
                    ensure(have == want, || {
                        format!("strided {what}: ({x},{y},{z}) is {have}, want {want}")
                    })?;
                }
            }
        }
        Ok(())
    };
    let mut got = vec![0i64; rx * ry * rz];
    ctx.get(remote, &mut got, Blocking)?;
    check_box(&got, left(ctx), "put")?;
    // Get it back with a transposing (non-unit) local stride and compare element-wise.
    let mut back = vec![0i64; 3 * 4 * 5];
    ctx.get(
        dst,
        StridedMut {
            local: &mut back,
            local_strides: &[1, 3, 12],
            remote_strides: &[rz * ry, rz, 1],
            counts: &counts,
        },
        Blocking,
    )?;
    for x in 0..3 {
        for y in 0..4 {
            for z in 0..5 {
                let want = local[src_off + x * ly * lz + y * lz + z];
                let have = back[x + 3 * y + 12 * z];
                ensure(have == want, || {
                    format!("strided get: ({x},{y},{z}) is {have}, want {want}")
                })?;
            }
        }
    }
    // Third-party copy: the box on the right neighbour (written by us) goes into the left
    // neighbour's second half, so our own second half receives our right neighbour's data.
    let half = rx * ry * rz;
    let box_at = 2 * rz * ry + rz + 3;
    ctx.barrier()?;
    ctx.copy_strided(
        remote.on(left(ctx)).add(half + box_at),
        &[rz * ry, rz, 1],
        remote.on(right(ctx)).add(box_at),
        &[rz * ry, rz, 1],
        &counts,
    )?;
    ctx.barrier()?;
    ctx.get(remote.add(half), &mut got, Blocking)?;
    check_box(&got, right(ctx), "copy")?;
    ctx.barrier()?;
    ctx.free_collective(remote)?;
    Ok(())
}

fn indexed(ctx: &Context) -> RankResult {
    let run = 3;
    let offsets = [40usize, 0, 17, 90, 5];
    let src: Vec<u16> = (0..offsets.len() * run)
        .map(|i| (i as u16) * 7 + ctx.rank() as u16)
        .collect();
    let remote = ctx.alloc_collective::<u16>(100)?;
    ctx.put(remote, &[0u16; 100], Blocking)?;
    ctx.barrier()?;
    ctx.put(
        remote.on(right(ctx)),
        Indexed {
            local: &src,
            remote_offsets: &offsets,
            run,
        },
        Blocking,
    )?;
    ctx.barrier()?;
    let mut all = [0u16; 100];
    ctx.get(remote, &mut all, Blocking)?;
    let mut want = [0u16; 100];
    for (k, &off) in offsets.iter().enumerate() {
        for j in 0..run {
            want[off + j] = ((k * run + j) as u16) * 7 + left(ctx) as u16;
        }
    }
    ensure(all == want, || format!("indexed put delivered {all:?}"))?;
    let mut back = vec![0u16; offsets.len() * run];
    ctx.get(
        remote.on(right(ctx)),
        IndexedMut {
            local: &mut back,
            remote_offsets: &offsets,
            run,
        },
        Blocking,
    )?;
    ensure(back == src, || "indexed get differs".into())?;
    ctx.barrier()?;
    ctx.free_collective(remote)?;
    Ok(())
}

fn atomics(ctx: &Context) -> RankResult {
    let per_rank = 2000u64;
    let p = ctx.ranks() as u64;
    let words = ctx.alloc_collective::<u64>(5)?;
    let signed = ctx.alloc_collective::<i32>(2)?;
    if ctx.rank() == 0 {
        ctx.put(words, &[0, u64::MAX, 0, 0, 0], Blocking)?;
        ctx.put(signed, &[0, 0], Blocking)?;
    }
    ctx.barrier()?;
    let target = words.on(0);
    let me = ctx.rank() as u64;
    for i in 0..per_rank {
        ctx.atomic_apply(target, AtomicOp::Add(1))?;
        ctx.atomic_apply(target.add(1), AtomicOp::Min(me * 1000 + i))?;
        ctx.atomic_apply(target.add(2), AtomicOp::Max(me * 1000 + i))?;
        ctx.atomic_apply(target.add(3), AtomicOp::Xor(1 << (me % 64)))?;
        ctx.atomic_fetch(signed.on(0), AtomicOp::Sub(3))?;
    }
    // Compare-swap as a ticket counter: every rank claims distinct tickets.
    let mut mine = Vec::new();
    while mine.len() < 50 {
        let cur = ctx.atomic_load(target.add(4))?;
        if ctx.atomic_compare_swap(target.add(4), cur, cur + 1)? == cur {
            mine.push(cur);
        }
    }
    ctx.atomic_apply(signed.on(0).add(1), AtomicOp::Or(1 << ctx.rank().min(30)))?;
    ctx.barrier()?;
    let got = [
        ctx.atomic_load(target)?,
        ctx.atomic_load(target.add(1))?,
        ctx.atomic_load(target.add(2))?,
        ctx.atomic_load(target.add(3))?,
        ctx.atomic_load(target.add(4))?,
    ];
    let xor = (0..p).fold(0u64, |acc, r| {
        if per_rank % 2 == 1 {
            acc ^ (1 << (r % 64))
        } else {
            acc
        }
    });
    let want = [p * per_rank, 0, (p - 1) * 1000 + per_rank - 1, xor, 50 * p];
    ensure(got == want, || {
        format!("atomics ended at {got:?}, expected {want:?}")
    })?;
    let s = ctx.atomic_load(signed.on(0))?;
    ensure(s == -3 * (p * per_rank) as i32, || {
        format!("signed fetch-sub ended at {s}")
    })?;
    let bits = ctx.atomic_load(signed.on(0).add(1))?;
    let want_bits = (0..ctx.ranks()).fold(0i32, |acc, r| acc | 1 << r.min(30));
    ensure(bits == want_bits, || format!("fetch-or ended at {bits:#b}"))?;
    // Swap returns the old value.
    ctx.barrier()?;
    if ctx.rank() == 0 {
        let old = ctx.atomic_fetch(target, AtomicOp::Swap(7))?;
        ensure(old == p * per_rank, || {
            "swap returned the wrong old value".into()
        })?;
        ctx.atomic_store(target, 9)?;
        ensure(ctx.atomic_load(target)? == 9, || "store/load".into())?;
    }
    ctx.barrier()?;
    ctx.free_collective(signed)?;
    ctx.free_collective(words)?;
    Ok(())
}

fn signalling_put(ctx: &Context) -> RankResult {
    let n = 512;
    let rounds = 20u64;
    let inbox = ctx.alloc_collective::<u64>(n * rounds as usize)?;
    let arrived = ctx.semaphore_collective()?;
    for round in 0..rounds {
        let data: Vec<u64> = (0..n as u64)
            .map(|i| i + 1000 * round + 1_000_000 * ctx.rank() as u64)
            .collect();
        ctx.put(
            inbox.on(right(ctx)).add(round as usize * n),
            &data,
            Signal::Post(arrived.on(right(ctx))),
        )?;
    }
    // One wait for all rounds: the data of every signal must be visible.
    arrived.wait(ctx, rounds)?;
    let mut got = vec![0u64; n * rounds as usize];
    ctx.get(inbox, &mut got, Blocking)?;
    for round in 0..rounds {
        for i in 0..n as u64 {
            let want = i + 1000 * round + 1_000_000 * left(ctx) as u64;
            let have = got[round as usize * n + i as usize];
            ensure(have == want, || {
                format!("signalling put round {round}: element {i} is {have}, want {want}")
            })?;
        }
    }
    ensure(!arrived.try_wait(ctx, 1)?, || {
        "semaphore holds more posts than were sent".into()
    })?;
    // Only the owner may wait.
    if ctx.ranks() > 1 {
        ensure(arrived.on(right(ctx)).wait(ctx, 1).is_err(), || {
            "waiting on a peer's semaphore was allowed".into()
        })?;
    }
    // A signalling put to the right posts the neighbour's semaphore after its data.
    ctx.barrier()?;
    ctx.put(
        inbox.on(right(ctx)),
        &[42u64],
        Signal::Post(arrived.on(right(ctx))),
    )?;
    arrived.wait(ctx, 1)?;
    ensure(ctx.get_value(inbox)? == 42, || {
        "a semaphore-signalled put's data was missing when its post was seen".into()
    })?;
    ctx.barrier()?;
    // A barrier orders signals: every post and signalling put issued before it has been
    // applied when it completes, so the owner finds them without waiting.
    let p = ctx.ranks() as u64;
    for peer in 0..ctx.ranks() {
        ctx.put(
            inbox.on(peer).add(ctx.rank()),
            &[7 + ctx.rank() as u64],
            Signal::Post(arrived.on(peer)),
        )?;
        arrived.on(peer).post(ctx, 2)?;
    }
    ctx.barrier()?;
    ensure(arrived.try_wait(ctx, 3 * p)?, || {
        format!(
            "after a barrier, {} of the {} posts sent before it have arrived",
            arrived.value(ctx).unwrap_or(0),
            3 * p
        )
    })?;
    let mut got = vec![0u64; ctx.ranks()];
    ctx.get(inbox, &mut got, Blocking)?;
    for (peer, &have) in got.iter().enumerate() {
        ensure(have == 7 + peer as u64, || {
            format!("signalling put from rank {peer} before a barrier: found {have}")
        })?;
    }
    ctx.barrier()?;
    Ok(())
}

fn active_messages(ctx: &Context) -> RankResult {
    let sum = Rc::new(Cell::new(0u64));
    let replies = Rc::new(Cell::new(0u64));
    let payloads = Rc::new(RefCell::new(Vec::<Vec<u8>>::new()));
    let (s, p) = (sum.clone(), payloads.clone());
    let reply_id = crate::AmHandlerId::of("conformance.reply");
    let add = ctx.am_register("conformance.add", move |ctx, msg| {
        s.set(s.get() + msg.args().iter().sum::<u64>());
        if !msg.payload().is_empty() {
            p.borrow_mut().push(msg.payload().to_vec());
        }
        ctx.am_reply_short(msg, reply_id, &[msg.args().len() as u64])?;
        // A second reply is refused.
        match ctx.am_reply_short(msg, reply_id, &[0]) {
            Err(Error::Core(CoreError::BadReply(_))) => Ok(()),
            other => Err(CoreError::Internal(format!("second reply gave {other:?}")).into()),
        }
    })?;
    let r = replies.clone();
    ctx.am_register("conformance.reply", move |_, msg| {
        ensure(msg.args().len() == 1 && !msg.is_request(), || {
            "malformed reply".into()
        })
        .map_err(|e| crate::Error::from(CoreError::Internal(e.to_string())))?;
        r.set(r.get() + 1);
        Ok(())
    })?;
    let landing = ctx.alloc_collective::<u8>(10_000)?;
    ctx.barrier()?;
    let to = right(ctx);
    ctx.am_request_short(to, add, &[1, 2, 3])?;
    let medium: Vec<u8> = (0..ctx.am_max_medium(1).min(3000))
        .map(|i| pattern(ctx.rank(), 1, i))
        .collect();
    ctx.am_request_medium(to, add, &[10], &medium)?;
    let long: Vec<u8> = (0..10_000).map(|i| pattern(ctx.rank(), 2, i)).collect();
    ctx.am_request_long(landing.on(to), add, &[100], &long)?;
    // Wait for our three replies.
    ctx.wait_until(
        "active-message replies",
        || Ok(replies.get() >= 3),
        || format!("{} of 3 replies", replies.get()),
    )?;
    ctx.barrier()?;
    ensure(sum.get() == 116, || {
        format!("handlers summed {} not 116", sum.get())
    })?;
    let got = payloads.borrow();
    let from = left(ctx);
    let want_medium: Vec<u8> = (0..medium.len()).map(|i| pattern(from, 1, i)).collect();
    let want_long: Vec<u8> = (0..10_000).map(|i| pattern(from, 2, i)).collect();
    ensure(
        got.len() == 2 && got[0] == want_medium && got[1] == want_long,
        || "payloads differ".into(),
    )?;
    // Too-large medium payloads and unknown ranks are errors.
    let big = vec![0u8; ctx.am_max_medium(0) + 1];
    ensure(ctx.am_request_medium(to, add, &[], &big).is_err(), || {
        "oversized medium accepted".into()
    })?;
    ensure(ctx.am_request_short(ctx.ranks(), add, &[]).is_err(), || {
        "request to a missing rank accepted".into()
    })?;
    // A barrier completes the messages sent before it: requests to every peer, no wait for
    // their replies, then a barrier; every handler and every reply has run after it. (The
    // counts are read before the barrier that opens the round: a peer that leaves it first
    // may send while this rank still waits in it.)
    let (before_sum, before_replies) = (sum.get(), replies.get());
    ctx.barrier()?;
    ctx.free_collective(landing)?;
    const EACH: u64 = 200;
    for _ in 0..EACH {
        for peer in (0..ctx.ranks()).filter(|&p| p != ctx.rank()) {
            ctx.am_request_short(peer, add, &[1])?;
        }
    }
    ctx.barrier()?;
    let others = ctx.ranks() as u64 - 1;
    ensure(
        sum.get() - before_sum == EACH * others && replies.get() - before_replies == EACH * others,
        || {
            format!(
                "after the barrier {} of {} requests were handled here and {} replies came back",
                sum.get() - before_sum,
                EACH * others,
                replies.get() - before_replies
            )
        },
    )?;
    ctx.barrier()?;
    Ok(())
}

fn cube(ctx: &Context, x: i64) -> (usize, i64) {
    (ctx.rank(), x * x * x)
}

fn greeting(_ctx: &Context, name: String) -> String {
    format!("hello, {name}")
}

fn rpc(ctx: &Context) -> RankResult {
    let mut handles = Vec::new();
    for peer in 0..ctx.ranks() {
        handles.push((peer, ctx.rpc(peer, cube, peer as i64 + 2)?));
    }
    for (peer, h) in handles {
        let (ran_on, value) = h.wait()?;
        ensure(ran_on == peer && value == (peer as i64 + 2).pow(3), || {
            format!("rpc on {peer} gave {ran_on}, {value}")
        })?;
    }
    let s = ctx
        .rpc(right(ctx), greeting, format!("rank {}", ctx.rank()))?
        .wait()?;
    ensure(s == format!("hello, rank {}", ctx.rank()), || {
        format!("rpc returned {s:?}")
    })?;
    ctx.barrier()?;
    Ok(())
}

fn barriers(ctx: &Context) -> RankResult {
    // Nothing passes a barrier before everyone arrived: each rank bumps a counter on rank 0
    // and after the barrier everyone must see all bumps, many times over.
    let counter = ctx.alloc_collective::<u64>(1)?;
    if ctx.rank() == 0 {
        ctx.atomic_store(counter, 0)?;
    }
    ctx.barrier()?;
    for round in 1..=50u64 {
        ctx.atomic_apply(counter.on(0), AtomicOp::Add(1))?;
        if round % 2 == 0 {
            ctx.barrier()?;
        } else {
            ctx.barrier_notify()?;
            let _busy: u64 = (0..1000u64).map(|i| i * i).sum();
            while !ctx.barrier_try()? {}
        }
        let seen = ctx.atomic_load(counter.on(0))?;
        ensure(seen >= round * ctx.ranks() as u64, || {
            format!("after barrier {round} saw {seen} arrivals")
        })?;
        ctx.barrier()?;
    }
    // Matching labels pass; mismatched labels fail on every rank with the ranks named.
    ctx.barrier_labeled(7)?;
    if ctx.ranks() > 1 {
        let label = if ctx.rank() == ctx.ranks() - 1 { 8 } else { 7 };
        match ctx.barrier_labeled(label) {
            Err(Error::Core(CoreError::BarrierMismatch(msg))) => {
                ensure(msg.contains("label 8") && msg.contains("label 7"), || {
                    format!("mismatch report: {msg}")
                })?
            }
            other => return Err(format!("mismatched labels gave {other:?}").into()),
        }
    }
    // Anonymous barriers match labelled ones.
    if ctx.rank() == 0 {
        ctx.barrier_labeled(3)?;
    } else {
        ctx.barrier()?;
    }
    ensure(ctx.barrier_wait().is_err(), || {
        "barrier_wait without notify accepted".into()
    })?;
    ctx.barrier()?;
    Ok(())
}

fn lock(ctx: &Context) -> RankResult {
    let lock = ctx.lock_collective()?;
    let shared = ctx.alloc_collective::<u64>(1)?;
    if ctx.rank() == 0 {
        ctx.put(shared, &[0], Blocking)?;
    }
    ctx.barrier()?;
    let rounds = 200;
    for _ in 0..rounds {
        lock.lock(ctx)?;
        // A non-atomic read-modify-write: correct only under mutual exclusion.
        let v = ctx.get_value(shared.on(0))?;
        ctx.put(shared.on(0), &[v + 1], Blocking)?;
        lock.unlock(ctx)?;
    }
    ensure(lock.unlock(ctx).is_err(), || {
        "unlock of a lock not held succeeded".into()
    })?;
    ctx.barrier()?;
    let total = ctx.get_value(shared.on(0))?;
    ensure(total == rounds * ctx.ranks() as u64, || {
        format!("lock-protected counter is {total}")
    })?;
    ctx.barrier()?;
    Ok(())
}

fn bad_input(ctx: &Context) -> RankResult {
    let p = ctx.alloc_collective::<u64>(4)?;
    let expect = |r: crate::Result<()>, what: &str, check: fn(&CoreError) -> bool| -> RankResult {
        match r {
            Err(Error::Core(e)) if check(&e) => Ok(()),
            other => Err(format!("{what}: expected an error, got {other:?}").into()),
        }
    };
    expect(
        ctx.put(p.on(ctx.ranks()), &[1], Blocking),
        "put to a missing rank",
        |e| matches!(e, CoreError::NoSuchRank { .. }),
    )?;
    let past_end = GlobalPtr::<u64>::new(0, ctx.segment_len() as u64 - 8);
    expect(
        ctx.put(past_end, &[1, 2], Blocking),
        "put past the segment",
        |e| matches!(e, CoreError::OutOfSegment { .. }),
    )?;
    expect(
        ctx.get(
            GlobalPtr::<u8>::new(0, u64::MAX - 2),
            &mut [0u8; 8],
            Blocking,
        ),
        "get with offset overflow",
        |e| matches!(e, CoreError::OutOfSegment { .. }),
    )?;
    expect(
        ctx.atomic_apply(p.cast::<u8>().add(4).cast::<u64>(), AtomicOp::Add(1)),
        "misaligned atomic",
        |e| matches!(e, CoreError::Misaligned { .. }),
    )?;
    expect(
        ctx.alloc_local::<u8>(ctx.segment_len() + 1).map(|_| ()),
        "oversized allocation",
        |e| matches!(e, CoreError::SegmentExhausted { .. }),
    )?;
    expect(ctx.free_local(p.add(1)), "bad free", |e| {
        matches!(e, CoreError::BadFree { .. })
    })?;
    expect(
        ctx.put(
            p,
            Strided {
                local: &[0u64; 4],
                local_strides: &[1, 1],
                remote_strides: &[1],
                counts: &[2, 2],
            },
            Blocking,
        ),
        "strided rank mismatch",
        |e| {
            matches!(
                e,
                CoreError::BadArgument {
                    argument: "strides",
                    ..
                }
            )
        },
    )?;
    expect(
        ctx.put(
            p,
            Indexed {
                local: &[0u64; 3],
                remote_offsets: &[0, 1],
                run: 2,
            },
            Blocking,
        ),
        "indexed length mismatch",
        |e| {
            matches!(
                e,
                CoreError::BadArgument {
                    argument: "local",
                    ..
                }
            )
        },
    )?;
    let err = ctx
        .alloc_local::<u8>(ctx.segment_len() * 2)
        .unwrap_err()
        .to_string();
    ensure(
        err.contains("--segment") && err.contains("TESSERA_SEGMENT"),
        || format!("exhaustion message lacks the way out: {err}"),
    )?;
    ctx.barrier()?;
    ctx.free_collective(p)?;
    Ok(())
}

/// Every collective with every algorithm on the world team, at a small and a multi-chunk
/// size, against results computed sequentially (the full matrix of team shapes and types
/// runs in the library's tests; this checks that the model layer works on the conduit).
fn collectives(ctx: &Context) -> RankResult {
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
fn nonblocking_collectives(ctx: &Context) -> RankResult {
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
fn native_collectives(ctx: &Context) -> RankResult {
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

/// A deterministic stream every rank draws identically (SplitMix64), so that all ranks
/// agree on random test parameters without communicating.
struct Draw(u64);

impl Draw {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % (hi - lo + 1) as u64) as i64
    }

    fn point(&mut self, lo: i64, hi: i64) -> Point<3> {
        Point(std::array::from_fn(|_| self.range(lo, hi)))
    }

    /// A box of 1 to 6 points a side somewhere in [−4, 9]³, strided one time in four.
    fn rect(&mut self) -> RectDomain<3> {
        let lo = self.point(-4, 4);
        let hi = lo + self.point(0, 5);
        let stride = if self.next().is_multiple_of(4) {
            self.point(1, 2)
        } else {
            Point::all(1)
        };
        RectDomain::strided(lo, hi, stride)
    }
}

/// Copies between grids of every kind on every combination of ranks: a global grid on rank
/// d from a global grid on rank s, issued by any rank i (local or remote on both sides,
/// including third-party copies), from i's local grid into a global one, and from a global
/// grid into i's local one, with translations, restrictions and strides. Every rank keeps
/// the same sequential model of all grids; the issuer checks the destination against it.
fn grid_copies(ctx: &Context) -> RankResult {
    let ranks = ctx.ranks();
    let team = Team::world(ctx)?;
    let label = |owner: usize, p: Point<3>| {
        (owner as i64 + 1) * 1_000_000 + 10_000 * p[0] + 100 * p[1] + p[2]
    };
    let mut draw = Draw(0x5eed);
    let domains: Vec<_> = (0..ranks).map(|_| draw.rect().grow(2)).collect();
    let me = ctx.rank();
    let global = GlobalGrid::from_fn(ctx, domains[me], |p| label(me, p))?;
    let refs = global.exchange(&team)?;
    // The model: every rank's global grid and every rank's local grid.
    let mut model: Vec<Grid<i64, 3>> = (0..ranks)
        .map(|r| Grid::from_fn(domains[r], |p| label(r, p)))
        .collect();
    let mut locals: Vec<Grid<i64, 3>> = (0..ranks)
        .map(|r| Grid::from_fn(domains[r].translate(Point::all(1)), |p| -label(r, p)))
        .collect();
    ctx.barrier()?;
    for round in 0..48 {
        let (issuer, d, s) = (
            draw.next() as usize % ranks,
            draw.next() as usize % ranks,
            draw.next() as usize % ranks,
        );
        let (shift, window) = (draw.point(-3, 3), draw.rect().grow(2));
        let kind = round % 4;
        let moved_here = if issuer == me {
            match kind {
                // global ← global, blocking and nonblocking
                0 => refs[d]
                    .restrict(&window)
                    .copy_from(ctx, &refs[s].translate(shift))?,
                1 => {
                    let src = refs[s].translate(shift);
                    let (n, handle) = refs[d].restrict(&window).copy_from_nb(ctx, &src)?;
                    handle.wait()?;
                    n
                }
                // global ← the issuer's local grid
                2 => refs[d]
                    .restrict(&window)
                    .copy_from(ctx, &locals[me].view().translate(shift))?,
                // the issuer's local grid ← global
                _ => locals[me]
                    .view_mut()
                    .restrict(&window)
                    .copy_from_ref(ctx, &refs[s].translate(shift))?,
            }
        } else {
            0
        };
        // Every rank applies the same copy to its model.
        let expected = match kind {
            0 | 1 => {
                let src = model[s].clone();
                model[d]
                    .view_mut()
                    .restrict(&window)
                    .copy_from(&src.view().translate(shift))
            }
            2 => {
                let src = locals[issuer].view();
                model[d]
                    .view_mut()
                    .restrict(&window)
                    .copy_from(&src.translate(shift))
            }
            _ => locals[issuer]
                .view_mut()
                .restrict(&window)
                .copy_from(&model[s].view().translate(shift)),
        };
        ctx.barrier()?;
        if issuer == me {
            ensure(moved_here == expected, || {
                format!("grid copy round {round}: moved {moved_here} elements, want {expected}")
            })?;
            let (checked, want) = if kind == 3 {
                (locals[me].clone(), &locals[me])
            } else {
                let mut back = Grid::filled(domains[d], 0i64);
                back.view_mut().copy_from_ref(ctx, &refs[d])?;
                (back, &model[d])
            };
            ensure(&checked == want, || {
                let bad = want
                    .domain()
                    .iter()
                    .find(|&p| checked[p] != want[p])
                    .unwrap();
                format!(
                    "grid copy round {round} (kind {kind}, rank {d} from {s}, shift {shift}): at {bad} have {}, want {}",
                    checked[bad], want[bad]
                )
            })?;
        }
        ctx.barrier()?;
    }
    Ok(())
}

/// Ghost exchange with every strategy on a periodic 3-D grid with uneven blocks: every
/// ghost cell holds the value of the point it wraps to, and a 27-point stencil over each
/// block equals the serial periodic stencil. Run twice per grid (the second exchange must
/// not mix with the first).
fn ghost_exchange(ctx: &Context) -> RankResult {
    let ranks = ctx.ranks();
    let whole = RectDomain::new(Point([-3, 2, 0]), Point([8, 9, 6]));
    let extent = Point(whole.shape().map(|n| n as i64));
    let wrap = |p: Point<3>| {
        Point(std::array::from_fn(|d| {
            whole.lo()[d] + (p[d] - whole.lo()[d]).rem_euclid(extent[d])
        }))
    };
    let value = |p: Point<3>, epoch: i64| {
        (p[0] * 7919 + p[1] * 104_729 + p[2] * 13 + epoch * 1_000_003) % 65_521
    };
    // Process grids: all ranks along each dimension in turn, and a balanced one.
    let mut shapes = vec![[ranks, 1, 1], [1, ranks, 1], [1, 1, ranks]];
    let balanced = {
        let mut p = [1usize; 3];
        let mut left = ranks;
        let mut d = 0;
        while left.is_multiple_of(2) {
            p[d] *= 2;
            left /= 2;
            d = (d + 1) % 3;
        }
        p[d] *= left;
        p
    };
    shapes.push(balanced);
    for procs in shapes {
        if (0..3).any(|d| whole.extent(d) < 2 * procs[d]) {
            continue;
        }
        for strategy in HaloStrategy::ALL {
            for width in [1i64, 2] {
                if (0..3).any(|d| whole.extent(d) < width as usize * procs[d]) {
                    continue;
                }
                let mut grid = HaloGrid::<i64, 3>::new(ctx, whole, procs, width, strategy)?;
                let interior = grid.interior();
                for epoch in 0..2 {
                    grid.view_mut()
                        .restrict(&interior)
                        .foreach_mut(|p, e| *e = value(p, epoch));
                    grid.exchange()?;
                    let view = grid.view();
                    let mut bad = None;
                    view.foreach(|p, &e| {
                        if bad.is_none() && e != value(wrap(p), epoch) {
                            bad = Some((p, e));
                        }
                    });
                    ensure(bad.is_none(), || {
                        let (p, e) = bad.unwrap();
                        format!(
                            "{strategy} exchange over {procs:?}, width {width}, epoch {epoch}: ghost {p} holds {e}, want {} (the value at {})",
                            value(wrap(p), epoch),
                            wrap(p)
                        )
                    })?;
                    let around = RectDomain::new(Point::all(-1), Point::all(1));
                    for p in interior.iter() {
                        let ours: i64 = around.iter().map(|o| view[p + o]).sum();
                        let serial: i64 = around.iter().map(|o| value(wrap(p + o), epoch)).sum();
                        ensure(ours == serial, || {
                            format!("{strategy} exchange over {procs:?}: stencil at {p} is {ours}, serial {serial}")
                        })?;
                    }
                }
                ctx.barrier()?;
            }
        }
    }
    Ok(())
}

/// Shared arrays in every distribution: owner-computes writes through `forall`, element and
/// range reads and writes against the values written, the local slice in local order, and
/// a view with another block size reading the same storage.
fn shared_arrays(ctx: &Context) -> RankResult {
    let (me, ranks) = (ctx.rank(), ctx.ranks());
    let team = Team::world(ctx)?;
    // Odd, so that last blocks are short; at least three elements per rank, so that every
    // rank owns some in every distribution and a view in pairs fits the cyclic storage.
    let len = 37 + 2 * ranks;
    let value = |i: usize, epoch: u64| epoch * 1000 + i as u64 * 7 + 1;
    for d in [
        Distribution::Cyclic,
        Distribution::BlockCyclic(3),
        Distribution::Blocked,
        Distribution::Indefinite,
    ] {
        let a = SharedArray::<u64>::alloc(ctx, len, d)?;
        let mut mine = 0u64;
        a.forall(ctx, 0..len, Affinity::Element, |i| {
            ensure(a.owner(i) == me, || {
                format!(
                    "{d:?}: forall ran element {i} on rank {me}, owner {}",
                    a.owner(i)
                )
            })
            .map_err(|e| crate::Error::from(CoreError::Internal(e.to_string())))?;
            mine += 1;
            a.put(ctx, i, value(i, 0))
        })?;
        let total = team.allreduce_value(mine, Op::Sum)?;
        ensure(total == len as u64, || {
            format!("{d:?}: forall ran {total} iterations for {len} elements")
        })?;
        let mut by_index = 0;
        a.forall(ctx, 3..len, Affinity::Index, |i| {
            ensure(i % ranks == me, || {
                format!("{d:?}: index forall ran {i} on rank {me}")
            })
            .map_err(|e| crate::Error::from(CoreError::Internal(e.to_string())))?;
            by_index += 1;
            Ok(())
        })?;
        let total = team.allreduce_value(by_index, Op::Sum)?;
        ensure(total == len - 3, || {
            format!("{d:?}: index forall ran {total} iterations")
        })?;
        ctx.barrier()?;
        // Ranges starting and ending anywhere.
        let mut draw = Draw(me as u64 + 11);
        for _ in 0..20 {
            let s = draw.range(0, len as i64) as usize;
            let e = draw.range(s as i64, len as i64) as usize;
            let mut got = vec![0u64; e - s];
            a.get_range(ctx, s, &mut got)?;
            let want: Vec<u64> = (s..e).map(|i| value(i, 0)).collect();
            ensure(got == want, || {
                format!("{d:?}: get_range {s}..{e} gave {got:?}, want {want:?}")
            })?;
        }
        // SAFETY: every write to the array happened before the barrier above; the next
        // writes come after the barrier below, once this slice is gone.
        let local = unsafe { a.local(ctx)? }.to_vec();
        let owned: Vec<u64> = (0..len)
            .filter(|&i| a.owner(i) == me)
            .map(|i| value(i, 0))
            .collect();
        ensure(local == owned, || {
            format!("{d:?}: local slice {local:?}, want {owned:?}")
        })?;
        // Another block size over the same storage reads what is stored where it points.
        if d == Distribution::Cyclic {
            // The longest pairs-of-elements view that fits what every rank reserved.
            let v = (1..=len)
                .rev()
                .find_map(|n| a.with_distribution(n, Distribution::BlockCyclic(2)).ok())
                .ok_or("no BlockCyclic(2) view fits")?;
            for j in 0..v.len() {
                let i = (0..len).find(|&i| a.address(i).ok() == v.address(j).ok());
                if let Some(i) = i {
                    let got = v.get(ctx, j)?;
                    ensure(got == value(i, 0), || {
                        format!("recast element {j} (= cyclic {i}) is {got}")
                    })?;
                }
            }
        }
        ctx.barrier()?;
        // Each rank overwrites its own share of the index range.
        let (s, e) = (me * len / ranks, (me + 1) * len / ranks);
        let fresh: Vec<u64> = (s..e).map(|i| value(i, 1)).collect();
        a.put_range(ctx, s, &fresh)?;
        ctx.barrier()?;
        let mut all = vec![0u64; len];
        a.get_range(ctx, 0, &mut all)?;
        for (i, &got) in all.iter().enumerate() {
            ensure(got == value(i, 1), || {
                format!(
                    "{d:?}: after put_range element {i} is {got}, want {}",
                    value(i, 1)
                )
            })?;
            if i % 5 == me % 5 {
                let one = a.get(ctx, i)?;
                ensure(one == got, || {
                    format!("{d:?}: get({i}) is {one}, get_range said {got}")
                })?;
            }
        }
        ctx.barrier()?;
        a.free(ctx)?;
    }
    Ok(())
}
