//! The crate's error type.

use std::fmt;
use std::io;

/// Everything that can go wrong while setting up or driving a TUN host.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A system call failed; `context` says what we were doing.
    Io {
        /// What was being attempted, e.g. "open TUN device hwtun0".
        context: String,
        /// The underlying OS error.
        source: io::Error,
    },
    /// An external command (`ip`, ...) exited unsuccessfully.
    Command {
        /// The full command line as run.
        command: String,
        /// Exit status code, `None` if killed by a signal.
        status: Option<i32>,
        /// What the command printed on stderr (trimmed).
        stderr: String,
    },
    /// A namespace or interface name is not acceptable.
    InvalidName {
        /// The rejected name.
        name: String,
        /// Why it was rejected.
        reason: &'static str,
    },
    /// A helper thread (e.g. one running inside a namespace) panicked.
    ThreadPanicked {
        /// The thread's name.
        thread: String,
        /// The panic message, if it was a string.
        message: String,
    },
    /// The TCP engine refused an application command.
    Engine(hollywood_tcp::Error),
    /// Host mode ([`crate::hostmode`]) cannot go on; the message is one
    /// line saying what is missing or in the way and what to do.
    HostMode(String),
}

impl Error {
    /// Wrap an I/O error with a description of what was attempted.
    pub fn io(context: impl Into<String>, source: io::Error) -> Error {
        Error::Io {
            context: context.into(),
            source,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { context, source } => write!(f, "{context}: {source}"),
            Error::Command {
                command,
                status: Some(code),
                stderr,
            } => {
                write!(
                    f,
                    "command `{command}` failed with exit code {code}: {stderr}"
                )
            }
            Error::Command {
                command,
                status: None,
                stderr,
            } => {
                write!(f, "command `{command}` was killed by a signal: {stderr}")
            }
            Error::InvalidName { name, reason } => write!(f, "invalid name {name:?}: {reason}"),
            Error::ThreadPanicked { thread, message } => {
                write!(f, "thread {thread:?} panicked: {message}")
            }
            Error::Engine(e) => write!(f, "TCP engine: {e}"),
            Error::HostMode(m) => write!(f, "host mode: {m}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            Error::Engine(e) => Some(e),
            _ => None,
        }
    }
}

impl From<hollywood_tcp::Error> for Error {
    fn from(e: hollywood_tcp::Error) -> Error {
        Error::Engine(e)
    }
}

/// Result alias for this crate.
pub type Result<T> = std::result::Result<T, Error>;
