//! The subcommands. Each returns the process exit code or a `CliError`.
//!
//! Everything they print goes through `say!` / `say_raw!` / `say_err!`: what tabd prints comes
//! from notes, role files, run records and servers, so no control character (but line breaks and
//! tabs) and no bidirectional override reaches the terminal (`text::for_terminal`).

/// `println!`, made safe for a terminal (see the module's text).
macro_rules! say {
    () => { println!() };
    ($($arg:tt)*) => { println!("{}", $crate::base::text::for_terminal(&format!($($arg)*))) };
}

/// `print!`, made safe for a terminal.
macro_rules! say_raw {
    ($($arg:tt)*) => { print!("{}", $crate::base::text::for_terminal(&format!($($arg)*))) };
}

/// `eprintln!`, made safe for a terminal.
macro_rules! say_err {
    () => { eprintln!() };
    ($($arg:tt)*) => { eprintln!("{}", $crate::base::text::for_terminal(&format!($($arg)*))) };
}

pub mod approvals;
pub mod cost;
pub mod doctor;
pub mod fire;
pub mod init;
pub mod logs;
pub mod mcp;
pub mod pause;
pub mod prompt;
pub mod run;
pub mod runs;
pub mod schedule;
pub mod service;
pub mod status;
pub mod undo;
pub mod validate;

use std::path::PathBuf;
use std::sync::Arc;

use crate::base::environment::Env;
use crate::base::vault::Vault;
use crate::doors::args::{Cli, Command, McpCommand};
use crate::setup::config::{self, Config};
use crate::setup::role::{LoadContext, RoleSet};

/// An error that ends the command with `code` after printing `message`.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct CliError {
    pub code: u8,
    pub message: String,
    /// The message names its file and line already (`path:line: error: …`).
    pub located: bool,
}

impl CliError {
    /// Usage and configuration errors exit 2 (docs/spec.md §12).
    pub fn usage(message: impl Into<String>) -> Self {
        Self {
            code: 2,
            message: message.into(),
            located: false,
        }
    }

    pub fn failed(message: impl Into<String>) -> Self {
        Self {
            code: 1,
            message: message.into(),
            located: false,
        }
    }

    /// A config error: exit 2, its message already `path:line: error: …`.
    pub fn config(e: &config::ConfigError) -> Self {
        Self {
            located: true,
            ..Self::usage(e.to_string())
        }
    }
}

/// The vault folder named on the command line or in `$TABD_VAULT` (not the config), for the
/// commands that may create it.
pub fn vault_arg(cli: &Cli, env: &Env) -> Option<PathBuf> {
    cli.vault
        .clone()
        .or_else(|| env.get("TABD_VAULT").map(|v| config::expand_home(v, env)))
}

/// What most commands need: the environment, the config, the vault and its roles.
pub struct Workspace {
    pub env: Env,
    pub config: Config,
    /// The vault folder (canonical).
    pub root: PathBuf,
    pub vault: Arc<Vault>,
    pub roles: RoleSet,
    /// The config's error, when a read-only command goes on without it (`open_readable`).
    pub config_error: Option<String>,
}

impl Workspace {
    pub fn open(cli: &Cli, env: Env) -> Result<Self, CliError> {
        let config = config::load(cli.config.as_deref(), &env).map_err(|e| CliError::config(&e))?;
        Self::with_config(cli, env, config)
    }

    /// For commands that only read (status, logs, runs, schedule, the list of approvals): a
    /// config with an error does not stop them. It is printed on top, and they show what they can
    /// read with the defaults (and the config's vault and time zone, if those can be read).
    pub fn open_readable(cli: &Cli, env: Env) -> Result<Self, CliError> {
        let (config, error) = config::load_readable(cli.config.as_deref(), &env);
        if let Some(e) = &error {
            say_err!(
                "{e}\n(the config has an error: showing what can be read without it; `tabd validate` checks the rest)\n"
            );
        }
        match Self::with_config(cli, env, config) {
            Ok(ws) => Ok(Self {
                config_error: error.map(|e| e.to_string()),
                ..ws
            }),
            Err(mut failed) => {
                if let Some(e) = error {
                    failed.message = format!("{e}\n{}", failed.message);
                    failed.located = true;
                }
                Err(failed)
            }
        }
    }

    fn with_config(cli: &Cli, env: Env, config: Config) -> Result<Self, CliError> {
        let chosen = config::resolve_vault(cli.vault.as_deref(), &env, &config)
            .map_err(|e| CliError::usage(e.to_string()))?;
        let root = std::fs::canonicalize(&chosen)
            .map_err(|e| CliError::usage(format!("cannot open the vault {}: {e}", chosen.display())))?;
        let settings = config.for_vault(&root);
        let log = settings.log.clone().unwrap_or_else(|| settings.layout.daily());
        let opened = Vault::open(&root)
            .map_err(|e| CliError::failed(format!("cannot open the vault {}: {e}", root.display())))?
            .with_layout(settings.layout)
            .with_log_folder(&log);
        // With [cluster], this device's .tabd/ is its own (docs/spec.md §23).
        let vault = Arc::new(match &config.cluster {
            Some(c) => opened.for_device(&c.device),
            None => opened,
        });
        let roles = RoleSet::load(&vault, &LoadContext::for_config(&config, env.clone()));
        Ok(Self {
            env,
            config,
            root,
            vault,
            roles,
            config_error: None,
        })
    }

    /// How this command starts children (sandboxed, docs/spec.md §20); with `registry` (tabd's key):
    /// their process groups are written down, signed (for children that outlive a moment).
    pub fn launcher(
        &self,
        registry: Option<Arc<crate::base::signing::Key>>,
    ) -> crate::base::process::Launcher {
        crate::base::process::Launcher {
            env: self.env.clone(),
            registry: registry.map(|key| crate::base::process::Registry::new(self.vault.clone(), key)),
            vault: Some(self.vault.clone()),
            config_file: self.config.path.clone(),
            require_sandbox: self.config.sandbox.require,
            sandbox_probe: Default::default(),
            inboxes: crate::base::vault::protected::RoleInboxes::new(
                self.roles.runnable().map(|r| r.inbox.as_str()),
            ),
        }
    }

    /// tabd's key (outside the vault: `base::signing`), made the first time; a key that cannot
    /// be trusted stops the command with what to do.
    pub fn key(&self) -> Result<Arc<crate::base::signing::Key>, CliError> {
        crate::base::signing::Key::load_or_create(&self.launcher(None).places().state)
            .map(Arc::new)
            .map_err(|e| CliError::failed(e.to_string()))
    }

    /// The run log, to write (a decision's or an undo's daily line): its writes are sealed with
    /// tabd's key, so one a crash cuts short is finished by the next.
    pub fn run_log(&self) -> Result<crate::records::runlog::RunLog, CliError> {
        Ok(self.run_log_with(self.key()?))
    }

    fn run_log_with(&self, key: Arc<crate::base::signing::Key>) -> crate::records::runlog::RunLog {
        let faults = crate::base::faults::Faults::from_env(&self.env);
        let guard = crate::base::vault::SpliceGuard::new(key, faults);
        crate::records::runlog::RunLog::writer(self.vault.clone(), self.config.timezone, guard)
    }

    /// What a run needs, for commands that run roles in the foreground.
    pub fn run_env(&self) -> Result<crate::running::run::RunEnv, CliError> {
        let provider = crate::capabilities::provider::build(&self.config.provider, &self.env)
            .map_err(|e| CliError::failed(e.to_string()))?;
        let key = self.key()?;
        Ok(crate::running::run::RunEnv {
            vault: self.vault.clone(),
            config: Arc::new(self.config.clone()),
            roles: Arc::new(self.roles.clone()),
            provider,
            store: crate::records::state::StateStore::new(self.vault.clone()),
            log: Arc::new(self.run_log_with(key.clone())),
            clock: Arc::new(crate::base::clock::SystemClock),
            faults: crate::base::faults::Faults::from_env(&self.env),
            launcher: self.launcher(Some(key.clone())),
            mcp_pool: None,
            probes: Default::default(),
            progress: Default::default(),
            stop: Default::default(),
            key,
            fence: Default::default(),
            telemetry: crate::capabilities::telemetry::Telemetry::start(
                self.config.telemetry.as_ref(),
                &self.env,
            ),
            side: Default::default(),
        })
    }
}

/// `path` made absolute against the current folder, so it means the same file to every process
/// tabd starts and after any change of folder (a relative `--config` once disabled a CLI run's
/// tools without a word).
fn absolute(path: &std::path::Path) -> PathBuf {
    if path.is_absolute() {
        return path.to_path_buf();
    }
    std::env::current_dir()
        .map(|d| d.join(path))
        .unwrap_or_else(|_| path.to_path_buf())
}

/// `tabd completions SHELL`.
fn completions(shell: clap_complete::Shell) -> Result<u8, CliError> {
    use clap::CommandFactory;
    use std::io::Write;
    // Into a buffer first: clap_complete panics on a write error (`| head` closing early).
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "tabd", &mut script);
    match std::io::stdout().write_all(&script) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(CliError::failed(format!("cannot write the completions: {e}")))
        }
        _ => Ok(0),
    }
}

/// `tabd run [--init]`: the vault made first if asked, then the daemon.
fn daemon(cli: &Cli, env: Env, init: bool) -> Result<u8, CliError> {
    run::init_if_asked(cli, &env, init)?;
    let ws = Workspace::open(cli, env)?;
    run::run(cli, ws)
}

/// Runs the parsed command line.
#[expect(
    clippy::too_many_lines,
    reason = "one arm per subcommand, each handing its arguments to its module: the list of commands"
)]
pub fn run(mut cli: Cli, env: Env) -> Result<u8, CliError> {
    cli.config = cli.config.as_deref().map(absolute);
    cli.vault = cli.vault.as_deref().map(absolute);
    match &cli.command {
        Command::Init { path, example } => init::run(&cli, path.as_deref(), *example, &env),
        Command::Validate => validate::run(&Workspace::open(&cli, env)?),
        Command::Doctor { json, push, offline } => doctor::run(
            &Workspace::open(&cli, env)?,
            doctor::Options {
                json: *json,
                offline: *offline,
                push: *push,
            },
        ),
        Command::Schedule { from, next, json } => schedule::run(
            &Workspace::open_readable(&cli, env)?,
            from.as_deref(),
            *next,
            *json,
        ),
        Command::Fire {
            role,
            note,
            over_budget,
        } => fire::run(&Workspace::open(&cli, env)?, role, note.as_deref(), *over_budget),
        Command::Prompt { role, task } => prompt::run(&Workspace::open(&cli, env)?, role, task.as_deref()),
        Command::Run { init } => daemon(&cli, env, *init),
        Command::Status { role, json } => {
            status::run(&Workspace::open_readable(&cli, env)?, role.as_deref(), *json)
        }
        Command::Cost { json } => cost::run(&Workspace::open_readable(&cli, env)?, *json),
        Command::Runs { role, since, json } => runs::run(
            &Workspace::open_readable(&cli, env)?,
            role.as_deref(),
            since.as_deref(),
            *json,
        ),
        Command::Undo {
            run_id,
            dry_run,
            force,
            requeue,
            with_approved,
        } => undo::run(
            &Workspace::open(&cli, env)?,
            run_id,
            &undo::Options {
                dry_run: *dry_run,
                force: *force,
                requeue: *requeue,
                with_approved: *with_approved,
            },
        ),
        Command::Logs {
            role,
            date,
            since,
            last,
            follow,
        } => logs::run(
            &Workspace::open_readable(&cli, env)?,
            &logs::Options {
                role: role.clone(),
                date: date.clone(),
                since: since.clone(),
                last: *last,
                follow: *follow,
            },
        ),
        Command::Completions { shell } => completions(*shell),
        Command::Pause { role, all, for_ } => pause::pause(
            &Workspace::open(&cli, env)?,
            role.as_deref().filter(|_| !*all),
            for_.as_deref(),
        ),
        Command::Resume { role, .. } => pause::resume(&Workspace::open(&cli, env)?, role.as_deref()),
        Command::Service { action } => service::run(&cli, env, action),
        Command::Approvals { json } => approvals::list(&Workspace::open_readable(&cli, env)?, *json),
        Command::Approve { id } => approvals::decide(&Workspace::open(&cli, env)?, id, true),
        Command::Reject { id } => approvals::decide(&Workspace::open(&cli, env)?, id, false),
        Command::Mcp {
            action: McpCommand::List { role, json },
        } => mcp::list(&Workspace::open(&cli, env)?, role.as_deref(), *json),
        Command::Mcp {
            action: McpCommand::Serve {
                socket: Some(socket), ..
            },
        } => mcp::bridge(socket),
        Command::Mcp {
            action: McpCommand::Serve { role, .. },
        } => mcp::serve(&Workspace::open(&cli, env)?, role),
    }
}
