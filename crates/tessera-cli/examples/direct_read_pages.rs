//! What the pages at both ends cost a direct read: the kernel copy under every long
//! message between ranks of one host (`process_vm_readv`, DESIGN.md "Direct reads"), from
//! and into a `Vec` on 4 KiB pages and a `tessera::HugePageArray` (on huge pages from 1
//! MiB; a smaller one is a heap array too), each way, beside a plain memcpy of the same
//! bytes. One process reads its own memory, so nothing else is timed. Linux only.
//!
//! ```text
//! cargo build --release --examples -p tessera-cli
//! target/release/examples/direct_read_pages            # 256 KiB, 1 MiB, 4 MiB
//! target/release/examples/direct_read_pages 2097152    # other sizes, in bytes
//! ```

use std::io::IoSliceMut;
use std::time::Instant;

use nix::sys::uio::{process_vm_readv, RemoteIoVec};
use nix::unistd::getpid;
use tessera::HugePageArray;

/// Best microseconds per call of `f` over five rounds of `calls`.
fn best_us(calls: usize, mut f: impl FnMut()) -> f64 {
    (0..5)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..calls {
                f();
            }
            start.elapsed().as_secs_f64() * 1e6 / calls as f64
        })
        .fold(f64::INFINITY, f64::min)
}

/// Microseconds to read `source` into `into` with `process_vm_readv`.
fn read_us(source: &[u8], into: &mut [u8], calls: usize) -> Result<f64, String> {
    let remote = [RemoteIoVec {
        base: source.as_ptr() as usize,
        len: source.len(),
    }];
    let mut failed = None;
    let us = best_us(calls, || {
        let mut local = [IoSliceMut::new(into)];
        match process_vm_readv(getpid(), &mut local, &remote) {
            Ok(n) if n == source.len() => {}
            Ok(n) => failed = Some(format!("read {n} of {} bytes", source.len())),
            Err(e) => failed = Some(format!("process_vm_readv: {e}")),
        }
    });
    failed.map_or(Ok(us), Err)
}

fn main() -> Result<(), String> {
    let sizes: Result<Vec<usize>, _> = std::env::args().skip(1).map(|a| a.parse()).collect();
    let sizes = match sizes {
        Ok(sizes) if !sizes.is_empty() => sizes,
        Ok(_) => vec![256 << 10, 1 << 20, 4 << 20],
        Err(e) => return Err(format!("sizes are byte counts: {e}")),
    };
    println!("read into:                   a Vec                a HugePageArray");
    println!("bytes      memcpy µs  from Vec µs  from huge µs  from Vec µs  from huge µs");
    for bytes in sizes {
        let calls = (200_000_000 / bytes.max(1)).clamp(10, 20_000);
        let plain = vec![1u8; bytes];
        let huge = HugePageArray::from_slice(&plain);
        let mut into = vec![0u8; bytes];
        let mut into_huge = HugePageArray::<u8>::zeroed(bytes);
        let copy = best_us(calls, || {
            into.copy_from_slice(&plain);
            std::hint::black_box(&mut into);
        });
        let mut row = format!("{bytes:<10} {copy:>9.1}");
        for target in [&mut into[..], &mut into_huge[..]] {
            for source in [&plain[..], &huge[..]] {
                target.fill(0);
                let us = read_us(source, target, calls)?;
                if *target != plain[..] {
                    return Err("a read did not copy the bytes".into());
                }
                row += &format!("  {us:>11.1}");
            }
        }
        println!("{row}");
    }
    Ok(())
}
