//! Which instruction-set level the kernels use, and the one place that picks a compiled
//! form by it.
//!
//! A level is detected once per process from the CPU. `TESSERA_SIMD=avx512|avx2|scalar`
//! lowers it (never raises it above what the CPU has), so the AVX2 forms can be measured on
//! an AVX-512 host in the same run as the default. Every kernel asks [`level`] rather than
//! detecting features itself, and the report prints the level used.
//!
//! - `avx512`: the hand-written AVX-512 kernels (`*/avx512.rs`) and the portable code
//!   compiled for AVX-512 (F, VL, BW, DQ with AVX2 and FMA).
//! - `avx2`: the portable code compiled for AVX2 and FMA.
//! - `scalar`: the portable code as built for baseline x86-64 (SSE2), on any CPU.
//!
//! This module must never report a level the CPU lacks: the `unsafe` calls that
//! [`multilevel!`](crate::multilevel) generates rely on it.

use crate::NpbError;
use std::fmt;
use std::str::FromStr;
use std::sync::OnceLock;

/// The environment variable that lowers the level.
pub const ENV: &str = "TESSERA_SIMD";

/// An instruction-set level, lowest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Baseline x86-64 (SSE2) on x86-64, or whatever the target has elsewhere.
    Scalar,
    /// AVX2 with FMA.
    Avx2,
    /// AVX-512 F, VL, BW and DQ (with AVX2 and FMA).
    Avx512,
}

impl Level {
    /// The highest level this CPU has.
    pub fn detect() -> Level {
        #[cfg(target_arch = "x86_64")]
        {
            let avx2 =
                std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma");
            let avx512 = std::is_x86_feature_detected!("avx512f")
                && std::is_x86_feature_detected!("avx512vl")
                && std::is_x86_feature_detected!("avx512bw")
                && std::is_x86_feature_detected!("avx512dq");
            if avx2 && avx512 {
                return Level::Avx512;
            }
            if avx2 {
                return Level::Avx2;
            }
        }
        Level::Scalar
    }

    /// The level to use: the CPU's, lowered by `TESSERA_SIMD` if set, as an error naming
    /// the allowed values if it is not one of them.
    ///
    /// ```
    /// use tessera_npb::simd::Level;
    /// assert_eq!(Level::choose(Some("scalar")), Ok(Level::Scalar));
    /// assert!(Level::choose(Some("sse9")).is_err());
    /// assert_eq!(Level::choose(None), Ok(Level::detect()));
    /// ```
    pub fn choose(requested: Option<&str>) -> Result<Level, NpbError> {
        let cpu = Level::detect();
        match requested.map(str::trim) {
            None | Some("") | Some("native") => Ok(cpu),
            Some(name) => Ok(name.parse::<Level>()?.min(cpu)),
        }
    }

    /// Lower-case name, as `TESSERA_SIMD` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Level::Scalar => "scalar",
            Level::Avx2 => "avx2",
            Level::Avx512 => "avx512",
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Level {
    type Err = NpbError;
    fn from_str(s: &str) -> Result<Self, NpbError> {
        match s.to_ascii_lowercase().as_str() {
            "scalar" => Ok(Level::Scalar),
            "avx2" => Ok(Level::Avx2),
            "avx512" | "avx-512" => Ok(Level::Avx512),
            _ => Err(NpbError::Setting {
                variable: ENV,
                message: format!("{ENV}={s:?} is not a level; use avx512, avx2, scalar or native"),
            }),
        }
    }
}

/// The level this process uses: [`Level::choose`] on `TESSERA_SIMD`, read once. An
/// unknown value falls back to the CPU's level; the `tessera npb` driver refuses it before
/// starting any rank, so a rank never meets one.
pub fn level() -> Level {
    static LEVEL: OnceLock<Level> = OnceLock::new();
    *LEVEL.get_or_init(|| {
        let requested = tessera::config::text(ENV);
        Level::choose(requested.as_deref()).unwrap_or_else(|_| Level::detect())
    })
}

/// Define a function compiled three times (for AVX-512, for AVX2 + FMA, and for the
/// baseline) that runs the form for [`level`] at each call.
///
/// The body is written once, as portable Rust; the compiler vectorises each copy for its
/// level. Rust never fuses a multiply and an add on its own, so all three copies give the
/// same floating-point results. Use it for the hot loops whose speed depends on the vector
/// width; arguments must be plain identifiers with types (no patterns, no generics).
///
/// ```
/// tessera_npb::multilevel! {
///     /// Sum of squares.
///     pub fn sum_squares(x: &[f64]) -> f64 {
///         x.iter().map(|v| v * v).sum()
///     }
/// }
/// assert_eq!(sum_squares(&[1.0, 2.0]), 5.0);
/// ```
#[macro_export]
macro_rules! multilevel {
    ($(#[$meta:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? $body:block) => {
        $(#[$meta])*
        $vis fn $name($($arg: $ty),*) $(-> $ret)? {
            #[inline(always)]
            fn portable($($arg: $ty),*) $(-> $ret)? $body
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512dq,avx2,avx,fma")]
            fn avx512($($arg: $ty),*) $(-> $ret)? {
                portable($($arg),*)
            }
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx2,avx,fma")]
            fn avx2($($arg: $ty),*) $(-> $ret)? {
                portable($($arg),*)
            }
            match $crate::simd::level() {
                #[cfg(target_arch = "x86_64")]
                // SAFETY: `level` reports AVX-512 only when the CPU has every feature
                // this copy is compiled for.
                $crate::simd::Level::Avx512 => unsafe { avx512($($arg),*) },
                #[cfg(target_arch = "x86_64")]
                // SAFETY: `level` reports AVX2 only when the CPU has AVX2 and FMA.
                $crate::simd::Level::Avx2 => unsafe { avx2($($arg),*) },
                _ => portable($($arg),*),
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_never_raises_the_level() {
        let cpu = Level::detect();
        for requested in ["scalar", "avx2", "avx512"] {
            let got = Level::choose(Some(requested)).unwrap();
            assert!(got <= cpu);
            assert_eq!(got, requested.parse::<Level>().unwrap().min(cpu));
        }
        assert_eq!(Level::choose(Some("native")).unwrap(), cpu);
        let err = Level::choose(Some("avx1024")).unwrap_err();
        assert!(
            matches!(err, NpbError::Setting { variable: ENV, .. }),
            "{err:?}"
        );
        let err = err.to_string();
        assert!(
            err.contains("TESSERA_SIMD") && err.contains("avx2"),
            "{err}"
        );
    }

    crate::multilevel! {
        fn dot(a: &[f64], b: &[f64]) -> f64 {
            a.iter().zip(b).map(|(x, y)| x * y).sum()
        }
    }

    #[test]
    fn every_copy_gives_the_same_bits() {
        let a: Vec<f64> = (0..1000).map(|i| (i as f64).sin()).collect();
        let b: Vec<f64> = (0..1000).map(|i| (i as f64).cos()).collect();
        let want: f64 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        assert_eq!(dot(&a, &b).to_bits(), want.to_bits());
    }
}
