//! What a job of many ranks costs each rank in kernel page tables: every rank greets its
//! right neighbour (as `hello` does), then reads its own `VmPTE` from `/proc/self/status`
//! and puts it into rank 0's table; rank 0 prints the largest and the mean. A rank maps
//! every peer's segment but touches only those it talks to, so the figure stays flat as
//! the job grows (`docs/DESIGN.md`, "Many ranks on a node"). Linux only.
//!
//! ```text
//! cargo build --release --examples
//! cargo run --release -- run -n 1024 -- target/release/examples/page_tables
//! ```

use tessera::Blocking;
/// This process's page tables in KiB (`VmPTE`), or 0 where the kernel does not say.
fn page_tables_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("VmPTE:"))
                .and_then(|value| value.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
}

fn main() {
    tessera::spmd(|ctx| {
        let (me, ranks) = (ctx.rank(), ctx.ranks());
        let greeting = ctx.alloc_collective::<u64>(1)?;
        let table = ctx.alloc_collective::<u64>(ranks)?;
        ctx.barrier()?;
        ctx.put(greeting.on((me + 1) % ranks), &[me as u64], Blocking)?;
        ctx.barrier()?;
        let left = (me + ranks - 1) % ranks;
        if ctx.get_value(greeting)? != left as u64 {
            return Err(format!("rank {me} did not hear from rank {left}").into());
        }
        ctx.put(table.on(0).add(me), &[page_tables_kib()], Blocking)?;
        ctx.barrier()?;
        if me == 0 {
            let mut all = vec![0u64; ranks];
            ctx.get(table, &mut all, Blocking)?;
            let largest = all.iter().max().copied().unwrap_or(0);
            let mean = all.iter().sum::<u64>() as f64 / ranks as f64;
            println!(
                "{ranks} ranks: page tables per rank {largest} KiB at most, {mean:.0} KiB on average"
            );
        }
        Ok(())
    });
}
