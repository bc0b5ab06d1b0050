//! A small blocking collective, once its team has made its first calls, allocates nothing
//! on the heap, at any member, even where a flat root talks to fifteen peers: the
//! messages of one call are kept on the stack (`Channel::transfer_each`), so a call's
//! cost does not include the allocator's. Counted by a global allocator that tallies
//! each thread's allocations (the ranks of `Job::threads` are threads).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::time::Duration;

use tessera::coll::{Allgather, Broadcast, Gather, Reduce, Scatter};
use tessera::{Algorithm, Blocking, Collective, Context, Job, Op, Team};

/// The system allocator, counting the allocations of each thread.
struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: every call goes straight to the system allocator with the same arguments; the
// count is a thread-local `Cell` with a constant initialiser, which needs no allocation.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        // SAFETY: the caller's contract is passed on unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` above with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        // SAFETY: the caller's contract is passed on unchanged.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

/// Calls of each operation counted after its warm-up.
const CALLS: u64 = 200;

/// Elements of the 256-byte blocks (the largest that go straight on the channel).
const LONGEST: usize = 32;

/// At 8 and 16 members, flat (the root's 7 or 15 peers each way), binomial and 4-nomial
/// 8-byte broadcasts and reductions, flat and binomial gathers and scatters, and the ring
/// and Bruck allgathers; and with 256-byte blocks, whose scratch reaches 4 KiB at 16
/// members, the binomial gather and scatter (a root other than member 0 rotates every
/// block through scratch) and the flat reduction (the root's partial results): after 20
/// calls of each to warm up (plans, mailbox pages), 200 more allocate nothing on any
/// member, and the last call's result is the sequential one.
#[test]
fn small_calls_allocate_nothing_after_warm_up() {
    for n in [8, 16] {
        Job::threads(n)
            .segment(16 << 20)
            .wait_timeout(Duration::from_secs(120))
            .run(|ctx: &Context| {
                let world = Team::world(ctx)?;
                let me = ctx.rank();
                let root = n - 1;
                let mut value = [0u64];
                let mut all = vec![0u64; n];
                let blocks: Vec<u64> = (0..n as u64).map(|i| 100 + i).collect();
                let mut sum = [0u64];
                for alg in [Algorithm::FLAT, Algorithm::BINOMIAL, Algorithm::knomial(4)] {
                    let bcast = world.with_algorithm(Collective::Broadcast, alg)?;
                    // Gathers and scatters have no k-nomial row: the binomial tree there.
                    let (gather, scatter) = match alg == Algorithm::knomial(4) {
                        true => (Algorithm::BINOMIAL, Algorithm::BINOMIAL),
                        false => (alg, alg),
                    };
                    let gather = world.with_algorithm(Collective::Gather, gather)?;
                    let scatter = world.with_algorithm(Collective::Scatter, scatter)?;
                    let reduce = world.with_algorithm(Collective::Reduce, alg)?;
                    let mut round = |calls: u64| -> tessera::Result<u64> {
                        let before = allocations();
                        for _ in 0..calls {
                            value[0] = if me == root { 7 } else { 0 };
                            bcast.run(Broadcast::in_place(root, &mut value), Blocking)?;
                            gather.run(Gather::new(root, &value).to(&mut all), Blocking)?;
                            scatter.run(Scatter::new(root, &blocks, 1).to(&mut value), Blocking)?;
                            let mine = [me as u64];
                            reduce.run(Reduce::new(root, &mine, Op::Sum).to(&mut sum), Blocking)?;
                        }
                        Ok(allocations() - before)
                    };
                    round(20)?;
                    let made = round(CALLS)?;
                    if made != 0 {
                        return Err(format!(
                            "{n} members, {alg}: member {me} allocated {made} times in {CALLS} rounds of 8-byte calls"
                        ).into());
                    }
                    if value[0] != 100 + me as u64
                        || (me == root && (all != vec![7; n] || sum[0] != (n * (n - 1) / 2) as u64))
                    {
                        return Err(format!(
                            "{n} members, {alg}: member {me} got {value:?}, {all:?}, {sum:?}"
                        ).into());
                    }
                }
                for alg in [Algorithm::RING, Algorithm::bruck(2)] {
                    let team = world.with_algorithm(Collective::Allgather, alg)?;
                    let mine = [me as u64 * 3];
                    let mut round = |calls: u64| -> tessera::Result<u64> {
                        let before = allocations();
                        for _ in 0..calls {
                            team.run(Allgather::new(&mine).to(&mut all), Blocking)?;
                        }
                        Ok(allocations() - before)
                    };
                    round(20)?;
                    let made = round(CALLS)?;
                    let want: Vec<u64> = (0..n as u64).map(|r| r * 3).collect();
                    if made != 0 || all != want {
                        return Err(format!(
                            "{n} members, allgather {alg}: member {me} allocated {made} times, got {all:?}"
                        ).into());
                    }
                }
                let big: Vec<u64> = (0..(n * LONGEST) as u64).map(|i| 1000 + i).collect();
                let mine: Vec<u64> = (0..LONGEST as u64).map(|i| me as u64 * 64 + i).collect();
                let (mut block, mut blocks, mut sums) =
                    (vec![0u64; LONGEST], vec![0u64; n * LONGEST], vec![0u64; LONGEST]);
                let gather = world.with_algorithm(Collective::Gather, Algorithm::BINOMIAL)?;
                let scatter = world.with_algorithm(Collective::Scatter, Algorithm::BINOMIAL)?;
                let reduce = world.with_algorithm(Collective::Reduce, Algorithm::FLAT)?;
                let mut round = |calls: u64| -> tessera::Result<u64> {
                    let before = allocations();
                    for _ in 0..calls {
                        gather.run(Gather::new(root, &mine).to(&mut blocks), Blocking)?;
                        scatter.run(Scatter::new(root, &big, LONGEST).to(&mut block), Blocking)?;
                        reduce.run(Reduce::new(root, &mine, Op::Sum).to(&mut sums), Blocking)?;
                    }
                    Ok(allocations() - before)
                };
                round(20)?;
                let made = round(CALLS)?;
                let mut wrong = block != big[me * LONGEST..(me + 1) * LONGEST];
                if me == root {
                    let want: Vec<u64> = (0..n as u64)
                        .flat_map(|r| (0..LONGEST as u64).map(move |i| r * 64 + i))
                        .collect();
                    let sum = |i: usize| (0..n).map(|r| (r * 64 + i) as u64).sum::<u64>();
                    wrong |= blocks != want || (0..LONGEST).any(|i| sums[i] != sum(i));
                }
                if made != 0 || wrong {
                    return Err(format!(
                        "{n} members, 256-byte blocks: member {me} allocated {made} times, results right: {}",
                        !wrong
                    )
                    .into());
                }
                Ok(())
            })
            .unwrap();
    }
}
