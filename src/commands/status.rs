//! `tabd status [--json]`

use chrono::Utc;

use super::{CliError, Workspace};
use crate::daemon::{self, status};
use crate::state::StateStore;

pub fn run(ws: &Workspace, json: bool) -> Result<u8, CliError> {
    let state = StateStore::new(ws.vault.clone()).load();
    let pid = daemon::lock_holder(&ws.vault);
    let live = status::Live {
        paused: if pid.is_some() {
            state.global.paused.clone()
        } else {
            None
        },
        watching: pid.as_ref().map(|_| "watching the vault".to_string()),
        pid,
        host: ws
            .config
            .daemon
            .host
            .clone()
            .unwrap_or_else(|| gethostname::gethostname().to_string_lossy().into_owned()),
        ..status::Live::default()
    };
    let report = status::collect(&ws.vault, &ws.config, &ws.roles, &state, &live, Utc::now());
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
