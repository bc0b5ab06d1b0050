//! The bounded single-producer single-consumer ring that carries active-message frames.
//!
//! The ring is a sequence of 64-byte slots. A frame occupies whole slots. Its first word is
//! its header (slot count, and payload length or [`SKIP`]; never zero), and the producer
//! stores it *last*, with `Release`. The consumer polls the header word at its position
//! with `Acquire`; zero means empty. A short message therefore crosses between cores as one
//! cache line. After delivering a frame the consumer zeroes the first word of each of its
//! slots (any of them may start a later frame) and then publishes `head` with `Release`.
//! The producer reloads `head` with `Acquire`, and only when its cached copy says the ring
//! is full, before reusing space. `tail` is the producer's own position; the consumer
//! never reads it. Positions are byte counts that only grow; `position % capacity` is the
//! offset. A frame never wraps: when it does not fit before the end, a [`SKIP`] frame pads
//! to the end.
//!
//! This module must never block: a full ring refuses, and the caller decides how to wait.

use std::cell::Cell;
use std::sync::atomic::Ordering;

use super::Word;

/// Slot size: one cache line.
pub(crate) const SLOT: usize = 64;
/// Bytes of a frame header.
pub(crate) const FRAME_HEADER: usize = 8;
/// Payload-length value of a frame that only pads to the end of the ring.
const SKIP: u32 = u32::MAX;

/// Bytes a frame with `payload` bytes occupies.
pub(crate) fn frame_len(payload: usize) -> usize {
    (FRAME_HEADER + payload).next_multiple_of(SLOT)
}

fn pack_header(frame_len: usize, payload_len: u32) -> u64 {
    ((frame_len / SLOT) as u64) | (payload_len as u64) << 32
}

/// The memory a ring lives in.
pub(crate) trait RingMemory {
    type Word: Word;
    /// Capacity in bytes: a power of two, a multiple of [`SLOT`].
    fn capacity(&self) -> usize;
    /// Bytes the consumer has released.
    fn head(&self) -> &Self::Word;
    /// Bytes the producer has written (producer-private).
    fn tail(&self) -> &Self::Word;
    /// The first word of the slot at byte offset `pos` (a multiple of [`SLOT`]).
    fn slot(&self, pos: usize) -> &Self::Word;
    /// Copy the concatenation of `parts` to byte offset `pos` (8-byte aligned).
    ///
    /// # Safety
    /// The bytes written must be ring space the producer owns (released by the consumer,
    /// not yet published).
    unsafe fn write(&self, pos: usize, parts: &[&[u8]]);
    /// Call `f` with the `len` bytes at `pos`.
    ///
    /// # Safety
    /// The bytes must belong to a frame published to the consumer and not yet released.
    unsafe fn read<R>(&self, pos: usize, len: usize, f: impl FnOnce(&[u8]) -> R) -> R;
}

/// A ring over some memory.
pub(crate) struct Ring<M>(pub M);

impl<M: RingMemory> Ring<M> {
    /// Producer side. `head_cache` is the producer's private copy of `head`. Returns
    /// `false`, having written nothing, when the frame does not fit now.
    pub(crate) fn try_push(&self, head_cache: &Cell<u64>, parts: &[&[u8]]) -> bool {
        let m = &self.0;
        let capacity = m.capacity() as u64;
        let payload: usize = parts.iter().map(|p| p.len()).sum();
        let frame = frame_len(payload);
        let mut tail = m.tail().load(Ordering::Relaxed);
        let pos = (tail % capacity) as usize;
        let contiguous = m.capacity() - pos;
        let needed = (if frame <= contiguous {
            frame
        } else {
            contiguous + frame
        }) as u64;
        if tail + needed - head_cache.get() > capacity {
            head_cache.set(m.head().load(Ordering::Acquire));
            if tail + needed - head_cache.get() > capacity {
                return false;
            }
        }
        let mut pos = pos;
        if frame > contiguous {
            m.slot(pos)
                .store(pack_header(contiguous, SKIP), Ordering::Release);
            tail += contiguous as u64;
            pos = 0;
        }
        // SAFETY: [pos, pos + frame) is free: the consumer released it (head loaded with
        // Acquire above, after it zeroed the slot words) and only this producer writes. The
        // header, which publishes the frame, is stored after the payload.
        unsafe { m.write(pos + FRAME_HEADER, parts) };
        m.slot(pos)
            .store(pack_header(frame, payload as u32), Ordering::Release);
        m.tail().store(tail + frame as u64, Ordering::Relaxed);
        true
    }

    /// Producer side: whether the consumer has released every frame pushed so far (and so
    /// has finished delivering them: `head` moves only after delivery).
    pub(crate) fn drained(&self) -> bool {
        let m = &self.0;
        m.head().load(Ordering::Acquire) >= m.tail().load(Ordering::Relaxed)
    }

    /// Consumer side: hand every published frame to `deliver`, releasing each after use.
    pub(crate) fn consume(&self, mut deliver: impl FnMut(&[u8])) -> usize {
        let m = &self.0;
        let mut head = m.head().load(Ordering::Relaxed);
        let mut delivered = 0;
        loop {
            let pos = (head % m.capacity() as u64) as usize;
            let header = m.slot(pos).load(Ordering::Acquire);
            if header == 0 {
                return delivered;
            }
            let slots = (header & 0xFFFF_FFFF) as usize;
            let payload_len = (header >> 32) as u32;
            if payload_len != SKIP {
                // SAFETY: the frame was published (Acquire load of its header) and stays
                // ours until `head` moves past it.
                unsafe { m.read(pos + FRAME_HEADER, payload_len as usize, &mut deliver) };
                delivered += 1;
            }
            for slot in 0..slots {
                m.slot(pos + slot * SLOT).store(0, Ordering::Relaxed);
            }
            head += (slots * SLOT) as u64;
            m.head().store(head, Ordering::Release);
        }
    }
}

#[cfg(all(test, loom))]
pub(crate) mod loom_tests {
    use super::*;
    use loom::sync::atomic::AtomicU64;
    use loom::sync::Arc;

    /// A ring in loom atomics; payload words are atomics too (Relaxed), so loom checks
    /// that the header's Release/Acquire makes them visible.
    pub(crate) struct LoomRing {
        words: Vec<AtomicU64>,
        head: AtomicU64,
        tail: AtomicU64,
    }

    /// An empty ring of `slots` slots in loom atomics.
    pub(crate) fn loom_ring(slots: usize) -> Ring<LoomRing> {
        Ring(LoomRing {
            words: (0..slots * SLOT / 8).map(|_| AtomicU64::new(0)).collect(),
            head: AtomicU64::new(0),
            tail: AtomicU64::new(0),
        })
    }

    impl RingMemory for LoomRing {
        type Word = AtomicU64;
        fn capacity(&self) -> usize {
            self.words.len() * 8
        }
        fn head(&self) -> &AtomicU64 {
            &self.head
        }
        fn tail(&self) -> &AtomicU64 {
            &self.tail
        }
        fn slot(&self, pos: usize) -> &AtomicU64 {
            &self.words[pos / 8]
        }
        unsafe fn write(&self, pos: usize, parts: &[&[u8]]) {
            let bytes: Vec<u8> = parts.concat();
            for (i, chunk) in bytes.chunks(8).enumerate() {
                let mut w = [0u8; 8];
                w[..chunk.len()].copy_from_slice(chunk);
                self.words[pos / 8 + i].store(u64::from_le_bytes(w), Ordering::Relaxed);
            }
        }
        unsafe fn read<R>(&self, pos: usize, len: usize, f: impl FnOnce(&[u8]) -> R) -> R {
            let bytes: Vec<u8> = (0..len.div_ceil(8))
                .flat_map(|i| {
                    self.words[pos / 8 + i]
                        .load(Ordering::Relaxed)
                        .to_le_bytes()
                })
                .collect();
            f(&bytes[..len])
        }
    }

    /// Frames of one and two slots through a four-slot ring: the third frame needs a skip
    /// and a wrap, and every slot gets reused. Every frame arrives once, in order, with its
    /// payload intact.
    #[test]
    fn frames_arrive_in_order_with_their_payloads() {
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = Some(3);
        builder.check(|| {
            let ring = Arc::new(loom_ring(4));
            let sizes = [8usize, 60, 60, 8];
            let producer = {
                let ring = ring.clone();
                loom::thread::spawn(move || {
                    let cache = Cell::new(0);
                    for (k, &n) in sizes.iter().enumerate() {
                        let payload: Vec<u8> = (0..n).map(|i| (k * 40 + i) as u8 | 1).collect();
                        while !ring.try_push(&cache, &[&payload]) {
                            loom::thread::yield_now();
                        }
                    }
                })
            };
            let mut next = 0;
            while next < sizes.len() {
                let got = ring.consume(|frame| {
                    let want: Vec<u8> = (0..sizes[next])
                        .map(|i| (next * 40 + i) as u8 | 1)
                        .collect();
                    assert_eq!(frame, &want[..], "frame {next}");
                    next += 1;
                });
                if got == 0 {
                    loom::thread::yield_now();
                }
            }
            producer.join().unwrap();
        });
    }
}
