//! `tabd run [--init]`: the daemon, in the foreground (systemd runs this).

use super::{CliError, Workspace};
use crate::base::environment::Env;
use crate::base::template;
use crate::doors::args::Cli;
use crate::doors::daemon::{self, Daemon};

/// Sets tabd up in the vault first when `--init` is given (`tabd init`), and says what it did —
/// also when there was nothing to do, and why.
pub fn init_if_asked(cli: &Cli, env: &Env, init: bool) -> Result<(), CliError> {
    if !init {
        return Ok(());
    }
    let Some(target) = super::vault_arg(cli, env) else {
        return Err(CliError::usage("--init needs a vault: pass --vault DIR"));
    };
    let done = super::init::init(cli, &target, false, env)?;
    let made = done.report.created.len() + done.report.folders.len();
    match (&done.found, made) {
        (template::Found::Tabds(layout), 0) => say_err!(
            "--init: tabd is set up in {} already (its roles in {}/): nothing to create.",
            done.root.display(),
            layout.roles()
        ),
        _ => {
            // On stderr: stdout is the daemon's (systemd's journal reads both).
            say_err!("--init: set tabd up in {}:", done.root.display());
            for f in done.report.created.iter().chain(&done.report.folders) {
                say_err!("  {}", done.root.join(f).display());
            }
            for line in done.config.iter().chain(&done.warnings) {
                say_err!("{line}");
            }
        }
    }
    Ok(())
}

pub fn run(cli: &Cli, ws: Workspace) -> Result<u8, CliError> {
    refuse_without_roles(&ws)?;
    let _lock = daemon::acquire_lock(&ws.vault).map_err(|e| match e {
        daemon::LockError::Held(_) => CliError::usage(e.to_string()),
        daemon::LockError::Io(..) => CliError::failed(e.to_string()),
    })?;
    let errors = ws.roles.errors().count();
    if errors > 0 {
        say_err!("warning: {errors} role-file error(s); those roles stay off until fixed (`tabd validate` lists them)");
    }
    for (_, said) in log_apart_notes(&ws) {
        tracing::warn!("{said}");
    }
    let key = ws.key()?;
    let init = daemon::Init {
        key,
        env: ws.env,
        cli_config: cli.config.clone(),
        config: ws.config,
        root: ws.root,
        vault: ws.vault,
        roles: ws.roles,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| CliError::failed(e.to_string()))?;
    rt.block_on(async move {
        let d = Daemon::new(init).map_err(|e| CliError::failed(format!("cannot start: {e:#}")))?;
        d.run().await.map_err(|e| CliError::failed(format!("{e:#}")))
    })
}

/// A folder with no role is not a vault of tabd's yet: the daemon would only idle there, and
/// write its folders into someone's notes. Nothing is written; what to do is said.
fn refuse_without_roles(ws: &Workspace) -> Result<(), CliError> {
    if !ws.roles.roles.is_empty() || !ws.roles.broken.is_empty() {
        return Ok(());
    }
    let roles = ws.root.join(ws.vault.layout().roles());
    let v = ws.root.display();
    let why = if roles.is_dir() {
        format!("{} holds no role", roles.display())
    } else {
        format!("there is no {}", roles.display())
    };
    Err(CliError::usage(format!(
        "{v} has no roles to run ({why}). `tabd init {v}` sets tabd up there (in a vault with notes,          under one folder of its own), or `tabd run --init --vault {v}` does it and starts"
    )))
}

/// Where the run log goes, when a person should know (docs/spec.md §26): Obsidian's Daily Notes
/// settings that cannot be read or that meet the log folder, a note at today's place that is not
/// tabd's. Each: the vault-relative file it is about, and a sentence. `run`, `validate` and
/// `status` say them.
pub fn log_apart_notes(ws: &Workspace) -> Vec<(String, String)> {
    let config = ws.config.path.as_ref().map_or_else(
        || {
            crate::setup::config::locate(None, &ws.env)
                .map_or_else(|| "the config file".to_string(), |(p, _)| p.display().to_string())
        },
        |p| p.display().to_string(),
    );
    crate::records::runlog::RunLog::new(ws.vault.clone(), ws.config.timezone)
        .apart_notes(chrono::Utc::now(), &config)
}
