//! MG with a chosen gathering threshold, to measure whether gathering more coarse levels
//! pays (docs/PERFORMANCE.md):
//!
//! ```sh
//! cargo build --release --examples
//! target/release/tessera run -n 8 -- target/release/examples/mg_gather A 4
//! ```
//!
//! Arguments: the class (S, W, A, B) and the threshold (`mg::GATHER_BELOW` if absent).

use tessera_npb::{mg, Class};

fn main() {
    let mut args = std::env::args().skip(1);
    let class: Class = match args.next().unwrap_or_else(|| "S".into()).parse() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("mg_gather: {e}");
            std::process::exit(2);
        }
    };
    let gather_below = match args.next().map(|g| g.parse::<usize>()) {
        None => mg::GATHER_BELOW,
        Some(Ok(g)) => g,
        Some(Err(e)) => {
            eprintln!("mg_gather: the threshold must be a number of points: {e}");
            std::process::exit(2);
        }
    };
    tessera::spmd(|ctx| {
        if let Some(o) = mg::run_gathering(
            ctx,
            class,
            tessera_npb::mg::Variant::TwentySix,
            gather_below,
        )? {
            println!(
                "MG {class} on {} ranks, gathering below {gather_below}: {:.3} s, verified {:?}",
                o.ranks, o.time_s, o.verified
            );
            if o.verified != Some(true) {
                return Err("verification failed".into());
            }
        }
        Ok(())
    });
}
