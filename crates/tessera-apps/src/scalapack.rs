//! The baseline: ScaLAPACK's `PDGEMM`, `PDPOTRF` and `PDGETRF` on the same problem, in
//! the same job, after Tessera's run (`tessera app ... --conduit mpi --baseline
//! scalapack`).
//!
//! ScaLAPACK (Debian's `libscalapack-openmpi`, over the same OpenBLAS) runs on MPI, so the
//! baseline needs the ranks to be MPI processes: the mpi conduit, which has initialised
//! MPI already. Its matrices get the same entries, block size and `p × q` grid (BLACS
//! row-major, like [`Grid`](crate::common::Grid)). Behind the `scalapack` feature; without
//! it [`available`] says how to get it.
//!
//! This module only binds and calls the library (its `unsafe` is the FFI, each call with
//! its arguments checked); it never touches Tessera's own matrices.

use tessera::ConduitKind;

use crate::AppError;

/// Whether a ScaLAPACK baseline can run on `conduit` in this build, or why not.
pub fn available(conduit: ConduitKind) -> Result<(), AppError> {
    if !cfg!(feature = "scalapack") {
        return Err(AppError::Unavailable(
            "this tessera was built without ScaLAPACK; install it (apt-get install \
                    libscalapack-openmpi-dev) and build with --features tessera-cli/scalapack"
                .into(),
        ));
    }
    #[cfg(feature = "scalapack")]
    if conduit != ConduitKind::MPI {
        return Err(AppError::Unavailable(
            "ScaLAPACK runs over MPI: add --conduit mpi to run the baseline".into(),
        ));
    }
    let _ = conduit;
    Ok(())
}

#[cfg(not(feature = "scalapack"))]
/// Run the baseline (unavailable in this build: an error saying how to get it).
pub fn run(
    _ctx: &tessera::Context,
    _problem: &crate::Problem,
) -> tessera::Result<crate::report::Baseline> {
    Err(crate::invalid(
        available(ConduitKind::SMP).unwrap_err().to_string(),
    ))
}

#[cfg(feature = "scalapack")]
pub use bound::run;

#[cfg(feature = "scalapack")]
mod bound {
    use std::os::raw::{c_char, c_int};
    use std::time::Instant;
    use tessera::coll::{Allreduce, Barrier};
    use tessera::Blocking;

    use tessera::{Context, Team};

    use crate::report::Baseline;
    use crate::{cholesky, common, lu, summa, App, MatrixKind, Problem};

    extern "C" {
        fn Cblacs_get(context: c_int, what: c_int, value: *mut c_int);
        fn Cblacs_gridinit(context: *mut c_int, order: *const c_char, rows: c_int, cols: c_int);
        fn Cblacs_gridinfo(
            context: c_int,
            rows: *mut c_int,
            cols: *mut c_int,
            row: *mut c_int,
            col: *mut c_int,
        );
        fn Cblacs_gridexit(context: c_int);
        fn numroc_(
            n: *const c_int,
            nb: *const c_int,
            iproc: *const c_int,
            isrc: *const c_int,
            nprocs: *const c_int,
        ) -> c_int;
        fn descinit_(
            desc: *mut c_int,
            m: *const c_int,
            n: *const c_int,
            mb: *const c_int,
            nb: *const c_int,
            irsrc: *const c_int,
            icsrc: *const c_int,
            context: *const c_int,
            lld: *const c_int,
            info: *mut c_int,
        );
        // PBLAS is C: character arguments are plain pointers.
        fn pdgemm_(
            transa: *const c_char,
            transb: *const c_char,
            m: *const c_int,
            n: *const c_int,
            k: *const c_int,
            alpha: *const f64,
            a: *const f64,
            ia: *const c_int,
            ja: *const c_int,
            desca: *const c_int,
            b: *const f64,
            ib: *const c_int,
            jb: *const c_int,
            descb: *const c_int,
            beta: *const f64,
            c: *mut f64,
            ic: *const c_int,
            jc: *const c_int,
            descc: *const c_int,
        );
        // ScaLAPACK proper is Fortran: a character argument has a hidden length after
        // the others.
        fn pdpotrf_(
            uplo: *const c_char,
            n: *const c_int,
            a: *mut f64,
            ia: *const c_int,
            ja: *const c_int,
            desca: *const c_int,
            info: *mut c_int,
            uplo_len: usize,
        );
        fn pdgetrf_(
            m: *const c_int,
            n: *const c_int,
            a: *mut f64,
            ia: *const c_int,
            ja: *const c_int,
            desca: *const c_int,
            ipiv: *mut c_int,
            info: *mut c_int,
        );
    }

    /// A local array with its ScaLAPACK descriptor.
    struct Local {
        data: Vec<f64>,
        desc: [c_int; 9],
    }

    /// The BLACS grid and the local arrays' shape on this process.
    struct Blacs {
        context: c_int,
        me: (c_int, c_int),
        shape: (c_int, c_int),
    }

    impl Blacs {
        fn new(p: usize, q: usize) -> Blacs {
            let (mut context, mut rows, mut cols, mut row, mut col) = (0, 0, 0, 0, 0);
            // SAFETY: every pointer is to a live local; "Row" is NUL-terminated; MPI is
            // initialised (the mpi conduit did it) and every rank makes these calls.
            unsafe {
                Cblacs_get(-1, 0, &mut context);
                Cblacs_gridinit(&mut context, c"Row".as_ptr(), p as c_int, q as c_int);
                Cblacs_gridinfo(context, &mut rows, &mut cols, &mut row, &mut col);
            }
            Blacs {
                context,
                me: (row, col),
                shape: (rows, cols),
            }
        }

        /// An `n × n` matrix in `nb × nb` blocks with entries `entry(i, j)`.
        fn matrix(
            &self,
            n: usize,
            nb: usize,
            entry: impl Fn(usize, usize) -> f64,
        ) -> tessera::Result<Local> {
            let (n_, nb_, zero) = (n as c_int, nb as c_int, 0 as c_int);
            // SAFETY: numroc_ reads its five scalar arguments only.
            let (mloc, nloc) = unsafe {
                (
                    numroc_(&n_, &nb_, &self.me.0, &zero, &self.shape.0),
                    numroc_(&n_, &nb_, &self.me.1, &zero, &self.shape.1),
                )
            };
            let (mloc, nloc) = (mloc as usize, nloc as usize);
            let lld = mloc.max(1);
            let mut desc = [0; 9];
            let (lld_, mut info) = (lld as c_int, 0);
            // SAFETY: `desc` has the nine entries a descriptor needs; the rest are scalars.
            unsafe {
                descinit_(
                    desc.as_mut_ptr(),
                    &n_,
                    &n_,
                    &nb_,
                    &nb_,
                    &zero,
                    &zero,
                    &self.context,
                    &lld_,
                    &mut info,
                )
            };
            if info != 0 {
                return Err(crate::invalid(format!(
                    "ScaLAPACK's descinit refused argument {}",
                    -info
                )));
            }
            // The same global-to-local map as Tessera's layout (source process 0, 0).
            let layout = tessera::MatrixLayout::new(
                n,
                n,
                nb,
                nb,
                self.shape.0 as usize,
                self.shape.1 as usize,
            )?;
            let (r, c) = (self.me.0 as usize, self.me.1 as usize);
            let mut data = vec![0.0; lld * nloc];
            for lj in 0..nloc {
                for li in 0..mloc {
                    data[lj * lld + li] = entry(layout.global_row(r, li), layout.global_col(c, lj));
                }
            }
            Ok(Local { data, desc })
        }
    }

    impl Drop for Blacs {
        fn drop(&mut self) {
            // SAFETY: the context came from Cblacs_gridinit; every rank releases it.
            unsafe { Cblacs_gridexit(self.context) }
        }
    }

    /// Run ScaLAPACK's routine for `problem` on every rank and time it like Tessera's run
    /// (from a barrier to a barrier).
    pub fn run(ctx: &Context, problem: &Problem) -> tessera::Result<Baseline> {
        let world = Team::world(ctx)?;
        let (n, nb) = (problem.n, problem.block);
        let blacs = Blacs::new(problem.grid.0, problem.grid.1);
        let one: c_int = 1;
        let n_ = n as c_int;
        let mut info: c_int = 0;
        let grid = common::Grid::new(&world, problem.grid.0, problem.grid.1)?;
        let layout = grid.square(n, nb)?;
        let mut comm = common::CommTimer::default();
        let (routine, seconds, residual) = match problem.app {
            App::Summa => {
                let a = blacs.matrix(n, nb, |i, j| common::uniform(summa::SEEDS[0], i, j))?;
                let b = blacs.matrix(n, nb, |i, j| common::uniform(summa::SEEDS[1], i, j))?;
                let mut c = blacs.matrix(n, nb, |_, _| 0.0)?;
                let (alpha, beta) = (1.0f64, 0.0f64);
                let start = common::start_clock(&world)?;
                // SAFETY: the three local arrays match their descriptors (built above for
                // this grid); the scalars are live locals; every rank calls it.
                unsafe {
                    pdgemm_(
                        c"N".as_ptr(),
                        c"N".as_ptr(),
                        &n_,
                        &n_,
                        &n_,
                        &alpha,
                        a.data.as_ptr(),
                        &one,
                        &one,
                        a.desc.as_ptr(),
                        b.data.as_ptr(),
                        &one,
                        &one,
                        b.desc.as_ptr(),
                        &beta,
                        c.data.as_mut_ptr(),
                        &one,
                        &one,
                        c.desc.as_ptr(),
                    )
                };
                let seconds = finish(&world, start)?;
                let residual = summa::check(&grid, &layout, &a.data, &b.data, &c.data)?;
                ("PDGEMM", seconds, residual)
            }
            App::Cholesky => {
                let mut a =
                    blacs.matrix(n, nb, |i, j| cholesky::entry(MatrixKind::Random, n, i, j))?;
                let start = common::start_clock(&world)?;
                // SAFETY: the local array matches its descriptor; the scalars are live
                // locals; the hidden length is the one character of "L".
                unsafe {
                    pdpotrf_(
                        c"L".as_ptr(),
                        &n_,
                        a.data.as_mut_ptr(),
                        &one,
                        &one,
                        a.desc.as_ptr(),
                        &mut info,
                        1,
                    )
                };
                let seconds = finish(&world, start)?;
                succeeded("PDPOTRF", info)?;
                let residual =
                    cholesky::check(&grid, &layout, &a.data, MatrixKind::Random, &mut comm)?;
                ("PDPOTRF", seconds, residual)
            }
            App::Lu => {
                let mut a = blacs.matrix(n, nb, |i, j| lu::entry(MatrixKind::Random, n, i, j))?;
                // PDGETRF needs the local rows plus one block of pivots.
                let mut ipiv: Vec<c_int> = vec![0; a.desc[8] as usize + nb];
                let start = common::start_clock(&world)?;
                // SAFETY: the local array matches its descriptor and `ipiv` holds its local
                // rows (the leading dimension) plus a block; every rank calls it.
                unsafe {
                    pdgetrf_(
                        &n_,
                        &n_,
                        a.data.as_mut_ptr(),
                        &one,
                        &one,
                        a.desc.as_ptr(),
                        ipiv.as_mut_ptr(),
                        &mut info,
                    )
                };
                let seconds = finish(&world, start)?;
                succeeded("PDGETRF", info)?;
                let pivots = global_pivots(&world, &grid, &layout, &ipiv)?;
                let residual = lu::check(
                    &grid,
                    &layout,
                    &a.data,
                    (&pivots, lu::Swaps::WholeRows),
                    MatrixKind::Random,
                )?;
                ("PDGETRF", seconds, residual)
            }
        };
        Ok(Baseline {
            routine: routine.into(),
            seconds,
            residual: Some(residual),
        })
    }

    /// ScaLAPACK's `info` of `routine`: zero, or an error (before its result is checked).
    fn succeeded(routine: &str, info: c_int) -> tessera::Result<()> {
        if info != 0 {
            return Err(crate::invalid(format!(
                "ScaLAPACK's {routine} returned info = {info}"
            )));
        }
        Ok(())
    }

    /// PDGETRF's pivots as one global list (0-based: row `i` was swapped with row
    /// `pivots[i]`, in order), from the process column 0's local lists (each rank's
    /// `ipiv[li]` is the 1-based global row that its local row `li` was swapped with).
    fn global_pivots(
        world: &Team<'_>,
        grid: &common::Grid<'_>,
        layout: &tessera::MatrixLayout,
        ipiv: &[c_int],
    ) -> tessera::Result<Vec<usize>> {
        let n = layout.rows();
        let mut mine = vec![0u64; n];
        if grid.me.1 == 0 {
            for (li, &p) in ipiv.iter().take(layout.local_rows(grid.me.0)).enumerate() {
                mine[layout.global_row(grid.me.0, li)] = (p - 1) as u64;
            }
        }
        let mut all = vec![0u64; n];
        world.run(
            Allreduce::new(&mine, tessera::Op::Sum).to(&mut all),
            Blocking,
        )?;
        Ok(all.into_iter().map(|p| p as usize).collect())
    }

    fn finish(world: &Team<'_>, start: Instant) -> tessera::Result<f64> {
        world.run(Barrier, Blocking)?;
        Ok(start.elapsed().as_secs_f64())
    }
}
