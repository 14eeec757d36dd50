//! A program whose output is piped into `head` finds the pipe closed after a few lines.
//! A C tool then dies quietly of `SIGPIPE`, the signal a write to a closed pipe raises. The
//! Rust runtime ignores that signal, so the write fails instead and the next `println!`
//! panics with "failed printing to stdout". Putting the default back makes our binaries stop
//! the way `cat` and `grep` do.

/// Makes a closed stdout end the program quietly, as it ends a C tool (on Unix; elsewhere
/// this does nothing). Called first in `main` by the binaries that write their results to
/// stdout; the servers (chapters 11 and 12) leave it alone, since they write to sockets
/// whose peers may go away at any time.
pub fn quiet_when_closed() {
    #[cfg(unix)]
    // SAFETY: `signal` with a valid signal number and `SIG_DFL` only changes how the process
    // answers that one signal; no handler of ours runs.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
