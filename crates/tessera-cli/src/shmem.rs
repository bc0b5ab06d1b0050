//! `tessera shmem`: install Tessera's OpenSHMEM for C and C++ programs.
//!
//! `tessera shmem install --prefix DIR` writes:
//! - `DIR/include/shmem.h` (generated from the specification's type tables), `pshmem.h`
//!   (the profiling interface: every routine under a `pshmem_` name), `shmemx.h`, and
//!   `mpp/shmem.h`, `mpp/shmemx.h` for programs that include the old paths;
//! - `DIR/lib/libsma.so`, `libsma.a` (its `shmem_` names weak, for profiling tools), and
//!   `liboshmem.so`/`.a` as other names for them;
//! - `DIR/bin/oshcc`, `oshc++` (and `oshCC`, `oshcxx`), `oshrun`, and this `tessera`.
//!
//! The compiler wrappers add the include directory always and the library (with an rpath,
//! so programs run without `LD_LIBRARY_PATH`) only when they link; compile-only and
//! query invocations (`-c`, `-E`, `-S`, `-M`, `-MM`, `--version`, `-print-*`, no input
//! files) pass through untouched, as autotools and libtool expect. `oshrun -np N` (or
//! `-n N`) starts the PEs through `tessera run`, with any of its options.
//!
//! This module must never build anything: the library comes from the same build as this
//! executable (`cargo build --release` puts it beside it).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Subcommand;

use crate::JobArgs;

#[derive(Subcommand)]
pub(crate) enum ShmemCommand {
    /// Install the library, headers and wrappers under a prefix.
    Install {
        /// Where to install (DIR/bin, DIR/lib, DIR/include).
        #[arg(long)]
        prefix: PathBuf,
    },
    /// Print the generated shmem.h.
    Header,
}

/// Room in the segment beside the symmetric heap: the program's globals and the runtime's
/// own areas (barrier, team mailboxes).
const SEGMENT_EXTRA: usize = 64 << 20;

pub(crate) fn drive(what: ShmemCommand) -> Result<ExitCode, String> {
    match what {
        ShmemCommand::Header => {
            print!("{}", sma::header::SHMEM_H);
            Ok(ExitCode::SUCCESS)
        }
        ShmemCommand::Install { prefix } => install(&prefix).map(|()| ExitCode::SUCCESS),
    }
}

/// `tessera oshrun ARGS` with mpirun's single-dash `-np N` (and `-np=N`) written as
/// `--np`, among the options before the program only; every other command line as it is.
pub(crate) fn oshrun_args(args: impl Iterator<Item = OsString>) -> Vec<OsString> {
    let mut args: Vec<OsString> = args.collect();
    if args.get(1).map(|a| a.as_os_str()) != Some("oshrun".as_ref()) {
        return args;
    }
    let mut i = 2;
    while i < args.len() {
        let Some(arg) = args[i].to_str().map(str::to_string) else {
            break;
        };
        if arg == "--" || !arg.starts_with('-') {
            break;
        }
        if arg == "-np" {
            args[i] = "--np".into();
        } else if let Some(value) = arg.strip_prefix("-np=") {
            args[i] = format!("--np={value}").into();
        }
        let takes_value = [
            "-np",
            "--np",
            "-n",
            "--ranks",
            "--conduit",
            "--segment",
            "--timeout",
        ]
        .contains(&arg.as_str());
        i += if takes_value { 2 } else { 1 };
    }
    args
}

/// oshrun's segment: SHMEM_SYMMETRIC_SIZE (or SMA_SYMMETRIC_SIZE) and room for the
/// program's globals and the runtime's own areas, unless --segment was given.
pub(crate) fn oshrun_segment(job: &mut JobArgs) -> Result<(), String> {
    if job.segment.is_some() {
        return Ok(());
    }
    for var in ["SHMEM_SYMMETRIC_SIZE", "SMA_SYMMETRIC_SIZE"] {
        let Some(value) = tessera::config::raw(var) else {
            continue;
        };
        let value = value
            .into_string()
            .map_err(|v| format!("{var}={v:?}: not valid UTF-8 text; give a size such as 512M"))?;
        let heap =
            tessera::config::parse_size(&value).map_err(|e| format!("{var}={value:?}: {e}"))?;
        let bytes = heap
            .checked_add(SEGMENT_EXTRA)
            .ok_or_else(|| format!("{var}={value:?}: too large"))?;
        job.segment = Some(bytes.to_string());
        return Ok(());
    }
    Ok(())
}

/// Make every `shmem_` routine of the static library weak (OpenSHMEM 1.5 §10), so that a
/// tool linked with a program may define any of them and reach the library's through its
/// `pshmem_` name. The shared library needs nothing: the definition the dynamic linker
/// finds first (a tool's, linked or preloaded before it) is the one every call reaches.
/// Rust cannot mark a symbol weak, so binutils' `objcopy` does it here.
fn weaken_standard_names(archive: &Path) -> Result<(), String> {
    // Every exported name is a standard one or its profiling (`pshmem_`) twin.
    let names: Vec<&str> = sma::header::SYMBOLS
        .lines()
        .filter(|n| !n.starts_with("pshmem_"))
        .collect();
    let list =
        tempfile::NamedTempFile::new().map_err(|e| format!("a temporary file for objcopy: {e}"))?;
    std::fs::write(list.path(), names.join("\n") + "\n")
        .map_err(|e| format!("writing {}: {e}", list.path().display()))?;
    let status = std::process::Command::new("objcopy")
        .arg(format!("--weaken-symbols={}", list.path().display()))
        .arg(archive)
        .status()
        .map_err(|e| {
            format!("running objcopy to make libsma.a's shmem_ names weak for profiling tools (install binutils): {e}")
        })?;
    if !status.success() {
        return Err(format!(
            "objcopy --weaken-symbols {} failed: {status}",
            archive.display()
        ));
    }
    Ok(())
}

/// The newest of `name` beside this executable or in its `deps` directory.
fn built_library(name: &str) -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
    let dir = exe.parent().ok_or("this executable has no directory")?;
    [dir.join(name), dir.join("deps").join(name)]
        .into_iter()
        .filter_map(|p| Some((std::fs::metadata(&p).ok()?.modified().ok()?, p)))
        .max_by_key(|(t, _)| *t)
        .map(|(_, p)| p)
        .ok_or_else(|| {
            format!(
                "{name} is not beside {}: build it with `cargo build --release` (the install takes the library from the same build as this tessera)",
                exe.display()
            )
        })
}

fn write(path: &Path, text: &str, executable: bool) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
    if executable {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| format!("making {} executable: {e}", path.display()))?;
    }
    Ok(())
}

fn copy(from: &Path, to: &Path) -> Result<(), String> {
    let _ = std::fs::remove_file(to);
    std::fs::copy(from, to)
        .map(drop)
        .map_err(|e| format!("copying {} to {}: {e}", from.display(), to.display()))
}

fn link(target: &str, at: &Path) -> Result<(), String> {
    let _ = std::fs::remove_file(at);
    std::os::unix::fs::symlink(target, at)
        .map_err(|e| format!("linking {} to {target}: {e}", at.display()))
}

/// A compiler wrapper for `compiler` (`cc` or `c++`, or `$OSHCC_CC` / `$OSHCXX_CXX`).
fn wrapper(prefix: &Path, which: &str, compiler: &str) -> String {
    format!(
        r#"#!/bin/sh
# {which}: compile and link against Tessera's OpenSHMEM (written by `tessera shmem install`).
# The include directory is added always; the library, with an rpath, only when linking
# (DT_RPATH, which LD_LIBRARY_PATH does not override: the program runs with this library).
prefix='{prefix}'
compiler="${{{env}:-{compiler}}}"
link=yes
inputs=no
for arg in "$@"; do
  case "$arg" in
    -c|-E|-S|-M|-MM|--version|-dumpversion|-dumpmachine|-dumpfullversion|-print-*|--print-*) link=no ;;
    -*) ;;
    *) inputs=yes ;;
  esac
done
[ "$inputs" = no ] && link=no
if [ "$link" = yes ]; then
  exec "$compiler" -I"$prefix/include" "$@" -L"$prefix/lib" -Wl,--disable-new-dtags,-rpath,"$prefix/lib" -lsma -lpthread -ldl -lm
else
  exec "$compiler" -I"$prefix/include" "$@"
fi
"#,
        prefix = prefix.display(),
        env = if which == "oshcc" {
            "OSHCC_CC"
        } else {
            "OSHCXX_CXX"
        },
    )
}

/// `oshrun`: hands everything to `tessera oshrun`, whose parser is `tessera run`'s, so
/// every mistake gets the same usage message.
fn oshrun(prefix: &Path) -> String {
    format!(
        r#"#!/bin/sh
# oshrun: start an OpenSHMEM program's PEs with Tessera's launcher (written by
# `tessera shmem install`): oshrun -np N [tessera run options] PROGRAM [ARGS].
# SHMEM_SYMMETRIC_SIZE (or SMA_SYMMETRIC_SIZE), e.g. 512M, sets the symmetric heap; the
# segment gets 64 MiB more for the program's globals and the runtime's own areas.
exec '{prefix}/bin/tessera' oshrun "$@"
"#,
        prefix = prefix.display()
    )
}

fn install(prefix: &Path) -> Result<(), String> {
    let prefix = if prefix.is_absolute() {
        prefix.to_path_buf()
    } else {
        std::env::current_dir()
            .map_err(|e| format!("the current directory: {e}"))?
            .join(prefix)
    };
    let (bin, lib, include) = (
        prefix.join("bin"),
        prefix.join("lib"),
        prefix.join("include"),
    );
    for dir in [&bin, &lib, &include.join("mpp")] {
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    }
    write(&include.join("shmem.h"), sma::header::SHMEM_H, false)?;
    write(&include.join("pshmem.h"), sma::header::PSHMEM_H, false)?;
    write(
        &include.join("shmemx.h"),
        "/* shmemx.h: Tessera's OpenSHMEM extensions (none beyond shmem.h yet). */\n#ifndef TESSERA_SHMEMX_H\n#define TESSERA_SHMEMX_H\n#include <shmem.h>\n#endif\n",
        false,
    )?;
    write(
        &include.join("mpp/shmem.h"),
        "/* The old path of shmem.h. */\n#include <shmem.h>\n",
        false,
    )?;
    write(
        &include.join("mpp/shmemx.h"),
        "/* The old path of shmemx.h. */\n#include <shmemx.h>\n",
        false,
    )?;
    copy(&built_library("libsma.so")?, &lib.join("libsma.so"))?;
    copy(&built_library("libsma.a")?, &lib.join("libsma.a"))?;
    weaken_standard_names(&lib.join("libsma.a"))?;
    link("libsma.so", &lib.join("liboshmem.so"))?;
    link("libsma.a", &lib.join("liboshmem.a"))?;
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
    copy(&exe, &bin.join("tessera"))?;
    write(&bin.join("oshcc"), &wrapper(&prefix, "oshcc", "cc"), true)?;
    write(
        &bin.join("oshc++"),
        &wrapper(&prefix, "oshc++", "c++"),
        true,
    )?;
    link("oshc++", &bin.join("oshCC"))?;
    link("oshc++", &bin.join("oshcxx"))?;
    write(&bin.join("oshrun"), &oshrun(&prefix), true)?;
    println!(
        "installed Tessera's OpenSHMEM in {}:\n  {}/bin/oshcc -O2 prog.c -o prog\n  {}/bin/oshrun -np 4 ./prog",
        prefix.display(),
        prefix.display(),
        prefix.display()
    );
    Ok(())
}
