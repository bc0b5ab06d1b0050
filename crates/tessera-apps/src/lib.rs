//! Dense linear algebra on Tessera (seed 004 §6, seed 002): SUMMA matrix multiply,
//! Cholesky and LU factorisations of [`BlockCyclicMatrix`](tessera::BlockCyclicMatrix)es
//! over a process grid, with team broadcasts between ranks and OpenBLAS for the local
//! blocks, each verified and timed in an NPB-style [`Report`].
//!
//! `tessera app summa|cholesky|lu` starts the ranks and prints the report; in a program,
//! [`run`] is the whole of one application on the calling rank:
//!
//! ```
//! use tessera_apps::{App, MatrixKind, Problem, Variant};
//! tessera::Job::threads(2).run(|ctx| {
//!     let problem = Problem {
//!         app: App::Lu,
//!         n: 100,
//!         block: 16,
//!         grid: (1, 2),
//!         variant: Variant::Blocking,
//!         matrix: MatrixKind::Random,
//!         input_block: None,
//!     };
//!     let outcome = tessera_apps::run(ctx, &problem)?;
//!     assert!(outcome.failure.is_none() && outcome.residual < Some(16.0));
//!     Ok(())
//! }).unwrap();
//! ```
//!
//! This crate holds the applications only: no communication of its own beyond the
//! library's teams and matrices, and no numerical kernel that BLAS or LAPACK provides.

pub mod blas;
pub mod cholesky;
pub mod common;
pub mod error;
pub mod lu;
pub mod report;
pub mod scalapack;
pub mod summa;

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use tessera::{Context, Team};

pub use error::AppError;

pub use report::Report;

/// The applications.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum App {
    /// `C = A·B` (SUMMA).
    Summa,
    /// `A = L·Lᵀ`.
    Cholesky,
    /// `P·A = L·U`.
    Lu,
}

impl App {
    /// Every application.
    pub const ALL: [App; 3] = [App::Summa, App::Cholesky, App::Lu];

    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            App::Summa => "summa",
            App::Cholesky => "cholesky",
            App::Lu => "lu",
        }
    }

    /// The variants it has, the default first.
    pub fn variants(self) -> &'static [Variant] {
        match self {
            App::Summa => &[Variant::Prefetch, Variant::Blocking, Variant::OneSided],
            App::Cholesky => &[Variant::LookaheadOne, Variant::Blocking, Variant::Lookahead],
            App::Lu => &[Variant::Blocking],
        }
    }

    /// The test matrices it can be given, the default first.
    pub fn matrices(self) -> &'static [MatrixKind] {
        match self {
            App::Summa => &[MatrixKind::Random],
            App::Cholesky => &[MatrixKind::Random, MatrixKind::Indefinite],
            App::Lu => &[MatrixKind::Random, MatrixKind::Singular],
        }
    }
}

impl fmt::Display for App {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for App {
    type Err = AppError;
    fn from_str(s: &str) -> Result<App, AppError> {
        App::ALL
            .into_iter()
            .find(|a| a.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                AppError::unknown(
                    "application",
                    s,
                    format!("unknown application {s:?}; choose summa, cholesky or lu"),
                )
            })
    }
}

/// How an application overlaps communication with computation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Variant {
    /// Blocking broadcasts, then the local update.
    Blocking,
    /// Nonblocking broadcasts of the next panels during the current multiply (SUMMA).
    Prefetch,
    /// No broadcasts: every rank multiplies straight from the owners' panels in the global
    /// address space, borrowed where their memory is mapped and fetched with one get where
    /// not (SUMMA).
    OneSided,
    /// Steps two at a time: the next two panels factored and their broadcasts started
    /// before the rest of the current pair's update, which applies both panels in one
    /// product (Cholesky).
    Lookahead,
    /// One step ahead: the next panel's process column applies the current panel to that
    /// block column first, factors it and starts its broadcast, then every rank applies
    /// the current panel to the rest (Cholesky).
    #[serde(rename = "lookahead1")]
    LookaheadOne,
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Variant::Blocking => "blocking",
            Variant::Prefetch => "prefetch",
            Variant::Lookahead => "lookahead",
            Variant::LookaheadOne => "lookahead1",
            Variant::OneSided => "onesided",
        })
    }
}

impl FromStr for Variant {
    type Err = AppError;
    fn from_str(s: &str) -> Result<Variant, AppError> {
        match s.to_ascii_lowercase().as_str() {
            "blocking" => Ok(Variant::Blocking),
            "prefetch" => Ok(Variant::Prefetch),
            "lookahead" => Ok(Variant::Lookahead),
            "lookahead1" => Ok(Variant::LookaheadOne),
            "onesided" => Ok(Variant::OneSided),
            _ => Err(AppError::unknown(
                "variant",
                s,
                format!(
                    "unknown variant {s:?}; choose blocking, prefetch or onesided (summa), or \
                     lookahead or lookahead1 (cholesky)"
                ),
            )),
        }
    }
}

/// Which test matrix to factor: the well-posed default, or one made to fail at a known
/// column (to see the error).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MatrixKind {
    /// Uniform random entries (symmetric and diagonally dominant for Cholesky).
    Random,
    /// Cholesky: symmetric, with a negative diagonal entry at column `n / 2`.
    Indefinite,
    /// LU: column `n / 2` zero, so that column's pivot is exactly zero.
    Singular,
}

impl fmt::Display for MatrixKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MatrixKind::Random => "random",
            MatrixKind::Indefinite => "indefinite",
            MatrixKind::Singular => "singular",
        })
    }
}

impl FromStr for MatrixKind {
    type Err = AppError;
    fn from_str(s: &str) -> Result<MatrixKind, AppError> {
        match s.to_ascii_lowercase().as_str() {
            "random" => Ok(MatrixKind::Random),
            "indefinite" => Ok(MatrixKind::Indefinite),
            "singular" => Ok(MatrixKind::Singular),
            _ => Err(AppError::unknown(
                "matrix",
                s,
                format!(
                    "unknown matrix {s:?}; choose random, indefinite (cholesky) or singular (lu)"
                ),
            )),
        }
    }
}

/// One run: which application, the matrix order `n`, the square block size, the process
/// grid, the variant and the test matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Problem {
    /// The application.
    pub app: App,
    /// Matrix order (every matrix is `n × n`).
    pub n: usize,
    /// Block size (`block × block` blocks).
    pub block: usize,
    /// Process grid `(rows, columns)`.
    pub grid: (usize, usize),
    /// The variant.
    pub variant: Variant,
    /// The test matrix.
    pub matrix: MatrixKind,
    /// The block size the input matrices are generated in, if not `block`: they are
    /// then redistributed to `block × block` blocks before the run, a step timed apart
    /// (the shape in which data often arrives from another stage of a program).
    #[serde(default)]
    pub input_block: Option<usize>,
}

impl Problem {
    /// Check everything that can be checked before any rank starts, for `ranks` ranks: a
    /// one-line error naming the problem and the way out.
    pub fn check(&self, ranks: usize) -> Result<(), AppError> {
        let (p, q) = self.grid;
        let bad = |option, message| Err(AppError::BadArgument { option, message });
        if self.n == 0 {
            return bad(
                "--size",
                "the matrix size must be positive (--size N with N ≥ 1)".into(),
            );
        }
        if self.block == 0 || self.block > self.n {
            return bad(
                "--block",
                format!(
                    "the block size {} must be between 1 and the matrix size {} (--block)",
                    self.block, self.n
                ),
            );
        }
        if let Some(b0) = self.input_block {
            if b0 == 0 || b0 > self.n {
                return bad(
                    "--input-block",
                    format!(
                        "the input block size {b0} must be between 1 and the matrix size {} \
                         (--input-block)",
                        self.n
                    ),
                );
            }
        }
        if p == 0 || q == 0 || p.checked_mul(q) != Some(ranks) {
            let processes = (p as u128 * q as u128).to_string();
            return bad(
                "--grid",
                format!(
                    "a {p}×{q} process grid has {processes} processes, but the job has {ranks} \
                     ranks; pass --grid PxQ with P·Q = {ranks}"
                ),
            );
        }
        if !self.app.variants().contains(&self.variant) {
            return bad(
                "--variant",
                format!(
                    "{} has no variant {}; choose {}",
                    self.app,
                    self.variant,
                    list(self.app.variants())
                ),
            );
        }
        if !self.app.matrices().contains(&self.matrix) {
            return bad(
                "--matrix",
                format!(
                    "{} takes no {} matrix; choose {}",
                    self.app,
                    self.matrix,
                    list(self.app.matrices())
                ),
            );
        }
        Ok(())
    }

    /// Floating-point operations of the application at this size (the customary counts:
    /// `2n³`, `n³/3`, `2n³/3`).
    pub fn flops(&self) -> f64 {
        let n = self.n as f64;
        match self.app {
            App::Summa => 2.0 * n * n * n,
            App::Cholesky => n * n * n / 3.0,
            App::Lu => 2.0 * n * n * n / 3.0,
        }
    }
}

fn list<T: fmt::Display>(items: &[T]) -> String {
    items
        .iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(" or ")
}

/// The most square `p × q` grid with `p ≤ q` for `ranks` processes (ScaLAPACK's and HPL's
/// usual choice: 1×2 for 2, 2×2 for 4, 2×3 for 6).
pub fn default_grid(ranks: usize) -> (usize, usize) {
    let p = (1..=ranks)
        .filter(|d| ranks.is_multiple_of(*d) && d * d <= ranks)
        .max()
        .unwrap_or(1);
    (p, ranks / p)
}

/// What one rank learns from a run: times, the residual and whether it failed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// Wall time of the timed part (from a barrier to a barrier).
    pub seconds: f64,
    /// The most time any rank spent in communication calls within it.
    pub comm_seconds: f64,
    /// The scaled residual of the check (passes below [`THRESHOLD`]); none when the run
    /// stopped early.
    pub residual: Option<f64>,
    /// What the residual measures.
    pub residual_name: String,
    /// Why the run stopped early (a matrix that cannot be factored), if it did.
    pub failure: Option<String>,
    /// Wall time of redistributing the input from the input block size, if it had one
    /// (not part of `seconds`).
    #[serde(default)]
    pub redistribute_seconds: Option<f64>,
}

impl Outcome {
    /// The same, with the input's redistribution time.
    fn redistributed(self, seconds: Option<f64>) -> Outcome {
        Outcome {
            redistribute_seconds: seconds,
            ..self
        }
    }

    /// A run that finished and was checked: its times and scaled residual (`name` says what
    /// the residual measures).
    fn checked(seconds: f64, comm_seconds: f64, residual: f64, name: &str) -> Outcome {
        Outcome {
            seconds,
            comm_seconds,
            residual: Some(residual),
            residual_name: name.into(),
            failure: None,
            redistribute_seconds: None,
        }
    }

    fn failed(seconds: f64, comm_seconds: f64, why: String) -> Outcome {
        Outcome {
            seconds,
            comm_seconds,
            residual: None,
            residual_name: String::new(),
            failure: Some(why),
            redistribute_seconds: None,
        }
    }
}

/// An error for bad input found inside a rank.
fn invalid(why: String) -> tessera::Error {
    tessera::Error::Application(why.into())
}

/// Scaled residuals below this pass (HPL's and ScaLAPACK's testers' threshold).
pub const THRESHOLD: f64 = 16.0;

/// Run `problem` on the calling rank (a collective over every rank of the job), with
/// OpenBLAS single-threaded.
pub fn run(ctx: &Context, problem: &Problem) -> tessera::Result<Outcome> {
    problem.check(ctx.ranks())?;
    blas::single_threaded();
    let world = Team::world(ctx)?;
    let grid = common::Grid::new(&world, problem.grid.0, problem.grid.1)?;
    match problem.app {
        App::Summa => summa::run(&grid, problem),
        App::Cholesky => cholesky::run(&grid, problem),
        App::Lu => lu::run(&grid, problem),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A variant has one name: the one the command line takes, the report prints and the
    /// JSON report carries.
    #[test]
    fn every_variant_has_one_name_on_the_command_line_and_in_json() {
        for app in [App::Summa, App::Cholesky, App::Lu] {
            for &variant in app.variants() {
                let name = variant.to_string();
                assert_eq!(name.parse::<Variant>(), Ok(variant));
                let json = serde_json::to_string(&variant).unwrap();
                assert_eq!(json, format!("\"{name}\""), "{variant:?}");
            }
        }
    }
}
