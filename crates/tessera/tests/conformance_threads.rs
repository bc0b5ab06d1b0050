//! The conformance suite on the `threads` conduit at 1, 2, 3, 4 and 8 ranks (and the
//! active-message cases at 72).
//! (The `smp` conduit runs the same cases from `tessera selftest`; see the CLI's tests.)
//! The `hidden_peers` tests run them again with every peer treated as unmapped, the way a
//! conduit across hosts sees its peers.

use std::time::Duration;

use tessera::{conformance, Job};

fn run(ranks: usize) {
    run_with(ranks, false);
}

fn run_with(ranks: usize, hide_peers: bool) {
    Job::threads(ranks)
        .segment(16 << 20)
        .hide_peers(hide_peers)
        .wait_timeout(Duration::from_secs(60))
        .run(|ctx| conformance::run_all(ctx, None))
        .unwrap_or_else(|e| {
            panic!("conformance at {ranks} ranks (hidden peers: {hide_peers}): {e}")
        });
}

#[test]
fn conformance_1_rank() {
    run(1);
}

#[test]
fn conformance_2_ranks() {
    run(2);
}

#[test]
fn conformance_3_ranks() {
    run(3);
}

#[test]
fn conformance_4_ranks() {
    run(4);
}

#[test]
fn conformance_8_ranks() {
    run(8);
}

#[test]
fn conformance_hidden_peers_2_ranks() {
    run_with(2, true);
}

#[test]
fn conformance_hidden_peers_3_ranks() {
    run_with(3, true);
}

#[test]
fn conformance_hidden_peers_4_ranks() {
    run_with(4, true);
}

/// Above `DOORBELLS_FROM` (32) ranks, frames are announced in each receiver's doorbell
/// bitmap instead of every ring being polled: the cases that move everything through
/// active messages (peers hidden), on 72 ranks, so that senders span two of the bitmap's
/// 64-bit words.
#[test]
fn conformance_hidden_peers_72_ranks_through_doorbells() {
    let cases = [
        "put_get",
        "atomics",
        "signalling_put",
        "active_messages",
        "rpc",
        "barriers",
        "lock",
    ];
    Job::threads(72)
        .segment(16 << 20)
        .hide_peers(true)
        .wait_timeout(Duration::from_secs(60))
        .run(|ctx| {
            for case in cases {
                conformance::run_all(ctx, Some(case))?;
            }
            Ok(())
        })
        .unwrap_or_else(|e| panic!("conformance at 72 ranks through doorbells: {e}"));
}
