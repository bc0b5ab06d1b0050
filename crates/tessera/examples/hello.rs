//! Hello, PGAS: every rank writes a greeting into its right neighbour's segment, then
//! reads what its left neighbour wrote.
//!
//! ```text
//! cargo build --release --examples
//! cargo run --release -- run -n 4 -- target/release/examples/hello
//! ```

use tessera::Blocking;
fn main() {
    tessera::spmd(|ctx| {
        let me = ctx.rank();
        let right = (me + 1) % ctx.ranks();
        // One 64-byte mailbox per rank, at the same offset everywhere.
        let mailbox = ctx.alloc_collective::<u8>(64)?;
        let text = format!("greetings from rank {me}");
        let mut bytes = [0u8; 64];
        bytes[..text.len()].copy_from_slice(text.as_bytes());
        ctx.barrier()?;
        ctx.put(mailbox.on(right), &bytes, Blocking)?;
        ctx.barrier()?;
        let mut got = [0u8; 64];
        ctx.get(mailbox, &mut got, Blocking)?;
        let end = got.iter().position(|&b| b == 0).unwrap_or(64);
        println!(
            "rank {me} of {} ({} conduit): my mailbox says \"{}\"",
            ctx.ranks(),
            ctx.conduit_kind(),
            String::from_utf8_lossy(&got[..end])
        );
        Ok(())
    });
}
