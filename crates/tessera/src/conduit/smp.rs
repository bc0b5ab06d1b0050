//! The `smp` conduit: one process per rank over POSIX shared memory.
//!
//! Each rank creates its region as a POSIX shared-memory object named
//! `/tessera-<job id>-<rank>` (mode 0600, so only the user can open it), sized with
//! `ftruncate` (pages are reserved lazily, on first touch), maps it, initialises its
//! header and publishes it. It then maps every peer's object, counts itself in each
//! peer's `attached` word, waits until every rank has counted itself in its own, and
//! unlinks its name. From then on the objects live only as mappings: when the processes
//! end, the memory goes with them, so a crash cannot leak it. (If a rank dies before
//! everyone attached, the launcher removes the names it left.)
//!
//! This module must never assume it is the only job on the machine: names carry the job
//! id and creation uses `O_EXCL`.

use std::fs::File;
use std::ptr::NonNull;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use memmap2::{MmapOptions, MmapRaw};
use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::mman::{shm_open, shm_unlink};
use nix::sys::stat::Mode;

use super::shm::{header, RegionLayout, ShmConduit, MAGIC};
use super::ConduitKind;
use crate::error::JobError;

/// The name of `rank`'s shared-memory object in job `job_id` (also its file name under
/// `/dev/shm` without the leading slash).
pub fn object_name(job_id: &str, rank: usize) -> String {
    format!("/tessera-{job_id}-{rank}")
}

fn os(what: impl Into<String>, errno: Errno) -> JobError {
    JobError::Os {
        what: what.into(),
        source: std::io::Error::from(errno),
    }
}

/// Unlinks our object name when dropped unless disarmed (error paths during attach).
struct UnlinkGuard(Option<String>);
impl Drop for UnlinkGuard {
    fn drop(&mut self) {
        if let Some(name) = self.0.take() {
            let _ = shm_unlink(name.as_str());
        }
    }
}

fn map_region(file: &File, layout: &RegionLayout) -> std::io::Result<MmapRaw> {
    MmapOptions::new().len(layout.region_len).map_raw(file)
}

fn base_of(map: &MmapRaw) -> NonNull<u8> {
    NonNull::new(map.as_mut_ptr()).expect("mmap never returns null")
}

/// Try to map `peer`'s region; `Ok(None)` while it does not exist or is not initialised.
fn try_attach_peer(
    job_id: &str,
    peer: usize,
    layout: &RegionLayout,
) -> Result<Option<MmapRaw>, JobError> {
    let name = object_name(job_id, peer);
    let fd = match shm_open(name.as_str(), OFlag::O_RDWR, Mode::empty()) {
        Ok(fd) => fd,
        Err(Errno::ENOENT) => return Ok(None),
        Err(e) => return Err(os(format!("opening rank {peer}'s shared memory {name}"), e)),
    };
    let file = File::from(fd);
    let len = file
        .metadata()
        .map_err(|source| JobError::Os {
            what: format!("stat of {name}"),
            source,
        })?
        .len();
    if len < layout.region_len as u64 {
        return Ok(None); // the owner has not sized it yet
    }
    let map = map_region(&file, layout).map_err(|source| JobError::Os {
        what: format!("mapping {name} (lower the segment size with --segment or TESSERA_SEGMENT)"),
        source,
    })?;
    // SAFETY: the mapping is at least region_len bytes and page aligned.
    let head = unsafe { header(base_of(&map)) };
    if head.magic.load(Ordering::Acquire) != MAGIC {
        return Ok(None);
    }
    layout
        .check_peer(peer, head)
        .map_err(|e| JobError::Usage(e.to_string()))?;
    Ok(Some(map))
}

/// Create this rank's region, map every peer's, and return the conduit.
pub(crate) fn attach(
    job_id: &str,
    rank: usize,
    layout: RegionLayout,
    timeout: Duration,
) -> Result<ShmConduit, JobError> {
    let ranks = layout.ranks;
    let name = object_name(job_id, rank);
    let fd = shm_open(
        name.as_str(),
        OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_RDWR,
        Mode::S_IRUSR | Mode::S_IWUSR,
    )
    .map_err(|e| {
        os(
            format!("creating shared memory {name} (is another job using id {job_id}?)"),
            e,
        )
    })?;
    let mut guard = UnlinkGuard(Some(name.clone()));
    let file = File::from(fd);
    file.set_len(layout.region_len as u64)
        .map_err(|source| JobError::Os {
            what: format!("sizing {name} to {} bytes", layout.region_len),
            source,
        })?;
    let own = map_region(&file, &layout).map_err(|source| JobError::Os {
        what: format!(
            "mapping {name} ({} bytes; lower the segment size with --segment or TESSERA_SEGMENT)",
            layout.region_len
        ),
        source,
    })?;
    // SAFETY: a fresh, zero-filled mapping of region_len bytes that peers cannot read
    // before they see `magic`, which init_region stores last.
    unsafe { layout.init_region(base_of(&own)) };

    let mut maps: Vec<Option<MmapRaw>> = (0..ranks).map(|_| None).collect();
    maps[rank] = Some(own);
    let deadline = Instant::now() + timeout;
    let mut pause = Duration::from_micros(20);
    loop {
        let mut missing = Vec::new();
        for (peer, slot) in maps.iter_mut().enumerate() {
            if slot.is_none() {
                match try_attach_peer(job_id, peer, &layout)? {
                    Some(map) => *slot = Some(map),
                    None => missing.push(peer),
                }
            }
        }
        if missing.is_empty() {
            break;
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
    let maps: Vec<MmapRaw> = maps.into_iter().map(|m| m.expect("all attached")).collect();
    let regions: Vec<NonNull<u8>> = maps.iter().map(base_of).collect();
    for &region in &regions {
        // SAFETY: every region is a live mapping with an initialised header.
        unsafe { header(region) }
            .attached
            .fetch_add(1, Ordering::AcqRel);
    }
    // SAFETY: as above.
    let own_header = unsafe { header(regions[rank]) };
    while own_header.attached.load(Ordering::Acquire) < ranks as u64 {
        if Instant::now() > deadline {
            return Err(JobError::BootstrapTimeout {
                secs: timeout.as_secs(),
                missing: vec![],
            });
        }
        std::thread::sleep(Duration::from_micros(50));
    }
    // Every rank has mapped our region: the name is no longer needed.
    drop(guard.0.take());
    shm_unlink(name.as_str()).map_err(|e| os(format!("unlinking {name}"), e))?;
    // SAFETY: `regions` are bases of the live mappings in `maps`, all initialised with
    // `layout`; the Arc keeps them mapped as long as the conduit lives.
    Ok(unsafe {
        ShmConduit::new(
            ConduitKind::Smp,
            rank,
            layout,
            regions,
            None,
            Arc::new(maps),
        )
    })
}
