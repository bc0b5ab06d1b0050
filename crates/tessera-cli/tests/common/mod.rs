//! Helpers for the command's tests: run with a hard time bound, find built programs.

#![allow(dead_code)]

use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// The `tessera` executable under test.
pub fn tessera() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tessera"))
}

/// A built example (cargo builds examples before integration tests).
pub fn example(name: &str) -> PathBuf {
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_tessera"));
    let path = exe.parent().unwrap().join("examples").join(name);
    assert!(
        path.exists(),
        "example {name} not built at {}",
        path.display()
    );
    path
}

pub struct Finished {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

/// Start `cmd` with captured output.
pub fn spawn(cmd: &mut Command) -> Child {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn")
}

/// Wait for `child` at most `limit`; kill it and fail the test past that.
pub fn finish(mut child: Child, limit: Duration) -> Finished {
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
pub fn run(cmd: &mut Command, secs: u64) -> Finished {
    finish(spawn(cmd), Duration::from_secs(secs))
}

/// Shared-memory objects in /dev/shm belonging to `job_id`.
pub fn shm_objects(job_id: &str) -> Vec<String> {
    let prefix = format!("tessera-{job_id}-");
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
pub fn alive(pid: i32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}
