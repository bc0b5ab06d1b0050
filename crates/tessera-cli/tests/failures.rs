//! The launcher's failure handling, with real processes: a rank killed in the middle of a
//! barrier, a panicking rank, a rank returning an error, a rank exiting non-zero, Ctrl-C to
//! the launcher, and bad command lines. Each test is bounded in time.

mod common;

use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

#[test]
fn sigkill_in_a_barrier_ends_the_job_and_leaves_nothing_behind() {
    let scratch = common::temp_dir("sigkill");
    let dir = scratch.path().to_path_buf();
    let ranks = 4;
    let child = common::spawn(
        common::tessera()
            .args(["run", "-n", "4", "--"])
            .arg(common::example("failure_demo"))
            .args(["--forever", "--pid-dir", dir.to_str().unwrap()]),
    );
    let (pids, job) = common::wait_for_ranks(&dir, ranks);
    assert!(!job.is_empty(), "ranks did not see a job id");
    // Every rank attached, so every name is already unlinked.
    assert!(
        common::shm_objects(&job).is_empty(),
        "objects still named after attach: {:?}",
        common::shm_objects(&job)
    );
    std::thread::sleep(Duration::from_millis(100)); // well inside the barrier loop
    let killed_at = Instant::now();
    kill(Pid::from_raw(pids[2]), Signal::SIGKILL).unwrap();
    let f = common::finish(child, Duration::from_secs(20));
    let took = killed_at.elapsed();
    assert!(
        took < Duration::from_secs(5),
        "launcher took {took:?} to end the job"
    );
    assert!(!f.status.success());
    assert!(
        f.stderr.contains("rank 2 was killed by signal 9 (SIGKILL)"),
        "stderr: {}",
        f.stderr
    );
    for pid in pids {
        assert!(!common::alive(pid), "rank process {pid} survived the job");
    }
    assert!(
        common::shm_objects(&job).is_empty(),
        "shared memory left: {:?}",
        common::shm_objects(&job)
    );
}

#[test]
fn a_panicking_rank_is_named_and_the_others_end() {
    let f = common::run(
        common::tessera()
            .args(["run", "-n", "3", "--"])
            .arg(common::example("failure_demo"))
            .args(["--forever", "--barriers", "200", "--panic-rank", "2"]),
        30,
    );
    // The rank catches its panic, says why, and exits 1; the launcher names the rank.
    assert_eq!(f.status.code(), Some(1), "stderr: {}", f.stderr);
    assert!(
        f.stderr
            .contains("rank 2 failed: panicked: rank 2 panics on purpose"),
        "stderr: {}",
        f.stderr
    );
    assert!(
        f.stderr.contains("rank 2 exited with status 1"),
        "stderr: {}",
        f.stderr
    );
}

#[test]
fn a_rank_error_and_exit_status_propagate() {
    let f = common::run(
        common::tessera()
            .args(["run", "-n", "2", "--"])
            .arg(common::example("failure_demo"))
            .args(["--exit-rank", "1", "--code", "3"]),
        30,
    );
    assert_eq!(f.status.code(), Some(3), "stderr: {}", f.stderr);
    assert!(
        f.stderr.contains("rank 1 exited with status 3"),
        "stderr: {}",
        f.stderr
    );

    let f = common::run(
        common::tessera()
            .args(["run", "-n", "2", "--"])
            .arg(common::example("failure_demo"))
            .args(["--error-rank", "0"]),
        30,
    );
    assert_eq!(f.status.code(), Some(1));
    assert!(
        f.stderr
            .contains("rank 0 failed: rank 0 returns an error on purpose"),
        "stderr: {}",
        f.stderr
    );
}

#[test]
fn threads_conduit_names_the_failing_rank() {
    let f = common::run(
        common::tessera()
            .args(["run", "--conduit", "threads", "-n", "4", "--"])
            .arg(common::example("failure_demo"))
            .args(["--forever", "--barriers", "100", "--panic-rank", "3"]),
        30,
    );
    assert_eq!(f.status.code(), Some(1), "stderr: {}", f.stderr);
    assert!(
        f.stderr
            .contains("rank 3 failed: panicked: rank 3 panics on purpose"),
        "stderr: {}",
        f.stderr
    );
}

#[test]
fn sigterm_to_the_launcher_ends_the_whole_job() {
    let scratch = common::temp_dir("sigterm");
    let dir = scratch.path().to_path_buf();
    let child = common::spawn(
        common::tessera()
            .args(["run", "-n", "3", "--"])
            .arg(common::example("failure_demo"))
            .args(["--forever", "--pid-dir", dir.to_str().unwrap()]),
    );
    let (pids, job) = common::wait_for_ranks(&dir, 3);
    kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).unwrap();
    let f = common::finish(child, Duration::from_secs(10));
    assert_eq!(f.status.code(), Some(128 + 15), "stderr: {}", f.stderr);
    for pid in pids {
        assert!(!common::alive(pid), "rank {pid} survived");
    }
    assert!(common::shm_objects(&job).is_empty());
}

#[test]
fn time_limit_ends_a_hung_job() {
    let f = common::run(
        common::tessera()
            .args(["run", "-n", "2", "--timeout", "0.5", "--"])
            .arg(common::example("failure_demo"))
            .arg("--forever"),
        20,
    );
    assert_eq!(f.status.code(), Some(124));
    assert!(f.stderr.contains("time limit"), "stderr: {}", f.stderr);
}

#[test]
fn successful_jobs_and_labels() {
    let f = common::run(
        common::tessera()
            .args(["run", "--label", "-n", "2", "--"])
            .arg(common::example("failure_demo"))
            .args(["--barriers", "50"]),
        30,
    );
    assert!(f.status.success(), "stderr: {}", f.stderr);
    assert_eq!(
        f.stdout.trim(),
        "[0] failure_demo: 50 barriers on 2 ranks of the smp conduit, no failure"
    );
}

#[test]
fn bad_command_lines_get_clear_errors() {
    let cases: &[(&[&str], &str)] = &[
        (&["run", "-n", "0", "--", "true"], "0 is not in 1..=4096"),
        (
            &["run", "--conduit", "tcp", "-n", "2", "--", "true"],
            "unknown conduit \"tcp\": use smp",
        ),
        #[cfg(not(feature = "mpi"))]
        (
            &["run", "--conduit", "mpi", "-n", "2", "--", "true"],
            "built without MPI; rebuild with `cargo build --release --features mpi`",
        ),
        (
            &["run", "--segment", "lots", "-n", "2", "--", "true"],
            "cannot parse size \"lots\"",
        ),
        (
            &["run", "-n", "2", "--", "/no/such/program"],
            "starting /no/such/program (rank 0)",
        ),
        (&["bench", "rma", "-n", "1"], "needs at least 2 ranks"),
    ];
    for (args, message) in cases {
        let f = common::run(common::tessera().args(*args), 20);
        assert!(!f.status.success(), "{args:?} succeeded");
        assert!(
            f.stderr.contains(message),
            "{args:?}: expected {message:?} in {}",
            f.stderr
        );
    }
}

#[test]
fn a_directly_started_program_is_one_rank_and_bad_env_is_explained() {
    let f = common::run(
        std::process::Command::new(common::example("failure_demo"))
            .args(["--barriers", "3"])
            .env_remove("TESSERA_RANKS"),
        20,
    );
    assert!(f.status.success(), "stderr: {}", f.stderr);
    assert!(f.stdout.contains("3 barriers on 1 ranks"), "{}", f.stdout);
    let f = common::run(
        std::process::Command::new(common::example("failure_demo"))
            .env("TESSERA_RANKS", "2")
            .env("TESSERA_CONDUIT", "smp"),
        20,
    );
    assert_eq!(f.status.code(), Some(2));
    assert!(
        f.stderr.contains("TESSERA_RANK") && f.stderr.contains("tessera run"),
        "{}",
        f.stderr
    );
}

/// `TESSERA_BIND=1` with more ranks than processors is refused once, by the launcher,
/// with status 2 and the way out; with as many it runs.
#[test]
fn binding_more_ranks_than_processors_is_refused_once() {
    let processors = std::thread::available_parallelism().map_or(1, |n| n.get());
    let too_many = (processors + 1).to_string();
    let f = common::run(
        common::tessera()
            .env("TESSERA_BIND", "1")
            .args(["run", "-n", &too_many, "--"])
            .arg(common::example("failure_demo"))
            .args(["--barriers", "3"]),
        20,
    );
    assert_eq!(f.status.code(), Some(2), "stderr: {}", f.stderr);
    assert_eq!(
        f.stderr.matches("unset TESSERA_BIND").count(),
        1,
        "one message: {}",
        f.stderr
    );
    let f = common::run(
        common::tessera()
            .env("TESSERA_BIND", "1")
            .args(["run", "-n", "2", "--"])
            .arg(common::example("failure_demo"))
            .args(["--barriers", "3"]),
        20,
    );
    assert!(f.status.success() || processors < 2, "stderr: {}", f.stderr);
}
