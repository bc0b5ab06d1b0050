//! Unit tests of the MG benchmark.

use super::*;

#[test]
fn process_grids_keep_x_whole_while_that_exchanges_no_more() {
    assert_eq!(process_grid(1), [1, 1, 1]);
    assert_eq!(process_grid(2), [2, 1, 1]);
    assert_eq!(process_grid(4), [2, 2, 1]);
    assert_eq!(process_grid(8), [4, 2, 1]);
    assert_eq!(process_grid(16), [4, 4, 1]);
    // From 32 ranks NPB's grid, which halves the slowest dimension first.
    assert_eq!(process_grid(32), [4, 4, 2]);
    assert_eq!(process_grid(64), [4, 4, 4]);
    assert_eq!(process_grid(1024), [16, 8, 8]);
    // Equal areas where both are taken, less for NPB's beyond.
    assert_eq!(exchanged_area([4, 2, 1]), exchanged_area([2, 2, 2]));
    assert_eq!(exchanged_area([4, 4, 1]), exchanged_area([4, 2, 2]));
    assert!(exchanged_area([8, 4, 1]) > exchanged_area([4, 4, 2]));
}

#[test]
fn keep_holds_the_best_in_order() {
    let mut kept = Vec::new();
    for (i, v) in [5.0, 1.0, 9.0, 3.0, 7.0, 8.0].into_iter().enumerate() {
        keep(&mut kept, 3, (v, i as u64), |a, b| a > b);
    }
    assert_eq!(kept, vec![(9.0, 2), (8.0, 5), (7.0, 4)]);
}

/// Values spread over several binades, so that a changed order of operations would
/// show in the low bits.
fn noise(len: usize, seed: u64) -> Vec<f64> {
    let mut x = seed;
    let mut values = vec![0.0; len];
    vranlc(&mut x, A, &mut values);
    values
        .iter()
        .map(|v| (v - 0.5) * (1.0 + 1000.0 * v * v))
        .collect()
}

/// A vector `resid`: `u`, `v` (or in place), `r`, the block and the rows.
#[cfg(target_arch = "x86_64")]
type Resid = unsafe fn(&[f64], Option<&[f64]>, &mut [f64], Shape, Part);

/// One vector width's stencils, for the test below.
#[cfg(target_arch = "x86_64")]
struct VectorForm {
    name: &'static str,
    available: fn(Shape) -> bool,
    resid: Resid,
    psinv: unsafe fn(&[f64], &mut [f64], Shape, Part, [f64; 4]),
    rprj3: unsafe fn(&[f64], Shape, &mut [f64], Shape, Part),
}

#[cfg(target_arch = "x86_64")]
#[test]
fn vector_stencils_equal_the_portable_ones_bit_for_bit() {
    let forms = [
        VectorForm {
            name: "avx512",
            available: avx512::available,
            resid: avx512::resid,
            psinv: avx512::psinv,
            rprj3: avx512::rprj3,
        },
        VectorForm {
            name: "avx2",
            available: avx2::available,
            resid: avx2::resid,
            psinv: avx2::psinv,
            rprj3: avx2::rprj3,
        },
    ];
    let bits = |x: &[f64]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    let mut checked = Vec::new();
    for interior in [
        [4, 4, 8],
        [3, 5, 32],
        [2, 2, 16],
        [4, 2, 64],
        [3, 3, 4],
        [2, 3, 12],
    ] {
        let s = Shape::with_interior(interior);
        let (u, v, r0) = (
            noise(s.len(), 271_828_183),
            noise(s.len(), 314_159_265),
            noise(s.len(), 1),
        );
        let coarse = Shape::with_interior(interior.map(|e| e.div_ceil(2)));
        let fine = Shape::with_interior(coarse.m.map(|e| 2 * (e - 2)));
        let r = noise(fine.len(), 5);
        let mut bufs: RowBuffers = std::array::from_fn(|_| vec![0.0; 2 * fine.m[2]]);
        for form in forms.iter().filter(|f| (f.available)(s)) {
            let name = form.name;
            for with_v in [Some(&v[..]), None] {
                let (mut fast, mut portable) = (r0.clone(), r0.clone());
                // SAFETY: `available` said this CPU has the form's features.
                unsafe { (form.resid)(&u, with_v, &mut fast, s, Part::all(s)) };
                resid_portable(&u, with_v, &mut portable, s, Part::all(s), &mut bufs);
                assert_eq!(bits(&fast), bits(&portable), "{name} resid, {interior:?}");
                assert_ne!(bits(&fast), bits(&r0), "{name} resid wrote nothing");
            }
            let c = smoother(Class::A);
            let (mut fast, mut portable) = (u.clone(), u.clone());
            // SAFETY: as above.
            unsafe { (form.psinv)(&r0, &mut fast, s, Part::all(s), c) };
            psinv_portable(&r0, &mut portable, s, Part::all(s), c, &mut bufs);
            assert_eq!(bits(&fast), bits(&portable), "{name} psinv, {interior:?}");
            assert_ne!(bits(&fast), bits(&u), "{name} psinv wrote nothing");
            if (form.available)(coarse) {
                let (mut fast, mut portable) = (noise(coarse.len(), 7), noise(coarse.len(), 7));
                // SAFETY: as above.
                unsafe { (form.rprj3)(&r, fine, &mut fast, coarse, Part::all(coarse)) };
                rprj3_portable(
                    &r,
                    fine,
                    &mut portable,
                    coarse,
                    Part::all(coarse),
                    &mut bufs,
                );
                assert_eq!(bits(&fast), bits(&portable), "{name} rprj3, {:?}", coarse.m);
                checked.push((name, "rprj3"));
            }
            checked.push((name, "resid psinv"));
        }
    }
    let ran: std::collections::BTreeSet<_> = checked.iter().map(|c| c.0).collect();
    if crate::simd::level() >= crate::simd::Level::Avx2 {
        assert!(
            ran.contains("avx2"),
            "the AVX2 stencils never ran: {checked:?}"
        );
    }
    eprintln!("vector stencils checked: {ran:?}");
}

/// The top level's u and r after two V-cycles from the set-up the benchmark starts with,
/// with the way up in one sweep holding `fused_bytes` (0: stage by stage) and levels
/// thinner than `gather_below` gathered, on each rank.
fn after_two_cycles(
    ranks: usize,
    class: Class,
    fused_bytes: usize,
    gather_below: usize,
) -> Vec<(Vec<u64>, Vec<u64>)> {
    let kept = std::sync::Mutex::new(vec![None; ranks]);
    let data = crate::class_data(&CLASSES, |c| c.class, class);
    tessera::Job::threads(ranks)
        .segment(64 << 20)
        .run(|ctx| {
            let mut mg = Multigrid::new(ctx, data, Variant::TwentySix.strategy(), gather_below)?;
            mg.fused_bytes = fused_bytes;
            mg.zran3()?;
            mg.resid_top()?;
            mg.iteration()?;
            mg.iteration()?;
            let bits = |x: &[f64]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            let top = mg.top();
            let got = (bits(top.u.as_slice()), bits(top.r.as_slice()));
            kept.lock().unwrap()[ctx.rank()] = Some(got);
            Ok(())
        })
        .unwrap();
    kept.into_inner()
        .unwrap()
        .into_iter()
        .map(Option::unwrap)
        .collect()
}

#[test]
fn the_one_sweep_way_up_equals_the_stage_by_stage_one_bit_for_bit() {
    // Whole planes with the restriction (1 and 2 ranks), tiles of one and three coarse
    // rows (y ours), y split (4, 8 and 16 ranks), whole and tiled, and the level below
    // gathered (the correction cut out of the whole level, no restriction in the sweep).
    let whole = 1 << 30;
    for (ranks, class, fused, gather_below) in [
        (1, Class::S, whole, GATHER_BELOW),
        (2, Class::S, whole, GATHER_BELOW),
        (2, Class::S, 1, GATHER_BELOW),
        (2, Class::S, 3 * 14 * 34 * 8 * 2, GATHER_BELOW),
        (4, Class::S, whole, GATHER_BELOW),
        (4, Class::S, 1, GATHER_BELOW),
        (8, Class::S, whole, GATHER_BELOW),
        (16, Class::S, 1, GATHER_BELOW),
        (2, Class::W, whole, GATHER_BELOW),
        (2, Class::S, whole, 64),
        (4, Class::S, 1, 64),
    ] {
        let staged = after_two_cycles(ranks, class, 0, gather_below);
        let swept = after_two_cycles(ranks, class, fused, gather_below);
        for (rank, (a, b)) in staged.iter().zip(&swept).enumerate() {
            let first = |x: &[u64], y: &[u64]| x.iter().zip(y).position(|(p, q)| p != q);
            assert_eq!(
                (first(&a.0, &b.0), first(&a.1, &b.1)),
                (None, None),
                "{ranks} ranks, class {class}, {fused} bytes, rank {rank}: first differing u and r"
            );
        }
    }
}
