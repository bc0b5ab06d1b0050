//! Safe wrappers over the local BLAS and LAPACK calls the applications make (OpenBLAS
//! through `cblas-sys` and `lapack-sys`), on column-major `f64` arrays.
//!
//! Every wrapper checks that each slice holds the matrix its dimensions and leading
//! dimension describe before it calls the library, so no call can read or write outside
//! its slices. This is the only module of the crate with `unsafe`, and it must stay free
//! of anything but argument checks and the calls themselves.

use std::os::raw::{c_char, c_int};

use cblas_sys::{
    CBLAS_DIAG as Diag, CBLAS_LAYOUT::CblasColMajor, CBLAS_SIDE as Side, CBLAS_TRANSPOSE as Tr,
    CBLAS_UPLO as Uplo,
};

/// Whether an operand is used as stored or transposed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trans {
    /// As stored.
    No,
    /// Transposed.
    Yes,
}

impl Trans {
    fn cblas(self) -> Tr {
        match self {
            Trans::No => Tr::CblasNoTrans,
            Trans::Yes => Tr::CblasTrans,
        }
    }
}

/// Elements a column-major `rows × cols` matrix with leading dimension `ld` spans.
fn span(rows: usize, cols: usize, ld: usize) -> usize {
    if rows == 0 || cols == 0 {
        0
    } else {
        (cols - 1) * ld + rows
    }
}

/// Check a column-major operand and convert its sizes for the library.
fn operand(what: &str, len: usize, rows: usize, cols: usize, ld: usize) -> c_int {
    assert!(
        ld >= rows.max(1) && len >= span(rows, cols, ld),
        "{what}: a {rows}×{cols} matrix with leading dimension {ld} does not fit in {len} elements"
    );
    int(ld)
}

fn int(v: usize) -> c_int {
    c_int::try_from(v).expect("matrix dimensions fit the BLAS integer")
}

extern "C" {
    /// OpenBLAS's thread count for the calls that follow (from `libopenblas`).
    fn openblas_set_num_threads(num_threads: c_int);
}

/// Make OpenBLAS run every call on the calling thread only: each rank owns one core's
/// share of the work, as ScaLAPACK's processes do.
pub fn single_threaded() {
    // SAFETY: the function only stores the count in OpenBLAS's global configuration.
    unsafe { openblas_set_num_threads(1) }
}

/// `C = alpha · op(A) · op(B) + beta · C` with `C` `m × n` and `k` the inner dimension.
///
/// ```
/// use tessera_apps::blas::{gemm, Trans};
/// let (a, b) = ([1.0, 2.0, 3.0, 4.0], [1.0, 0.0, 0.0, 1.0]); // column-major 2 × 2
/// let mut c = [0.0; 4];
/// gemm(Trans::No, Trans::No, 2, 2, 2, 1.0, &a, 2, &b, 2, 0.0, &mut c, 2);
/// assert_eq!(c, a);
/// ```
#[allow(clippy::too_many_arguments)] // BLAS's own argument list
pub fn gemm(
    ta: Trans,
    tb: Trans,
    m: usize,
    n: usize,
    k: usize,
    alpha: f64,
    a: &[f64],
    lda: usize,
    b: &[f64],
    ldb: usize,
    beta: f64,
    c: &mut [f64],
    ldc: usize,
) {
    let (ar, ac) = if ta == Trans::No { (m, k) } else { (k, m) };
    let (br, bc) = if tb == Trans::No { (k, n) } else { (n, k) };
    let lda = operand("gemm A", a.len(), ar, ac, lda);
    let ldb = operand("gemm B", b.len(), br, bc, ldb);
    let ldc = operand("gemm C", c.len(), m, n, ldc);
    if m == 0 || n == 0 {
        return;
    }
    // SAFETY: each operand was checked to lie inside its slice; `c` is exclusively
    // borrowed and cannot alias `a` or `b`.
    unsafe {
        cblas_sys::cblas_dgemm(
            CblasColMajor,
            ta.cblas(),
            tb.cblas(),
            int(m),
            int(n),
            int(k),
            alpha,
            a.as_ptr(),
            lda,
            b.as_ptr(),
            ldb,
            beta,
            c.as_mut_ptr(),
            ldc,
        )
    }
}

/// `y = alpha · op(A) · x + beta · y` for an `m × n` matrix `A`.
#[allow(clippy::too_many_arguments)] // BLAS's own argument list
pub fn gemv(
    ta: Trans,
    m: usize,
    n: usize,
    alpha: f64,
    a: &[f64],
    lda: usize,
    x: &[f64],
    beta: f64,
    y: &mut [f64],
) {
    let lda = operand("gemv A", a.len(), m, n, lda);
    let (xs, ys) = if ta == Trans::No { (n, m) } else { (m, n) };
    assert!(
        x.len() >= xs && y.len() >= ys,
        "gemv: vectors of {} and {} for a {m}×{n} matrix",
        x.len(),
        y.len()
    );
    if m == 0 || n == 0 {
        return;
    }
    // SAFETY: the matrix and both vectors were checked to lie inside their slices; `y` is
    // exclusively borrowed.
    unsafe {
        cblas_sys::cblas_dgemv(
            CblasColMajor,
            ta.cblas(),
            int(m),
            int(n),
            alpha,
            a.as_ptr(),
            lda,
            x.as_ptr(),
            1,
            beta,
            y.as_mut_ptr(),
            1,
        )
    }
}

/// Where the triangle of a [`trsm`] or [`trmm`] stands and how it is used, named by what
/// the solve computes (the multiply computes the same with `T` in place of `T⁻¹`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Solve {
    /// `B = B · L⁻ᵀ` with `L` lower triangular (Cholesky's panel below the diagonal block).
    RightLowerTransposed,
    /// `B = L⁻¹ · B` with `L` unit lower triangular (LU's block row of U).
    LeftUnitLower,
}

/// A triangular solve with several right-hand sides: the `m × n` matrix `B` is
/// overwritten, `T` is the triangle (order `n` for [`Solve::RightLowerTransposed`], `m`
/// for [`Solve::LeftUnitLower`]).
#[allow(clippy::too_many_arguments)] // BLAS's own argument list
pub fn trsm(solve: Solve, m: usize, n: usize, t: &[f64], ldt: usize, b: &mut [f64], ldb: usize) {
    triangular(solve, false, m, n, t, ldt, b, ldb)
}

/// A triangular multiply, `B = B · Lᵀ` or `B = L · B` as `solve` places the triangle: with
/// `T` an inverse from [`invert_lower`], the solve [`trsm`] would do. OpenBLAS runs this
/// about three times as fast as the solve (on a Xeon with AVX-512, `1920 × 128` by a
/// triangle of order 128: 0.38 ms against 1.17 ms).
#[allow(clippy::too_many_arguments)] // BLAS's own argument list
pub fn trmm(solve: Solve, m: usize, n: usize, t: &[f64], ldt: usize, b: &mut [f64], ldb: usize) {
    triangular(solve, true, m, n, t, ldt, b, ldb)
}

/// `dtrsm` (`multiply` false) or `dtrmm` (true) on checked operands.
#[allow(clippy::too_many_arguments)] // BLAS's own argument list
fn triangular(
    solve: Solve,
    multiply: bool,
    m: usize,
    n: usize,
    t: &[f64],
    ldt: usize,
    b: &mut [f64],
    ldb: usize,
) {
    let (side, trans, diag, order) = match solve {
        Solve::RightLowerTransposed => (Side::CblasRight, Tr::CblasTrans, Diag::CblasNonUnit, n),
        Solve::LeftUnitLower => (Side::CblasLeft, Tr::CblasNoTrans, Diag::CblasUnit, m),
    };
    let ldt = operand("triangle T", t.len(), order, order, ldt);
    let ldb = operand("triangular B", b.len(), m, n, ldb);
    if m == 0 || n == 0 {
        return;
    }
    let call = if multiply {
        cblas_sys::cblas_dtrmm
    } else {
        cblas_sys::cblas_dtrsm
    };
    // SAFETY: both operands were checked to lie inside their slices; `b` is exclusively
    // borrowed; both routines take the same arguments.
    unsafe {
        call(
            CblasColMajor,
            side,
            Uplo::CblasLower,
            trans,
            diag,
            int(m),
            int(n),
            1.0,
            t.as_ptr(),
            ldt,
            b.as_mut_ptr(),
            ldb,
        )
    }
}

/// Invert the lower triangle of the `n × n` matrix in `a` in place (LAPACK's `dtrtri`;
/// the strict upper triangle is neither read nor written). `Err(c)` names the first
/// column `c` (0-based) with a zero on the diagonal.
pub fn invert_lower(n: usize, a: &mut [f64], lda: usize) -> Result<(), usize> {
    let lda = operand("trtri A", a.len(), n, n, lda);
    if n == 0 {
        return Ok(());
    }
    let (uplo, diag, order, mut info) = (b'L' as c_char, b'N' as c_char, int(n), 0);
    // SAFETY: the matrix was checked to lie inside `a`, which is exclusively borrowed; the
    // scalars are live locals.
    unsafe { lapack_sys::dtrtri_(&uplo, &diag, &order, a.as_mut_ptr(), &lda, &mut info) };
    lapack_info("dtrtri", info)
}

/// Which triangle [`trsv`] solves with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Triangle {
    /// Unit lower triangular (LU's `L`).
    UnitLower,
    /// Upper triangular (LU's `U`).
    Upper,
    /// Lower triangular (Cholesky's `L`).
    Lower,
    /// The transpose of a lower triangle (Cholesky's `Lᵀ`).
    LowerTransposed,
}

/// Solve `T · x = b` in place for one right-hand side, `T` of order `n`.
pub fn trsv(triangle: Triangle, n: usize, t: &[f64], ldt: usize, x: &mut [f64]) {
    let ldt = operand("trsv T", t.len(), n, n, ldt);
    assert!(x.len() >= n, "trsv: a vector of {} for order {n}", x.len());
    if n == 0 {
        return;
    }
    let (uplo, trans, diag) = match triangle {
        Triangle::UnitLower => (Uplo::CblasLower, Tr::CblasNoTrans, Diag::CblasUnit),
        Triangle::Upper => (Uplo::CblasUpper, Tr::CblasNoTrans, Diag::CblasNonUnit),
        Triangle::Lower => (Uplo::CblasLower, Tr::CblasNoTrans, Diag::CblasNonUnit),
        Triangle::LowerTransposed => (Uplo::CblasLower, Tr::CblasTrans, Diag::CblasNonUnit),
    };
    // SAFETY: the triangle and the vector were checked to lie inside their slices; `x` is
    // exclusively borrowed.
    unsafe {
        cblas_sys::cblas_dtrsv(
            CblasColMajor,
            uplo,
            trans,
            diag,
            int(n),
            t.as_ptr(),
            ldt,
            x.as_mut_ptr(),
            1,
        )
    }
}

/// Cholesky-factor the `n × n` symmetric positive definite matrix in `a` in place (lower
/// triangle: `A = L·Lᵀ`, LAPACK's `dpotrf`). `Err(c)` names the first column `c`
/// (0-based) whose leading minor is not positive definite.
pub fn potrf_lower(n: usize, a: &mut [f64], lda: usize) -> Result<(), usize> {
    let lda = operand("potrf A", a.len(), n, n, lda);
    if n == 0 {
        return Ok(());
    }
    let (uplo, order, mut info) = (b'L' as c_char, int(n), 0);
    // SAFETY: the matrix was checked to lie inside `a`, which is exclusively borrowed; the
    // scalars are live locals.
    unsafe { lapack_sys::dpotrf_(&uplo, &order, a.as_mut_ptr(), &lda, &mut info) };
    lapack_info("dpotrf", info)
}

/// LU-factor the `m × n` matrix in `a` in place with partial pivoting (LAPACK's
/// `dgetrf`): `ipiv[i]` (0-based) is the row swapped with row `i`. `Err(c)` names the
/// first column `c` (0-based) whose pivot is exactly zero; the factorisation is complete
/// all the same, as LAPACK leaves it.
pub fn getrf(
    m: usize,
    n: usize,
    a: &mut [f64],
    lda: usize,
    ipiv: &mut [usize],
) -> Result<(), usize> {
    let lda = operand("getrf A", a.len(), m, n, lda);
    let k = m.min(n);
    assert!(
        ipiv.len() >= k,
        "getrf: {} pivots for {k} columns",
        ipiv.len()
    );
    if k == 0 {
        return Ok(());
    }
    let mut pivots: Vec<c_int> = vec![0; k];
    let (rows, cols, mut info) = (int(m), int(n), 0);
    // SAFETY: the matrix was checked to lie inside `a` and `pivots` holds min(m, n)
    // entries; both are exclusively borrowed.
    unsafe {
        lapack_sys::dgetrf_(
            &rows,
            &cols,
            a.as_mut_ptr(),
            &lda,
            pivots.as_mut_ptr(),
            &mut info,
        )
    };
    for (dst, p) in ipiv.iter_mut().zip(&pivots) {
        *dst = *p as usize - 1;
    }
    lapack_info("dgetrf", info)
}

/// A LAPACK routine's `info`: `Ok` for 0, the 0-based column a positive value names. A
/// negative value means this module passed a bad argument, which its checks rule out.
fn lapack_info(routine: &str, info: c_int) -> Result<(), usize> {
    match info {
        0 => Ok(()),
        i if i > 0 => Err(i as usize - 1),
        i => panic!("{routine} rejected argument {}", -i),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn factorisations_reproduce_their_matrix() {
        // A = L·Lᵀ with L = [[2, 0], [1, 3]]: A = [[4, 2], [2, 10]].
        let mut a = [4.0, 2.0, 2.0, 10.0];
        potrf_lower(2, &mut a, 2).unwrap();
        assert_eq!([a[0], a[1], a[3]], [2.0, 1.0, 3.0]);
        // L⁻¹ = [[1/2, 0], [−1/6, 1/3]]; B·L⁻ᵀ through it solves B = X·Lᵀ.
        let mut inverse = a;
        invert_lower(2, &mut inverse, 2).unwrap();
        assert_eq!([inverse[0], inverse[3]], [0.5, 1.0 / 3.0]);
        assert!((inverse[1] + 1.0 / 6.0).abs() < 1e-15);
        let (mut solved, mut multiplied) = ([2.0, 1.0, 4.0, 5.0], [2.0, 1.0, 4.0, 5.0]);
        trsm(Solve::RightLowerTransposed, 2, 2, &a, 2, &mut solved, 2);
        trmm(
            Solve::RightLowerTransposed,
            2,
            2,
            &inverse,
            2,
            &mut multiplied,
            2,
        );
        for (s, m) in solved.iter().zip(&multiplied) {
            assert!((s - m).abs() < 1e-15, "{solved:?} against {multiplied:?}");
        }
        // X·Lᵀ reproduces B: row 0 of X is [1, 1], so its product is [2, 1 + 3].
        assert_eq!([solved[0], solved[2]], [1.0, 1.0]);
        let mut zero_pivot = [1.0, 2.0, 0.0, 0.0];
        assert_eq!(invert_lower(2, &mut zero_pivot, 2), Err(1));
        let mut not_pd = [1.0, 2.0, 2.0, 1.0];
        assert_eq!(potrf_lower(2, &mut not_pd, 2), Err(1));
        // Partial pivoting swaps the larger first-column entry up.
        let mut g = [1.0, 4.0, 2.0, 3.0];
        let mut ipiv = [0; 2];
        getrf(2, 2, &mut g, 2, &mut ipiv).unwrap();
        assert_eq!(ipiv, [1, 1]);
        assert_eq!(g, [4.0, 0.25, 3.0, 2.0 - 0.75]);
        let mut singular = [1.0, 2.0, 2.0, 4.0];
        assert_eq!(getrf(2, 2, &mut singular, 2, &mut ipiv), Err(1));
    }

    #[test]
    #[should_panic(expected = "does not fit")]
    fn an_operand_too_short_for_its_shape_is_refused() {
        let mut c = [0.0; 3];
        gemm(
            Trans::No,
            Trans::No,
            2,
            2,
            1,
            1.0,
            &[1.0; 2],
            2,
            &[1.0; 2],
            1,
            0.0,
            &mut c,
            2,
        );
    }
}
