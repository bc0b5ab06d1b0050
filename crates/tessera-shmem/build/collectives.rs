//! The typed collectives: reductions over active sets (1.4's `_to_all`), and 1.5's team
//! collectives (broadcast, collect, fcollect, alltoall, alltoalls, their `mem` forms, and
//! the reductions).

use crate::tables::*;
use crate::{Operands, Out, Sig};

/// The data-movement collectives of one element type: `name(op)` is the routine's name,
/// `c`/`r` the element type in C and Rust.
fn movement(o: &mut Out, c: &str, r: &str, name: impl Fn(&str) -> String) {
    let Operands {
        c: cp,
        rust: rp,
        dest,
        source,
    } = Operands::of(c, r);
    let team_c = "shmem_team_t team";
    let team_r = "team: crate::teams::Handle";
    let f = name("broadcast");
    o.func(
        &Sig::new(
            &f,
            "int",
            &format!("{team_c}, {cp} *dest, const {cp} *source, size_t nelems, int PE_root"),
            &format!("{team_r}, dest: *mut {rp}, source: *const {rp}, nelems: usize, pe_root: libc::c_int"),
            "libc::c_int",
        ),
        &format!("crate::coll::on_team(\"{f}\", team, |s, t| crate::coll::broadcast(\"{f}\", s.sym, t, {dest}, {source}, nelems, pe_root, true)); 0"),
    );
    for op in ["collect", "fcollect", "alltoall"] {
        let f = name(op);
        // The all-to-all puts into the symmetric destinations, so it takes their places.
        let (state, sym) = if op == "alltoall" {
            ("s", "s.sym, ")
        } else {
            ("_", "")
        };
        o.func(
            &Sig::new(
                &f,
                "int",
                &format!("{team_c}, {cp} *dest, const {cp} *source, size_t nelems"),
                &format!("{team_r}, dest: *mut {rp}, source: *const {rp}, nelems: usize"),
                "libc::c_int",
            ),
            &format!("crate::coll::on_team(\"{f}\", team, |{state}, t| crate::coll::{op}(\"{f}\", {sym}t, {dest}, {source}, nelems)); 0"),
        );
    }
    let f = name("alltoalls");
    o.func(
        &Sig::new(
            &f,
            "int",
            &format!("{team_c}, {cp} *dest, const {cp} *source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems"),
            &format!("{team_r}, dest: *mut {rp}, source: *const {rp}, dst: isize, sst: isize, nelems: usize"),
            "libc::c_int",
        ),
        &format!("crate::coll::on_team(\"{f}\", team, |_, t| crate::coll::alltoalls(\"{f}\", t, {dest}, {source}, dst, sst, nelems)); 0"),
    );
}

/// Every typed collective.
pub(crate) fn generate(o: &mut Out) {
    o.header
        .push_str("\n/* Reductions over active sets (1.4). */\n");
    for (c, n, r, letters) in REDUCE {
        for (op, variant) in reduce_ops(letters) {
            let f = format!("shmem_{n}_{op}_to_all");
            o.func(
                &Sig::new(
                    &f,
                    "void",
                    &format!("{c} *dest, const {c} *source, int nreduce, int PE_start, int logPE_stride, int PE_size, {c} *pWrk, long *pSync"),
                    &format!("dest: *mut {r}, source: *const {r}, nreduce: libc::c_int, pe_start: libc::c_int, log_stride: libc::c_int, pe_size: libc::c_int, _pwrk: *mut {r}, _psync: *mut libc::c_long"),
                    "",
                ),
                &format!("crate::coll::to_all::<{r}>(\"{f}\", crate::coll::ReduceOp::{variant}, dest, source, nreduce, pe_start, log_stride, pe_size)"),
            );
        }
    }

    o.header.push_str("\n/* Team collectives (1.5). */\n");
    for Ty(c, n, r) in RMA {
        movement(o, c, r, |op| format!("shmem_{n}_{op}"));
    }
    movement(o, "void", "u8", |op| format!("shmem_{op}mem"));
    for (c, n, r, letters) in REDUCE_TEAM {
        for (op, variant) in reduce_ops(letters) {
            let f = format!("shmem_{n}_{op}_reduce");
            o.func(
                &Sig::new(
                    &f,
                    "int",
                    &format!("shmem_team_t team, {c} *dest, const {c} *source, size_t nreduce"),
                    &format!("team: crate::teams::Handle, dest: *mut {r}, source: *const {r}, nreduce: usize"),
                    "libc::c_int",
                ),
                &format!("crate::coll::on_team(\"{f}\", team, |_, t| crate::coll::reduce::<{r}>(\"{f}\", crate::coll::ReduceOp::{variant}, t, dest, source, nreduce)); 0"),
            );
        }
    }
    // OpenSHMEM 1.6's prefix sums, on every type the sum reduction takes.
    o.header.push_str("\n/* Team scans (1.6). */\n");
    for (c, n, r, letters) in REDUCE_TEAM {
        if !reduce_ops(letters).iter().any(|(op, _)| *op == "sum") {
            continue;
        }
        for (kind, exclusive) in [("inscan", false), ("exscan", true)] {
            let f = format!("shmem_{n}_sum_{kind}");
            o.func(
                &Sig::new(
                    &f,
                    "int",
                    &format!("shmem_team_t team, {c} *dest, const {c} *source, size_t nelems"),
                    &format!("team: crate::teams::Handle, dest: *mut {r}, source: *const {r}, nelems: usize"),
                    "libc::c_int",
                ),
                &format!("crate::coll::on_team(\"{f}\", team, |_, t| crate::coll::sum_scan::<{r}>(\"{f}\", {exclusive}, t, dest, source, nelems)); 0"),
            );
        }
    }
}
