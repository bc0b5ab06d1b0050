//! Unit tests of IS's counting, tallying and grouping.

use super::{add_tallies, count_keys, cumulative_counts, CHUNKS, GROUP_BLOCK};

/// The next draw below `below` of a linear congruential sequence in `x` (test data).
fn lcg(x: &mut u64, below: u64) -> u64 {
    *x = x
        .wrapping_mul(6_364_136_223_846_793_005)
        .wrapping_add(1_442_695_040_888_963_407);
    (*x >> 33) % below
}

/// The same counts the plain way.
fn plain(keys: &[i32], lo: usize, hi: usize) -> Vec<u32> {
    (lo..hi)
        .map(|v| keys.iter().filter(|&&k| k as usize <= v).count() as u32)
        .collect()
}

#[test]
fn byte_counts_agree_and_a_wrap_falls_back_to_32_bits() {
    let (mut narrow, mut histogram) = (Vec::new(), Vec::new());
    // Few repeats: the byte pass alone.
    let keys: Vec<i32> = (0..2000i32).map(|i| 100 + i * 7919 % 300).collect();
    cumulative_counts(&keys, 100..400, &mut narrow, &mut histogram);
    assert_eq!(histogram, plain(&keys, 100, 400));
    // One value 300 times and another 256 times (a byte count of exactly 0): both wrap.
    let mut keys: Vec<i32> = vec![5; 300];
    keys.extend(std::iter::repeat_n(7, 256));
    keys.extend([3, 9, 9]);
    cumulative_counts(&keys, 3..10, &mut narrow, &mut histogram);
    assert_eq!(histogram, plain(&keys, 3, 10));
    assert_eq!(histogram.last(), Some(&(keys.len() as u32)));
}

#[test]
fn bucket_counts_and_tallies_agree_with_plain_counts() {
    let keys: Vec<i32> = (0..4096i32).map(|i| i * 7919 % 1000).collect();
    let shift = 4;
    let buckets = (1000 >> shift) + 1;
    let mut counts = vec![7u32; CHUNKS * buckets];
    let mut tally = vec![0u8; 1000];
    count_keys::<true>(&keys, shift, &mut counts, &mut tally);
    for b in 0..buckets {
        let want = keys.iter().filter(|&&k| (k >> shift) as usize == b).count();
        let got: u32 = (0..CHUNKS).map(|c| counts[c * buckets + b]).sum();
        assert_eq!(got as usize, want, "bucket {b}");
    }
    let mut sums = vec![0u32; 1000];
    add_tallies(&mut sums, &tally);
    add_tallies(&mut sums, &tally);
    for (v, &n) in sums.iter().enumerate() {
        let want = keys.iter().filter(|&&k| k as usize == v).count();
        assert_eq!(n as usize, 2 * want, "value {v}");
    }
    // 300 copies of one value wrap its byte tally: the total falls short.
    let keys = vec![3i32; 300 * CHUNKS];
    tally.fill(0);
    count_keys::<true>(&keys, shift, &mut counts, &mut tally);
    let total: usize = tally.iter().map(|&n| usize::from(n)).sum();
    assert_ne!(total, keys.len());
}

#[cfg(target_arch = "x86_64")]
#[test]
fn vector_grouping_puts_every_key_with_its_destination_in_order() {
    type Group = fn(&[i32], &[i32], &mut [&mut [i32]], &mut [usize]);
    let mut forms: Vec<(&str, Group)> = Vec::new();
    if super::avx512::available(1) {
        // SAFETY: `available` said this CPU has AVX-512F.
        forms.push(("avx512", |k, s, o, c| unsafe {
            super::avx512::group(k, s, o, c)
        }));
    }
    if super::avx2::available(1) {
        // SAFETY: `available` said this CPU has AVX2.
        forms.push(("avx2", |k, s, o, c| unsafe {
            super::avx2::group(k, s, o, c)
        }));
    }
    if forms.is_empty() {
        eprintln!("no AVX2 here (or TESSERA_SIMD=scalar): the vector groupings cannot run");
    }
    let mut x = 271_828_183u64;
    let mut next = |below: u64| lcg(&mut x, below);
    for (name, group) in forms {
        for p in 1..=super::avx2::MAX_DESTINATIONS.min(super::avx512::MAX_DESTINATIONS) {
            // Lengths around whole vectors; boundaries anywhere, empty ranges included.
            let len = 16 * (1 + next(40) as usize) + next(16) as usize;
            let keys: Vec<i32> = (0..len).map(|_| next(1000) as i32).collect();
            let mut starts: Vec<i32> = (1..p).map(|_| next(1001) as i32).collect();
            starts.sort_unstable();
            starts.insert(0, 0);
            starts.push(1000);
            let want: Vec<Vec<i32>> = (0..p)
                .map(|d| {
                    let (lo, hi) = (starts[d], starts[d + 1]);
                    keys.iter()
                        .copied()
                        .filter(|&k| lo <= k && k < hi)
                        .collect()
                })
                .collect();
            let mut space: Vec<Vec<i32>> = want.iter().map(|w| vec![-1; w.len()]).collect();
            let mut outs: Vec<&mut [i32]> = space.iter_mut().map(|v| &mut v[..]).collect();
            let mut cursor = vec![0; p];
            group(&keys, &starts, &mut outs, &mut cursor);
            assert_eq!(space, want, "{name}: {p} destinations, {len} keys");
            let counts: Vec<usize> = want.iter().map(Vec::len).collect();
            assert_eq!(cursor, counts, "{name}");
        }
    }
}

/// The grouping by lines puts every key where the one-at-a-time grouping does, for
/// destinations starting anywhere in a cache line and of any length, empty included.
#[test]
fn grouping_by_lines_puts_every_key_with_its_destination_in_order() {
    if crate::simd::level() != crate::simd::Level::Avx512 {
        eprintln!("no AVX-512 here (or TESSERA_SIMD below it): grouping by lines cannot run");
        return;
    }
    let mut x = 314_159_265u64;
    let mut next = |below: u64| lcg(&mut x, below);
    let shift = 3; // buckets of 8 key values; keys below 1024, so 128 buckets
    for p in [1, 2, 5, 16, 40] {
        let len = 16 * next(200) as usize + next(16) as usize;
        let keys: Vec<i32> = (0..len).map(|_| next(1024) as i32).collect();
        let mut starts: Vec<usize> = (1..p).map(|_| next(129) as usize).collect();
        starts.sort_unstable();
        starts.insert(0, 0);
        starts.push(128);
        let want: Vec<Vec<i32>> = (0..p)
            .map(|d| {
                let (lo, hi) = ((starts[d] << shift) as i32, (starts[d + 1] << shift) as i32);
                keys.iter()
                    .copied()
                    .filter(|&k| lo <= k && k < hi)
                    .collect()
            })
            .collect();
        // Each destination's block starts at an arbitrary place in one buffer.
        let mut space = vec![-1i32; len + 16 * p + 64];
        let mut outs: Vec<&mut [i32]> = Vec::new();
        let mut rest = &mut space[next(16) as usize..];
        for w in &want {
            let (block, tail) = rest.split_at_mut(w.len());
            outs.push(block);
            rest = &mut tail[next(17) as usize..];
        }
        assert!(super::group_by_lines(&keys, &starts, shift, &mut outs));
        for (d, (out, w)) in outs.iter().zip(&want).enumerate() {
            assert_eq!(&out[..], &w[..], "{p} destinations: destination {d}");
        }
    }
}

/// Grouping into slots stops, every cursor inside its slot, once a slot lacks room for a
/// block, having grouped a prefix of the keys exactly; with room it groups them all. Two
/// destinations take the vector grouping where it runs, twenty one key at a time.
#[test]
fn grouping_into_slots_stops_before_a_slot_overflows() {
    let mut x = 161_803_398u64;
    let keys: Vec<i32> = (0..5 * GROUP_BLOCK + 7)
        .map(|_| lcg(&mut x, 1000) as i32)
        .collect();
    for p in [2, 20] {
        // Buckets of 4 values; destination d from bucket 250 d / p.
        let shift = 2;
        let starts: Vec<usize> = (0..=p).map(|d| 250 * d / p).collect();
        let owner = |k: i32| {
            (0..p)
                .find(|&d| {
                    (k >> shift) as usize >= starts[d] && ((k >> shift) as usize) < starts[d + 1]
                })
                .unwrap()
        };
        let most = (0..p)
            .map(|d| keys.iter().filter(|&&k| owner(k) == d).count())
            .max()
            .unwrap();
        for (capacity, all) in [(keys.len(), true), (most, false), (GROUP_BLOCK, false)] {
            let mut space = vec![vec![-1i32; capacity]; p];
            let mut outs: Vec<&mut [i32]> = space.iter_mut().map(|v| &mut v[..]).collect();
            let mut cursor = vec![0; p];
            let went = super::group_into_slots(&keys, &starts, shift, &mut outs, &mut cursor);
            assert_eq!(went, all, "{p} slots of {capacity}");
            let done: usize = cursor.iter().sum();
            assert!(cursor.iter().all(|&c| c <= capacity));
            assert!(done.is_multiple_of(GROUP_BLOCK) || done == keys.len());
            assert_eq!(done == keys.len(), all);
            for (d, out) in space.iter().enumerate() {
                let want: Vec<i32> = keys[..done]
                    .iter()
                    .copied()
                    .filter(|&k| owner(k) == d)
                    .collect();
                assert_eq!(&out[..cursor[d]], &want[..], "{p} slots of {capacity}: {d}");
            }
        }
    }
}
