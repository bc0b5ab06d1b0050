//! The `smp` conduit: one process per rank over shared memory.
//!
//! Each rank initialises its own *region* (header, active-message rings, segment) and maps
//! every peer's. Where the regions live depends on who started the ranks:
//!
//! - **Under `tessera run`** (the usual case) the launcher creates one private memory file
//!   for the job ([`JobFile`]: an anonymous `memfd`, inherited by the ranks, which no other
//!   process can open or even see) holding the status board and every rank's region at a
//!   fixed offset. Nothing has a name, so nothing can be planted, watched or leaked: the
//!   memory goes away with the last process that maps it, however the job ends.
//! - **Named objects** (the `mpi` conduit's ranks on one host, or `TESSERA_SHM_NAMES=1`):
//!   each host's ranks meet in a directory `/dev/shm/tessera-<job id>` that the host's
//!   first rank creates with mode 0700, so no other user can create, open or list anything
//!   inside it. Job ids are 128 random bits from the operating system. Each rank creates
//!   its file with `O_EXCL | O_NOFOLLOW` and sets mode 0600 explicitly (a strict umask
//!   cannot break the job); before mapping a peer's file it checks with `fstat` that the
//!   file is a regular file of this user with mode 0600 and the expected size, and a
//!   foreign object is refused by name. Once every rank of the host has mapped every
//!   region the names are removed, so a crash after start-up cannot leak them.
//!
//! Under `tessera run` no rank waits for another to start: the file exists, sized for the
//! job, before any rank does, and a zero-filled region is a valid empty one. With named
//! objects a rank publishes its region by storing the header's `magic` last (Release);
//! peers map a region only once they have seen it (Acquire) and its job shape matches.
//!
//! This module must never assume it is the only job, or the only user, on the machine.

use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use memmap2::{MmapOptions, MmapRaw};
use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::stat::Mode;

use super::shm::{header, AlignedMap, KeepAlive, RegionLayout, ShmConduit, MAGIC};
use super::{Bootstrap, Conduit, ConduitKind, Processes, Start};
use crate::board::JobFile;
use crate::error::JobError;

/// The smp conduit as the job layer sees it: one process per rank, started by `tessera
/// run`, meeting through the launcher's memory file or named objects.
pub(crate) struct Smp;

impl Bootstrap for Smp {
    fn name(&self) -> &'static str {
        "smp"
    }

    fn processes(&self) -> Processes {
        Processes::PerRank
    }

    fn connect(&self, start: &Start<'_>) -> Result<Box<dyn Conduit>, JobError> {
        let Some((rank, job_id)) = start.launched else {
            return Err(JobError::Usage(
                "the smp conduit needs ranks started by `tessera run`; use Job::threads for in-process jobs".into(),
            ));
        };
        let conduit = match (start.job_file, start.named_objects) {
            (Some(file), false) => attach_file(file, rank, start.layout),
            _ => attach_named(job_id, rank, start.layout, start.boot_timeout),
        }?;
        Ok(Box::new(conduit.hide_peers(start.hide_peers)))
    }
}

/// Where named objects live (the POSIX shared-memory file system).
pub const SHM_DIR: &str = "/dev/shm";

/// A fresh job id: 128 bits from the operating system's random source, in hex.
///
/// ```
/// let a = tessera::conduit::smp::new_job_id().unwrap();
/// assert_eq!(a.len(), 32);
/// assert_ne!(a, tessera::conduit::smp::new_job_id().unwrap());
/// ```
pub fn new_job_id() -> Result<String, JobError> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| JobError::Os {
        what: "reading the operating system's random source for a job id".into(),
        source: std::io::Error::other(e.to_string()),
    })?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// The directory in which the ranks of job `job_id` on one host meet.
pub fn job_dir(job_id: &str) -> PathBuf {
    Path::new(SHM_DIR).join(format!("tessera-{job_id}"))
}

/// The name of `rank`'s region file inside [`job_dir`].
fn object_file(rank: usize) -> String {
    format!("rank-{rank}")
}

/// Remove what a job's named objects left: its meeting directory and those of each host
/// group of an mpi job (`tessera-<id>-<n>`). The launcher calls this after the job; there
/// is something to remove only if ranks died during start-up. Never follows a symbolic
/// link, and leaves anything that is not this user's directory alone.
pub fn remove_job_dir(job_id: &str) {
    let exact = format!("tessera-{job_id}");
    let group = format!("tessera-{job_id}-");
    let Ok(entries) = std::fs::read_dir(SHM_DIR) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name == exact || name.starts_with(&group) {
            remove_own_flat_dir(&entry.path());
        }
    }
}

/// Remove `dir` and the files in it, if it is a directory of this user's.
fn remove_own_flat_dir(dir: &Path) {
    let Ok(meta) = std::fs::symlink_metadata(dir) else {
        return;
    };
    // SAFETY: getuid has no preconditions.
    if !meta.is_dir() || meta.uid() != unsafe { libc::getuid() } {
        return;
    }
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            let _ = std::fs::remove_file(entry.path());
        }
    }
    let _ = std::fs::remove_dir(dir);
}

fn os(what: impl Into<String>, errno: Errno) -> JobError {
    JobError::Os {
        what: what.into(),
        source: std::io::Error::from(errno),
    }
}

fn base_of(map: &Mapping) -> NonNull<u8> {
    match map {
        Mapping::Plain(map) => NonNull::new(map.as_mut_ptr()).expect("mmap never returns null"),
        Mapping::Aligned(region) => region.base(),
    }
}

/// A region mapped in this process: where the kernel chose, or placed so that its segment
/// starts at a multiple of [`SEGMENT_ADDRESS_ALIGN`] (this rank's own region).
enum Mapping {
    Plain(MmapRaw),
    Aligned(AlignedMap),
}

/// Map this rank's own region (`len` bytes of `fd` from `offset`) with its segment at an
/// aligned address, or where the kernel chooses if that fails (an address-space limit).
fn map_own_region(
    fd: std::os::fd::BorrowedFd<'_>,
    offset: u64,
    layout: &RegionLayout,
) -> std::io::Result<Mapping> {
    match AlignedMap::map(Some(fd), offset, layout.region_len, layout.segment_offset) {
        Ok(map) => Ok(Mapping::Aligned(map)),
        Err(_) => MmapOptions::new()
            .offset(offset)
            .len(layout.region_len)
            .map_raw(fd.as_raw_fd())
            .map(Mapping::Plain),
    }
}

/// Wait until every peer's region is published, mapping each as it appears.
/// `try_peer(peer)` maps it, or says `None` while it is not there yet.
fn attach_peers(
    rank: usize,
    own: Mapping,
    layout: &RegionLayout,
    timeout: Duration,
    mut try_peer: impl FnMut(usize) -> Result<Option<MmapRaw>, JobError>,
) -> Result<Vec<Mapping>, JobError> {
    let mut maps: Vec<Option<Mapping>> = (0..layout.ranks).map(|_| None).collect();
    maps[rank] = Some(own);
    let deadline = Instant::now() + timeout;
    let mut pause = Duration::from_micros(20);
    loop {
        let mut missing = Vec::new();
        for (peer, slot) in maps.iter_mut().enumerate() {
            if slot.is_none() {
                match try_peer(peer)? {
                    Some(map) => {
                        let map = Mapping::Plain(map);
                        // SAFETY: the mapping is at least a page and page aligned.
                        let head = unsafe { header(base_of(&map)) };
                        if head.magic.load(Ordering::Acquire) != MAGIC {
                            missing.push(peer);
                            continue;
                        }
                        layout
                            .check_peer(peer, head)
                            .map_err(|e| JobError::Usage(e.to_string()))?;
                        *slot = Some(map);
                    }
                    None => missing.push(peer),
                }
            }
        }
        if missing.is_empty() {
            return Ok(maps.into_iter().map(|m| m.expect("all attached")).collect());
        }
        if Instant::now() > deadline {
            return Err(JobError::BootstrapTimeout {
                secs: timeout.as_secs(),
                missing,
            });
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(5));
    }
}

fn conduit_over(rank: usize, layout: RegionLayout, maps: Vec<Mapping>) -> ShmConduit {
    let regions: Vec<NonNull<u8>> = maps.iter().map(base_of).collect();
    // SAFETY: `regions` are bases of the live mappings in `maps`, all initialised with
    // `layout` (magic seen, shape checked), which the conduit keeps.
    unsafe { smp_conduit(rank, layout, regions, Arc::new(maps)) }
}

/// The smp conduit over `regions`.
///
/// # Safety
/// Every pointer in `regions` must be the base of a live region with `layout` inside the
/// mappings `keep` holds.
unsafe fn smp_conduit(
    rank: usize,
    layout: RegionLayout,
    regions: Vec<NonNull<u8>>,
    keep: Arc<dyn KeepAlive>,
) -> ShmConduit {
    // SAFETY: the caller's contract is the constructor's; `keep` lives as long as the
    // conduit.
    unsafe { ShmConduit::new(ConduitKind::SMP, rank, layout, regions, None, keep) }
}

/// Join a job whose regions live in the launcher's private memory file.
///
/// Nothing here waits for or reads a peer: the launcher sized the file for the job before
/// any rank started, so every region exists (zero-filled, which is a valid empty region)
/// from the start, and whatever a fast peer writes into this rank's region before this
/// rank arrives stays there. Peers' regions are one mapping, whose pages the kernel maps
/// only where this rank touches them, so a rank pays page tables only for the peers it
/// talks to (see `docs/DESIGN.md`, "Many ranks on a node").
pub(crate) fn attach_file(
    file: &JobFile,
    rank: usize,
    layout: RegionLayout,
) -> Result<ShmConduit, JobError> {
    let span = file.regions().ok_or_else(|| {
        JobError::Usage(
            "the job's memory file holds no regions (it was made for another conduit)".into(),
        )
    })?;
    if (span.region_len, span.segment_len, span.ring_capacity)
        != (layout.region_len, layout.segment_len, layout.ring_capacity)
    {
        return Err(JobError::Usage(format!(
            "this rank was started with a different job shape than the launcher sized the job for: segment {} bytes and active-message queues of {} bytes here, {} and {} there; do not change TESSERA_SEGMENT or TESSERA_AM_QUEUE for single ranks",
            layout.segment_len, layout.ring_capacity, span.segment_len, span.ring_capacity
        )));
    }
    let all_len = layout
        .ranks
        .checked_mul(span.region_len)
        .ok_or_else(|| JobError::Usage("the job's regions overflow the address space".into()))?;
    let peers = MmapOptions::new()
        .offset(span.offset as u64)
        .len(all_len)
        .map_raw(file.fd().as_raw_fd())
        .map_err(|source| JobError::Os {
            what: format!(
                "mapping the job's {} regions ({} bytes each; lower the segment size with --segment or TESSERA_SEGMENT)",
                layout.ranks, span.region_len
            ),
            source,
        })?;
    let own = map_own_region(
        file.fd(),
        (span.offset + rank * span.region_len) as u64,
        &layout,
    )
    .map_err(|source| JobError::Os {
        what: format!(
            "mapping this rank's region ({} bytes; lower the segment size with --segment or TESSERA_SEGMENT)",
            span.region_len
        ),
        source,
    })?;
    // SAFETY: this rank's region of the launcher's zero-filled file; init_region writes
    // only the header, which no peer of a job file reads.
    unsafe { layout.init_region(base_of(&own)) };
    let peers_base = NonNull::new(peers.as_mut_ptr()).expect("mmap never returns null");
    let regions: Vec<NonNull<u8>> = (0..layout.ranks)
        .map(|r| {
            if r == rank {
                base_of(&own)
            } else {
                // SAFETY: r < ranks, so the offset lies inside the mapping of all regions.
                unsafe { NonNull::new_unchecked(peers_base.as_ptr().add(r * span.region_len)) }
            }
        })
        .collect();
    let file_copy = file
        .fd()
        .try_clone_to_owned()
        .map_err(|source| JobError::Os {
            what: "keeping the job's memory file open".into(),
            source,
        })?;
    // SAFETY: `regions` point into the live mappings `own` and `peers` of regions with
    // `layout` (the file was sized for it, checked above); the Arc keeps both mapped as
    // long as the conduit lives.
    let conduit = unsafe { smp_conduit(rank, layout, regions, Arc::new((own, peers))) };
    Ok(conduit.with_region_file(file_copy, (span.offset + rank * span.region_len) as u64))
}

/// Refuse a file or directory that is not this user's with exactly `mode`.
fn check_owned(
    what: &str,
    path: &Path,
    meta: &nix::sys::stat::FileStat,
    mode: u32,
) -> Result<(), JobError> {
    // SAFETY: getuid has no preconditions.
    let me = unsafe { libc::getuid() };
    if meta.st_uid != me {
        return Err(JobError::Usage(format!(
            "{what} {} belongs to user {}, not to you (user {me}): something foreign is in the way of this job; remove it, or ask who made it",
            path.display(),
            meta.st_uid
        )));
    }
    if meta.st_mode & 0o7777 != mode {
        return Err(JobError::Usage(format!(
            "{what} {} has mode {:04o} where this job uses {mode:04o}; remove it and start the job again",
            path.display(),
            meta.st_mode & 0o7777
        )));
    }
    Ok(())
}

/// Whether a peer's object is this user's and not yet sized: its owner sets its mode
/// (0600, whatever the umask made of it) before sizing it, so until then neither mode nor
/// size is final.
fn still_being_made(meta: &nix::sys::stat::FileStat, region_len: usize) -> bool {
    // SAFETY: getuid has no preconditions.
    let mine = meta.st_uid == unsafe { libc::getuid() };
    mine && (meta.st_size as u64) < region_len as u64
}

/// Open the host's meeting directory, creating it (mode 0700) on the host's first rank.
fn open_job_dir(job_id: &str, creator: bool, deadline: Instant) -> Result<OwnedFd, JobError> {
    let dir = job_dir(job_id);
    let flags = OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_RDONLY | OFlag::O_CLOEXEC;
    if creator {
        match nix::unistd::mkdir(&dir, Mode::S_IRWXU) {
            Ok(()) => {}
            Err(Errno::EEXIST) => {
                return Err(JobError::Usage(format!(
                    "{} already exists: another process made it before this job could (job ids are random, so this is not another job of yours); remove it and start again",
                    dir.display()
                )))
            }
            Err(e) => {
                return Err(os(
                    format!("creating {} (is /dev/shm mounted and writable?)", dir.display()),
                    e,
                ))
            }
        }
        let fd = nix::fcntl::open(&dir, flags, Mode::empty())
            .map_err(|e| os(format!("opening {}", dir.display()), e))?;
        // Explicitly, whatever the umask made of mkdir's mode.
        nix::sys::stat::fchmod(&fd, Mode::S_IRWXU)
            .map_err(|e| os(format!("setting the mode of {}", dir.display()), e))?;
        return Ok(fd);
    }
    loop {
        match nix::fcntl::open(&dir, flags, Mode::empty()) {
            Ok(fd) => {
                let meta = nix::sys::stat::fstat(&fd)
                    .map_err(|e| os(format!("fstat of {}", dir.display()), e))?;
                // SAFETY: getuid has no preconditions.
                let mine = meta.st_uid == unsafe { libc::getuid() };
                // The creator sets 0700 right after mkdir: wait for that, but refuse a
                // directory of someone else's at once.
                if !mine || meta.st_mode & 0o7777 == 0o700 || Instant::now() > deadline {
                    check_owned("the job directory", &dir, &meta, 0o700)?;
                    return Ok(fd);
                }
            }
            Err(Errno::ENOENT) => {}
            Err(Errno::ELOOP) | Err(Errno::ENOTDIR) => {
                return Err(JobError::Usage(format!(
                    "{} is not a directory (a symbolic link or a file is in the way of this job); remove it and start again",
                    dir.display()
                )))
            }
            Err(e) => return Err(os(format!("opening {}", dir.display()), e)),
        }
        if Instant::now() > deadline {
            return Err(JobError::Usage(format!(
                "timed out waiting for this host's first rank to create {} (TESSERA_BOOT_TIMEOUT); did it start?",
                dir.display()
            )));
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Warn when the shared-memory file system has less room than the job's segments (they
/// are reserved lazily, so this is only a warning; running out later kills a rank with
/// SIGBUS, which the launcher explains).
fn check_room(layout: &RegionLayout) {
    if let Ok(fs) = nix::sys::statvfs::statvfs(SHM_DIR) {
        let free = fs.blocks_available() as u128 * fs.fragment_size() as u128;
        let want = layout.ranks as u128 * layout.region_len as u128;
        if free < want {
            eprintln!(
                "tessera: warning: {SHM_DIR} has {} MiB free but the {} ranks on this host may touch up to {} MiB of shared memory; a rank that runs out is killed by SIGBUS (lower --segment / TESSERA_SEGMENT, or enlarge {SHM_DIR})",
                free >> 20,
                layout.ranks,
                want >> 20
            );
        }
    }
}

/// Join a job through named objects in the host's meeting directory (see the module
/// documentation).
pub(crate) fn attach_named(
    job_id: &str,
    rank: usize,
    layout: RegionLayout,
    timeout: Duration,
) -> Result<ShmConduit, JobError> {
    let deadline = Instant::now() + timeout;
    if rank == 0 {
        check_room(&layout);
    }
    let dir_fd = open_job_dir(job_id, rank == 0, deadline)?;
    let dir = job_dir(job_id);
    let name = object_file(rank);
    let path = dir.join(&name);
    let fd = nix::fcntl::openat(
        &dir_fd,
        name.as_str(),
        OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_RDWR | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::S_IRUSR | Mode::S_IWUSR,
    )
    .map_err(|e| {
        os(
            format!(
                "creating shared memory {} (something already holds the name)",
                path.display()
            ),
            e,
        )
    })?;
    let mut guard = UnlinkGuard(Some(path.clone()));
    // Before sizing it: peers take the mode of a sized object as final.
    nix::sys::stat::fchmod(&fd, Mode::S_IRUSR | Mode::S_IWUSR)
        .map_err(|e| os(format!("setting the mode of {}", path.display()), e))?;
    let file = File::from(fd);
    file.set_len(layout.region_len as u64)
        .map_err(|source| JobError::Os {
            what: format!("sizing {} to {} bytes", path.display(), layout.region_len),
            source,
        })?;
    let own = map_own_region(file.as_fd(), 0, &layout).map_err(|source| JobError::Os {
        what: format!(
            "mapping {} ({} bytes; lower the segment size with --segment or TESSERA_SEGMENT)",
            path.display(),
            layout.region_len
        ),
        source,
    })?;
    // SAFETY: a fresh, zero-filled mapping of region_len bytes that peers cannot read
    // before they see `magic`, which init_region stores last.
    unsafe { layout.init_region(base_of(&own)) };

    let maps = attach_peers(
        rank,
        own,
        &layout,
        deadline.saturating_duration_since(Instant::now()),
        |peer| {
            let peer_name = object_file(peer);
            let peer_path = dir.join(&peer_name);
            let fd = match nix::fcntl::openat(
                &dir_fd,
                peer_name.as_str(),
                OFlag::O_RDWR | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
                Mode::empty(),
            ) {
                Ok(fd) => fd,
                Err(Errno::ENOENT) => return Ok(None),
                Err(Errno::EACCES) => {
                    // Under a strict umask the owner's object is briefly read-only (it
                    // sets 0600 right after creating it): wait for that, but name any
                    // other reason for the refusal.
                    let meta = nix::sys::stat::fstatat(
                        &dir_fd,
                        peer_name.as_str(),
                        nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
                    )
                    .map_err(|e| os(format!("stat of {}", peer_path.display()), e))?;
                    if still_being_made(&meta, layout.region_len) {
                        return Ok(None);
                    }
                    check_owned("shared-memory object", &peer_path, &meta, 0o600)?;
                    return Err(os(
                        format!(
                            "opening rank {peer}'s shared memory {}",
                            peer_path.display()
                        ),
                        Errno::EACCES,
                    ));
                }
                Err(Errno::ELOOP) => {
                    return Err(JobError::Usage(format!(
                    "{} is a symbolic link, not a rank's shared memory; remove it and start again",
                    peer_path.display()
                )))
                }
                Err(e) => {
                    return Err(os(
                        format!(
                            "opening rank {peer}'s shared memory {}",
                            peer_path.display()
                        ),
                        e,
                    ))
                }
            };
            let meta = nix::sys::stat::fstat(fd.as_fd())
                .map_err(|e| os(format!("fstat of {}", peer_path.display()), e))?;
            if meta.st_mode & libc::S_IFMT != libc::S_IFREG {
                return Err(JobError::Usage(format!(
                    "{} is not a regular file; remove it and start again",
                    peer_path.display()
                )));
            }
            if still_being_made(&meta, layout.region_len) {
                return Ok(None);
            }
            check_owned("shared-memory object", &peer_path, &meta, 0o600)?;
            let map = MmapOptions::new()
                .len(layout.region_len)
                .map_raw(fd.as_raw_fd())
                .map_err(|source| JobError::Os {
                    what: format!(
                        "mapping {} (lower the segment size with --segment or TESSERA_SEGMENT)",
                        peer_path.display()
                    ),
                    source,
                })?;
            Ok(Some(map))
        },
    )?;
    // Count ourselves in every region; the name goes once every rank has mapped ours.
    for map in &maps {
        // SAFETY: every region is a live mapping with an initialised header.
        unsafe { header(base_of(map)) }
            .attached
            .fetch_add(1, Ordering::AcqRel);
    }
    // SAFETY: as above.
    let own_header = unsafe { header(base_of(&maps[rank])) };
    while own_header.attached.load(Ordering::Acquire) < layout.ranks as u64 {
        if Instant::now() > deadline {
            return Err(JobError::BootstrapTimeout {
                secs: timeout.as_secs(),
                missing: vec![],
            });
        }
        std::thread::sleep(Duration::from_micros(50));
    }
    drop(guard.0.take());
    nix::unistd::unlinkat(
        &dir_fd,
        name.as_str(),
        nix::unistd::UnlinkatFlags::NoRemoveDir,
    )
    .map_err(|e| os(format!("unlinking {}", path.display()), e))?;
    // The last rank of the host to unlink removes the directory (the others find it not
    // yet empty).
    let _ = std::fs::remove_dir(&dir);
    Ok(conduit_over(rank, layout, maps).with_region_file(OwnedFd::from(file), 0))
}

/// Unlinks our object when dropped unless disarmed (error paths during attach).
struct UnlinkGuard(Option<PathBuf>);
impl Drop for UnlinkGuard {
    fn drop(&mut self) {
        if let Some(path) = self.0.take() {
            let _ = std::fs::remove_file(&path);
            if let Some(dir) = path.parent() {
                let _ = std::fs::remove_dir(dir);
            }
        }
    }
}
