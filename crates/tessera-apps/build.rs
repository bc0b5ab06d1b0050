//! Link the system's OpenBLAS (Debian's `libopenblas-dev`), which provides the CBLAS and
//! LAPACK symbols that `cblas-sys` and `lapack-sys` declare, and with the `scalapack`
//! feature Debian's ScaLAPACK for Open MPI.
//!
//! Not `openblas-src`: even with only its `system` feature it builds a downloader for
//! OpenBLAS sources that needs a TLS stack, dozens of crates to emit one link line.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=OPENBLAS_LIB_DIR");
    if let Ok(dir) = std::env::var("OPENBLAS_LIB_DIR") {
        println!("cargo:rustc-link-search=native={dir}");
    }
    let found = std::env::var("OPENBLAS_LIB_DIR")
        .into_iter()
        .chain(
            [
                "/usr/lib/x86_64-linux-gnu",
                "/usr/lib/aarch64-linux-gnu",
                "/usr/lib64",
                "/usr/lib",
                "/usr/local/lib",
            ]
            .map(String::from),
        )
        .any(|dir| std::path::Path::new(&dir).join("libopenblas.so").exists());
    if !found {
        println!(
            "cargo:warning=libopenblas.so not found: the dense applications need OpenBLAS \
             (apt-get install libopenblas-dev, or set OPENBLAS_LIB_DIR)"
        );
    }
    println!("cargo:rustc-link-lib=dylib=openblas");
    if std::env::var_os("CARGO_FEATURE_SCALAPACK").is_some() {
        // Debian's ScaLAPACK built for Open MPI (BLACS included).
        println!("cargo:rustc-link-lib=dylib=scalapack-openmpi");
    }
}
