//! Remote atomic operations on 32- and 64-bit integers.
//!
//! Every operation is atomic with respect to every other atomic operation on the same
//! address from any rank. Read-modify-write operations are `AcqRel`, loads `Acquire`,
//! stores `Release`, so atomics also order the caller's puts (see the memory model in
//! [`crate::core`]). Targets must be naturally aligned and inside a segment.

use std::sync::atomic::{AtomicI32, AtomicI64, AtomicU32, AtomicU64, Ordering};

use bytemuck::Pod;

use super::{Context, GlobalPtr, Target};
use crate::Result;

/// A read-modify-write operation for [`Context::atomic_fetch`] and
/// [`Context::atomic_apply`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtomicOp<T> {
    /// Wrapping add.
    Add(T),
    /// Wrapping subtract.
    Sub(T),
    /// Bitwise and.
    And(T),
    /// Bitwise or.
    Or(T),
    /// Bitwise xor.
    Xor(T),
    /// Minimum.
    Min(T),
    /// Maximum.
    Max(T),
    /// Replace (swap).
    Swap(T),
}

mod sealed {
    pub trait Sealed {}
}

/// Integer types with remote atomics: `i32`, `i64`, `u32`, `u64`.
pub trait AtomicInt: Pod + PartialEq + sealed::Sealed {
    #[doc(hidden)]
    /// # Safety
    /// `p` must be a valid, aligned, mapped address of a `Self` that lives as long as the call.
    unsafe fn rmw(p: *mut Self, op: AtomicOp<Self>) -> Self;
    #[doc(hidden)]
    /// # Safety
    /// As for `rmw`.
    unsafe fn cas(p: *mut Self, current: Self, new: Self) -> Self;
    #[doc(hidden)]
    /// # Safety
    /// As for `rmw`.
    unsafe fn load(p: *mut Self) -> Self;
    #[doc(hidden)]
    /// # Safety
    /// As for `rmw`.
    unsafe fn store(p: *mut Self, v: Self);
}

macro_rules! atomic_int {
    ($t:ty, $atomic:ty) => {
        impl sealed::Sealed for $t {}
        impl AtomicInt for $t {
            unsafe fn rmw(p: *mut Self, op: AtomicOp<Self>) -> Self {
                // SAFETY: the caller guarantees p is valid and aligned; the atomic type has
                // the same size and alignment as the integer.
                let a = unsafe { <$atomic>::from_ptr(p) };
                let o = Ordering::AcqRel;
                match op {
                    AtomicOp::Add(v) => a.fetch_add(v, o),
                    AtomicOp::Sub(v) => a.fetch_sub(v, o),
                    AtomicOp::And(v) => a.fetch_and(v, o),
                    AtomicOp::Or(v) => a.fetch_or(v, o),
                    AtomicOp::Xor(v) => a.fetch_xor(v, o),
                    AtomicOp::Min(v) => a.fetch_min(v, o),
                    AtomicOp::Max(v) => a.fetch_max(v, o),
                    AtomicOp::Swap(v) => a.swap(v, o),
                }
            }
            unsafe fn cas(p: *mut Self, current: Self, new: Self) -> Self {
                // SAFETY: as in rmw.
                let a = unsafe { <$atomic>::from_ptr(p) };
                match a.compare_exchange(current, new, Ordering::AcqRel, Ordering::Acquire) {
                    Ok(v) | Err(v) => v,
                }
            }
            unsafe fn load(p: *mut Self) -> Self {
                // SAFETY: as in rmw.
                unsafe { <$atomic>::from_ptr(p) }.load(Ordering::Acquire)
            }
            unsafe fn store(p: *mut Self, v: Self) {
                // SAFETY: as in rmw.
                unsafe { <$atomic>::from_ptr(p) }.store(v, Ordering::Release)
            }
        }
    };
}
atomic_int!(i32, AtomicI32);
atomic_int!(i64, AtomicI64);
atomic_int!(u32, AtomicU32);
atomic_int!(u64, AtomicU64);

impl Context {
    fn atomic_target<T: AtomicInt>(&self, ptr: GlobalPtr<T>) -> Result<*mut T> {
        let size = std::mem::size_of::<T>();
        match self.target(ptr, size, size)? {
            Target::Direct(p) => Ok(p.as_ptr() as *mut T),
            Target::Remote { .. } => Err(self
                .conduit()
                .unsupported("atomics on an unmapped peer")
                .into()),
        }
    }

    /// Apply `op` to the integer at `ptr` and return the value it had before.
    ///
    /// ```no_run
    /// # use tessera::AtomicOp;
    /// # fn f(ctx: &tessera::Context, counter: tessera::GlobalPtr<u64>) -> tessera::Result<()> {
    /// let ticket = ctx.atomic_fetch(counter.on(0), AtomicOp::Add(1))?;
    /// # Ok(()) }
    /// ```
    pub fn atomic_fetch<T: AtomicInt>(&self, ptr: GlobalPtr<T>, op: AtomicOp<T>) -> Result<T> {
        let p = self.atomic_target(ptr)?;
        // SAFETY: atomic_target checked that p is mapped, in bounds and aligned.
        Ok(unsafe { T::rmw(p, op) })
    }

    /// Apply `op` to the integer at `ptr` without fetching the old value.
    pub fn atomic_apply<T: AtomicInt>(&self, ptr: GlobalPtr<T>, op: AtomicOp<T>) -> Result<()> {
        self.atomic_fetch(ptr, op).map(|_| ())
    }

    /// If the integer at `ptr` equals `current`, replace it with `new`. Returns the value
    /// found (equal to `current` exactly when the swap happened).
    pub fn atomic_compare_swap<T: AtomicInt>(
        &self,
        ptr: GlobalPtr<T>,
        current: T,
        new: T,
    ) -> Result<T> {
        let p = self.atomic_target(ptr)?;
        // SAFETY: checked as above.
        Ok(unsafe { T::cas(p, current, new) })
    }

    /// Atomically read the integer at `ptr` (acquire).
    pub fn atomic_load<T: AtomicInt>(&self, ptr: GlobalPtr<T>) -> Result<T> {
        let p = self.atomic_target(ptr)?;
        // SAFETY: checked as above.
        Ok(unsafe { T::load(p) })
    }

    /// Atomically write the integer at `ptr` (release).
    pub fn atomic_store<T: AtomicInt>(&self, ptr: GlobalPtr<T>, value: T) -> Result<()> {
        let p = self.atomic_target(ptr)?;
        // SAFETY: checked as above.
        unsafe { T::store(p, value) };
        Ok(())
    }
}
