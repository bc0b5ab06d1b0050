//! The point-to-point families: RMA (typed, sized, untyped), put-with-signal, AMOs
//! (blocking and `_nbi`), and waits and tests (single and multi-valued), each with its
//! context form where the specification has one.

use std::fmt::Write as _;

use crate::tables::*;
use crate::{Operands, Out, Sig};

/// `long double` by value is on the stack (argument) and in x87 st(0) (result), which Rust
/// cannot declare: `p` and `g` on it (and their context forms) are written in assembly
/// over the pointer forms (src/rma.rs).
fn longdouble_p_g(o: &mut Out) {
    o.declared("void shmem_longdouble_p(long double *dest, long double value, int pe)");
    o.declared("long double shmem_longdouble_g(const long double *source, int pe)");
    o.declared(
        "void shmem_ctx_longdouble_p(shmem_ctx_t ctx, long double *dest, long double value, int pe)",
    );
    o.declared(
        "long double shmem_ctx_longdouble_g(shmem_ctx_t ctx, const long double *source, int pe)",
    );
}

/// The contiguous and strided put and get of one element type (`c` in C, `r` in Rust),
/// named `shmem_{infix}put{suffix}` and so on.
fn rma(o: &mut Out, c: &str, r: &str, infix: &str, suffix: &str) {
    let Operands {
        c: cp,
        rust: rp,
        dest,
        source,
    } = Operands::of(c, r);
    for (op, nbi) in [("put", ""), ("get", ""), ("put", "_nbi"), ("get", "_nbi")] {
        let name = format!("shmem_{infix}{op}{suffix}{nbi}");
        o.func_and_ctx(
            &Sig::new(
                &name,
                "void",
                &format!("{cp} *dest, const {cp} *source, size_t nelems, int pe"),
                &format!("dest: *mut {rp}, source: *const {rp}, nelems: usize, pe: libc::c_int"),
                "",
            ),
            |call, pe| format!("crate::rma::{op}(\"{call}\", {dest}, {source}, nelems, {pe})"),
        );
    }
    if suffix == "mem" {
        return;
    }
    // The strided forms, and OpenSHMEM 1.6's blocked strided ones: (C count parameters,
    // Rust count parameters, the arguments that pass them on).
    let strided = ("size_t nelems", "nelems: usize", "nelems");
    let blocked = (
        "size_t bsize, size_t nblocks",
        "bsize: usize, nblocks: usize",
        "bsize, nblocks",
    );
    for (op, (c_count, rust_count, count)) in [
        ("iput", strided),
        ("iget", strided),
        ("ibput", blocked),
        ("ibget", blocked),
    ] {
        let name = if infix.is_empty() {
            format!("shmem_{op}{suffix}")
        } else {
            format!("shmem_{infix}{op}")
        };
        o.func_and_ctx(
            &Sig::new(
                &name,
                "void",
                &format!("{cp} *dest, const {cp} *source, ptrdiff_t dst, ptrdiff_t sst, {c_count}, int pe"),
                &format!("dest: *mut {rp}, source: *const {rp}, dst: isize, sst: isize, {rust_count}, pe: libc::c_int"),
                "",
            ),
            |call, pe| format!("crate::rma::{op}(\"{call}\", {dest}, {source}, dst, sst, {count}, {pe})"),
        );
    }
}

/// `put_signal` and `put_signal_nbi` of one element type, as `rma` names them.
fn put_signal(o: &mut Out, c: &str, r: &str, name: &str) {
    let Operands {
        c: cp,
        rust: rp,
        dest,
        source,
    } = Operands::of(c, r);
    for nbi in ["", "_nbi"] {
        o.func_and_ctx(
            &Sig::new(
                &format!("{name}_signal{nbi}"),
                "void",
                &format!("{cp} *dest, const {cp} *source, size_t nelems, uint64_t *sig_addr, uint64_t signal, int sig_op, int pe"),
                &format!("dest: *mut {rp}, source: *const {rp}, nelems: usize, sig_addr: *mut u64, signal: u64, sig_op: libc::c_int, pe: libc::c_int"),
                "",
            ),
            |call, pe| {
                format!("crate::rma::put_signal(\"{call}\", {dest}, {source}, nelems, sig_addr, signal, sig_op, {pe})")
            },
        );
    }
}

/// The RMA families, typed, sized and untyped, with their signalling puts.
fn rma_families(o: &mut Out) {
    o.header.push_str("\n/* Typed RMA. */\n");
    for Ty(c, n, r) in RMA {
        rma(o, c, r, &format!("{n}_"), "");
        if *n != "longdouble" {
            o.func_and_ctx(
                &Sig::new(
                    &format!("shmem_{n}_p"),
                    "void",
                    &format!("{c} *dest, {c} value, int pe"),
                    &format!("dest: *mut {r}, value: {r}, pe: libc::c_int"),
                    "",
                ),
                |call, pe| format!("crate::rma::p(\"{call}\", dest, value, {pe})"),
            );
            o.func_and_ctx(
                &Sig::new(
                    &format!("shmem_{n}_g"),
                    c,
                    &format!("const {c} *source, int pe"),
                    &format!("source: *const {r}, pe: libc::c_int"),
                    r,
                ),
                |call, pe| format!("crate::rma::g(\"{call}\", source, {pe})"),
            );
        }
    }
    longdouble_p_g(o);
    o.header.push_str("\n/* Sized and untyped RMA. */\n");
    for (bits, r) in SIZED {
        rma(o, "void", r, "", &bits.to_string());
    }
    rma(o, "void", "u8", "", "mem");

    o.header.push_str("\n/* Put with signal (1.5). */\n");
    for Ty(c, n, r) in RMA {
        put_signal(o, c, r, &format!("shmem_{n}_put"));
    }
    for (bits, r) in SIZED {
        put_signal(o, "void", r, &format!("shmem_put{bits}"));
    }
    put_signal(o, "void", "u8", "shmem_putmem");
}

/// One AMO of type `Word(c, n, r, w)`: `op` under the name `shmem_{n}_{prefix}{op}`; the
/// standard (`atomic_`) names have context forms, the deprecated ones do not.
fn amo(o: &mut Out, Word(c, n, r, w): &Word, op: &str, prefix: &str) {
    let name = format!("shmem_{n}_{prefix}{op}");
    let to = |v: &str| format!("crate::amo::to_word::<{r}, {w}>({v})");
    let from = |v: String| format!("crate::amo::from_word::<{r}, {w}>({v})");
    let pe_i = "pe: libc::c_int";
    // (C parameters, Rust parameters, returns a value, body given (call, pe)).
    type Body<'a> = Box<dyn Fn(&str, &str) -> String + 'a>;
    let (cp, rp, fetches, body): (String, String, bool, Body) = match op {
        "fetch" => (
            format!("const {c} *source, int pe"),
            format!("source: *const {r}, {pe_i}"),
            true,
            Box::new(move |call: &str, pe: &str| {
                from(format!(
                    "crate::amo::fetch::<{w}>(\"{call}\", source.cast(), {pe})"
                ))
            }),
        ),
        "set" => (
            format!("{c} *dest, {c} value, int pe"),
            format!("dest: *mut {r}, value: {r}, {pe_i}"),
            false,
            Box::new(move |call: &str, pe: &str| {
                format!(
                    "crate::amo::set::<{w}>(\"{call}\", dest.cast(), {}, {pe})",
                    to("value")
                )
            }),
        ),
        "compare_swap" | "cswap" => (
            format!("{c} *dest, {c} cond, {c} value, int pe"),
            format!("dest: *mut {r}, cond: {r}, value: {r}, {pe_i}"),
            true,
            Box::new(move |call: &str, pe: &str| {
                from(format!(
                    "crate::amo::compare_swap::<{w}>(\"{call}\", dest.cast(), {}, {}, {pe})",
                    to("cond"),
                    to("value")
                ))
            }),
        ),
        "fetch_inc" | "finc" | "inc" => (
            format!("{c} *dest, int pe"),
            format!("dest: *mut {r}, {pe_i}"),
            op != "inc",
            Box::new(move |call: &str, pe: &str| {
                from(format!(
                    "crate::amo::fetch_add::<{w}>(\"{call}\", dest.cast(), 1, {pe})"
                ))
            }),
        ),
        _ => {
            // swap, fetch_add/fadd/add and the bitwise ones: (dest, value).
            let what = match op {
                "swap" => "swap",
                "fetch_add" | "fadd" | "add" => "fetch_add",
                "fetch_and" | "and" => "fetch_and",
                "fetch_or" | "or" => "fetch_or",
                "fetch_xor" | "xor" => "fetch_xor",
                other => panic!("unknown AMO {other}"),
            };
            let fetches = matches!(op, "swap" | "fetch_add" | "fadd") || op.starts_with("fetch_");
            (
                format!("{c} *dest, {c} value, int pe"),
                format!("dest: *mut {r}, value: {r}, {pe_i}"),
                fetches,
                Box::new(move |call: &str, pe: &str| {
                    from(format!(
                        "crate::amo::{what}::<{w}>(\"{call}\", dest.cast(), {}, {pe})",
                        to("value")
                    ))
                }),
            )
        }
    };
    let (c_ret, r_ret) = if fetches { (*c, *r) } else { ("void", "") };
    let wrap = |b: String| if fetches { b } else { format!("{b};") };
    let sig = Sig::new(&name, c_ret, &cp, &rp, r_ret);
    if prefix.is_empty() {
        o.func(&sig, &wrap(body(&name, "pe")));
        return;
    }
    o.func_and_ctx(&sig, |call, pe| wrap(body(call, pe)));
    if fetches {
        // The nonblocking form: the fetched value goes to `*fetch` (complete at return,
        // which the specification allows).
        let nbi = Sig::new(
            &format!("{name}_nbi"),
            "void",
            &format!("{c} *fetch, {cp}"),
            &format!("fetch: *mut {r}, {rp}"),
            "",
        );
        o.func_and_ctx(&nbi, |call, pe| {
            format!("crate::amo::deliver(\"{call}\", fetch, {})", body(call, pe))
        });
    }
}

fn amo_families(o: &mut Out) {
    o.header.push_str("\n/* Atomic memory operations. */\n");
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
    let bitwise = ["fetch_and", "and", "fetch_or", "or", "fetch_xor", "xor"];
    for t in AMO {
        for op in standard {
            amo(o, t, op, "atomic_");
        }
        if AMO_BITWISE.contains(&t.1) {
            for op in bitwise {
                amo(o, t, op, "atomic_");
            }
        }
    }
    for t in AMO_FLOAT {
        for op in ["fetch", "set", "swap"] {
            amo(o, t, op, "atomic_");
        }
    }
    o.header
        .push_str("\n/* Atomic memory operations under their deprecated (1.3) names. */\n");
    for t in AMO
        .iter()
        .filter(|t| ["int", "long", "longlong"].contains(&t.1))
    {
        for op in [
            "fetch", "set", "cswap", "swap", "finc", "inc", "fadd", "add",
        ] {
            amo(o, t, op, "");
        }
    }
    for t in AMO_FLOAT {
        for op in ["fetch", "set", "swap"] {
            amo(o, t, op, "");
        }
    }
}

/// Waits and tests on one variable and on many (1.5's `_all`, `_any`, `_some` and their
/// `_vector` forms).
fn p2p_families(o: &mut Out) {
    o.header
        .push_str("\n/* Point-to-point synchronisation. */\n");
    for Word(c, n, r, w) in P2P {
        let one = |f: &str| format!("shmem_{n}_{f}");
        o.func(
            &Sig::new(
                &one("wait_until"),
                "void",
                &format!("{c} *ivar, int cmp, {c} cmp_value"),
                &format!("ivar: *mut {r}, cmp: libc::c_int, cmp_value: {r}"),
                "",
            ),
            &format!(
                "crate::p2p::wait_until::<{w}>(\"{}\", ivar.cast(), cmp, cmp_value as {w});",
                one("wait_until")
            ),
        );
        o.func(
            &Sig::new(
                &one("test"),
                "int",
                &format!("{c} *ivar, int cmp, {c} cmp_value"),
                &format!("ivar: *mut {r}, cmp: libc::c_int, cmp_value: {r}"),
                "libc::c_int",
            ),
            &format!(
                "crate::p2p::test::<{w}>(\"{}\", ivar.cast(), cmp, cmp_value as {w})",
                one("test")
            ),
        );
        o.func(
            &Sig::new(
                &one("wait"),
                "void",
                &format!("{c} *ivar, {c} cmp_value"),
                &format!("ivar: *mut {r}, cmp_value: {r}"),
                "",
            ),
            &format!(
                "crate::p2p::wait_until::<{w}>(\"{}\", ivar.cast(), crate::p2p::CMP_NE, cmp_value as {w});",
                one("wait")
            ),
        );
        // Many variables: (form, C return, Rust return, whether it waits).
        for (verb, waits) in [("wait_until", true), ("test", false)] {
            for (form, c_ret, r_ret) in [
                (
                    "all",
                    if waits { "void" } else { "int" },
                    if waits { "" } else { "libc::c_int" },
                ),
                ("any", "size_t", "usize"),
                ("some", "size_t", "usize"),
            ] {
                for vector in [false, true] {
                    let name = format!(
                        "shmem_{n}_{verb}_{form}{}",
                        if vector { "_vector" } else { "" }
                    );
                    let (indices_c, indices_r, indices) = if form == "some" {
                        ("size_t *indices, ", "indices: *mut usize, ", "indices")
                    } else {
                        ("", "", "std::ptr::null_mut()")
                    };
                    let (value_c, value_r, values) = if vector {
                        (
                            format!("{c} *cmp_values"),
                            format!("cmp_values: *mut {r}"),
                            format!(
                                "crate::p2p::Values::<{w}>::Each(cmp_values.cast_const().cast())"
                            ),
                        )
                    } else {
                        (
                            format!("{c} cmp_value"),
                            format!("cmp_value: {r}"),
                            format!("crate::p2p::Values::<{w}>::One(cmp_value as {w})"),
                        )
                    };
                    let many = format!(
                        "crate::p2p::many::<{w}>(\"{name}\", crate::p2p::Form::{}, {waits}, ivars.cast(), nelems, {indices}, status, cmp, {values})",
                        match form {
                            "all" => "All",
                            "any" => "Any",
                            _ => "Some",
                        }
                    );
                    let body = match (form, waits) {
                        ("all", true) => format!("{many};"),
                        ("all", false) => format!("({many} == 1) as libc::c_int"),
                        _ => many,
                    };
                    o.func(
                        &Sig::new(
                            &name,
                            c_ret,
                            &format!("{c} *ivars, size_t nelems, {indices_c}const int *status, int cmp, {value_c}"),
                            &format!("ivars: *mut {r}, nelems: usize, {indices_r}status: *const libc::c_int, cmp: libc::c_int, {value_r}"),
                            r_ret,
                        ),
                        &body,
                    );
                }
            }
        }
    }
    let _ = writeln!(o.header);
}

/// Every point-to-point family.
pub(crate) fn generate(o: &mut Out) {
    rma_families(o);
    amo_families(o);
    p2p_families(o);
}
