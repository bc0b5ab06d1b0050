//! OpenSHMEM for C: `tessera shmem install`, then programs built with the installed
//! `oshcc`/`oshc++` and started with `oshrun`, as a user would. The header compiles
//! cleanly as C99, C11 and C++; the library exports every function the header declares;
//! every typed family passes its checks at 1 to 4 PEs. Each run is bounded in time.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

fn install(name: &str) -> tempfile::TempDir {
    common::install_shmem(name)
}

fn compile(prefix: &Path, wrapper: &str, source: &Path, out: &Path, flags: &[&str]) {
    let f = common::run(
        Command::new(prefix.join("bin").join(wrapper))
            .args(flags)
            .arg(source)
            .arg("-o")
            .arg(out),
        120,
    );
    assert!(
        f.status.success(),
        "{wrapper} {}: {}",
        source.display(),
        f.stderr
    );
}

#[test]
fn the_header_compiles_cleanly_in_every_mode() {
    let installed = install("header");
    let prefix = installed.path();
    let dir = prefix.join("src");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("h.c"), "#include <shmem.h>\n#include <mpp/shmem.h>\n#include <shmemx.h>\nint main(void) { return SHMEM_MAJOR_VERSION - 1; }\n").unwrap();
    std::fs::write(
        dir.join("h.cpp"),
        "#include <shmem.h>\nint main() { return SHMEM_MINOR_VERSION - 5; }\n",
    )
    .unwrap();
    let include = format!("-I{}", prefix.join("include").display());
    for (compiler, file, flags) in [
        (
            "cc",
            "h.c",
            vec!["-std=c99", "-Wall", "-Wextra", "-Wundef", "-Werror"],
        ),
        (
            "cc",
            "h.c",
            vec!["-std=c11", "-pedantic", "-Wall", "-Werror"],
        ),
        (
            "c++",
            "h.cpp",
            vec!["-std=c++11", "-pedantic", "-Wall", "-Wextra", "-Werror"],
        ),
    ] {
        let f = common::run(
            Command::new(compiler)
                .args(&flags)
                .arg(&include)
                .arg("-c")
                .arg(dir.join(file))
                .arg("-o")
                .arg(dir.join("h.o")),
            60,
        );
        assert!(f.status.success(), "{compiler} {flags:?}: {}", f.stderr);
    }
}

#[test]
fn the_library_exports_every_function_the_header_declares() {
    let installed = install("symbols");
    let prefix = installed.path();
    let f = common::run(
        Command::new("nm")
            .args(["-D", "--defined-only"])
            .arg(prefix.join("lib/libsma.so")),
        60,
    );
    assert!(f.status.success(), "nm: {}", f.stderr);
    let exported: std::collections::HashSet<&str> = f
        .stdout
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2))
        .collect();
    let missing: Vec<&str> = sma::header::SYMBOLS
        .lines()
        .filter(|s| !exported.contains(s))
        .collect();
    assert!(missing.is_empty(), "declared but not exported: {missing:?}");
    assert!(sma::header::SYMBOLS.lines().count() > 500);
}

#[test]
fn every_typed_family_at_one_to_four_pes() {
    generated_test("typed", sma::header::TYPED_TEST_C);
}

#[test]
fn every_team_collective_of_every_type_at_one_to_four_pes() {
    generated_test("team", sma::header::TEAM_TEST_C);
}

/// Compile a generated C test and run it at 1 to 4 PEs; it prints `NAME: OK`.
fn generated_test(name: &str, source: &str) {
    let installed = install(name);
    let prefix = installed.path();
    let src = prefix.join(format!("{name}_test.c"));
    std::fs::write(&src, source).unwrap();
    let exe = prefix.join(name);
    compile(
        prefix,
        "oshcc",
        &src,
        &exe,
        &["-std=c99", "-O1", "-Wall", "-Wextra", "-Werror"],
    );
    for pes in 1..=4 {
        let f = common::run(
            Command::new(prefix.join("bin/oshrun"))
                .args(["-np", &pes.to_string()])
                .arg(&exe),
            120,
        );
        assert!(f.status.success(), "{pes} PEs: {}\n{}", f.stdout, f.stderr);
        assert_eq!(
            f.stdout.trim(),
            format!("{name}: OK"),
            "{pes} PEs: {}",
            f.stderr
        );
    }
}

#[test]
fn the_hand_written_c_suite_at_1_2_4_and_16_pes() {
    let installed = install("suite");
    let prefix = installed.path();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tessera-shmem/tests/c");
    let mut sources: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "c"))
        .collect();
    sources.sort();
    assert!(sources.len() >= 12, "C tests missing in {}", dir.display());
    for src in sources {
        let name = src.file_stem().unwrap().to_string_lossy().into_owned();
        let exe = prefix.join(&name);
        // `c11_*` programs use the C11 generic interface; the rest are C99.
        let std = if name.starts_with("c11_") {
            "-std=c11"
        } else {
            "-std=c99"
        };
        compile(
            prefix,
            "oshcc",
            &src,
            &exe,
            &[std, "-pedantic", "-O1", "-Wall", "-Wextra", "-Werror"],
        );
        // 16 PEs on a machine of 2 cores too: more PEs than cores is a case to cover.
        for pes in [1, 2, 4, 16] {
            let f = common::run(
                Command::new(prefix.join("bin/oshrun"))
                    .args(["-np", &pes.to_string()])
                    .arg(&exe),
                120,
            );
            assert!(
                f.status.success(),
                "{name} at {pes} PEs: {}\n{}",
                f.stdout,
                f.stderr
            );
            assert_eq!(
                f.stdout.trim(),
                format!("{name}: OK"),
                "{name} at {pes} PEs: {}",
                f.stderr
            );
        }
    }
}

/// Compile `body` (a C `main`'s statements, with `me` and `n` defined after shmem_init;
/// anything before a line `MAIN:` goes at file scope) and run it on `pes` PEs with `env`;
/// the outcome.
fn bad(prefix: &Path, name: &str, body: &str, pes: u32, env: &[(&str, &str)]) -> common::Finished {
    let src = prefix.join(format!("{name}.c"));
    let (file_scope, body) = body.split_once("MAIN:\n").unwrap_or(("", body));
    std::fs::write(
        &src,
        format!(
            "#include <shmem.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <pthread.h>\nstatic long g[4];\n{file_scope}int main(void) {{\n    int me, n;\n    long local[4] = {{0}};\n    (void) local; (void) g;\n{body}\n    return 0;\n}}\n"
        ),
    )
    .unwrap();
    let exe = prefix.join(name);
    compile(
        prefix,
        "oshcc",
        &src,
        &exe,
        &["-std=c99", "-Wno-unused-variable"],
    );
    common::run(
        Command::new(prefix.join("bin/oshrun"))
            .args(["-np", &pes.to_string()])
            .arg(&exe)
            .envs(env.iter().copied()),
        60,
    )
}

#[test]
fn bad_input_gets_a_message_naming_the_call_and_a_clean_end() {
    let installed = install("bad");
    let prefix = installed.path();
    let init = "    shmem_init(); me = shmem_my_pe(); n = shmem_n_pes(); (void) me; (void) n;\n";
    // (name, body, PEs, environment, exit status, parts of the message)
    type Case<'a> = (
        &'a str,
        String,
        u32,
        &'a [(&'a str, &'a str)],
        i32,
        &'a [&'a str],
    );
    let cases: &[Case] = &[
        (
            "stack",
            format!("{init}    shmem_long_put(local, g, 4, (me + 1) % n);"),
            2,
            &[],
            1,
            &["shmem_long_put", "is not symmetric", "shmem_malloc"],
        ),
        (
            "no_such_pe",
            format!("{init}    shmem_long_p(&g[0], 1, n + 3);"),
            2,
            &[],
            1,
            &["shmem_long_p", "PE 5 does not exist", "PEs 0 to 1"],
        ),
        (
            "before_init",
            "    shmem_long_p(&g[0], 1, 0);".into(),
            2,
            &[],
            1,
            &["shmem_long_p", "before shmem_init"],
        ),
        (
            "misaligned",
            format!("{init}    shmem_long_atomic_inc((long *) ((char *) g + 1), 0);"),
            2,
            &[],
            1,
            &["shmem_long_atomic_inc", "not aligned"],
        ),
        (
            // Beyond the heap: NULL on every PE (the program then chooses its status), and
            // one line saying which variable raises the heap.
            "too_big",
            format!("{init}    void *p = shmem_malloc((size_t) 1 << 30);\n    if (p == NULL) return 5;"),
            2,
            &[("SHMEM_SYMMETRIC_SIZE", "16M")],
            5,
            &["shmem_malloc", "returning NULL", "raise SHMEM_SYMMETRIC_SIZE"],
        ),
        (
            // A failing PE ends at once with its status and one message, while its peer
            // waits in a barrier.
            "null_put_peer_in_barrier",
            format!("{init}    if (me == 0) shmem_long_p(NULL, 1, 1);\n    else shmem_barrier_all();"),
            2,
            &[],
            1,
            &["shmem_long_p", "is not symmetric"],
        ),
        (
            // Roots that differ, with no barrier after: caught, not wrong results (a small
            // broadcast goes as the team's messages, which carry the call).
            "broadcast_roots_differ",
            format!("{init}    static long ps[SHMEM_BCAST_SYNC_SIZE], s[1], d[1];\n    int i;\n    for (i = 0; i < SHMEM_BCAST_SYNC_SIZE; i++) ps[i] = SHMEM_SYNC_VALUE;\n    shmem_barrier_all();\n    shmem_broadcast64(d, s, 1, me % 2, 0, 0, 4, ps);"),
            4,
            &[("TESSERA_COLL_BROADCAST", "binomial")],
            1,
            &["collective calls differ", "broadcast(root 0", "broadcast(root 1"],
        ),
        (
            // A PE that leaves early is named, not the PE that noticed.
            "exit_early",
            format!("{init}    if (me == 1) exit(0);\n    shmem_barrier_all();"),
            3,
            &[],
            1,
            &["rank 1 has ended its part of the job early"],
        ),
        (
            "not_in_set",
            format!("{init}    static long ps[SHMEM_BARRIER_SYNC_SIZE];\n    shmem_barrier(1, 0, n - 1, ps);"),
            3,
            &[],
            1,
            &["shmem_barrier", "PE 0 is not in it"],
        ),
        (
            "set_too_large",
            format!("{init}    static long ps[SHMEM_BARRIER_SYNC_SIZE];\n    shmem_barrier(0, 1, n, ps);"),
            3,
            &[],
            1,
            &["shmem_barrier", "its last PE would be 4"],
        ),
        (
            "team_destroyed",
            format!("{init}    shmem_team_t t;\n    shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 1, n, NULL, 0, &t);\n    shmem_team_destroy(t);\n    shmem_team_sync(t);"),
            2,
            &[],
            1,
            &["shmem_team_sync", "destroyed"],
        ),
        (
            "team_invalid",
            format!("{init}    static int a, b;\n    shmem_int_sum_reduce(SHMEM_TEAM_INVALID, &a, &b, 1);"),
            2,
            &[],
            1,
            &["shmem_int_sum_reduce", "SHMEM_TEAM_INVALID"],
        ),
        (
            "not_a_member",
            format!("{init}    shmem_team_t t;\n    static long a, b;\n    shmem_team_split_strided(SHMEM_TEAM_WORLD, 1, 1, n - 1, NULL, 0, &t);\n    shmem_long_max_reduce(t, &a, &b, 1);"),
            3,
            &[],
            1,
            &["PE 0: shmem_long_max_reduce", "SHMEM_TEAM_INVALID"],
        ),
        (
            "ctx_destroyed",
            format!("{init}    shmem_ctx_t c;\n    shmem_ctx_create(SHMEM_CTX_SERIALIZED, &c);\n    shmem_ctx_destroy(c);\n    shmem_ctx_long_p(c, &g[0], 1, 0);"),
            2,
            &[],
            1,
            &["shmem_ctx_long_p", "destroyed"],
        ),
        (
            "wait_not_symmetric",
            format!("{init}    shmem_long_wait_until_any(local, 4, NULL, SHMEM_CMP_EQ, 1);"),
            2,
            &[],
            1,
            &["shmem_long_wait_until_any", "is not symmetric"],
        ),
        (
            "bad_signal_op",
            format!("{init}    static uint64_t sig;\n    shmem_long_put_signal(g, g, 1, &sig, 1, 7, 0);"),
            2,
            &[],
            1,
            &["shmem_long_put_signal", "sig_op 7"],
        ),
        (
            "misaligned_signal",
            format!("{init}    static uint64_t sig[2];\n    shmem_long_put_signal(g, g, 1, (uint64_t *) ((char *) sig + 1), 1, SHMEM_SIGNAL_ADD, 0);"),
            2,
            &[],
            1,
            &["shmem_long_put_signal", "not aligned to 8 bytes"],
        ),
        (
            "other_thread_at_funneled",
            format!("static void *put(void *a) {{ (void) a; shmem_long_p(&g[0], 1, 0); return NULL; }}\nMAIN:\n{init}    pthread_t t;\n    pthread_create(&t, NULL, put, NULL);\n    pthread_join(t, NULL);"),
            2,
            &[],
            1,
            &["shmem_long_p", "thread other than the one that called shmem_init", "SHMEM_THREAD_FUNNELED", "shmem_init_thread"],
        ),
        (
            "bad_thread_level",
            "    int provided;\n    shmem_init_thread(7, &provided);".into(),
            2,
            &[],
            1,
            &["shmem_init_thread", "thread level 7"],
        ),
        (
            "checked_team_reduce_op",
            format!("{init}    if (me == 0) shmem_long_sum_reduce(SHMEM_TEAM_WORLD, &g[0], &g[1], 2);\n    else shmem_long_max_reduce(SHMEM_TEAM_WORLD, &g[0], &g[1], 2);"),
            2,
            &[("TESSERA_CHECK", "1")],
            1,
            &["shmem_long_sum_reduce|shmem_long_max_reduce", "checked mode", "rank 0: allreduce(2 elements of 8 bytes, Sum)", "rank 1: allreduce(2 elements of 8 bytes, Max)"],
        ),
        (
            "checked_team_collective_kind",
            format!("{init}    if (me == 0) shmem_long_broadcast(SHMEM_TEAM_WORLD, &g[0], &g[2], 2, 0);\n    else shmem_long_fcollect(SHMEM_TEAM_WORLD, &g[0], &g[2], 1);"),
            2,
            &[("TESSERA_CHECK", "1")],
            1,
            &["shmem_long_broadcast|shmem_long_fcollect", "checked mode", "rank 0: broadcast(root 0, 2 elements of 8 bytes)", "rank 1: allgather(1 elements of 8 bytes)"],
        ),
        (
            "global_exit",
            format!("{init}    if (me == 1) shmem_global_exit(3);\n    shmem_barrier_all();\n    shmem_barrier_all();"),
            3,
            &[],
            3,
            &["global exit status 3"],
        ),
    ];
    for (name, body, pes, env, status, parts) in cases {
        let started = std::time::Instant::now();
        let f = bad(prefix, name, body, *pes, env);
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "{name} took {:?}",
            started.elapsed()
        );
        assert_eq!(f.status.code(), Some(*status), "{name}: {}", f.stderr);
        // "a|b": either PE may find the mismatch first and be the one whose
        // routine heads the report; the launcher ends the other before it
        // prints. The report names both ranks' calls either way.
        for part in *parts {
            assert!(
                part.split('|').any(|p| f.stderr.contains(p)),
                "{name}: expected {part:?} in {}",
                f.stderr
            );
        }
        assert!(
            !f.stderr.contains("panicked") && !f.stderr.contains("SIGSEGV"),
            "{name}: {}",
            f.stderr
        );
        // A failed PE ends once: no second failure in its exit handlers.
        assert!(
            !f.stderr.contains("re-entrantly") && !f.stderr.contains("stack backtrace"),
            "{name}: {}",
            f.stderr
        );
    }
}

#[test]
fn exits_flush_output_waits_on_other_threads_are_not_deadlocks_and_one_report_suffices() {
    let installed = install("exits");
    let prefix = installed.path();
    let init = "    shmem_init(); me = shmem_my_pe(); n = shmem_n_pes(); (void) me; (void) n;\n";
    // shmem_global_exit flushes what the PE printed, as a normal exit would.
    let f = bad(
        prefix,
        "global_exit_flush",
        &format!("{init}    if (me == 0) {{ printf(\"unterminated\"); shmem_global_exit(7); }}\n    shmem_barrier_all();\n    shmem_barrier_all();"),
        2,
        &[],
    );
    assert_eq!(f.status.code(), Some(7), "{}", f.stderr);
    assert!(f.stdout.contains("unterminated"), "{:?}", f.stdout);
    // Under SHMEM_THREAD_MULTIPLE another thread of the PE ends the wait after a second:
    // not a deadlock.
    let f = bad(
        prefix,
        "other_thread_ends_the_wait",
        "#include <unistd.h>\nstatic long x;\nstatic void *setter(void *a) { (void) a; sleep(1); x = 1; return NULL; }\nMAIN:\n    int p;\n    pthread_t t;\n    shmem_init_thread(SHMEM_THREAD_MULTIPLE, &p);\n    pthread_create(&t, NULL, setter, NULL);\n    shmem_long_wait_until(&x, SHMEM_CMP_EQ, 1);\n    pthread_join(t, NULL);\n    shmem_finalize();",
        2,
        &[],
    );
    assert!(f.status.success(), "{}", f.stderr);
    // 64 PEs waiting on a flag nobody sets: one report, within seconds.
    let started = std::time::Instant::now();
    let f = bad(
        prefix,
        "nobody_sets_the_flag",
        &format!(
            "static long flag;\nMAIN:\n{init}    shmem_long_wait_until(&flag, SHMEM_CMP_EQ, 1);"
        ),
        64,
        &[],
    );
    assert_eq!(f.status.code(), Some(1), "{}", f.stderr);
    assert_eq!(
        f.stderr.matches("deadlock: every rank is blocked").count(),
        2,
        "{}",
        f.stderr
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "took {:?}",
        started.elapsed()
    );
}

/// Whether `tool` is on the PATH.
fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn an_autotools_project_builds_with_oshcc_and_checks_with_oshrun() {
    if !(have("autoreconf") && have("libtoolize") && have("automake") && have("make")) {
        eprintln!("skipped: autoconf, automake, libtool and make are not installed (.ci/run installs them)");
        return;
    }
    let installed = install("autotools");
    let prefix = installed.path();
    let project = prefix.join("project");
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tessera-shmem/tests/autotools");
    std::fs::create_dir_all(&project).unwrap();
    for entry in std::fs::read_dir(&from).unwrap().flatten() {
        std::fs::copy(entry.path(), project.join(entry.file_name())).unwrap();
    }
    let oshcc = format!("CC={}", prefix.join("bin/oshcc").display());
    let oshrun = format!("OSHRUN={}", prefix.join("bin/oshrun").display());
    for (what, args) in [
        ("autoreconf", vec!["autoreconf", "-fi"]),
        (
            "configure",
            vec!["./configure", oshcc.as_str(), oshrun.as_str()],
        ),
        ("make", vec!["make"]),
        ("make check", vec!["make", "check"]),
    ] {
        let f = common::run(
            Command::new(args[0]).args(&args[1..]).current_dir(&project),
            300,
        );
        let log = std::fs::read_to_string(project.join("ring.log")).unwrap_or_default();
        assert!(
            f.status.success(),
            "{what}: {}\n{}\n{log}",
            f.stdout,
            f.stderr
        );
    }
    let log = std::fs::read_to_string(project.join("ring.log")).unwrap();
    assert!(
        log.contains("ring: token 30 after 10 laps of 3 PEs"),
        "{log}"
    );
    assert!(log.contains("PASS ring"), "{log}");
}

#[test]
fn shmem_version_info_and_debug_say_what_the_spec_says() {
    let installed = install("env");
    let prefix = installed.path();
    let body = "    shmem_init(); shmem_finalize();";
    let f = bad(prefix, "version", body, 2, &[("SHMEM_VERSION", "1")]);
    assert!(f.status.success(), "{}", f.stderr);
    assert_eq!(
        f.stdout.matches("OpenSHMEM 1.5 (Tessera").count(),
        1,
        "{}",
        f.stdout
    );
    let f = bad(prefix, "info", body, 2, &[("SHMEM_INFO", "yes")]);
    assert!(f.status.success(), "{}", f.stderr);
    for part in [
        "SHMEM_SYMMETRIC_SIZE",
        "SHMEM_VERSION",
        "SHMEM_DEBUG",
        "2 PEs",
    ] {
        assert!(f.stdout.contains(part), "{part} missing: {}", f.stdout);
    }
    let f = bad(prefix, "debug", body, 2, &[("SHMEM_DEBUG", "on")]);
    assert!(f.status.success(), "{}", f.stderr);
    assert_eq!(
        f.stderr.matches("tessera-shmem: PE").count(),
        2,
        "{}",
        f.stderr
    );
    // Without them: nothing printed.
    let f = bad(prefix, "quiet", body, 2, &[]);
    assert!(
        f.status.success() && f.stdout.is_empty(),
        "{}{}",
        f.stdout,
        f.stderr
    );
}

#[test]
fn a_cxx_program_builds_with_oshcxx_and_runs() {
    let installed = install("cxx");
    let prefix = installed.path();
    let src = prefix.join("ring.cpp");
    std::fs::write(
        &src,
        r#"#include <shmem.h>
#include <cstdio>
#include <vector>
static long slot;
int main() {
    shmem_init();
    const int me = shmem_my_pe(), n = shmem_n_pes();
    std::vector<long> mine(4, me);
    long *heap = static_cast<long *>(shmem_malloc(4 * sizeof(long)));
    shmem_long_put(heap, mine.data(), 4, (me + 1) % n);
    shmem_long_atomic_add(&slot, me + 1, 0);
    shmem_barrier_all();
    const bool ok = heap[3] == (me + n - 1) % n && (me != 0 || slot == n * (n + 1) / 2);
    static int fails, total, w[4];
    static long s[SHMEM_REDUCE_SYNC_SIZE];
    fails = ok ? 0 : 1;
    shmem_int_sum_to_all(&total, &fails, 1, 0, 0, n, w, s);
    if (me == 0) std::printf("cxx: %s\n", total == 0 ? "OK" : "FAILED");
    shmem_free(heap);
    shmem_finalize();
    return total != 0;
}
"#,
    )
    .unwrap();
    let exe = prefix.join("ring_cxx");
    compile(
        prefix,
        "oshc++",
        &src,
        &exe,
        &["-std=c++11", "-O1", "-Wall", "-Werror"],
    );
    for pes in [1, 3] {
        let f = common::run(
            Command::new(prefix.join("bin/oshrun"))
                .args(["-n", &pes.to_string()])
                .arg(&exe),
            60,
        );
        assert!(f.status.success(), "{pes} PEs: {}", f.stderr);
        assert_eq!(f.stdout.trim(), "cxx: OK");
    }
}

#[test]
fn a_profiling_tool_wraps_routines_through_their_pshmem_names() {
    // OpenSHMEM 1.5 §10: a tool defines shmem_barrier_all and shmem_pcontrol, counts,
    // and reaches the library through pshmem_barrier_all; linked before the library,
    // preloaded, and linked statically with libsma.a (whose shmem_ names are weak).
    let installed = install("profiling");
    let prefix = installed.path();
    let tool = prefix.join("tool.c");
    std::fs::write(
        &tool,
        "#include <pshmem.h>\n#include <stdio.h>\n\
         static int barriers, level = -1;\n\
         void shmem_barrier_all(void) { barriers++; pshmem_barrier_all(); }\n\
         void shmem_pcontrol(const int l, ...) { level = l; }\n\
         int tool_barriers(void) { return barriers; }\n\
         int tool_level(void) { return level; }\n",
    )
    .unwrap();
    let program = prefix.join("prog.c");
    std::fs::write(
        &program,
        "#include <shmem.h>\n#include <stdio.h>\n\
         int tool_barriers(void);\nint tool_level(void);\n\
         int main(void) {\n    int i;\n    shmem_init();\n\
             for (i = 0; i < 3; i++) shmem_barrier_all();\n    shmem_pcontrol(2);\n\
             if (shmem_my_pe() == 0) printf(\"tool: %d barriers, level %d\\n\", tool_barriers(), tool_level());\n\
             shmem_finalize();\n    return 0;\n}\n",
    )
    .unwrap();
    let include = format!("-I{}", prefix.join("include").display());
    let libtool = prefix.join("libtool.so");
    let f = common::run(
        Command::new("cc")
            .args(["-shared", "-fPIC", &include])
            .arg(&tool)
            .arg("-o")
            .arg(&libtool),
        60,
    );
    assert!(f.status.success(), "{}", f.stderr);
    let linked = prefix.join("linked");
    let f = common::run(
        Command::new(prefix.join("bin/oshcc"))
            .arg(&program)
            .arg(format!("-L{}", prefix.display()))
            .arg("-ltool")
            .arg(format!("-Wl,-rpath,{}", prefix.display()))
            .arg("-o")
            .arg(&linked),
        120,
    );
    assert!(f.status.success(), "{}", f.stderr);
    let statically = prefix.join("static");
    // A library built with the mpi conduit needs MPI's libraries beside it.
    let mpi: Vec<String> = if cfg!(feature = "mpi") {
        let f = common::run(Command::new("mpicc").arg("--showme:link"), 30);
        f.stdout.split_whitespace().map(String::from).collect()
    } else {
        Vec::new()
    };
    let f = common::run(
        Command::new("cc")
            .arg(&include)
            .arg(&program)
            .arg(&tool)
            .arg(prefix.join("lib/libsma.a"))
            .args(&mpi)
            .args(["-lpthread", "-ldl", "-lm", "-lgcc_s", "-o"])
            .arg(&statically),
        120,
    );
    assert!(f.status.success(), "{}", f.stderr);
    for exe in [&linked, &statically] {
        let f = common::run(
            Command::new(prefix.join("bin/oshrun"))
                .args(["-np", "2"])
                .arg(exe),
            60,
        );
        assert!(f.status.success(), "{}: {}", exe.display(), f.stderr);
        assert_eq!(
            f.stdout.trim(),
            "tool: 3 barriers, level 2",
            "{}",
            exe.display()
        );
    }
}

/// `TESSERA_STATS` through `oshrun`: an OpenSHMEM program's puts, gets and atomics are
/// counted exactly, per PE and target.
#[test]
fn an_openshmem_programs_communication_is_counted_through_oshrun() {
    let prefix = install("stats");
    let prefix = prefix.path();
    let file = prefix.join("stats.json");
    let body = "    shmem_init();\n    me = shmem_my_pe();\n    n = shmem_n_pes();\n    for (int i = 0; i < 5; i++) shmem_long_put(g, local, 4, (me + 1) % n);\n    shmem_barrier_all();\n    for (int i = 0; i < 3; i++) shmem_long_get(local, g, 2, (me + n - 1) % n);\n    shmem_long_atomic_inc(&g[3], 0);\n    shmem_barrier_all();\n    shmem_finalize();";
    let pes = 3;
    let f = bad(
        prefix,
        "counted",
        body,
        pes,
        &[("TESSERA_STATS", file.to_str().unwrap())],
    );
    assert!(f.status.success(), "{}", f.stderr);
    // Every PE's puts, gets and atomics, exactly.
    let exact = |file: &std::path::Path| {
        let stats = tessera::JobStats::read(file).unwrap();
        assert_eq!(stats.per_rank.len(), pes as usize);
        let n = pes as usize;
        for part in &stats.per_rank {
            let me = part.rank;
            let (right, left) = ((me + 1) % n, (me + n - 1) % n);
            for peer in (0..n).filter(|&p| p != me) {
                let put = if peer == right { (5, 5 * 32) } else { (0, 0) };
                let get = if peer == left { (3, 3 * 16) } else { (0, 0) };
                let atomic = if peer == 0 { (1, 8) } else { (0, 0) };
                assert_eq!(
                    part.to(peer, tessera::Traffic::Put),
                    put,
                    "PE {me} to {peer}"
                );
                assert_eq!(
                    part.to(peer, tessera::Traffic::Get),
                    get,
                    "PE {me} to {peer}"
                );
                assert_eq!(
                    part.to(peer, tessera::Traffic::Atomic),
                    atomic,
                    "PE {me} to {peer}"
                );
            }
        }
    };
    exact(&file);
    // At SHMEM_THREAD_MULTIPLE transfers go straight to the mapped segments from any
    // thread, and are counted all the same.
    let multiple = body.replace(
        "    shmem_init();",
        "    int provided;\n    shmem_init_thread(SHMEM_THREAD_MULTIPLE, &provided);\n    if (provided != SHMEM_THREAD_MULTIPLE) return 3;",
    );
    let f = bad(
        prefix,
        "multiple",
        &multiple,
        pes,
        &[("TESSERA_STATS", file.to_str().unwrap())],
    );
    assert!(f.status.success(), "{}", f.stderr);
    exact(&file);
}
