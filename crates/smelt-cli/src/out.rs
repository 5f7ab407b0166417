//! Writing to stdout and stderr without panicking when the reader has gone away
//! (`smelt inspect MODEL | head`): `println!` panics with "failed printing to stdout:
//! Broken pipe". Through [`outln!`]/[`out!`], output to a closed stdout stops quietly: the
//! command finishes its work (files it writes, its exit status) and says nothing more.
//! Through [`errln!`], a closed stderr is ignored.

use std::fmt;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once stdout cannot be written any more.
static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);
/// Set when writing stdout failed for another reason than a reader gone away.
static STDOUT_FAILED: AtomicBool = AtomicBool::new(false);

/// Whether output was lost for another reason than a closed pipe (a full disk): the
/// command then fails.
pub fn stdout_failed() -> bool {
    STDOUT_FAILED.load(Ordering::Relaxed)
}

/// Prints a line to stdout; see the module docs.
#[macro_export]
macro_rules! outln {
    () => { $crate::out::stdout(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::out::stdout(format_args!("{}\n", format_args!($($arg)*))) };
}

/// Prints to stdout without a newline; see the module docs.
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => { $crate::out::stdout(format_args!($($arg)*)) };
}

/// Prints a line to stderr, ignoring a stderr that cannot be written.
#[macro_export]
macro_rules! errln {
    ($($arg:tt)*) => { $crate::out::stderr(format_args!("{}\n", format_args!($($arg)*))) };
}

/// Writes to stdout, nothing once its reader has gone away; another write error is said
/// once on stderr, stdout is then left alone too, and [`stdout_failed`] tells.
pub fn stdout(args: fmt::Arguments) {
    if STDOUT_CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut o = std::io::stdout().lock();
    if let Err(e) = o.write_fmt(args).and_then(|()| o.flush()) {
        STDOUT_CLOSED.store(true, Ordering::Relaxed);
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            STDOUT_FAILED.store(true, Ordering::Relaxed);
            stderr(format_args!("error: cannot write to stdout: {e}\n"));
        }
    }
}

/// Writes to stderr; an error is ignored (there is nowhere left to report it).
pub fn stderr(args: fmt::Arguments) {
    let _ = std::io::stderr().lock().write_fmt(args);
}
