//! `tessera bench rma`, `coll` and `grid` produce JSON reports in the documented shape (smoke
//! runs with few iterations: the figures themselves are recorded in docs/PERFORMANCE.md, not
//! tested).

mod common;

use std::collections::BTreeSet;

#[test]
fn bench_rma_json_has_every_operation_and_baseline() {
    let (_, report) = common::run_json(
        common::tessera().args([
            "bench",
            "rma",
            "-n",
            "2",
            "--quick",
            "--barrier-ranks",
            "3",
            "--segment",
            "64M",
        ]),
        240,
    );
    assert!(
        report["system"]["cpu"].is_string() && report["system"]["cores"].as_u64().unwrap() >= 1
    );
    let results = report["results"].as_array().unwrap();
    let ops: BTreeSet<&str> = results.iter().map(|r| r["op"].as_str().unwrap()).collect();
    for op in [
        "put",
        "get",
        "put_nb",
        "get_nb",
        "put_signal",
        "put_then_flag",
        "am_roundtrip",
        "barrier",
    ] {
        assert!(ops.contains(op), "no {op} in {ops:?}");
    }
    for r in results {
        let metric = r["metric"].as_str().unwrap();
        assert!(metric == "latency_us" || metric == "bandwidth_mbs", "{r}");
        let v = r["value"].as_f64().unwrap();
        assert!(v.is_finite() && v > 0.0, "{r}");
        assert!(
            r["bytes"].is_u64() && r["ranks"].as_u64().unwrap() >= 2,
            "{r}"
        );
    }
    let barrier_ranks: BTreeSet<u64> = results
        .iter()
        .filter(|r| r["op"] == "barrier")
        .map(|r| r["ranks"].as_u64().unwrap())
        .collect();
    assert_eq!(barrier_ranks, BTreeSet::from([2, 3]));
    let memcpy = report["baselines"]["memcpy_bandwidth_mbs"]
        .as_object()
        .unwrap();
    for r in results.iter().filter(|r| r["metric"] == "bandwidth_mbs") {
        assert!(
            memcpy.contains_key(&r["bytes"].to_string()),
            "no memcpy baseline for {}",
            r["bytes"]
        );
    }
    assert!(
        report["baselines"]["cacheline_roundtrip_us"]
            .as_f64()
            .unwrap()
            > 0.0
    );
}

/// With the buffers on huge pages (the default) and in `Vec`s (`--plain-buffers`).
#[test]
fn bench_coll_json_has_tuned_and_every_algorithm_for_every_operation() {
    for extra in [&[][..], &["--plain-buffers"]] {
        common::bench_coll_checked(extra, 3, &["nonblocking"]);
    }
}

#[test]
fn bench_grid_json_has_every_strategy_and_the_copy_baseline() {
    let (f, report) = common::run_json(
        common::tessera().args(["bench", "grid", "-n", "3", "--quick", "--edge", "12"]),
        120,
    );
    assert!(
        f.stdout.contains("x the hand-packed exchange's time"),
        "{}",
        f.stdout
    );
    let results = report["results"].as_array().unwrap();
    let ops: Vec<(&str, &str)> = results
        .iter()
        .map(|r| (r["op"].as_str().unwrap(), r["metric"].as_str().unwrap()))
        .collect();
    assert_eq!(
        ops,
        [
            ("ghost_6msg", "latency_us"),
            ("ghost_26msg", "latency_us"),
            ("ghost_packed", "latency_us"),
            ("grid_copy", "bandwidth_mbs"),
            ("shared_address_phaseless", "latency_us"),
            ("shared_get_phaseless", "latency_us"),
            ("shared_address_general", "latency_us"),
            ("shared_get_general", "latency_us"),
        ]
    );
    // 12³ interior, 14³ with ghosts, 8-byte elements, 3 ranks.
    assert_eq!(results[0]["bytes"], (14 * 14 * 14 - 12 * 12 * 12) * 8);
    assert!(results
        .iter()
        .all(|r| r["ranks"] == 3 && r["value"].as_f64().unwrap() > 0.0));
    let copy_bytes = results[3]["bytes"].to_string();
    assert!(
        report["baselines"]["memcpy_bandwidth_mbs"][&copy_bytes]
            .as_f64()
            .unwrap()
            > 0.0
    );
    assert!(report["baselines"].get("cacheline_roundtrip_us").is_none());
}
