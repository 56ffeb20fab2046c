//! One-line error reports and exit codes.

use std::fmt::Display;
use std::io::Write;
use std::process::ExitCode;

/// Exit status of a usage error (bad flags or option values).
pub const EXIT_USAGE: u8 = 2;
/// Exit status of every other failure (files, data, numerics).
pub const EXIT_FAILURE: u8 = 1;

/// A failure to report: the message (without the `error: ` prefix) and the
/// exit status.
#[derive(Debug)]
pub struct CliError {
    pub message: String,
    pub code: u8,
}

impl CliError {
    /// A usage error (exit status 2).
    pub fn usage(message: impl Display) -> Self {
        Self {
            message: message.to_string(),
            code: EXIT_USAGE,
        }
    }

    /// The reader of standard output went away (`fisherkit predict … | head`):
    /// stop quietly with status 0, as Unix tools do.
    pub fn closed_pipe() -> Self {
        Self {
            message: String::new(),
            code: 0,
        }
    }

    /// Any other failure (exit status 1).
    pub fn other(message: impl Display) -> Self {
        Self {
            message: message.to_string(),
            code: EXIT_FAILURE,
        }
    }
}

impl From<fisherkit_io::IoError> for CliError {
    fn from(e: fisherkit_io::IoError) -> Self {
        CliError::other(e)
    }
}

/// Reports a clap parse failure: `--help` and `--version` print normally and
/// succeed; a usage error is flattened to one `error: …` line (clap's tips
/// kept, its usage block dropped) with exit status 2.
pub fn report_clap(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp
        | ErrorKind::DisplayVersion
        | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = e.print();
            if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                ExitCode::from(EXIT_USAGE)
            } else {
                ExitCode::SUCCESS
            }
        }
        _ => {
            let text = e.render().to_string();
            let mut parts: Vec<String> = Vec::new();
            for line in text.lines() {
                let line = line.trim();
                if line.starts_with("Usage:") || line.starts_with("For more information") {
                    break;
                }
                if !line.is_empty() {
                    parts.push(line.trim_start_matches("error: ").to_string());
                }
            }
            let mut msg = parts.join("; ");
            msg.push_str(" (see `fisherkit --help`)");
            let _ = writeln!(std::io::stderr().lock(), "error: {msg}");
            ExitCode::from(EXIT_USAGE)
        }
    }
}
