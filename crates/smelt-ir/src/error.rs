//! The one error type of smelt: a kind, a message and its context; no backtrace (cheap to
//! create). Every construction site names the kind: `bail!(InvalidModel, "...")`,
//! `err!(InvalidInput, "...")`, `ensure!(cond, Unsupported, "...")`.

use std::fmt;

/// What went wrong, as a caller acts on it (the server maps kinds to status codes, Python
/// to exception types, the command line to exit codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The model (file, graph, attribute, weight, artifact) is malformed or inconsistent.
    InvalidModel,
    /// A caller's input (tensor, shape, name, option, request) does not fit the model.
    InvalidInput,
    /// Valid, but not something smelt does (an op, a type, a combination).
    Unsupported,
    /// A limit was reached: memory, tensor size, node count, nesting depth.
    ResourceExhausted,
    /// The run was cancelled through its handle.
    Cancelled,
    /// The run passed its deadline.
    DeadlineExceeded,
    /// An I/O failure outside the model's content (a file that cannot be read or written).
    Io,
    /// A bug in smelt: an invariant did not hold. Tests fail on one.
    Internal,
}

impl ErrorKind {
    /// The exit code the command-line tools (`smelt`, `smelt-run`) end with on an error of
    /// this kind (`smelt --help` lists them).
    pub fn exit_code(self) -> u8 {
        match self {
            ErrorKind::InvalidModel => 3,
            ErrorKind::InvalidInput => 4,
            ErrorKind::Unsupported => 5,
            ErrorKind::ResourceExhausted => 6,
            ErrorKind::Cancelled | ErrorKind::DeadlineExceeded => 7,
            ErrorKind::Io => 8,
            ErrorKind::Internal => 9,
        }
    }

    /// The kind's name in snake case (`invalid_model`, ...), as reports and logs print it.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::InvalidModel => "invalid_model",
            ErrorKind::InvalidInput => "invalid_input",
            ErrorKind::Unsupported => "unsupported",
            ErrorKind::ResourceExhausted => "resource_exhausted",
            ErrorKind::Cancelled => "cancelled",
            ErrorKind::DeadlineExceeded => "deadline_exceeded",
            ErrorKind::Io => "io",
            ErrorKind::Internal => "internal",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An error: its kind, the innermost message, then the context it was seen in, outermost last.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    message: String,
    context: Vec<String>,
}

/// Result with smelt's error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A new error of a kind with a message.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            kind,
            message: message.into(),
            context: Vec::new(),
        }
    }

    /// Adds where the error was seen (e.g. "node conv_17 (Conv)").
    pub fn context(mut self, ctx: impl Into<String>) -> Self {
        self.context.push(ctx.into());
        self
    }

    /// The same error with another kind (for a caller that knows better, e.g. a failure
    /// while folding a constant is the model's fault, not the input's).
    pub fn with_kind(mut self, kind: ErrorKind) -> Self {
        self.kind = kind;
        self
    }

    /// What went wrong, as a caller acts on it.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The innermost message, without context.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The context strings, innermost first.
    pub fn contexts(&self) -> &[String] {
        &self.context
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
        let kind = match e.kind() {
            std::io::ErrorKind::OutOfMemory => ErrorKind::ResourceExhausted,
            _ => ErrorKind::Io,
        };
        Error::new(kind, e.to_string())
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

/// Returns early with a formatted [`Error`] of a kind: `bail!(InvalidModel, "...", args)`.
#[macro_export]
macro_rules! bail {
    ($kind:ident, $($arg:tt)+) => {
        return Err($crate::Error::new($crate::ErrorKind::$kind, format!($($arg)+)))
    };
}

/// Builds a formatted [`Error`] of a kind: `err!(InvalidInput, "...", args)`.
#[macro_export]
macro_rules! err {
    ($kind:ident, $($arg:tt)+) => {
        $crate::Error::new($crate::ErrorKind::$kind, format!($($arg)+))
    };
}

/// Returns early with a formatted error of a kind unless the condition holds:
/// `ensure!(cond, Unsupported, "...", args)`.
#[macro_export]
macro_rules! ensure {
    ($cond:expr, $kind:ident, $($arg:tt)+) => { if !$cond { $crate::bail!($kind, $($arg)+) } };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fails(kind: bool) -> Result<()> {
        if kind {
            bail!(InvalidInput, "input '{}' is bad", "x");
        }
        ensure!(1 + 1 == 3, Unsupported, "arithmetic");
        Ok(())
    }

    #[test]
    fn kinds_survive_context() {
        let e = fails(true).unwrap_err().context("session");
        assert_eq!(e.kind(), ErrorKind::InvalidInput);
        assert_eq!(e.to_string(), "session: input 'x' is bad");
        assert_eq!(fails(false).unwrap_err().kind(), ErrorKind::Unsupported);
        assert_eq!(
            err!(ResourceExhausted, "{} bytes", 5).kind(),
            ErrorKind::ResourceExhausted
        );
    }
}
