//! The schedule builder's unit tests: which messages are read directly, in chunks or by
//! rendezvous, and the sequence numbers they reserve.

use super::*;

/// A blocking schedule over `src` and `dst` (not yet built).
fn blocking<'b>(reserved: &mut Reserved, src: &'b [u64], dst: &'b mut [u64]) -> Schedule<'b, u64> {
    Schedule::new(
        reserved,
        Input::Borrowed(src),
        Output::Borrowed(dst),
        None,
        Signature(0),
    )
}

/// A long send is read directly unless a step of the same schedule writes its place:
/// a later one (the sender would change it under the reader) or an earlier one (what
/// the schedule just wrote is in the sender's cache; nothing to save). So from the
/// input always, from the output only where the schedule never writes, from scratch
/// never.
#[test]
fn a_long_send_is_read_directly_only_where_the_schedule_never_writes_its_place() {
    let chunk = 4096;
    let n = super::super::channel::DIRECT_FROM / 8; // u64s: just long enough
    let src = vec![1u64; n];
    let mut dst = vec![0u64; 5 * n];
    let mut reserved = Reserved::by_hand(vec![true, true]);
    let mut schedule = blocking(&mut reserved, &src, &mut dst);
    schedule.build(&mut reserved, chunk, false, |b| {
        b.scratch(2 * n)
            .local([Local::Copy {
                from: (Buf::Src, 0..n),
                to: (Buf::Dst, 2 * n..3 * n),
            }])
            .round(
                [
                    (1, (Buf::Src, 0..n)),
                    (1, (Buf::Tmp, n..2 * n)),
                    (1, (Buf::Dst, 4 * n..5 * n)),
                    (1, (Buf::Dst, 0..n)),
                    (1, (Buf::Dst, 3 * n..3 * n + 1)),
                    (1, (Buf::Dst, 2 * n..3 * n)),
                ],
                [],
                [],
            )
            // Later: a receive into the output after the short send, a copy over the end
            // of its first block.
            .round([], [(1, (Buf::Dst, 3 * n + 1..4 * n))], [])
            .round(
                [],
                [],
                [Local::Copy {
                    from: (Buf::Src, 0..n),
                    to: (Buf::Dst, n - 1..2 * n - 1),
                }],
            )
    });
    let direct: Vec<bool> = schedule.plan.messages[..6]
        .iter()
        .map(|m| m.direct)
        .collect();
    assert_eq!(direct, [true, false, true, false, false, false]);
    assert_eq!(schedule.plan.direct, 2);
    // The chunks' sequence numbers are reserved whichever way a message travels.
    let chunks = (8 * n).div_ceil(chunk) as u64;
    assert_eq!(reserved.send[1], 5 * chunks + 1);
}

/// A call sent through the mailbox (the team's way, or online tuning's for the call)
/// reads nothing directly, though the pair could: its long send from the input goes
/// in chunks, with the same sequence numbers.
#[test]
fn a_call_through_the_mailbox_reads_nothing_directly() {
    let chunk = 4096;
    let n = super::super::channel::DIRECT_FROM / 8;
    let src = vec![1u64; n];
    for via_mailbox in [false, true] {
        let mut reserved = Reserved::by_hand(vec![true, true]);
        let mut schedule = blocking(&mut reserved, &src, &mut []);
        schedule.build(&mut reserved, chunk, via_mailbox, |mut b| {
            assert_eq!(b.reads_directly(1), !via_mailbox);
            b.round([(1, (Buf::Src, 0..n))], [], [])
        });
        assert_eq!(schedule.plan.messages[0].direct, !via_mailbox);
        assert_eq!(schedule.plan.direct, usize::from(!via_mailbox));
        assert_eq!(reserved.send[1], (8 * n).div_ceil(chunk) as u64);
    }
}

/// A reduction tree's partial results go up in chunks even where the parent reads this
/// member directly and they are long enough to be read so (the parent combines them as
/// they arrive, and a direct read of each would leave it all the copying); except at 2
/// ranks, where the leaf's whole input is one message, read directly.
#[test]
fn a_reduction_trees_sends_up_travel_in_chunks_but_at_two_ranks_whole_and_direct() {
    use super::super::algorithms::{self, Call};
    use crate::model::team::{Algorithm, Collective};
    let chunk = 2 * super::super::channel::DIRECT_FROM;
    // u64s: long enough to go whole at 2 ranks, segments long enough to be read
    // directly.
    let n = algorithms::reduce::WHOLE_FROM / 8;
    let segments = algorithms::reduce::WHOLE_FROM / chunk;
    let src = vec![1u64; n];
    // Member 1 of 4, a leaf of the binomial tree rooted at 0; then member 1 of 2.
    for (ranks, want) in [(4, vec![(0, false); segments]), (2, vec![(0, true)])] {
        let mut reserved = Reserved::by_hand(vec![true; ranks]);
        let mut schedule = blocking(&mut reserved, &src, &mut []);
        schedule.build(&mut reserved, chunk, false, |b| {
            let call = Call::new(Algorithm::BINOMIAL, ranks, 1, n).rooted(0);
            algorithms::rounds(Collective::Reduce, b, call)
        });
        let sends: Vec<(usize, bool)> = schedule
            .plan
            .messages
            .iter()
            .map(|m| (m.peer, m.direct))
            .collect();
        assert_eq!(sends, want, "{ranks} ranks");
        assert_eq!(
            schedule.plan.direct,
            usize::from(ranks == 2),
            "{ranks} ranks"
        );
        assert!(ranks == 2 || schedule.plan.reusable());
    }
}

/// In a nonblocking schedule, a long send to a member that reads this one directly is
/// an offer of the place itself, wherever it is and whatever wrote it before, unless
/// a later step writes it (then chunks); to a member that does not, a rendezvous. Both
/// ends reserve the chunks' sequence numbers, or one for the rendezvous descriptor.
#[test]
fn a_nonblocking_long_send_is_offered_unless_written_later_and_staged_only_where_not_direct() {
    let chunk = 4096;
    let n = 2 * chunk / 8 + 1; // u64s: longer than two chunks
    let mut reserved = Reserved::by_hand(vec![true, true, false]);
    let mut schedule = Schedule::new(
        &mut reserved,
        Input::Owned(vec![1u64; n]),
        Output::Owned(vec![0u64; 3 * n]),
        None,
        Signature(0),
    );
    schedule.build(&mut reserved, chunk, false, |b| {
        b.scratch(n)
            .local([Local::Copy {
                from: (Buf::Src, 0..n),
                to: (Buf::Dst, 0..n),
            }])
            .round(
                [
                    (1, (Buf::Dst, 0..n)),
                    (1, (Buf::Tmp, 0..n)),
                    (1, (Buf::Dst, n..2 * n)),
                    (2, (Buf::Src, 0..n)),
                ],
                [(1, (Buf::Dst, 2 * n..3 * n))],
                [],
            )
            .round([], [(2, (Buf::Dst, 2 * n..3 * n))], [])
            .round(
                [],
                [],
                [Local::Copy {
                    from: (Buf::Src, 0..1),
                    to: (Buf::Dst, 2 * n - 1..2 * n),
                }],
            )
    });
    let kinds: Vec<(bool, bool)> = schedule.plan.messages[..6]
        .iter()
        .map(|m| (m.direct, m.rendezvous))
        .collect();
    assert_eq!(
        kinds,
        [
            (true, false),
            (true, false),
            (false, false),
            (false, true),
            (false, false),
            (false, true)
        ]
    );
    let chunks = (8 * n).div_ceil(chunk) as u64;
    assert_eq!(reserved.send[1..], [3 * chunks, 1]);
    assert_eq!(reserved.recv[1..], [chunks, 1]);
}
