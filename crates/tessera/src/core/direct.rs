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
//! The kernel copies with `rep movsb`, which on AMD Zen 3 and Zen 4 slows down where the
//! destination lies a few bytes past the source modulo 4 KiB (1 to 31 on Zen 3, 1 to 15 on
//! Zen 4), as `core::copy` describes for the library's own copies. On the Zen 3 host
//! (`examples/direct_read_pages --gaps` of tessera-cli, two runs), 256 KiB read at 4-28
//! bytes past took 112-172 µs against 24-31 at 0 and 24-36 at 32-256; 1 MiB from huge
//! pages 378-470 against 42-43 at 0 and 46-58 at 32-256. On the Zen 4 host, 1 MiB from huge
//! pages took 320-324 µs at 1-15 bytes past against 39 at 0, 42-43 at 16 and 37-47 at
//! 17-256. Whether a read meets it depends only on where the two buffers lie: a
//! page-aligned array read into a large heap `Vec` (often 16 bytes past a page) does. So
//! a read or write at such a gap, on such a processor, goes through a buffer of this
//! thread's placed at the remote range's own offset in the page ([`Bounce`]): the kernel
//! copies at gap 0 and the library's `copy` does the rest, a piece at a time (backwards
//! below 1 MiB, where glibc's `memmove` would use `rep movsb`; a whole 1 MiB piece is one
//! `memmove`, which glibc no longer copies with it).
//!
//! This module must never read a range whose owner may change or free it meanwhile (the
//! team channel's protocol keeps the sender waiting for the reader's acknowledgement), nor
//! write one whose owner is not waiting for the write (the split's state word keeps the
//! receiver from reusing its buffer until the sender says it is done).

use nix::errno::Errno;
use nix::sys::uio::{process_vm_readv, process_vm_writev, RemoteIoVec};
use nix::unistd::Pid;

use crate::core::copy::{copy_slice, family_and_model, short_gaps_are_slow};
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
        if Bounce::pays(self.addr, out.as_ptr() as u64, out.len()) {
            return self.read_through_bounce(out);
        }
        self.read_directly(out)
    }

    /// [`RemoteRange::read_into`] through this thread's [`Bounce`], a piece at a time.
    fn read_through_bounce(&self, out: &mut [u8]) -> Result<()> {
        Bounce::with(|bounce| {
            let pieces = out.chunks_mut(BOUNCE_PIECE);
            for (at, piece) in (0..).step_by(BOUNCE_PIECE).zip(pieces) {
                let part = self.part(at, piece.len());
                let near = bounce.placed_like(part.addr, piece.len());
                part.read_directly(near)?;
                copy_slice(piece, near);
            }
            Ok(())
        })
    }

    /// [`RemoteRange::read_into`] as one kernel copy, whatever the gap.
    fn read_directly(&self, out: &mut [u8]) -> Result<()> {
        self.each_piece(out.len(), "reading", |done, remote| {
            let mut local = [std::io::IoSliceMut::new(&mut out[done..])];
            process_vm_readv(self.process(), &mut local, remote)
        })
    }

    /// Copy `data` (exactly as long) into the whole range. Only into a range whose owner
    /// waits for the write and changes nothing in it meanwhile (`protocol::split`).
    pub(crate) fn write_from(&self, data: &[u8]) -> Result<()> {
        debug_assert_eq!(data.len() as u64, self.bytes);
        if Bounce::pays(data.as_ptr() as u64, self.addr, data.len()) {
            return self.write_through_bounce(data);
        }
        self.write_directly(data)
    }

    /// [`RemoteRange::write_from`] through this thread's [`Bounce`], a piece at a time.
    fn write_through_bounce(&self, data: &[u8]) -> Result<()> {
        Bounce::with(|bounce| {
            let pieces = data.chunks(BOUNCE_PIECE);
            for (at, piece) in (0..).step_by(BOUNCE_PIECE).zip(pieces) {
                let part = self.part(at, piece.len());
                let near = bounce.placed_like(part.addr, piece.len());
                copy_slice(near, piece);
                part.write_directly(near)?;
            }
            Ok(())
        })
    }

    /// [`RemoteRange::write_from`] as one kernel copy, whatever the gap.
    fn write_directly(&self, data: &[u8]) -> Result<()> {
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

/// The widest gap (destination minus source, modulo 4 KiB) at which the kernel's copy is
/// slow on a processor of this `family` and `model` (`cpuid`'s, as `/proc/cpuinfo` shows
/// them), where [`short_gaps_are_slow`]: reads and writes at gaps from 1 to this many
/// bytes go through a [`Bounce`]. Zen 4 (family 25, models 16-31, 96-127, 160-175): 15;
/// a 1 MiB read took 320-364 µs at 1-15 bytes past, 38-87 at 0 and 42-87 at 16-256, and
/// through the bounce gap 16 cost 1.32-1.46 times gap 0 at 1 MiB in
/// `examples/collective_gaps` (one kernel copy: 1.04-1.30). Zen 3
/// and every processor not measured: 31 (on Zen 3 the kernel's copy took 4-10 times as
/// long at 4-28 bytes past, and at most 1.4 times at 32-255, less than the second copy
/// costs). A missed slow gap costs four times; a needless bounce less than one and a half.
fn widest_slow_kernel_gap(family: u32, model: u32) -> u64 {
    let zen_4 = family == 25 && matches!(model, 0x10..=0x1F | 0x60..=0x7F | 0xA0..=0xAF);
    if zen_4 {
        15
    } else {
        31
    }
}

/// [`widest_slow_kernel_gap`] for this processor, read once.
fn bounce_gap() -> u64 {
    static GAP: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *GAP.get_or_init(|| match family_and_model() {
        Some((family, model)) => widest_slow_kernel_gap(family, model),
        None => 31,
    })
}

/// Bytes a [`Bounce`] moves at a time. Fewer system calls won over a second copy from the
/// L2 cache: on the Zen 3 host a 1 MiB all-to-all and allgather at 2 ranks at gap 16
/// took 1.39-1.51 times their time at gap 0 in 1 MiB pieces, 1.45-1.54 in 256 KiB ones,
/// 1.53-1.61 in 128 KiB ones and 1.8-2.1 in 32 KiB ones (`examples/collective_gaps`, two
/// runs each).
const BOUNCE_PIECE: usize = 1 << 20;

/// Reads and writes of this many bytes and more at a slow gap go through a [`Bounce`];
/// shorter ones cost a system call more than the copy.
const BOUNCE_FROM: usize = 4096;

/// A buffer of this thread's for direct reads and writes whose two ends lie at a slow gap
/// (module doc): made at the first such copy and kept for the thread's life.
struct Bounce {
    area: Vec<u8>,
}

impl Bounce {
    /// Whether a copy of `len` bytes from address `src` to `dst` goes through the bounce
    /// buffer on this processor.
    fn pays(src: u64, dst: u64, len: usize) -> bool {
        let gap = dst.wrapping_sub(src) % 4096;
        len >= BOUNCE_FROM && gap >= 1 && short_gaps_are_slow() && gap <= bounce_gap()
    }

    /// Run `f` with this thread's bounce buffer.
    fn with<R>(f: impl FnOnce(&mut Bounce) -> R) -> R {
        thread_local! {
            static BOUNCE: std::cell::RefCell<Bounce> = const {
                std::cell::RefCell::new(Bounce { area: Vec::new() })
            };
        }
        BOUNCE.with_borrow_mut(f)
    }

    /// `len` (at most [`BOUNCE_PIECE`]) bytes of the buffer starting at the same offset in
    /// a 4 KiB page as address `like`.
    fn placed_like(&mut self, like: u64, len: usize) -> &mut [u8] {
        debug_assert!(len <= BOUNCE_PIECE);
        if self.area.is_empty() {
            self.area = vec![0; BOUNCE_PIECE + 4096];
        }
        let base = self.area.as_ptr() as u64;
        let start = (like.wrapping_sub(base) % 4096) as usize;
        &mut self.area[start..start + len]
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

    /// Reads and writes at gaps that go through the bounce buffer on this processor or
    /// not, and through it on any processor, over several pieces and within one: the
    /// destination holds the source byte for byte and nothing around it moves.
    #[test]
    fn reads_and_writes_at_every_gap_copy_byte_for_byte() {
        let len = 2 * BOUNCE_PIECE + 4321;
        let data: Vec<u8> = (0..len as u32 + 4096)
            .map(|i| (i * 13 + i / 251) as u8)
            .collect();
        let mut out = vec![0u8; len + 8192];
        for gap in [0usize, 1, 8, 16, 24, 31, 32, 64, 4088] {
            for bytes in [len, BOUNCE_FROM + 8, 100] {
                let src = &data[64..64 + bytes];
                // Where in `out` the destination lies `gap` bytes past `src` modulo 4 KiB.
                let at = (src.as_ptr() as usize + gap).wrapping_sub(out.as_ptr() as usize) % 4096;
                for bounced in [false, true] {
                    let how = format!("gap {gap}, {bytes} bytes, bounced {bounced}");
                    out.fill(0);
                    let (range, into) = (RemoteRange::of(src), &mut out[at..at + bytes]);
                    match bounced {
                        false => range.read_into(into).unwrap(),
                        true => range.read_through_bounce(into).unwrap(),
                    }
                    assert_eq!(&out[at..at + bytes], src, "read, {how}");
                    assert!(out[..at].iter().chain(&out[at + bytes..]).all(|&b| b == 0));
                    out.fill(0);
                    let range = RemoteRange::of_mut(&mut out[at..at + bytes]);
                    match bounced {
                        false => range.write_from(src).unwrap(),
                        true => range.write_through_bounce(src).unwrap(),
                    }
                    assert_eq!(&out[at..at + bytes], src, "write, {how}");
                    assert!(out[..at].iter().chain(&out[at + bytes..]).all(|&b| b == 0));
                }
            }
        }
    }

    /// The bounce buffer's piece starts at the offset in its page of the address it is
    /// placed like, and only slow gaps on a processor where they are slow pay for it.
    #[test]
    fn the_bounce_buffer_sits_at_the_remote_offset() {
        Bounce::with(|bounce| {
            for like in [0u64, 16, 4095, 0x7f00_1234_5678] {
                let piece = bounce.placed_like(like, BOUNCE_PIECE);
                assert_eq!(piece.len(), BOUNCE_PIECE);
                assert_eq!(piece.as_ptr() as u64 % 4096, like % 4096);
            }
        });
        let slow = short_gaps_are_slow();
        assert_eq!(Bounce::pays(4096, 4096 + 8, 1 << 20), slow);
        assert_eq!(Bounce::pays(0, 4096 * 7 + 15, 1 << 20), slow);
        let wide = slow && bounce_gap() == 31;
        assert_eq!(Bounce::pays(4096, 4096 + 16, 1 << 20), wide);
        assert_eq!(Bounce::pays(0, 4096 * 7 + 31, 1 << 20), wide);
        assert!(!Bounce::pays(4096, 4096 + 32, 1 << 20));
        assert!(!Bounce::pays(4096, 8192, 1 << 20));
        assert!(!Bounce::pays(4096, 4096 + 16, BOUNCE_FROM - 1));
    }

    /// The slow window by processor: Zen 4 (measured) to 15 bytes, Zen 3 (measured) and
    /// processors never measured to 31.
    #[test]
    fn the_slow_window_follows_the_processor() {
        for (family, model, widest) in [
            (25, 0x01, 31), // EPYC 7003 (Milan), Zen 3
            (25, 0x50, 31), // Ryzen 5000 APU (Cezanne), Zen 3
            (25, 0x11, 15), // EPYC 9004 (Genoa), Zen 4
            (25, 0x61, 15), // Ryzen 7000 (Raphael), Zen 4
            (25, 0xA0, 15), // EPYC 97x4 (Bergamo), Zen 4
            (26, 0x02, 31), // Zen 5, not measured
            (23, 0x31, 31), // Zen 2, not measured
        ] {
            assert_eq!(
                widest_slow_kernel_gap(family, model),
                widest,
                "{family} {model:#x}"
            );
        }
    }
}
