//! The command line (docs/spec.md §12), with clap derive.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// tabd runs an AI agent's roles against your Markdown (Obsidian) vault: each role fires on its
/// schedule or when you drop a note into its inbox, and writes what it did into daily/.
#[derive(Debug, Parser)]
#[command(
    name = "tabd",
    version = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("TABD_COMMIT"), ")"),
    about,
    long_about = None,
    propagate_version = true
)]
pub struct Cli {
    /// The vault folder (else $TABD_VAULT, else `vault` in the config file).
    #[arg(long, global = true, value_name = "DIR")]
    pub vault: Option<PathBuf>,

    /// The config file (else $TABD_CONFIG, else ~/.config/tabd/config.toml).
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Say more in the log on stderr (-v: debug, -vv: trace). TABD_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count, conflicts_with = "quiet")]
    pub verbose: u8,

    /// Say only warnings and errors in the log on stderr.
    #[arg(short, long, global = true)]
    pub quiet: bool,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create a vault from the built-in template (roles, a sample project, inboxes).
    /// Never overwrites a file that already exists.
    Init {
        /// Where to create the vault (else --vault).
        #[arg(value_name = "VAULT")]
        path: Option<PathBuf>,
        /// Also a made-up example project to try the roles on (a new, empty folder gets it anyway;
        /// in a vault with notes it goes under tabd's own folder).
        #[arg(long)]
        example: bool,
    },
    /// Run the daemon in the foreground: fire roles on their schedules and on new inbox notes,
    /// reload role files when they change. Stop it with Ctrl-C or SIGTERM.
    Run {
        /// Set tabd up in the vault first if it is not yet (as `tabd init` does: the example in a
        /// new folder, only tabd's own folders in a vault with notes).
        #[arg(long)]
        init: bool,
    },
    /// Show each role's state, last run, next fire, pending notes and tokens used today,
    /// and whether a daemon is running.
    Status {
        /// Only this role (its name, e.g. delivery).
        role: Option<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Check the config and every role file; print every problem as `path:line: …`.
    /// Exits 1 if any error is found.
    Validate,
    /// Check what a working setup needs, one line each (ok, warning, fix: with what to do,
    /// skipped): config and roles, the key (one request to the provider, a few tokens), the env
    /// file's mode, the systemd unit, [notify], [cluster], Landlock, the clock, Daily Notes, disk
    /// space, roles that missed a slot. Exits 1 when something must be fixed.
    Doctor {
        /// Print JSON: {"checks": [{"name", "status": "ok|warning|fix|skipped", "message"}], "must_fix": N}.
        #[arg(long)]
        json: bool,
        /// Send a test push on every [notify] channel (it reaches you: your phone, your desktop).
        #[arg(long, conflicts_with = "offline")]
        push: bool,
        /// Nothing over the network: no request to the provider, no cluster, no push.
        #[arg(long)]
        offline: bool,
    },
    /// Run one turn of ROLE now, in the foreground, with the notes waiting in its inbox.
    /// Exits 0 when the run succeeded, 1 when it failed.
    Fire {
        /// The role's name (its file name without .md), e.g. delivery.
        role: String,
        /// Also hand the role this note (copied into its inbox unless it is already there).
        #[arg(long, value_name = "FILE")]
        note: Option<PathBuf>,
        /// Run even if the role (or all roles together) has spent today's budget of tokens,
        /// dollars or runs.
        #[arg(long)]
        over_budget: bool,
    },
    /// List recent runs, newest first: id, time, role, trigger, outcome, cost, files changed;
    /// a run's parts (its second part, the calls of it you approved, its delegated runs) under it.
    Runs {
        /// Only this role's runs.
        #[arg(long)]
        role: Option<String>,
        /// Only runs on or after this date (YYYY-MM-DD, UTC).
        #[arg(long, value_name = "DATE")]
        since: Option<String>,
        /// Print JSON: {"runs": [{"run_id", "role", "started_at", "trigger", "outcome", "cost_usd", "changed"}]};
        /// a part of a run also has "parent" (the run's id) and "part".
        #[arg(long)]
        json: bool,
    },
    /// Put back what run RUN_ID changed, where each file is still as the run left it (files
    /// changed since are skipped and named). Exits 0 when all was restored, 1 when something
    /// was skipped.
    Undo {
        /// The run's id, or a unique start of it (see `tabd runs`).
        run_id: String,
        /// Show what would be done; change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Restore files even where they changed since the run (their later content is lost,
        /// except in this undo's own journal).
        #[arg(long)]
        force: bool,
        /// Also move the notes the run handled back into the inbox (they will run again).
        #[arg(long)]
        requeue: bool,
        /// Also undo the calls of this run you approved: each ran later, on its own, with an
        /// undo id of its own (`tabd undo RUN_ID` names them).
        #[arg(long)]
        with_approved: bool,
    },
    /// Print exactly what a run of ROLE would send the model (system prompt, context files,
    /// trigger notes, tools) with sizes, without calling the model.
    Prompt {
        /// The role's name, e.g. delivery.
        role: String,
        /// Show what the role would be sent as a delegated child run with this task.
        #[arg(long, value_name = "TEXT")]
        task: Option<String>,
    },
    /// List the calls waiting for your approval (notes in agent/approvals/).
    Approvals {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Approve a pending call: the daemon runs it once, with the arguments as they stand in its
    /// note (the same as setting `status: approved` in the note).
    Approve {
        /// The approval's id (or the start of it), as `tabd approvals` shows it.
        id: String,
    },
    /// Reject a pending call: nothing runs (the same as setting `status: rejected` in the note).
    Reject {
        /// The approval's id (or the start of it).
        id: String,
    },
    /// Today's runs from the daily log (all roles, or one), and with -f what comes next.
    Logs {
        /// Only this role's runs and lines, and the runs delegated to it (its name, e.g. delivery).
        role: Option<String>,
        /// That day's log (YYYY-MM-DD) instead of today's.
        #[arg(long, conflicts_with = "since")]
        date: Option<String>,
        /// Every day's log from that day (YYYY-MM-DD) to today.
        #[arg(long)]
        since: Option<String>,
        /// Only the last N entries (run sections and event lines).
        #[arg(short = 'n', long = "last", value_name = "N")]
        last: Option<usize>,
        /// Keep printing new runs as they are logged (Ctrl-C stops).
        #[arg(short, long)]
        follow: bool,
    },
    /// Print a completion script for your shell: `tabd completions bash > ~/.local/share/bash-completion/completions/tabd`.
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// MCP servers: list them and their tools, or serve a role's tools to an MCP client.
    Mcp {
        #[command(subcommand)]
        action: McpCommand,
    },
    /// The systemd user service: `install` sets tabd up to run on its own (this binary, your
    /// vault, ~/.config/tabd/env for keys), `uninstall` stops and removes it.
    Service {
        #[command(subcommand)]
        action: ServiceCommand,
    },
    /// Forecast each role's model requests and dollars a day and a month from its schedule, the
    /// share of slots its wake gate skipped and its recent runs' costs, beside its caps.
    Cost {
        /// Print JSON instead of a table (the shape is in docs/cost.md).
        #[arg(long)]
        json: bool,
    },
    /// The kill switch: nothing of ROLE (or of every role, --all) runs — no scheduled slot (each
    /// is skipped, not caught up), no inbox note (they wait), no watch, no `tabd fire`, no `tabd mcp
    /// serve` — until `tabd resume`, or until --for has passed. A run going on stops at its next
    /// step. Survives restarts; with [cluster], holds on every device.
    #[command(group(clap::ArgGroup::new("what").required(true).args(["role", "all"])))]
    Pause {
        /// The role's name, e.g. delivery.
        role: Option<String>,
        /// Every role.
        #[arg(long)]
        all: bool,
        /// End the pause by itself after this long: 30m, 2h, 1d.
        #[arg(long = "for", value_name = "DURATION")]
        for_: Option<String>,
    },
    /// End a pause: ROLE's, or every pause (--all, or no argument). Its notes waiting in the inbox
    /// run then; the slots that passed while paused were skipped and are not caught up.
    Resume {
        /// The role's name, e.g. delivery.
        #[arg(conflicts_with = "all")]
        role: Option<String>,
        /// Every pause (the same as no argument).
        #[arg(long)]
        all: bool,
    },
    /// Show each role's schedule as cron and its next fire times.
    Schedule {
        /// Compute fires after this instant (RFC 3339, e.g. 2026-03-06T12:00:00-05:00); default now.
        #[arg(long, value_name = "RFC3339")]
        from: Option<String>,
        /// How many fire times to show per role.
        #[arg(long, value_name = "N", default_value_t = 5)]
        next: usize,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
}

/// `tabd service …`
#[derive(Debug, Subcommand)]
pub enum ServiceCommand {
    /// Write the user unit (~/.config/systemd/user/tabd.service) for this binary and the vault
    /// (--vault, else the config's), keep the config (write one naming the vault if there is
    /// none), make ~/.config/tabd/env (0600) if missing, then `systemctl --user daemon-reload`,
    /// `enable --now tabd` and show its status.
    Install,
    /// `systemctl --user disable --now tabd` and remove the unit `install` wrote; the config, the
    /// env file and the vault stay.
    Uninstall,
}

/// `tabd mcp …`
#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Start the configured MCP servers, list their tools with risk classes and the roles that
    /// see each, and report servers that fail to start with their last output. Exits 1 if a
    /// server is down.
    List {
        /// Only the servers and tools this role uses.
        #[arg(long, value_name = "ROLE")]
        role: Option<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Serve ROLE's tools (vault tools and its MCP tools) as an MCP server on stdin/stdout,
    /// under the role's tool list, sandbox, approvals and limits. For CLI agents run by tabd, and
    /// for Claude Desktop or any MCP client that should get sandboxed access to the vault.
    Serve {
        /// The role whose tools are served.
        #[arg(long, value_name = "ROLE")]
        role: String,
        /// The run whose tools to serve (set by tabd when it runs a CLI agent; needs --socket).
        #[arg(long, value_name = "ID", requires = "socket")]
        run_id: Option<String>,
        /// The running run's tool socket: this process only relays to it, so the run's limits,
        /// chain depth and record stay in the run (set by tabd with --run-id).
        #[arg(long, value_name = "PATH", requires = "run_id")]
        socket: Option<PathBuf>,
    },
}

impl Command {
    /// Commands that only print (no child, no socket, no run — `prompt` starts the role's MCP
    /// servers, so it is not one): a reader that leaves early (`tabd logs | head`) may end them
    /// as SIGPIPE ends any Unix tool.
    pub fn only_prints(&self) -> bool {
        matches!(
            self,
            Self::Schedule { .. }
                | Self::Cost { .. }
                | Self::Status { .. }
                | Self::Runs { .. }
                | Self::Logs { .. }
                | Self::Approvals { .. }
                | Self::Validate
                | Self::Completions { .. }
        )
    }
}
