//! `tabd run [--init]`: the daemon, in the foreground (systemd runs this).

use std::path::Path;

use super::{CliError, Workspace};
use crate::base::environment::Env;
use crate::base::template;
use crate::doors::args::Cli;
use crate::doors::daemon::{self, Daemon};

/// Creates the vault from the template first when `--init` is given and it has no roles yet.
pub fn init_if_asked(cli: &Cli, env: &Env, init: bool) -> Result<(), CliError> {
    if !init {
        return Ok(());
    }
    let Some(target) = super::vault_arg(cli, env) else {
        return Err(CliError::usage("--init needs a vault: pass --vault DIR"));
    };
    if !Path::new(&target).join("roles").is_dir() {
        let report = template::init_vault(&target)
            .map_err(|e| CliError::failed(format!("cannot create {}: {e}", target.display())))?;
        eprintln!(
            "Created a vault from the template at {} ({} files).",
            target.display(),
            report.created.len()
        );
    }
    Ok(())
}

pub fn run(cli: &Cli, ws: Workspace) -> Result<u8, CliError> {
    let _lock = daemon::acquire_lock(&ws.vault).map_err(|e| match e {
        daemon::LockError::Held(_) => CliError::usage(e.to_string()),
        daemon::LockError::Io(..) => CliError::failed(e.to_string()),
    })?;
    let errors = ws.roles.errors().count();
    if errors > 0 {
        eprintln!("warning: {errors} role-file error(s); those roles stay off until fixed (`tabd validate` lists them)");
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

/// Where the run log goes, when a person should know (DESIGN §26): Obsidian's Daily Notes
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
