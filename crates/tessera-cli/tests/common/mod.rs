//! Helpers for the command's tests: run with a hard time bound, find built programs.

#![allow(dead_code)]

use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// The `tessera` executable under test.
pub(crate) fn tessera() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tessera"))
}

/// A built example. `cargo test` builds the examples before the integration tests but
/// leaves them under hashed names (`name-<hash>`); `cargo build --examples` adds the plain
/// name. The newest of them is the one this build made.
pub(crate) fn example(name: &str) -> PathBuf {
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_tessera"));
    let dir = exe.parent().unwrap().join("examples");
    let hashed = |file: &str| {
        file.strip_prefix(name)
            .and_then(|rest| rest.strip_prefix('-'))
            .is_some_and(|h| h.len() == 16 && h.bytes().all(|b| b.is_ascii_hexdigit()))
    };
    let newest = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            let file = e.file_name().to_string_lossy().into_owned();
            file == name || hashed(&file)
        })
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .max_by_key(|(t, _)| *t)
        .map(|(_, p)| p);
    newest.unwrap_or_else(|| panic!("example {name} not built in {}", dir.display()))
}

pub(crate) struct Finished {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

/// Start `cmd` with captured output.
pub(crate) fn spawn(cmd: &mut Command) -> Child {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn")
}

/// Wait for `child` at most `limit`; kill it and fail the test past that.
pub(crate) fn finish(mut child: Child, limit: Duration) -> Finished {
    let start = Instant::now();
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Finished {
                status,
                stdout: out_reader.join().unwrap(),
                stderr: err_reader.join().unwrap(),
                elapsed: start.elapsed(),
            };
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("command did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Run `cmd` to completion within `secs` seconds.
pub(crate) fn run(cmd: &mut Command, secs: u64) -> Finished {
    finish(spawn(cmd), Duration::from_secs(secs))
}

/// Run `cmd` with `--json FILE` appended (a file of its own in the temporary directory),
/// within `secs` seconds; it must succeed. Returns the run and the parsed report.
pub(crate) fn run_json(cmd: &mut Command, secs: u64) -> (Finished, serde_json::Value) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let path = std::env::temp_dir().join(format!(
        "tessera-test-{}-{}.json",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let f = run(cmd.arg("--json").arg(&path), secs);
    assert!(f.status.success(), "{}\n{}", f.stdout, f.stderr);
    let text = std::fs::read_to_string(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    (f, serde_json::from_str(&text).unwrap())
}

/// Shared-memory objects in /dev/shm belonging to `job_id` (named objects live in the
/// directory `tessera-<job id>`; the launcher's private memory has no name at all).
pub(crate) fn shm_objects(job_id: &str) -> Vec<String> {
    let prefix = format!("tessera-{job_id}");
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(&prefix))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether a process with this pid still exists.
pub(crate) fn alive(pid: i32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// `tessera bench coll --quick -n RANKS ARGS --json F`, checked: every operation has a
/// "tuned" point and every algorithm of the operation, plus `also` (e.g. "native" on the
/// mpi conduit), at every size, and the memcpy baseline is there.
pub(crate) fn bench_coll_checked(args: &[&str], ranks: u32, also: &[&str]) {
    use std::collections::BTreeSet;
    let path = std::env::temp_dir().join(format!(
        "tessera-bench-coll-test-{}.json",
        std::process::id()
    ));
    let f = run(
        tessera()
            .args([
                "bench",
                "coll",
                "-n",
                &ranks.to_string(),
                "--quick",
                "--segment",
                "64M",
                "--json",
            ])
            .arg(&path)
            .args(args),
        240,
    );
    assert!(f.status.success(), "stderr: {}", f.stderr);
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let _ = std::fs::remove_file(&path);
    // The report says where the buffers were.
    let buffers = if args.contains(&"--plain-buffers") {
        "Vecs"
    } else {
        "huge pages"
    };
    assert_eq!(report["buffers"], buffers);
    let results = report["results"].as_array().unwrap();
    for op in tessera::Collective::ALL {
        let rows: Vec<&serde_json::Value> =
            results.iter().filter(|r| r["op"] == op.name()).collect();
        assert!(!rows.is_empty(), "no results for {}", op.name());
        let sizes: BTreeSet<u64> = rows.iter().map(|r| r["bytes"].as_u64().unwrap()).collect();
        for bytes in sizes {
            let algs: BTreeSet<&str> = rows
                .iter()
                .filter(|r| r["bytes"] == bytes)
                .map(|r| r["algorithm"].as_str().unwrap())
                .collect();
            assert!(
                algs.contains("tuned"),
                "{} {bytes}: no tuned point",
                op.name()
            );
            let names = op.algorithms().into_iter().map(|a| a.to_string());
            // MPI's own (`native`) implements the mailbox operations only.
            let also = also.iter().filter(|_| !op.is_single_address());
            for alg in names.chain(also.map(|a| a.to_string())) {
                assert!(
                    algs.contains(alg.as_str()),
                    "{} {bytes}: {alg} missing",
                    op.name()
                );
            }
        }
        let mut osu = BTreeSet::new();
        let mut predicted = BTreeSet::new();
        for r in &rows {
            assert_eq!(r["ranks"], ranks);
            assert!(r["value"].as_f64().unwrap() > 0.0);
            match r["metric"].as_str() {
                Some("latency_us") => {}
                Some("latency_osu_us") => {
                    osu.insert((r["bytes"].as_u64(), r["algorithm"] == "native"));
                }
                Some("predicted_us") => {
                    predicted.insert((r["bytes"].as_u64(), r["algorithm"].as_str()));
                }
                other => panic!("unexpected metric {other:?}"),
            }
        }
        // The cost model priced every algorithm of its own at every size.
        for r in rows.iter().filter(|r| r["metric"] == "latency_us") {
            let alg = r["algorithm"].as_str();
            if op
                .algorithms()
                .iter()
                .any(|a| Some(a.to_string().as_str()) == alg)
            {
                assert!(
                    predicted.contains(&(r["bytes"].as_u64(), alg)),
                    "{} {}: no prediction for {alg:?}",
                    op.name(),
                    r["bytes"]
                );
            }
        }
        // Beside MPI's own collective, Tessera's fastest own algorithm timed OSU's way too.
        if also.contains(&"native") && !op.is_single_address() {
            let sizes = osu.iter().map(|&(b, _)| b).collect::<BTreeSet<_>>();
            assert!(!sizes.is_empty(), "{}: no OSU-method times", op.name());
            for b in sizes {
                assert!(
                    osu.contains(&(b, true)) && osu.contains(&(b, false)),
                    "{} {b:?}",
                    op.name()
                );
            }
        } else {
            assert!(osu.is_empty(), "OSU-method times without MPI's collectives");
        }
    }
    if also.contains(&"native") {
        assert!(
            f.stdout.contains("beside MPI's own collectives"),
            "{}",
            f.stdout
        );
    }
    assert!(!report["baselines"]["memcpy_bandwidth_mbs"]
        .as_object()
        .unwrap()
        .is_empty());
}

/// A fresh scratch directory for one test, named after it; removed when the guard goes,
/// whether the test passes or fails.
pub(crate) fn temp_dir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("tessera-test-{name}-"))
        .tempdir()
        .unwrap()
}

/// Wait until `ranks` ranks of failure_demo have written their pid files into `dir`
/// ("PID JOBID"); returns the pids and the job id.
pub(crate) fn wait_for_ranks(dir: &std::path::Path, ranks: usize) -> (Vec<i32>, String) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let files: Vec<String> = (0..ranks)
            .filter_map(|r| std::fs::read_to_string(dir.join(format!("rank-{r}"))).ok())
            .filter(|f| f.contains(' '))
            .collect();
        if files.len() == ranks {
            let job = files[0]
                .split_whitespace()
                .nth(1)
                .unwrap_or_default()
                .to_string();
            let pids = files
                .iter()
                .map(|f| f.split_whitespace().next().unwrap().parse().unwrap())
                .collect();
            return (pids, job);
        }
        assert!(Instant::now() < deadline, "ranks never reported their pids");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `tessera shmem install` into a fresh directory named after `name`; the prefix.
pub(crate) fn install_shmem(name: &str) -> tempfile::TempDir {
    let prefix = temp_dir(&format!("shmem-{name}"));
    let f = run(
        tessera()
            .args(["shmem", "install", "--prefix"])
            .arg(prefix.path()),
        60,
    );
    assert!(f.status.success(), "install: {}", f.stderr);
    prefix
}

/// The ring example's statistics after `laps` laps on `ranks` ranks: every rank sends the
/// token (one word per rank) to its right neighbour once per lap, as one signalling put,
/// and nothing else to anyone but the barrier's signals.
pub(crate) fn check_ring_stats(stats: &tessera::JobStats, ranks: usize, laps: u64) {
    use tessera::Traffic;
    assert_eq!(stats.ranks, ranks);
    assert_eq!(stats.per_rank.len(), ranks);
    for part in &stats.per_rank {
        let right = (part.rank + 1) % ranks;
        for peer in (0..ranks).filter(|&p| p != part.rank) {
            let expected = if peer == right {
                (laps, laps * 8 * ranks as u64)
            } else {
                (0, 0)
            };
            assert_eq!(
                part.to(peer, Traffic::SignalPut),
                expected,
                "rank {} to {peer}",
                part.rank
            );
            for kind in [
                Traffic::Put,
                Traffic::Get,
                Traffic::Atomic,
                Traffic::Collective,
            ] {
                assert_eq!(
                    part.to(peer, kind),
                    (0, 0),
                    "rank {} to {peer}: {kind:?}",
                    part.rank
                );
            }
        }
    }
}

/// Run the ring example for `laps` laps on `ranks` ranks of `conduit` with `--stats FILE`
/// and `env` set; its statistics.
pub(crate) fn ring_stats(
    conduit: &str,
    ranks: usize,
    laps: u64,
    file: &std::path::Path,
    env: &[(&str, &str)],
) -> tessera::JobStats {
    let f = run(
        tessera()
            .envs(env.iter().copied())
            .args([
                "run",
                "--conduit",
                conduit,
                "-n",
                &ranks.to_string(),
                "--stats",
            ])
            .arg(file)
            .arg("--")
            .arg(example("ring"))
            .arg(laps.to_string()),
        90,
    );
    assert!(
        f.status.success(),
        "{conduit} {env:?}: {}\n{}",
        f.stdout,
        f.stderr
    );
    assert!(
        f.stderr.contains("communication statistics in"),
        "the command says where the statistics are: {}",
        f.stderr
    );
    tessera::JobStats::read(file).unwrap()
}

/// Processes whose command line contains `marker`.
pub(crate) fn processes_with(marker: &str) -> Vec<i32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if let Ok(cmd) = std::fs::read(entry.path().join("cmdline")) {
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if cmd.contains(marker) {
                found.push(pid);
            }
        }
    }
    found
}

/// Wait (up to 5 s) until no process's command line contains `marker`.
pub(crate) fn assert_gone(marker: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !processes_with(marker).is_empty() {
        assert!(
            Instant::now() < deadline,
            "processes with {marker:?} survived the job: {:?}",
            processes_with(marker)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
