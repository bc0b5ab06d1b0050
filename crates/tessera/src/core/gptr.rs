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
/// Arithmetic never wraps: a rank beyond 2³² − 1, an [`add`](GlobalPtr::add) past the
/// largest offset or a [`sub`](GlobalPtr::sub) below offset 0 gives a pointer marked
/// invalid ([`GlobalPtr::is_valid`] is false, its offset the largest), and every access
/// through it fails naming what went wrong, instead of landing on some other valid address.
///
/// ```
/// use tessera::GlobalPtr;
/// assert!(!GlobalPtr::<u64>::new(1, 8).sub(2).is_valid()); // below offset 0
/// assert!(!GlobalPtr::<u64>::new(1, 8).add(usize::MAX).is_valid()); // past the end
/// ```
///
/// ```
/// use tessera::GlobalPtr;
/// let p = GlobalPtr::<f64>::new(2, 4096);
/// assert_eq!(p.add(3).offset(), 4096 + 3 * 8);
/// assert_eq!(p.on(0).rank(), 0);
/// assert_eq!(p.cast::<u8>().add(8).cast::<f64>(), p.add(1));
/// ```
///
/// What the types forbid, each a doctest that must fail to compile. A global pointer
/// cannot be dereferenced, so remote memory is never read or written as if it were local:
///
/// ```compile_fail
/// let p = tessera::GlobalPtr::<u64>::new(1, 0);
/// let value: u64 = *p; // no Deref: reach it with ctx.get_value(p)
/// ```
///
/// No `&mut` to segment memory comes without `unsafe` (the caller then promises that no
/// rank writes it meanwhile), so safe code cannot hold one while another rank puts:
///
/// ```compile_fail
/// # tessera::Job::threads(1).run(|ctx| {
/// let buf = ctx.alloc_collective::<u64>(4)?;
/// let local: Option<&mut [u64]> = ctx.local_slice_mut(buf, 4)?; // an unsafe fn
/// # Ok(()) }).unwrap();
/// ```
///
/// A rank's context stays on its rank's thread: it cannot be sent to another thread
/// (OpenSHMEM's threads reach the segments through `Context::mapped_segments`):
///
/// ```compile_fail
/// # tessera::Job::threads(1).run(|ctx| {
/// std::thread::scope(|s| {
///     s.spawn(|| ctx.rank()); // &Context is not Send: Context is not Sync
/// });
/// # Ok(()) }).unwrap();
/// ```
#[repr(C)]
pub struct GlobalPtr<T> {
    offset: u64,
    rank: u32,
    /// 0, or the [`Invalid`] bits saying why the address is not one.
    invalid: u32,
    _type: PhantomData<fn() -> T>,
}

/// Why a global pointer is invalid (bits of its `invalid` word).
struct Invalid;
impl Invalid {
    /// Made with a rank that does not fit in 32 bits.
    const RANK: u32 = 1;
    /// `add` went past the largest offset.
    const OVERFLOW: u32 = 2;
    /// `sub` went below offset 0.
    const UNDERFLOW: u32 = 4;
}

impl<T> Clone for GlobalPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for GlobalPtr<T> {}
impl<T> PartialEq for GlobalPtr<T> {
    fn eq(&self, other: &Self) -> bool {
        self.rank == other.rank && self.offset == other.offset && self.invalid == other.invalid
    }
}
impl<T> Eq for GlobalPtr<T> {}
impl<T> std::hash::Hash for GlobalPtr<T> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (self.rank, self.offset, self.invalid).hash(state)
    }
}

// SAFETY: GlobalPtr is repr(C) with three integer fields and no padding (u64 + u32 + u32 =
// 16 bytes), plus a zero-sized PhantomData; any bit pattern is a valid (if possibly
// out-of-range or invalid, hence checked-on-use) address, and all-zero is valid.
unsafe impl<T: 'static> Zeroable for GlobalPtr<T> {}
// SAFETY: see Zeroable; the type is Copy and 'static.
unsafe impl<T: 'static> Pod for GlobalPtr<T> {}

impl<T> GlobalPtr<T> {
    /// The address `offset` bytes into `rank`'s segment. Constructing any address is safe;
    /// accesses are checked. A rank that does not fit in 32 bits gives an invalid pointer.
    pub const fn new(rank: usize, offset: u64) -> Self {
        if rank > u32::MAX as usize {
            return GlobalPtr {
                offset: u64::MAX,
                rank: u32::MAX,
                invalid: Invalid::RANK,
                _type: PhantomData,
            };
        }
        GlobalPtr {
            offset,
            rank: rank as u32,
            invalid: 0,
            _type: PhantomData,
        }
    }

    /// The pointer marked invalid for `why`. Its offset becomes the largest, so every
    /// access fails the ordinary bounds check (no extra test on the hot path); the error
    /// path then reports why.
    const fn marked(self, why: u32) -> Self {
        GlobalPtr {
            invalid: self.invalid | why,
            offset: u64::MAX,
            ..self
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

    /// Whether the pointer is an address at all: false once arithmetic left the address
    /// space or the rank did not fit (every access through it then fails).
    #[inline]
    pub const fn is_valid(&self) -> bool {
        self.invalid == 0
    }

    /// Why the pointer is invalid, for error messages (`None` when it is valid).
    pub fn invalid_reason(&self) -> Option<String> {
        if self.invalid == 0 {
            return None;
        }
        let mut why = Vec::new();
        if self.invalid & Invalid::RANK != 0 {
            why.push("it was made with a rank beyond 2^32 - 1");
        }
        if self.invalid & Invalid::OVERFLOW != 0 {
            why.push("add() went past the largest offset");
        }
        if self.invalid & Invalid::UNDERFLOW != 0 {
            why.push("sub() went below offset 0");
        }
        Some(why.join(" and "))
    }

    /// The address `n` elements further on (same rank); invalid if that passes the
    /// largest offset.
    pub const fn add(self, n: usize) -> Self {
        let Some(bytes) = n.checked_mul(std::mem::size_of::<T>()) else {
            return self.marked(Invalid::OVERFLOW);
        };
        match self.offset.checked_add(bytes as u64) {
            Some(offset) => GlobalPtr { offset, ..self },
            None => self.marked(Invalid::OVERFLOW),
        }
    }

    /// The address `n` elements earlier (same rank); invalid if that is below offset 0.
    pub const fn sub(self, n: usize) -> Self {
        let Some(bytes) = n.checked_mul(std::mem::size_of::<T>()) else {
            return self.marked(Invalid::UNDERFLOW);
        };
        match self.offset.checked_sub(bytes as u64) {
            Some(offset) => GlobalPtr { offset, ..self },
            None => self.marked(Invalid::UNDERFLOW),
        }
    }

    /// The same offset on another rank: for data allocated collectively, the peer's copy.
    pub const fn on(self, rank: usize) -> Self {
        let moved = GlobalPtr::<T>::new(rank, self.offset);
        // An invalid pointer stays invalid on any rank: its offset is gone.
        let invalid = moved.invalid | self.invalid;
        GlobalPtr {
            invalid,
            offset: if invalid != 0 { u64::MAX } else { self.offset },
            ..moved
        }
    }

    /// The same address viewed as another element type.
    pub const fn cast<U>(self) -> GlobalPtr<U> {
        GlobalPtr {
            offset: self.offset,
            rank: self.rank,
            invalid: self.invalid,
            _type: PhantomData,
        }
    }
}

impl<T> fmt::Debug for GlobalPtr<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "GlobalPtr<{}>(rank {}, +{}{})",
            std::any::type_name::<T>(),
            self.rank,
            self.offset,
            if self.invalid != 0 { ", invalid" } else { "" }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_never_wraps_into_a_valid_address() {
        let p = GlobalPtr::<u64>::new(3, 16);
        assert_eq!(p.add(2).offset(), 32);
        assert_eq!(p.sub(2).offset(), 0);
        assert!(p.sub(2).is_valid());
        assert!(!p.sub(3).is_valid());
        assert!(!p.add(usize::MAX / 4).is_valid());
        assert!(!GlobalPtr::<u8>::new(0, u64::MAX).add(1).is_valid());
        // Invalid stays invalid through further arithmetic, casts and other ranks.
        let bad = p.sub(3);
        assert!(!bad.add(3).is_valid());
        assert!(!bad.cast::<u8>().on(0).is_valid());
        assert!(bad.invalid_reason().unwrap().contains("below offset 0"));
    }

    #[test]
    fn ranks_beyond_32_bits_are_not_truncated() {
        let big = GlobalPtr::<u8>::new((1usize << 32) + 1, 0);
        assert!(!big.is_valid());
        assert_ne!(big.rank(), 1);
        assert!(big.invalid_reason().unwrap().contains("rank"));
        assert!(!GlobalPtr::<u8>::new(0, 0).on(1 << 40).is_valid());
        // An invalid pointer's offset is beyond every segment, so accesses fail the plain
        // bounds check too.
        assert_eq!(GlobalPtr::<u64>::new(0, 8).sub(2).offset(), u64::MAX);
        assert!(!big.on(2).is_valid(), "its offset was lost with the rank");
    }
}
