//! The NAS Parallel Benchmarks on Tessera.
//!
//! Each kernel runs SPMD on a [`tessera::Context`], times exactly the region the NPB
//! specification times, and checks its result against the official verification values.
//! Those values are carried in this crate (see [`ep::CLASSES`]), so nothing outside the
//! product is read at run time.
//!
//! Kernels so far: [`ep`] (embarrassingly parallel: Gaussian pairs), [`is`] (integer sort
//! with a one-sided key exchange), [`cg`] (conjugate gradient on a 2-D process grid with
//! point-to-point signalling), [`mg`] (multigrid with one-sided ghost exchange) and
//! [`ft`] (3-D FFT with transposes written straight into place). [`buffer`] holds large
//! private arrays on huge pages.
//!
//! This crate must never bypass Tessera's communication: kernels use the global address
//! space, teams and collectives like any other program.

pub mod buffer;
pub mod cg;
pub mod ep;
pub mod ft;
pub mod is;
pub mod mg;
pub mod report;
pub mod rng;

use std::fmt;
use std::str::FromStr;

pub use report::Outcome;

/// A benchmark kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    /// Embarrassingly parallel.
    Ep,
    /// Integer sort.
    Is,
    /// Conjugate gradient.
    Cg,
    /// Multigrid.
    Mg,
    /// 3-D FFT PDE solver.
    Ft,
}

impl Kernel {
    /// Every kernel built so far.
    pub const ALL: [Kernel; 5] = [Kernel::Ep, Kernel::Is, Kernel::Cg, Kernel::Mg, Kernel::Ft];

    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Ep => "ep",
            Kernel::Is => "is",
            Kernel::Cg => "cg",
            Kernel::Mg => "mg",
            Kernel::Ft => "ft",
        }
    }

    /// Variants (the first is the default).
    pub fn variants(self) -> &'static [&'static str] {
        match self {
            Kernel::Ep => &["default"],
            Kernel::Is => &is::VARIANTS,
            Kernel::Cg => &cg::VARIANTS,
            Kernel::Mg => &mg::VARIANTS,
            Kernel::Ft => &ft::VARIANTS,
        }
    }

    /// Whether the kernel runs `variant` at `class` on `ranks`, as a one-line error saying
    /// what is allowed if not: [`Kernel::check_ranks`], the variant's name, and limits
    /// that depend on the class (FT's slabs hold whole planes).
    ///
    /// ```
    /// use tessera_npb::{Class, Kernel};
    /// assert!(Kernel::Ft.check_run(Class::W, "slabs", 64).is_ok()); // pencils beyond 32
    /// assert!(Kernel::Ft.check_run(Class::W, "packed", 64).is_err());
    /// ```
    pub fn check_run(self, class: Class, variant: &str, ranks: usize) -> Result<(), String> {
        self.check_ranks(ranks)?;
        if !self.variants().contains(&variant) {
            return Err(format!(
                "{self} has no variant {variant:?}; variants: {}",
                self.variants().join(", ")
            ));
        }
        match self {
            Kernel::Ft => ft::check_run(class, variant, ranks),
            _ => Ok(()),
        }
    }

    /// Which rank counts the kernel runs on, as an error message if `ranks` is not one.
    pub fn check_ranks(self, ranks: usize) -> Result<(), String> {
        match self {
            Kernel::Ep if ranks >= 1 => Ok(()),
            Kernel::Ep => Err("ep runs on any number of ranks ≥ 1".into()),
            Kernel::Is if ranks.is_power_of_two() && ranks <= 128 => Ok(()),
            Kernel::Is => Err(format!(
                "is runs on a power-of-two number of ranks up to 128, not {ranks}"
            )),
            Kernel::Cg if ranks.is_power_of_two() => Ok(()),
            Kernel::Cg => Err(format!(
                "cg runs on a power-of-two number of ranks, not {ranks}"
            )),
            // Coarse levels are gathered; the finest (S: 32³) needs two points per rank and
            // dimension, which 1024 ranks (16 × 8 × 8) still have.
            Kernel::Mg if ranks.is_power_of_two() && ranks <= 1024 => Ok(()),
            // Slabs up to min(nz, ny) ranks, pencils beyond (S holds 4096 of them).
            Kernel::Ft if ranks.is_power_of_two() && ranks <= 1024 => Ok(()),
            Kernel::Ft => Err(format!(
                "ft runs on a power-of-two number of ranks up to 1024, not {ranks}"
            )),
            Kernel::Mg => Err(format!(
                "mg runs on a power-of-two number of ranks up to 1024, not {ranks}"
            )),
        }
    }
}

impl fmt::Display for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Kernel {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "ep" => Ok(Kernel::Ep),
            "is" => Ok(Kernel::Is),
            "cg" => Ok(Kernel::Cg),
            "mg" => Ok(Kernel::Mg),
            "ft" => Ok(Kernel::Ft),
            "lu" | "sp" | "bt" => Err(format!(
                "kernel {s} is not implemented yet; available: ep, is, cg, mg, ft"
            )),
            _ => Err(format!(
                "unknown kernel {s:?}; available: ep, is, cg, mg, ft (or `all`)"
            )),
        }
    }
}

/// A problem class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Class {
    /// Sample.
    S,
    /// Workstation.
    W,
    /// Class A.
    A,
    /// Class B.
    B,
}

impl Class {
    /// Every class with official verification values here.
    pub const ALL: [Class; 4] = [Class::S, Class::W, Class::A, Class::B];
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Class::S => "S",
            Class::W => "W",
            Class::A => "A",
            Class::B => "B",
        })
    }
}

impl FromStr for Class {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "S" | "s" => Ok(Class::S),
            "W" | "w" => Ok(Class::W),
            "A" | "a" => Ok(Class::A),
            "B" | "b" => Ok(Class::B),
            _ => Err(format!("unknown class {s:?}; classes are S, W, A, B")),
        }
    }
}

/// Run `kernel` at `class` on this rank; rank 0 gets the outcome.
pub fn run(
    ctx: &tessera::Context,
    kernel: Kernel,
    class: Class,
    variant: &str,
) -> tessera::Result<Option<Outcome>> {
    match kernel {
        Kernel::Ep => ep::run(ctx, class, variant),
        Kernel::Is => is::run(ctx, class, variant),
        Kernel::Cg => cg::run(ctx, class, variant),
        Kernel::Mg => mg::run(ctx, class, variant),
        Kernel::Ft => ft::run(ctx, class, variant),
    }
}
