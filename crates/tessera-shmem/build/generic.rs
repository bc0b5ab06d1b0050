//! The C11 type-generic interface (`shmem_put(dest, source, n, pe)`, with or without a
//! leading context, `shmem_atomic_fetch_add`, `shmem_sum_reduce(team, ...)`, ...) as
//! `_Generic` selections, and the same names as C++ overloads, both from the type tables.
//!
//! A selection can list each type once, and the fixed-width types are typedefs of the
//! basic ones (on the LP64 targets this library is built for), so every table is first
//! reduced to its basic C types, each mapped to the first TYPENAME that names it.

use std::fmt::Write as _;

use crate::tables::*;
use crate::Out;

/// The basic C type a specification type names on LP64 targets.
fn basic(c: &str) -> &str {
    match c {
        "int8_t" => "signed char",
        "int16_t" => "short",
        "int32_t" => "int",
        "int64_t" | "ptrdiff_t" => "long",
        "uint8_t" => "unsigned char",
        "uint16_t" => "unsigned short",
        "uint32_t" => "unsigned int",
        "uint64_t" | "size_t" => "unsigned long",
        other => other,
    }
}

/// (basic C type, TYPENAME) for each distinct type of a table, in table order.
fn distinct<'a>(types: impl IntoIterator<Item = (&'a str, &'a str)>) -> Vec<(&'a str, &'a str)> {
    let mut out: Vec<(&str, &str)> = Vec::new();
    for (c, n) in types {
        let b = basic(c);
        if !out.iter().any(|&(seen, _)| seen == b) {
            out.push((b, n));
        }
    }
    out
}

/// One generic routine: its name, the typed routines' suffix (`shmem_{TYPENAME}_{suffix}`),
/// the types it selects among, its parameters (`T` standing for the element type; the
/// first `T *` or `const T *` is the one the selection dispatches on), its return type,
/// and whether it has a context form.
struct Generic<'a> {
    name: String,
    suffix: String,
    types: Vec<(&'a str, &'a str)>,
    params: Vec<String>,
    ret: String,
    ctx: bool,
}

impl<'a> Generic<'a> {
    fn new(
        suffix: &str,
        types: &[(&'a str, &'a str)],
        params: &[&str],
        ret: &str,
        ctx: bool,
    ) -> Generic<'a> {
        Generic {
            name: format!("shmem_{suffix}"),
            suffix: suffix.to_string(),
            types: types.to_vec(),
            params: params.iter().map(|p| p.to_string()).collect(),
            ret: ret.to_string(),
            ctx,
        }
    }

    /// The typed routine for TYPENAME `n` (its context form if `ctx`).
    fn typed(&self, n: &str, ctx: bool) -> String {
        let ctx = if ctx { "ctx_" } else { "" };
        format!("shmem_{ctx}{n}_{}", self.suffix)
    }
}

/// The C11 selection over `g`'s types, for calls with and (if it has one) without a
/// leading context.
fn c11(h: &mut String, g: &Generic) {
    let dispatch = g
        .params
        .iter()
        .position(|p| p.contains("T *"))
        .expect("a generic routine has a typed pointer");
    let konst = g.params[dispatch].starts_with("const");
    let list = |ctx: bool| {
        let mut s = String::new();
        for (c, n) in &g.types {
            let f = g.typed(n, ctx);
            let _ = write!(s, " {c} *: {f},");
            if konst {
                let _ = write!(s, " const {c} *: {f},");
            }
        }
        s.push_str(" default: tessera_shmem_generic_mismatch");
        s
    };
    // Argument `i` of the call, whatever follows it (padded so that every use has one
    // argument more than it names, as C99's variadic macros require).
    let arg = |i: usize| format!("TESSERA_ARG{i}(__VA_ARGS__, 0, 0, 0)");
    if g.ctx {
        let _ = writeln!(
            h,
            "#define {}(...) _Generic({}, shmem_ctx_t: _Generic({},{}), default: _Generic({},{}))(__VA_ARGS__)",
            g.name,
            arg(0),
            arg(dispatch + 1),
            list(true),
            arg(dispatch),
            list(false),
        );
    } else {
        let _ = writeln!(
            h,
            "#define {}(...) _Generic({},{})(__VA_ARGS__)",
            g.name,
            arg(dispatch),
            list(false)
        );
    }
}

/// The C++ overloads of `g` (inline functions calling the typed routines).
fn cxx(h: &mut String, g: &Generic) {
    for ctx in [false, true] {
        if ctx && !g.ctx {
            continue;
        }
        for (c, n) in &g.types {
            let f = g.typed(n, ctx);
            let mut params: Vec<String> = Vec::new();
            let mut args: Vec<String> = Vec::new();
            if ctx {
                params.push("shmem_ctx_t ctx".into());
                args.push("ctx".into());
            }
            for p in &g.params {
                let p = p.replace('T', c);
                let name = p.rsplit([' ', '*']).next().expect("a parameter has a name");
                args.push(name.to_string());
                params.push(p);
            }
            let ret = g.ret.replace('T', c);
            let body = if ret == "void" { "" } else { "return " };
            let _ = writeln!(
                h,
                "static inline {ret} {}({}) {{ {body}{f}({}); }}",
                g.name,
                params.join(", "),
                args.join(", ")
            );
        }
    }
}

/// An AMO family: suffix, types, parameters, and whether it fetches.
type Amo<'a> = (&'a str, &'a [(&'a str, &'a str)], &'a [&'a str], bool);

/// Every generic routine of the specification's C11 interface.
pub(crate) fn generate(o: &mut Out) {
    let rma = distinct(RMA.iter().map(|t| (t.0, t.1)));
    let amo = distinct(AMO.iter().map(|t| (t.0, t.1)));
    let amo_ext = distinct(AMO.iter().chain(AMO_FLOAT).map(|t| (t.0, t.1)));
    let amo_bit = distinct(
        AMO.iter()
            .filter(|t| AMO_BITWISE.contains(&t.1))
            .map(|t| (t.0, t.1)),
    );
    let p2p = distinct(P2P.iter().map(|t| (t.0, t.1)));
    let mut all: Vec<Generic> = Vec::new();

    let contiguous = ["T *dest", "const T *source", "size_t nelems", "int pe"];
    let strided = [
        "T *dest",
        "const T *source",
        "ptrdiff_t dst",
        "ptrdiff_t sst",
        "size_t nelems",
        "int pe",
    ];
    let blocked = [
        "T *dest",
        "const T *source",
        "ptrdiff_t dst",
        "ptrdiff_t sst",
        "size_t bsize",
        "size_t nblocks",
        "int pe",
    ];
    let signal = [
        "T *dest",
        "const T *source",
        "size_t nelems",
        "uint64_t *sig_addr",
        "uint64_t signal",
        "int sig_op",
        "int pe",
    ];
    for (suffix, params) in [
        ("put", &contiguous[..]),
        ("get", &contiguous),
        ("put_nbi", &contiguous),
        ("get_nbi", &contiguous),
        ("iput", &strided),
        ("iget", &strided),
        ("ibput", &blocked),
        ("ibget", &blocked),
        ("put_signal", &signal),
        ("put_signal_nbi", &signal),
    ] {
        all.push(Generic::new(suffix, &rma, params, "void", true));
    }
    all.push(Generic::new(
        "p",
        &rma,
        &["T *dest", "T value", "int pe"],
        "void",
        true,
    ));
    all.push(Generic::new(
        "g",
        &rma,
        &["const T *source", "int pe"],
        "T",
        true,
    ));

    // AMOs: (suffix, types, parameters, whether it fetches).
    let value = ["T *dest", "T value", "int pe"];
    let amos: [Amo; 14] = [
        (
            "atomic_fetch",
            &amo_ext,
            &["const T *source", "int pe"],
            true,
        ),
        ("atomic_set", &amo_ext, &value, false),
        ("atomic_swap", &amo_ext, &value, true),
        (
            "atomic_compare_swap",
            &amo,
            &["T *dest", "T cond", "T value", "int pe"],
            true,
        ),
        ("atomic_fetch_inc", &amo, &["T *dest", "int pe"], true),
        ("atomic_inc", &amo, &["T *dest", "int pe"], false),
        ("atomic_fetch_add", &amo, &value, true),
        ("atomic_add", &amo, &value, false),
        ("atomic_fetch_and", &amo_bit, &value, true),
        ("atomic_and", &amo_bit, &value, false),
        ("atomic_fetch_or", &amo_bit, &value, true),
        ("atomic_or", &amo_bit, &value, false),
        ("atomic_fetch_xor", &amo_bit, &value, true),
        ("atomic_xor", &amo_bit, &value, false),
    ];
    for (suffix, types, params, fetches) in amos {
        all.push(Generic::new(
            suffix,
            types,
            params,
            if fetches { "T" } else { "void" },
            true,
        ));
        if fetches {
            let mut nbi = vec!["T *fetch"];
            nbi.extend_from_slice(params);
            all.push(Generic::new(
                &format!("{suffix}_nbi"),
                types,
                &nbi,
                "void",
                true,
            ));
        }
    }

    // Collectives on teams.
    let team_move = [
        "shmem_team_t team",
        "T *dest",
        "const T *source",
        "size_t nelems",
    ];
    all.push(Generic::new(
        "broadcast",
        &rma,
        &[
            "shmem_team_t team",
            "T *dest",
            "const T *source",
            "size_t nelems",
            "int PE_root",
        ],
        "int",
        false,
    ));
    for suffix in ["collect", "fcollect", "alltoall"] {
        all.push(Generic::new(suffix, &rma, &team_move, "int", false));
    }
    all.push(Generic::new(
        "alltoalls",
        &rma,
        &[
            "shmem_team_t team",
            "T *dest",
            "const T *source",
            "ptrdiff_t dst",
            "ptrdiff_t sst",
            "size_t nelems",
        ],
        "int",
        false,
    ));
    for op in ["and", "or", "xor", "max", "min", "sum", "prod"] {
        let types = distinct(
            REDUCE_TEAM
                .iter()
                .filter(|(_, _, _, letters)| reduce_ops(letters).iter().any(|(o, _)| *o == op))
                .map(|(c, n, _, _)| (*c, *n)),
        );
        all.push(Generic::new(
            &format!("{op}_reduce"),
            &types,
            &[
                "shmem_team_t team",
                "T *dest",
                "const T *source",
                "size_t nreduce",
            ],
            "int",
            false,
        ));
    }

    // The deprecated (1.3) generic AMO names, over the deprecated typed routines: the
    // standard AMO types for the arithmetic ones, and float and double beside them for
    // fetch, set and swap (1.5 §9.7, "Deprecated API").
    let old_amo = distinct(
        AMO.iter()
            .filter(|t| ["int", "long", "longlong"].contains(&t.1))
            .map(|t| (t.0, t.1)),
    );
    let old_amo_ext = distinct(
        AMO.iter()
            .filter(|t| ["int", "long", "longlong"].contains(&t.1))
            .chain(AMO_FLOAT)
            .map(|t| (t.0, t.1)),
    );
    let deprecated: [Amo; 8] = [
        ("fetch", &old_amo_ext, &["const T *source", "int pe"], true),
        ("set", &old_amo_ext, &value, false),
        ("swap", &old_amo_ext, &value, true),
        (
            "cswap",
            &old_amo,
            &["T *dest", "T cond", "T value", "int pe"],
            true,
        ),
        ("finc", &old_amo, &["T *dest", "int pe"], true),
        ("inc", &old_amo, &["T *dest", "int pe"], false),
        ("fadd", &old_amo, &value, true),
        ("add", &old_amo, &value, false),
    ];
    for (suffix, types, params, fetches) in deprecated {
        all.push(Generic::new(
            suffix,
            types,
            params,
            if fetches { "T" } else { "void" },
            false,
        ));
    }

    // OpenSHMEM 1.6's prefix sums.
    let sum_types = distinct(
        REDUCE_TEAM
            .iter()
            .filter(|(_, _, _, letters)| reduce_ops(letters).iter().any(|(o, _)| *o == "sum"))
            .map(|(c, n, _, _)| (*c, *n)),
    );
    for kind in ["inscan", "exscan"] {
        all.push(Generic::new(
            &format!("sum_{kind}"),
            &sum_types,
            &[
                "shmem_team_t team",
                "T *dest",
                "const T *source",
                "size_t nelems",
            ],
            "int",
            false,
        ));
    }

    // Waits and tests.
    all.push(Generic::new(
        "wait_until",
        &p2p,
        &["T *ivar", "int cmp", "T cmp_value"],
        "void",
        false,
    ));
    all.push(Generic::new(
        "test",
        &p2p,
        &["T *ivar", "int cmp", "T cmp_value"],
        "int",
        false,
    ));
    for (verb, waits) in [("wait_until", true), ("test", false)] {
        for form in ["all", "any", "some"] {
            for vector in [false, true] {
                let mut params = vec!["T *ivars", "size_t nelems"];
                if form == "some" {
                    params.push("size_t *indices");
                }
                params.extend(["const int *status", "int cmp"]);
                params.push(if vector {
                    "T *cmp_values"
                } else {
                    "T cmp_value"
                });
                let ret = match (form, waits) {
                    ("all", true) => "void",
                    ("all", false) => "int",
                    _ => "size_t",
                };
                let v = if vector { "_vector" } else { "" };
                all.push(Generic::new(
                    &format!("{verb}_{form}{v}"),
                    &p2p,
                    &params,
                    ret,
                    false,
                ));
            }
        }
    }

    let h = &mut o.header;
    h.push_str(
        "\n/* The C11 type-generic interface: each name selects the typed routine by the type of\n * its data pointer, and the context form when the first argument is a shmem_ctx_t. */\n\
         #if !defined(__cplusplus) && defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L\n\
         #define TESSERA_ARG0(a, ...) a\n\
         #define TESSERA_ARG1(a, b, ...) b\n\
         #define TESSERA_ARG2(a, b, c, ...) c\n\
         /* Selected only when no type matches: a call through it fails to compile. */\n\
         extern struct tessera_shmem_no_such_typed_routine tessera_shmem_generic_mismatch;\n",
    );
    for g in &all {
        c11(h, g);
    }
    h.push_str("#endif /* C11 */\n\n");
    // shmem_sync: the 1.5 team form (one argument) and the active-set form (four) under
    // one name, chosen by the number of arguments.
    h.push_str(
        "/* shmem_sync(team) (1.5) and shmem_sync(PE_start, logPE_stride, PE_size, pSync) (1.4),\n * chosen by the number of arguments. */\n\
         #ifndef __cplusplus\n\
         #define TESSERA_SYNC_FORM(a, b, c, d, form, ...) form\n\
         #define shmem_sync(...) TESSERA_SYNC_FORM(__VA_ARGS__, shmem_sync, shmem_sync, shmem_sync, shmem_team_sync, 0)(__VA_ARGS__)\n\
         #endif\n\n",
    );
    h.push_str("/* The same names as C++ overloads. */\n#ifdef __cplusplus\n");
    h.push_str(
        "static inline int shmem_sync(shmem_team_t team) { return shmem_team_sync(team); }\n",
    );
    for g in &mut all {
        // The deprecated `shmem_wait_until` and `shmem_swap` on long are C functions
        // already.
        if g.name == "shmem_wait_until" || g.name == "shmem_swap" {
            g.types.retain(|(c, _)| *c != "long");
        }
        cxx(h, g);
    }
    h.push_str("#endif /* __cplusplus */\n");
}
