//! Unit tests of the MG benchmark.

use super::*;

#[test]
fn process_grids_halve_the_slowest_dimension_first() {
    assert_eq!(process_grid(1), [1, 1, 1]);
    assert_eq!(process_grid(2), [2, 1, 1]);
    assert_eq!(process_grid(4), [2, 2, 1]);
    assert_eq!(process_grid(8), [2, 2, 2]);
    assert_eq!(process_grid(32), [4, 4, 2]);
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
    rprj3: unsafe fn(&[f64], Shape, &mut [f64], Shape, Range<usize>),
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
                let all = 1..coarse.m[0] - 1;
                // SAFETY: as above.
                unsafe { (form.rprj3)(&r, fine, &mut fast, coarse, all.clone()) };
                rprj3_portable(&r, fine, &mut portable, coarse, all, &mut bufs);
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
