//! Large private arrays on transparent huge pages.
//!
//! A kernel that streams a private array of many megabytes each iteration (CG's matrix)
//! spends part of its time in TLB misses and in the hardware prefetchers stopping at every
//! 4 KiB page. A [`HugePageArray`] of at least one huge page lives in its own anonymous
//! mapping, sized in whole 2 MiB pages and advised for transparent huge pages (the usual
//! `madvise` setting of Linux honours that). A smaller one, or one whose mapping is
//! refused, is an ordinary heap array: the advice is only ever a hint, never a condition
//! for correct results.
//!
//! This module must never hold data that ranks share: those belong in the global address
//! space.

use std::fmt;
use std::ops::Deref;

use bytemuck::Pod;
use memmap2::{Advice, MmapMut, MmapOptions};

/// The size of a transparent huge page on x86-64 and most arm64 systems.
const HUGE_PAGE: usize = 2 << 20;

/// An array of plain values, on huge pages where the system grants them: made as a copy
/// of a slice, or zeroed and filled in place.
///
/// ```
/// use tessera_npb::buffer::HugePageArray;
/// let a = HugePageArray::from_slice(&[1.5f64, 2.5, 3.5]);
/// assert_eq!(a.iter().sum::<f64>(), 7.5);
/// assert_eq!(&a[1..], &[2.5, 3.5]);
/// ```
pub struct HugePageArray<T: Pod> {
    storage: Storage<T>,
}

enum Storage<T: Pod> {
    /// `len` values at the start of a private anonymous mapping.
    Mapped { map: MmapMut, len: usize },
    /// Arrays below one huge page, and the fallback where the mapping failed.
    Heap(Vec<T>),
}

impl<T: Pod> HugePageArray<T> {
    /// `len` zeros, to be filled in place with [`HugePageArray::as_mut_slice`] (so a large
    /// array is never held twice while it is built).
    ///
    /// ```
    /// use tessera_npb::buffer::HugePageArray;
    /// let mut a = HugePageArray::<u32>::zeroed(5);
    /// a.as_mut_slice()[4] = 9;
    /// a.truncate(5);
    /// assert_eq!(&a[..], &[0, 0, 0, 0, 9]);
    /// ```
    pub fn zeroed(len: usize) -> HugePageArray<T> {
        let bytes = len * size_of::<T>();
        if bytes >= HUGE_PAGE {
            if let Ok(map) = MmapOptions::new()
                .len(bytes.next_multiple_of(HUGE_PAGE))
                .map_anon()
            {
                // Anonymous pages read as zeros, which is a valid value of any `Pod` type.
                let _ = map.advise(Advice::HugePage);
                return HugePageArray {
                    storage: Storage::Mapped { map, len },
                };
            }
        }
        HugePageArray {
            storage: Storage::Heap(vec![T::zeroed(); len]),
        }
    }

    /// The values, to change in place.
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        match &mut self.storage {
            Storage::Mapped { map, len } => {
                bytemuck::cast_slice_mut(&mut map[..*len * size_of::<T>()])
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
        if bytes.len() < HUGE_PAGE {
            // A huge page would be mostly empty, and zeroing it costs more than it saves.
            return HugePageArray {
                storage: Storage::Heap(data.to_vec()),
            };
        }
        // Whole huge pages, so the kernel can place the mapping on a 2 MiB boundary.
        let len = bytes.len().next_multiple_of(HUGE_PAGE);
        let storage = match MmapOptions::new().len(len).map_anon() {
            Ok(mut map) => {
                // Advise before the first write, so the pages are huge from their first
                // fault on. Refusal leaves ordinary pages; nothing else changes.
                let _ = map.advise(Advice::HugePage);
                map[..bytes.len()].copy_from_slice(bytes);
                Storage::Mapped {
                    map,
                    len: data.len(),
                }
            }
            Err(_) => Storage::Heap(data.to_vec()),
        };
        HugePageArray { storage }
    }
}

impl<T: Pod> Deref for HugePageArray<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        match &self.storage {
            // A mapping starts on a page boundary, which is aligned for any `T`, and holds
            // `len` values written by `from_slice`: the cast cannot fail.
            Storage::Mapped { map, len } => bytemuck::cast_slice(&map[..len * size_of::<T>()]),
            Storage::Heap(v) => v,
        }
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
        for n in [0usize, 1, 7, (2 << 20) / 8, (2 << 20) / 8 + 3] {
            let data: Vec<u64> = (0..n as u64).map(|i| i.wrapping_mul(0x9e37_79b9)).collect();
            let a = HugePageArray::from_slice(&data);
            assert_eq!(&a[..], &data[..], "{n} values");
            assert_eq!(a.clone(), a);
        }
    }
}
