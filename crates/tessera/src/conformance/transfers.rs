//! The conformance cases of the core: transfers, atomics, signals, active messages, remote calls, barriers, locks and bad input.
//!
//! This module must never special-case a conduit: what it checks is the contract.

use super::*;

pub(super) fn put_get(ctx: &Context) -> RankResult {
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

pub(super) fn nonblocking(ctx: &Context) -> RankResult {
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

pub(super) fn strided(ctx: &Context) -> RankResult {
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

pub(super) fn indexed(ctx: &Context) -> RankResult {
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

pub(super) fn atomics(ctx: &Context) -> RankResult {
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

pub(super) fn signalling_put(ctx: &Context) -> RankResult {
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

pub(super) fn active_messages(ctx: &Context) -> RankResult {
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

pub(super) fn rpc(ctx: &Context) -> RankResult {
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

pub(super) fn barriers(ctx: &Context) -> RankResult {
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

pub(super) fn lock(ctx: &Context) -> RankResult {
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

pub(super) fn bad_input(ctx: &Context) -> RankResult {
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
