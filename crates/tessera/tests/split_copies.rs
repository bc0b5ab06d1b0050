//! Long messages read directly, their copy split between the receiver and the sender
//! (`TESSERA_DIRECT_SPLIT`, `Team::set_split_copies`). A sender helps only while it waits
//! on a processor of its own (else its receiver, rightly, copies both halves), so each
//! rank's thread is pinned to a processor of its own, and this runs as a test binary of
//! its own (beside the collectives matrix's dozen multi-rank tests, a pinned rank would
//! still share its processor).

use std::time::Duration;
use tessera::coll::{Allgather, Allreduce, Broadcast, Exchange, Gather, Reduce, Scatter};
use tessera::{Blocking, Nonblocking, Op};

use tessera::{Context, Job, Team};

/// Element `i` of world rank `r`'s input in test `seed` (distinct per rank, element and
/// seed, so a byte in the wrong place shows).
fn input_u64(r: usize, i: usize, seed: u64) -> u64 {
    (seed << 48) ^ ((r as u64) << 32) ^ (i as u64).wrapping_mul(0x9E37_79B9)
}

fn fail(what: String) -> Box<dyn std::error::Error + Send + Sync> {
    what.into()
}

/// Pin this thread to the `k`-th processor it may run on; whether there was one.
fn pin_to_own_processor(k: usize) -> bool {
    use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
    use nix::unistd::Pid;
    let Ok(allowed) = sched_getaffinity(Pid::from_raw(0)) else {
        return false;
    };
    let Some(cpu) = (0..CpuSet::count())
        .filter(|&c| allowed.is_set(c).unwrap_or(false))
        .nth(k)
    else {
        return false;
    };
    let mut only = CpuSet::new();
    only.set(cpu).is_ok() && sched_setaffinity(Pid::from_raw(0), &only).is_ok()
}

/// Long messages read directly, their copy split between both ends: where the sender
/// waits for the read (its receiver comes late), it writes the second half itself and
/// counts it; where it does not split, the receiver reads both halves; a nonblocking
/// broadcast whose root computes completes on the receiver alone; in an allgather each
/// member writes its whole block into the other's buffer (a push), and a nonblocking one
/// whose member computes instead of advancing delivers every byte, whichever side ends up
/// copying it; a 2-rank reduce's one long message is split below the default threshold.
/// Every byte is checked, for broadcast, gather, scatter, exchange, allgather and reduce,
/// at sizes around the split's threshold.
#[test]
fn long_direct_reads_are_split_between_sender_and_receiver() {
    fn body(ctx: &Context) -> tessera::RankResult {
        let world = Team::world(ctx)?;
        if !world.split_copies() {
            return Err("direct reads do not work here (process_vm_readv refused?)".into());
        }
        let me = world.rank();
        // Whether every rank has a processor of its own (else the helpers' checks below are
        // skipped: a sender sharing its receiver's processor never gets to help).
        let pinned = world.run(
            Allreduce::value(u64::from(pin_to_own_processor(me)), tessera::Op::Min),
            Blocking,
        )? == 1;
        if !pinned && me == 0 {
            eprintln!("fewer processors than ranks: the checks that senders help are skipped");
        }
        let late = |who: usize| {
            if me == who {
                std::thread::sleep(Duration::from_millis(20));
            }
        };
        let block = |r: usize, len: usize, seed: u64| -> Vec<u64> {
            (0..len).map(|i| input_u64(r, i, seed)).collect()
        };
        // A broadcast from 0 of `len` elements to a late receiver, checked.
        let broadcast = |len: usize, seed: u64| -> tessera::RankResult {
            late(1);
            let mut d = if me == 0 {
                block(0, len, seed)
            } else {
                vec![0; len]
            };
            world.run(Broadcast::in_place(0, &mut d), Blocking)?;
            if d != block(0, len, seed) {
                return Err(fail(format!("broadcast of {len} elements")));
            }
            Ok(())
        };
        // Whether member `helper`, waiting for its reader, writes a half in one of the
        // rounds of up to 3 s on its clock (it must have a core when its reader posts; on a
        // loaded machine it may not for a while, and then the reader rightly copies both
        // halves: 30 rounds once passed by under another job's load). Every member learns
        // it, and every member runs the same rounds: the helper says when to stop.
        type Outcome = Result<bool, Box<dyn std::error::Error + Send + Sync>>;
        let helps = |helper: usize, round: &dyn Fn(u64) -> tessera::RankResult| -> Outcome {
            if !pinned {
                round(0)?;
                return Ok(true);
            }
            let started = std::time::Instant::now();
            for k in 0.. {
                let before = world.split_halves_written();
                round(k)?;
                let wrote = world.split_halves_written() - before;
                // 1: it wrote a half; 2: it gave up; 0: another round.
                let verdict = if wrote > 0 {
                    1
                } else if started.elapsed() > Duration::from_secs(3) {
                    2
                } else {
                    0
                };
                match world.run(Broadcast::value(helper, verdict), Blocking)? {
                    0 => continue,
                    v => return Ok(v == 1),
                }
            }
            Ok(false)
        };
        // By default only messages of 1 MiB or more are split.
        let before = world.split_halves_written();
        broadcast(1 << 15, 3)?;
        if world.split_halves_written() != before {
            return Err(fail("256 KiB split by default".into()));
        }
        if !helps(0, &|k| broadcast(1 << 18, k))? {
            return Err(fail("no 2 MiB broadcast was split by default".into()));
        }
        // A 2-rank reduce from 256 KiB goes as one message that the root combines once it
        // is all here, so it is split below the default threshold: the leaf, waiting for
        // a late root, writes a half; the root's sums are checked element by element.
        let reduce = |k: u64| -> tessera::RankResult {
            late(0);
            let len = 40_000; // 320 KB
            let mut sum = vec![0; if me == 0 { len } else { 0 }];
            world.run(
                Reduce::new(0, &block(me, len, k), Op::Sum).to(&mut sum),
                Blocking,
            )?;
            let want = |i: usize| input_u64(0, i, k).wrapping_add(input_u64(1, i, k));
            if me == 0 && (0..len).any(|i| sum[i] != want(i)) {
                return Err(fail("2-rank reduce of 320 KB".into()));
            }
            Ok(())
        };
        if !helps(1, &reduce)? {
            return Err(fail(
                "no leaf of a 320 KB 2-rank reduce wrote a half".into(),
            ));
        }
        world.set_split_copies(true);
        // 4 MiB, then lengths just over and under the threshold and odd ones.
        let lens = [1 << 19, 4097, 4095, 100_003];
        for (k, &len) in lens.iter().enumerate() {
            let seed = k as u64;
            // Broadcast from 0, the receiver late: the root waits and writes its half.
            broadcast(len, seed)?;
            // Gather to 0, the root late: member 1 waits and writes its half.
            late(0);
            let mut all = vec![0; if me == 0 { 2 * len } else { 0 }];
            world.run(Gather::new(0, &block(me, len, seed)).to(&mut all), Blocking)?;
            if me == 0 && all != [block(0, len, seed), block(1, len, seed)].concat() {
                return Err(fail(format!("gather of {len} elements")));
            }
            // Scatter from 1, and an exchange.
            late(0);
            let src = [block(1, len, seed), block(2, len, seed)].concat();
            let mut mine = vec![0; len];
            world.run(
                Scatter::new(1, if me == 1 { &src[..] } else { &[] }, mine.len()).to(&mut mine),
                Blocking,
            )?;
            if mine != src[me * len..(me + 1) * len] {
                return Err(fail(format!("scatter of {len} elements")));
            }
            let xsrc = block(10 + me, 2 * len, seed);
            let mut got = vec![0; 2 * len];
            world.run(Exchange::new(&xsrc).to(&mut got), Blocking)?;
            let want: Vec<u64> = (0..2)
                .flat_map(|r| block(10 + r, 2 * len, seed)[me * len..(me + 1) * len].to_vec())
                .collect();
            if got != want {
                return Err(fail(format!("exchange of {len} elements")));
            }
        }
        // Each member, waiting for a late reader, writes a half: the root of a broadcast,
        // and member 1 in a gather.
        if !helps(0, &|k| broadcast(1 << 19, k))? {
            return Err(fail("no root of a 4 MiB broadcast wrote a half".into()));
        }
        let gather = |k: u64| -> tessera::RankResult {
            late(0);
            let len = 1 << 19;
            let mut all = vec![0; if me == 0 { 2 * len } else { 0 }];
            world.run(Gather::new(0, &block(me, len, k)).to(&mut all), Blocking)?;
            if me == 0 && all != [block(0, len, k), block(1, len, k)].concat() {
                return Err(fail("gather of 4 MiB".into()));
            }
            Ok(())
        };
        if !helps(1, &gather)? {
            return Err(fail("no sender of a 4 MiB gather wrote a half".into()));
        }
        // A symmetric exchange: each member receives in the round it sends in, so its
        // receiver leaves it the whole copy, which it writes from its own buffer (an
        // allgather of 4 MiB blocks, every member broadcasting its own).
        let all_broadcast = world.with_algorithm(
            tessera::Collective::Allgather,
            tessera::Algorithm::ALL_BROADCAST,
        )?;
        let allgather = |k: u64| -> tessera::RankResult {
            let len = 1 << 19;
            let mut all = vec![0; 2 * len];
            all_broadcast.run(Allgather::new(&block(me, len, k)).to(&mut all), Blocking)?;
            if all != [block(0, len, k), block(1, len, k)].concat() {
                return Err(fail("allgather of 4 MiB blocks".into()));
            }
            Ok(())
        };
        for helper in [0, 1] {
            if !helps(helper, &allgather)? {
                return Err(fail(format!(
                    "member {helper} never wrote its block of a 4 MiB allgather"
                )));
            }
        }
        // An all-to-all's blocks each go to one member, so the sender does not otherwise
        // read them: they are never pushed (nor split: each member also receives), and
        // its receivers read them.
        let before = world.split_halves_written();
        let len = 1 << 19;
        let xsrc = block(20 + me, 2 * len, 5);
        let mut got = vec![0; 2 * len];
        world.run(Exchange::new(&xsrc).to(&mut got), Blocking)?;
        let want: Vec<u64> = (0..2)
            .flat_map(|r| block(20 + r, 2 * len, 5)[me * len..(me + 1) * len].to_vec())
            .collect();
        if got != want {
            return Err(fail("exchange of 4 MiB blocks".into()));
        }
        if world.split_halves_written() != before {
            return Err(fail("a member pushed a block of an all-to-all".into()));
        }
        // A member that starts a nonblocking allgather and then computes instead of
        // advancing it: its receiver, if left waiting for the push, copies the block itself
        // once its patience runs out (or the member pushed before it slept). Every byte
        // arrives either way.
        let len = 1 << 19;
        let request = all_broadcast.run(Allgather::new(&block(me, len, 11)), Nonblocking)?;
        if me == 1 {
            std::thread::sleep(Duration::from_millis(30));
        }
        if request.wait()? != [block(0, len, 11), block(1, len, 11)].concat() {
            return Err(fail("nonblocking allgather of 4 MiB blocks".into()));
        }
        // A root that does not split: its receiver reads both halves, and it writes none.
        if me == 0 {
            world.set_split_copies(false);
        }
        let before = world.split_halves_written();
        for len in [1 << 19, 5000] {
            broadcast(len, 7)?;
        }
        if me == 0 && world.split_halves_written() != before {
            return Err(fail("a root that does not split wrote a half".into()));
        }
        // A nonblocking broadcast whose root computes instead of advancing it.
        world.set_split_copies(true);
        let len = 1 << 18;
        let data = block(0, len, 9);
        let request = world.run(Broadcast::new(0, &data, len), Nonblocking)?;
        if me == 0 {
            std::thread::sleep(Duration::from_millis(30));
        }
        if request.wait()? != data {
            return Err(fail("nonblocking broadcast of 2 MiB".into()));
        }
        Ok(())
    }
    Job::threads(2)
        .segment(64 << 20)
        .wait_timeout(Duration::from_secs(60))
        .run(body)
        .unwrap_or_else(|e| panic!("{e}"));
}
