//! SUMMA dense matrix multiply, C = A·B, over the row and column teams of a process grid.
//!
//! The n×n matrices are split into blocks over a pr × pc grid of ranks. For every panel
//! of w columns of A (and the matching w rows of B), the process column that owns the A
//! panel broadcasts it along each process row, and the process row that owns the B panel
//! broadcasts it down each process column. Every rank then multiplies the two panels into
//! its C block. The result is checked against a serial multiply of the same matrices.
//!
//! The broadcasts are nonblocking and prefetch: panels k+1 are already on their way while
//! panels k are multiplied (seed 004 §6.1). Panels live in the global address space,
//! double-buffered; the single-address broadcast puts each one straight into every
//! member's buffer. A row and a column barrier before each prefetch make sure nobody
//! still multiplies from the buffer being refilled.
//!
//! ```text
//! cargo run --release -- run -n 4 -- target/release/examples/summa 240
//! ```

use tessera::coll::{Allreduce, Barrier, Broadcast};
use tessera::{Blocking, Nonblocking};
use tessera::{CollHandle, GlobalPtr, Op, SyncMode, Team};

fn a(r: usize, c: usize) -> f64 {
    ((r * 7 + c * 3) % 11) as f64 - 5.0
}

fn b(r: usize, c: usize) -> f64 {
    ((r * 5 + c * 13) % 17) as f64 * 0.25 - 2.0
}

fn gcd(x: usize, y: usize) -> usize {
    if y == 0 {
        x
    } else {
        gcd(y, x % y)
    }
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(240);
    tessera::spmd(|ctx| {
        let world = Team::world(ctx)?;
        let p = world.size();
        // The most square grid: pr is the largest divisor of p not above √p.
        let pr = (1..=p)
            .filter(|d| p % d == 0 && d * d <= p)
            .max()
            .unwrap_or(1);
        let pc = p / pr;
        if !n.is_multiple_of(pr) || !n.is_multiple_of(pc) {
            return Err(format!("n = {n} must be divisible by the {pr}×{pc} grid").into());
        }
        let (row, col) = world.grid(pr, pc)?;
        let (i, j) = (world.rank() / pc, world.rank() % pc);
        // C block: mb × nb.
        let (mb, nb) = (n / pr, n / pc);
        // A block (i, j): rows i·mb.., columns j·nb..; B block (i, j): rows i·mb.., columns j·nb..
        let a_block: Vec<f64> = (0..mb * nb)
            .map(|x| a(i * mb + x / nb, j * nb + x % nb))
            .collect();
        let b_block: Vec<f64> = (0..mb * nb)
            .map(|x| b(i * mb + x / nb, j * nb + x % nb))
            .collect();
        let mut c_block = vec![0.0; mb * nb];
        // Panel width: divides both block sizes.
        let w = gcd(mb, nb);
        // Two panel buffers each for A and B in every rank's segment.
        let a_bufs = ctx.alloc_collective::<f64>(2 * mb * w)?;
        let b_bufs = ctx.alloc_collective::<f64>(2 * w * nb)?;
        let (row_nb, col_nb) = (
            row.with_sync(SyncMode::No, SyncMode::My),
            col.with_sync(SyncMode::No, SyncMode::My),
        );
        let mut scratch_a = vec![0.0; mb * w];
        // Start the broadcasts of panel `k` into buffer `slot`.
        let mut fetch = |k: usize, slot: usize| -> tessera::Result<[CollHandle; 2]> {
            // A panel: columns k..k+w, owned by process column k / nb.
            let owner_col = k / nb;
            if j == owner_col {
                let c0 = k - owner_col * nb;
                for r in 0..mb {
                    scratch_a[r * w..(r + 1) * w]
                        .copy_from_slice(&a_block[r * nb + c0..r * nb + c0 + w]);
                }
            }
            let a_dsts: Vec<GlobalPtr<f64>> = row.symmetric(a_bufs.add(slot * mb * w));
            let ha = row_nb.run(
                Broadcast::new(owner_col, &scratch_a, mb * w).to_symmetric(&a_dsts),
                Nonblocking,
            )?;
            // B panel: rows k..k+w, owned by process row k / mb.
            let owner_row = k / mb;
            let r0 = k.saturating_sub(owner_row * mb);
            let b_src = if i == owner_row {
                &b_block[r0 * nb..(r0 + w) * nb]
            } else {
                &[][..]
            };
            let b_dsts: Vec<GlobalPtr<f64>> = col.symmetric(b_bufs.add(slot * w * nb));
            let hb = col_nb.run(
                Broadcast::new(owner_row, b_src, w * nb).to_symmetric(&b_dsts),
                Nonblocking,
            )?;
            Ok([ha, hb])
        };
        let panels: Vec<usize> = (0..n).step_by(w).collect();
        row.run(Barrier, Blocking)?;
        col.run(Barrier, Blocking)?;
        let mut pending = Some(fetch(panels[0], 0)?);
        for (t, _) in panels.iter().enumerate() {
            let slot = t % 2;
            for h in pending.take().expect("panel t was fetched") {
                h.wait()?;
            }
            if let Some(&next) = panels.get(t + 1) {
                // Everyone is done with panel t − 1, whose buffers panel t + 1 refills.
                row.run(Barrier, Blocking)?;
                col.run(Barrier, Blocking)?;
                pending = Some(fetch(next, 1 - slot)?);
            }
            // SAFETY: nothing writes these buffers until the barriers before the fetch of
            // panel t + 2, which this rank reaches only after the slices are gone.
            let a_panel = unsafe { ctx.local_slice(a_bufs.add(slot * mb * w), mb * w)? }
                .expect("own segment");
            // SAFETY: as for `a_panel`.
            let b_panel = unsafe { ctx.local_slice(b_bufs.add(slot * w * nb), w * nb)? }
                .expect("own segment");
            for r in 0..mb {
                for t in 0..w {
                    let x = a_panel[r * w + t];
                    let brow = &b_panel[t * nb..(t + 1) * nb];
                    for (c, bv) in c_block[r * nb..(r + 1) * nb].iter_mut().zip(brow) {
                        *c += x * bv;
                    }
                }
            }
        }
        // Check this block against a serial multiply of the same entries.
        let mut worst = 0.0f64;
        for r in 0..mb {
            for c in 0..nb {
                let (gr, gc) = (i * mb + r, j * nb + c);
                let want: f64 = (0..n).map(|t| a(gr, t) * b(t, gc)).sum();
                worst = worst.max((c_block[r * nb + c] - want).abs());
            }
        }
        let worst = world.run(Allreduce::value(worst, Op::Max), Blocking)?;
        if ctx.rank() == 0 {
            println!("summa: {n}×{n} on a {pr}×{pc} grid, panels of {w}; largest error against a serial multiply {worst:.1e}");
        }
        if worst > 1e-9 * n as f64 {
            return Err(format!("SUMMA result differs from the serial multiply by {worst}").into());
        }
        Ok(())
    });
}
