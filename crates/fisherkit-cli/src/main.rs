//! The `fisherkit` command-line tool: argument parsing, files, progress bars
//! and error reports around the `fisherkit` library. Nothing algorithmic
//! lives here.
//!
//! Every failure prints one line `error: <message>` on stderr and exits with
//! status 2 (bad usage) or 1 (anything else); outputs are written atomically
//! at the very end, so a failed run leaves no output file.

use fisherkit_cli::error::CliError;
use fisherkit_cli::{args, commands, error, progress};
use std::io::Write;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = match args::Cli::try_parse_args(std::env::args_os()) {
        Ok(cli) => cli,
        Err(e) => return error::report_clap(e),
    };
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.code == 0 => ExitCode::SUCCESS,
        Err(e) => {
            let mut stderr = std::io::stderr().lock();
            let _ = writeln!(stderr, "error: {}", e.message);
            ExitCode::from(e.code)
        }
    }
}

fn run(cli: args::Cli) -> Result<(), CliError> {
    if let Some(n) = cli.threads {
        if n == 0 {
            return Err(CliError::usage("--threads must be at least 1"));
        }
        rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build_global()
            .map_err(|e| CliError::other(format!("cannot start {n} threads: {e}")))?;
    }
    let ui = progress::Ui::new(cli.quiet);
    match cli.command {
        args::Command::Gmm {
            command: args::GmmCommand::Fit(a),
        } => commands::gmm::fit(&a, &ui),
        args::Command::Kmeans {
            command: args::KmeansCommand::Fit(a),
        } => commands::kmeans::fit(&a, &ui),
        args::Command::Mfa {
            command: args::MfaCommand::Fit(a),
        } => commands::mfa::fit(&a, &ui),
        args::Command::Mfa {
            command: args::MfaCommand::Whiten(a),
        } => commands::whiten::run(&a, &ui),
        args::Command::Encode(a) => commands::encode::run(&a, &ui),
        args::Command::Run(a) => commands::pipeline::run_cmd(&a, &ui),
        args::Command::Predict(a) => commands::predict::predict_cmd(&a, &ui),
        args::Command::Evaluate(a) => commands::predict::evaluate_cmd(&a, &ui),
        args::Command::Demo(a) => commands::pipeline::demo_cmd(&a, &ui),
    }
}
