//! What can be wrong with a request to run an application, as values a caller can match;
//! each carries the one-line message the driver prints, naming the way out.
//!
//! This module must never run anything.

/// Why an application cannot run as asked.
///
/// ```
/// use tessera_apps::{AppError, App};
/// let err = "qr".parse::<App>().unwrap_err();
/// assert!(matches!(&err, AppError::UnknownName { what: "application", given, .. } if given == "qr"));
/// assert!(err.to_string().contains("summa"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AppError {
    /// `given` is not a known name of its kind (application, variant, matrix).
    #[error("{message}")]
    UnknownName {
        /// What the name should have named.
        what: &'static str,
        /// The name as given.
        given: String,
        /// The message, listing the names allowed.
        message: String,
    },
    /// A problem's argument (named by its command-line option) is out of range or does
    /// not fit the others.
    #[error("{message}")]
    BadArgument {
        /// The option that sets it (`--size`, `--grid`, …).
        option: &'static str,
        /// The message, saying what is allowed.
        message: String,
    },
    /// What was asked for is not in this build or not on this conduit.
    #[error("{0}")]
    Unavailable(String),
}

impl AppError {
    pub(crate) fn unknown(what: &'static str, given: &str, message: String) -> AppError {
        AppError::UnknownName {
            what,
            given: given.to_string(),
            message,
        }
    }
}

impl From<AppError> for tessera::Error {
    fn from(e: AppError) -> tessera::Error {
        tessera::Error::Application(Box::new(e))
    }
}
