//! Direct reads of another rank's *private* memory on the same host (Linux's cross-memory
//! attach, `process_vm_readv`): the single-copy path of long collective messages whose
//! data sits in the sender's own buffers rather than in its segment. Without it such a
//! message is copied twice, into the receiver's mailbox and out of it.
//!
//! The kernel grants the read only where the reader could debug the owner (the same user,
//! and ptrace not restricted further), so it opens nothing to another user, and the owner
//! names the range itself. Whether it works here is probed when a world team is made
//! ([`Probe`]): every member reads a word from every mapped peer, and all members agree
//! before any message relies on it; where it does not (a sandbox that filters the call, a
//! hardened ptrace scope, or `TESSERA_DIRECT=0`) long messages keep to the mailbox.
//!
//! Long messages may also be *split* (`protocol::split`): the sender, which would only wait
//! for the read, writes the second half into the receiver's destination
//! (`process_vm_writev`) while the receiver reads the first, so both cores copy.
//!
//! This module must never read a range whose owner may change or free it meanwhile (the
//! team channel's protocol keeps the sender waiting for the reader's acknowledgement), nor
//! write one whose owner is not waiting for the write (the split's state word keeps the
//! receiver from reusing its buffer until the sender says it is done).

use nix::errno::Errno;
use nix::sys::uio::{process_vm_readv, process_vm_writev, RemoteIoVec};
use nix::unistd::Pid;

use crate::error::CoreError;
use crate::Result;

/// This process's id, read once. `std::process::id()` is a system call every time (the C
/// library no longer caches it), about 90 ns on a 2-core virtual machine, and every long
/// message names its process twice (the sender's offer, the receiver's posted
/// destination): fifteen of each per member in a 16-member flat allgather. Ranks start by
/// `exec`, so each has its own; the one process forked without `exec` (the job's keeper,
/// `job::keeper`) moves no data.
fn this_process() -> u64 {
    static PID: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *PID.get_or_init(|| u64::from(std::process::id()))
}

/// Where a range of a rank's private memory is: its process and the address there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub(crate) struct RemoteRange {
    /// The owner's process id.
    pub(crate) pid: u64,
    /// The range's address in the owner's address space.
    pub(crate) addr: u64,
    /// Its length in bytes.
    pub(crate) bytes: u64,
}

impl RemoteRange {
    /// The range `data` of this process.
    pub(crate) fn of(data: &[u8]) -> RemoteRange {
        RemoteRange {
            pid: this_process(),
            addr: data.as_ptr() as u64,
            bytes: data.len() as u64,
        }
    }

    /// The range `out` of this process, for a peer to write into (`write_from`): the
    /// address is taken from the mutable borrow, which the caller keeps untouched until
    /// the peer says it is done.
    pub(crate) fn of_mut(out: &mut [u8]) -> RemoteRange {
        RemoteRange {
            pid: this_process(),
            addr: out.as_mut_ptr() as u64,
            bytes: out.len() as u64,
        }
    }

    /// The `bytes` bytes from `offset` of this range.
    pub(crate) fn part(&self, offset: usize, bytes: usize) -> RemoteRange {
        debug_assert!((offset + bytes) as u64 <= self.bytes);
        RemoteRange {
            pid: self.pid,
            addr: self.addr + offset as u64,
            bytes: bytes as u64,
        }
    }

    /// Copy the whole range into `out` (exactly as long).
    pub(crate) fn read_into(&self, out: &mut [u8]) -> Result<()> {
        debug_assert_eq!(out.len() as u64, self.bytes);
        self.each_piece(out.len(), "reading", |done, remote| {
            let mut local = [std::io::IoSliceMut::new(&mut out[done..])];
            process_vm_readv(self.process(), &mut local, remote)
        })
    }

    /// Copy `data` (exactly as long) into the whole range. Only into a range whose owner
    /// waits for the write and changes nothing in it meanwhile (`protocol::split`).
    pub(crate) fn write_from(&self, data: &[u8]) -> Result<()> {
        debug_assert_eq!(data.len() as u64, self.bytes);
        self.each_piece(data.len(), "writing", |done, remote| {
            let local = [std::io::IoSlice::new(&data[done..])];
            process_vm_writev(self.process(), &local, remote)
        })
    }

    fn process(&self) -> Pid {
        Pid::from_raw(self.pid as i32)
    }

    /// Move `len` bytes by `call(bytes done, the rest of the range)` until all have moved
    /// (the kernel may move fewer than asked).
    fn each_piece(
        &self,
        len: usize,
        doing: &str,
        mut call: impl FnMut(usize, &[RemoteIoVec; 1]) -> nix::Result<usize>,
    ) -> Result<()> {
        let mut done = 0;
        while done < len {
            let remote = [RemoteIoVec {
                base: (self.addr as usize).wrapping_add(done),
                len: len - done,
            }];
            match call(done, &remote) {
                Ok(0) => return Err(self.failed(doing, "nothing moved")),
                Ok(n) => done += n,
                Err(Errno::EINTR) => {}
                Err(e) => return Err(self.failed(doing, &e.to_string())),
            }
        }
        Ok(())
    }

    fn failed(&self, doing: &str, why: &str) -> crate::Error {
        CoreError::Internal(format!(
            "{doing} {} bytes of process {}'s memory directly failed ({why}); the team's probe had found direct reads working, so the process may have ended or changed its permissions (TESSERA_DIRECT=0 keeps long messages to the mailbox)",
            self.bytes, self.pid
        ))
        .into()
    }
}

/// A word this rank lends to its peers' probe, alive until they have read it.
pub(crate) struct Probe {
    word: Box<u64>,
}

impl Probe {
    /// A probe word holding `value`.
    pub(crate) fn new(value: u64) -> Probe {
        Probe {
            word: Box::new(value),
        }
    }

    /// Where the word is, for the peers.
    pub(crate) fn range(&self) -> RemoteRange {
        RemoteRange::of(bytemuck::bytes_of(&*self.word))
    }

    /// Whether the word at `peer` can be read and holds `expected`.
    pub(crate) fn reads(peer: RemoteRange, expected: u64) -> bool {
        let mut got = [0u8; 8];
        peer.bytes == 8 && peer.read_into(&mut got).is_ok() && u64::from_ne_bytes(got) == expected
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_of_this_process_reads_back_and_a_bad_one_is_an_error() {
        let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7) as u8).collect();
        let mut out = vec![0u8; data.len()];
        RemoteRange::of(&data).read_into(&mut out).unwrap();
        assert_eq!(out, data);
        let mut back = vec![0u8; data.len()];
        RemoteRange::of_mut(&mut back)
            .part(1000, 5000)
            .write_from(&data[..5000])
            .unwrap();
        assert_eq!(&back[1000..6000], &data[..5000]);
        assert!(back[..1000].iter().chain(&back[6000..]).all(|&b| b == 0));
        let probe = Probe::new(0xfeed);
        assert!(Probe::reads(probe.range(), 0xfeed));
        assert!(!Probe::reads(probe.range(), 0xbeef));
        let bad = RemoteRange {
            pid: u64::from(std::process::id()),
            addr: 8,
            bytes: 8,
        };
        let err = bad.read_into(&mut [0u8; 8]).unwrap_err().to_string();
        assert!(err.contains("TESSERA_DIRECT=0"), "{err}");
    }
}
