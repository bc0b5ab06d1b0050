//! `tessera app`: every application verifies as a job on the smp and threads conduits at
//! 1–4 ranks on square and non-square grids, bad input is refused by name before a rank
//! starts, matrices that cannot be factored end the job naming the column, and (with the
//! scalapack feature) ScaLAPACK runs beside it over MPI.

mod common;

#[cfg(not(feature = "apps"))]
#[test]
fn without_the_apps_feature_the_command_says_how_to_get_it() {
    let f = app(&["lu"]);
    assert_eq!(f.status.code(), Some(2), "{}", f.stderr);
    assert!(
        f.stderr.contains("--features tessera-cli/apps"),
        "{}",
        f.stderr
    );
}

fn app(args: &[&str]) -> common::Finished {
    common::run(
        common::tessera()
            .arg("app")
            .args(args)
            .args(["--timeout", "100"]),
        120,
    )
}

#[cfg(feature = "apps")]
#[test]
fn every_application_verifies_as_a_job_on_several_grids() {
    for (ranks, grid, conduit) in [
        ("1", "1x1", "smp"),
        ("2", "2x1", "smp"),
        ("3", "1x3", "smp"),
        ("4", "2x2", "smp"),
        ("4", "1x4", "threads"),
    ] {
        for name in ["summa", "cholesky", "lu"] {
            let (f, json) = common::run_json(
                common::tessera().args([
                    "app",
                    name,
                    "-n",
                    ranks,
                    "--grid",
                    grid,
                    "--conduit",
                    conduit,
                    "--size",
                    "301",
                    "--block",
                    "24",
                    "--timeout",
                    "100",
                ]),
                120,
            );
            assert!(
                f.stdout
                    .contains("Verification            =               SUCCESSFUL"),
                "{}",
                f.stdout
            );
            assert_eq!(json["problem"]["n"], 301);
            assert!(json["outcome"]["residual"].as_f64().unwrap() < 16.0);
            assert!(json["dgemm_flops_per_core"].as_f64().unwrap() > 0.0);
        }
    }
}

#[cfg(feature = "apps")]
#[test]
fn summa_onesided_reads_owners_it_cannot_map_with_gets() {
    // Hidden peers: every panel not this rank's own comes by a get, as from another host.
    for (ranks, grid) in [("3", "1x3"), ("4", "2x2")] {
        let (f, json) = common::run_json(
            common::tessera().env("TESSERA_HIDE_PEERS", "1").args([
                "app",
                "summa",
                "--variant",
                "onesided",
                "-n",
                ranks,
                "--grid",
                grid,
                "--size",
                "301",
                "--block",
                "24",
                "--timeout",
                "100",
            ]),
            120,
        );
        assert!(f.stdout.contains("SUCCESSFUL"), "{}", f.stdout);
        assert_eq!(json["problem"]["variant"], "onesided");
    }
}

#[cfg(feature = "apps")]
#[test]
fn an_input_in_other_blocks_is_redistributed_first_and_timed_apart() {
    for name in ["summa", "cholesky", "lu"] {
        let (f, json) = common::run_json(
            common::tessera().args([
                "app",
                name,
                "-n",
                "3",
                "--grid",
                "1x3",
                "--size",
                "301",
                "--block",
                "24",
                "--input-block",
                "50",
                "--timeout",
                "100",
            ]),
            120,
        );
        assert!(f.stdout.contains("Redistribution"), "{}", f.stdout);
        assert!(f.stdout.contains("SUCCESSFUL"), "{}", f.stdout);
        assert_eq!(json["problem"]["input_block"], 50);
        assert!(json["outcome"]["redistribute_seconds"].as_f64().unwrap() > 0.0);
    }
}

#[cfg(feature = "apps")]
#[test]
fn bad_input_is_refused_by_name_before_any_rank_starts() {
    for (args, says) in [
        (
            vec!["lu", "--size", "0"],
            "--size 0: must be a positive integer",
        ),
        (
            vec!["lu", "--size", "-5"],
            "--size -5: must be a positive integer",
        ),
        (
            vec!["lu", "--size", "100", "--block", "101"],
            "block size 101 must be between 1 and the matrix size 100",
        ),
        (
            vec!["lu", "--input-block", "0"],
            "--input-block 0: must be a positive integer",
        ),
        (
            vec![
                "lu",
                "--size",
                "100",
                "--block",
                "10",
                "--input-block",
                "101",
            ],
            "input block size 101 must be between 1 and the matrix size 100",
        ),
        (
            vec!["lu", "-n", "4", "--grid", "2x3"],
            "a 2×3 process grid has 6 processes, but the job has 4 ranks",
        ),
        (vec!["lu", "--grid", "two"], "write the process grid as PxQ"),
        // Grids whose product wraps around to the rank count, and sizes whose matrices
        // wrap around to a small number of bytes, used to start and spin or panic.
        (
            vec![
                "summa",
                "-n",
                "2",
                "--size",
                "256",
                "--grid",
                "9223372036854775809x2",
            ],
            "each side of the process grid must be between 1 and 4096",
        ),
        (
            vec![
                "summa",
                "-n",
                "1",
                "--grid",
                "18446744073709551615x18446744073709551615",
            ],
            "each side of the process grid must be between 1 and 4096",
        ),
        (
            vec!["summa", "-n", "4", "--grid", "4611686018427387905x4"],
            "each side of the process grid must be between 1 and 4096",
        ),
        (
            vec!["summa", "-n", "4", "--size", "9223372036854775807"],
            "more than this machine can address",
        ),
        (
            vec!["summa", "-n", "2", "--size", "2147483648"],
            "more than this machine can address",
        ),
        (
            vec!["summa", "-n", "2", "--size", "3037000500"],
            "choose a smaller --size",
        ),
        (
            vec!["summa", "-n", "2", "--size", "4294967296"],
            "choose a smaller --size",
        ),
        (
            vec!["summa", "-n", "2", "--size", "200000"],
            "GiB is available",
        ),
        (vec!["qr"], "unknown application \"qr\""),
        (
            vec!["cholesky", "--variant", "prefetch"],
            "cholesky has no variant prefetch",
        ),
        (
            vec!["summa", "--matrix", "singular"],
            "summa takes no singular matrix",
        ),
        (
            vec!["lu", "--baseline", "scalapack"],
            if cfg!(feature = "scalapack") {
                "add --conduit mpi"
            } else {
                "built without ScaLAPACK"
            },
        ),
    ] {
        let f = app(&args);
        assert_eq!(f.status.code(), Some(2), "{args:?}: {}", f.stderr);
        assert!(f.stderr.contains(says), "{args:?}: {}", f.stderr);
    }
}

#[cfg(feature = "apps")]
#[test]
fn matrices_that_cannot_be_factored_end_the_job_naming_the_column() {
    for (name, matrix, says) in [
        (
            "cholesky",
            "indefinite",
            "not positive definite: the leading minor fails at column 50",
        ),
        ("lu", "singular", "singular: the pivot of column 50"),
    ] {
        let f = app(&[
            name, "-n", "4", "--size", "100", "--block", "8", "--matrix", matrix,
        ]);
        assert_eq!(f.status.code(), Some(2), "{}", f.stderr);
        assert!(f.stderr.contains(says), "{}", f.stderr);
        assert!(f.stdout.contains("UNSUCCESSFUL"), "{}", f.stdout);
    }
}

#[cfg(feature = "scalapack")]
#[test]
fn scalapack_runs_beside_each_application_over_mpi_and_passes_the_same_check() {
    for name in ["summa", "cholesky", "lu"] {
        let (f, json) = common::run_json(
            common::tessera().args([
                "app",
                name,
                "-n",
                "4",
                "--conduit",
                "mpi",
                "--size",
                "256",
                "--block",
                "32",
                "--baseline",
                "scalapack",
                "--timeout",
                "100",
            ]),
            120,
        );
        assert!(f.stdout.contains("ScaLAPACK / Tessera"), "{}", f.stdout);
        assert!(json["baseline"]["seconds"].as_f64().unwrap() > 0.0);
        // ScaLAPACK's result passes the same check as Tessera's: a real residual, small
        // (a wrong reading of its factors gives residuals of 1e10).
        let residual = json["baseline"]["residual"].as_f64().unwrap();
        assert!(
            residual > 0.0 && residual < 16.0,
            "{name}: ScaLAPACK residual {residual}"
        );
        assert!(
            f.stdout.contains("ScaLAPACK residual") && !f.stdout.contains("UNSUCCESSFUL"),
            "{}",
            f.stdout
        );
    }
}
