//! The one error type of smelt: a message with context, no backtrace (cheap to create).

use std::fmt;

/// An error: the innermost message first, then the context it was seen in, outermost last.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    message: String,
    context: Vec<String>,
}

/// Result with smelt's error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A new error with a message.
    pub fn new(message: impl Into<String>) -> Self {
        Error {
            message: message.into(),
            context: Vec::new(),
        }
    }

    /// Adds where the error was seen (e.g. "node conv_17 (Conv)").
    pub fn context(mut self, ctx: impl Into<String>) -> Self {
        self.context.push(ctx.into());
        self
    }

    /// The innermost message, without context.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in self.context.iter().rev() {
            write!(f, "{c}: ")?;
        }
        write!(f, "{}", self.message)
    }
}

impl std::error::Error for Error {}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::new(e.to_string())
    }
}

/// Adds context to a `Result`'s error.
pub trait ResultExt<T> {
    /// Adds a context string computed only on error.
    fn ctx<S: Into<String>>(self, f: impl FnOnce() -> S) -> Result<T>;
}

impl<T, E: Into<Error>> ResultExt<T> for std::result::Result<T, E> {
    fn ctx<S: Into<String>>(self, f: impl FnOnce() -> S) -> Result<T> {
        self.map_err(|e| e.into().context(f()))
    }
}

/// Returns early with a formatted [`Error`].
#[macro_export]
macro_rules! bail {
    ($($arg:tt)*) => { return Err($crate::Error::new(format!($($arg)*))) };
}

/// Builds a formatted [`Error`].
#[macro_export]
macro_rules! err {
    ($($arg:tt)*) => { $crate::Error::new(format!($($arg)*)) };
}

/// Returns early with a formatted error unless the condition holds.
#[macro_export]
macro_rules! ensure {
    ($cond:expr, $($arg:tt)*) => { if !$cond { $crate::bail!($($arg)*) } };
}
