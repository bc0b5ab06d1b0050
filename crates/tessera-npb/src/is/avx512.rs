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
//! With many destinations the comparisons per vector grow with their number, and every
//! key's store is a partial store into a line another core will read. [`group_streaming`]
//! instead collects each destination's keys in a cache line of its own here and writes
//! each full line once, with a non-temporal store: no read of the destination line before
//! the write, and no line of this core's cache spent on data only its owner reads.
//!
//! Keys reach every destination in the same order as a one-at-a-time pass over `keys`
//! would put them there. This module must never be called on a CPU without AVX-512F (the
//! caller checks [`available`]).

use std::arch::x86_64::{
    __m512i, _mm512_cmpge_epi32_mask, _mm512_load_si512, _mm512_loadu_si512,
    _mm512_mask_storeu_epi32, _mm512_maskz_compress_epi32, _mm512_set1_epi32, _mm512_stream_si512,
    _mm_sfence,
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

/// One cache line of keys, aligned as a line.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([i32; LANES]);

/// Keys that fit in `out` from `at` up to its next 64-byte boundary (a whole line where
/// `at` sits on one).
fn to_boundary(out: &[i32], at: usize) -> usize {
    let address = out.as_ptr() as usize + at * size_of::<i32>();
    (64 - address % 64) / size_of::<i32>()
}

/// [`group`] by lines: append every key `k` of `keys` to `outs[d]` at `cursor[d]`, where
/// `d = destination[k >> shift]`, collecting each destination's keys in a line here and
/// writing every line that fills an aligned line of the destination with one
/// non-temporal store (the keys before a destination's first boundary and after its last
/// are copied as they are). Ends with a store fence, so that every key is visible before
/// any store the caller makes after it (the signal that delivers them): non-temporal
/// stores are not ordered with later ones without it. Every `outs[d]` must have room from
/// `cursor[d]` for its keys (a key past the end panics).
#[target_feature(enable = "avx512f")]
pub(super) fn group_streaming(
    keys: &[i32],
    destination: &[u8],
    shift: u32,
    outs: &mut [&mut [i32]],
    cursor: &mut [usize],
) {
    let p = outs.len();
    assert_eq!(cursor.len(), p, "one cursor per destination");
    let mut lines = vec![Line([0; LANES]); p];
    let mut fill = vec![0usize; p];
    let mut room: Vec<usize> = (0..p).map(|d| to_boundary(outs[d], cursor[d])).collect();
    for &key in keys {
        let d = usize::from(destination[(key >> shift) as usize]);
        let f = fill[d];
        lines[d].0[f] = key;
        if f + 1 < room[d] {
            fill[d] = f + 1;
            continue;
        }
        let at = cursor[d];
        let dst = &mut outs[d][at..at + f + 1];
        if f + 1 == LANES {
            stream_line(dst, &lines[d]);
        } else {
            dst.copy_from_slice(&lines[d].0[..f + 1]);
        }
        cursor[d] = at + f + 1;
        fill[d] = 0;
        room[d] = LANES;
    }
    for d in 0..p {
        let (at, n) = (cursor[d], fill[d]);
        outs[d][at..at + n].copy_from_slice(&lines[d].0[..n]);
        cursor[d] = at + n;
    }
    _mm_sfence();
}

/// Write `line` to `dst` (sixteen keys on a 64-byte boundary) with a non-temporal store.
#[inline]
#[target_feature(enable = "avx512f")]
fn stream_line(dst: &mut [i32], line: &Line) {
    assert!(dst.len() == LANES && (dst.as_ptr() as usize).is_multiple_of(64));
    // SAFETY: `line` is 64 bytes aligned to 64 (its type's alignment), `dst` is 64 bytes
    // borrowed exclusively and aligned to 64 (checked above), which is what the aligned
    // load and the non-temporal store need.
    unsafe {
        let v = _mm512_load_si512(line.0.as_ptr().cast());
        _mm512_stream_si512(dst.as_mut_ptr().cast(), v);
    }
}
