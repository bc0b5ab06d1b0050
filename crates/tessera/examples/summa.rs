//! SUMMA dense matrix multiply, C = A·B, over the row and column teams of a process grid.
//!
//! The n×n matrices are split into blocks over a pr × pc grid of ranks. For every panel
//! of w columns of A (and the matching w rows of B), the process column that owns the A
//! panel broadcasts it along each process row, and the process row that owns the B panel
//! broadcasts it down each process column. Every rank then multiplies the two panels into
//! its C block. The result is checked against a serial multiply of the same matrices.
//!
//! ```text
//! cargo run --release -- run -n 4 -- target/release/examples/summa 240
//! ```
//!
//! (The next step is nonblocking broadcasts that fetch panel k+1 while panel k is
//! multiplied; see issue 3.)

use tessera::{Op, Team};

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
        if n % pr != 0 || n % pc != 0 {
            return Err(format!("n = {n} must be divisible by the {pr}×{pc} grid").into());
        }
        let (row, col) = world.grid(pr, pc)?;
        let (i, j) = (world.rank() / pc, world.rank() % pc);
        let (mb, nb) = (n / pr, n / pc); // C block: mb × nb
                                         // A block (i, j): rows i·mb.., columns j·nb..; B block (i, j): rows i·mb.., columns j·nb..
        let a_block: Vec<f64> = (0..mb * nb)
            .map(|x| a(i * mb + x / nb, j * nb + x % nb))
            .collect();
        let b_block: Vec<f64> = (0..mb * nb)
            .map(|x| b(i * mb + x / nb, j * nb + x % nb))
            .collect();
        let mut c_block = vec![0.0; mb * nb];
        let w = gcd(mb, nb); // panel width: divides both block sizes
        let mut a_panel = vec![0.0; mb * w];
        let mut b_panel = vec![0.0; w * nb];
        for k in (0..n).step_by(w) {
            // A panel: columns k..k+w, owned by process column k / nb.
            let owner_col = k / nb;
            if j == owner_col {
                let c0 = k - owner_col * nb;
                for r in 0..mb {
                    a_panel[r * w..(r + 1) * w]
                        .copy_from_slice(&a_block[r * nb + c0..r * nb + c0 + w]);
                }
            }
            row.broadcast(owner_col, &mut a_panel)?;
            // B panel: rows k..k+w, owned by process row k / mb.
            let owner_row = k / mb;
            if i == owner_row {
                let r0 = k - owner_row * mb;
                b_panel.copy_from_slice(&b_block[r0 * nb..(r0 + w) * nb]);
            }
            col.broadcast(owner_row, &mut b_panel)?;
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
        let worst = world.allreduce_value(worst, Op::Max)?;
        if ctx.rank() == 0 {
            println!("summa: {n}×{n} on a {pr}×{pc} grid, panels of {w}; largest error against a serial multiply {worst:.1e}");
        }
        if worst > 1e-9 * n as f64 {
            return Err(format!("SUMMA result differs from the serial multiply by {worst}").into());
        }
        Ok(())
    });
}
