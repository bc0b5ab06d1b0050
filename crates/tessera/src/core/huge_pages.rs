//! Large private arrays on transparent huge pages: the buffers to give long messages and
//! large working arrays.
//!
//! Two things go faster when a private array of a megabyte or more sits on 2 MiB pages.
//! A kernel that streams it each iteration (CG's matrix) spends less time in TLB misses
//! and in the hardware prefetchers stopping at every 4 KiB page. And a long message read
//! straight from such an array by a peer (a collective's input of 16 KiB or more between
//! ranks of one host, DESIGN.md "Direct reads") costs the kernel less per byte: on a
//! 2-core AMD EPYC (Zen 3, Linux 6.18) `process_vm_readv` of 1 MiB took 41–46 µs from huge
//! pages and 91–98 µs from a `Vec`, into either kind (memcpy 27–40 µs;
//! `examples/direct_read_pages` of tessera-cli), and the 1 MiB collectives of `tessera
//! bench coll -n 2` ran 1.3–2.0× faster with every buffer in these arrays. The source's
//! pages are what count; where the destination lies a few bytes past the source modulo 4
//! KiB (a large heap `Vec` often starts 16 bytes past a page, these arrays on one), the read goes
//! through a buffer of the library's (`core::direct`).
//!
//! A [`HugePageArray`] of at least half a huge page lives in its own anonymous mapping,
//! sized in whole 2 MiB pages and advised for transparent huge pages (the usual `madvise`
//! setting of Linux honours that). A smaller one, or one whose mapping is refused, is an
//! ordinary heap array: the advice is only ever a hint, never a condition for correct
//! results.
//!
//! This module must never hold data that ranks share: those belong in the global address
//! space.

use std::fmt;
use std::ops::{Deref, DerefMut};

use bytemuck::Pod;
use memmap2::{Advice, MmapMut, MmapOptions};

/// The size of a transparent huge page on x86-64 and most arm64 systems.
const HUGE_PAGE: usize = 2 << 20;

/// The smallest array given its own mapping: half a huge page, so at most half of the
/// mapping is left unused.
const MAPPED_FROM: usize = HUGE_PAGE / 2;

/// An array of plain values, on huge pages where the system grants them: made as a copy
/// of a slice, or zeroed and filled in place. It dereferences to a slice, so it goes
/// wherever a collective or a kernel takes one.
///
/// ```
/// use tessera::HugePageArray;
/// let a = HugePageArray::from_slice(&[1.5f64, 2.5, 3.5]);
/// assert_eq!(a.iter().sum::<f64>(), 7.5);
/// assert_eq!(&a[1..], &[2.5, 3.5]);
/// // A long message's buffer: 1 MiB of u64, filled in place.
/// let mut block = HugePageArray::<u64>::zeroed(1 << 17);
/// block.fill(7);
/// assert!(block.iter().all(|&v| v == 7));
/// ```
pub struct HugePageArray<T: Pod> {
    storage: Storage<T>,
}

enum Storage<T: Pod> {
    /// `len` values from byte `start` of a private anonymous mapping (`start` puts them on
    /// a 2 MiB boundary).
    Mapped {
        map: MmapMut,
        start: usize,
        len: usize,
    },
    /// Arrays below half a huge page, and the fallback where the mapping failed.
    Heap(Vec<T>),
}

/// A private anonymous mapping with room for `bytes` from a 2 MiB boundary, advised for
/// huge pages before its first write (so its pages are huge from their first fault), and
/// where that room starts. None where the system refuses the mapping.
fn map_huge(bytes: usize) -> Option<(MmapMut, usize)> {
    let whole = bytes.next_multiple_of(HUGE_PAGE);
    // Whole huge pages are placed on a 2 MiB boundary by recent kernels; where the mapping
    // came back elsewhere, one more huge page of room gives a boundary inside it (the
    // pages before it are never touched, so they take no memory).
    let map = MmapOptions::new().len(whole).map_anon().ok()?;
    let (map, start) = match map.as_ptr().align_offset(HUGE_PAGE) {
        0 => (map, 0),
        _ => {
            drop(map);
            let map = MmapOptions::new().len(whole + HUGE_PAGE).map_anon().ok()?;
            let start = map.as_ptr().align_offset(HUGE_PAGE);
            (map, start)
        }
    };
    // Refusal leaves ordinary pages; nothing else changes.
    let _ = map.advise_range(Advice::HugePage, start, whole);
    Some((map, start))
}

impl<T: Pod> HugePageArray<T> {
    /// `len` zeros, to be filled in place (so a large array is never held twice while it
    /// is built).
    ///
    /// ```
    /// use tessera::HugePageArray;
    /// let mut a = HugePageArray::<u32>::zeroed(5);
    /// a[4] = 9;
    /// a.truncate(5);
    /// assert_eq!(&a[..], &[0, 0, 0, 0, 9]);
    /// ```
    pub fn zeroed(len: usize) -> HugePageArray<T> {
        // Saturated, a length beyond memory fails the mapping and then the heap array,
        // with the standard library's capacity error.
        let bytes = len.saturating_mul(size_of::<T>());
        if bytes >= MAPPED_FROM {
            if let Some((map, start)) = map_huge(bytes) {
                // Anonymous pages read as zeros, which is a valid value of any `Pod` type.
                return HugePageArray {
                    storage: Storage::Mapped { map, start, len },
                };
            }
        }
        HugePageArray {
            storage: Storage::Heap(vec![T::zeroed(); len]),
        }
    }

    /// The values, to change in place (as `&mut a[..]` does).
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        match &mut self.storage {
            Storage::Mapped { map, start, len } => {
                bytemuck::cast_slice_mut(&mut map[*start..*start + *len * size_of::<T>()])
            }
            Storage::Heap(v) => v,
        }
    }

    /// Keep only the first `len` values (no effect if there are fewer).
    pub fn truncate(&mut self, new_len: usize) {
        match &mut self.storage {
            Storage::Mapped { len, .. } => *len = new_len.min(*len),
            Storage::Heap(v) => v.truncate(new_len),
        }
    }

    /// A copy of `data`.
    pub fn from_slice(data: &[T]) -> HugePageArray<T> {
        let bytes: &[u8] = bytemuck::cast_slice(data);
        if bytes.len() < MAPPED_FROM {
            // A huge page would be mostly empty, and zeroing it costs more than it saves.
            return HugePageArray {
                storage: Storage::Heap(data.to_vec()),
            };
        }
        let storage = match map_huge(bytes.len()) {
            Some((mut map, start)) => {
                map[start..start + bytes.len()].copy_from_slice(bytes);
                Storage::Mapped {
                    map,
                    start,
                    len: data.len(),
                }
            }
            None => Storage::Heap(data.to_vec()),
        };
        HugePageArray { storage }
    }
}

impl<T: Pod> Deref for HugePageArray<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        match &self.storage {
            // The values start on a 2 MiB boundary, aligned for any `T`, and `len` of them
            // were written by `from_slice` or are zeros: the cast cannot fail.
            Storage::Mapped { map, start, len } => {
                bytemuck::cast_slice(&map[*start..*start + len * size_of::<T>()])
            }
            Storage::Heap(v) => v,
        }
    }
}

impl<T: Pod> DerefMut for HugePageArray<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        self.as_mut_slice()
    }
}

impl<T: Pod> Clone for HugePageArray<T> {
    fn clone(&self) -> Self {
        HugePageArray::from_slice(self)
    }
}

impl<T: Pod + PartialEq> PartialEq for HugePageArray<T> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl<T: Pod + fmt::Debug> fmt::Debug for HugePageArray<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::HugePageArray;

    #[test]
    fn holds_a_copy_of_any_length() {
        for n in [
            0usize,
            1,
            7,
            (1 << 20) / 8,
            (2 << 20) / 8,
            (2 << 20) / 8 + 3,
        ] {
            let data: Vec<u64> = (0..n as u64).map(|i| i.wrapping_mul(0x9e37_79b9)).collect();
            let a = HugePageArray::from_slice(&data);
            assert_eq!(&a[..], &data[..], "{n} values");
            assert_eq!(a.clone(), a);
        }
    }

    /// The lines of `/proc/self/smaps` that describe the mapping holding `at`.
    fn mapping_of(at: usize) -> String {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut inside = false;
        let mut lines = String::new();
        for line in smaps.lines() {
            let range = line.split_whitespace().next().and_then(|r| {
                let (lo, hi) = r.split_once('-')?;
                Some((
                    usize::from_str_radix(lo, 16).ok()?,
                    usize::from_str_radix(hi, 16).ok()?,
                ))
            });
            if let Some((lo, hi)) = range {
                inside = lo <= at && at < hi;
            }
            if inside {
                lines.push_str(line);
                lines.push('\n');
            }
        }
        lines
    }

    #[test]
    fn large_arrays_start_on_a_huge_page_advised_for_huge_pages() {
        for values in [(1 << 20) / 8, (3 << 20) / 8 + 1] {
            let mut a = HugePageArray::<u64>::zeroed(values);
            a.fill(3);
            let at = a.as_ptr() as usize;
            assert_eq!(at % (2 << 20), 0, "{values} values at {at:#x}");
            // `hg`: the range was given MADV_HUGEPAGE.
            let mapping = mapping_of(at);
            let flags = mapping.lines().find(|l| l.starts_with("VmFlags:")).unwrap();
            assert!(flags.split_whitespace().any(|f| f == "hg"), "{mapping}");
            let b = HugePageArray::from_slice(&a);
            assert_eq!(b.as_ptr() as usize % (2 << 20), 0);
            assert_eq!(b, a);
        }
        // Below half a huge page: an ordinary heap array.
        let small = HugePageArray::<u64>::zeroed(1000);
        let flags = mapping_of(small.as_ptr() as usize);
        assert!(!flags.contains(" hg"), "{flags}");
    }
}
