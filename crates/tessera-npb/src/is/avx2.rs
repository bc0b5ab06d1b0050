//! AVX2 grouping of IS's keys by destination rank: the AVX-512 grouping
//! ([`super::avx512`]) without compress-store.
//!
//! Eight keys are taken at once. One comparison per destination boundary gives each
//! destination's lanes as an 8-bit mask; a table indexed by the mask gives the lane
//! permutation that packs those lanes to the front of the register, and the whole
//! register is stored at the destination's cursor, which then moves on by the mask's
//! population count. The lanes stored past the packed keys land in the destination's own
//! range, at positions that later keys overwrite (each position's last write is its real
//! key), so a full-width store is safe wherever eight slots remain; the last few keys of
//! a destination are written one by one.
//!
//! Keys reach every destination in the same order as a one-at-a-time pass over `keys`
//! would put them there. This module must never be called on a CPU without AVX2 (the
//! caller checks [`available`]).

use std::arch::x86_64::{
    __m256i, _mm256_castsi256_ps, _mm256_cmpgt_epi32, _mm256_loadu_si256, _mm256_movemask_ps,
    _mm256_permutevar8x32_epi32, _mm256_set1_epi32, _mm256_storeu_si256,
};

/// Keys per vector.
const LANES: usize = 8;

/// The most destinations the vector grouping handles: it compares every key against
/// every boundary, which stops paying somewhere beyond this.
pub(super) const MAX_DESTINATIONS: usize = 16;

/// For every 8-bit lane mask, the lane indices of its set bits in order, then zeros: the
/// permutation that packs the selected lanes to the front.
const PACK: [[i32; LANES]; 256] = {
    let mut table = [[0i32; LANES]; 256];
    let mut mask = 0;
    while mask < 256 {
        let (mut lane, mut next) = (0, 0);
        while lane < LANES {
            if mask & (1 << lane) != 0 {
                table[mask][next] = lane as i32;
                next += 1;
            }
            lane += 1;
        }
        mask += 1;
    }
    table
};

/// The most destinations for which IS chooses this grouping. Every destination with a key
/// among the eight takes a full 32-byte store, so with many destinations each key costs
/// several stores: on a 2-core AMD EPYC (Zen 2, AVX2), class B's grouping step took 0.20 s
/// against the scalar grouping's 0.56 at 2 ranks and 0.39 against 0.59 at 4, but 1.21
/// against 0.66 at 8 and 2.41 against 0.67 at 16 (`TESSERA_SIMD=avx2|scalar tessera npb
/// is --class B -n N --variant count --json F`, the profile's `group_s`).
pub(super) const CHOSEN_UP_TO: usize = 4;

/// Whether the chosen level has AVX2 (so this CPU runs [`group`]) and it suits
/// `destinations` ranks.
pub(super) fn available(destinations: usize) -> bool {
    destinations <= CHOSEN_UP_TO && crate::simd::level() >= crate::simd::Level::Avx2
}

/// Append every key `k` of `keys` to `outs[d]` at `cursor[d]` (moving the cursor on), for
/// the `d` with `starts[d] <= k < starts[d + 1]`. `starts` has one more entry than
/// `outs`, its first is at most the smallest key and its last above the largest, and
/// every `outs[d]` has room from `cursor[d]` for its keys (a key past the end panics).
#[target_feature(enable = "avx2")]
pub(super) fn group(keys: &[i32], starts: &[i32], outs: &mut [&mut [i32]], cursor: &mut [usize]) {
    let p = outs.len();
    assert!(
        (1..=MAX_DESTINATIONS).contains(&p) && starts.len() == p + 1 && cursor.len() == p,
        "one start per destination and one after the last"
    );
    // `k > starts[d] - 1` is `k >= starts[d]`; boundaries 1..p only (keys are at least
    // starts[0], and none reaches starts[p]), and a start of i32::MIN cannot occur there
    // since starts rise from starts[0].
    let mut at_least = [_mm256_set1_epi32(i32::MAX); MAX_DESTINATIONS];
    for d in 1..p {
        at_least[d] = _mm256_set1_epi32(starts[d].saturating_sub(1));
    }
    let mut chunks = keys.chunks_exact(LANES);
    for chunk in &mut chunks {
        let v = load(chunk.try_into().expect("eight keys"));
        let mut from_here: u32 = 0xff;
        for d in 0..p {
            let from_next = if d + 1 < p {
                _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(v, at_least[d + 1])))
                    as u32
            } else {
                0
            };
            let mine = from_here & !from_next;
            from_here = from_next;
            if mine == 0 {
                continue;
            }
            let packed = _mm256_permutevar8x32_epi32(v, load(&PACK[mine as usize]));
            let n = mine.count_ones() as usize;
            let at = cursor[d];
            let out = &mut *outs[d];
            match out.get_mut(at..at + LANES) {
                Some(room) => store(room.try_into().expect("eight slots"), packed),
                None => {
                    let mut lanes = [0i32; LANES];
                    store(&mut lanes, packed);
                    out[at..at + n].copy_from_slice(&lanes[..n]);
                }
            }
            cursor[d] = at + n;
        }
    }
    super::group_one_by_one(chunks.remainder(), starts, outs, cursor);
}

/// The eight values of `lanes`.
#[inline]
#[target_feature(enable = "avx2")]
fn load(lanes: &[i32; LANES]) -> __m256i {
    // SAFETY: `lanes` is eight readable, initialised i32s, and the unaligned load reads
    // exactly those.
    unsafe { _mm256_loadu_si256(lanes.as_ptr().cast()) }
}

/// Write all eight lanes of `v` to `dst`.
#[inline]
#[target_feature(enable = "avx2")]
fn store(dst: &mut [i32; LANES], v: __m256i) {
    // SAFETY: `dst` is eight writable i32s, borrowed exclusively, and the unaligned store
    // writes exactly those.
    unsafe { _mm256_storeu_si256(dst.as_mut_ptr().cast(), v) }
}
