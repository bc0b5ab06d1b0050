//! The conformance suite on the `threads` conduit at 1, 2, 3, 4 and 8 ranks.
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
