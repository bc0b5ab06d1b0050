//! Generates, from one table of the OpenSHMEM 1.5 specification's types, both sides of
//! every typed family: the exported Rust functions (`typed.rs`) and their C prototypes in
//! `shmem.h`, with the context (`shmem_ctx_*`) form of every routine that has one and the
//! C11 generic selections over the same tables. The untyped routines are written by hand
//! in the crate; their prototypes are listed here beside the typed ones, so the header has
//! one source. `symbols.txt` lists every function the header declares (a test checks that
//! the library exports each).
//!
//! Modules: `tables` (the specification's types), `header` (the fixed text and the
//! hand-written routines' prototypes), `families` (RMA, AMOs, signals, waits),
//! `collectives` (active-set and team collectives), `generic` (C11 `_Generic`),
//! `typed_test` (a C test of every family), `team_test` (a C test of every team
//! collective).
//!
//! It also compiles `src/longdouble.c`: reductions on `long double`, which Rust lacks.

use std::fmt::Write as _;

mod collectives;
mod families;
mod generic;
mod header;
mod tables;
mod team_test;
mod typed_test;

/// The generated text: Rust functions, the header, and the names the header declares.
pub(crate) struct Out {
    rust: String,
    pub(crate) header: String,
    symbols: Vec<String>,
    /// The profiling interface (1.5 §10): `pshmem.h`'s prototypes and the standard
    /// `shmem_` names, each a jump to its routine (exported under its `pshmem_` name).
    pheader: String,
    prust: String,
}

/// One exported routine's signature: its name, C return type and parameters, and the Rust
/// forms of both (`rust_ret` is empty or ` -> T`).
pub(crate) struct Sig {
    pub(crate) name: String,
    pub(crate) c_ret: String,
    pub(crate) c_params: String,
    pub(crate) rust_params: String,
    pub(crate) rust_ret: String,
}

impl Sig {
    /// A signature from its parts.
    pub(crate) fn new(
        name: &str,
        c_ret: &str,
        c_params: &str,
        rust_params: &str,
        rust_ret: &str,
    ) -> Sig {
        Sig {
            name: name.to_string(),
            c_ret: c_ret.to_string(),
            c_params: c_params.to_string(),
            rust_params: rust_params.to_string(),
            rust_ret: if rust_ret.is_empty() {
                String::new()
            } else {
                format!(" -> {rust_ret}")
            },
        }
    }

    /// The context form: `shmem_ctx_NAME(shmem_ctx_t ctx, ...)`.
    fn with_ctx(&self) -> Sig {
        Sig {
            name: self.name.replacen("shmem_", "shmem_ctx_", 1),
            c_ret: self.c_ret.clone(),
            c_params: format!("shmem_ctx_t ctx, {}", self.c_params),
            rust_params: format!("ctx: crate::ctx::Handle, {}", self.rust_params),
            rust_ret: self.rust_ret.clone(),
        }
    }
}

/// The pointer operands of a routine on elements `c` (C) / `r` (Rust): the parameter
/// types in C and Rust, and the Rust expressions of `dest` and `source` as typed pointers
/// (the untyped, `void *` routines cast theirs to the element type `r` moves).
pub(crate) struct Operands {
    pub(crate) c: String,
    pub(crate) rust: String,
    pub(crate) dest: String,
    pub(crate) source: String,
}

impl Operands {
    pub(crate) fn of(c: &str, r: &str) -> Operands {
        if c == "void" {
            Operands {
                c: "void".into(),
                rust: "libc::c_void".into(),
                dest: format!("dest as *mut {r}"),
                source: format!("source as *const {r}"),
            }
        } else {
            Operands {
                c: c.into(),
                rust: r.into(),
                dest: "dest".into(),
                source: "source".into(),
            }
        }
    }
}

impl Out {
    /// One routine: its prototype in the header and its Rust function with `body`.
    pub(crate) fn func(&mut self, sig: &Sig, body: &str) {
        let Sig {
            name,
            c_ret,
            c_params,
            rust_params,
            rust_ret,
        } = sig;
        let _ = writeln!(self.header, "{c_ret} {name}({c_params});");
        let _ = write!(
            self.rust,
            "/// `{name}` (OpenSHMEM 1.5).\n///\n/// # Safety\n/// Pointers must be as the specification requires: symmetric where it says so, and valid for the elements named.\n#[export_name = \"p{name}\"]\npub unsafe extern \"C\" fn {name}({rust_params}){rust_ret} {{\n    // SAFETY: the caller passes pointers as the specification requires.\n    unsafe {{ {body} }}\n}}\n\n"
        );
        self.profiled(&format!("{c_ret} p{name}({c_params})"), name);
        self.symbols.push(name.clone());
    }

    /// The two names of routine `target` (OpenSHMEM 1.5 §10): the routine itself is
    /// exported as `p{target}` (the profiling name, which no tool overrides), and the
    /// standard name `{target}` is a jump to it, which a tool may replace with a wrapper
    /// of its own that calls the profiling name. A jump, not a call: the arguments, the
    /// stack and the return (`long double` in st(0) included) are the routine's own,
    /// whatever its signature. `proto` is the routine's prototype under its profiling
    /// name, for `pshmem.h`.
    fn profiled(&mut self, proto: &str, target: &str) {
        let _ = writeln!(self.pheader, "{proto};");
        let _ = write!(
            self.prust,
            "/// `{target}`: the standard name, a jump to the routine (exported as `p{target}`).\n///\n/// # Safety\n/// As for the routine.\n#[cfg(target_arch = \"x86_64\")]\n#[unsafe(naked)]\n#[export_name = \"{target}\"]\npub unsafe extern \"C\" fn standard_{target}() {{\n    // SAFETY: a jump with every register and the stack as the caller left them.\n    core::arch::naked_asm!(\"jmp {{f}}\", f = sym {target})\n}}\n\n"
        );
        self.symbols.push(format!("p{target}"));
    }

    /// A routine and its context form. `body(call, pe)` is the body given the routine's
    /// name and the expression of the target PE in the world team: `pe` itself for the
    /// plain form, the context's translation of it (its team's numbering) for the other.
    pub(crate) fn func_and_ctx(&mut self, sig: &Sig, body: impl Fn(&str, &str) -> String) {
        self.func(sig, &body(&sig.name, "pe"));
        let ctx = sig.with_ctx();
        let pe = format!("crate::ctx::world_pe(\"{}\", ctx, pe)", ctx.name);
        self.func(&ctx, &body(&ctx.name, &pe));
    }

    /// A prototype whose function is written by hand (in Rust or assembly), and its
    /// profiling name.
    pub(crate) fn declared(&mut self, proto: &str) {
        let _ = writeln!(self.header, "{proto};");
        let name = proto
            .split('(')
            .next()
            .and_then(|s| s.split_whitespace().last())
            .map(|s| s.trim_start_matches('*'))
            .expect("a prototype names its function");
        let profiling = proto.replacen(&format!("{name}("), &format!("p{name}("), 1);
        self.profiled(&profiling, name);
        self.symbols.push(name.to_string());
    }
}

fn main() {
    println!("cargo:rerun-if-changed=build");
    // Calls inside libsma.so bind to its own definitions (a standard name's jump reaches
    // the library's routine directly, not through the symbol table a tool may shadow).
    println!("cargo:rustc-cdylib-link-arg=-Wl,-Bsymbolic-functions");
    println!("cargo:rerun-if-changed=src/longdouble.c");
    cc::Build::new()
        .file("src/longdouble.c")
        .opt_level(2)
        .compile("tessera_longdouble");

    let mut o = Out {
        rust: String::new(),
        header: String::from(header::HEADER_TOP),
        symbols: Vec::new(),
        pheader: String::from(header::PHEADER_TOP),
        prust: String::new(),
    };
    o.header.push_str(
        "/* Setup, memory, teams, contexts, ordering, locks, signals, collectives, cache. */\n",
    );
    for proto in header::UNTYPED {
        o.declared(proto);
    }
    families::generate(&mut o);
    collectives::generate(&mut o);
    o.header.push_str(header::HEADER_FUNCTIONS_END);
    generic::generate(&mut o);
    o.header.push_str(header::HEADER_BOTTOM);

    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    std::fs::write(out.join("typed_test.c"), typed_test::typed_test())
        .expect("writing typed_test.c");
    std::fs::write(out.join("team_test.c"), team_test::team_test()).expect("writing team_test.c");
    std::fs::write(out.join("typed.rs"), o.rust).expect("writing typed.rs");
    std::fs::write(out.join("profiling.rs"), o.prust).expect("writing profiling.rs");
    o.pheader.push_str(header::PHEADER_BOTTOM);
    std::fs::write(out.join("pshmem.h"), o.pheader).expect("writing pshmem.h");
    std::fs::write(out.join("shmem.h"), o.header).expect("writing shmem.h");
    std::fs::write(out.join("symbols.txt"), o.symbols.join("\n") + "\n")
        .expect("writing symbols.txt");
}
