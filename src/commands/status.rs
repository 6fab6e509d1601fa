//! `tabd status [--json]`

use chrono::Utc;

use super::{CliError, Workspace};
use crate::daemon::{self, status};
use crate::state::StateStore;
use crate::vault::Vault;

pub fn run(ws: &Workspace, json: bool) -> Result<u8, CliError> {
    let vault =
        Vault::open(&ws.vault).map_err(|e| CliError::failed(format!("cannot open the vault: {e}")))?;
    let state = StateStore::new(&ws.vault).load();
    let pid = daemon::lock_holder(&ws.vault);
    let live = status::Live {
        paused: if pid.is_some() {
            state.global.paused.clone()
        } else {
            None
        },
        watching: pid.as_ref().map(|_| "watching the vault".to_string()),
        pid,
        kept_last_good: Vec::new(),
        host: ws
            .config
            .daemon
            .host
            .clone()
            .unwrap_or_else(|| gethostname::gethostname().to_string_lossy().into_owned()),
    };
    let report = status::collect(&vault, &ws.config, &ws.roles, &state, &live, Utc::now());
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).map_err(|e| CliError::failed(e.to_string()))?
        );
    } else {
        print!("{}", status::render_text(&report, ws.config.timezone));
    }
    Ok(0)
}
