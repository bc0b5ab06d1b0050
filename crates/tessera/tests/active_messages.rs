//! Active messages under load: a flood through a deliberately small queue must deliver
//! every message, in order per sender, with the queue never growing (senders see
//! backpressure and make progress instead).

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;

use tessera::Job;

const MESSAGES: u64 = 100_000;

fn flood(ranks: usize) {
    Job::threads(ranks)
        .segment(4 << 20)
        .am_queue(4096) // 64 slots: far fewer than the messages in flight
        .wait_timeout(Duration::from_secs(60))
        .run(|ctx| {
            let received = Rc::new(Cell::new(0u64));
            let next_seq = Rc::new(RefCell::new(vec![0u64; ctx.ranks()]));
            let (r, n) = (received.clone(), next_seq.clone());
            let id = ctx.am_register("flood", move |_, msg| {
                let mut next = n.borrow_mut();
                let expected = next[msg.source()];
                if msg.args()[0] != expected {
                    return Err(tessera::Error::Application(
                        format!(
                            "from rank {}: got message {} before {expected}",
                            msg.source(),
                            msg.args()[0]
                        )
                        .into(),
                    ));
                }
                next[msg.source()] = expected + 1;
                r.set(r.get() + 1);
                Ok(())
            })?;
            ctx.barrier()?;
            // Every rank but 0 floods rank 0; rank 0 floods rank 1 at the same time, so
            // senders must drain their own queues while they wait for space.
            let dest = if ctx.rank() == 0 { 1 % ctx.ranks() } else { 0 };
            for seq in 0..MESSAGES {
                ctx.am_request_medium(dest, id, &[seq], &seq.to_le_bytes())?;
            }
            ctx.barrier()?;
            ctx.poll()?;
            let expect = if ctx.rank() == 0 {
                MESSAGES * (ctx.ranks() as u64 - 1)
            } else if ctx.rank() == 1 {
                MESSAGES
            } else {
                0
            };
            let got = received.get();
            if got != expect {
                return Err(format!(
                    "rank {} received {got} messages, expected {expect}",
                    ctx.rank()
                )
                .into());
            }
            if ctx.rank() != 0 && ctx.am_backpressure_events() == 0 {
                return Err(
                    "a 4 KiB queue absorbed 100000 messages without backpressure: is it bounded?"
                        .into(),
                );
            }
            Ok(())
        })
        .unwrap();
}

#[test]
fn flood_through_a_small_queue_2_ranks() {
    flood(2);
}

#[test]
fn flood_through_a_small_queue_5_ranks() {
    flood(5);
}

/// A barrier completes the active messages sent before it: once it returns, every handler
/// of every message sent before it has run on its target, and every reply has come back
/// (before, 576 of 3 million had not). Checked on the threads and smp code paths alike
/// (both use the same rings), with peers mapped and hidden.
#[test]
fn a_barrier_completes_the_active_messages_sent_before_it() {
    for hide in [false, true] {
        Job::threads(4)
            .segment(4 << 20)
            .am_queue(8192)
            .hide_peers(hide)
            .wait_timeout(Duration::from_secs(60))
            .run(|ctx| {
                let (handled, replies) = (Rc::new(Cell::new(0u64)), Rc::new(Cell::new(0u64)));
                let h = handled.clone();
                let echo = ctx.am_register("barrier.echo", move |ctx, msg| {
                    h.set(h.get() + 1);
                    ctx.am_reply_short(msg, tessera::AmHandlerId::of("barrier.back"), &[1])
                })?;
                let r = replies.clone();
                ctx.am_register("barrier.back", move |_, _| {
                    r.set(r.get() + 1);
                    Ok(())
                })?;
                ctx.barrier()?;
                const PER_PEER: u64 = 3000;
                for round in 0..5u64 {
                    for i in 0..PER_PEER {
                        for peer in (0..ctx.ranks()).filter(|&p| p != ctx.rank()) {
                            ctx.am_request_short(peer, echo, &[round, i])?;
                        }
                    }
                    ctx.barrier()?;
                    let expected = (round + 1) * PER_PEER * (ctx.ranks() as u64 - 1);
                    if handled.get() != expected || replies.get() != expected {
                        return Err(format!(
                            "after barrier {round}: {} of {expected} requests handled here, {} replies back",
                            handled.get(),
                            replies.get()
                        )
                        .into());
                    }
                    ctx.barrier()?;
                }
                Ok(())
            })
            .unwrap_or_else(|e| panic!("hide_peers={hide}: {e}"));
    }
}
