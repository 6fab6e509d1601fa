//! The `tabd` binary: parse the command line, set up logging, run the command.

use std::process::ExitCode;

use clap::Parser;
use tabd::cli::Cli;
use tabd::environment::Env;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let env = Env::from_process();
    init_logging(&env);
    match tabd::commands::run(cli, env) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("error: {}", e.message);
            ExitCode::from(e.code)
        }
    }
}

/// `tracing` to stderr, filtered by `TABD_LOG` or `RUST_LOG` (default `info`, with rmcp's
/// per-session chatter at `warn`: tabd says itself what a server did); no timestamps under
/// journald, which adds its own.
fn init_logging(env: &Env) {
    use tracing_subscriber::EnvFilter;
    let filter = env
        .get("TABD_LOG")
        .or_else(|| env.get("RUST_LOG"))
        .unwrap_or("info,rmcp=warn");
    use std::io::IsTerminal;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::new(filter))
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false);
    if env.get("JOURNAL_STREAM").is_some() {
        builder.without_time().with_ansi(false).init();
    } else {
        builder.init();
    }
}
