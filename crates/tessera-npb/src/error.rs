//! What can be wrong with a request to run a kernel, as values a caller can match: a name
//! that is not known, a rank count or class a kernel does not run at, a bad setting.
//! Each carries the one-line message the driver prints, which says what is allowed.
//!
//! This module must never read the environment or run anything.

use crate::Class;

/// Which kind of name an [`NpbError::UnknownName`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameKind {
    /// A kernel (`ep`, `is`, …).
    Kernel,
    /// A problem class (`S` to `D`).
    Class,
    /// A kernel's variant.
    Variant,
    /// An instruction-set level (`TESSERA_SIMD`).
    SimdLevel,
}

/// Why a kernel cannot run as asked.
///
/// ```
/// use tessera_npb::{Kernel, NpbError};
/// let err = Kernel::Cg.check_ranks(6).unwrap_err();
/// assert!(matches!(err, NpbError::Ranks { kernel: "cg", ranks: 6, .. }));
/// assert_eq!(err.to_string(), "cg runs on a power-of-two number of ranks, not 6");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NpbError {
    /// `given` is not a known name of its kind; the message lists the known ones.
    #[error("{message}")]
    UnknownName {
        /// What the name should have named.
        kind: NameKind,
        /// The name as given.
        given: String,
        /// The message, listing the names allowed.
        message: String,
    },
    /// The kernel does not run on `ranks` ranks.
    #[error("{message}")]
    Ranks {
        /// The kernel's name.
        kernel: &'static str,
        /// The rank count asked for.
        ranks: usize,
        /// The message, saying which counts it runs on.
        message: String,
    },
    /// The kernel runs `class` (with the variant asked for) on other rank counts only.
    #[error("{message}")]
    ClassLimit {
        /// The kernel's name.
        kernel: &'static str,
        /// The class asked for.
        class: Class,
        /// The rank count asked for.
        ranks: usize,
        /// The message, saying what would run.
        message: String,
    },
    /// A kernel setting (`TESSERA_SIMD`, `TESSERA_MG_FUSED`, `TESSERA_NPB_PROGRESS`) has
    /// a value it does not take.
    #[error("{message}")]
    Setting {
        /// The environment variable.
        variable: &'static str,
        /// The message, naming the variable and the values it takes.
        message: String,
    },
}

impl NpbError {
    pub(crate) fn unknown(kind: NameKind, given: &str, message: String) -> NpbError {
        NpbError::UnknownName {
            kind,
            given: given.to_string(),
            message,
        }
    }

    pub(crate) fn ranks(kernel: &'static str, ranks: usize, message: String) -> NpbError {
        NpbError::Ranks {
            kernel,
            ranks,
            message,
        }
    }
}

impl From<NpbError> for tessera::Error {
    fn from(e: NpbError) -> tessera::Error {
        tessera::Error::Application(Box::new(e))
    }
}
