//! `tessera npb`: kernels verify over real processes, the report and JSON have the
//! documented shape, and bad arguments get one-line errors.

mod common;

#[test]
fn ep_verifies_over_processes_at_several_rank_counts() {
    for ranks in ["1", "2", "3"] {
        let f = common::run(
            common::tessera().args(["npb", "ep", "--class", "S", "-n", ranks, "--timeout", "120"]),
            150,
        );
        assert!(
            f.status.success(),
            "EP S at {ranks} ranks: {}\n{}",
            f.stdout,
            f.stderr
        );
        assert!(
            f.stdout
                .contains("Verification    =               SUCCESSFUL"),
            "{}",
            f.stdout
        );
        assert!(
            f.stdout
                .contains(&format!("Total processes =                        {ranks}")),
            "{}",
            f.stdout
        );
    }
}

#[test]
fn ep_json_and_class_w_on_threads() {
    let (_, o) = common::run_json(
        common::tessera().args([
            "npb",
            "ep",
            "--class",
            "W",
            "-n",
            "4",
            "--conduit",
            "threads",
        ]),
        150,
    );
    assert_eq!(o["kernel"], "EP");
    assert_eq!(o["class"], "W");
    assert_eq!(o["ranks"], 4);
    assert_eq!(o["variant"], "default");
    assert_eq!(o["verified"], true);
    assert!(o["time_s"].as_f64().unwrap() > 0.0 && o["mops"].as_f64().unwrap() > 0.0);
    for key in ["sx", "sy"] {
        let (v, r) = (
            o["values"][key].as_f64().unwrap(),
            o["reference"][key].as_f64().unwrap(),
        );
        assert!(((v - r) / r).abs() <= 1e-8, "{key}: {v} vs {r}");
    }
}

#[test]
fn is_verifies_over_processes_and_refuses_other_rank_counts() {
    for (class, ranks) in [("S", "1"), ("S", "4"), ("W", "2")] {
        let f = common::run(
            common::tessera().args([
                "npb",
                "is",
                "--class",
                class,
                "-n",
                ranks,
                "--timeout",
                "120",
            ]),
            150,
        );
        assert!(
            f.status.success(),
            "IS {class} at {ranks} ranks: {}\n{}",
            f.stdout,
            f.stderr
        );
        assert!(
            f.stdout
                .contains("Verification    =               SUCCESSFUL"),
            "{}",
            f.stdout
        );
    }
    let f = common::run(common::tessera().args(["npb", "is", "-n", "3"]), 20);
    assert_eq!(f.status.code(), Some(2));
    assert!(
        f.stderr
            .contains("is runs on a power-of-two number of ranks"),
        "{}",
        f.stderr
    );
}

#[test]
fn npb_all_prints_a_summary() {
    let f = common::run(
        common::tessera().args(["npb", "all", "--class", "S", "-n", "2"]),
        150,
    );
    assert!(f.status.success(), "{}", f.stderr);
    assert!(
        f.stdout.contains("EP Benchmark Completed.")
            && f.stdout.contains("IS Benchmark Completed.")
            && f.stdout.contains("CG Benchmark Completed."),
        "{}",
        f.stdout
    );
}

#[test]
fn bad_npb_arguments_name_what_is_allowed() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["npb", "xx"],
            "unknown kernel \"xx\"; available: ep, is, cg, mg, ft",
        ),
        (
            &["npb", "cg", "--variant", "fast"],
            "cg has no variant \"fast\"; variants: signal, barrier",
        ),
        (
            &["npb", "cg", "-n", "6"],
            "cg runs on a power-of-two number of ranks, not 6",
        ),
        (
            &["npb", "ep", "--class", "Q"],
            "unknown class \"Q\"; classes are S, W, A, B",
        ),
        (
            &["npb", "ep", "--variant", "fast"],
            "ep has no variant \"fast\"; variants: default",
        ),
        (&["npb", "lu"], "kernel lu is not implemented yet"),
        (
            &["npb", "ft", "--variant", "rows"],
            "ft has no variant \"rows\"; variants: slabs, packed, pencils, 2d",
        ),
        (
            &["npb", "ft", "--class", "W", "-n", "64", "--variant", "packed"],
            "ft --variant packed holds whole planes, so class W runs on at most 32 ranks that way; use --variant slabs or 2d for 64 ranks",
        ),
        (
            &["npb", "ft", "-n", "3"],
            "ft runs on a power-of-two number of ranks",
        ),
        (
            &["npb", "mg", "-n", "12"],
            "mg runs on a power-of-two number of ranks up to 1024, not 12",
        ),
        (
            &["npb", "mg", "--variant", "packed"],
            "mg has no variant \"packed\"; variants: 26msg, 6msg",
        ),
        // About 380 GiB: more than any machine these tests run on.
        (
            &["npb", "ft", "--class", "D", "-n", "4"],
            "GiB is available here; run a smaller class",
        ),
        (
            &["npb", "ft", "--class", "C", "-n", "2", "--json", "/nonexistent/ft.json"],
            "--json /nonexistent/ft.json: cannot write there",
        ),
    ];
    for (args, message) in cases {
        let f = common::run(common::tessera().args(*args), 20);
        assert_eq!(f.status.code(), Some(2), "{args:?}");
        assert!(
            f.stderr.contains(message),
            "{args:?}: expected {message:?} in {}",
            f.stderr
        );
        assert_eq!(f.stderr.trim().lines().count(), 1, "one line: {}", f.stderr);
    }
}

#[test]
fn cg_verifies_over_processes_in_both_variants() {
    verifies_over_processes(
        "cg",
        &[
            ("signal", "S", "2"),
            ("barrier", "S", "4"),
            ("signal", "S", "8"),
            ("signal", "W", "2"),
        ],
    );
}

#[test]
fn mg_verifies_over_processes_in_both_variants() {
    verifies_over_processes(
        "mg",
        &[
            ("26msg", "S", "2"),
            ("6msg", "S", "4"),
            ("26msg", "S", "8"),
            ("6msg", "W", "2"),
        ],
    );
}

#[test]
fn ft_verifies_over_processes_in_both_variants() {
    verifies_over_processes(
        "ft",
        &[
            ("slabs", "S", "2"),
            ("packed", "S", "4"),
            ("slabs", "S", "8"),
            ("packed", "W", "2"),
            ("pencils", "S", "4"),
        ],
    );
}

/// Run `kernel` over processes for each (variant, class, ranks) and expect a verified
/// report that names the variant and the rank count.
fn verifies_over_processes(kernel: &str, cases: &[(&str, &str, &str)]) {
    for &(variant, class, ranks) in cases {
        let f = common::run(
            common::tessera().args([
                "npb",
                kernel,
                "--class",
                class,
                "-n",
                ranks,
                "--variant",
                variant,
                "--timeout",
                "120",
            ]),
            150,
        );
        assert!(
            f.status.success(),
            "{kernel} {class} {variant} at {ranks} ranks: {}\n{}",
            f.stdout,
            f.stderr
        );
        for line in [
            "Verification    =               SUCCESSFUL".to_string(),
            format!("Variant         = {variant:>24}"),
            format!("Total processes = {ranks:>24}"),
        ] {
            assert!(f.stdout.contains(&line), "{line:?} in {}", f.stdout);
        }
    }
}

#[test]
fn npb_all_skips_kernels_that_cannot_run_at_the_rank_count() {
    let f = common::run(
        common::tessera().args(["npb", "all", "--class", "S", "-n", "3", "--timeout", "60"]),
        90,
    );
    assert!(f.status.success(), "{}\n{}", f.stdout, f.stderr);
    for k in ["IS", "CG", "MG", "FT"] {
        assert!(
            f.stderr.contains(&format!("npb: skipping {k}:")),
            "{k}: {}",
            f.stderr
        );
    }
    assert!(f.stdout.contains("EP Benchmark Completed"), "{}", f.stdout);
    assert!(f
        .stdout
        .contains("Verification    =               SUCCESSFUL"));
    assert!(!f.stdout.contains("MG Benchmark"), "{}", f.stdout);
}

/// `TESSERA_SIMD` lowers the level, the JSON says which ran with every rank's memory, a
/// level that is not one is refused before any rank starts, and a class that cannot fit
/// is refused naming what it needs.
#[test]
fn the_level_switch_memory_figures_and_up_front_refusals() {
    let (f, o) = common::run_json(
        common::tessera()
            .env("TESSERA_SIMD", "scalar")
            .args(["npb", "mg", "--class", "S", "-n", "2", "--bounds"]),
        150,
    );
    assert_eq!(o["simd"], "scalar");
    assert_eq!(o["verified"], true);
    for field in ["resident_share_bytes", "peak_rss_bytes"] {
        let each = o[field].as_array().unwrap();
        assert_eq!(each.len(), 2, "{field}: {o}");
        assert!(
            each.iter().all(|b| b.as_u64().unwrap() > 1 << 20),
            "{field}: {o}"
        );
    }
    assert!(
        f.stdout
            .contains("SIMD level      =                   scalar"),
        "{}",
        f.stdout
    );
    // MG is bound by memory: its demand is in bytes, and --bounds measured the limit.
    assert_eq!(o["demand"]["resource"], "memory_bytes", "{o}");
    let bound = &o["bound"];
    let (achieved, limit) = (
        bound["achieved_per_s"].as_f64().unwrap(),
        bound["limit_per_s"].as_f64().unwrap(),
    );
    assert!(achieved > 0.0 && limit > 1e8, "{o}");
    assert!((bound["fraction"].as_f64().unwrap() - achieved / limit).abs() < 1e-9);
    assert!(f.stdout.contains("Hardware bound"), "{}", f.stdout);

    let bad = common::run(
        common::tessera()
            .env("TESSERA_SIMD", "avx1024")
            .args(["npb", "ep", "--class", "S", "-n", "1"]),
        60,
    );
    assert!(!bad.status.success());
    assert!(
        bad.stderr.contains("TESSERA_SIMD") && bad.stderr.contains("avx2"),
        "{}",
        bad.stderr
    );

    let huge = common::run(
        common::tessera().args(["npb", "ft", "--class", "D", "-n", "2"]),
        60,
    );
    assert!(!huge.status.success());
    assert!(huge.stderr.contains("GiB of memory"), "{}", huge.stderr);
}

/// CG times each product form in its warm-up and reports the one it chose with every
/// candidate's time; at the scalar level only the portable form is a candidate.
#[test]
fn cg_reports_the_product_form_it_timed_and_chose() {
    for level in ["scalar", "auto"] {
        let mut cmd = common::tessera();
        if level == "scalar" {
            cmd.env("TESSERA_SIMD", "scalar");
        }
        let (_, o) = common::run_json(cmd.args(["npb", "cg", "--class", "S", "-n", "2"]), 150);
        assert_eq!(o["verified"], true, "{o}");
        let product = o["choices"]["product"].as_str().expect("a product choice");
        let (chosen, trials) = product.split_once(" (").expect("form (trials)");
        assert!(trials.contains(&format!("{chosen} ")), "{product}");
        assert!(trials.contains("portable "), "{product}");
        if level == "scalar" {
            assert_eq!(product.matches(" ms").count(), 1, "{product}");
        }
    }
}

/// MG's top level goes up in one sweep, in tiles of rows when its planes would overflow
/// the cache (`TESSERA_MG_FUSED` lowers the threshold; `0` goes stage by stage): tiles of
/// two rows and whole planes give the same norms bit for bit as stage by stage, where y is
/// one rank's (2 ranks) and where it is split (4 ranks).
#[test]
fn mg_one_sweep_up_equals_stage_by_stage_bit_for_bit() {
    for (class, ranks) in [("W", "2"), ("S", "4")] {
        let values = |fused: &str| {
            let mut cmd = common::tessera();
            cmd.env("TESSERA_MG_FUSED", fused);
            let (_, o) =
                common::run_json(cmd.args(["npb", "mg", "--class", class, "-n", ranks]), 150);
            assert_eq!(o["verified"], true, "{o}");
            o["values"].to_string()
        };
        let staged = values("0");
        for fused in ["1", "1000000000"] {
            assert_eq!(
                values(fused),
                staged,
                "MG {class} at {ranks} ranks, TESSERA_MG_FUSED={fused}"
            );
        }
    }
}

/// MG keeps x whole up to 16 ranks (8 ranks: 4 × 2 × 1) and takes NPB's grid where
/// `TESSERA_MG_GRID=npb` (2 × 2 × 2); both verify, the report names the grid, and a value
/// the variable does not take is refused by name before any rank starts.
#[test]
fn mg_names_its_process_grid_and_takes_npbs_on_request() {
    for (grid, expect) in [
        (None, "4 x 2 x 1 (z, y, x)"),
        (Some("npb"), "2 x 2 x 2 (z, y, x)"),
    ] {
        let mut cmd = common::tessera();
        if let Some(g) = grid {
            cmd.env("TESSERA_MG_GRID", g);
        }
        let (_, o) = common::run_json(cmd.args(["npb", "mg", "--class", "S", "-n", "8"]), 150);
        assert_eq!(o["verified"], true, "{o}");
        assert_eq!(o["choices"]["process grid"], expect, "{o}");
    }
    let f = common::run(
        common::tessera()
            .env("TESSERA_MG_GRID", "cube")
            .args(["npb", "mg", "--class", "S", "-n", "2"]),
        60,
    );
    assert_eq!(f.status.code(), Some(2), "{}", f.stderr);
    assert!(
        f.stderr.contains("TESSERA_MG_GRID") && f.stderr.contains("one of auto, npb"),
        "{}",
        f.stderr
    );
}

/// Long timed loops tell their progress on standard error once `TESSERA_NPB_PROGRESS`
/// seconds have passed (a line per tenth of the iterations, from rank 0 only); a short
/// run at the default says nothing; a bad value is a one-line error.
#[test]
fn long_runs_tell_their_progress() {
    let run = |value: Option<&str>| {
        let mut cmd = common::tessera();
        if let Some(v) = value {
            cmd.env("TESSERA_NPB_PROGRESS", v);
        }
        common::run(
            cmd.args(["npb", "cg", "--class", "S", "-n", "2", "--timeout", "60"]),
            90,
        )
    };
    let told = run(Some("0"));
    assert!(told.status.success(), "{}", told.stderr);
    let lines: Vec<&str> = told
        .stderr
        .lines()
        .filter(|l| l.starts_with("cg: iteration"))
        .collect();
    // 15 iterations in steps of 2: 2, 4, ..., 14 (one rank only).
    assert_eq!(lines.len(), 7, "{}", told.stderr);
    assert!(lines[0].starts_with("cg: iteration 2/15, "), "{}", lines[0]);
    let quiet = run(None);
    assert!(quiet.status.success(), "{}", quiet.stderr);
    assert!(!quiet.stderr.contains("cg: iteration"), "{}", quiet.stderr);
    let bad = run(Some("soon"));
    assert!(!bad.status.success());
    assert!(
        bad.stderr.contains(
            "TESSERA_NPB_PROGRESS=\"soon\" is invalid: \"soon\" is not a number of seconds"
        ),
        "{}",
        bad.stderr
    );
}
