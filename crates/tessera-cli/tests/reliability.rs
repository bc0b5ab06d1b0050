//! What a user (or another user) does wrong, and what the job does about it: it never hangs
//! silently, never lies about success, and cannot be broken through shared memory. Each
//! case ran into a hang, a wrong exit status, a panic or a garbled message before; each is
//! bounded in time and checks that no process is left behind.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use common::{assert_gone, processes_with};

#[test]
fn a_rank_that_finishes_early_is_reported_as_a_deadlock_within_seconds() {
    // Rank 3 stops after 10 laps and waits in the end-of-job barrier; the others wait on
    // their semaphores for a token that never comes. Before: 100 % CPU forever.
    let started = Instant::now();
    let f = common::run(
        common::tessera()
            .args(["run", "-n", "4", "--"])
            .arg(common::example("failure_demo"))
            .args(["--ring", "100000", "--short-rank", "3"]),
        30,
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(f.status.code(), Some(1), "stderr: {}", f.stderr);
    for part in [
        "deadlock: rank 3 has ended its part of the job early",
        "every rank is blocked",
        "rank 3: waits for the end-of-job barrier",
        "rank 0: waits for a semaphore",
    ] {
        assert!(f.stderr.contains(part), "{part:?} missing: {}", f.stderr);
    }
    // One report, not one per rank.
    assert_eq!(
        f.stderr.matches("failed: deadlock").count(),
        1,
        "{}",
        f.stderr
    );
}

#[test]
fn a_deadlock_under_threads_is_reported_too() {
    // Rank 1 waits on its own semaphore, which nobody posts; the others wait for it in the
    // end-of-job barrier.
    let started = Instant::now();
    let err = tessera::Job::threads(3)
        .segment(1 << 20)
        .run(|ctx| {
            if ctx.rank() == 1 {
                ctx.semaphore_new()?.wait(ctx, 1)?;
            }
            Ok(())
        })
        .unwrap_err()
        .to_string();
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(err.contains("deadlock"), "{err}");
    assert!(err.contains("rank 1: waits for a semaphore"), "{err}");
    assert!(
        err.contains("rank 0: waits for the end-of-job barrier"),
        "{err}"
    );
}

#[test]
fn exit_zero_in_the_middle_of_the_job_fails_it() {
    for conduit in ["smp", "threads"] {
        let f = common::run(
            common::tessera()
                .args(["run", "-n", "4", "--conduit", conduit, "--"])
                .arg(common::example("failure_demo"))
                .args(["--exit-rank", "1", "--code", "0"]),
            30,
        );
        assert_eq!(f.status.code(), Some(1), "{conduit}: {}", f.stderr);
        assert!(
            f.stderr.contains("rank 1 called exit(0) while rank(s) ["),
            "{conduit}: {}",
            f.stderr
        );
    }
}

#[test]
fn a_wrapper_that_skips_the_program_on_one_rank_fails_the_job() {
    let demo = common::example("failure_demo");
    let started = Instant::now();
    let f = common::run(
        common::tessera()
            .args(["run", "-n", "3", "--", "bash", "-c"])
            .arg(format!(
                "if [ $TESSERA_RANK = 2 ]; then exit 0; fi; exec {} --barriers 10",
                demo.display()
            )),
        30,
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(f.status.code(), Some(1), "{}", f.stderr);
    assert!(
        f.stderr
            .contains("rank(s) [2] exited with status 0 without joining the job"),
        "{}",
        f.stderr
    );
    // A program that never uses Tessera is no job member and may end as it likes.
    let f = common::run(common::tessera().args(["run", "-n", "3", "--", "true"]), 30);
    assert!(f.status.success(), "{}", f.stderr);
}

#[test]
fn returning_early_meets_the_others_barrier_and_is_reported() {
    for conduit in ["smp", "threads"] {
        let f = common::run(
            common::tessera()
                .args(["run", "-n", "4", "--conduit", conduit, "--"])
                .arg(common::example("failure_demo"))
                .args(["--return-rank", "2"]),
            30,
        );
        assert_eq!(f.status.code(), Some(1), "{conduit}: {}", f.stderr);
        assert!(
            f.stderr.contains(
                "rank(s) [2] ended their part of the job (the end-of-job barrier) while rank(s) [0, 1, 3] entered an ordinary barrier"
            ),
            "{conduit}: {}",
            f.stderr
        );
    }
}

/// Start failure_demo forever on 4 ranks with pid files in `dir` and `env`.
fn forever(dir: &Path, env: &[(&str, &str)], extra: &[&str]) -> std::process::Child {
    common::spawn(
        common::tessera()
            .args(["run", "-n", "4", "--"])
            .arg(common::example("failure_demo"))
            .args(["--forever", "--pid-dir", dir.to_str().unwrap()])
            .args(extra)
            .envs(env.iter().copied()),
    )
}

fn pids(dir: &Path, ranks: usize) -> Vec<i32> {
    common::wait_for_ranks(dir, ranks).0
}

#[test]
fn a_stopped_rank_is_named_by_the_watchdog() {
    let scratch = common::temp_dir("stopped");
    let dir = scratch.path().to_path_buf();
    let child = forever(&dir, &[("TESSERA_WAIT_TIMEOUT", "2")], &[]);
    let ranks = pids(&dir, 4);
    kill(Pid::from_raw(ranks[2]), Signal::SIGSTOP).unwrap();
    let f = common::finish(child, Duration::from_secs(30));
    let _ = kill(Pid::from_raw(ranks[2]), Signal::SIGCONT);
    assert_eq!(f.status.code(), Some(1), "{}", f.stderr);
    assert!(f.stderr.contains("watchdog"), "{}", f.stderr);
    assert!(
        f.stderr
            .contains("its thread is stopped (SIGSTOP or job control)")
            && f.stderr
                .lines()
                .nth(1)
                .is_some_and(|l| l.starts_with("  rank 2: ")),
        "the stopped rank is not named: {}",
        f.stderr
    );
    // One report, from the rank that waited longest, not one per waiting rank.
    let reports = f
        .stderr
        .lines()
        .filter(|l| l.starts_with("tessera: rank") && l.contains("failed: watchdog"))
        .count();
    assert_eq!(reports, 1, "{}", f.stderr);
    for pid in ranks {
        assert!(!common::alive(pid) || is_zombie(pid), "rank {pid} survived");
    }
}

fn is_zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| s.rsplit_once(") ").is_some_and(|(_, r)| r.starts_with('Z')))
        .unwrap_or(true)
}

#[test]
fn sigquit_shows_every_wait_and_the_job_goes_on() {
    let scratch = common::temp_dir("sigquit");
    let dir = scratch.path().to_path_buf();
    // Rank 1 sleeps for 1.5 s halfway; meanwhile the others wait for it at a barrier.
    let child = common::spawn(
        common::tessera()
            .args(["run", "-n", "3", "--"])
            .arg(common::example("failure_demo"))
            .args([
                "--barriers",
                "20",
                "--sleep-rank",
                "1",
                "--sleep-ms",
                "1500",
            ])
            .args(["--pid-dir", dir.to_str().unwrap()]),
    );
    pids(&dir, 3);
    std::thread::sleep(Duration::from_millis(700));
    kill(Pid::from_raw(child.id() as i32), Signal::SIGQUIT).unwrap();
    let f = common::finish(child, Duration::from_secs(30));
    assert!(f.status.success(), "{}", f.stderr);
    assert!(
        f.stderr.contains("(SIGQUIT; the job goes on)"),
        "{}",
        f.stderr
    );
    assert!(
        f.stderr.contains("rank 0: waits for a barrier"),
        "{}",
        f.stderr
    );
    assert!(f.stderr.contains("rank 1: not in a wait"), "{}", f.stderr);
    assert!(f.stdout.contains("20 barriers on 3 ranks"), "{}", f.stdout);
}

#[test]
fn children_of_ranks_end_with_the_job_and_never_hold_it() {
    // A background child holding the output pipe: the job ends when the rank does.
    let started = Instant::now();
    let f = common::run(
        common::tessera()
            .args(["run", "--label", "-n", "1", "--", "bash", "-c"])
            .arg("sleep 31.4159 & echo started"),
        20,
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    assert!(f.status.success(), "{}", f.stderr);
    assert_eq!(f.stdout.trim(), "[0] started");
    assert_gone("sleep 31.4159");
    // On failure (the time limit) and on success, grandchildren go too.
    let f = common::run(
        common::tessera()
            .args(["run", "-n", "2", "--timeout", "1", "--", "bash", "-c"])
            .arg("sleep 303.14159 & wait"),
        20,
    );
    assert_eq!(f.status.code(), Some(124), "{}", f.stderr);
    assert_gone("sleep 303.14159");
    let f = common::run(
        common::tessera()
            .args(["run", "-n", "2", "--", "bash", "-c"])
            .arg("(setsid sleep 27.1828 &) ; true"),
        20,
    );
    assert!(f.status.success(), "{}", f.stderr);
    assert_gone("sleep 27.1828");
}

#[test]
fn bad_values_are_refused_by_name_without_a_panic() {
    let demo = common::example("failure_demo");
    let run = |env: &[(&str, &str)], args: &[&str]| {
        common::run(
            common::tessera()
                .arg("run")
                .args(args)
                .args(["-n", "2", "--"])
                .arg(&demo)
                .args(["--barriers", "3"])
                .envs(env.iter().copied()),
            30,
        )
    };
    for value in ["-1", "inf", "NaN", "0", "1e20", "soon"] {
        let f = run(&[("TESSERA_WAIT_TIMEOUT", value)], &[]);
        assert_eq!(f.status.code(), Some(2), "{value}: {}", f.stderr);
        assert!(
            f.stderr.contains("TESSERA_WAIT_TIMEOUT"),
            "{value}: {}",
            f.stderr
        );
        assert!(!f.stderr.contains("panicked"), "{value}: {}", f.stderr);
        // Once, from the launcher, not once per rank.
        assert_eq!(
            f.stderr.matches("TESSERA_WAIT_TIMEOUT=").count(),
            1,
            "{}",
            f.stderr
        );
    }
    for value in ["-1", "NaN", "inf", "1e20", "0"] {
        let f = run(&[], &["--timeout", value]);
        assert_eq!(f.status.code(), Some(2), "--timeout {value}: {}", f.stderr);
        assert!(f.stderr.contains("--timeout"), "{}", f.stderr);
        assert!(!f.stderr.contains("panicked"), "{}", f.stderr);
    }
    for (var, value) in [
        ("TESSERA_BOOT_TIMEOUT", "-1"),
        ("TESSERA_CHECK", "maybe"),
        ("TESSERA_AM_QUEUE", "1T"),
        ("TESSERA_SEGMENT", "lots"),
    ] {
        let f = run(&[(var, value)], &[]);
        assert_eq!(f.status.code(), Some(2), "{var}={value}: {}", f.stderr);
        assert!(f.stderr.contains(var), "{var}: {}", f.stderr);
        assert!(!f.stderr.contains("panicked"), "{}", f.stderr);
    }
    // Empty means unset; `off` switches the watchdog off; `false` is a switch value.
    for (var, value) in [
        ("TESSERA_TUNING", ""),
        ("TESSERA_WAIT_TIMEOUT", "off"),
        ("TESSERA_CHECK", "false"),
        ("TESSERA_SEGMENT", ""),
    ] {
        let f = run(&[(var, value)], &[]);
        assert!(f.status.success(), "{var}={value:?}: {}", f.stderr);
    }
}

#[test]
fn a_closed_output_ends_commands_quietly() {
    for args in [
        vec!["npb", "ep", "--class", "S", "-n", "2"],
        vec!["run", "-n", "2", "--"],
    ] {
        let mut cmd = common::tessera();
        cmd.args(&args);
        if args[0] == "run" {
            cmd.arg(common::example("failure_demo"))
                .args(["--barriers", "3"]);
        }
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take()); // the reader goes away at once
        let f = finish_without_stdout(child, Duration::from_secs(60));
        assert!(!f.stderr.contains("panicked"), "{args:?}: {}", f.stderr);
        assert!(!f.stderr.contains("job failed"), "{args:?}: {}", f.stderr);
        use std::os::unix::process::ExitStatusExt;
        assert!(
            f.status.code() == Some(141) || f.status.signal() == Some(13),
            "{args:?}: {:?} {}",
            f.status,
            f.stderr
        );
    }
}

#[test]
fn labelled_lines_are_bounded_and_each_written_whole() {
    // One 1 MiB line without a newline: forwarded in labelled pieces of at most 64 KiB.
    let f = common::run(
        common::tessera()
            .args(["run", "--label", "-n", "1", "--", "bash", "-c"])
            .arg("head -c 1048576 /dev/zero | tr '\\0' x"),
        30,
    );
    assert!(f.status.success(), "{}", f.stderr);
    let lines: Vec<&str> = f.stdout.lines().collect();
    assert!(lines.len() >= 16, "{} lines", lines.len());
    for line in &lines {
        assert!(line.starts_with("[0] "), "unlabelled piece");
        assert!(
            line.len() <= 64 * 1024 + 4,
            "a piece of {} bytes",
            line.len()
        );
    }
    let xs: usize = lines.iter().map(|l| l.len() - 4).sum();
    assert_eq!(xs, 1 << 20);
    // Eight ranks failing at once: every line of the report is whole.
    let f = common::run(
        common::tessera()
            .args(["run", "-n", "8", "--"])
            .arg(common::example("failure_demo"))
            .arg("--all-error"),
        30,
    );
    assert_eq!(f.status.code(), Some(1));
    for line in f.stderr.lines() {
        assert!(
            line.starts_with("tessera: ") || line.starts_with("  "),
            "garbled line {line:?} in:\n{}",
            f.stderr
        );
    }
}

#[test]
fn a_rank_killed_by_sigbus_gets_a_hint() {
    let f = common::run(
        common::tessera().args(["run", "-n", "1", "--", "bash", "-c", "kill -BUS $$"]),
        20,
    );
    assert_eq!(f.status.code(), Some(128 + 7));
    assert!(f.stderr.contains("SIGBUS"), "{}", f.stderr);
    assert!(f.stderr.contains("shared memory ran out"), "{}", f.stderr);
}

#[test]
fn named_objects_and_a_strict_umask_work() {
    let demo = common::example("failure_demo");
    for names in ["0", "1"] {
        let f = common::run(
            Command::new("bash")
                .arg("-c")
                .arg(format!(
                    "umask 0277; exec {} run -n 3 -- {} --barriers 5",
                    env!("CARGO_BIN_EXE_tessera"),
                    demo.display()
                ))
                .env("TESSERA_SHM_NAMES", names),
            30,
        );
        assert!(f.status.success(), "names={names}: {}", f.stderr);
        assert!(
            f.stdout
                .contains("5 barriers on 3 ranks of the smp conduit"),
            "{}",
            f.stdout
        );
    }
}

#[test]
fn another_users_object_in_the_way_is_refused_by_name() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: making a file of another user needs root");
        return;
    }
    // A directory under the job's name, made by another user (nobody) and open to all:
    // ranks started with that job id must refuse it, naming it, and never map anything in
    // it. (Real job ids are 128 random bits; here the test picks one to plant under.)
    let id = format!("plantedtest{}", std::process::id());
    let dir = Path::new("/dev/shm").join(format!("tessera-{id}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir).unwrap();
    nix::unistd::chown(&dir, Some(nix::unistd::Uid::from_raw(65534)), None).unwrap();
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let rank = |r: usize| {
        common::spawn(
            Command::new(common::example("failure_demo"))
                .args(["--barriers", "3"])
                .env("TESSERA_CONDUIT", "smp")
                .env("TESSERA_RANKS", "2")
                .env("TESSERA_RANK", r.to_string())
                .env("TESSERA_JOB_ID", &id)
                .env("TESSERA_BOOT_TIMEOUT", "5")
                .env_remove("TESSERA_JOB_FD"),
        )
    };
    let (r0, r1) = (rank(0), rank(1));
    let f0 = common::finish(r0, Duration::from_secs(20));
    let f1 = common::finish(r1, Duration::from_secs(20));
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!f0.status.success() && !f1.status.success());
    assert!(
        f0.stderr.contains(&dir.display().to_string()),
        "{}",
        f0.stderr
    );
    assert!(f0.stderr.contains("already exists"), "{}", f0.stderr);
    assert!(f1.stderr.contains("belongs to user 65534"), "{}", f1.stderr);
}

/// Wait for `child` (whose stdout the caller dropped) at most `limit`, reading stderr.
fn finish_without_stdout(mut child: std::process::Child, limit: Duration) -> common::Finished {
    use std::io::Read;
    let started = Instant::now();
    let mut err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return common::Finished {
                status,
                stdout: String::new(),
                stderr: reader.join().unwrap(),
                elapsed: started.elapsed(),
            };
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            panic!("command did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn segments_larger_than_the_memory_are_announced_before_the_start() {
    let demo = common::example("failure_demo");
    // 100 GiB segments: reserved lazily, so the job runs (it touches little), but both
    // the private memory (smp under the launcher) and /dev/shm (named objects) say so.
    for names in ["0", "1"] {
        let f = common::run(
            common::tessera()
                .args(["run", "-n", "2", "--segment", "100G", "--"])
                .arg(&demo)
                .args(["--barriers", "3"])
                .env("TESSERA_SHM_NAMES", names),
            30,
        );
        assert!(f.status.success(), "names={names}: {}", f.stderr);
        let said = if names == "1" {
            "/dev/shm has"
        } else {
            "MiB of memory is available"
        };
        assert!(
            f.stderr.contains("warning") && f.stderr.contains(said),
            "names={names}: {}",
            f.stderr
        );
    }
}

#[test]
fn a_global_exit_ends_the_job_promptly_with_its_status() {
    let demo = common::example("session_demo");
    let f = common::run(
        common::tessera().args(["run", "-n", "3", "--"]).arg(&demo),
        30,
    );
    assert!(f.status.success(), "{}", f.stderr);
    assert!(
        f.stdout.contains("3 ranks, neighbours' values arrived"),
        "{}",
        f.stdout
    );
    for status in [7, 0] {
        let started = Instant::now();
        let f = common::run(
            common::tessera()
                .args(["run", "-n", "3", "--"])
                .arg(&demo)
                .args(["--global-exit", "1", &status.to_string()]),
            30,
        );
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "took {:?}",
            started.elapsed()
        );
        assert_eq!(f.status.code(), Some(status), "{}", f.stderr);
        if status != 0 {
            assert!(
                f.stderr
                    .contains("rank 1 ended the job with global exit status 7"),
                "{}",
                f.stderr
            );
        }
    }
}

/// A private temporary directory for a command (its `TMPDIR`), to see what it leaves.
fn private_tmp() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("tessera-test-tmp-")
        .tempdir()
        .unwrap()
}

/// What is left in `dir`.
fn left_in(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

/// Wait (up to `secs`) until `ready` holds.
fn wait_for(secs: u64, what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !ready() {
        assert!(
            Instant::now() < deadline,
            "{what} did not happen in {secs} s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Kills (and reaps) a child when dropped, so that a failing test leaves no job running.
struct KillOnDrop(std::process::Child);

/// Start `cmd` with `TMPDIR` set to `tmp` and no input or output.
fn start_quiet(cmd: &mut std::process::Command, tmp: &Path) -> KillOnDrop {
    KillOnDrop(
        cmd.env("TMPDIR", tmp)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_launcher_killed_outright_leaves_no_process_and_no_file() {
    // A rank's background child (now init's) used to keep the job's memory, and the
    // command's result directory stayed in /tmp.
    let tmp = private_tmp();
    let demo = common::example("failure_demo");
    // A duration no other test uses, so that its processes are recognisably this test's.
    let marker = format!("sleep 271.{}", std::process::id());
    let mut launcher = start_quiet(
        common::tessera()
            .args(["run", "-n", "2", "--", "bash", "-c"])
            .arg(format!("{marker} & exec {} --forever", demo.display())),
        tmp.path(),
    );
    let sleeps = || {
        processes_with(&marker)
            .into_iter()
            .filter(|pid| {
                std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|c| c.starts_with(b"sleep\0"))
            })
            .count()
    };
    wait_for(20, "the ranks' children starting", || sleeps() == 2);
    launcher.0.kill().unwrap();
    launcher.0.wait().unwrap();
    assert_gone(&marker);

    // A command with a result file: killed while its ranks run.
    let mut npb = start_quiet(
        common::tessera().args(["npb", "cg", "--class", "B", "-n", "2"]),
        tmp.path(),
    );
    wait_for(20, "the result directory appearing", || {
        !left_in(tmp.path()).is_empty()
    });
    std::thread::sleep(Duration::from_millis(300));
    npb.0.kill().unwrap();
    npb.0.wait().unwrap();
    wait_for(5, "the result directory going", || {
        left_in(tmp.path()).is_empty()
    });
}

#[test]
fn a_closed_output_leaves_no_result_directory() {
    let tmp = private_tmp();
    let mut child = common::tessera()
        .args(["npb", "ep", "--class", "S", "-n", "2"])
        .env("TMPDIR", tmp.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let f = finish_without_stdout(child, Duration::from_secs(60));
    assert!(!f.stderr.contains("panicked"), "{}", f.stderr);
    assert_eq!(left_in(tmp.path()), Vec::<String>::new());
}

#[test]
fn a_rank_that_computes_forever_is_named_plainly_by_the_watchdog() {
    for conduit in ["smp", "threads"] {
        let f = common::run(
            common::tessera()
                .args(["run", "--conduit", conduit, "-n", "3", "--"])
                .arg(common::example("failure_demo"))
                .args(["--spin-rank", "0", "--barriers", "10"])
                .env("TESSERA_WAIT_TIMEOUT", "2"),
            60,
        );
        assert_eq!(f.status.code(), Some(1), "{conduit}: {}", f.stderr);
        let last = f.stderr.lines().last().unwrap_or_default();
        assert!(
            last.contains(
                "rank 0 has not reached the barrier the others entered 2.0 s ago; it is running, never waiting"
            ),
            "{conduit}: {}",
            f.stderr
        );
    }
}

#[test]
fn every_setting_and_option_mistake_is_named_before_any_rank_starts() {
    use std::os::unix::ffi::OsStrExt;
    let demo = common::example("failure_demo");
    let fifo = private_tmp();
    let fifo_path = fifo.path().join("table");
    nix::unistd::mkfifo(&fifo_path, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let fifo_text = fifo_path.to_str().unwrap();
    let not_utf8 = std::ffi::OsStr::from_bytes(b"\xff");
    // (environment, options of `run`, what the message says)
    type Case<'a> = (Vec<(&'a str, &'a std::ffi::OsStr)>, Vec<&'a str>, &'a str);
    let cases: Vec<Case> = vec![
        (
            vec![("TESSERA_COLL_FROBNICATE", "ring".as_ref())],
            vec![],
            "TESSERA_COLL_FROBNICATE names no collective operation",
        ),
        (
            vec![("TESSERA_COLL_ALLREDUCE", "bogus".as_ref())],
            vec![],
            "TESSERA_COLL_ALLREDUCE: unknown collective algorithm \"bogus\"",
        ),
        (
            vec![("TESSERA_CHEK", "1".as_ref())],
            vec![],
            "TESSERA_CHEK is not one Tessera knows; did you mean TESSERA_CHECK?",
        ),
        (
            vec![("TESSERA_CHECK", not_utf8)],
            vec![],
            "TESSERA_CHECK's value is not valid UTF-8",
        ),
        (
            vec![("TESSERA_TUNING", "/dev/zero".as_ref())],
            vec![],
            "tuning table /dev/zero: not a regular file",
        ),
        (
            vec![("TESSERA_TUNING", fifo_text.as_ref())],
            vec![],
            "not a regular file",
        ),
        (vec![], vec!["--segment", "0"], "size \"0\" is too small"),
        (
            vec![],
            vec!["--timout", "5"],
            "unknown option --timout; did you mean --timeout?",
        ),
    ];
    let mut cases = cases;
    if cfg!(feature = "mpi") {
        cases.push((
            vec![("TESSERA_MPIRUN", "/nonexistent/mpirun".as_ref())],
            vec!["--conduit", "mpi"],
            "starting /nonexistent/mpirun for the mpi conduit",
        ));
    }
    for (env, args, says) in cases {
        let mut cmd = common::tessera();
        cmd.arg("run").args(["-n", "2"]).args(&args);
        if !args.contains(&"--timout") {
            cmd.arg("--");
        }
        cmd.arg(&demo).args(["--barriers", "3"]);
        for (k, v) in &env {
            cmd.env(k, v);
        }
        let f = common::run(&mut cmd, 30);
        assert_eq!(f.status.code(), Some(2), "{env:?} {args:?}: {}", f.stderr);
        assert!(f.stderr.contains(says), "{env:?} {args:?}: {}", f.stderr);
        assert!(!f.stderr.contains("panicked"), "{}", f.stderr);
        assert_eq!(f.stderr.trim().lines().count(), 1, "one line: {}", f.stderr);
    }
    // oshrun's own variable and options, through the same parser.
    for (env, args, says) in [
        (
            Some("-1"),
            vec!["-np", "2"],
            "SHMEM_SYMMETRIC_SIZE=\"-1\": cannot parse size",
        ),
        (
            Some("0"),
            vec!["-np", "2"],
            "SHMEM_SYMMETRIC_SIZE=\"0\": size \"0\" is too small",
        ),
        (None, vec!["-np"], "a value is required"),
        (None, vec!["-np", "2", "--timeout"], "a value is required"),
    ] {
        let mut cmd = common::tessera();
        cmd.arg("oshrun").args(&args);
        if args.len() == 2 {
            cmd.arg(&demo);
        }
        if let Some(size) = env {
            cmd.env("SHMEM_SYMMETRIC_SIZE", size);
        }
        let f = common::run(&mut cmd, 30);
        assert_eq!(f.status.code(), Some(2), "{args:?}: {}", f.stderr);
        assert!(f.stderr.contains(says), "{args:?}: {}", f.stderr);
    }
    let f = common::run(Command::new(&demo).arg("--help"), 10);
    assert!(f.status.success(), "{}", f.stderr);
    assert!(f.stdout.starts_with("usage: failure_demo"), "{}", f.stdout);
}
