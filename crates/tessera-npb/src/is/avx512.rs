//! AVX-512 grouping of IS's keys by destination rank.
//!
//! The portable grouping moves one key at a time: look up its destination, store it at
//! that destination's cursor, add one to the cursor. The cursors live in memory, so each
//! increment waits for the store of the one before it to the same cursor, and every store
//! is bounds-checked. Here sixteen keys are taken at once: one comparison per destination
//! boundary gives each destination's lanes as a mask, the keys of those lanes are packed
//! to the front of a register, and a masked store writes just them at the destination's
//! cursor, which then moves on by the mask's population count: one cursor update per
//! destination per sixteen keys.
//!
//! Keys reach every destination in the same order as a one-at-a-time pass over `keys`
//! would put them there. This module must never be called on a CPU without AVX-512F (the
//! caller checks [`available`]).

use std::arch::x86_64::{
    __m512i, _mm512_cmpge_epi32_mask, _mm512_loadu_si512, _mm512_mask_storeu_epi32,
    _mm512_maskz_compress_epi32, _mm512_set1_epi32,
};

/// Keys per vector.
const LANES: usize = 16;

/// The most destinations the vector grouping handles: it compares every key against
/// every boundary, which stops paying somewhere beyond this.
pub(super) const MAX_DESTINATIONS: usize = 16;

/// Whether the chosen level is AVX-512 (so this CPU runs [`group`]) and it suits
/// `destinations` ranks.
pub(super) fn available(destinations: usize) -> bool {
    destinations <= MAX_DESTINATIONS && crate::simd::level() == crate::simd::Level::Avx512
}

/// Append every key `k` of `keys` to `outs[d]` at `cursor[d]` (moving the cursor on), for
/// the `d` with `starts[d] <= k < starts[d + 1]`. `starts` has one more entry than
/// `outs`, its first is at most the smallest key and its last above the largest, and
/// every `outs[d]` has room from `cursor[d]` for its keys (a key past the end panics).
#[target_feature(enable = "avx512f")]
pub(super) fn group(keys: &[i32], starts: &[i32], outs: &mut [&mut [i32]], cursor: &mut [usize]) {
    let p = outs.len();
    assert!(
        (1..=MAX_DESTINATIONS).contains(&p) && starts.len() == p + 1 && cursor.len() == p,
        "one start per destination and one after the last"
    );
    // Boundaries 1..p: lane masks "at or above the start of destination d".
    let mut at_least = [_mm512_set1_epi32(i32::MAX); MAX_DESTINATIONS];
    for d in 1..p {
        at_least[d] = _mm512_set1_epi32(starts[d]);
    }
    let mut chunks = keys.chunks_exact(LANES);
    for chunk in &mut chunks {
        let v = load(chunk.try_into().expect("sixteen keys"));
        // Lanes at or above the start of destination d (all of them for d = 0).
        let mut from_here: u16 = u16::MAX;
        for d in 0..p {
            let from_next = if d + 1 < p {
                _mm512_cmpge_epi32_mask(v, at_least[d + 1])
            } else {
                0
            };
            let mine = from_here & !from_next;
            from_here = from_next;
            let n = mine.count_ones() as usize;
            let at = cursor[d];
            store_first(
                &mut outs[d][at..at + n],
                _mm512_maskz_compress_epi32(mine, v),
            );
            cursor[d] = at + n;
        }
    }
    super::group_one_by_one(chunks.remainder(), starts, outs, cursor);
}

/// The sixteen keys of `chunk`.
#[inline]
#[target_feature(enable = "avx512f")]
fn load(chunk: &[i32; LANES]) -> __m512i {
    // SAFETY: `chunk` is sixteen readable, initialised i32s, and the unaligned load reads
    // exactly those.
    unsafe { _mm512_loadu_si512(chunk.as_ptr().cast()) }
}

/// Write the first `dst.len()` (at most sixteen) lanes of `v` to `dst`.
#[inline]
#[target_feature(enable = "avx512f")]
fn store_first(dst: &mut [i32], v: __m512i) {
    debug_assert!(dst.len() <= LANES);
    let lanes = ((1u32 << dst.len()) - 1) as u16;
    // SAFETY: the mask enables exactly the first `dst.len()` lanes, which are the elements
    // of `dst`, borrowed exclusively; masked-off lanes are neither read nor written (and
    // cannot fault), so an empty `dst` writes nothing.
    unsafe { _mm512_mask_storeu_epi32(dst.as_mut_ptr(), lanes, v) }
}
