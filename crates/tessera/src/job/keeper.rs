//! The job's keeper: a small process that ends what a job left behind when its launcher
//! is killed outright (SIGKILL), which no handler of the launcher's can do.
//!
//! While it lives, the launcher ends everything itself: it is a child subreaper, so the
//! ranks' orphaned descendants become its children and are ended with the job. A SIGKILL
//! leaves no such chance: the ranks die (`PR_SET_PDEATHSIG`), but a rank's own child (a
//! script's background `sleep`) is handed to init and keeps the job's memory file open,
//! and the command's private result directory stays in `/tmp`.
//!
//! So before it starts any rank, the launcher forks a keeper (named `tessera-keeper` in
//! `ps`) that holds the read end of a pipe whose write end only the launcher has. A clean end writes one byte and the keeper
//! leaves. End of file without that byte means the launcher died: the keeper then
//! - ends (SIGKILL) every process of this user whose environment carries the job's
//!   `TESSERA_JOB_ID` (every rank and every descendant that did not clear its environment;
//!   job ids are random, so no other job matches), repeating until three rounds 10 ms
//!   apart find none, since a dying script may still fork and a process in the middle of
//!   `execve` shows no environment for a moment;
//! - removes the directories the launcher named (result files), and any of the job's named
//!   shared-memory directories (`/dev/shm/tessera-<id>*`).
//!
//! Why not the alternatives: a process group per job would stop rank 0 from reading the
//! terminal; a cgroup needs delegation that an ordinary user rarely has. The environment
//! marker follows every descendant that neither clears its environment nor leaves this
//! user; those are documented limits.
//!
//! The keeper is a `fork` without `exec` of a process that may have threads, so after the
//! fork it must only make system calls: no allocation, no locks, no Rust I/O. Everything
//! it needs (the marker, the paths) is prepared as bytes before the fork.
//!
//! This module must never end a process that does not carry the job's id, and never
//! follow a symbolic link when it removes files.

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;

use nix::unistd::Pid;

/// The byte a launcher writes when the job ended normally.
const DONE: u8 = b'd';
/// Rounds of the sweep: each finds and ends the processes still carrying the job's id.
const SWEEP_ROUNDS: usize = 200;
/// Rounds in a row that must find nothing before the sweep ends. One is not enough: a
/// process caught in `execve` (a rank being started as the launcher died) shows an empty
/// environment for a moment after its parent has already gone on.
const QUIET_ROUNDS: usize = 3;

/// A running keeper; dropping it (or [`Keeper::finish`]) tells it the job ended normally
/// and reaps it.
pub(crate) struct Keeper {
    pid: Pid,
    done: Option<OwnedFd>,
}

impl Keeper {
    /// Fork the keeper for job `job_id`, which removes `dirs` if the launcher dies.
    /// `None` when the fork failed (the job runs, unguarded against a SIGKILL).
    pub(crate) fn start(job_id: &str, dirs: &[PathBuf]) -> Option<Keeper> {
        use std::os::unix::ffi::OsStrExt;
        let plan = Plan {
            marker: format!("\0TESSERA_JOB_ID={job_id}\0").into_bytes(),
            shm_prefix: format!("tessera-{job_id}").into_bytes(),
            dirs: dirs
                .iter()
                .filter_map(|d| CString::new(d.as_os_str().as_bytes()).ok())
                .collect(),
        };
        let (read_end, write_end) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).ok()?;
        // SAFETY: the child runs only `Plan::keep`, which makes system calls on memory
        // prepared before the fork (no allocation, no locks), and ends with `_exit`.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return None;
        }
        if pid == 0 {
            drop(write_end);
            plan.keep(read_end.as_raw_fd());
        }
        drop(read_end);
        Some(Keeper {
            pid: Pid::from_raw(pid),
            done: Some(write_end),
        })
    }

    /// The keeper's process id.
    pub(crate) fn pid(&self) -> i32 {
        self.pid.as_raw()
    }

    /// Tell the keeper the job ended normally and reap it.
    pub(crate) fn finish(mut self) {
        self.release();
    }

    fn release(&mut self) {
        if let Some(fd) = self.done.take() {
            let _ = nix::unistd::write(&fd, &[DONE]);
            drop(fd);
            let _ = nix::sys::wait::waitpid(self.pid, None);
        }
    }
}

impl Drop for Keeper {
    fn drop(&mut self) {
        self.release();
    }
}

/// What a keeper does if its launcher dies, prepared before the fork.
struct Plan {
    /// `\0TESSERA_JOB_ID=<id>\0`: an environment entry, delimited on both sides.
    marker: Vec<u8>,
    /// Names in /dev/shm that belong to the job start with this.
    shm_prefix: Vec<u8>,
    /// Directories to empty and remove.
    dirs: Vec<CString>,
}

impl Plan {
    /// The keeper's whole life, in the forked child.
    fn keep(&self, pipe: i32) -> ! {
        // SAFETY: every call below is a system call (async-signal-safe) on stack buffers
        // or on memory prepared before the fork; nothing allocates or takes a lock.
        unsafe {
            for signal in [
                libc::SIGINT,
                libc::SIGTERM,
                libc::SIGHUP,
                libc::SIGQUIT,
                libc::SIGTSTP,
            ] {
                libc::signal(signal, libc::SIG_IGN);
            }
            // A name of its own in `ps` and /proc (it is the launcher's fork, without exec).
            libc::prctl(libc::PR_SET_NAME, c"tessera-keeper".as_ptr());
            // Hold nothing of the job's: not its memory file, not the output pipes (a reader
            // of the job's output must see their end when the launcher ends).
            let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
            if null >= 0 {
                for fd in 0..3 {
                    libc::dup2(null, fd);
                }
            }
            close_all_but(pipe);
            let mut byte = 0u8;
            let got = loop {
                let n = libc::read(pipe, (&raw mut byte).cast(), 1);
                if n < 0 && *libc::__errno_location() == libc::EINTR {
                    continue;
                }
                break n;
            };
            if got == 1 && byte == DONE {
                libc::_exit(0);
            }
            // The launcher died: end the job's processes, then remove its files.
            let mut quiet = 0;
            for _ in 0..SWEEP_ROUNDS {
                quiet = if self.end_marked_processes() == 0 {
                    quiet + 1
                } else {
                    0
                };
                if quiet == QUIET_ROUNDS {
                    break;
                }
                let pause = libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 10_000_000,
                };
                libc::nanosleep(&pause, std::ptr::null_mut());
            }
            for dir in &self.dirs {
                remove_flat_dir(libc::AT_FDCWD, dir.as_ptr());
            }
            self.remove_shm_dirs();
            libc::_exit(0);
        }
    }

    /// SIGKILL every process (other than this one) whose environment carries the marker;
    /// how many were found.
    ///
    /// # Safety
    /// Only system calls; callable after a fork.
    unsafe fn end_marked_processes(&self) -> usize {
        let mut found = 0;
        // SAFETY: system calls on stack buffers (see `keep`).
        unsafe {
            let me = libc::getpid();
            let proc_fd = libc::open(
                c"/proc".as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
            );
            if proc_fd < 0 {
                return 0;
            }
            for_each_entry(proc_fd, |name| {
                let Some(pid) = parse_pid(name) else { return };
                if pid == me {
                    return;
                }
                let mut path = [0u8; 32];
                let len = join(&mut path, &[name, b"/environ\0"]);
                if len == 0 {
                    return;
                }
                let fd = libc::openat(
                    proc_fd,
                    path.as_ptr().cast(),
                    libc::O_RDONLY | libc::O_CLOEXEC,
                );
                if fd < 0 {
                    return;
                }
                if stream_contains(fd, &self.marker) {
                    libc::kill(pid, libc::SIGKILL);
                    found += 1;
                }
                libc::close(fd);
            });
            libc::close(proc_fd);
        }
        found
    }

    /// Remove the job's named shared-memory directories.
    ///
    /// # Safety
    /// Only system calls; callable after a fork.
    unsafe fn remove_shm_dirs(&self) {
        // SAFETY: system calls on stack buffers (see `keep`).
        unsafe {
            let shm = libc::open(
                c"/dev/shm".as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
            );
            if shm < 0 {
                return;
            }
            // Collect first: removing while reading a directory may skip entries.
            let mut names = [[0u8; 128]; 16];
            let mut count = 0;
            for_each_entry(shm, |name| {
                if name.starts_with(&self.shm_prefix) && count < names.len() && name.len() < 127 {
                    names[count][..name.len()].copy_from_slice(name);
                    names[count][name.len()] = 0;
                    count += 1;
                }
            });
            for name in &names[..count] {
                remove_flat_dir(shm, name.as_ptr().cast());
            }
            libc::close(shm);
        }
    }
}

/// Close every descriptor above 2 except `keep`.
///
/// # Safety
/// Only system calls; callable after a fork.
unsafe fn close_all_but(keep: i32) {
    // SAFETY: close_range and close take plain integers.
    unsafe {
        let ranges = [(3u32, keep as u32 - 1), (keep as u32 + 1, u32::MAX)];
        for (first, last) in ranges {
            if first > last {
                continue;
            }
            if libc::syscall(libc::SYS_close_range, first, last, 0) != 0 {
                // Kernels before 5.9: close them one by one, up to a sane limit.
                for fd in first..last.min(1 << 16) {
                    libc::close(fd as i32);
                }
            }
        }
    }
}

/// Call `each` with the name of every entry of the open directory `dir` (without `.` and
/// `..`).
///
/// # Safety
/// Only system calls; callable after a fork. `dir` is an open directory descriptor.
unsafe fn for_each_entry(dir: i32, mut each: impl FnMut(&[u8])) {
    let mut buf = [0u8; 8192];
    loop {
        // SAFETY: getdents64 writes at most buf.len() bytes into buf.
        let n = unsafe { libc::syscall(libc::SYS_getdents64, dir, buf.as_mut_ptr(), buf.len()) };
        if n <= 0 {
            return;
        }
        let mut at = 0usize;
        while at + 19 < n as usize {
            // struct linux_dirent64: d_ino (8), d_off (8), d_reclen (2), d_type (1), d_name.
            let reclen = u16::from_ne_bytes([buf[at + 16], buf[at + 17]]) as usize;
            if reclen == 0 {
                return;
            }
            let name_area = &buf[at + 19..(at + reclen).min(n as usize)];
            let len = name_area
                .iter()
                .position(|&b| b == 0)
                .unwrap_or(name_area.len());
            let name = &name_area[..len];
            if name != b"." && name != b".." {
                each(name);
            }
            at += reclen;
        }
    }
}

/// A process id from a `/proc` entry's name.
fn parse_pid(name: &[u8]) -> Option<i32> {
    if name.is_empty() || name.len() > 9 || !name.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(name.iter().fold(0i32, |v, &d| v * 10 + (d - b'0') as i32))
}

/// Write `parts` one after another into `out`; their total length, or 0 if it does not fit.
fn join(out: &mut [u8], parts: &[&[u8]]) -> usize {
    let mut at = 0;
    for part in parts {
        if at + part.len() > out.len() {
            return 0;
        }
        out[at..at + part.len()].copy_from_slice(part);
        at += part.len();
    }
    at
}

/// Whether the contents of `fd`, with a NUL before them, contain `needle` (at most 64
/// bytes long). Reads in pieces, keeping the tail of each for the next.
///
/// # Safety
/// Only system calls; callable after a fork.
unsafe fn stream_contains(fd: i32, needle: &[u8]) -> bool {
    const TAIL: usize = 64;
    if needle.len() > TAIL {
        return false;
    }
    let mut buf = [0u8; TAIL + 4096];
    // A virtual NUL before the first entry.
    let mut have = 1usize;
    loop {
        // SAFETY: read writes at most the free part of buf.
        let n = unsafe { libc::read(fd, buf[have..].as_mut_ptr().cast(), buf.len() - have) };
        if n <= 0 {
            // The last entry ends at the end of the file: add its NUL.
            if have < buf.len() {
                buf[have] = 0;
                have += 1;
            }
            return buf[..have].windows(needle.len()).any(|w| w == needle);
        }
        have += n as usize;
        if buf[..have].windows(needle.len()).any(|w| w == needle) {
            return true;
        }
        let keep = needle.len().min(have);
        buf.copy_within(have - keep..have, 0);
        have = keep;
    }
}

/// Remove the files in directory `name` (relative to `at`) and then the directory; never
/// follows a symbolic link, and leaves a directory that is not this user's alone.
///
/// # Safety
/// Only system calls; callable after a fork. `name` is a NUL-terminated path.
unsafe fn remove_flat_dir(at: i32, name: *const libc::c_char) {
    // SAFETY: system calls on a NUL-terminated name and stack memory.
    unsafe {
        let dir = libc::openat(
            at,
            name,
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        );
        if dir < 0 {
            return;
        }
        let mut meta: libc::stat = std::mem::zeroed();
        if libc::fstat(dir, &mut meta) != 0 || meta.st_uid != libc::getuid() {
            libc::close(dir);
            return;
        }
        let mut names = [[0u8; 256]; 8];
        // Repeat: each pass removes what one reading of the directory listed.
        for _ in 0..64 {
            let mut count = 0;
            for_each_entry(dir, |entry| {
                if count < names.len() && entry.len() < 255 {
                    names[count][..entry.len()].copy_from_slice(entry);
                    names[count][entry.len()] = 0;
                    count += 1;
                }
            });
            if count == 0 {
                break;
            }
            for entry in &names[..count] {
                libc::unlinkat(dir, entry.as_ptr().cast(), 0);
            }
            libc::lseek(dir, 0, libc::SEEK_SET);
        }
        libc::close(dir);
        libc::unlinkat(at, name, libc::AT_REMOVEDIR);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn environment_entries_are_found_whole_across_reads() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("environ");
        let needle = b"\0TESSERA_JOB_ID=abc\0";
        let find = |content: &[u8]| {
            std::fs::write(&path, content).unwrap();
            let file = std::fs::File::open(&path).unwrap();
            // SAFETY: a plain descriptor of an open file.
            unsafe { stream_contains(file.as_raw_fd(), needle) }
        };
        assert!(find(b"TESSERA_JOB_ID=abc\0HOME=/\0"));
        assert!(find(b"HOME=/\0TESSERA_JOB_ID=abc"));
        let mut long = vec![b'x'; 4090];
        long.extend_from_slice(b"\0TESSERA_JOB_ID=abc\0");
        assert!(find(&long));
        assert!(!find(b"TESSERA_JOB_ID=abcd\0"));
        assert!(!find(b"XTESSERA_JOB_ID=abc\0"));
        assert!(!find(b""));
    }

    #[test]
    fn a_killed_launcher_leaves_no_marked_process_and_no_directory() {
        let id = crate::conduit::smp::new_job_id().unwrap();
        let scratch = tempfile::tempdir().unwrap();
        let results = scratch.path().join("results");
        std::fs::create_dir(&results).unwrap();
        std::fs::write(results.join("out.json"), "{}").unwrap();
        // A marked process that does not end by itself.
        let mut marked = std::process::Command::new("sleep")
            .arg("60")
            .env("TESSERA_JOB_ID", &id)
            .spawn()
            .unwrap();
        let mut keeper = Keeper::start(&id, std::slice::from_ref(&results)).unwrap();
        // The launcher "dies": its end of the pipe closes without the done byte.
        drop(keeper.done.take());
        let keeper_status = nix::sys::wait::waitpid(keeper.pid, None).unwrap();
        let status = marked.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            status.signal(),
            Some(libc::SIGKILL),
            "keeper: {keeper_status:?}"
        );
        assert!(!results.exists());
        // A clean end ends nothing.
        let mut bystander = std::process::Command::new("sleep")
            .arg("60")
            .env("TESSERA_JOB_ID", &id)
            .spawn()
            .unwrap();
        Keeper::start(&id, &[]).unwrap().finish();
        assert!(bystander.try_wait().unwrap().is_none());
        bystander.kill().unwrap();
        bystander.wait().unwrap();
    }
}
