//! `tabd prompt ROLE`: exactly what a run would send, without calling a model.

use super::fire::runnable_role;
use super::{CliError, Workspace};
use crate::state::StateStore;
use crate::trigger::Trigger;

pub fn run(ws: &Workspace, role_name: &str) -> Result<u8, CliError> {
    let role = runnable_role(ws, role_name)?;
    let notes = crate::inbox::ready_notes(&ws.vault, &role.inbox, ws.config.inbox.max_batch)
        .map_err(|e| CliError::failed(format!("cannot read the inbox: {e}")))?;
    let state = StateStore::new(ws.vault.clone()).load();
    let trigger = if notes.is_empty() {
        Trigger::manual()
    } else {
        Trigger::inbox()
    };
    let src = crate::run::PromptSources {
        vault: &ws.vault,
        config: &ws.config,
        state: &state,
    };
    let p = crate::run::build_prompt(
        &src,
        role,
        &trigger,
        &notes,
        crate::tools::specs_for(role),
        chrono::Utc::now(),
    );
    print!("{}", p.render());
    if !p.missing.is_empty() {
        eprintln!(
            "note: context entries that found nothing: {}",
            p.missing.join(", ")
        );
    }
    Ok(0)
}
