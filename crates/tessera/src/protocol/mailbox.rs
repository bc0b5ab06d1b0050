//! The team channel's handshake (see `model::channel`): per pair of members, messages
//! numbered `seq = 0, 1, 2, ...` alternate between two slots in the receiver's inbox.
//!
//! - The sender may fill the slot of message `seq` once the receiver has acknowledged
//!   message `seq − 2`, the slot's previous user: it loads the acknowledgement word with
//!   `Acquire` ([`may_send`]); two credits.
//! - It writes the data, signature and length, then stores `seq + 1` into the slot's flag
//!   with `Release` ([`publish`]).
//! - The receiver waits until the flag reads `seq + 1`, loaded with `Acquire`
//!   ([`arrived`]), copies the data out, and stores the count of messages it has consumed
//!   (`seq + 1`) into the sender's acknowledgement word with `Release` ([`acknowledge`]).
//!
//! The acquire of the acknowledgement orders the receiver's copy before the sender's next
//! write into the slot, so a message is never overwritten while it is read; the acquire of
//! the flag makes the data visible to the receiver. The model below checks the second and
//! the credit arithmetic under loom (weakening the flag's `Release`, or allowing a third
//! message in flight, fails it); the first is a load-to-store ordering, which loom does not
//! model (it never lets a load read a later store), so it rests on the argument above. The channel calls these functions on the values its global-pointer loads return
//! (those loads are `Acquire`, the signal stores `Release`), so the model and the code
//! share the decisions.
//!
//! This module must never depend on the core or the conduits.

use std::sync::atomic::Ordering;

use super::Word;

/// The slot (0 or 1) message `seq` uses.
pub(crate) fn slot_of(seq: u64) -> usize {
    (seq % 2) as usize
}

/// Whether message `seq` may be written, given the receiver's acknowledgement count.
pub(crate) fn may_send_after(acknowledged: u64, seq: u64) -> bool {
    seq < 2 || acknowledged + 2 > seq
}

/// Whether the flag value `flag` says message `seq` has arrived in its slot.
pub(crate) fn has_arrived(flag: u64, seq: u64) -> bool {
    flag == seq + 1
}

/// The flag value that publishes message `seq` (and the acknowledgement that consumes it).
pub(crate) fn published(seq: u64) -> u64 {
    seq + 1
}

/// Sender: [`may_send_after`] on the acknowledgement word, loaded with `Acquire`.
#[cfg_attr(not(all(test, loom)), allow(dead_code))]
pub(crate) fn may_send<W: Word>(ack: &W, seq: u64) -> bool {
    seq < 2 || may_send_after(ack.load(Ordering::Acquire), seq)
}

/// Sender: publish message `seq` (after writing its data).
#[cfg_attr(not(all(test, loom)), allow(dead_code))]
pub(crate) fn publish<W: Word>(flag: &W, seq: u64) {
    flag.store(published(seq), Ordering::Release);
}

/// Receiver: whether message `seq` has arrived.
#[cfg_attr(not(all(test, loom)), allow(dead_code))]
pub(crate) fn arrived<W: Word>(flag: &W, seq: u64) -> bool {
    has_arrived(flag.load(Ordering::Acquire), seq)
}

/// Receiver: message `seq` has been copied out.
#[cfg_attr(not(all(test, loom)), allow(dead_code))]
pub(crate) fn acknowledge<W: Word>(ack: &W, seq: u64) {
    ack.store(published(seq), Ordering::Release);
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::atomic::AtomicU64;
    use loom::sync::Arc;

    /// One sender, one receiver, four messages through the two slots: every message is
    /// received once, in order, with its own data (never the next user's of the slot).
    #[test]
    fn messages_arrive_in_order_and_are_never_overwritten_while_read() {
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = Some(3);
        builder.check(|| {
            // (flags, data words, acknowledgement)
            let shared = Arc::new((
                [AtomicU64::new(0), AtomicU64::new(0)],
                [AtomicU64::new(0), AtomicU64::new(0)],
                AtomicU64::new(0),
            ));
            const MESSAGES: u64 = 4;
            let sender = {
                let s = shared.clone();
                loom::thread::spawn(move || {
                    let (flags, data, ack) = &*s;
                    for seq in 0..MESSAGES {
                        while !may_send(ack, seq) {
                            loom::thread::yield_now();
                        }
                        data[slot_of(seq)].store(100 + seq, Ordering::Relaxed);
                        publish(&flags[slot_of(seq)], seq);
                    }
                })
            };
            let (flags, data, ack) = &*shared;
            for seq in 0..MESSAGES {
                while !arrived(&flags[slot_of(seq)], seq) {
                    loom::thread::yield_now();
                }
                assert_eq!(data[slot_of(seq)].load(Ordering::Relaxed), 100 + seq);
                acknowledge(ack, seq);
            }
            sender.join().unwrap();
        });
    }
}
