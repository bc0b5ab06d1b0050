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
//! and keeps its record of each pair stream in [`SenderSide`] and [`ReceiverSide`], which
//! the model's sender uses too, so the model and the code share the decisions. The sides
//! keep each position's place in the ring beside it, advanced by a subtraction: the
//! ring's length is no power of two, and a division per message costs tens of cycles.
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

/// The physical pieces of the `len` bytes from `place` (an offset in a ring of `ring`
/// bytes, or past its end by less than the ring: it wraps): `(offset in the ring, bytes)`,
/// the second empty unless the range crosses the end.
pub(crate) fn pieces(place: u64, len: usize, ring: u64) -> [(usize, usize); 2] {
    let at = wrap(place, ring);
    let first = (ring - at).min(len as u64) as usize;
    [(at as usize, first), (0, len - first)]
}

/// `place` (less than two rings) as an offset in the ring: a subtraction, where `%`
/// would divide (the ring's length is no power of two) on every message.
#[inline(always)]
pub(crate) fn wrap(place: u64, ring: u64) -> u64 {
    debug_assert!(place < 2 * ring);
    if place >= ring {
        place - ring
    } else {
        place
    }
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
/// every line starts clean. Places are offsets in the ring (below its length).
///
/// ```ignore
/// let mut lines = DataLines::new(ring);
/// if lines.clear_next(end_place) { /* store 0 at the next flag */ }
/// lines.wrote(start_place, footprint, ring);
/// ```
#[derive(Clone, Debug)]
pub(crate) struct DataLines(Box<[u64]>);

impl DataLines {
    /// A ring of `ring` bytes, all zero.
    pub(crate) fn new(ring: u64) -> DataLines {
        DataLines(vec![0; (ring / HEADER).div_ceil(64) as usize].into_boxed_slice())
    }

    fn bit(place: u64) -> (usize, u64) {
        let line = place / HEADER;
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

    /// Whether the sender must clear the next flag word at place `end` before publishing
    /// the message ending there (the word last held data); from then on it holds a flag.
    #[inline]
    pub(crate) fn clear_next(&mut self, end: u64) -> bool {
        let (word, bit) = Self::bit(end);
        let data = self.0[word] & bit != 0;
        self.0[word] &= !bit;
        data
    }

    /// The message of `footprint` bytes at place `start` is written: its header line
    /// holds a flag, every line after it data.
    #[inline]
    pub(crate) fn wrote(&mut self, start: u64, footprint: u64, ring: u64) {
        let (word, bit) = Self::bit(start);
        self.0[word] &= !bit;
        let data = footprint / HEADER - 1;
        if data > 0 {
            self.mark_data(start, data, ring);
        }
    }

    /// Mark the `data` lines after the header line at place `start`, in two runs where
    /// they cross the ring's end.
    #[inline(never)]
    fn mark_data(&mut self, start: u64, data: u64, ring: u64) {
        let (lines, first) = (ring / HEADER, start / HEADER + 1);
        let first = if first == lines { 0 } else { first };
        let run = data.min(lines - first);
        self.mark(first, first + run);
        self.mark(0, data - run);
    }
}

/// The sender's side of one pair stream: the sequence number and ring position of its
/// next message (and that position's place in the ring, kept so that no message divides),
/// the acknowledged position last loaded, and which lines hold data ([`DataLines`]).
#[derive(Clone, Debug)]
pub(crate) struct SenderSide {
    sent: u64,
    at: u64,
    place: u64,
    acknowledged: u64,
    lines: DataLines,
}

/// Where a message goes, as [`SenderSide::claim`] gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Slot {
    /// Its sequence number (the first, for a message that takes several).
    pub(crate) seq: u64,
    /// Its ring position and that position's place in the ring.
    pub(crate) start: u64,
    pub(crate) place: u64,
    /// The position where it ends (the next message's) and that position's place.
    pub(crate) end: u64,
    pub(crate) end_place: u64,
    /// Whether the flag word at `end_place` must be cleared before the message is
    /// published ([`DataLines::clear_next`]).
    pub(crate) clear_next: bool,
}

impl SenderSide {
    /// A fresh stream through a ring of `ring` bytes.
    pub(crate) fn new(ring: u64) -> SenderSide {
        SenderSide {
            sent: 0,
            at: 0,
            place: 0,
            acknowledged: 0,
            lines: DataLines::new(ring),
        }
    }

    /// Sequence numbers taken so far (the next message's).
    pub(crate) fn sent(&self) -> u64 {
        self.sent
    }

    /// The ring position of the next message.
    pub(crate) fn position(&self) -> u64 {
        self.at
    }

    /// The acknowledged position when last loaded (a lower bound of the receiver's).
    pub(crate) fn acknowledged(&self) -> u64 {
        self.acknowledged
    }

    /// The acknowledged position just loaded from the receiver's word.
    pub(crate) fn set_acknowledged(&mut self, acknowledged: u64) {
        self.acknowledged = acknowledged;
    }

    /// Whether a message of `footprint` bytes fits by the acknowledgement last loaded.
    #[inline]
    pub(crate) fn fits(&self, footprint: u64, ring: u64) -> bool {
        fits(self.acknowledged, self.at + footprint, ring)
    }

    /// Take the place of the next message, `footprint` bytes long and taking `numbers`
    /// sequence numbers (once it fits): the caller writes it there, clears the next flag
    /// if told, and publishes it.
    #[inline]
    pub(crate) fn claim(&mut self, footprint: u64, numbers: u64, ring: u64) -> Slot {
        let end_place = wrap(self.place + footprint, ring);
        let slot = Slot {
            seq: self.sent,
            start: self.at,
            place: self.place,
            end: self.at + footprint,
            end_place,
            clear_next: self.lines.clear_next(end_place),
        };
        self.lines.wrote(self.place, footprint, ring);
        self.sent += numbers;
        self.at = slot.end;
        self.place = end_place;
        slot
    }
}

/// The receiver's side of one pair stream: the sequence number, ring position and place
/// of the next message it takes.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ReceiverSide {
    /// Sequence numbers received so far (the next message's).
    pub(crate) received: u64,
    /// The ring position of the next message, and its place in the ring.
    pub(crate) at: u64,
    pub(crate) place: u64,
}

impl ReceiverSide {
    /// The message at the current position, `footprint` bytes long and taking `numbers`
    /// sequence numbers, has been taken; the position after it (to acknowledge).
    #[inline]
    pub(crate) fn took(&mut self, footprint: u64, numbers: u64, ring: u64) -> u64 {
        self.received += numbers;
        self.at += footprint;
        self.place = wrap(self.place + footprint, ring);
        self.at
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
        assert!(!lines.clear_next(HEADER));
        lines.wrote(8 * HEADER, 3 * HEADER, ring);
        // Its data lines ask for clearing, once; its header line and others do not.
        assert!(lines.clear_next(9 * HEADER));
        assert!(!lines.clear_next(9 * HEADER));
        assert!(lines.clear_next(0));
        assert!(!lines.clear_next(8 * HEADER));
        assert!(!lines.clear_next(HEADER));
        // A one-line message over an old data line makes it a flag's line again.
        lines.wrote(9 * HEADER, HEADER, ring);
        lines.wrote(0, HEADER, ring);
        assert!(!lines.clear_next(9 * HEADER));
        // Runs across words of the bitmap.
        let ring = 200 * HEADER;
        let mut lines = DataLines::new(ring);
        lines.wrote(60 * HEADER, 130 * HEADER, ring);
        let marked: Vec<u64> = (0..200)
            .filter(|&l| lines.clone().clear_next(l * HEADER))
            .collect();
        assert_eq!(marked, (61..190).collect::<Vec<_>>());
        lines.wrote(199 * HEADER, 4 * HEADER, ring);
        assert!(lines.clone().clear_next(0) && lines.clone().clear_next(2 * HEADER));
        assert!(!lines.clone().clear_next(199 * HEADER));
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

    /// The sides' places are their positions modulo the ring, lap after lap, for messages
    /// of every footprint up to the longest; a claim reports the clearing `DataLines` asks
    /// for; a message taking several sequence numbers advances by all of them.
    #[test]
    fn sides_keep_places_without_dividing() {
        let ring = ring_for_chunk(1024);
        let (mut sender, mut receiver) = (SenderSide::new(ring), ReceiverSide::default());
        let mut shadow = DataLines::new(ring);
        let mut seq = 0;
        for k in 0..5000u64 {
            let len = ((k * 7919) % 1100) as usize;
            let footprint = footprint(len.min(1024));
            let numbers = 1 + k % 3;
            let start = sender.position();
            let slot = sender.claim(footprint, numbers, ring);
            let end = start + footprint;
            let clear = shadow.clear_next(end % ring);
            shadow.wrote(start % ring, footprint, ring);
            let want = Slot {
                seq,
                start,
                place: start % ring,
                end,
                end_place: end % ring,
                clear_next: clear,
            };
            assert_eq!(slot, want, "message {k}");
            assert_eq!(receiver.place, receiver.at % ring);
            assert_eq!(receiver.took(footprint, numbers, ring), end);
            seq += numbers;
            assert_eq!((sender.sent(), receiver.received), (seq, seq));
            sender.set_acknowledged(end);
            assert!(sender.fits(footprint, ring));
        }
        assert!(sender.position() > 20 * ring, "many laps");
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
                    let mut side = SenderSide::new(RING);
                    for (seq, &start) in starts.iter().enumerate() {
                        let bytes = footprint(LENGTHS[seq] * HEADER as usize);
                        let end = start + bytes;
                        while !may_send(ack, end, RING).0 {
                            loom::thread::yield_now();
                        }
                        let slot = side.claim(bytes, 1, RING);
                        assert_eq!((slot.start, slot.end), (start, end));
                        if slot.clear_next {
                            lines[line(end)].store(0, Ordering::Relaxed);
                        }
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
