//! Global pointers: an address in the partitioned global address space.

use std::fmt;
use std::marker::PhantomData;

use bytemuck::{Pod, Zeroable};

/// A typed address in the global address space: a rank and a byte offset into that rank's
/// segment. Cheap to copy, valid on every rank, and itself plain old data, so global
/// pointers can be stored in segments and sent with puts.
///
/// A global pointer is only an address: every access through it is checked (rank exists,
/// range inside the segment, alignment) and fails with an error instead of faulting.
///
/// ```
/// use tessera::GlobalPtr;
/// let p = GlobalPtr::<f64>::new(2, 4096);
/// assert_eq!(p.add(3).offset(), 4096 + 3 * 8);
/// assert_eq!(p.on(0).rank(), 0);
/// assert_eq!(p.cast::<u8>().add(8).cast::<f64>(), p.add(1));
/// ```
#[repr(C)]
pub struct GlobalPtr<T> {
    offset: u64,
    rank: u32,
    _reserved: u32,
    _type: PhantomData<fn() -> T>,
}

impl<T> Clone for GlobalPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for GlobalPtr<T> {}
impl<T> PartialEq for GlobalPtr<T> {
    fn eq(&self, other: &Self) -> bool {
        self.rank == other.rank && self.offset == other.offset
    }
}
impl<T> Eq for GlobalPtr<T> {}
impl<T> std::hash::Hash for GlobalPtr<T> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (self.rank, self.offset).hash(state)
    }
}

// SAFETY: GlobalPtr is repr(C) with two u64-aligned integer fields and no padding
// (u64 + u32 + u32 = 16 bytes), plus a zero-sized PhantomData; any bit pattern is a valid
// (if possibly out-of-range, hence checked-on-use) address, and all-zero is valid.
unsafe impl<T: 'static> Zeroable for GlobalPtr<T> {}
// SAFETY: see Zeroable; the type is Copy and 'static.
unsafe impl<T: 'static> Pod for GlobalPtr<T> {}

impl<T> GlobalPtr<T> {
    /// The address `offset` bytes into `rank`'s segment. Constructing any address is safe;
    /// accesses are checked.
    pub const fn new(rank: usize, offset: u64) -> Self {
        GlobalPtr {
            offset,
            rank: rank as u32,
            _reserved: 0,
            _type: PhantomData,
        }
    }

    /// The rank with affinity to this address.
    pub const fn rank(&self) -> usize {
        self.rank as usize
    }

    /// Byte offset into the owner's segment.
    pub const fn offset(&self) -> u64 {
        self.offset
    }

    /// The address `n` elements further on (same rank).
    pub const fn add(self, n: usize) -> Self {
        GlobalPtr::new(
            self.rank as usize,
            self.offset + (n * std::mem::size_of::<T>()) as u64,
        )
    }

    /// The address `n` elements earlier (same rank). Saturates at offset 0.
    pub const fn sub(self, n: usize) -> Self {
        GlobalPtr::new(
            self.rank as usize,
            self.offset
                .saturating_sub((n * std::mem::size_of::<T>()) as u64),
        )
    }

    /// The same offset on another rank: for data allocated collectively, the peer's copy.
    pub const fn on(self, rank: usize) -> Self {
        GlobalPtr::new(rank, self.offset)
    }

    /// The same address viewed as another element type.
    pub const fn cast<U>(self) -> GlobalPtr<U> {
        GlobalPtr::new(self.rank as usize, self.offset)
    }
}

impl<T> fmt::Debug for GlobalPtr<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "GlobalPtr<{}>(rank {}, +{})",
            std::any::type_name::<T>(),
            self.rank,
            self.offset
        )
    }
}
