//! Generates, from one table of the OpenSHMEM 1.5 specification's types, both sides of
//! every typed family: the exported Rust functions (`typed.rs`) and their C prototypes in
//! `shmem.h`. The untyped routines are written by hand in the crate; their prototypes are
//! listed here beside the typed ones, so the header has one source. `symbols.txt` lists
//! every function the header declares (a test checks that the library exports each).
//!
//! It also compiles `src/longdouble.c`: reductions on `long double`, which Rust lacks.

use std::fmt::Write as _;

/// An RMA type: C type, TYPENAME, the Rust type of its elements.
struct Ty(&'static str, &'static str, &'static str);

/// Standard RMA types (spec §9.5, Table "Standard RMA Types and Names").
const RMA: &[Ty] = &[
    Ty("float", "float", "f32"),
    Ty("double", "double", "f64"),
    Ty("long double", "longdouble", "crate::LongDouble"),
    Ty("char", "char", "libc::c_char"),
    Ty("signed char", "schar", "i8"),
    Ty("short", "short", "i16"),
    Ty("int", "int", "i32"),
    Ty("long", "long", "libc::c_long"),
    Ty("long long", "longlong", "i64"),
    Ty("unsigned char", "uchar", "u8"),
    Ty("unsigned short", "ushort", "u16"),
    Ty("unsigned int", "uint", "u32"),
    Ty("unsigned long", "ulong", "libc::c_ulong"),
    Ty("unsigned long long", "ulonglong", "u64"),
    Ty("int8_t", "int8", "i8"),
    Ty("int16_t", "int16", "i16"),
    Ty("int32_t", "int32", "i32"),
    Ty("int64_t", "int64", "i64"),
    Ty("uint8_t", "uint8", "u8"),
    Ty("uint16_t", "uint16", "u16"),
    Ty("uint32_t", "uint32", "u32"),
    Ty("uint64_t", "uint64", "u64"),
    Ty("size_t", "size", "usize"),
    Ty("ptrdiff_t", "ptrdiff", "isize"),
];

/// An AMO or point-to-point type: C type, TYPENAME, Rust type, and the 16/32/64-bit
/// integer the runtime's atomics and waits work on (same size).
struct Word(&'static str, &'static str, &'static str, &'static str);

/// Standard AMO types (spec §9.7, Table "Standard AMO Types and Names").
const AMO: &[Word] = &[
    Word("int", "int", "i32", "i32"),
    Word("long", "long", "libc::c_long", "i64"),
    Word("long long", "longlong", "i64", "i64"),
    Word("unsigned int", "uint", "u32", "u32"),
    Word("unsigned long", "ulong", "libc::c_ulong", "u64"),
    Word("unsigned long long", "ulonglong", "u64", "u64"),
    Word("int32_t", "int32", "i32", "i32"),
    Word("int64_t", "int64", "i64", "i64"),
    Word("uint32_t", "uint32", "u32", "u32"),
    Word("uint64_t", "uint64", "u64", "u64"),
    Word("size_t", "size", "usize", "u64"),
    Word("ptrdiff_t", "ptrdiff", "isize", "i64"),
];

/// Extended AMO types: the standard ones and float, double (fetch, set, swap only).
const AMO_FLOAT: &[Word] = &[
    Word("float", "float", "f32", "u32"),
    Word("double", "double", "f64", "u64"),
];

/// Bitwise AMO types (spec: "Bitwise AMO Types and Names").
const AMO_BITWISE: &[&str] = &[
    "uint",
    "ulong",
    "ulonglong",
    "int32",
    "int64",
    "uint32",
    "uint64",
];

/// Point-to-point synchronisation types (spec §9.10).
const P2P: &[Word] = &[
    Word("short", "short", "i16", "i16"),
    Word("int", "int", "i32", "i32"),
    Word("long", "long", "libc::c_long", "i64"),
    Word("long long", "longlong", "i64", "i64"),
    Word("unsigned short", "ushort", "u16", "u16"),
    Word("unsigned int", "uint", "u32", "u32"),
    Word("unsigned long", "ulong", "libc::c_ulong", "u64"),
    Word("unsigned long long", "ulonglong", "u64", "u64"),
    Word("int32_t", "int32", "i32", "i32"),
    Word("int64_t", "int64", "i64", "i64"),
    Word("uint32_t", "uint32", "u32", "u32"),
    Word("uint64_t", "uint64", "u64", "u64"),
    Word("size_t", "size", "usize", "u64"),
    Word("ptrdiff_t", "ptrdiff", "isize", "i64"),
];

/// Reduction types of the active-set (`_to_all`) routines: C type, TYPENAME, Rust type,
/// and the operations (a = and/or/xor, m = max/min, s = sum/prod).
const REDUCE: &[(&str, &str, &str, &str)] = &[
    ("short", "short", "i16", "ams"),
    ("int", "int", "i32", "ams"),
    ("long", "long", "libc::c_long", "ams"),
    ("long long", "longlong", "i64", "ams"),
    ("float", "float", "f32", "ms"),
    ("double", "double", "f64", "ms"),
    ("long double", "longdouble", "crate::LongDouble", "ms"),
    ("tessera_complexf", "complexf", "crate::ComplexF", "s"),
    ("tessera_complexd", "complexd", "crate::ComplexD", "s"),
];

/// Sized RMA: bits and the Rust element type.
const SIZED: &[(u32, &str)] = &[
    (8, "u8"),
    (16, "u16"),
    (32, "u32"),
    (64, "u64"),
    (128, "u128"),
];

/// Prototypes of the routines written by hand in the crate.
const UNTYPED: &[&str] = &[
    // Library setup, exit, query.
    "void shmem_init(void)",
    "void shmem_finalize(void)",
    "int shmem_init_thread(int requested, int *provided)",
    "void shmem_query_thread(int *provided)",
    "int shmem_my_pe(void)",
    "int shmem_n_pes(void)",
    "void shmem_global_exit(int status)",
    "int shmem_pe_accessible(int pe)",
    "int shmem_addr_accessible(const void *addr, int pe)",
    "void *shmem_ptr(const void *dest, int pe)",
    "void shmem_info_get_version(int *major, int *minor)",
    "void shmem_info_get_name(char *name)",
    "void start_pes(int npes)",
    "int _my_pe(void)",
    "int _num_pes(void)",
    // Memory management.
    "void *shmem_malloc(size_t size)",
    "void *shmem_malloc_with_hints(size_t size, long hints)",
    "void shmem_free(void *ptr)",
    "void *shmem_realloc(void *ptr, size_t size)",
    "void *shmem_align(size_t alignment, size_t size)",
    "void *shmem_calloc(size_t count, size_t size)",
    "void *shmalloc(size_t size)",
    "void shfree(void *ptr)",
    "void *shrealloc(void *ptr, size_t size)",
    "void *shmemalign(size_t alignment, size_t size)",
    // Untyped RMA.
    "void shmem_putmem(void *dest, const void *source, size_t nelems, int pe)",
    "void shmem_getmem(void *dest, const void *source, size_t nelems, int pe)",
    "void shmem_putmem_nbi(void *dest, const void *source, size_t nelems, int pe)",
    "void shmem_getmem_nbi(void *dest, const void *source, size_t nelems, int pe)",
    // Memory ordering.
    "void shmem_fence(void)",
    "void shmem_quiet(void)",
    // Locks.
    "void shmem_set_lock(long *lock)",
    "void shmem_clear_lock(long *lock)",
    "int shmem_test_lock(long *lock)",
    // Deprecated generic point-to-point on long.
    "void shmem_wait(long *ivar, long cmp_value)",
    "void shmem_wait_until(long *ivar, int cmp, long cmp_value)",
    // Deprecated generic swap on long.
    "long shmem_swap(long *target, long value, int pe)",
    // Collectives over active sets (1.4).
    "void shmem_barrier_all(void)",
    "void shmem_barrier(int PE_start, int logPE_stride, int PE_size, long *pSync)",
    "void shmem_sync_all(void)",
    "void shmem_sync(int PE_start, int logPE_stride, int PE_size, long *pSync)",
    "void shmem_broadcast32(void *dest, const void *source, size_t nelems, int PE_root, int PE_start, int logPE_stride, int PE_size, long *pSync)",
    "void shmem_broadcast64(void *dest, const void *source, size_t nelems, int PE_root, int PE_start, int logPE_stride, int PE_size, long *pSync)",
    "void shmem_collect32(void *dest, const void *source, size_t nelems, int PE_start, int logPE_stride, int PE_size, long *pSync)",
    "void shmem_collect64(void *dest, const void *source, size_t nelems, int PE_start, int logPE_stride, int PE_size, long *pSync)",
    "void shmem_fcollect32(void *dest, const void *source, size_t nelems, int PE_start, int logPE_stride, int PE_size, long *pSync)",
    "void shmem_fcollect64(void *dest, const void *source, size_t nelems, int PE_start, int logPE_stride, int PE_size, long *pSync)",
    "void shmem_alltoall32(void *dest, const void *source, size_t nelems, int PE_start, int logPE_stride, int PE_size, long *pSync)",
    "void shmem_alltoall64(void *dest, const void *source, size_t nelems, int PE_start, int logPE_stride, int PE_size, long *pSync)",
    "void shmem_alltoalls32(void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems, int PE_start, int logPE_stride, int PE_size, long *pSync)",
    "void shmem_alltoalls64(void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems, int PE_start, int logPE_stride, int PE_size, long *pSync)",
    // Cache management: no-ops (coherent memory).
    "void shmem_clear_cache_inv(void)",
    "void shmem_set_cache_inv(void)",
    "void shmem_clear_cache_line_inv(void *dest)",
    "void shmem_set_cache_line_inv(void *dest)",
    "void shmem_udcflush(void)",
    "void shmem_udcflush_line(void *dest)",
];

const HEADER_TOP: &str = r#"/* shmem.h: OpenSHMEM 1.5 for C and C++ on the Tessera runtime.
 *
 * Generated by crates/tessera-shmem/build.rs from the specification's type tables; do not
 * edit. Written from the OpenSHMEM 1.5 specification. */
#ifndef TESSERA_SHMEM_H
#define TESSERA_SHMEM_H

#include <stddef.h>
#include <stdint.h>

#define SHMEM_MAJOR_VERSION 1
#define SHMEM_MINOR_VERSION 5
#define SHMEM_MAX_NAME_LEN 256
#define SHMEM_VENDOR_STRING "Tessera"
#define _SHMEM_MAJOR_VERSION SHMEM_MAJOR_VERSION
#define _SHMEM_MINOR_VERSION SHMEM_MINOR_VERSION
#define _SHMEM_MAX_NAME_LEN SHMEM_MAX_NAME_LEN
#define _SHMEM_VENDOR_STRING SHMEM_VENDOR_STRING

#define SHMEM_THREAD_SINGLE 0
#define SHMEM_THREAD_FUNNELED 1
#define SHMEM_THREAD_SERIALIZED 2
#define SHMEM_THREAD_MULTIPLE 3

#define SHMEM_CMP_EQ 0
#define SHMEM_CMP_NE 1
#define SHMEM_CMP_GT 2
#define SHMEM_CMP_GE 3
#define SHMEM_CMP_LT 4
#define SHMEM_CMP_LE 5
#define _SHMEM_CMP_EQ SHMEM_CMP_EQ
#define _SHMEM_CMP_NE SHMEM_CMP_NE
#define _SHMEM_CMP_GT SHMEM_CMP_GT
#define _SHMEM_CMP_GE SHMEM_CMP_GE
#define _SHMEM_CMP_LT SHMEM_CMP_LT
#define _SHMEM_CMP_LE SHMEM_CMP_LE

/* Work arrays of the active-set collectives. Tessera's collectives keep their own state,
 * so pSync and pWrk are accepted and left alone; the sizes keep programs that declare them
 * correct. */
#define SHMEM_SYNC_VALUE 0L
#define SHMEM_SYNC_SIZE 4
#define SHMEM_BCAST_SYNC_SIZE 4
#define SHMEM_BARRIER_SYNC_SIZE 4
#define SHMEM_REDUCE_SYNC_SIZE 4
#define SHMEM_COLLECT_SYNC_SIZE 4
#define SHMEM_ALLTOALL_SYNC_SIZE 4
#define SHMEM_ALLTOALLS_SYNC_SIZE 4
#define SHMEM_REDUCE_MIN_WRKDATA_SIZE 1
#define _SHMEM_SYNC_VALUE SHMEM_SYNC_VALUE
#define _SHMEM_BCAST_SYNC_SIZE SHMEM_BCAST_SYNC_SIZE
#define _SHMEM_BARRIER_SYNC_SIZE SHMEM_BARRIER_SYNC_SIZE
#define _SHMEM_REDUCE_SYNC_SIZE SHMEM_REDUCE_SYNC_SIZE
#define _SHMEM_COLLECT_SYNC_SIZE SHMEM_COLLECT_SYNC_SIZE
#define _SHMEM_REDUCE_MIN_WRKDATA_SIZE SHMEM_REDUCE_MIN_WRKDATA_SIZE

#define SHMEM_MALLOC_ATOMICS_REMOTE 1L
#define SHMEM_MALLOC_SIGNAL_REMOTE 2L

/* Complex element types of the sum and product reductions. */
#ifdef __cplusplus
__extension__ typedef __complex__ float tessera_complexf;
__extension__ typedef __complex__ double tessera_complexd;
#else
typedef float _Complex tessera_complexf;
typedef double _Complex tessera_complexd;
#endif

#ifdef __cplusplus
extern "C" {
#endif

"#;

const HEADER_BOTTOM: &str = r#"
#ifdef __cplusplus
}
#endif

#endif /* TESSERA_SHMEM_H */
"#;

struct Out {
    rust: String,
    header: String,
    symbols: Vec<String>,
}

impl Out {
    /// One function: its C prototype (`ret name(params)`), its Rust signature
    /// (`name(params) -> ret`) and body.
    fn func(&mut self, c: &str, name: &str, rust_sig: &str, body: &str) {
        let _ = writeln!(self.header, "{c};");
        let _ = write!(
            self.rust,
            "/// `{name}` (OpenSHMEM 1.5).\n///\n/// # Safety\n/// Pointers must be as the specification requires: symmetric where it says so, and valid for the elements named.\n#[no_mangle]\npub unsafe extern \"C\" fn {rust_sig} {{\n    // SAFETY: the caller passes pointers as the specification requires.\n    unsafe {{ {body} }}\n}}\n\n"
        );
        self.symbols.push(name.to_string());
    }
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=src/longdouble.c");
    cc::Build::new()
        .file("src/longdouble.c")
        .opt_level(2)
        .compile("tessera_longdouble");

    let mut o = Out {
        rust: String::new(),
        header: String::from(HEADER_TOP),
        symbols: Vec::new(),
    };
    o.header
        .push_str("/* Setup, memory, untyped RMA, ordering, locks, collectives, cache. */\n");
    for proto in UNTYPED {
        let _ = writeln!(o.header, "{proto};");
        let name = proto
            .split('(')
            .next()
            .and_then(|s| s.split_whitespace().last())
            .map(|s| s.trim_start_matches('*'))
            .expect("a prototype names its function");
        o.symbols.push(name.to_string());
    }

    o.header.push_str("\n/* Typed RMA. */\n");
    for Ty(c, n, r) in RMA {
        let f = format!("shmem_{n}_put");
        o.func(
            &format!("void {f}({c} *dest, const {c} *source, size_t nelems, int pe)"),
            &f,
            &format!("{f}(dest: *mut {r}, source: *const {r}, nelems: usize, pe: libc::c_int)"),
            &format!("crate::rma::put(\"{f}\", dest, source, nelems, pe)"),
        );
        let f = format!("shmem_{n}_get");
        o.func(
            &format!("void {f}({c} *dest, const {c} *source, size_t nelems, int pe)"),
            &f,
            &format!("{f}(dest: *mut {r}, source: *const {r}, nelems: usize, pe: libc::c_int)"),
            &format!("crate::rma::get(\"{f}\", dest, source, nelems, pe)"),
        );
        for nbi in ["put_nbi", "get_nbi"] {
            let f = format!("shmem_{n}_{nbi}");
            let op = &nbi[..3];
            o.func(
                &format!("void {f}({c} *dest, const {c} *source, size_t nelems, int pe)"),
                &f,
                &format!("{f}(dest: *mut {r}, source: *const {r}, nelems: usize, pe: libc::c_int)"),
                &format!("crate::rma::{op}(\"{f}\", dest, source, nelems, pe)"),
            );
        }
        if *n == "longdouble" {
            // `long double` by value is on the stack (argument) and in x87 st(0) (result),
            // which Rust cannot declare: these two are written in assembly over the
            // pointer forms (src/rma.rs).
            let _ = writeln!(o.header, "void shmem_{n}_p({c} *dest, {c} value, int pe);");
            let _ = writeln!(o.header, "{c} shmem_{n}_g(const {c} *source, int pe);");
            o.symbols.push(format!("shmem_{n}_p"));
            o.symbols.push(format!("shmem_{n}_g"));
        } else {
            let f = format!("shmem_{n}_p");
            o.func(
                &format!("void {f}({c} *dest, {c} value, int pe)"),
                &f,
                &format!("{f}(dest: *mut {r}, value: {r}, pe: libc::c_int)"),
                &format!("crate::rma::p(\"{f}\", dest, value, pe)"),
            );
            let f = format!("shmem_{n}_g");
            o.func(
                &format!("{c} {f}(const {c} *source, int pe)"),
                &f,
                &format!("{f}(source: *const {r}, pe: libc::c_int) -> {r}"),
                &format!("crate::rma::g(\"{f}\", source, pe)"),
            );
        }
        for op in ["iput", "iget"] {
            let f = format!("shmem_{n}_{op}");
            o.func(
                &format!("void {f}({c} *dest, const {c} *source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems, int pe)"),
                &f,
                &format!("{f}(dest: *mut {r}, source: *const {r}, dst: isize, sst: isize, nelems: usize, pe: libc::c_int)"),
                &format!("crate::rma::{op}(\"{f}\", dest, source, dst, sst, nelems, pe)"),
            );
        }
    }

    o.header.push_str("\n/* Sized RMA. */\n");
    for (bits, r) in SIZED {
        for (op, kind) in [
            ("put", "put"),
            ("get", "get"),
            ("put", "put_nbi"),
            ("get", "get_nbi"),
        ] {
            let f = if kind.ends_with("nbi") {
                format!("shmem_{op}{bits}_nbi")
            } else {
                format!("shmem_{op}{bits}")
            };
            o.func(
                &format!("void {f}(void *dest, const void *source, size_t nelems, int pe)"),
                &f,
                &format!("{f}(dest: *mut libc::c_void, source: *const libc::c_void, nelems: usize, pe: libc::c_int)"),
                &format!("crate::rma::{op}(\"{f}\", dest as *mut {r}, source as *const {r}, nelems, pe)"),
            );
        }
        for op in ["iput", "iget"] {
            let f = format!("shmem_{op}{bits}");
            o.func(
                &format!("void {f}(void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems, int pe)"),
                &f,
                &format!("{f}(dest: *mut libc::c_void, source: *const libc::c_void, dst: isize, sst: isize, nelems: usize, pe: libc::c_int)"),
                &format!("crate::rma::{op}(\"{f}\", dest as *mut {r}, source as *const {r}, dst, sst, nelems, pe)"),
            );
        }
    }

    o.header.push_str("\n/* Atomic memory operations. */\n");
    let amo = |o: &mut Out, Word(c, n, r, w): &Word, ops: &[&str], prefix: &str| {
        for &op in ops {
            let f = format!("shmem_{n}_{prefix}{op}");
            let call = |what: &str, args: &str| format!("crate::amo::{what}::<{w}>(\"{f}\"{args})");
            let (proto, sig, body) = match op {
                "fetch" => (
                    format!("{c} {f}(const {c} *source, int pe)"),
                    format!("{f}(source: *const {r}, pe: libc::c_int) -> {r}"),
                    format!("crate::amo::from_word::<{r}, {w}>({})", call("fetch", ", source.cast(), pe")),
                ),
                "set" => (
                    format!("void {f}({c} *dest, {c} value, int pe)"),
                    format!("{f}(dest: *mut {r}, value: {r}, pe: libc::c_int)"),
                    format!("{};", call("set", &format!(", dest.cast(), crate::amo::to_word::<{r}, {w}>(value), pe"))),
                ),
                "compare_swap" | "cswap" => (
                    format!("{c} {f}({c} *dest, {c} cond, {c} value, int pe)"),
                    format!("{f}(dest: *mut {r}, cond: {r}, value: {r}, pe: libc::c_int) -> {r}"),
                    format!(
                        "crate::amo::from_word::<{r}, {w}>({})",
                        call("compare_swap", &format!(", dest.cast(), crate::amo::to_word::<{r}, {w}>(cond), crate::amo::to_word::<{r}, {w}>(value), pe"))
                    ),
                ),
                "swap" => (
                    format!("{c} {f}({c} *dest, {c} value, int pe)"),
                    format!("{f}(dest: *mut {r}, value: {r}, pe: libc::c_int) -> {r}"),
                    format!(
                        "crate::amo::from_word::<{r}, {w}>({})",
                        call("swap", &format!(", dest.cast(), crate::amo::to_word::<{r}, {w}>(value), pe"))
                    ),
                ),
                "fetch_inc" | "finc" => (
                    format!("{c} {f}({c} *dest, int pe)"),
                    format!("{f}(dest: *mut {r}, pe: libc::c_int) -> {r}"),
                    format!("crate::amo::from_word::<{r}, {w}>({})", call("fetch_add", ", dest.cast(), 1, pe")),
                ),
                "inc" => (
                    format!("void {f}({c} *dest, int pe)"),
                    format!("{f}(dest: *mut {r}, pe: libc::c_int)"),
                    format!("{};", call("fetch_add", ", dest.cast(), 1, pe")),
                ),
                "fetch_add" | "fadd" => (
                    format!("{c} {f}({c} *dest, {c} value, int pe)"),
                    format!("{f}(dest: *mut {r}, value: {r}, pe: libc::c_int) -> {r}"),
                    format!(
                        "crate::amo::from_word::<{r}, {w}>({})",
                        call("fetch_add", &format!(", dest.cast(), crate::amo::to_word::<{r}, {w}>(value), pe"))
                    ),
                ),
                "add" => (
                    format!("void {f}({c} *dest, {c} value, int pe)"),
                    format!("{f}(dest: *mut {r}, value: {r}, pe: libc::c_int)"),
                    format!("{};", call("fetch_add", &format!(", dest.cast(), crate::amo::to_word::<{r}, {w}>(value), pe"))),
                ),
                bit @ ("fetch_and" | "fetch_or" | "fetch_xor") => (
                    format!("{c} {f}({c} *dest, {c} value, int pe)"),
                    format!("{f}(dest: *mut {r}, value: {r}, pe: libc::c_int) -> {r}"),
                    format!(
                        "crate::amo::from_word::<{r}, {w}>({})",
                        call(bit, &format!(", dest.cast(), crate::amo::to_word::<{r}, {w}>(value), pe"))
                    ),
                ),
                bit @ ("and" | "or" | "xor") => (
                    format!("void {f}({c} *dest, {c} value, int pe)"),
                    format!("{f}(dest: *mut {r}, value: {r}, pe: libc::c_int)"),
                    format!("{};", call(&format!("fetch_{bit}"), &format!(", dest.cast(), crate::amo::to_word::<{r}, {w}>(value), pe"))),
                ),
                other => panic!("unknown AMO {other}"),
            };
            o.func(&proto, &f, &sig, &body);
        }
    };
    let standard = [
        "fetch",
        "set",
        "compare_swap",
        "swap",
        "fetch_inc",
        "inc",
        "fetch_add",
        "add",
    ];
    for t in AMO {
        amo(&mut o, t, &standard, "atomic_");
        if AMO_BITWISE.contains(&t.1) {
            amo(
                &mut o,
                t,
                &["fetch_and", "and", "fetch_or", "or", "fetch_xor", "xor"],
                "atomic_",
            );
        }
    }
    for t in AMO_FLOAT {
        amo(&mut o, t, &["fetch", "set", "swap"], "atomic_");
    }
    o.header
        .push_str("\n/* Atomic memory operations under their deprecated (1.3) names. */\n");
    for t in AMO
        .iter()
        .filter(|t| ["int", "long", "longlong"].contains(&t.1))
    {
        amo(
            &mut o,
            t,
            &[
                "fetch", "set", "cswap", "swap", "finc", "inc", "fadd", "add",
            ],
            "",
        );
    }
    for t in AMO_FLOAT {
        amo(&mut o, t, &["fetch", "set", "swap"], "");
    }

    o.header
        .push_str("\n/* Point-to-point synchronisation. */\n");
    for Word(c, n, r, w) in P2P {
        let f = format!("shmem_{n}_wait_until");
        o.func(
            &format!("void {f}({c} *ivar, int cmp, {c} cmp_value)"),
            &f,
            &format!("{f}(ivar: *mut {r}, cmp: libc::c_int, cmp_value: {r})"),
            &format!("crate::p2p::wait_until::<{w}>(\"{f}\", ivar.cast(), cmp, cmp_value as {w})"),
        );
        let f = format!("shmem_{n}_test");
        o.func(
            &format!("int {f}({c} *ivar, int cmp, {c} cmp_value)"),
            &f,
            &format!("{f}(ivar: *mut {r}, cmp: libc::c_int, cmp_value: {r}) -> libc::c_int"),
            &format!("crate::p2p::test::<{w}>(\"{f}\", ivar.cast(), cmp, cmp_value as {w})"),
        );
        let f = format!("shmem_{n}_wait");
        o.func(
            &format!("void {f}({c} *ivar, {c} cmp_value)"),
            &f,
            &format!("{f}(ivar: *mut {r}, cmp_value: {r})"),
            &format!("crate::p2p::wait_until::<{w}>(\"{f}\", ivar.cast(), crate::p2p::CMP_NE, cmp_value as {w})"),
        );
    }

    o.header
        .push_str("\n/* Reductions over active sets (1.4). */\n");
    for (c, n, r, ops) in REDUCE {
        let mut names = Vec::new();
        if ops.contains('a') {
            names.extend(["and", "or", "xor"]);
        }
        if ops.contains('m') {
            names.extend(["max", "min"]);
        }
        if ops.contains('s') {
            names.extend(["sum", "prod"]);
        }
        for op in names {
            let f = format!("shmem_{n}_{op}_to_all");
            let variant = match op {
                "and" => "And",
                "or" => "Or",
                "xor" => "Xor",
                "max" => "Max",
                "min" => "Min",
                "sum" => "Sum",
                _ => "Prod",
            };
            o.func(
                &format!("void {f}({c} *dest, const {c} *source, int nreduce, int PE_start, int logPE_stride, int PE_size, {c} *pWrk, long *pSync)"),
                &f,
                &format!("{f}(dest: *mut {r}, source: *const {r}, nreduce: libc::c_int, pe_start: libc::c_int, log_stride: libc::c_int, pe_size: libc::c_int, _pwrk: *mut {r}, _psync: *mut libc::c_long)"),
                &format!("crate::coll::to_all::<{r}>(\"{f}\", crate::coll::ReduceOp::{variant}, dest, source, nreduce, pe_start, log_stride, pe_size)"),
            );
        }
    }
    o.header.push_str(HEADER_BOTTOM);

    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    std::fs::write(out.join("typed_test.c"), typed_test()).expect("writing typed_test.c");
    std::fs::write(out.join("typed.rs"), o.rust).expect("writing typed.rs");
    std::fs::write(out.join("shmem.h"), o.header).expect("writing shmem.h");
    std::fs::write(out.join("symbols.txt"), o.symbols.join("\n") + "\n")
        .expect("writing symbols.txt");
}

/// A C test of every typed family, from the same tables: puts and gets (blocking, `p`/`g`,
/// strided, `_nbi`) into heap and global objects, every AMO, every wait and test, every
/// reduction. It prints `typed: OK` on PE 0 when every check passed on every PE.
fn typed_test() -> String {
    let mut c = String::from(
        r#"/* typed_test.c: every typed OpenSHMEM family, generated by build.rs from the same
 * type tables as shmem.h. Run with 1 to 4 PEs; prints "typed: OK" when all checks pass. */
#include <shmem.h>
#include <stdio.h>

static int failures;
#define CHECK(cond, what) do { if (!(cond)) { failures++; \
    fprintf(stderr, "PE %d: %s failed (%s:%d)\n", shmem_my_pe(), what, __FILE__, __LINE__); } } while (0)
#define N 8

"#,
    );
    for Ty(ty, n, _) in RMA {
        let _ = write!(
            c,
            r#"static {ty} g_{n}[2 * N];
static void rma_{n}(void) {{
    int me = shmem_my_pe(), np = shmem_n_pes(), right = (me + 1) % np, left = (me + np - 1) % np;
    {ty} *h = ({ty} *) shmem_malloc(2 * N * sizeof({ty}));
    {ty} src[2 * N], got[2 * N];
    int i;
    for (i = 0; i < 2 * N; i++) {{ src[i] = ({ty}) ((me * 10 + i) % 100); h[i] = 0; g_{n}[i] = 0; }}
    shmem_barrier_all();
    shmem_{n}_put(g_{n}, src, N, right);
    shmem_{n}_put(h, src, N, right);
    shmem_barrier_all();
    for (i = 0; i < N; i++) {{
        CHECK(g_{n}[i] == ({ty}) ((left * 10 + i) % 100), "shmem_{n}_put to a global");
        CHECK(h[i] == ({ty}) ((left * 10 + i) % 100), "shmem_{n}_put to the heap");
    }}
    shmem_{n}_get(got, g_{n}, N, right);
    for (i = 0; i < N; i++) CHECK(got[i] == ({ty}) ((me * 10 + i) % 100), "shmem_{n}_get");
    shmem_barrier_all();
    shmem_{n}_p(&h[N], ({ty}) (me + 1), right);
    shmem_barrier_all();
    CHECK(h[N] == ({ty}) (left + 1), "shmem_{n}_p");
    CHECK(shmem_{n}_g(&h[N], right) == ({ty}) (me + 1), "shmem_{n}_g");
    shmem_barrier_all();
    shmem_{n}_iput(g_{n}, src, 2, 1, N, right);
    shmem_barrier_all();
    for (i = 0; i < N; i++) CHECK(g_{n}[2 * i] == ({ty}) ((left * 10 + i) % 100), "shmem_{n}_iput");
    shmem_{n}_iget(got, g_{n}, 1, 2, N, right);
    for (i = 0; i < N; i++) CHECK(got[i] == ({ty}) ((me * 10 + i) % 100), "shmem_{n}_iget");
    shmem_barrier_all();
    shmem_{n}_put_nbi(h, src + N, N, right);
    shmem_quiet();
    shmem_barrier_all();
    for (i = 0; i < N; i++) CHECK(h[i] == ({ty}) ((left * 10 + N + i) % 100), "shmem_{n}_put_nbi");
    shmem_{n}_get_nbi(got, h, N, right);
    shmem_quiet();
    for (i = 0; i < N; i++) CHECK(got[i] == ({ty}) ((me * 10 + N + i) % 100), "shmem_{n}_get_nbi");
    shmem_barrier_all();
    shmem_free(h);
}}

"#
        );
    }
    for Word(ty, n, _, _) in AMO {
        let bitwise = AMO_BITWISE.contains(n);
        let _ = write!(
            c,
            r#"static {ty} a_{n}, b_{n};
static void amo_{n}(void) {{
    int me = shmem_my_pe(), np = shmem_n_pes();
    a_{n} = 0; b_{n} = 0;
    shmem_barrier_all();
    shmem_{n}_atomic_add(&a_{n}, ({ty}) 2, 0);
    shmem_{n}_atomic_inc(&a_{n}, 0);
    (void) shmem_{n}_atomic_fetch_add(&a_{n}, ({ty}) 1, 0);
    (void) shmem_{n}_atomic_fetch_inc(&a_{n}, 0);
    shmem_barrier_all();
    CHECK(shmem_{n}_atomic_fetch(&a_{n}, 0) == ({ty}) (5 * np), "shmem_{n}_atomic add, inc, fetch_add, fetch_inc");
    shmem_barrier_all();
    if (me == 0) {{
        shmem_{n}_atomic_set(&b_{n}, ({ty}) 7, np - 1);
        CHECK(shmem_{n}_atomic_swap(&b_{n}, ({ty}) 9, np - 1) == ({ty}) 7, "shmem_{n}_atomic_swap");
        CHECK(shmem_{n}_atomic_compare_swap(&b_{n}, ({ty}) 9, ({ty}) 11, np - 1) == ({ty}) 9, "shmem_{n}_atomic_compare_swap");
        CHECK(shmem_{n}_atomic_compare_swap(&b_{n}, ({ty}) 9, ({ty}) 13, np - 1) == ({ty}) 11, "shmem_{n}_atomic_compare_swap (no swap)");
    }}
    shmem_barrier_all();
    if (me == np - 1) CHECK(b_{n} == ({ty}) 11, "shmem_{n} atomics on the last PE");
    shmem_barrier_all();
"#
        );
        if bitwise {
            let _ = write!(
                c,
                r#"    b_{n} = 0;
    shmem_barrier_all();
    shmem_{n}_atomic_or(&b_{n}, ({ty}) (1u << (me % 16)), 0);
    (void) shmem_{n}_atomic_fetch_or(&b_{n}, ({ty}) (1u << 20), 0);
    shmem_barrier_all();
    if (me == 0) {{
        {ty} want = ({ty}) (1u << 20);
        int i;
        for (i = 0; i < np; i++) want |= ({ty}) (1u << (i % 16));
        CHECK(b_{n} == want, "shmem_{n}_atomic_or, fetch_or");
        CHECK(shmem_{n}_atomic_fetch_and(&b_{n}, ({ty}) (1u << 20), 0) == want, "shmem_{n}_atomic_fetch_and");
        shmem_{n}_atomic_and(&b_{n}, ({ty}) (1u << 20), 0);
        shmem_{n}_atomic_xor(&b_{n}, ({ty}) 3, 0);
        CHECK(shmem_{n}_atomic_fetch_xor(&b_{n}, ({ty}) 1, 0) == ({ty}) ((1u << 20) | 3), "shmem_{n}_atomic_xor, fetch_xor");
        CHECK(b_{n} == ({ty}) ((1u << 20) | 2), "shmem_{n}_atomic bitwise result");
    }}
    shmem_barrier_all();
"#
            );
        }
        c.push_str(
            "}

",
        );
    }
    for Word(ty, n, _, _) in AMO_FLOAT {
        let _ = write!(
            c,
            r#"static {ty} f_{n};
static void amo_{n}(void) {{
    int me = shmem_my_pe(), np = shmem_n_pes();
    f_{n} = 0;
    shmem_barrier_all();
    if (me == 0) {{
        shmem_{n}_atomic_set(&f_{n}, ({ty}) 1.5, np - 1);
        CHECK(shmem_{n}_atomic_swap(&f_{n}, ({ty}) 2.25, np - 1) == ({ty}) 1.5, "shmem_{n}_atomic_swap");
        CHECK(shmem_{n}_atomic_fetch(&f_{n}, np - 1) == ({ty}) 2.25, "shmem_{n}_atomic_fetch");
        CHECK(shmem_{n}_swap(&f_{n}, ({ty}) 3.5, np - 1) == ({ty}) 2.25, "shmem_{n}_swap (deprecated)");
    }}
    shmem_barrier_all();
}}

"#
        );
    }
    for Word(ty, n, _, _) in P2P {
        let _ = write!(
            c,
            r#"static {ty} w_{n};
static void p2p_{n}(void) {{
    int me = shmem_my_pe(), np = shmem_n_pes();
    w_{n} = 0;
    shmem_barrier_all();
    shmem_{n}_p(&w_{n}, ({ty}) 42, (me + 1) % np);
    shmem_{n}_wait_until(&w_{n}, SHMEM_CMP_EQ, ({ty}) 42);
    CHECK(shmem_{n}_test(&w_{n}, SHMEM_CMP_GE, ({ty}) 42), "shmem_{n}_test GE");
    CHECK(!shmem_{n}_test(&w_{n}, SHMEM_CMP_GT, ({ty}) 42), "shmem_{n}_test GT");
    CHECK(shmem_{n}_test(&w_{n}, SHMEM_CMP_LT, ({ty}) 43), "shmem_{n}_test LT");
    CHECK(shmem_{n}_test(&w_{n}, SHMEM_CMP_LE, ({ty}) 42), "shmem_{n}_test LE");
    CHECK(shmem_{n}_test(&w_{n}, SHMEM_CMP_NE, ({ty}) 41), "shmem_{n}_test NE");
    shmem_barrier_all();
    shmem_{n}_p(&w_{n}, ({ty}) 43, (me + 1) % np);
    shmem_{n}_wait(&w_{n}, ({ty}) 42);
    CHECK(w_{n} == ({ty}) 43, "shmem_{n}_wait");
    shmem_barrier_all();
}}

"#
        );
    }
    let mut reductions = String::new();
    for (ty, n, _, ops) in REDUCE {
        if n.starts_with("complex") {
            let _ = write!(
                c,
                r#"static {ty} rs_{n}[2], rd_{n}[2], rw_{n}[8];
static long rp_{n}[SHMEM_REDUCE_SYNC_SIZE];
static void reduce_{n}(void) {{
    int me = shmem_my_pe(), np = shmem_n_pes();
    rs_{n}[0] = ({ty}) (me + 1); rs_{n}[1] = ({ty}) 1;
    shmem_barrier_all();
    shmem_{n}_sum_to_all(rd_{n}, rs_{n}, 2, 0, 0, np, rw_{n}, rp_{n});
    CHECK(rd_{n}[0] == ({ty}) (np * (np + 1) / 2) && rd_{n}[1] == ({ty}) np, "shmem_{n}_sum_to_all");
    shmem_{n}_prod_to_all(rd_{n}, rs_{n}, 2, 0, 0, np, rw_{n}, rp_{n});
    CHECK(rd_{n}[1] == ({ty}) 1, "shmem_{n}_prod_to_all");
    shmem_barrier_all();
}}

"#
            );
        } else {
            let _ = write!(
                c,
                r#"static {ty} rs_{n}[4], rd_{n}[4], rw_{n}[8];
static long rp_{n}[SHMEM_REDUCE_SYNC_SIZE];
static void reduce_{n}(void) {{
    int me = shmem_my_pe(), np = shmem_n_pes(), i;
    {ty} fact = 1;
    for (i = 1; i <= np; i++) fact *= ({ty}) i;
    for (i = 0; i < 4; i++) rs_{n}[i] = ({ty}) (me + 1);
    shmem_barrier_all();
"#
            );
            if ops.contains('s') {
                let _ = write!(
                    c,
                    r#"    shmem_{n}_sum_to_all(rd_{n}, rs_{n}, 4, 0, 0, np, rw_{n}, rp_{n});
    CHECK(rd_{n}[3] == ({ty}) (np * (np + 1) / 2), "shmem_{n}_sum_to_all");
    shmem_{n}_prod_to_all(rd_{n}, rs_{n}, 4, 0, 0, np, rw_{n}, rp_{n});
    CHECK(rd_{n}[0] == fact, "shmem_{n}_prod_to_all");
    shmem_{n}_sum_to_all(rs_{n}, rs_{n}, 4, 0, 0, np, rw_{n}, rp_{n});
    CHECK(rs_{n}[1] == ({ty}) (np * (np + 1) / 2), "shmem_{n}_sum_to_all in place");
    for (i = 0; i < 4; i++) rs_{n}[i] = ({ty}) (me + 1);
    shmem_barrier_all();
"#
                );
            }
            if ops.contains('m') {
                let _ = write!(
                    c,
                    r#"    shmem_{n}_max_to_all(rd_{n}, rs_{n}, 4, 0, 0, np, rw_{n}, rp_{n});
    CHECK(rd_{n}[2] == ({ty}) np, "shmem_{n}_max_to_all");
    shmem_{n}_min_to_all(rd_{n}, rs_{n}, 4, 0, 0, np, rw_{n}, rp_{n});
    CHECK(rd_{n}[2] == ({ty}) 1, "shmem_{n}_min_to_all");
"#
                );
            }
            if ops.contains('a') {
                let _ = write!(
                    c,
                    r#"    for (i = 0; i < 4; i++) rs_{n}[i] = ({ty}) (1 << me);
    shmem_barrier_all();
    shmem_{n}_or_to_all(rd_{n}, rs_{n}, 4, 0, 0, np, rw_{n}, rp_{n});
    CHECK(rd_{n}[0] == ({ty}) ((1 << np) - 1), "shmem_{n}_or_to_all");
    shmem_{n}_xor_to_all(rd_{n}, rs_{n}, 4, 0, 0, np, rw_{n}, rp_{n});
    CHECK(rd_{n}[0] == ({ty}) ((1 << np) - 1), "shmem_{n}_xor_to_all");
    shmem_{n}_and_to_all(rd_{n}, rs_{n}, 4, 0, 0, np, rw_{n}, rp_{n});
    CHECK(rd_{n}[0] == ({ty}) (np == 1 ? 1 : 0), "shmem_{n}_and_to_all");
"#
                );
            }
            c.push_str(
                "    shmem_barrier_all();
}

",
            );
        }
        let _ = writeln!(reductions, "    reduce_{n}();");
    }
    c.push_str(
        "int main(void)
{
    int total;
    shmem_init();
",
    );
    for Ty(_, n, _) in RMA {
        let _ = writeln!(c, "    rma_{n}();");
    }
    for Word(_, n, _, _) in AMO.iter().chain(AMO_FLOAT) {
        let _ = writeln!(c, "    amo_{n}();");
    }
    for Word(_, n, _, _) in P2P {
        let _ = writeln!(c, "    p2p_{n}();");
    }
    c.push_str(&reductions);
    c.push_str(
        r#"    {
        static int all_failures;
        static int w[4];
        static long s[SHMEM_REDUCE_SYNC_SIZE];
        shmem_int_sum_to_all(&all_failures, &failures, 1, 0, 0, shmem_n_pes(), w, s);
        total = all_failures;
    }
    if (shmem_my_pe() == 0) {
        if (total == 0) printf("typed: OK\n");
        else printf("typed: %d checks failed\n", total);
    }
    shmem_finalize();
    return total != 0;
}
"#,
    );
    c
}
