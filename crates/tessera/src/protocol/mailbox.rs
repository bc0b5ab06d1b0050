//! The team channel's handshake (see `model::channel`): per pair of members, messages
//! numbered `seq = 0, 1, 2, ...` go one after another into a *ring* of bytes that the
//! receiver keeps for the sender, so that many short messages (a root's back-to-back
//! broadcasts of a few bytes) can be in flight at once, and long ones still pipeline two
//! chunks deep.
//!
//! Both sides count *positions*: bytes since the pair's first message, laps included (the
//! physical place is the position modulo the ring's length). A message of `len` bytes
//! takes [`footprint`]`(len)` bytes: a header of [`HEADER`] bytes (its flag word first,
//! the length word at `HEADER − 8`) and the data rounded up to whole cache lines, and the
//! next message starts where it ends. Data of at most [`INLINE`] bytes goes inside the
//! header, between the flag word and the signature (at [`INLINE_AT`]), so such a message
//! is one cache line. Positions and the ring's length are multiples of the header's, so a
//! header never crosses the ring's end; data may, in two pieces ([`pieces`]), and the ring
//! holds two of the longest chunks.
//!
//! - The sender may write a message occupying `[start, end)` once the receiver's
//!   acknowledged position leaves room for it and for the *next* message's flag word:
//!   `end + HEADER ≤ acknowledged + ring` ([`fits`]). It loads the acknowledgement word with
//!   `Acquire` ([`may_send`]); while a cached acknowledgement says there is room, it need
//!   not load it again.
//! - It clears the flag word at `end` (where the next message's header will go) if in an
//!   earlier lap that word held a message's data, since data can look like a flag; the
//!   sender is the ring's only writer and keeps, per line, whether its first word last
//!   held data ([`DataLines`]). A word that last held a flag holds `s + 1` for an earlier
//!   message `s`, never the next message's, so clearing it would only cost a store into a
//!   line the receiver is about to poll. It writes the data and the header, then stores
//!   `seq + 1` into the flag at `start` with `Release` ([`publish`]).
//! - The receiver waits until the flag at its position reads `seq + 1`, loaded with
//!   `Acquire` ([`arrived`]), copies the data out, and stores its new position (the
//!   message's end) into the sender's acknowledgement word with `Release`
//!   ([`acknowledge`]).
//!
//! Why the flag at the receiver's position never reads `seq + 1` early: before it
//! published message `seq − 1` (whose end it is), that word held zero or an earlier
//! message's flag (the sender cleared it if it held data), so the receiver, having
//! acquired that flag, reads one of those or a later store; and no later message can
//! overwrite the word before the receiver has acknowledged past it. The acquire of the
//! acknowledgement orders the receiver's copy before the sender's next write into the same
//! bytes, so a message is never overwritten while it is read; the acquire of the flag
//! makes the data visible to the receiver. The model below checks under loom that every
//! message arrives once, in order, with its own data, through a ring small enough to fill
//! and to split a message's data across its end, with data that mimics a later flag, and
//! a next flag left uncleared where it held a flag (leaving out the clearing store where
//! [`DataLines`] asks for it, or weakening the flag's `Release`, fails it). The first
//! ordering is a load-to-store
//! ordering, which loom does not model (it never lets a load read a later store), so it
//! rests on the argument above. The channel calls these functions on the values its
//! global-pointer loads return (those loads are `Acquire`, the signal stores `Release`),
//! so the model and the code share the decisions.
//!
//! This module must never depend on the core or the conduits.

use std::sync::atomic::Ordering;

use super::Word;

/// Bytes of a message header: the flag word, padding, the call's signature and the length
/// word last (one cache line). Every message starts on a multiple of it.
pub(crate) const HEADER: u64 = 64;

/// Data bytes a message carries inside its header line, between the flag word and the
/// signature and length words.
pub(crate) const INLINE: usize = HEADER as usize - 24;

/// Where inline data lies, from the message's start: just after the flag word, never on
/// a word where a flag is read. Longer data starts at [`HEADER`].
pub(crate) const INLINE_AT: usize = 8;

/// The ring length that holds two messages of `chunk` bytes at once (and the flag word
/// after them), so long messages pipeline as with double buffering.
pub(crate) fn ring_for_chunk(chunk: usize) -> u64 {
    2 * footprint(chunk) + HEADER
}

/// Bytes a message of `len` data bytes takes in the ring: its header, then its data lines
/// (none where the data is inline).
pub(crate) fn footprint(len: usize) -> u64 {
    if len <= INLINE {
        HEADER
    } else {
        HEADER + (len as u64).div_ceil(HEADER) * HEADER
    }
}

/// The physical pieces of the `len` bytes from `position` in a ring of `ring` bytes:
/// `(offset in the ring, bytes)`, the second empty unless the range crosses the end.
pub(crate) fn pieces(position: u64, len: usize, ring: u64) -> [(usize, usize); 2] {
    let at = position % ring;
    let first = (ring - at).min(len as u64) as usize;
    [(at as usize, first), (0, len - first)]
}

/// Whether the sender may write a message ending at `end` (and clear the flag word there)
/// when the receiver has acknowledged position `acknowledged`.
pub(crate) fn fits(acknowledged: u64, end: u64, ring: u64) -> bool {
    end + HEADER <= acknowledged + ring
}

/// Whether the flag value `flag` says message `seq` has arrived.
pub(crate) fn has_arrived(flag: u64, seq: u64) -> bool {
    flag == seq + 1
}

/// The flag value that publishes message `seq`.
pub(crate) fn published(seq: u64) -> u64 {
    seq + 1
}

/// The sender's record of which lines of one ring may hold data in their first word
/// (where a later message's flag can go), one bit per line. A new ring is all zeros, so
/// every line starts clean.
///
/// ```ignore
/// let mut lines = DataLines::new(ring);
/// if lines.clear_next(end, ring) { /* store 0 at `end` */ }
/// lines.wrote(start, end, ring);
/// ```
#[derive(Clone, Debug)]
pub(crate) struct DataLines(Box<[u64]>);

impl DataLines {
    /// A ring of `ring` bytes, all zero.
    pub(crate) fn new(ring: u64) -> DataLines {
        DataLines(vec![0; (ring / HEADER).div_ceil(64) as usize].into_boxed_slice())
    }

    fn bit(position: u64, ring: u64) -> (usize, u64) {
        let line = (position % ring) / HEADER;
        ((line / 64) as usize, 1 << (line % 64))
    }

    /// Mark lines `[from, to)` (indices, `to` at most the ring's line count) as data.
    fn mark(&mut self, from: u64, to: u64) {
        let mut line = from;
        while line < to {
            let (word, low) = ((line / 64) as usize, line % 64);
            let n = (64 - low).min(to - line);
            let bits = if n == 64 {
                u64::MAX
            } else {
                ((1u64 << n) - 1) << low
            };
            self.0[word] |= bits;
            line += n;
        }
    }

    /// Whether the sender must clear the next flag word at `end` before publishing the
    /// message ending there (the word last held data); from then on it holds a flag.
    pub(crate) fn clear_next(&mut self, end: u64, ring: u64) -> bool {
        let (word, bit) = Self::bit(end, ring);
        let data = self.0[word] & bit != 0;
        self.0[word] &= !bit;
        data
    }

    /// The message `[start, end)` is written: its header line holds a flag, every line
    /// after it data.
    pub(crate) fn wrote(&mut self, start: u64, end: u64, ring: u64) {
        let (word, bit) = Self::bit(start, ring);
        self.0[word] &= !bit;
        let data = (end - start) / HEADER - 1;
        if data == 0 {
            return;
        }
        let (lines, first) = (ring / HEADER, (start % ring) / HEADER + 1);
        // The data lines, in two runs where they cross the ring's end.
        let first = if first == lines { 0 } else { first };
        let run = data.min(lines - first);
        self.mark(first, first + run);
        self.mark(0, data - run);
    }
}

/// Sender: [`fits`] on the acknowledgement word, loaded with `Acquire`; the value loaded.
#[cfg_attr(not(all(test, loom)), allow(dead_code))]
pub(crate) fn may_send<W: Word>(ack: &W, end: u64, ring: u64) -> (bool, u64) {
    let acknowledged = ack.load(Ordering::Acquire);
    (fits(acknowledged, end, ring), acknowledged)
}

/// Sender: publish message `seq` after writing it.
#[cfg_attr(not(all(test, loom)), allow(dead_code))]
pub(crate) fn publish<W: Word>(flag: &W, seq: u64) {
    flag.store(published(seq), Ordering::Release);
}

/// Receiver: whether message `seq` has arrived at this flag.
#[cfg_attr(not(all(test, loom)), allow(dead_code))]
pub(crate) fn arrived<W: Word>(flag: &W, seq: u64) -> bool {
    has_arrived(flag.load(Ordering::Acquire), seq)
}

/// Receiver: every message before position `position` has been copied out.
#[cfg_attr(not(all(test, loom)), allow(dead_code))]
pub(crate) fn acknowledge<W: Word>(ack: &W, position: u64) {
    ack.store(position, Ordering::Release);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_longest_messages_fit_and_short_ones_pack_by_cache_line() {
        let chunk = 32 * 1024;
        let ring = ring_for_chunk(chunk);
        let (first, second) = (footprint(chunk), 2 * footprint(chunk));
        assert!(fits(0, second, ring), "two chunks in flight");
        assert!(!fits(0, second + footprint(1), ring));
        // In the steady state the third chunk needs only the first consumed.
        assert!(fits(first, second + first, ring));
        // Up to 40 bytes inside the header; then whole lines after it.
        assert_eq!(footprint(0), 64);
        assert_eq!(footprint(INLINE), 64);
        assert_eq!(footprint(INLINE + 1), 128);
        assert_eq!(footprint(65), 192);
        // Short messages: a thousand in flight before the first acknowledgement.
        let n = (0..)
            .take_while(|k| fits(0, (k + 1) * footprint(8), ring))
            .count();
        assert!(n > 1000, "{n}");
    }

    /// Inline data lies between the flag word and the signature and length words, never
    /// on a flag's word; longer data starts on the next line.
    #[test]
    fn inline_data_stays_between_the_flag_and_the_signature() {
        assert_eq!(INLINE_AT, 8);
        assert_eq!((INLINE_AT + INLINE) as u64, HEADER - 16);
    }

    /// Clearing is asked for exactly where an earlier message's data lay, and once.
    #[test]
    fn next_flags_are_cleared_only_over_earlier_data() {
        let ring = 10 * HEADER;
        let mut lines = DataLines::new(ring);
        // A 3-line message (header and two data lines) at line 8: data on lines 9 and 0.
        assert!(!lines.clear_next(11 * HEADER, ring));
        lines.wrote(8 * HEADER, 11 * HEADER, ring);
        // Its data lines ask for clearing, once; its header line and others do not.
        assert!(lines.clear_next(9 * HEADER, ring));
        assert!(!lines.clear_next(9 * HEADER, ring));
        assert!(lines.clear_next(10 * HEADER, ring));
        assert!(!lines.clear_next(8 * HEADER, ring));
        assert!(!lines.clear_next(HEADER, ring));
        // A one-line message over an old data line makes it a flag's line again.
        lines.wrote(9 * HEADER, 10 * HEADER, ring);
        lines.wrote(20 * HEADER, 21 * HEADER, ring);
        assert!(!lines.clear_next(9 * HEADER, ring));
        // Runs across words of the bitmap.
        let ring = 200 * HEADER;
        let mut lines = DataLines::new(ring);
        lines.wrote(60 * HEADER, 190 * HEADER, ring);
        let marked: Vec<u64> = (0..200)
            .filter(|&l| lines.clone().clear_next(l * HEADER, ring))
            .collect();
        assert_eq!(marked, (61..190).collect::<Vec<_>>());
        lines.wrote(199 * HEADER, 203 * HEADER, ring);
        assert!(lines.clone().clear_next(0, ring) && lines.clone().clear_next(2 * HEADER, ring));
        assert!(!lines.clone().clear_next(199 * HEADER, ring));
    }

    #[test]
    fn data_crossing_the_end_comes_in_two_pieces() {
        let ring = 1024;
        assert_eq!(pieces(896 + 64, 100, ring), [(960, 64), (0, 36)]);
        assert_eq!(pieces(1024 + 128, 100, ring), [(128, 100), (0, 0)]);
        assert_eq!(pieces(960, 64, ring), [(960, 64), (0, 0)]);
        // Room for the message and the next flag, counted from the acknowledgement.
        assert!(fits(128, 1088, ring));
        assert!(!fits(128, 1152, ring));
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::atomic::AtomicU64;
    use loom::sync::Arc;

    /// Cache lines in the model's ring, each one word: a header's flag or a data line.
    const LINES: usize = 5;
    const RING: u64 = LINES as u64 * HEADER;

    /// One sender, one receiver, messages of two, two, one and no data lines through a
    /// ring of five lines (so it fills, and the second message's data crosses the end):
    /// every message is received once, in order, with its own data. Each data word holds
    /// the flag value of the message whose header later lands on the same line (the
    /// third's lands on the first's data), so a receiver that took stale data for a flag
    /// would read the wrong message. The fourth message's flag word is not cleared before
    /// the third is published (it held the second's flag), so its receiver first finds an
    /// earlier flag there.
    #[test]
    fn messages_arrive_in_order_through_a_ring_that_fills() {
        const LENGTHS: [usize; 4] = [2, 2, 1, 0];
        let line = |position: u64| ((position % RING) / HEADER) as usize;
        // Positions do not depend on timing: compute them, and the adversarial data.
        let starts: Vec<u64> = LENGTHS
            .iter()
            .scan(0, |at, &n| {
                let start = *at;
                *at += footprint(n * HEADER as usize);
                Some(start)
            })
            .collect();
        let data_line = |seq: usize, k: usize| line(starts[seq] + HEADER * (k as u64 + 1));
        let mimic = |seq: usize, k: usize| {
            starts[seq + 1..]
                .iter()
                .position(|&later| line(later) == data_line(seq, k))
                .map_or(0, |later| published((seq + 1 + later) as u64))
        };
        assert!(
            line(starts[1]) + LENGTHS[1] >= LINES,
            "a message's data crosses the end"
        );
        assert_ne!(mimic(0, 0), 0, "data mimics a later flag");
        let ends = |seq: usize| starts[seq] + footprint(LENGTHS[seq] * HEADER as usize);
        assert_eq!(
            line(ends(2)),
            line(starts[1]),
            "a next flag over an earlier flag"
        );
        let data: Vec<Vec<u64>> = (0..LENGTHS.len())
            .map(|seq| (0..LENGTHS[seq]).map(|k| mimic(seq, k)).collect())
            .collect();
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = Some(3);
        builder.check(move || {
            // (line words, length words, acknowledgement)
            let shared = Arc::new((
                std::array::from_fn::<_, LINES, _>(|_| AtomicU64::new(0)),
                std::array::from_fn::<_, LINES, _>(|_| AtomicU64::new(0)),
                AtomicU64::new(0),
            ));
            let sender = {
                let (s, starts, data) = (shared.clone(), starts.clone(), data.clone());
                loom::thread::spawn(move || {
                    let (lines, lengths, ack) = &*s;
                    let mut data_lines = DataLines::new(RING);
                    for (seq, &start) in starts.iter().enumerate() {
                        let end = start + footprint(LENGTHS[seq] * HEADER as usize);
                        while !may_send(ack, end, RING).0 {
                            loom::thread::yield_now();
                        }
                        if data_lines.clear_next(end, RING) {
                            lines[line(end)].store(0, Ordering::Relaxed);
                        }
                        data_lines.wrote(start, end, RING);
                        for (k, &word) in data[seq].iter().enumerate() {
                            lines[line(start + HEADER * (k as u64 + 1))]
                                .store(word, Ordering::Relaxed);
                        }
                        lengths[line(start)].store(LENGTHS[seq] as u64, Ordering::Relaxed);
                        publish(&lines[line(start)], seq as u64);
                    }
                })
            };
            let (lines, lengths, ack) = &*shared;
            let mut position = 0;
            for (seq, &n) in LENGTHS.iter().enumerate() {
                while !arrived(&lines[line(position)], seq as u64) {
                    loom::thread::yield_now();
                }
                let len = lengths[line(position)].load(Ordering::Relaxed);
                assert_eq!(len, n as u64, "message {seq} has its own length");
                for (k, &want) in data[seq].iter().enumerate() {
                    let word =
                        lines[line(position + HEADER * (k as u64 + 1))].load(Ordering::Relaxed);
                    assert_eq!(word, want, "message {seq}'s own data");
                }
                position += footprint(n * HEADER as usize);
                acknowledge(ack, position);
            }
            sender.join().unwrap();
        });
    }
}
