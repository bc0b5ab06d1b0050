//! A rank held as a `Session` (start, use, finish), as an init/finalize library holds it;
//! with `--global-exit R S`, rank R ends the whole job with status S halfway through while
//! the others wait at a barrier. (The launcher's tests use this program.)
//!
//! ```text
//! tessera run -n 3 -- target/release/examples/session_demo
//! tessera run -n 3 -- target/release/examples/session_demo --global-exit 1 7   # exits 7
//! ```

use tessera::Blocking;
fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let exit = match args.as_slice() {
        [] => None,
        [flag, rank, status] if flag == "--global-exit" => Some((
            rank.parse::<usize>().expect("a rank"),
            status.parse::<i32>().expect("a status"),
        )),
        _ => {
            eprintln!("usage: session_demo [--global-exit RANK STATUS]");
            std::process::exit(2);
        }
    };
    let session = match tessera::Session::start() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("session_demo: {e}");
            std::process::exit(1);
        }
    };
    let ctx = session.context();
    let work = || -> tessera::Result<u64> {
        let cell = ctx.alloc_collective::<u64>(1)?;
        ctx.put(
            cell.on((ctx.rank() + 1) % ctx.ranks()),
            &[ctx.rank() as u64 + 1],
            Blocking,
        )?;
        ctx.barrier()?;
        if let Some((rank, status)) = exit {
            if rank == ctx.rank() {
                session.global_exit(status);
            }
            ctx.barrier()?; // the others wait here until the job is ended
        }
        ctx.get_value(cell)
    };
    match work() {
        Ok(v) => {
            let left = (ctx.rank() + ctx.ranks() - 1) % ctx.ranks();
            assert_eq!(v, left as u64 + 1);
            if ctx.rank() == 0 {
                println!(
                    "session_demo: {} ranks, neighbours' values arrived",
                    ctx.ranks()
                );
            }
        }
        Err(e) => {
            session.fail(&e.to_string());
            eprintln!("session_demo: {e}");
            std::process::exit(1);
        }
    }
    if let Err(e) = session.finish() {
        eprintln!("session_demo: {e}");
        std::process::exit(1);
    }
}
