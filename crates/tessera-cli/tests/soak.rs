//! Soak: many jobs, each ended at a random moment (start-up included) by SIGKILL to a
//! random rank or to the launcher itself. After each: the exit status and message name
//! the killed rank, no process of the job survives, and no shared-memory object is left.
//!
//! `SOAK_JOBS=N` sets the number of jobs (default 24, which CI runs); the long run is
//! `SOAK_JOBS=200 cargo test --release -p tessera-cli --test soak -- --nocapture`.
//! `SOAK_SEED` repeats a run.

mod common;

use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// xorshift64*: enough randomness to spread the kills, repeatable from its seed.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The children of `pid` that run the rank's program, from /proc: not the job's keeper
/// (`tessera-keeper`), nor a child still named as the launcher, which is either the keeper
/// before it has named itself or a rank before its exec (a few microseconds).
fn children(pid: u32) -> Vec<i32> {
    let mut out = Vec::new();
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for t in tasks.flatten() {
            if let Ok(text) = std::fs::read_to_string(t.path().join("children")) {
                out.extend(
                    text.split_whitespace()
                        .filter_map(|p| p.parse::<i32>().ok()),
                );
            }
        }
    }
    let comm = |p: &dyn std::fmt::Display| {
        std::fs::read_to_string(format!("/proc/{p}/comm")).map(|c| c.trim().to_string())
    };
    let launcher = comm(&pid).unwrap_or_default();
    out.retain(|p| comm(p).is_ok_and(|c| c != "tessera-keeper" && c != launcher));
    out
}

/// Entries of /dev/shm that this user's Tessera jobs could have left.
fn shm_leftovers() -> Vec<String> {
    // SAFETY: getuid has no preconditions.
    let me = unsafe { libc::getuid() };
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("tessera-"))
                .filter(|e| std::os::unix::fs::MetadataExt::uid(&e.metadata().unwrap()) == me)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Live processes whose environment holds `mark` (each job's processes carry their own).
fn marked(mark: &str) -> Vec<i32> {
    let needle = format!("SOAK_MARK={mark}\0");
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if let Ok(env) = std::fs::read(entry.path().join("environ")) {
            if String::from_utf8_lossy(&env).contains(&needle) && !gone(pid) {
                found.push(pid);
            }
        }
    }
    found
}

fn gone(pid: i32) -> bool {
    !common::alive(pid)
        || std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| s.rsplit_once(") ").is_some_and(|(_, r)| r.starts_with('Z')))
            .unwrap_or(true)
}

#[test]
fn jobs_killed_at_random_moments_end_cleanly() {
    let jobs: usize = tessera::config::text("SOAK_JOBS")
        .and_then(|v| v.parse().ok())
        .unwrap_or(24);
    let seed = tessera::config::text("SOAK_SEED")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        });
    eprintln!("soak: {jobs} jobs, SOAK_SEED={seed}");
    let mut rng = Rng(seed);
    let before = shm_leftovers();
    let started = Instant::now();
    let (mut rank_kills, mut launcher_kills, mut in_startup) = (0, 0, 0);
    for job in 0..jobs {
        let ranks = 2 + rng.below(4) as usize;
        let child = common::spawn(
            common::tessera()
                .args(["run", "-n", &ranks.to_string(), "--"])
                .arg(common::example("failure_demo"))
                .arg("--forever")
                .env("SOAK_MARK", format!("{seed}-{job}")),
        );
        let launcher = child.id();
        // A third of the kills within 5 ms (start-up takes a few), the rest up to 300 ms.
        let delay = if rng.below(3) == 0 {
            rng.below(5_000)
        } else {
            rng.below(300_000)
        };
        std::thread::sleep(Duration::from_micros(delay));
        let seen = children(launcher);
        let kill_launcher = rng.below(2) == 0 || seen.is_empty();
        if seen.len() < ranks {
            in_startup += 1;
        }
        let context = format!("job {job} ({ranks} ranks, SOAK_SEED={seed})");
        if kill_launcher {
            launcher_kills += 1;
            kill(Pid::from_raw(launcher as i32), Signal::SIGKILL).unwrap();
            let f = common::finish(child, Duration::from_secs(20));
            assert_eq!(f.status.code(), None, "{context}: the launcher was killed");
        } else {
            rank_kills += 1;
            let victim = seen[rng.below(seen.len() as u64) as usize];
            kill(Pid::from_raw(victim), Signal::SIGKILL).unwrap();
            let f = common::finish(child, Duration::from_secs(20));
            assert_eq!(f.status.code(), Some(128 + 9), "{context}: {}", f.stderr);
            assert!(
                f.stderr.contains("was killed by signal 9 (SIGKILL)"),
                "{context}: {}",
                f.stderr
            );
        }
        // Every process of the job (ranks seen or not, the launcher) ends within seconds.
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let survivors = marked(&format!("{seed}-{job}"));
            if survivors.is_empty() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{context}: ranks {survivors:?} survived"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        let left: Vec<String> = shm_leftovers()
            .into_iter()
            .filter(|n| !before.contains(n))
            .collect();
        assert!(left.is_empty(), "{context}: shared memory left: {left:?}");
    }
    eprintln!(
        "soak: {jobs} jobs in {:.1} s: {rank_kills} ranks killed, {launcher_kills} launchers killed, {in_startup} kills during start-up",
        started.elapsed().as_secs_f64()
    );
}
