//! `tabd prompt ROLE`: exactly what a run would send, without calling a model.

use chrono::Utc;

use super::fire::runnable_role;
use super::{CliError, Workspace};
use crate::prompt::{self, PromptInput, Trigger};
use crate::state::StateStore;
use crate::vault::Vault;

pub fn run(ws: &Workspace, role_name: &str) -> Result<u8, CliError> {
    let role = runnable_role(ws, role_name)?;
    let vault =
        Vault::open(&ws.vault).map_err(|e| CliError::failed(format!("cannot open the vault: {e}")))?;
    let notes = crate::run::ready_notes(&vault, role, ws.config.inbox.max_batch)
        .map_err(|e| CliError::failed(format!("cannot read the inbox: {e}")))?;
    let state = StateStore::new(&ws.vault).load();
    let previous = state
        .roles
        .get(&role.name)
        .filter(|r| r.last_success_at.is_some())
        .map(|r| &r.context_hashes);
    let trigger = if notes.is_empty() {
        Trigger::manual()
    } else {
        Trigger::inbox()
    };
    let p = prompt::build(&PromptInput {
        vault: &vault,
        role,
        config: &ws.config,
        previous,
        now: Utc::now(),
        trigger: &trigger,
        notes: &notes,
    });
    print!("{}", p.render());
    if !p.missing.is_empty() {
        eprintln!(
            "note: context entries that found nothing: {}",
            p.missing.join(", ")
        );
    }
    Ok(0)
}
