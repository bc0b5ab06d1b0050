//! Strided and indexed transfers checked byte for byte against a plain element-by-element
//! copy, over random shapes (property tests), between two ranks.

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

use tessera::{Blocking, Indexed, IndexedMut, Job, Strided, StridedMut};

const REMOTE: usize = 4096;

/// A random N-d box (1 to 4 dimensions) with strides large enough not to overlap.
fn shape() -> impl Strategy<Value = (Vec<usize>, Vec<usize>, Vec<usize>, usize, usize)> {
    (1usize..=4).prop_flat_map(|dims| {
        (
            proptest::collection::vec(1usize..5, dims),
            proptest::collection::vec(0usize..3, dims),
            proptest::collection::vec(0usize..3, dims),
            0usize..16,
            0usize..16,
        )
            .prop_map(|(counts, pad_a, pad_b, off_a, off_b)| {
                // Strides: the innermost is 1 or 2, each outer one covers the inner extent plus padding.
                let strides = |pad: &[usize]| {
                    let mut s = vec![0; counts.len()];
                    let mut extent = 1 + pad[counts.len() - 1] % 2;
                    for d in (0..counts.len()).rev() {
                        s[d] = if d == counts.len() - 1 {
                            extent
                        } else {
                            extent + pad[d]
                        };
                        extent = s[d] * counts[d];
                    }
                    s
                };
                let (sa, sb) = (strides(&pad_a), strides(&pad_b));
                (counts, sa, sb, off_a, off_b)
            })
    })
}

/// `Err` naming the first element where `got` and `want` differ.
fn same(got: &[u32], want: &[u32], what: &str) -> Result<(), TestCaseError> {
    match got.iter().zip(want).position(|(g, w)| g != w) {
        None => Ok(()),
        Some(i) => Err(TestCaseError::fail(format!(
            "{what}: element {i} is {} but a plain copy gives {}",
            got[i], want[i]
        ))),
    }
}

/// Element offsets of every index of the box, in row-major order.
fn offsets(counts: &[usize], strides: &[usize]) -> Vec<usize> {
    let mut out = vec![0usize];
    for (&c, &s) in counts.iter().zip(strides) {
        out = out
            .iter()
            .flat_map(|&base| (0..c).map(move |i| base + i * s))
            .collect();
    }
    out
}

#[test]
fn strided_and_indexed_match_a_plain_copy() {
    Job::threads(2)
        .segment(1 << 20)
        .wait_timeout(std::time::Duration::from_secs(60))
        .run(|ctx| {
            let remote = ctx.alloc_collective::<u32>(REMOTE)?;
            ctx.barrier()?;
            if ctx.rank() == 0 {
                let dst = remote.on(1);
                let mut runner = TestRunner::new(Config {
                    cases: 256,
                    ..Config::default()
                });
                runner
                    .run(&shape(), |(counts, sa, sb, off_a, off_b)| {
                        let oa = offsets(&counts, &sa);
                        let ob = offsets(&counts, &sb);
                        let local_len = off_b + ob.iter().max().unwrap() + 1;
                        prop_assume!(off_a + oa.iter().max().unwrap() < REMOTE);
                        let src: Vec<u32> = (0..local_len as u32)
                            .map(|i| i.wrapping_mul(2_654_435_761))
                            .collect();
                        // Expected remote image: a plain element-by-element copy.
                        let mut want = vec![0u32; REMOTE];
                        for (a, b) in oa.iter().zip(&ob) {
                            want[off_a + a] = src[off_b + b];
                        }
                        ctx.put(dst, &vec![0u32; REMOTE], Blocking).unwrap();
                        ctx.put(
                            dst.add(off_a),
                            Strided {
                                local: &src[off_b..],
                                local_strides: &sb,
                                remote_strides: &sa,
                                counts: &counts,
                            },
                            Blocking,
                        )
                        .unwrap();
                        let mut got = vec![0u32; REMOTE];
                        ctx.get(dst, &mut got, Blocking).unwrap();
                        same(&got, &want, "put_strided")?;
                        // And back: a strided get into a zeroed local buffer.
                        let mut back = vec![0u32; local_len];
                        ctx.get(
                            dst.add(off_a),
                            StridedMut {
                                local: &mut back[off_b..],
                                local_strides: &sb,
                                remote_strides: &sa,
                                counts: &counts,
                            },
                            Blocking,
                        )
                        .unwrap();
                        for b in &ob {
                            prop_assert_eq!(back[off_b + b], src[off_b + b]);
                        }
                        // Indexed with runs of 1: the same scatter described by offsets.
                        let gathered: Vec<u32> = ob.iter().map(|b| src[off_b + b]).collect();
                        ctx.put(dst, &vec![0u32; REMOTE], Blocking).unwrap();
                        ctx.put(
                            dst.add(off_a),
                            Indexed {
                                local: &gathered,
                                remote_offsets: &oa,
                                run: 1,
                            },
                            Blocking,
                        )
                        .unwrap();
                        ctx.get(dst, &mut got, Blocking).unwrap();
                        same(&got, &want, "put_indexed")?;
                        let mut again = vec![0u32; gathered.len()];
                        ctx.get(
                            dst.add(off_a),
                            IndexedMut {
                                local: &mut again,
                                remote_offsets: &oa,
                                run: 1,
                            },
                            Blocking,
                        )
                        .unwrap();
                        prop_assert_eq!(again, gathered);
                        Ok(())
                    })
                    .map_err(|e| format!("{e}"))?;
            }
            ctx.barrier()?;
            Ok(())
        })
        .unwrap();
}

/// Global-pointer arithmetic that leaves the address space never lands on a valid
/// address: a rank beyond 32 bits is not truncated to another rank, `sub` below offset 0
/// does not clamp into the runtime's part of the segment, `add` past the end does not wrap.
#[test]
fn invalid_global_pointers_are_refused_not_wrapped() {
    tessera::Job::threads(2)
        .segment(1 << 20)
        .run(|ctx| {
            let cell = ctx.alloc_collective::<u64>(4)?;
            ctx.put(cell, &[1, 2, 3, 4], Blocking)?;
            ctx.barrier()?;
            let cases = [
                (
                    tessera::GlobalPtr::<u64>::new((1 << 32) + 1, cell.offset()),
                    "rank beyond",
                ),
                (cell.sub(cell.offset() as usize / 8 + 1), "below offset 0"),
                (cell.add(usize::MAX / 8), "past the largest offset"),
            ];
            for (bad, why) in cases {
                let err = ctx.put(bad, &[9], Blocking).unwrap_err().to_string();
                assert!(
                    err.contains("invalid global pointer") && err.contains(why),
                    "{err}"
                );
                assert!(ctx.get_value(bad).is_err());
            }
            ctx.barrier()?;
            let mut got = [0u64; 4];
            ctx.get(cell.on(1 - ctx.rank()), &mut got, Blocking)?;
            assert_eq!(got, [1, 2, 3, 4], "a bad put landed somewhere");
            Ok(())
        })
        .unwrap();
}
