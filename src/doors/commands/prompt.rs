//! `tabd prompt ROLE [--task TEXT]`: exactly what a run (or a delegated child run) would send,
//! without calling a model.

use super::fire::runnable_role;
use super::{CliError, Workspace};
use crate::base::trigger::Trigger;
use crate::capabilities::mcp::tools::RunTools;
use crate::records::state::StateStore;

pub fn run(ws: &Workspace, role_name: &str, task: Option<&str>) -> Result<u8, CliError> {
    let role = runnable_role(ws, role_name)?;
    let state = StateStore::new(ws.vault.clone()).load();
    let (trigger, notes) = match task {
        // A child run takes no inbox notes: the task is its trigger.
        Some(task) => (
            Trigger::delegate(crate::base::trigger::Delegation {
                parent_run_id: "tabd-prompt".into(),
                parent_role: "A person (tabd prompt --task)".into(),
                task: task.to_string(),
                depth: 1,
                depth_left: 0,
            }),
            Vec::new(),
        ),
        None => {
            let ready = crate::records::inbox::ready_notes(&ws.vault, &role.inbox, ws.config.inbox.max_batch)
                .map_err(|e| CliError::failed(format!("cannot read the inbox: {e}")))?;
            for n in &ready.unreadable {
                let why = n.unreadable().unwrap_or_default();
                say_err!(
                    "note: {} cannot be read ({why}); a run moves it to failed/",
                    n.path
                );
            }
            let notes = ready.notes;
            let trigger = if notes.is_empty() {
                Trigger::manual()
            } else {
                Trigger::inbox()
            };
            (trigger, notes)
        }
    };
    let src = crate::running::run::PromptSources {
        vault: &ws.vault,
        config: &ws.config,
        state: &state,
    };
    let mut p = crate::running::run::build_prompt(&src, role, &trigger, &notes, chrono::Utc::now());
    // What the run adds once its servers are open (started here as a run would, then stopped):
    // the MCP tools, servers that are down, approvals decided since the role was last told.
    let mcp = mcp_tools(ws, role)?;
    crate::running::run::complete(&mut p, &mcp, &state, role);
    say_raw!("{}", p.render());
    for d in &mcp.down {
        say_err!(
            "note: {}{}",
            d.problem,
            if d.required {
                " (it is required: a run would wait for it)"
            } else {
                ""
            }
        );
    }
    for line in &p.skills_left_out {
        say_err!("note: {}", line.replace("**", ""));
    }
    if !p.missing.is_empty() {
        say_err!(
            "note: context entries that found nothing: {}",
            p.missing.join(", ")
        );
    }
    Ok(0)
}

fn mcp_tools(ws: &Workspace, role: &crate::setup::role::Role) -> Result<RunTools, CliError> {
    if role.mcp_servers().is_empty() {
        return Ok(RunTools::default());
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::failed(e.to_string()))?;
    Ok(rt.block_on(async {
        let launcher = ws.launcher(None);
        let tools = RunTools::open(role, &ws.config, &launcher, None).await;
        tools.close().await;
        tools
    }))
}
