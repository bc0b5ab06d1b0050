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
//! [`ft`] (3-D FFT with transposes written straight into place). Large private arrays
//! sit on huge pages ([`tessera::HugePageArray`]).
//!
//! This crate must never bypass Tessera's communication: kernels use the global address
//! space, teams and collectives like any other program.

use tessera::coll::Gather;
use tessera::Blocking;
/// Define a kernel's variants: an enum with a name per variant (the first is the
/// default), `ALL`, `NAMES`, `Display` and `FromStr` (whose error lists the names).
macro_rules! variants {
    ($(#[$meta:meta])* $vis:vis enum $name:ident {
        $($(#[$vmeta:meta])* $v:ident => $text:literal),+ $(,)?
    }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        $vis enum $name {
            $($(#[$vmeta])* $v),+
        }

        impl $name {
            /// Every variant, the default first.
            pub const ALL: &'static [$name] = &[$($name::$v),+];
            /// Their names, in the same order.
            pub const NAMES: &'static [&'static str] = &[$($text),+];

            /// The name, as `--variant` takes it.
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$v => $text),+
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }

        impl std::str::FromStr for $name {
            type Err = $crate::NpbError;
            fn from_str(s: &str) -> Result<Self, $crate::NpbError> {
                $name::ALL
                    .iter()
                    .copied()
                    .find(|v| v.name() == s)
                    .ok_or_else(|| {
                        $crate::NpbError::unknown(
                            $crate::NameKind::Variant,
                            s,
                            format!("no variant {s:?}; variants: {}", $name::NAMES.join(", ")),
                        )
                    })
            }
        }
    };
}

pub mod cg;
pub mod ep;
pub mod error;
pub mod ft;
pub mod hardware;
pub mod is;
pub mod mg;
pub mod report;
pub mod rng;
pub mod simd;

use std::fmt;
use std::str::FromStr;

use tessera::{Context, CoreError};

pub use error::{NameKind, NpbError};
pub use report::Outcome;

/// One NPB kernel as the driver sees it: its name, the rank counts, variants and classes it
/// takes, what each rank holds, and how it runs. Each kernel's module implements it on a
/// unit struct; [`Kernel::benchmark`] is the registry.
pub trait Benchmark: Sync {
    /// Lower-case name, as `tessera npb` takes it.
    fn name(&self) -> &'static str;
    /// Variant names, the default first.
    fn variants(&self) -> &'static [&'static str];
    /// Which rank counts it runs on, as an error saying so if `ranks` is not one.
    fn check_ranks(&self, ranks: usize) -> Result<(), NpbError>;
    /// Limits that depend on the class or the variant (`variant` is one of
    /// [`Benchmark::variants`]), as an error saying what would run.
    fn check_class(&self, _class: Class, _variant: &str, _ranks: usize) -> Result<(), NpbError> {
        Ok(())
    }
    /// What one rank holds at `class` on `ranks` ranks.
    fn footprint(&self, class: Class, ranks: usize) -> Footprint;
    /// Run on every rank of `ctx`'s job; rank 0 gets the outcome. `variant` is parsed here,
    /// once.
    fn run(&self, ctx: &Context, class: Class, variant: &str) -> tessera::Result<Option<Outcome>>;
    /// What `outcome`'s timed region needed of the resource that limits the kernel: the
    /// bytes it must move through memory, or its floating-point operations.
    fn demand(&self, class: Class, outcome: &Outcome) -> hardware::Demand;
}

/// Parse a kernel's variant, naming the kernel in the error.
pub(crate) fn parse_variant<V: FromStr<Err = NpbError>>(
    kernel: &str,
    variant: &str,
) -> tessera::Result<V> {
    variant.parse().map_err(|e| {
        CoreError::BadArgument {
            call: "npb",
            argument: "variant",
            why: format!("{kernel} has {e}"),
        }
        .into()
    })
}

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

    /// The kernel's implementation. Registering a new kernel is its variant above and its
    /// row here.
    pub fn benchmark(self) -> &'static dyn Benchmark {
        match self {
            Kernel::Ep => &ep::Ep,
            Kernel::Is => &is::Is,
            Kernel::Cg => &cg::Cg,
            Kernel::Mg => &mg::Mg,
            Kernel::Ft => &ft::Ft,
        }
    }

    /// Lower-case name.
    pub fn name(self) -> &'static str {
        self.benchmark().name()
    }

    /// Variants (the first is the default).
    pub fn variants(self) -> &'static [&'static str] {
        self.benchmark().variants()
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
    pub fn check_run(self, class: Class, variant: &str, ranks: usize) -> Result<(), NpbError> {
        self.check_ranks(ranks)?;
        if !self.variants().contains(&variant) {
            return Err(NpbError::unknown(
                NameKind::Variant,
                variant,
                format!(
                    "{self} has no variant {variant:?}; variants: {}",
                    self.variants().join(", ")
                ),
            ));
        }
        self.benchmark().check_class(class, variant, ranks)
    }

    /// What one rank holds at `class` on `ranks` ranks (see [`Footprint`]).
    ///
    /// ```
    /// use tessera_npb::{Class, Kernel};
    /// // FT class C: 512³ complex numbers (2 GiB), held four times over, split in two.
    /// assert_eq!(Kernel::Ft.footprint(Class::C, 2).total(), 4 << 30);
    /// ```
    pub fn footprint(self, class: Class, ranks: usize) -> Footprint {
        self.benchmark().footprint(class, ranks)
    }

    /// Which rank counts the kernel runs on, as an error saying so if `ranks` is not one.
    pub fn check_ranks(self, ranks: usize) -> Result<(), NpbError> {
        self.benchmark().check_ranks(ranks)
    }
}

impl fmt::Display for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Kernel {
    type Err = NpbError;
    fn from_str(s: &str) -> Result<Self, NpbError> {
        let names: Vec<&str> = Kernel::ALL.iter().map(|k| k.name()).collect();
        if let Some(&k) = Kernel::ALL
            .iter()
            .find(|k| k.name().eq_ignore_ascii_case(s))
        {
            return Ok(k);
        }
        let message = if ["lu", "sp", "bt"].contains(&s.to_ascii_lowercase().as_str()) {
            format!(
                "kernel {s} is not implemented yet; available: {}",
                names.join(", ")
            )
        } else {
            format!(
                "unknown kernel {s:?}; available: {} (or `all`)",
                names.join(", ")
            )
        };
        Err(NpbError::unknown(NameKind::Kernel, s, message))
    }
}

/// What one rank of a kernel holds, in bytes: in its segment of the global address space,
/// and privately. An upper bound over the kernel's variants, without the runtime's own
/// few megabytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Footprint {
    /// Collectively allocated: the segment must hold this.
    pub segment: usize,
    /// Private arrays.
    pub private: usize,
}

impl Footprint {
    /// Both together.
    pub fn total(self) -> usize {
        self.segment + self.private
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
    /// Class C.
    C,
    /// Class D: its official values are deliberately not carried here, so a class D run
    /// prints its computed values with `Verification = NOT PERFORMED`.
    D,
}

impl Class {
    /// Every class.
    pub const ALL: [Class; 6] = [Class::S, Class::W, Class::A, Class::B, Class::C, Class::D];

    /// Whether this crate carries the class's official verification values.
    ///
    /// ```
    /// use tessera_npb::Class;
    /// assert!(Class::C.verifiable());
    /// assert!(!Class::D.verifiable());
    /// ```
    pub fn verifiable(self) -> bool {
        self != Class::D
    }
}

/// The row of `table` for `class`: every kernel's table has a row for every class, which
/// a unit test checks.
pub(crate) fn class_data<T>(table: &[T], class_of: impl Fn(&T) -> Class, class: Class) -> &T {
    table
        .iter()
        .find(|row| class_of(row) == class)
        .expect("every kernel's class table has a row for every class")
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Class::S => "S",
            Class::W => "W",
            Class::A => "A",
            Class::B => "B",
            Class::C => "C",
            Class::D => "D",
        })
    }
}

impl FromStr for Class {
    type Err = NpbError;
    fn from_str(s: &str) -> Result<Self, NpbError> {
        let unknown = |message| Err(NpbError::unknown(NameKind::Class, s, message));
        match s {
            "S" | "s" => Ok(Class::S),
            "W" | "w" => Ok(Class::W),
            "A" | "a" => Ok(Class::A),
            "B" | "b" => Ok(Class::B),
            "C" | "c" => Ok(Class::C),
            "D" | "d" => Ok(Class::D),
            "E" | "e" | "F" | "f" => unknown(format!(
                "class {s} is not supported: its arrays exceed one machine's memory; classes are S, W, A, B, C, D"
            )),
            _ => unknown(format!("unknown class {s:?}; classes are S, W, A, B, C, D")),
        }
    }
}

/// Run `kernel` at `class` on this rank; rank 0 gets the outcome, with the instruction-set
/// level and every rank's memory filled in.
pub fn run(
    ctx: &tessera::Context,
    kernel: Kernel,
    class: Class,
    variant: &str,
) -> tessera::Result<Option<Outcome>> {
    let outcome = kernel.benchmark().run(ctx, class, variant)?;
    let world = tessera::Team::world(ctx)?;
    let mut gathered = vec![
        0u64;
        if world.rank() == 0 {
            2 * world.size()
        } else {
            0
        }
    ];
    let mine = [
        peak_resident_bytes(),
        RESIDENT_SHARE.load(std::sync::atomic::Ordering::Relaxed),
    ];
    world.run(Gather::new(0, &mine).to(&mut gathered), Blocking)?;
    Ok(outcome.map(|o| Outcome {
        demand: Some(kernel.benchmark().demand(class, &o)),
        simd: simd::level().to_string(),
        peak_rss_bytes: gathered.iter().step_by(2).copied().collect(),
        resident_share_bytes: gathered.iter().skip(1).step_by(2).copied().collect(),
        ..o
    }))
}

/// The largest [`resident_share_bytes`] noted so far in this process.
static RESIDENT_SHARE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Progress of a kernel's timed iterations, told on standard error by rank 0 so that a
/// long run (CG D takes most of an hour on two cores) is visibly alive: once
/// `TESSERA_NPB_PROGRESS` seconds (default 30) have passed, a line at every tenth of the
/// iterations. Short runs print nothing, and the check costs one clock read an iteration.
/// `TESSERA_NPB_PROGRESS`: seconds after which rank 0 reports progress (default 30).
fn progress_after() -> Result<f64, NpbError> {
    const DEFAULT: f64 = 30.0;
    const VARIABLE: &str = "TESSERA_NPB_PROGRESS";
    tessera::config::seconds_or_zero(VARIABLE)
        .map(|s| s.unwrap_or(DEFAULT))
        .map_err(|e| NpbError::Setting {
            variable: VARIABLE,
            message: e.to_string(),
        })
}

/// Check the kernels' own settings (`TESSERA_SIMD`, `TESSERA_MG_FUSED`,
/// `TESSERA_MG_GRID`, `TESSERA_NPB_PROGRESS`) before any rank starts, each error naming
/// the variable.
///
/// ```
/// tessera_npb::check_settings().unwrap();
/// ```
pub fn check_settings() -> Result<(), NpbError> {
    simd::Level::choose(tessera::config::text(simd::ENV).as_deref())?;
    mg::fused_bytes()?;
    mg::grid_in_force(1)?;
    progress_after().map(|_| ())
}

pub(crate) struct Progress {
    kernel: &'static str,
    total: usize,
    start: std::time::Instant,
    after: f64,
    tell: bool,
    /// Iterations between lines (a tenth of them).
    step: usize,
    /// The next count that gets a line.
    next: usize,
}

impl Progress {
    /// Progress of `total` iterations of `kernel` on rank `rank`; an error names a
    /// `TESSERA_NPB_PROGRESS` that is not a number of seconds.
    pub(crate) fn new(kernel: &'static str, total: usize, rank: usize) -> tessera::Result<Self> {
        let after = progress_after()?;
        Ok(Progress {
            kernel,
            total,
            start: std::time::Instant::now(),
            after,
            tell: rank == 0,
            step: total.div_ceil(10).max(1),
            next: total.div_ceil(10).max(1),
        })
    }

    /// `done` iterations are finished.
    pub(crate) fn done(&mut self, done: usize) {
        if !self.tell || done < self.next {
            return;
        }
        self.next = (done / self.step + 1) * self.step;
        let seconds = self.start.elapsed().as_secs_f64();
        if seconds >= self.after {
            eprintln!(
                "{}: iteration {done}/{}, {seconds:.0} s so far",
                self.kernel, self.total
            );
        }
    }
}

/// Note this process's share of resident memory; kernels call it at the end of their timed
/// region, while every array is held.
pub(crate) fn note_resident_share() {
    RESIDENT_SHARE.fetch_max(resident_share_bytes(), std::sync::atomic::Ordering::Relaxed);
}

/// This process's proportional share of resident memory in bytes (`Pss` of
/// `/proc/self/smaps_rollup`): a page shared by k processes counts 1/k in each, so the
/// shares of a job's ranks add up to what the job holds. 0 where the system does not say.
pub fn resident_share_bytes() -> u64 {
    tessera::job::proc_bytes("/proc/self/smaps_rollup", "Pss:").unwrap_or(0)
}

/// This process's peak resident memory in bytes (`VmHWM` of `/proc/self/status`), or 0
/// where the system does not say. Pages of the shared segment count in every process that
/// touched them, so across ranks these overlap.
pub fn peak_resident_bytes() -> u64 {
    tessera::job::proc_bytes("/proc/self/status", "VmHWM:").unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kernel's table has exactly one row per class, and carries official values
    /// exactly for the classes that are verifiable.
    #[test]
    fn every_class_is_wired_in_every_kernel() {
        for class in Class::ALL {
            let rows = |found: usize, name: &str| assert_eq!(found, 1, "{name} class {class}");
            let count =
                |classes: &mut dyn Iterator<Item = Class>| classes.filter(|&c| c == class).count();
            rows(count(&mut ep::CLASSES.iter().map(|c| c.class)), "ep");
            rows(count(&mut is::CLASSES.iter().map(|c| c.class)), "is");
            rows(count(&mut cg::CLASSES.iter().map(|c| c.class)), "cg");
            rows(count(&mut mg::CLASSES.iter().map(|c| c.class)), "mg");
            rows(count(&mut ft::CLASSES.iter().map(|c| c.class)), "ft");
            let v = class.verifiable();
            assert_eq!(
                class_data(&ep::CLASSES, |c| c.class, class).sums.is_some(),
                v
            );
            assert_eq!(
                class_data(&is::CLASSES, |c| c.class, class).tests.is_some(),
                v
            );
            assert_eq!(
                class_data(&cg::CLASSES, |c| c.class, class).zeta.is_some(),
                v
            );
            assert_eq!(
                class_data(&mg::CLASSES, |c| c.class, class).rnm2.is_some(),
                v
            );
            let ft = class_data(&ft::CLASSES, |c| c.class, class);
            assert_eq!(ft.checksums.len(), if v { ft.niter } else { 0 });
            assert_eq!(class.to_string().parse::<Class>(), Ok(class));
        }
        let err = "E".parse::<Class>().unwrap_err();
        assert!(
            matches!(&err, NpbError::UnknownName { kind: NameKind::Class, given, .. } if given == "E"),
            "{err:?}"
        );
        assert!(err.to_string().contains("memory"), "{err}");
    }

    /// Class C's IS test ranks follow the specification's rule from its first row: the
    /// first three rise by one per iteration, the last two fall.
    #[test]
    fn class_c_is_test_ranks_follow_the_shift_rule() {
        let tests = class_data(&is::CLASSES, |c| c.class, Class::C)
            .tests
            .unwrap();
        for (it, row) in tests.ranks.iter().enumerate() {
            for (i, (&now, &first)) in row.iter().zip(&tests.ranks[0]).enumerate() {
                let step = if i <= 2 { it as i64 } else { -(it as i64) };
                assert_eq!(now as i64, first as i64 + step);
            }
        }
    }
}
