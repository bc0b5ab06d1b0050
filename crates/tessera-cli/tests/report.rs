//! Statistics through the command, and `tessera report`: the ring example's signalling
//! puts counted exactly on smp and threads (more ranks than cores), and every picture
//! kind drawn from recorded files as SVG and PNG of the right size with something on
//! them; bad input gets a one-line error.

mod common;

use std::path::{Path, PathBuf};

use tessera::JobStats;

const LAPS: u64 = 20;

#[test]
fn the_rings_signalling_puts_are_counted_exactly_on_smp_and_threads() {
    let dir = common::temp_dir("stats-ring");
    for conduit in ["smp", "threads"] {
        let file = dir.path().join(format!("ring-{conduit}.json"));
        let stats = common::ring_stats(conduit, 5, LAPS, &file, &[]);
        common::check_ring_stats(&stats, 5, LAPS);
    }
}

#[test]
fn a_statistics_file_that_cannot_be_written_is_refused_before_the_job_starts() {
    let f = common::run(
        common::tessera()
            .args(["run", "-n", "2", "--stats", "/nonexistent-dir/s.json", "--"])
            .arg(common::example("ring")),
        30,
    );
    assert_eq!(f.status.code(), Some(2), "{}", f.stderr);
    assert!(f.stderr.contains("does not exist"), "{}", f.stderr);
    let f = common::run(
        common::tessera().args(["run", "-n", "1,2", "--", "true"]),
        30,
    );
    assert_eq!(f.status.code(), Some(2));
    assert!(f.stderr.contains("sweep"), "{}", f.stderr);
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/report")
        .join(name)
}

/// Run `tessera report` on `files` into `out`; the outcome.
fn report(files: &[PathBuf], out: &Path) -> common::Finished {
    common::run(
        common::tessera()
            .arg("report")
            .args(files)
            .arg("-o")
            .arg(out),
        60,
    )
}

/// The PNG is `size` pixels and not one colour: at least `colours` distinct ones.
fn check_png(path: &Path, size: (u32, u32), colours: usize) {
    let img = image::open(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .to_rgb8();
    assert_eq!(img.dimensions(), size, "{}", path.display());
    let mut seen = std::collections::HashSet::new();
    for p in img.pixels() {
        seen.insert(p.0);
        if seen.len() >= colours {
            return;
        }
    }
    panic!("{} has only {} colours", path.display(), seen.len());
}

fn check_svg(path: &Path) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(
        text.starts_with("<svg") && text.contains("<rect"),
        "{}",
        path.display()
    );
}

/// A picture's name and its size in pixels.
type Picture = (&'static str, (u32, u32));

#[test]
fn every_picture_kind_is_drawn_as_svg_and_png() {
    let dir = common::temp_dir("report-pictures");
    let cases: [(&str, &[Picture]); 5] = [
        (
            "stats-cg-s-4.json",
            &[
                ("heatmap", (860, 720)),
                ("sizes", (900, 600)),
                ("blocked", (900, 248)),
            ],
        ),
        ("npb-ep-s-sweep.json", &[("scaling-1", (1350, 480))]),
        // A dense LU at 1 and 2 ranks with ScaLAPACK's time beside Tessera's.
        ("app-lu-sweep.json", &[("scaling-1", (1350, 480))]),
        (
            "bench-rma-2.json",
            &[("bandwidth-mbs", (900, 600)), ("latency-us", (900, 600))],
        ),
        (
            "bench-coll-4.json",
            &[
                ("coll-allreduce-4", (900, 600)),
                ("coll-broadcast-4", (900, 600)),
            ],
        ),
    ];
    for (file, pictures) in cases {
        let out = dir.path().join(file);
        let f = report(&[fixture(file)], &out);
        assert!(f.status.success(), "{file}: {}", f.stderr);
        let index = std::fs::read_to_string(out.join("index.md")).unwrap();
        for (name, size) in pictures {
            check_png(&out.join(format!("{name}.png")), *size, 8);
            check_svg(&out.join(format!("{name}.svg")));
            assert!(index.contains(&format!("({name}.svg)")), "{index}");
        }
    }
    // The baseline measured in the same job stands beside Tessera's times.
    let f = report(&[fixture("app-lu-sweep.json")], &dir.path().join("app"));
    assert!(f.stdout.contains("PDGETRF (s)"), "{}", f.stdout);
    // The statistics' tables: the kinds of traffic the CG run had, computed from the file.
    let f = report(&[fixture("stats-cg-s-4.json")], &dir.path().join("again"));
    let stats = JobStats::read(&fixture("stats-cg-s-4.json")).unwrap();
    for t in stats.between_ranks() {
        let line = f
            .stdout
            .lines()
            .find(|l| l.starts_with(&format!("{} ", t.kind.name())))
            .unwrap_or_else(|| panic!("no row for {:?} in {}", t.kind, f.stdout));
        assert!(line.contains(&format!(" {} ", t.ops)), "{line}");
    }
}

#[test]
fn a_run_split_in_parts_merges_and_bad_input_is_named() {
    let dir = common::temp_dir("report-errors");
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let out = dir.path().join("out");
    let cases = [
        (vec![write("bad.json", "{ not json")], "is not JSON"),
        (
            vec![write("other.json", "{\"a\": 1}")],
            "unknown kind of JSON",
        ),
        (vec![write("empty.json", "[]")], "holds no results"),
        (
            vec![fixture("stats-cg-s-4.json"), fixture("npb-ep-s-sweep.json")],
            "one kind at a time",
        ),
        (vec![dir.path().join("missing.json")], "reading"),
        (
            vec![fixture("stats-cg-s-4.json"), fixture("stats-cg-s-4.json")],
            "appears twice",
        ),
    ];
    for (files, expected) in cases {
        let f = report(&files, &out);
        assert_eq!(f.status.code(), Some(2), "{files:?}: {}", f.stderr);
        assert!(f.stderr.contains(expected), "{files:?}: {}", f.stderr);
        assert_eq!(f.stderr.lines().count(), 1, "one line: {}", f.stderr);
    }
    // One rank's part per file, as ranks started by mpirun leave them, merge into the job.
    let whole = JobStats::read(&fixture("stats-cg-s-4.json")).unwrap();
    let parts: Vec<PathBuf> = whole
        .per_rank
        .iter()
        .map(|p| {
            let part = JobStats::from_parts(whole.ranks, &whole.conduit, vec![p.clone()]);
            let path = dir.path().join(format!("part.{}", p.rank));
            part.write(&path).unwrap();
            path
        })
        .collect();
    let f = report(&parts, &out);
    assert!(f.status.success(), "{}", f.stderr);
    assert!(out.join("heatmap.png").is_file());
}

/// `failure_demo --forever` on 3 ranks with statistics on, each rank writing its pid
/// into `dir`, and `extra` options; the child, the ranks' pids and the job's id.
fn forever_with_stats(
    dir: &std::path::Path,
    extra: &[&str],
) -> (std::process::Child, Vec<i32>, String) {
    let child = common::spawn(
        common::tessera()
            .args(["run", "-n", "3", "--stats"])
            .arg(dir.join("stats.json"))
            .arg("--")
            .arg(common::example("failure_demo"))
            .arg("--forever")
            .args(extra)
            .arg("--pid-dir")
            .arg(dir),
    );
    let (pids, job) = common::wait_for_ranks(dir, 3);
    (child, pids, job)
}

/// End a job started by [`forever_with_stats`].
fn stop(child: std::process::Child) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    common::finish(child, std::time::Duration::from_secs(20));
}

/// A rank that keeps communicating without waiting shows its counts growing in `tessera
/// status` (they are published every few thousand operations, not only at waits).
#[test]
fn status_counts_grow_for_a_rank_that_never_waits() {
    let dir = common::temp_dir("status-put");
    // Halfway through 2 barriers, that is after the first: the others then wait forever.
    let (child, _, job) = forever_with_stats(dir.path(), &["--barriers", "2", "--put-rank", "1"]);
    // Rank 1's operations so far, from its line of `tessera status`.
    let ops = || -> Option<u64> {
        let f = common::run(common::tessera().args(["status", &job]), 20);
        let line = f
            .stdout
            .lines()
            .find(|l| l.contains("rank 1:"))?
            .to_string();
        let before = line.split(" operations to other ranks").next()?;
        before.rsplit(' ').next()?.parse().ok()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let mut seen = Vec::new();
    while seen.len() < 3 && std::time::Instant::now() < deadline {
        if let Some(n) = ops() {
            if seen.last().is_none_or(|&last| n > last) {
                seen.push(n);
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    stop(child);
    assert_eq!(seen.len(), 3, "rank 1's counts did not grow: {seen:?}");
    // More than the barrier's few messages: the puts, published as they go.
    assert!(seen[2] > 8192, "{seen:?}");
}

/// `tessera status` from another terminal: the running job, every rank's state, and with
/// statistics on the counts published so far; nothing once the job has ended.
#[test]
fn status_shows_a_running_jobs_ranks_and_their_counts() {
    let dir = common::temp_dir("status");
    let (child, pids, job) = forever_with_stats(dir.path(), &[]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let shown = loop {
        let f = common::run(common::tessera().args(["status", &job]), 20);
        assert!(f.status.success(), "{}", f.stderr);
        if f.stdout.contains("operations to other ranks") || std::time::Instant::now() > deadline {
            break f.stdout;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert!(
        shown.contains(&format!("job {job}: 3 rank(s) of the smp conduit")),
        "{shown}"
    );
    for (rank, pid) in pids.iter().enumerate() {
        assert!(shown.contains(&format!("rank {rank}:")), "{shown}");
        assert!(shown.contains(&pid.to_string()), "{shown}");
    }
    assert!(shown.contains("operations to other ranks"), "{shown}");
    // End the job; then there is nothing to show.
    stop(child);
    let f = common::run(common::tessera().args(["status", &job]), 20);
    assert_eq!(f.status.code(), Some(2), "{}", f.stdout);
    assert!(f.stderr.contains("no running job"), "{}", f.stderr);
}
