//! IS: integer sort (bucketed counting sort of keys from the NPB generator).
//!
//! Each rank generates its share of the global key sequence (jumping ahead to its own
//! offset). Each of the 10 timed iterations alters two keys, as the specification says,
//! and then ranks every key:
//! 1. count local keys per bucket, every key (`--variant count`, `tally`, `stream`) or a
//!    sample of them ([`SAMPLE_STRIDE`]; `--variant sample`, the default below 16 ranks);
//!    one allreduce sums the counts and carries the five test keys' values to everyone;
//! 2. assign contiguous bucket ranges to ranks so that each ranks about as much: about
//!    `N/P` keys, fewer where its range of key values is wide (the distribution's tails;
//!    [`RANGE_WEIGHT`]) (the same arithmetic everywhere, so no message is needed);
//! 3. each rank **puts its keys straight into the destinations' receive buffers**, then
//!    waits on its own semaphore for P signals (one-sided: no receive posted, no
//!    all-to-all handshake). With exact counts, an allgather of the per-destination counts
//!    gives each rank its offset in every destination's buffer; with a sample, each rank
//!    has a fixed slot in every destination, and an allgather after the keys tells every
//!    rank how many each slot holds (a slot that would overflow sends every rank back to
//!    the exact counts);
//! 4. count the keys over the rank's key range and prefix-sum them, which ranks every key.
//!    Either the receiver counts the keys it received (`count`, `sample`), or every sender
//!    has tallied its keys per value in step 1, in its segment, and the receiver sums the
//!    senders' tallies over its range (`tally`); the rank owning a test key's value checks
//!    its rank against the official one. From 16 ranks with AVX-512 the default counts
//!    every key, and step 3 writes each destination's keys a cache line at a time with
//!    non-temporal stores (`stream`): with many destinations a vector of keys scatters
//!    over many lines, and every partial store first reads a line its owner will read
//!    again.
//!
//! After timing, full verification sorts the keys by their ranks and checks order within
//! and across ranks.

use crate::NpbError;
use std::collections::BTreeMap;
use std::time::Instant;
use tessera::coll::{Allgather, Allreduce, Barrier};
use tessera::Blocking;

use tessera::{Context, Op, Phase, PhasedArray, Team};

use crate::report::Outcome;
use crate::rng::{mul_mod, pow_mod, randlc, A};
use crate::Class;

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;

/// Timed iterations.
const ITERATIONS: usize = 10;
/// Test keys checked every iteration.
const TESTS: usize = 5;
const SEED: u64 = 314_159_265;
/// Interleaved streams in the counting and grouping loops.
const CHUNKS: usize = 4;
variants! {
    /// How the owner of a key range counts its keys.
    pub enum Variant {
        /// `stream` from [`LINES_FROM`] ranks with AVX-512; else `sample` where it runs;
        /// else, below [`TALLY_BELOW`] ranks, `tally` where the key range is at most
        /// [`TALLY_LIMIT`]; otherwise `count`.
        Default => "default",
        /// Every sender tallies its keys per value; the owner sums the tallies over its
        /// range.
        Tally => "tally",
        /// The owner counts the keys it receives.
        Count => "count",
        /// `count`, with keys sent a cache line at a time by non-temporal stores (AVX-512;
        /// elsewhere the same as `count`).
        Stream => "stream",
        /// The owner counts the keys it receives, its range chosen from a sample of the
        /// keys and the keys grouped into fixed slots, with no pass counting every key
        /// before (with the vector grouping, up to 16 ranks with AVX-512 and 4 with AVX2,
        /// or from [`SLOTS_ONE_BY_ONE_FROM`] ranks; elsewhere the same as `count`).
        Sample => "sample",
    }
}

/// The ranking pass a variant runs here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pass {
    Tally,
    Count,
    Stream,
    Sample,
}

impl Pass {
    /// The pass of `variant` at `ranks` ranks with keys below `max_key`: the variant's own
    /// where this CPU runs it (`stream` needs AVX-512, and `sample` a vector grouping or
    /// [`SLOTS_ONE_BY_ONE_FROM`] ranks; else they count), and for the default `stream`
    /// from [`LINES_FROM`] ranks where it runs, else `sample` where it runs, else `tally`
    /// below [`TALLY_BELOW`] ranks where the key range is at most [`TALLY_LIMIT`], else
    /// `count`.
    fn of(variant: Variant, ranks: usize, max_key: usize) -> Pass {
        let lines = crate::simd::level() == crate::simd::Level::Avx512 && ranks <= 255;
        let slots = vector_grouping(ranks) || ranks >= SLOTS_ONE_BY_ONE_FROM;
        match variant {
            Variant::Tally => Pass::Tally,
            Variant::Count => Pass::Count,
            Variant::Stream if lines => Pass::Stream,
            Variant::Sample if slots => Pass::Sample,
            Variant::Stream | Variant::Sample => Pass::Count,
            Variant::Default if ranks >= LINES_FROM && lines => Pass::Stream,
            Variant::Default if slots => Pass::Sample,
            Variant::Default if ranks < TALLY_BELOW && max_key <= TALLY_LIMIT => Pass::Tally,
            Variant::Default => Pass::Count,
        }
    }
}

/// From this many ranks the `sample` pass runs where the vector grouping does not, grouping
/// one key at a time into the slots (with many destinations consecutive keys seldom share
/// a cursor). On a 2-core AMD EPYC (Zen 2, AVX2) class B's grouping step took 0.51–0.56 s
/// against the counted pass's grouping in interleaved chunks at 0.62–0.64, at 8 and at 16
/// ranks; at 2 ranks (`TESSERA_SIMD=scalar`) 0.71 against 0.55, so there it counts
/// (docs/PERFORMANCE.md, with the commands).
pub const SLOTS_ONE_BY_ONE_FROM: usize = 8;

/// One key in this many is counted per bucket to choose the owners' ranges in the
/// `sample` pass.
pub const SAMPLE_STRIDE: usize = 32;

/// Contiguous runs of keys the sample of the `sample` pass is taken from.
const SAMPLE_RUNS: usize = 64;

/// Keys grouped into slots between two checks that every slot has room for them.
const GROUP_BLOCK: usize = 4096;

/// What a ranking pass leaves for the partial verification: the first key value of this
/// rank's range and one past its last, how many keys lie below the range, and the test
/// keys' values (the histogram of the range is in [`State::histogram`]).
struct Ranked {
    lo: usize,
    hi: usize,
    below: u64,
    test_values: [u64; TESTS],
}

/// IS in the kernel registry.
pub struct Is;

impl crate::Benchmark for Is {
    fn name(&self) -> &'static str {
        "is"
    }
    fn variants(&self) -> &'static [&'static str] {
        Variant::NAMES
    }
    fn check_ranks(&self, ranks: usize) -> Result<(), NpbError> {
        if ranks.is_power_of_two() && ranks <= 128 {
            Ok(())
        } else {
            Err(NpbError::ranks(
                "is",
                ranks,
                format!("is runs on a power-of-two number of ranks up to 128, not {ranks}"),
            ))
        }
    }
    fn check_class(&self, class: Class, _variant: &str, ranks: usize) -> Result<(), NpbError> {
        // The specification's minimum for class D (its per-rank arrays pass 2³¹ bytes below
        // four ranks).
        if class == Class::D && ranks < 4 {
            return Err(NpbError::ClassLimit {
                kernel: "is",
                class,
                ranks,
                message: format!(
                    "is class D runs on at least 4 ranks (the specification's minimum), not {ranks}"
                ),
            });
        }
        Ok(())
    }
    fn footprint(&self, class: Class, ranks: usize) -> crate::Footprint {
        footprint(class, ranks)
    }
    fn run(&self, ctx: &Context, class: Class, variant: &str) -> tessera::Result<Option<Outcome>> {
        run(ctx, class, crate::parse_variant("is", variant)?)
    }
    /// IS is bound by memory: every iteration reads each key to count it, reads and writes
    /// it to send it to its owner, and the owner reads it to rank it (16 bytes per key; the
    /// cache-resident counters and tallies are not counted).
    fn demand(&self, class: Class, _outcome: &Outcome) -> crate::hardware::Demand {
        let keys =
            2f64.powi(crate::class_data(&CLASSES, |c| c.class, class).total_keys_log2 as i32);
        crate::hardware::Demand {
            resource: crate::hardware::Resource::MemoryBytes,
            amount: 16.0 * keys * ITERATIONS as f64,
            basis: "16 bytes per key per iteration".into(),
        }
    }
}
/// Largest key range (bytes of tally per rank) for which senders tally key values. The
/// tally competes for L2 with the keys streaming through. With the one-key-at-a-time
/// grouping, class A's 512 KiB tally gained 9 % and class B's 2 MiB tally lost 4 %; with
/// the vector grouping (less pressure beside the tally), B's tally is 0.325–0.35 s
/// against counting's 0.363–0.41 s at 2 ranks on a Xeon with 2 MiB of L2
/// (docs/PERFORMANCE.md), so B tallies too. On a Zen 4 with 1 MiB of L2 the two tie.
pub const TALLY_LIMIT: usize = 2 << 20;

/// Below this many ranks, where the `sample` pass does not run (the scalar level), the
/// default tallies (where the key range allows). On a 16-core Xeon (AVX-512, one rank per
/// core) counting beat tallying at 8 ranks by 1.28× for class B (0.31 s against 0.40;
/// NPB's OpenMP code 0.51–0.57 s in the same run) and 1.09× for class A; it also did at 2
/// and 4 ranks there (1.24–1.26×), where on the 2-core Intel host the tally was the faster
/// (docs/PERFORMANCE.md), so below 8 ranks the choice stays the tally.
pub const TALLY_BELOW: usize = 8;

/// From this many ranks the default sends keys a cache line at a time (`stream`). On a
/// 16-core Xeon (AVX-512, one rank per core) at 16 ranks it took class C from 0.89–0.98 s
/// to 0.76 and class B from 0.33 to 0.23 (where the tallies' summing over 16 senders also
/// cost more than counting); at 8 ranks the vector grouping stayed faster for class C
/// (0.99 s against 1.19) and level for B (docs/PERFORMANCE.md).
pub const LINES_FROM: usize = 16;

/// One class: log₂ of the key count, of the largest key and of the bucket count; the
/// test indices; the official ranks of the test keys per iteration.
pub struct ClassData {
    /// The class.
    pub class: Class,
    /// log₂(total keys).
    pub total_keys_log2: u32,
    /// log₂(largest key).
    pub max_key_log2: u32,
    /// log₂(buckets).
    pub buckets_log2: u32,
    /// The partial verification: global indices of the test keys, and their official
    /// ranks in iterations 1..=10 (`None` where this crate carries none).
    pub tests: Option<Tests>,
}

/// The test keys of a class: where they are, and their official ranks per iteration.
#[derive(Clone, Copy, Debug)]
pub struct Tests {
    /// Global indices of the test keys.
    pub index: [usize; TESTS],
    /// Official ranks of the test keys in iterations 1..=10.
    pub ranks: [[u64; TESTS]; ITERATIONS],
}

/// `histogram[v − lo]` = how many of `keys` are ≤ v, for every v in `range` (every key must
/// lie in it).
///
/// It counts in bytes first: the counters then take a quarter of the space (1 MiB per rank
/// at class B, inside L2) and the random increments hit the cache. A count above 255
/// wraps, which the total exposes (the byte counts then add up to less than the number of
/// keys); only then does it count again in 32 bits.
pub fn cumulative_counts(
    keys: &[i32],
    range: std::ops::Range<usize>,
    narrow: &mut Vec<u8>,
    histogram: &mut Vec<u32>,
) {
    cumulative_counts_of(&[keys], range, narrow, histogram);
}

/// [`cumulative_counts`] of the keys of every slice of `parts` together.
fn cumulative_counts_of(
    parts: &[&[i32]],
    range: std::ops::Range<usize>,
    narrow: &mut Vec<u8>,
    histogram: &mut Vec<u32>,
) {
    let lo = range.start;
    narrow.clear();
    narrow.resize(range.len(), 0);
    for keys in parts {
        for &k in *keys {
            let c = &mut narrow[k as usize - lo];
            *c = c.wrapping_add(1);
        }
    }
    // Every entry is overwritten below: resize without clearing.
    histogram.resize(range.len(), 0);
    let mut running = 0u32;
    for (h, &n) in histogram.iter_mut().zip(narrow.iter()) {
        running += u32::from(n);
        *h = running;
    }
    if running as usize != parts.iter().map(|keys| keys.len()).sum::<usize>() {
        histogram.fill(0);
        for &k in parts.iter().flat_map(|keys| keys.iter()) {
            histogram[k as usize - lo] += 1;
        }
        let mut running = 0;
        for h in histogram.iter_mut() {
            running += *h;
            *h = running;
        }
    }
}

/// Count `keys` per bucket (`key >> shift`) as [`CHUNKS`] interleaved streams, each with
/// its own table of counts in `counts`, so that increments of one counter do not form a
/// single serial chain (local key counts are powers of two, so the chunks are equal).
/// With `TALLY`, also add one to `tally[key]` (wrapping) for every key.
fn count_keys<const TALLY: bool>(keys: &[i32], shift: u32, counts: &mut [u32], tally: &mut [u8]) {
    let chunk = keys.len() / CHUNKS;
    let buckets = counts.len() / CHUNKS;
    counts.fill(0);
    let (c0, rest) = counts.split_at_mut(buckets);
    let (c1, rest) = rest.split_at_mut(buckets);
    let (c2, c3) = rest.split_at_mut(buckets);
    for i in 0..chunk {
        let (a, b, c, e) = (
            keys[i] as usize,
            keys[chunk + i] as usize,
            keys[2 * chunk + i] as usize,
            keys[3 * chunk + i] as usize,
        );
        c0[a >> shift] += 1;
        c1[b >> shift] += 1;
        c2[c >> shift] += 1;
        c3[e >> shift] += 1;
        if TALLY {
            tally[a] = tally[a].wrapping_add(1);
            tally[b] = tally[b].wrapping_add(1);
            tally[c] = tally[c].wrapping_add(1);
            tally[e] = tally[e].wrapping_add(1);
        }
    }
}

/// Group `keys` into `outs` by destination (`starts[d] <= key < starts[d + 1]` goes to
/// `outs[d]`, each filled from its start) with a vector grouping: AVX-512's
/// compress-store or AVX2's permutation table, whichever the chosen level has, where there
/// are few enough destinations; false (nothing written) otherwise.
#[cfg(target_arch = "x86_64")]
fn group_vectorised(
    keys: &[i32],
    starts: &[i32],
    outs: &mut [&mut [i32]],
    cursor: &mut [usize],
) -> bool {
    if avx512::available(outs.len()) {
        // SAFETY: `available` checked that this CPU has AVX-512F.
        unsafe { avx512::group(keys, starts, outs, cursor) };
    } else if avx2::available(outs.len()) {
        // SAFETY: `available` checked that this CPU has AVX2.
        unsafe { avx2::group(keys, starts, outs, cursor) };
    } else {
        return false;
    }
    true
}

/// Group `keys` by destination into slots that may be too short (`starts` are the
/// destinations' first buckets and one past the last; a key's bucket is `key >> shift`):
/// [`GROUP_BLOCK`] keys at a time while every slot has room for a whole block after its
/// cursor, with [`group_vectorised`] where it runs for this many destinations, else one
/// key at a time. Returns whether every key went out (else a prefix of `keys` did, and no
/// cursor passed its slot's end).
fn group_into_slots(
    keys: &[i32],
    starts: &[usize],
    shift: u32,
    outs: &mut [&mut [i32]],
    cursor: &mut [usize],
) -> bool {
    let p = outs.len();
    let vector = vector_grouping(p);
    let key_starts: Vec<i32> = starts.iter().map(|&b| (b << shift) as i32).collect();
    let mut destination = Vec::new();
    if !vector {
        destination.resize(starts[p], 0u32);
        for d in 0..p {
            destination[starts[d]..starts[d + 1]].fill(d as u32);
        }
    }
    for block in keys.chunks(GROUP_BLOCK) {
        let room = outs
            .iter()
            .zip(&*cursor)
            .all(|(o, &c)| o.len() - c >= block.len());
        if !room {
            return false;
        }
        if vector {
            // Where it did not run (it runs wherever `vector_grouping` says), the keys stay
            // where they are and the cursors say so: the caller finds keys missing.
            if !group_vectorised(block, &key_starts, outs, cursor) {
                return false;
            }
        } else {
            // With several destinations, consecutive keys seldom share a cursor, so its
            // increments rarely wait for each other.
            for &key in block {
                let d = destination[(key >> shift) as usize] as usize;
                outs[d][cursor[d]] = key;
                cursor[d] += 1;
            }
        }
    }
    true
}

/// Whether [`group_vectorised`] groups for `destinations` ranks at the chosen level.
#[cfg(target_arch = "x86_64")]
fn vector_grouping(destinations: usize) -> bool {
    avx512::available(destinations) || avx2::available(destinations)
}

/// Group `keys` into `outs` by destination a cache line at a time (AVX-512's
/// non-temporal stores; see `avx512::group_streaming`), where the chosen level is AVX-512
/// and there are at most 255 destinations; false (nothing written) otherwise. `starts`
/// are the destinations' first buckets and one past the last; a key's bucket is
/// `key >> shift`.
#[cfg(target_arch = "x86_64")]
fn group_by_lines(keys: &[i32], starts: &[usize], shift: u32, outs: &mut [&mut [i32]]) -> bool {
    let p = outs.len();
    if p > usize::from(u8::MAX) || crate::simd::level() != crate::simd::Level::Avx512 {
        return false;
    }
    let mut destination = vec![0u8; starts[p]];
    for d in 0..p {
        destination[starts[d]..starts[d + 1]].fill(d as u8);
    }
    let mut cursor = vec![0usize; p];
    // SAFETY: the level is AVX-512, so this CPU has AVX-512F.
    unsafe { avx512::group_streaming(keys, &destination, shift, outs, &mut cursor) };
    debug_assert!(cursor.iter().zip(outs.iter()).all(|(&c, o)| c == o.len()));
    true
}

/// No grouping by lines off x86-64.
#[cfg(not(target_arch = "x86_64"))]
fn group_by_lines(_: &[i32], _: &[usize], _: u32, _: &mut [&mut [i32]]) -> bool {
    false
}

/// No vector grouping off x86-64.
#[cfg(not(target_arch = "x86_64"))]
fn group_vectorised(_: &[i32], _: &[i32], _: &mut [&mut [i32]], _: &mut [usize]) -> bool {
    false
}

/// No vector grouping off x86-64.
#[cfg(not(target_arch = "x86_64"))]
fn vector_grouping(_destinations: usize) -> bool {
    false
}

/// Append every key of `keys` to `outs[d]` at `cursor[d]` (moving the cursor on) for
/// the `d` with `starts[d] <= key < starts[d + 1]`, one key at a time: the vector
/// groupings' tail.
#[cfg(target_arch = "x86_64")]
fn group_one_by_one(keys: &[i32], starts: &[i32], outs: &mut [&mut [i32]], cursor: &mut [usize]) {
    let p = outs.len();
    for &key in keys {
        let d = starts[1..p].partition_point(|&s| s <= key);
        outs[d][cursor[d]] = key;
        cursor[d] += 1;
    }
}

/// Add byte tallies into 32-bit counts.
fn add_tallies(counts: &mut [u32], tally: &[u8]) {
    for (c, &n) in counts.iter_mut().zip(tally) {
        *c += u32::from(n);
    }
}

/// Official parameters and verification values (NPB 3.4).
pub const CLASSES: [ClassData; 6] = [
    ClassData {
        class: Class::S,
        total_keys_log2: 16,
        max_key_log2: 11,
        buckets_log2: 9,
        tests: Some(Tests {
            index: [48427, 17148, 23627, 62548, 4431],
            ranks: [
                [1, 19, 347, 64916, 65462],
                [2, 20, 348, 64915, 65461],
                [3, 21, 349, 64914, 65460],
                [4, 22, 350, 64913, 65459],
                [5, 23, 351, 64912, 65458],
                [6, 24, 352, 64911, 65457],
                [7, 25, 353, 64910, 65456],
                [8, 26, 354, 64909, 65455],
                [9, 27, 355, 64908, 65454],
                [10, 28, 356, 64907, 65453],
            ],
        }),
    },
    ClassData {
        class: Class::W,
        total_keys_log2: 20,
        max_key_log2: 16,
        buckets_log2: 10,
        tests: Some(Tests {
            index: [357773, 934767, 875723, 898999, 404505],
            ranks: [
                [1248, 11697, 1039986, 1043895, 1048017],
                [1249, 11698, 1039985, 1043894, 1048016],
                [1250, 11699, 1039984, 1043893, 1048015],
                [1251, 11700, 1039983, 1043892, 1048014],
                [1252, 11701, 1039982, 1043891, 1048013],
                [1253, 11702, 1039981, 1043890, 1048012],
                [1254, 11703, 1039980, 1043889, 1048011],
                [1255, 11704, 1039979, 1043888, 1048010],
                [1256, 11705, 1039978, 1043887, 1048009],
                [1257, 11706, 1039977, 1043886, 1048008],
            ],
        }),
    },
    ClassData {
        class: Class::A,
        total_keys_log2: 23,
        max_key_log2: 19,
        buckets_log2: 10,
        tests: Some(Tests {
            index: [2112377, 662041, 5336171, 3642833, 4250760],
            ranks: [
                [104, 17523, 123928, 8288932, 8388264],
                [105, 17524, 123929, 8288931, 8388263],
                [106, 17525, 123930, 8288930, 8388262],
                [107, 17526, 123931, 8288929, 8388261],
                [108, 17527, 123932, 8288928, 8388260],
                [109, 17528, 123933, 8288927, 8388259],
                [110, 17529, 123934, 8288926, 8388258],
                [111, 17530, 123935, 8288925, 8388257],
                [112, 17531, 123936, 8288924, 8388256],
                [113, 17532, 123937, 8288923, 8388255],
            ],
        }),
    },
    ClassData {
        class: Class::B,
        total_keys_log2: 25,
        max_key_log2: 21,
        buckets_log2: 10,
        tests: Some(Tests {
            index: [41869, 812306, 5102857, 18232239, 26860214],
            ranks: [
                [33422936, 10245, 59150, 33135280, 100],
                [33422935, 10246, 59151, 33135279, 101],
                [33422934, 10247, 59152, 33135278, 102],
                [33422933, 10248, 59153, 33135277, 103],
                [33422932, 10249, 59154, 33135276, 104],
                [33422931, 10250, 59155, 33135275, 105],
                [33422930, 10251, 59156, 33135274, 106],
                [33422929, 10252, 59157, 33135273, 107],
                [33422928, 10253, 59158, 33135272, 108],
                [33422927, 10254, 59159, 33135271, 109],
            ],
        }),
    },
    ClassData {
        class: Class::C,
        total_keys_log2: 27,
        max_key_log2: 23,
        buckets_log2: 10,
        tests: Some(Tests {
            index: [44172927, 72999161, 74326391, 129606274, 21736814],
            ranks: [
                [61148, 882989, 266291, 133997594, 133525894],
                [61149, 882990, 266292, 133997593, 133525893],
                [61150, 882991, 266293, 133997592, 133525892],
                [61151, 882992, 266294, 133997591, 133525891],
                [61152, 882993, 266295, 133997590, 133525890],
                [61153, 882994, 266296, 133997589, 133525889],
                [61154, 882995, 266297, 133997588, 133525888],
                [61155, 882996, 266298, 133997587, 133525887],
                [61156, 882997, 266299, 133997586, 133525886],
                [61157, 882998, 266300, 133997585, 133525885],
            ],
        }),
    },
    // NPB writes D as 2^29 keys times MIN_PROCS = 4: 2^31 keys in all.
    ClassData {
        class: Class::D,
        total_keys_log2: 31,
        max_key_log2: 27,
        buckets_log2: 10,
        tests: None,
    },
];

/// Generate keys `first..first + out.len()` of the global sequence.
pub fn generate(first: usize, out: &mut [i32], max_key: usize) {
    let mut x = mul_mod(pow_mod(A, 4 * first as u64), SEED);
    let k = (max_key / 4) as f64;
    for key in out.iter_mut() {
        let r = randlc(&mut x, A) + randlc(&mut x, A) + randlc(&mut x, A) + randlc(&mut x, A);
        *key = (k * r) as i32;
    }
}

/// What a key value of a rank's range costs its ranking step, in keys: the step counts the
/// rank's keys into a byte per value of its range and sums those, so a wide range costs
/// beside the keys, more once its bytes outgrow the L2 cache. The keys' distribution is
/// bell-shaped: evenly split keys give the ranks at its tails ranges 10 times as wide as
/// the middle's. One thread timing each rank's ranking of class C split over 16 ranks (2-core
/// AMD EPYC, 1 MiB L2; `cargo run --release -p tessera-npb --example is_ranking_balance --
/// C 16`): the tails' 2.3 million values took 20.5 ms against 10-12.6 for the middle's 0.2
/// million, fitting about 1.3 ms per million keys and 4.1 per million values; weighting
/// each value as 3 keys, the slowest rank took 14.2-16.5 ms instead of 19.8-24.0 (two
/// runs; 8 ranks: 31.2 against 40.3). On 16 cores the slowest rank's ranking had taken
/// 1.6-1.9 times the mean (docs/PERFORMANCE.md).
pub const RANGE_WEIGHT: u64 = 3;

/// Contiguous bucket ranges per rank, balancing the ranking step's work: each bucket
/// costs its keys (`totals`) plus [`RANGE_WEIGHT`] per key value (`width` values per
/// bucket), and rank j's range ends at the bucket where the running cost first reaches
/// (j + 1)/P of the whole. Returns P + 1 boundaries (first bucket of each rank). No rank
/// receives more than (N + 3·max_key)/P keys and a bucket, under 1.5·N/P for every class
/// (max_key is at most N/16), within the receive buffers' 2·N/P.
///
/// ```
/// use tessera_npb::is::assign_buckets;
/// // Eight buckets of 4 key values each, bell-shaped, over 4 ranks: split by keys alone
/// // (25 each) rank 0 would take the sparse tail and a dense bucket and rank 1 nothing
/// // (0, 4, 4, 5, 8); with each value's cost the outer ranks take the tails.
/// let totals = [0, 2, 8, 30, 30, 8, 2, 0];
/// assert_eq!(assign_buckets(&totals, 4, 4), vec![0, 3, 4, 6, 8]);
/// // Two ranks split a symmetric distribution in the middle.
/// assert_eq!(assign_buckets(&totals, 2, 4), vec![0, 4, 8]);
/// ```
pub fn assign_buckets(totals: &[u64], ranks: usize, width: u64) -> Vec<usize> {
    let cost = |t: u64| t + RANGE_WEIGHT * width;
    let whole: u64 = totals.iter().map(|&t| cost(t)).sum();
    let mut starts = vec![0usize; ranks + 1];
    let (mut sum, mut j) = (0u64, 0usize);
    for (b, &t) in totals.iter().enumerate() {
        sum += cost(t);
        while j + 1 < ranks && sum >= (j as u64 + 1) * whole / ranks as u64 {
            j += 1;
            starts[j] = b + 1;
        }
    }
    for s in starts.iter_mut().skip(j + 1) {
        *s = totals.len();
    }
    starts[ranks] = totals.len();
    starts
}

/// What a rank of IS holds: its keys (private), and the receive buffer and tallies
/// (segment; keys are grouped straight into the receivers' buffers). The reference holds
/// three arrays of 1.5 times the keys.
pub fn footprint(class: Class, ranks: usize) -> crate::Footprint {
    let data = crate::class_data(&CLASSES, |c| c.class, class);
    let local = (1usize << data.total_keys_log2) / ranks;
    let key = size_of::<i32>();
    crate::Footprint {
        segment: (2 * local + (1 << data.buckets_log2)) * key + (1 << data.max_key_log2) + 1,
        private: local * key,
    }
}

/// Run IS at `class`; rank 0 gets the outcome.
pub fn run(ctx: &Context, class: Class, variant: Variant) -> tessera::Result<Option<Outcome>> {
    let data = crate::class_data(&CLASSES, |c| c.class, class);
    let world = Team::world(ctx)?;
    let (p, me) = (world.size(), world.rank());
    crate::Benchmark::check_ranks(&Is, p)?;
    let total = 1usize << data.total_keys_log2;
    let max_key = 1usize << data.max_key_log2;
    let buckets = 1usize << data.buckets_log2;
    let shift = data.max_key_log2 - data.buckets_log2;
    let local = total / p;
    let first = me * local;

    let mut keys = vec![0i32; local];
    generate(first, &mut keys, max_key);
    let pass = Pass::of(variant, p, max_key);
    let mut state = State {
        world: &world,
        data,
        keys,
        first,
        max_key,
        buckets,
        shift,
        // Room for every rank's keys twice over, as the reference allows.
        inbox: PhasedArray::new(&world, 2 * local + buckets)?,
        tallies: PhasedArray::new(&world, max_key + 1)?,
        pass,
        counts: vec![0u64; buckets + TESTS],
        chunk_counts: vec![0u32; CHUNKS * buckets],
        histogram: Vec::new(),
        narrow: Vec::new(),
        passed: 0,
        lo: 0,
        received: Vec::new(),
        phases: [0.0; PHASES.len()],
    };
    world.run(Barrier, Blocking)?;
    state.rank(1)?; // untimed
    state.passed = 0;
    state.phases = [0.0; PHASES.len()];
    world.run(Barrier, Blocking)?;
    let start = Instant::now();
    for iteration in 1..=ITERATIONS {
        state.rank(iteration)?;
    }
    let elapsed = world.run(
        Allreduce::value(start.elapsed().as_secs_f64(), Op::Max),
        Blocking,
    )?;
    crate::note_resident_share(); // every array is still held here

    // Each step's mean over the ranks and its longest (`count_max_s`, ...): where the
    // longest is well above the mean, the ranks wait for each other in the next step.
    let (mut sums, mut longest) = ([0.0; PHASES.len()], [0.0; PHASES.len()]);
    world.run(
        Allreduce::new(&state.phases, Op::Sum).to(&mut sums),
        Blocking,
    )?;
    world.run(
        Allreduce::new(&state.phases, Op::Max).to(&mut longest),
        Blocking,
    )?;
    let mut profile = BTreeMap::new();
    for ((name, sum), max) in PHASES.iter().zip(sums).zip(longest) {
        profile.insert(name.to_string(), sum / p as f64);
        let stem = name.strip_suffix("_s").unwrap_or(name);
        profile.insert(format!("{stem}_max_s"), max);
    }
    let sorted_ok = state.full_verify()?;
    let passed = world.run(
        Allreduce::value(state.passed + u64::from(sorted_ok), Op::Sum),
        Blocking,
    )?;
    if me != 0 {
        return Ok(None);
    }
    // Without official test ranks only the full sort is checked: its count is reported,
    // and the verification is not performed.
    let want = if data.tests.is_some() {
        TESTS * ITERATIONS + p
    } else {
        p
    } as u64;
    Ok(Some(Outcome {
        kernel: "IS".into(),
        class: class.to_string(),
        ranks: p,
        variant: variant.to_string(),
        time_s: elapsed,
        mops: (ITERATIONS * total) as f64 / elapsed / 1e6,
        verified: data.tests.map(|_| passed == want),
        values: BTreeMap::from([("passed_verifications".to_string(), passed as f64)]),
        reference: BTreeMap::from([("passed_verifications".to_string(), want as f64)]),
        size: total.to_string(),
        iterations: ITERATIONS as u64,
        operation: "keys ranked".into(),
        profile,
        ..Outcome::default()
    }))
}

struct State<'a> {
    world: &'a Team<'a>,
    data: &'static ClassData,
    keys: Vec<i32>,
    first: usize,
    max_key: usize,
    buckets: usize,
    shift: u32,
    /// Receive buffers: each rank's keys arrive here, grouped by sender.
    inbox: PhasedArray<'a, i32>,
    /// `max_key` byte counts per key value of this rank's keys, read by the ranks that own
    /// the values, and a flag byte set when a count wrapped.
    tallies: PhasedArray<'a, u8>,
    /// The kind of ranking pass: with `Tally` senders tally key values (else receivers
    /// count the keys they receive), with `Stream` keys go out a cache line at a time,
    /// and `Sample` tries [`State::pass_into_slots`] first.
    pass: Pass,
    /// Bucket counts, then the test keys' values.
    counts: Vec<u64>,
    /// Bucket counts per interleaved chunk.
    chunk_counts: Vec<u32>,
    /// Counts over this rank's key range, then their prefix sums (u32: half the cache
    /// footprint of u64, and no rank holds 2³² keys).
    histogram: Vec<u32>,
    /// Byte-wide counts for the first ranking pass.
    narrow: Vec<u8>,
    passed: u64,
    /// The last pass's first key value, and where its received keys lie in the receive
    /// buffer, for full verification.
    lo: usize,
    received: Vec<std::ops::Range<usize>>,
    /// Seconds spent in each of [`PHASES`] by this rank, over the passes so far.
    phases: [f64; PHASES.len()],
}

/// The steps of a ranking pass, as reported in the profile: counting (and tallying) the
/// local keys, the allreduce of the bucket counts, grouping keys into their destinations'
/// buffers, delivery (signals out, and the wait for every sender), and ranking the keys
/// of this rank's range.
const PHASES: [&str; 5] = ["count_s", "allreduce_s", "group_s", "deliver_s", "rank_s"];
/// Adds the time since its last lap to a step of the profile.
struct Stopwatch(Instant);

impl Stopwatch {
    fn lap(&mut self, phases: &mut [f64; PHASES.len()], step: usize) {
        let now = Instant::now();
        phases[step] += (now - self.0).as_secs_f64();
        self.0 = now;
    }
}

/// Positions in [`PHASES`].
const COUNT: usize = 0;
const ALLREDUCE: usize = 1;
const GROUP: usize = 2;
const DELIVER: usize = 3;
const RANK: usize = 4;

impl State<'_> {
    /// One ranking pass (`iteration` is 1-based), and the partial verification by the
    /// rank that owns each test key's value.
    fn rank(&mut self, iteration: usize) -> tessera::Result<()> {
        let local = self.keys.len();
        // The specification's alterations (global indices, held by rank 0).
        for (index, value) in [
            (iteration, iteration),
            (iteration + ITERATIONS, self.max_key - iteration),
        ] {
            if (self.first..self.first + local).contains(&index) {
                self.keys[index - self.first] = value as i32;
            }
        }
        let ranked = match self.pass {
            Pass::Sample => self.pass_into_slots()?,
            Pass::Tally | Pass::Count | Pass::Stream => None,
        };
        let ranked = match ranked {
            Some(ranked) => ranked,
            None => self.pass_counted()?,
        };
        self.lo = ranked.lo;
        let Some(tests) = self.data.tests else {
            return Ok(());
        };
        for (i, &k) in ranked.test_values.iter().enumerate() {
            let k = k as usize;
            if (ranked.lo..ranked.hi).contains(&k) {
                let less = ranked.below
                    + if k > ranked.lo {
                        u64::from(self.histogram[k - 1 - ranked.lo])
                    } else {
                        0
                    };
                if less == tests.ranks[iteration - 1][i] {
                    self.passed += 1;
                } else {
                    eprintln!(
                        "is: iteration {iteration}, test key {i} (value {k}): {less} keys below it, expected {}",
                        tests.ranks[iteration - 1][i]
                    );
                }
            }
        }
        Ok(())
    }

    /// Sum the bucket counts in [`State::counts`] over the ranks (the count step ends and
    /// the allreduce step is timed), with the test keys' values where this rank holds
    /// them; returns the sums (then the test keys' values) and every rank's first bucket,
    /// and one past the last ([`assign_buckets`]).
    fn sum_counts(&mut self, watch: &mut Stopwatch) -> tessera::Result<(Vec<u64>, Vec<usize>)> {
        let (local, buckets) = (self.keys.len(), self.buckets);
        let test_index = self.data.tests.map(|t| t.index).unwrap_or_default();
        for (i, &index) in test_index.iter().enumerate() {
            if self.data.tests.is_some() && (self.first..self.first + local).contains(&index) {
                self.counts[buckets + i] = self.keys[index - self.first] as u64;
            }
        }
        watch.lap(&mut self.phases, COUNT);
        let mut totals = vec![0u64; buckets + TESTS];
        self.world.run(
            Allreduce::new(&self.counts, Op::Sum).to(&mut totals),
            Blocking,
        )?;
        watch.lap(&mut self.phases, ALLREDUCE);
        let starts = assign_buckets(&totals[..buckets], self.world.size(), 1 << self.shift);
        Ok((totals, starts))
    }

    /// A ranking pass whose owners' ranges come from a sample of the keys, and whose keys
    /// go into fixed slots of the receivers' buffers, so that no pass counts every key
    /// before grouping it: every rank counts one key in [`SAMPLE_STRIDE`] per bucket, the
    /// allreduce sums the samples (and carries the test keys' values), and each rank groups
    /// its keys straight into its slot in every receiver, [`GROUP_BLOCK`] keys at a time
    /// while every slot has room for a whole block. `None` (every rank agrees) where the
    /// sample says a slot could fill up, or one did: the counted pass then ranks the keys.
    fn pass_into_slots(&mut self) -> tessera::Result<Option<Ranked>> {
        let (p, me) = (self.world.size(), self.world.rank());
        let (buckets, shift) = (self.buckets, self.shift);
        let local = self.keys.len();
        let mut watch = Stopwatch(Instant::now());
        // The sample: SAMPLE_RUNS runs of contiguous keys spread over the keys (a strided
        // sample would read a line per key), each sampled key standing for `weight`.
        self.counts.fill(0);
        let run = (local / SAMPLE_STRIDE / SAMPLE_RUNS).max(1);
        let weight = (local / (run * SAMPLE_RUNS)).max(1) as u64;
        for start in (0..local).step_by((local / SAMPLE_RUNS).max(1)) {
            for &k in &self.keys[start..(start + run).min(local)] {
                self.counts[k as usize >> shift] += weight;
            }
        }
        let (totals, starts) = self.sum_counts(&mut watch)?;
        // Every rank sends each owner about a P-th of the owner's keys; a slot keeps room
        // for two blocks more than the sample's largest.
        let capacity = self.inbox.len() / p;
        let largest = (0..p)
            .map(|d| totals[starts[d]..starts[d + 1]].iter().sum::<u64>() as usize / p)
            .max()
            .unwrap_or(0);
        if largest + 2 * GROUP_BLOCK > capacity {
            return Ok(None);
        }
        let mut exchange = self.inbox.exchange_slots(capacity)?;
        let mut outs = exchange.blocks()?;
        let mut cursor = vec![0usize; p];
        group_into_slots(&self.keys, &starts, shift, &mut outs, &mut cursor);
        drop(outs);
        watch.lap(&mut self.phases, GROUP);
        let sent = exchange.finish_filled(&cursor)?;
        watch.lap(&mut self.phases, DELIVER);
        if sent.chunks(p).any(|row| row.iter().sum::<usize>() != local) {
            return Ok(None); // a slot filled up: some sender's keys are not all out
        }
        let (lo, hi) = (starts[me] << shift, starts[me + 1] << shift);
        let below: usize = sent
            .chunks(p)
            .map(|row| row[..me].iter().sum::<usize>())
            .sum();
        self.received = (0..p)
            .map(|s| s * capacity..s * capacity + sent[s * p + me])
            .collect();
        let inbox = self.inbox.own()?;
        let parts: Vec<&[i32]> = self.received.iter().map(|r| &inbox[r.clone()]).collect();
        cumulative_counts_of(&parts, lo..hi, &mut self.narrow, &mut self.histogram);
        watch.lap(&mut self.phases, RANK);
        Ok(Some(Ranked {
            lo,
            hi,
            below: below as u64,
            test_values: totals[buckets..].try_into().expect("the test keys' values"),
        }))
    }

    /// A ranking pass that counts every key per bucket first: the owners' ranges and
    /// every block's length are then exact.
    fn pass_counted(&mut self) -> tessera::Result<Ranked> {
        let (p, me) = (self.world.size(), self.world.rank());
        let local = self.keys.len();
        // Bucket counts, plus the test keys' values where this rank holds them.
        //
        // Where the key range is small enough, the same loop tallies every key value in
        // bytes, into the tally array in the global address space: the rank owning
        // a value range then ranks its keys by summing the senders' tallies over it,
        // instead of counting the keys it receives one by one. A tally above 255 wraps; the
        // byte total then falls short of the key count, and the flag byte after the tally
        // makes every receiver count its keys instead.
        let (buckets, shift) = (self.buckets, self.shift);
        let chunk = local / CHUNKS;
        let mut watch = Stopwatch(Instant::now());
        // The owners read last pass's tallies until they all reach this barrier.
        if self.tallies.phase() == Phase::Shared {
            self.tallies.reclaim()?;
        }
        let tally = self.tallies.own()?;
        let (tally, wrapped) = tally.split_at_mut(self.max_key);
        if self.pass == Pass::Tally {
            tally.fill(0);
            count_keys::<true>(&self.keys, shift, &mut self.chunk_counts, tally);
            let tallied: usize = tally.iter().map(|&n| usize::from(n)).sum();
            wrapped[0] = u8::from(tallied != local);
        } else {
            count_keys::<false>(&self.keys, shift, &mut self.chunk_counts, &mut []);
        }
        self.counts.fill(0);
        for c in 0..CHUNKS {
            for (total, &n) in self.counts[..buckets]
                .iter_mut()
                .zip(&self.chunk_counts[c * buckets..(c + 1) * buckets])
            {
                *total += u64::from(n);
            }
        }
        if self.pass == Pass::Tally {
            // Tallies readable by every rank from here on (a barrier).
            self.tallies.share()?;
        }
        let (totals, starts) = self.sum_counts(&mut watch)?;
        // Keys per destination, per chunk.
        let chunk_dest = |c: usize, d: usize| -> usize {
            self.chunk_counts[c * buckets + starts[d]..c * buckets + starts[d + 1]]
                .iter()
                .map(|&n| n as usize)
                .sum()
        };
        let send: Vec<u64> = (0..p)
            .map(|d| (0..CHUNKS).map(|c| chunk_dest(c, d) as u64).sum())
            .collect();
        let mine: u64 = totals[starts[me]..starts[me + 1]].iter().sum();
        // This rank's block in every destination's receive buffer: the destination's
        // memory where it is mapped here (the smp and threads conduits map every peer),
        // so keys are stored straight into the global address space; else a staging
        // block that `finish` sends with a signalling put.
        let send_counts: Vec<usize> = send.iter().map(|&n| n as usize).collect();
        let mut exchange = self.inbox.exchange(&send_counts)?;
        let mut outs = exchange.blocks()?;
        // Group the local keys by destination: sixteen at a time at the AVX-512 level (up
        // to 16 destinations), eight at the AVX2 level (up to 4), else one at a time in the
        // chunks interleaved as above, each chunk with its own cursor per destination.
        let key_starts: Vec<i32> = starts.iter().map(|&b| (b << shift) as i32).collect();
        let mut cursor = vec![0usize; p];
        let grouped = (self.pass == Pass::Stream
            && group_by_lines(&self.keys, &starts, shift, &mut outs))
            || group_vectorised(&self.keys, &key_starts, &mut outs, &mut cursor);
        if !grouped {
            let mut destination = vec![0u32; buckets];
            for d in 0..p {
                destination[starts[d]..starts[d + 1]].fill(d as u32);
            }
            let mut cursor = vec![0usize; CHUNKS * p];
            for d in 0..p {
                let mut at = 0usize;
                for c in 0..CHUNKS {
                    cursor[c * p + d] = at;
                    at += chunk_dest(c, d);
                }
            }
            let keys = &self.keys[..];
            let (k0, rest) = cursor.split_at_mut(p);
            let (k1, rest) = rest.split_at_mut(p);
            let (k2, k3) = rest.split_at_mut(p);
            for i in 0..chunk {
                let (a, b, c, e) = (
                    keys[i],
                    keys[chunk + i],
                    keys[2 * chunk + i],
                    keys[3 * chunk + i],
                );
                let (da, db) = (
                    destination[(a >> shift) as usize] as usize,
                    destination[(b >> shift) as usize] as usize,
                );
                let (dc, de) = (
                    destination[(c >> shift) as usize] as usize,
                    destination[(e >> shift) as usize] as usize,
                );
                outs[da][k0[da]] = a;
                k0[da] += 1;
                outs[db][k1[db]] = b;
                k1[db] += 1;
                outs[dc][k2[dc]] = c;
                k2[dc] += 1;
                outs[de][k3[de]] = e;
                k3[de] += 1;
            }
        }
        // Deliver (a signal to every destination), and wait for every sender's keys.
        drop(outs);
        watch.lap(&mut self.phases, GROUP);
        exchange.finish()?;
        watch.lap(&mut self.phases, DELIVER);
        // Rank the received keys over this rank's key range.
        let (lo, hi) = (starts[me] << self.shift, starts[me + 1] << self.shift);
        let below: u64 = totals[..starts[me]].iter().sum();
        let mut wrapped = self.pass != Pass::Tally;
        for s in 0..p {
            if wrapped {
                break;
            }
            // Rank s set its flag before the barrier that shared the tallies.
            wrapped = self.tallies.peer(s, self.max_key..self.max_key + 1)?[0] != 0;
        }
        if !wrapped {
            self.histogram.clear();
            self.histogram.resize(hi - lo, 0);
            for s in 0..p {
                add_tallies(&mut self.histogram, &self.tallies.peer(s, lo..hi)?);
            }
            let mut running = 0u32;
            for h in self.histogram.iter_mut() {
                running += *h;
                *h = running;
            }
        } else {
            let received = &self.inbox.own()?[..mine as usize];
            cumulative_counts(received, lo..hi, &mut self.narrow, &mut self.histogram);
        }
        watch.lap(&mut self.phases, RANK);
        self.received = std::iter::once(0..mine as usize).collect();
        Ok(Ranked {
            lo,
            hi,
            below,
            test_values: totals[buckets..].try_into().expect("the test keys' values"),
        })
    }

    /// Place every key at its rank (as NPB's full verification does), check order on this
    /// rank and across the boundary with the previous rank.
    fn full_verify(&mut self) -> tessera::Result<bool> {
        let lo = self.lo;
        let inbox = self.inbox.own()?;
        let received: Vec<i32> = self
            .received
            .iter()
            .flat_map(|r| inbox[r.clone()].iter().copied())
            .collect();
        let count = received.len();
        let mut sorted = vec![0i32; count];
        let mut position = self.histogram.clone();
        for &k in received.iter().rev() {
            let slot = &mut position[k as usize - lo];
            *slot -= 1;
            sorted[*slot as usize] = k;
        }
        let ordered = sorted.windows(2).all(|w| w[0] <= w[1]);
        // First and last key of every rank (empty ranks report an empty range).
        let ends = [
            sorted.first().map_or(i64::MAX, |&k| k as i64),
            sorted.last().map_or(i64::MIN, |&k| k as i64),
        ];
        let mut all = vec![0i64; 2 * self.world.size()];
        self.world
            .run(Allgather::new(&ends).to(&mut all), Blocking)?;
        let me = self.world.rank();
        let previous_max = all[..2 * me]
            .chunks(2)
            .map(|e| e[1])
            .max()
            .unwrap_or(i64::MIN);
        let boundary = sorted.first().is_none_or(|&k| previous_max <= k as i64);
        let total: u64 = self
            .world
            .run(Allreduce::value(count as u64, Op::Sum), Blocking)?;
        Ok(ordered && boundary && total as usize == self.keys.len() * self.world.size())
    }
}

#[cfg(test)]
mod tests;
