//! The one error type of the crate. Bindings map each kind to a Python exception in one place.

use std::fmt;
use std::sync::Arc;

/// What went wrong, classified the way Python users expect to catch it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// A value of the wrong type (maps to `TypeError`).
    Type,
    /// A value of the right type but out of its domain (maps to `ValueError`).
    Value,
    /// An index or dimension out of range (maps to `IndexError`).
    Index,
    /// Anything detected while running: shapes, graph state, in-place checks (maps to `RuntimeError`).
    Runtime,
    /// Not implemented for these arguments (maps to `NotImplementedError`).
    NotImplemented,
}

/// An error raised by a user callback (a custom Function or hook), carried through the engine
/// unchanged so the bindings can re-raise the original exception.
pub type External = Arc<dyn std::any::Any + Send + Sync>;

/// The crate's error: a kind and a torch-like message, or an external error passed through.
#[derive(Clone)]
pub enum Error {
    /// An error produced by ferrograd itself.
    Msg(ErrorKind, String),
    /// An error produced by user code called from the engine (e.g. a Python exception).
    External(External, String),
}

impl Error {
    /// A `RuntimeError`.
    pub fn runtime(msg: impl Into<String>) -> Self {
        Error::Msg(ErrorKind::Runtime, msg.into())
    }
    /// A `TypeError`.
    pub fn type_error(msg: impl Into<String>) -> Self {
        Error::Msg(ErrorKind::Type, msg.into())
    }
    /// A `ValueError`.
    pub fn value(msg: impl Into<String>) -> Self {
        Error::Msg(ErrorKind::Value, msg.into())
    }
    /// An `IndexError`.
    pub fn index(msg: impl Into<String>) -> Self {
        Error::Msg(ErrorKind::Index, msg.into())
    }
    /// A `NotImplementedError`.
    pub fn not_implemented(msg: impl Into<String>) -> Self {
        Error::Msg(ErrorKind::NotImplemented, msg.into())
    }
    /// The kind of error; external errors report `Runtime`.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Msg(k, _) => k.clone(),
            Error::External(..) => ErrorKind::Runtime,
        }
    }
    /// The message text.
    pub fn message(&self) -> &str {
        match self {
            Error::Msg(_, m) | Error::External(_, m) => m,
        }
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Msg(k, m) => write!(f, "{k:?}: {m}"),
            Error::External(_, m) => write!(f, "External: {m}"),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for Error {}

/// The crate's result type.
pub type Result<T> = std::result::Result<T, Error>;
