//! The split copy of a long message read directly (see `model::team::channel`): both
//! ranks' cores copy it where the sender would otherwise only wait. An *offer* (the
//! sender's process, address and length, in the receiver's ring) carries a state word,
//! which the sender publishes as [`WAITING`] when the offer is the last thing its call
//! does, as [`PUSH`] when it receives in the same round and reads the data anyway in its
//! call (the schedule's choice), else as [`BUSY`].
//!
//! At [`PUSH`] the receiver posts its destination with an empty head ([`head_for`]): the
//! "tail" is the whole message, which the sender writes from its own buffer while it
//! waits for its own receives (each core reads its own data twice rather than its own
//! and its peer's). The receiver claims it only once [`PUSH_PATIENCE`] has passed
//! unclaimed. Everything below holds unchanged for an empty head. The receiver also
//! writes the head's length beside its destination, so the sender writes exactly the
//! rest.
//!
//! A receiver that finds [`BUSY`], that will combine the data segment by segment as it
//! arrives (a reduction's), or whose message is shorter than its threshold
//! ([`DEFAULT_SPLIT_FROM`] unless asked for from [`SPLIT_FROM`]: the half the sender wrote
//! sits in the sender's cache, which a reader of the data pays for where the whole would
//! have stayed in the receiver's; a 2-rank reduction's one whole message, combined once
//! it is all here, from [`SPLIT_FROM`]),
//! reads the whole message in one system call, as without splitting (a sender with work
//! of its own would come late to help, and the receiver would wait for it). One that
//! finds [`WAITING`] writes where the data goes (its process and address) beside the
//! state and stores [`POSTED`] with `Release` ([`post`]), then copies the *head*
//! ([`head_len`] bytes) itself. The *tail* goes to whichever side
//! claims it first, by a compare-and-swap from [`POSTED`]: the sender claims it
//! ([`SENDER_TAKES`], [`sender_claims`]), writes it into the receiver's memory and stores
//! [`SENDER_DONE`] with `Release` ([`sender_done`]); the receiver, having copied the head,
//! claims it if the sender has not ([`RECEIVER_TAKES`], [`receiver_claims`]) and copies it
//! too. Otherwise it waits until the state reads [`SENDER_DONE`] (loaded with `Acquire`)
//! and only then acknowledges the offer and hands its buffer back to the caller.
//!
//! Why this is safe: the sender's claim is an acquire of the receiver's `Release` of
//! [`POSTED`], so it reads the destination the receiver wrote before; its write of the tail
//! comes before its `Release` of [`SENDER_DONE`], which the receiver acquires before it
//! lets anything read or reuse the buffer, so the tail is in place and no write of the
//! sender's comes after the buffer is reused; exactly one side's compare-and-swap from
//! [`POSTED`] succeeds, so the tail is copied once, or, where the sender claimed it and its
//! write then failed, the sender stores [`POSTED`] back ([`sender_gives_back`]: it wrote
//! at most the same bytes) and the receiver claims it. A receiver that read the whole
//! message never posted, so the sender, which writes only after claiming from [`POSTED`],
//! never writes into it. The model below checks this under loom, from either first state:
//! the receiver ends with both parts in place and the sender never writes after the
//! receiver has reused its buffer (weakening the sender's `Release` of [`SENDER_DONE`]
//! fails it).
//!
//! The sender reads the state only while the offer is unacknowledged: until then the
//! receiver's ring keeps the offer where the sender wrote it.
//!
//! This module must never depend on the core or the conduits.

use std::sync::atomic::Ordering;

use super::Word;

/// The sender has work of its own before it waits: the receiver reads it all.
pub(crate) const BUSY: u64 = 0;
/// The sender only waits for the read: the receiver splits the copy.
pub(crate) const WAITING: u64 = 1;
/// The receiver has written its destination; the tail is unclaimed.
pub(crate) const POSTED: u64 = 2;
/// The sender is writing the tail.
pub(crate) const SENDER_TAKES: u64 = 3;
/// The receiver copies the tail itself.
pub(crate) const RECEIVER_TAKES: u64 = 4;
/// The sender has written the tail.
pub(crate) const SENDER_DONE: u64 = 5;
/// The sender receives in the same round, so its core copies anyway, and reads this data
/// anyway in its call (an allgather's own block, sent to every member and copied to its
/// own output; not an all-to-all's blocks, each read once): the receiver posts its
/// destination and leaves the whole message to the sender, which writes it from its own,
/// cache-hot buffer ([`PUSH_PATIENCE`]).
pub(crate) const PUSH: u64 = 6;

/// How long a receiver that left a whole message to its sender ([`PUSH`]) waits for the
/// sender to claim it before it copies the message itself. A sender in the same round
/// claims within microseconds; one that is off its core (more ranks than processors)
/// costs the receiver this much over reading at once. Measured on a Xeon with 2 MiB of L2
/// per core, two processes each copying their own 1 MiB block and exchanging 1 MiB took
/// 97-108 µs by writing (`process_vm_writev` from the hot buffer) against 118-153 µs by
/// reading the peer's.
pub(crate) const PUSH_PATIENCE: std::time::Duration = std::time::Duration::from_micros(50);

/// Messages of at least this many bytes may be split; shorter ones the receiver reads
/// whole in one system call.
pub(crate) const SPLIT_FROM: usize = 32 * 1024;

/// The receivers' threshold unless asked otherwise: from here a message is too large for
/// the receiver's cache to keep anyway, so the half the sender wrote costs a reader
/// nothing more (on a Xeon with 2 MiB of L2 per core, a broadcast of 1 MiB and a sum over
/// it took 60-84 µs split against 62-100 whole; at 256 KiB, 25-28 against 13).
pub(crate) const DEFAULT_SPLIT_FROM: usize = 1 << 20;

/// Bytes of a `bytes`-long message that the receiver copies itself: all of it below
/// [`SPLIT_FROM`], else half, rounded down to whole 4 KiB pages (each side then pins pages
/// of its own: measured on a Xeon, two processes copying one 1 MiB message in halves took
/// 17 µs against 49 µs for one `process_vm_readv`, and interleaved 8–16 KiB pieces were
/// slower than one read, docs/PERFORMANCE.md).
pub(crate) fn head_len(bytes: usize) -> usize {
    if bytes < SPLIT_FROM {
        bytes
    } else {
        (bytes / 2) & !4095
    }
}

/// What the receiver of an offer does on finding `state` there (loaded with `Acquire`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReceiverStep {
    /// The sender is busy: read the whole message.
    ReadWhole,
    /// Post the destination, copy the head, then try to claim the tail.
    Post,
    /// The head is in place and the tail unclaimed (a sender gave it back): claim it.
    Claim,
    /// The sender is writing the tail: come back later.
    Wait,
    /// The receiver claimed the tail in an earlier call that ended before copying it (a
    /// failing call withdrew a push): copy it.
    ReadRest,
    /// Both parts are in place: acknowledge.
    Finish,
}

/// The receiver's next step at `state`.
pub(crate) fn receiver_step(state: u64) -> ReceiverStep {
    match state {
        BUSY => ReceiverStep::ReadWhole,
        WAITING | PUSH => ReceiverStep::Post,
        POSTED => ReceiverStep::Claim,
        SENDER_TAKES => ReceiverStep::Wait,
        // Otherwise only ever seen by the receiver inside the call that set it.
        RECEIVER_TAKES => ReceiverStep::ReadRest,
        _ => ReceiverStep::Finish,
    }
}

/// The state an offer is published with: [`WAITING`] if its sender will only wait for it,
/// [`PUSH`] if it pushes (receives in the same round, and its data is hot), else
/// [`BUSY`].
pub(crate) fn first_state(sender_waits: bool, sender_pushes: bool) -> u64 {
    if sender_waits {
        WAITING
    } else if sender_pushes {
        PUSH
    } else {
        BUSY
    }
}

/// Bytes of a `bytes`-long message that a receiver which found `state` copies itself
/// before it offers the rest to the sender: none where the sender pushes ([`PUSH`]), else
/// [`head_len`].
pub(crate) fn head_for(state: u64, bytes: usize) -> usize {
    if state == PUSH {
        0
    } else {
        head_len(bytes)
    }
}

/// Receiver: the destination is written; the tail may be claimed.
#[cfg_attr(not(all(test, loom)), allow(dead_code))]
pub(crate) fn post<W: Word>(state: &W) {
    state.store(POSTED, Ordering::Release);
}

/// Sender: claim the tail; whether it is now the sender's to write.
#[cfg_attr(not(all(test, loom)), allow(dead_code))]
pub(crate) fn sender_claims<W: Word>(state: &W) -> bool {
    state.compare_exchange(POSTED, SENDER_TAKES, Ordering::AcqRel, Ordering::Acquire) == Ok(POSTED)
}

/// Sender: the tail is written.
#[cfg_attr(not(all(test, loom)), allow(dead_code))]
pub(crate) fn sender_done<W: Word>(state: &W) {
    state.store(SENDER_DONE, Ordering::Release);
}

/// Sender: the write failed (it wrote at most the right bytes); the receiver copies the
/// tail after all.
#[cfg_attr(not(all(test, loom)), allow(dead_code))]
pub(crate) fn sender_gives_back<W: Word>(state: &W) {
    state.store(POSTED, Ordering::Release);
}

/// Receiver: claim the tail; `Ok` if it is now the receiver's to copy, else the state
/// found (the sender's claim or its completion).
#[cfg_attr(not(all(test, loom)), allow(dead_code))]
pub(crate) fn receiver_claims<W: Word>(state: &W) -> Result<(), u64> {
    state
        .compare_exchange(POSTED, RECEIVER_TAKES, Ordering::AcqRel, Ordering::Acquire)
        .map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_messages_are_read_whole_and_long_ones_split_on_a_page() {
        assert_eq!(head_len(SPLIT_FROM - 8), SPLIT_FROM - 8);
        assert_eq!(head_len(SPLIT_FROM), SPLIT_FROM / 2);
        assert_eq!(head_len(1 << 20), 1 << 19);
        assert_eq!(head_len(100_000), 49_152);
        for bytes in [SPLIT_FROM, 40_000, 1 << 20, (1 << 20) + 8] {
            let head = head_len(bytes);
            assert!(
                head > 0 && head < bytes && head.is_multiple_of(4096),
                "{bytes}: {head}"
            );
        }
    }

    #[test]
    fn the_receiver_waits_only_while_the_sender_writes() {
        assert_eq!(
            receiver_step(first_state(false, false)),
            ReceiverStep::ReadWhole
        );
        assert_eq!(receiver_step(first_state(true, false)), ReceiverStep::Post);
        assert_eq!(receiver_step(first_state(false, true)), ReceiverStep::Post);
        assert_eq!(head_for(first_state(false, true), 1 << 20), 0);
        assert_eq!(head_for(first_state(true, false), 1 << 20), 1 << 19);
        assert_eq!(receiver_step(POSTED), ReceiverStep::Claim);
        assert_eq!(receiver_step(SENDER_TAKES), ReceiverStep::Wait);
        assert_eq!(receiver_step(SENDER_DONE), ReceiverStep::Finish);
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::atomic::AtomicU64;
    use loom::sync::Arc;

    const HEAD: u64 = 11;
    const TAIL: u64 = 22;
    const REUSED: u64 = 99;

    /// A receiver and a sender that may help (and whose write may fail once), the offer
    /// published as waiting, pushing or busy: the receiver returns with both parts in
    /// place, and the sender writes nothing after the receiver has reused its buffer. A
    /// receiver left to wait for a push looks twice before it claims the message (its
    /// patience running out).
    #[test]
    fn the_tail_is_copied_once_and_never_after_the_buffer_is_reused() {
        for (sender_fails, waits, pushes) in [
            (false, true, false),
            (true, true, false),
            (false, false, false),
            (false, false, true),
            (true, false, true),
        ] {
            let mut builder = loom::model::Builder::new();
            builder.preemption_bound = Some(3);
            builder.check(move || {
                let first = first_state(waits, pushes);
                // (state, destination word, the receiver's head and tail)
                let shared = Arc::new((
                    AtomicU64::new(first),
                    AtomicU64::new(0),
                    AtomicU64::new(0),
                    AtomicU64::new(0),
                ));
                let s = shared.clone();
                let sender = loom::thread::spawn(move || {
                    let (state, destination, _, tail) = &*s;
                    // Two looks, as a sender's wait loop would take.
                    for attempt in 0..2 {
                        if receiver_step(state.load(Ordering::Acquire)) == ReceiverStep::Claim
                            && sender_claims(state)
                        {
                            assert_eq!(destination.load(Ordering::Relaxed), 7);
                            if sender_fails && attempt == 0 {
                                sender_gives_back(state);
                                continue;
                            }
                            tail.store(TAIL, Ordering::Relaxed);
                            sender_done(state);
                            return;
                        }
                    }
                });
                let (state, destination, head, tail) = &*shared;
                let mut patience = 0;
                loop {
                    match receiver_step(state.load(Ordering::Acquire)) {
                        ReceiverStep::ReadWhole => {
                            head.store(HEAD, Ordering::Relaxed);
                            tail.store(TAIL, Ordering::Relaxed);
                            break;
                        }
                        ReceiverStep::Post => {
                            destination.store(7, Ordering::Relaxed);
                            post(state);
                            // An empty head where the sender pushes: it is in place.
                            head.store(HEAD, Ordering::Relaxed);
                            if head_for(first, 1 << 20) == 0 {
                                patience = 2;
                            }
                        }
                        ReceiverStep::Claim if patience > 0 => {
                            patience -= 1;
                            loom::thread::yield_now();
                        }
                        ReceiverStep::Claim => {
                            if receiver_claims(state).is_ok() {
                                tail.store(TAIL, Ordering::Relaxed);
                                break;
                            }
                        }
                        ReceiverStep::Finish => break,
                        ReceiverStep::ReadRest => {
                            tail.store(TAIL, Ordering::Relaxed);
                            break;
                        }
                        ReceiverStep::Wait => loom::thread::yield_now(),
                    }
                }
                assert_eq!(head.load(Ordering::Relaxed), HEAD);
                assert_eq!(tail.load(Ordering::Relaxed), TAIL);
                tail.store(REUSED, Ordering::Relaxed);
                sender.join().unwrap();
                assert_eq!(tail.load(Ordering::Relaxed), REUSED, "written after reuse");
            });
        }
    }
}
