//! Waiting on a word of this rank's segment until it compares true against a value
//! (OpenSHMEM's `wait_until` and `test`, UPC's spin on a flag), for every integer width
//! the point-to-point routines use.
//!
//! The word is read with an `Acquire` load each time, so what a peer put before the store
//! that satisfied the comparison (with release, as every Tessera store that signals does)
//! is visible once the wait returns. A wait honours the watchdog and goes on the job's
//! board like every other.
//!
//! This module must never wait on a peer's word: remote words change only by the owner's
//! view, and a rank waits on its own.

use std::sync::atomic::Ordering;

use super::{Context, GlobalPtr, MappedWords};
use crate::error::CoreError;
use crate::{Blocking, Result};

/// A comparison of [`Context::wait_value`] and [`Context::test_value`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compare {
    /// Equal.
    Eq,
    /// Not equal.
    Ne,
    /// Greater than.
    Gt,
    /// Greater than or equal.
    Ge,
    /// Less than.
    Lt,
    /// Less than or equal.
    Le,
}

impl Compare {
    /// Whether `have cmp want`.
    pub fn holds<T: PartialOrd>(self, have: T, want: T) -> bool {
        match self {
            Compare::Eq => have == want,
            Compare::Ne => have != want,
            Compare::Gt => have > want,
            Compare::Ge => have >= want,
            Compare::Lt => have < want,
            Compare::Le => have <= want,
        }
    }
}

mod sealed {

    pub trait Sealed {}
}

/// Integers a rank can wait on: 16, 32 and 64 bits, signed and unsigned.
pub trait WaitWord: bytemuck::Pod + PartialOrd + std::fmt::Debug + sealed::Sealed {
    #[doc(hidden)]
    /// Load with `Acquire`.
    ///
    /// # Safety
    /// `p` must be valid and aligned for the type, and only ever accessed atomically or by
    /// plain stores of other ranks that publish with release.
    unsafe fn load_acquire(p: *mut Self) -> Self;
}

macro_rules! wait_word {
    ($($t:ty => $a:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl WaitWord for $t {
            #[inline]
            unsafe fn load_acquire(p: *mut Self) -> Self {
                // SAFETY: the caller guarantees p is valid and aligned; the atomic type has
                // the size and alignment of the integer.
                unsafe { <$a>::from_ptr(p) }.load(Ordering::Acquire)
            }
        }
    )*};
}
wait_word!(
    i16 => std::sync::atomic::AtomicI16, u16 => std::sync::atomic::AtomicU16,
    i32 => std::sync::atomic::AtomicI32, u32 => std::sync::atomic::AtomicU32,
    i64 => std::sync::atomic::AtomicI64, u64 => std::sync::atomic::AtomicU64
);

impl Context {
    /// The word at `ptr` in this rank's own segment, as a pointer an atomic load may read.
    fn own_word<T: WaitWord>(&self, ptr: GlobalPtr<T>, what: &'static str) -> Result<*mut T> {
        if ptr.rank() != self.rank() {
            return Err(CoreError::NotOwner {
                what,
                owner: ptr.rank(),
                caller: self.rank(),
            }
            .into());
        }
        self.local_ptr(ptr, 1)?
            .ok_or_else(|| CoreError::Internal("a rank's own segment is not mapped".into()).into())
    }

    /// Whether the word at `ptr` (in this rank's segment) now compares true: `*ptr cmp value`.
    /// Never blocks; makes progress once.
    ///
    /// ```
    /// use tessera::{Compare, Job};
    /// Job::threads(2).segment(1 << 20).run(|ctx| {
    ///     let flag = ctx.alloc_collective::<i32>(1)?;
    ///     ctx.barrier()?;
    ///     if ctx.rank() == 0 {
    ///         ctx.atomic_store(flag.on(1), 5)?;
    ///     } else {
    ///         ctx.wait_value(flag, Compare::Ge, 5)?;
    ///         assert!(ctx.test_value(flag, Compare::Eq, 5)?);
    ///     }
    ///     Ok(())
    /// }).unwrap();
    /// ```
    pub fn test_value<T: WaitWord>(
        &self,
        ptr: GlobalPtr<T>,
        cmp: Compare,
        value: T,
    ) -> Result<bool> {
        let p = self.own_word(ptr, "testing a word")?;
        self.poll()?;
        // SAFETY: own_word checked that p is this rank's mapped, aligned word.
        Ok(cmp.holds(unsafe { T::load_acquire(p) }, value))
    }

    /// Block until the word at `ptr` (in this rank's segment) compares true: `*ptr cmp
    /// value`; returns the value that satisfied it.
    pub fn wait_value<T: WaitWord>(&self, ptr: GlobalPtr<T>, cmp: Compare, value: T) -> Result<T> {
        let p = self.own_word(ptr, "waiting on a word")?;
        let mut seen = value;
        self.wait_until(
            "a word to change",
            || {
                // SAFETY: own_word checked that p is this rank's mapped, aligned word.
                seen = unsafe { T::load_acquire(p) };
                Ok(cmp.holds(seen, value))
            },
            || {
                format!(
                    "offset {} holds {:?}, waiting for {cmp:?} {value:?}",
                    ptr.offset(),
                    // SAFETY: as above.
                    unsafe { T::load_acquire(p) }
                )
            },
        )?;
        Ok(seen)
    }

    /// The `len` words from `first` in this rank's own segment.
    fn own_words<T: WaitWord>(
        &self,
        first: GlobalPtr<T>,
        len: usize,
    ) -> Result<MappedWords<'_, T>> {
        if first.rank() != self.rank() {
            return Err(CoreError::NotOwner {
                what: "waiting on words",
                owner: first.rank(),
                caller: self.rank(),
            }
            .into());
        }
        self.mapped_segments()
            .words(first, len)?
            .ok_or_else(|| CoreError::Internal("a rank's own segment is not mapped".into()).into())
    }

    /// Evaluate `f` once over the `len` words from `first` (in this rank's segment), each
    /// read with `Acquire` when `f` asks for it by index. Never blocks; makes progress once.
    /// OpenSHMEM's `test_all`, `test_any` and `test_some`.
    ///
    /// ```
    /// tessera::Job::threads(1).segment(1 << 20).run(|ctx| {
    ///     let words = ctx.alloc_local::<u32>(3)?;
    ///     ctx.put(words, &[0, 7, 0], tessera::Blocking)?;
    ///     let set = ctx.test_words(words, 3, |w| (0..3).filter(|&i| w(i) != 0).count())?;
    ///     assert_eq!(set, 1);
    ///     Ok(())
    /// }).unwrap();
    /// ```
    pub fn test_words<T: WaitWord, R>(
        &self,
        first: GlobalPtr<T>,
        len: usize,
        f: impl FnOnce(&dyn Fn(usize) -> T) -> R,
    ) -> Result<R> {
        let words = self.own_words(first, len)?;
        self.poll()?;
        Ok(f(&|i| words.get(i)))
    }

    /// Block until `done` returns true over the `len` words from `first` (in this rank's
    /// segment), each read with `Acquire` when `done` asks for it by index. OpenSHMEM's
    /// `wait_until_all`, `wait_until_any` and `wait_until_some`. The wait honours the
    /// watchdog and goes on the job's board like every other.
    pub fn wait_words<T: WaitWord>(
        &self,
        first: GlobalPtr<T>,
        len: usize,
        mut done: impl FnMut(&dyn Fn(usize) -> T) -> bool,
    ) -> Result<()> {
        let words = self.own_words(first, len)?;
        self.wait_until(
            "words to change",
            || Ok(done(&|i| words.get(i))),
            || format!("{len} words from offset {}", first.offset()),
        )
    }

    /// Fill `len` bytes at `dst` (any rank's segment) with `byte`.
    ///
    /// ```
    /// tessera::Job::threads(2).segment(1 << 20).run(|ctx| {
    ///     let buf = ctx.alloc_collective::<u8>(64)?;
    ///     ctx.fill(buf.on(1 - ctx.rank()), 0xAB, 64)?;
    ///     ctx.barrier()?;
    ///     let mut got = [0u8; 64];
    ///     ctx.get(buf, &mut got, tessera::Blocking)?;
    ///     assert_eq!(got, [0xAB; 64]);
    ///     Ok(())
    /// }).unwrap();
    /// ```
    pub fn fill(&self, dst: GlobalPtr<u8>, byte: u8, len: usize) -> Result<()> {
        const PIECE: usize = 64 * 1024;
        if let Some(p) = self.local_ptr(dst, len)? {
            // SAFETY: local_ptr checked that the len bytes are mapped and in bounds; like
            // any put, racing with other ranks' accesses is the program's to prevent.
            unsafe { std::ptr::write_bytes(p, byte, len) };
            return Ok(());
        }
        let piece = vec![byte; len.min(PIECE)];
        let mut done = 0;
        while done < len {
            let n = (len - done).min(PIECE);
            self.put(dst.add(done), &piece[..n], Blocking)?;
            done += n;
        }
        Ok(())
    }
}
