//! What the two ends cost a direct read: the kernel copy under every long message between
//! ranks of one host (`process_vm_readv`, DESIGN.md "Direct reads"), from and into a `Vec`
//! on 4 KiB pages and a `tessera::HugePageArray` (on huge pages from 1 MiB; a smaller one
//! is a heap array too), each way, with the destination at the source's offset in a 4 KiB
//! page (gap 0), 16 bytes past it (where a heap `Vec` lies from a page-aligned array) and
//! 64 bytes past, beside a plain memcpy of the same bytes. One process reads its own
//! memory, so nothing else is timed. Linux only.
//!
//! ```text
//! cargo build --release --examples -p tessera-cli
//! target/release/examples/direct_read_pages            # 256 KiB, 1 MiB, 4 MiB
//! target/release/examples/direct_read_pages 2097152    # other sizes, in bytes
//! target/release/examples/direct_read_pages --gaps 0,8,16,32,64 262144
//! ```

use std::io::IoSliceMut;
use std::time::Instant;

use nix::sys::uio::{process_vm_readv, RemoteIoVec};
use nix::unistd::getpid;
use tessera::HugePageArray;

/// Destination minus source, modulo 4 KiB, of the timed reads (unless `--gaps` says).
const GAPS: [usize; 3] = [0, 16, 64];

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

/// The `bytes` bytes of `area` that start `gap` bytes past `source`'s offset in a 4 KiB
/// page (`area` has a page to spare).
fn at_gap<'a>(area: &'a mut [u8], source: &[u8], gap: usize) -> &'a mut [u8] {
    let want = (source.as_ptr() as usize + gap) % 4096;
    let start = (want + 4096 - area.as_ptr() as usize % 4096) % 4096;
    &mut area[start..start + source.len()]
}

fn main() -> Result<(), String> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let gaps: Vec<usize> = match args.iter().position(|a| a == "--gaps") {
        Some(at) => {
            let list = args
                .get(at + 1)
                .ok_or("--gaps takes a comma-separated list of byte counts")?
                .clone();
            args.drain(at..at + 2);
            list.split(',')
                .map(|g| match g.trim().parse::<usize>() {
                    Ok(g) if g < 4096 => Ok(g),
                    _ => Err(format!("--gaps: {g:?} is not a byte count below 4096")),
                })
                .collect::<Result<_, _>>()?
        }
        None => GAPS.to_vec(),
    };
    let sizes: Result<Vec<usize>, _> = args.iter().map(|a| a.parse()).collect();
    let sizes = match sizes {
        Ok(sizes) if !sizes.is_empty() => sizes,
        Ok(_) => vec![256 << 10, 1 << 20, 4 << 20],
        Err(e) => return Err(format!("sizes are byte counts: {e}")),
    };
    println!("µs per read; gap: destination minus source, modulo 4 KiB");
    let header: String = gaps
        .iter()
        .map(|g| format!("  {:>6}", format!("gap {g}")))
        .collect();
    println!("bytes      from  into  memcpy{header}");
    for bytes in sizes {
        let calls = (200_000_000 / bytes.max(1)).clamp(10, 20_000);
        let plain = vec![1u8; bytes];
        let huge = HugePageArray::from_slice(&plain);
        // A page more than the reads, for the gaps.
        let mut into_plain = vec![0u8; bytes + 4096];
        let mut into_huge = HugePageArray::<u8>::zeroed(bytes + 4096);
        let pairs: [(&str, &[u8], &str); 4] = [
            ("Vec", &plain, "Vec"),
            ("Vec", &plain, "huge"),
            ("huge", &huge, "Vec"),
            ("huge", &huge, "huge"),
        ];
        let mut rows = Vec::new();
        for (from, source, into) in pairs {
            let area: &mut [u8] = if into == "Vec" {
                &mut into_plain
            } else {
                &mut into_huge
            };
            let copy = {
                let target = at_gap(area, source, 0);
                best_us(calls, || {
                    target.copy_from_slice(source);
                    std::hint::black_box(&mut *target);
                })
            };
            let mut row = format!("{bytes:<10} {from:<5} {into:<5} {copy:>6.1}");
            for &gap in &gaps {
                let target = at_gap(area, source, gap);
                target.fill(0);
                let us = read_us(source, target, calls)?;
                if *target != *source {
                    return Err("a read did not copy the bytes".into());
                }
                row += &format!("  {us:>6.1}");
            }
            rows.push(row);
        }
        println!("{}", rows.join("\n"));
    }
    Ok(())
}
