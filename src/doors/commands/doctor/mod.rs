//! `tabd doctor [--json] [--offline] [--push]` (docs/spec.md §28): what a working setup needs, checked
//! at once, one line each — `ok`, `warning`, `fix:` (with what to do) or `skipped` — because a
//! setup that fails quietly looks like one that works until someone looks at all of it.
//!
//! Each check asks the part of tabd that owns what it checks, never a second copy of it:
//! `validate` (config, roles, the missing key, Daily Notes beside the log), the provider (one
//! request), `service` (the unit it writes), the env file's reader, `[notify]`'s channels (a test
//! push only with `--push`: it reaches the person), the cluster (a write a quorum must take),
//! the sandbox's kernel probe, the kernel's clock, the slot ledger and run records. By concern:
//! `setup` (what the person wrote), `machine` (this machine), `network` (what answers over the
//! network; none with `--offline`), `overdue` (roles whose schedule said they should have run).
//!
//! Exit 1 when any check must be fixed, else 0; 2 on usage and config errors, as every command.

mod machine;
mod network;
mod overdue;
mod setup;

use chrono::Utc;
use serde::Serialize;

use super::{CliError, Workspace};

/// What `tabd doctor` was asked for.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    pub json: bool,
    /// No check that uses the network: no provider request, no cluster, no push.
    pub offline: bool,
    /// A test push on every `[notify]` channel.
    pub push: bool,
}

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    /// Works, but may not as the person expects; tabd goes on.
    Warning,
    /// Must be fixed: something the person relies on does not work.
    Fix,
    /// Not checked: nothing to check here, or not asked (`--offline`), or it cannot be told.
    Skipped,
}

impl Status {
    /// The word the line starts with.
    fn word(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Warning => "warning",
            Self::Fix => "fix:",
            Self::Skipped => "skipped",
        }
    }
}

/// One check: its name (the same in the text and the JSON, for scripts), how it came out, and
/// what it found and what to do, in one line.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub status: Status,
    pub message: String,
}

impl Check {
    fn new(name: &'static str, status: Status, message: impl Into<String>) -> Self {
        Self {
            name,
            status,
            message: message.into(),
        }
    }
}

/// The JSON `--json` prints (docs/operations.md has the shape).
#[derive(Debug, Serialize)]
struct Report<'a> {
    checks: &'a [Check],
    must_fix: usize,
}

/// The longest message a line carries (a Daily Notes warning quotes the config lines to add).
const MAX_MESSAGE: usize = 1200;

/// `tabd doctor`.
pub fn run(ws: &Workspace, opts: Options) -> Result<u8, CliError> {
    let now = Utc::now();
    let findings = super::validate::findings(ws);
    let answers = if opts.offline {
        network::Answers::default()
    } else {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| CliError::failed(format!("cannot start the async runtime: {e}")))?;
        rt.block_on(network::ask(ws, &findings, opts.push, now))
    };
    let mut checks = vec![
        setup::config(ws, &findings),
        setup::roles(ws, &findings),
        network::key(ws, &findings, &answers, opts.offline),
        machine::env_file(ws),
        machine::unit(ws),
        network::notify(ws, &findings, &answers, opts),
        network::cluster(ws, &answers),
        machine::landlock(ws),
        machine::clock(),
        setup::daily_notes(ws, &findings),
        machine::disk(ws),
        overdue::check(ws, now),
    ];
    // A server's answer, a program's stderr or a path may hold a secret or a control character:
    // every message is redacted and made one line.
    let secrets = ws.env.redactor();
    for c in &mut checks {
        c.message = crate::base::text::one_line(&secrets.apply(&c.message), MAX_MESSAGE);
    }
    let must_fix = checks.iter().filter(|c| c.status == Status::Fix).count();
    if opts.json {
        let report = Report {
            checks: &checks,
            must_fix,
        };
        let text = serde_json::to_string_pretty(&report).map_err(|e| CliError::failed(e.to_string()))?;
        say!("{text}");
    } else {
        for c in &checks {
            say!("{:<8} {}: {}", c.status.word(), c.name, c.message);
        }
        let warnings = checks.iter().filter(|c| c.status == Status::Warning).count();
        say!(
            "{must_fix} to fix, {warnings} warning{}",
            if warnings == 1 { "" } else { "s" }
        );
    }
    Ok(if must_fix > 0 { 1 } else { 0 })
}

/// `n thing` or `n things`.
fn count(n: usize, thing: &str) -> String {
    format!("{n} {thing}{}", if n == 1 { "" } else { "s" })
}
