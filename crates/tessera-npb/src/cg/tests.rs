//! Unit tests of the CG benchmark.

use super::*;

#[test]
fn blocks_cover_without_overlap() {
    for (n, parts) in [(10, 3), (1400, 4), (7, 8)] {
        let mut next = 0;
        for i in 0..parts {
            let b = block(n, parts, i);
            assert_eq!(b.start, next);
            next = b.end;
        }
        assert_eq!(next, n);
    }
}

fn layouts(na: usize, ranks: usize) -> Vec<Layout> {
    (0..ranks).map(|me| Layout::new(na, ranks, me)).collect()
}

fn absolute(l: &Layout, r: &Range<usize>) -> Range<usize> {
    l.row_range.start + r.start..l.row_range.start + r.end
}

#[test]
fn grid_blocks_tile_the_matrix_and_transposes_pair_up() {
    for ranks in [1, 2, 4, 8, 16, 32] {
        for na in [1400, 7000, 75000, 37] {
            let all = layouts(na, ranks);
            let (rows, cols) = (all[0].rows, all[0].cols);
            assert!(cols == rows || cols == 2 * rows, "{rows}×{cols}");
            // Each process row's columns, and each process column's rows, tile 0..na.
            for row in 0..rows {
                let mut next = 0;
                for l in &all[row * cols..(row + 1) * cols] {
                    assert_eq!((l.row, l.col_range.start), (row, next));
                    next = l.col_range.end;
                }
                assert_eq!(next, na);
            }
            let mut next = 0;
            for row in 0..rows {
                assert_eq!(all[row * cols].row_range.start, next);
                next = all[row * cols].row_range.end;
            }
            assert_eq!(next, na);
            // The transpose is an involution that delivers exactly the columns.
            for (me, l) in all.iter().enumerate() {
                let t = &all[l.transpose];
                assert_eq!(t.transpose, me, "{ranks} ranks, rank {me}");
                assert_eq!(
                    absolute(t, &t.owned),
                    l.col_range,
                    "{ranks} ranks, rank {me}"
                );
            }
        }
    }
}

/// Simulate the row sum on sets of contributors: every owned row must end with each
/// process column's partial sum exactly once.
#[test]
fn the_row_sum_adds_every_partial_exactly_once() {
    for ranks in [1, 2, 4, 8, 16, 32, 64] {
        let na = 1003;
        let all = layouts(na, ranks);
        // contributions[rank][row] = bitmask of process columns summed in.
        let mut contributions: Vec<Vec<u64>> = all
            .iter()
            .map(|l| vec![1u64 << l.col; l.row_range.len()])
            .collect();
        for k in 0..all[0].phases.len() {
            let before = contributions.clone();
            for (me, l) in all.iter().enumerate() {
                let phase = &l.phases[k];
                let partner = &all[phase.partner].phases[k];
                assert_eq!(partner.partner, me);
                assert_eq!(partner.send.len(), phase.recv.len());
                assert_eq!(
                    absolute(&all[phase.partner], &partner.send),
                    absolute(l, &phase.recv)
                );
                for (i, j) in phase.recv.clone().zip(partner.send.clone()) {
                    let theirs = before[phase.partner][j];
                    assert_eq!(contributions[me][i] & theirs, 0, "counted twice");
                    contributions[me][i] |= theirs;
                }
            }
        }
        let full = (1u64 << all[0].cols) - 1;
        for (me, l) in all.iter().enumerate() {
            for i in l.owned.clone() {
                assert_eq!(
                    contributions[me][i], full,
                    "{ranks} ranks, rank {me}, row {i}"
                );
            }
        }
    }
}

#[test]
fn distributed_blocks_reassemble_the_whole_symmetric_matrix() {
    let data = &CLASSES[0];
    let whole = make_matrix(data, &Layout::new(data.na, 1, 0));
    // Symmetric (up to rounding: the products are formed in the other order).
    for i in (0..data.na).step_by(97) {
        for j in 0..data.na {
            let (a, b) = (whole.get(i, j), whole.get(j, i));
            assert!(
                (a - b).abs() <= 1e-14 * a.abs().max(1.0),
                "({i}, {j}): {a} vs {b}"
            );
        }
    }
    let ranks = 8;
    let mut nonzeros = 0;
    for l in layouts(data.na, ranks) {
        let part = make_matrix(data, &l);
        nonzeros += part.nonzeros();
        for (i, row) in l.row_range.clone().enumerate().step_by(13) {
            for (j, col) in l.col_range.clone().enumerate() {
                assert_eq!(part.get(i, j), whole.get(row, col), "({row}, {col})");
            }
        }
    }
    assert_eq!(nonzeros, whole.nonzeros());
}

/// A random matrix of `nrows` rows with 0 to `2·per_row` entries each over `ncols` columns,
/// values with full mantissas (so any change in the order of a sum shows).
fn random_matrix(nrows: usize, ncols: usize, per_row: u64, seed: u64) -> Matrix {
    let mut state = seed;
    let mut next = |below: u64| {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) % below
    };
    let mut triples = Vec::new();
    for r in 0..nrows as u32 {
        for _ in 0..next(2 * per_row + 1) {
            let value = next(1 << 30) as f64 / 3.0e8 - 1.7;
            triples.push((r, next(ncols as u64) as u32, value));
        }
    }
    assemble(nrows, ncols, |entry| {
        for &(r, c, v) in &triples {
            entry(r, c, v);
        }
    })
}

#[test]
fn every_product_form_equals_the_portable_one_bit_for_bit() {
    let forms = ProductForm::available();
    if forms.len() == 1 {
        eprintln!("no vector product runs at this level: only the portable one is checked");
    }
    // 16-bit indices in one stripe and in three (about 27 entries a part), and 32-bit
    // indices (62 stripes of about 1.3 entries would not pay).
    for (ncols, per_row, seed, stripes) in [
        (5_000, 20, 1, 1),
        (3 * STRIPE - 100, 80, 2, 3),
        (1_000_000, 80, 4, 1),
    ] {
        let mut m = random_matrix(600, ncols, per_row, seed);
        assert_eq!(m.stripes, stripes, "{ncols} columns");
        assert_eq!(matches!(m.colidx, Columns::Narrow(_)), ncols < 1_000_000);
        let x: Vec<f64> = (0..ncols).map(|i| (i as f64 * 0.618).sin() * 1e3).collect();
        let mut want = vec![0.0; 600];
        m.multiply(&x, &mut want);
        for &form in &forms {
            m.set_form(form);
            let mut got = vec![0.0; 600];
            m.multiply(&x, &mut got);
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert_eq!(
                    g.to_bits(),
                    w.to_bits(),
                    "{}, {ncols} columns, row {i}: {g} vs {w}",
                    form.name()
                );
            }
        }
    }
}

#[test]
fn a_striped_product_matches_the_entries_it_stores() {
    let (nrows, ncols) = (600, 4 * STRIPE - 7);
    let m = random_matrix(nrows, ncols, 80, 9);
    assert_eq!(m.stripes, 4);
    let x: Vec<f64> = (0..ncols).map(|i| ((i % 11) as f64 - 5.0) * 0.25).collect();
    let mut out = vec![0.0; nrows];
    m.multiply(&x, &mut out);
    // Every stored entry, found through the parts: each stripe's indices are relative
    // to it, so a wrong stripe base shows as a wrong column here and a wrong sum below.
    let mut found = 0;
    for (i, &o) in out.iter().enumerate() {
        let mut want = 0.0;
        for (j, &xj) in x.iter().enumerate() {
            let a = m.get(i, j);
            if a != 0.0 {
                found += 1;
                want += a * xj;
            }
        }
        assert!(
            (o - want).abs() <= 1e-12 * want.abs().max(1.0),
            "row {i}: {o} vs {want}"
        );
    }
    assert_eq!(found, m.nonzeros());
}

#[test]
fn the_product_matches_a_dense_one() {
    let data = &CLASSES[0];
    let l = Layout::new(data.na, 2, 1);
    let m = make_matrix(data, &l);
    let x: Vec<f64> = (0..l.col_range.len())
        .map(|i| (i % 7) as f64 - 3.0)
        .collect();
    let mut out = vec![0.0; l.row_range.len()];
    m.multiply(&x, &mut out);
    for (i, &o) in out.iter().enumerate() {
        let want: f64 = (0..x.len()).map(|j| m.get(i, j) * x[j]).sum();
        assert!(
            (o - want).abs() <= 1e-12 * want.abs().max(1.0),
            "row {i}: {o} vs {want}"
        );
    }
}
