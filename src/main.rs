//! The `tabd` binary: parse the command line, set up logging, run the command.

use std::process::ExitCode;

use clap::Parser;
use tabd::base::environment::{Env, Redactor};
use tabd::doors::args::Cli;

fn main() -> ExitCode {
    let cli = Cli::parse();
    if cli.command.only_prints() {
        end_like_a_unix_tool_when_the_reader_leaves();
    }
    let (env, warnings) = with_env_file(Env::from_process());
    init_logging(&env, &cli);
    for w in warnings {
        eprintln!("warning: {}", tabd::base::text::for_terminal(&w));
    }
    let secrets = env.clone();
    match tabd::doors::commands::run(cli, env) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            // An error may quote a note, a role file or a server's answer: never raw to a terminal.
            let message = secrets.redactor().apply(&e.message);
            let message = tabd::base::text::for_terminal(&message);
            // An error that names its file and line reads `path:line: error: …` already.
            if e.located {
                eprintln!("{message}");
            } else {
                eprintln!("error: {message}");
            }
            ExitCode::from(e.code)
        }
    }
}

/// The environment with the env file the user unit reads (`~/.config/tabd/env`) under it, so a
/// key put there for the service is seen by `tabd fire` typed in a shell; and what is wrong with
/// the file (never a value).
fn with_env_file(env: Env) -> (Env, Vec<String>) {
    let Some(file) =
        tabd::base::environment::env_file_path(&env).and_then(|p| tabd::base::environment::EnvFile::read(&p))
    else {
        return (env, Vec::new());
    };
    let warnings = file.warnings.clone();
    (env.with_env_file(&file), warnings)
}

/// `tabd logs | head` closes the pipe early: the command ends as any Unix tool does, by
/// SIGPIPE (the shell says 141), instead of a panic report from `print!`. Only for commands
/// that print and nothing else: a daemon or a run writes to its children's pipes, and a child
/// that died must be an error there, not the end of tabd.
#[allow(
    unsafe_code,
    reason = "signal() before any thread starts: nothing can race the change"
)]
fn end_like_a_unix_tool_when_the_reader_leaves() {
    // SAFETY: restoring the default disposition of one signal, before any thread is started.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// `tracing` to stderr, filtered by `TABD_LOG` or `RUST_LOG` (default `info`, with rmcp's
/// per-session chatter at `warn`: tabd says itself what a server did; and nothing of async-nats,
/// which logs every retry of a refused login or a server down: tabd says those once, as what
/// they mean for the cluster); no timestamps under
/// journald, which adds its own. Every line goes through the environment's redactor: the value
/// of every variable expanded from `${VAR}` so far (the config's, a role's, a server's) and of
/// variables named like secrets (`*KEY*`, `*TOKEN*` …) is written as `${VAR}`, whoever logs it
/// (a library's error may quote a url with a token in it).
fn init_logging(env: &Env, cli: &Cli) {
    use tracing_subscriber::EnvFilter;
    let from_flags = match (cli.quiet, cli.verbose) {
        (true, _) => "warn,async_nats=off",
        (false, 0) => "info,rmcp=warn,async_nats=off",
        (false, 1) => "debug,rmcp=info,async_nats=info",
        (false, _) => "trace",
    };
    let filter = env
        .get("TABD_LOG")
        .or_else(|| env.get("RUST_LOG"))
        .unwrap_or(from_flags);
    use std::io::IsTerminal;
    let writer = Redacting(env.clone());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::new(filter))
        .with_writer(writer)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false);
    if env.get("JOURNAL_STREAM").is_some() {
        builder.without_time().with_ansi(false).init();
    } else {
        builder.init();
    }
}

/// Stderr, with secrets written back as `${VAR}` (each log line is one writer). It holds the
/// environment, not a redactor made at start: the config is read, and its `${VAR}`s expanded,
/// after logging starts.
#[derive(Clone)]
struct Redacting(Env);

struct RedactingLine {
    redactor: std::sync::Arc<Redactor>,
    buf: Vec<u8>,
}

impl std::io::Write for RedactingLine {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let text = String::from_utf8_lossy(&self.buf);
        // A library's line (rmcp's, reqwest's) may quote a service URL with a literal secret in
        // its path, which no `${VAR}` names: such parts are hidden too.
        let clean = tabd::base::text::endpoints_shown(&self.redactor.apply(&text));
        self.buf.clear();
        std::io::stderr().write_all(clean.as_bytes())
    }
}

impl Drop for RedactingLine {
    fn drop(&mut self) {
        #[expect(
            clippy::let_underscore_must_use,
            reason = "a log line that cannot reach stderr in a drop has nowhere else to go"
        )]
        let _ = std::io::Write::flush(self);
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Redacting {
    type Writer = RedactingLine;

    fn make_writer(&'a self) -> Self::Writer {
        RedactingLine {
            redactor: self.0.redactor(),
            buf: Vec::new(),
        }
    }
}
