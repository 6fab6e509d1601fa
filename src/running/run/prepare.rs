//! Before the model is called: the run's id, limits and state, the prompt, and everything the
//! prompt says about this run (MCP tools, servers that are down, approvals decided). One place,
//! so `tabd prompt` prints exactly what a run sends.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use super::env::RunEnv;
use crate::base::cost::CacheTtl;
use crate::base::trigger::Trigger;
use crate::base::vault::Vault;
use crate::capabilities::mcp::tools::RunTools;
use crate::records::inbox::Note;
use crate::records::limits::RoleLimits;
use crate::records::state::State;
use crate::running::prompt::{self, Prompt, PromptInput};
use crate::setup::config::Config;
use crate::setup::role::Role;

/// The model settings of a role: its own, else the config's.
pub struct ModelSettings {
    pub model: String,
    pub max_tokens: u32,
    pub temperature: Option<f64>,
    pub thinking_budget: u32,
}

pub fn model_settings(role: &Role, config: &Config) -> ModelSettings {
    let p = &config.provider;
    ModelSettings {
        model: role.settings.model(p),
        max_tokens: role.settings.max_tokens(p),
        temperature: role.settings.temperature(p),
        thinking_budget: role.settings.thinking_budget(p),
    }
}

/// The lifetime of a run's cache entries: the config's, else 1h for a role whose scheduled
/// runs come less than an hour apart (the next run reads what this one wrote), else 5m.
pub fn cache_ttl(role: &Role, config: &Config, now: DateTime<Utc>) -> CacheTtl {
    config
        .provider
        .cache_ttl
        .unwrap_or_else(|| match role.schedule.shortest_gap(now) {
            Some(gap) if gap < chrono::Duration::hours(1) => CacheTtl::OneHour,
            _ => CacheTtl::FiveMinutes,
        })
}

/// The hashes of a role's last successful run, if it had one.
pub fn previous_hashes<'a>(state: &'a State, role: &Role) -> Option<&'a BTreeMap<String, String>> {
    state
        .roles
        .get(&role.name)
        .filter(|r| r.last_success_at.is_some())
        .map(|r| &r.context_hashes)
}

/// Where a prompt's files and history come from.
pub struct PromptSources<'a> {
    pub vault: &'a Vault,
    pub config: &'a Config,
    pub state: &'a State,
}

/// Builds the prompt a run of `role` would send now, from state as it is: the vault tools and
/// the context. `complete` adds the rest once the role's MCP servers are open.
pub fn build_prompt(
    src: &PromptSources<'_>,
    role: &Role,
    trigger: &Trigger,
    notes: &[Note],
    now: DateTime<Utc>,
) -> Prompt {
    prompt::build(&PromptInput {
        vault: src.vault,
        role,
        config: src.config,
        previous: previous_hashes(src.state, role),
        now,
        trigger,
        notes,
        tools: tools_for(role, trigger),
    })
}

/// The tabd tools a run of `role` is offered: its vault tools, and `delegate` when the role
/// names roles to ask and the depth allows (a run's harness decides finally, see `run_in`).
fn tools_for(role: &Role, trigger: &Trigger) -> Vec<crate::base::calls::ToolSpec> {
    let mut tools = crate::capabilities::tools::specs_for(role);
    if role.delegation_left(trigger) > 0 {
        tools.push(crate::capabilities::tools::delegate::spec(role));
    }
    tools
}

/// Everything the prompt says that depends on the role's servers and the approvals ledger: the
/// MCP tools, the servers that are down, the approvals decided since the role was last told.
/// Returns the ids of those approvals (marked as told once the model has seen them).
pub fn complete(prompt: &mut Prompt, mcp: &RunTools, state: &State, role: &Role) -> Vec<String> {
    prompt.tools.extend(mcp.specs());
    if let Some((title, body)) = mcp.notice() {
        prompt.add_notice(&title, &body);
    }
    let decided = decided_approvals(state, role);
    if !decided.is_empty() {
        prompt.add_notice(
            "Approvals decided since your last run",
            &decided
                .iter()
                .map(|(_, line)| line.as_str())
                .collect::<Vec<_>>()
                .join("\n"),
        );
    }
    decided.into_iter().map(|(id, _)| id).collect()
}

/// What a run knows before it calls the model.
pub struct Prepared {
    pub id: crate::base::run_id::RunId,
    pub started: DateTime<Utc>,
    pub state: State,
    /// Memory and context hashes the prompt was built from.
    pub hashes: BTreeMap<String, String>,
    pub limits: RoleLimits,
    pub ttl: CacheTtl,
    /// Chain depth of the notes that triggered this run.
    pub hops: u32,
    /// Extra lines for the run's daily-log section (servers that were down).
    pub notes: Vec<String>,
}

/// Reads state, resolves the limits and builds the prompt (filesystem work: off the runtime's hands).
pub(super) fn prepare(env: &RunEnv, role: &Role, trigger: &Trigger, notes: &[Note]) -> (Prepared, Prompt) {
    let started = env.clock.now();
    let limits = RoleLimits::resolve(role, &env.config.limits);
    // A note whose chain depth cannot be read counts as the end of a chain.
    let hops = if notes.iter().any(|n| n.hops_unknown) {
        limits.max_chain_depth
    } else {
        notes.iter().map(|n| n.hops).max().unwrap_or(0)
    };
    crate::base::blocking::run(|| {
        // One read of state serves the prompt (last hashes) and the attempt counts; the role's
        // run lock keeps anyone else from changing either meanwhile.
        let state = env.store.load();
        let src = PromptSources {
            vault: &env.vault,
            config: &env.config,
            state: &state,
        };
        let prompt = build_prompt(&src, role, trigger, notes, started);
        let prep = Prepared {
            id: crate::base::run_id::RunId::new(&role.name, started),
            started,
            ttl: cache_ttl(role, &env.config, started),
            state,
            hashes: prompt.hashes.clone(),
            limits,
            hops,
            notes: prompt.skills_left_out.clone(),
        };
        (prep, prompt)
    })
}

/// The role's approvals decided since it was last told, as prompt lines (docs/spec.md §15).
fn decided_approvals(state: &State, role: &Role) -> Vec<(String, String)> {
    let mut v: Vec<(&String, &crate::gate::approvals::Approval)> = state
        .approvals
        .iter()
        .filter(|(_, a)| a.role == role.name && a.phase.is_decided() && !a.reported)
        .collect();
    v.sort_by_key(|(_, a)| a.decided);
    v.into_iter()
        .map(|(id, a)| {
            let outcome = a.outcome.clone().unwrap_or_else(|| a.phase.as_str().to_string());
            // A call by the name the model knows it; a checkpoint as what it was.
            let what = match a.is_checkpoint() {
                true => a.what(),
                false => format!("`{}`", a.exposed),
            };
            (
                id.clone(),
                format!(
                    "- {what} (asked in run {}, note {}): {outcome}",
                    a.run_id,
                    crate::records::runlog::wikilink(&a.note)
                ),
            )
        })
        .collect()
}

/// A server that was down, for the run's daily-log section (with the end of its stderr).
pub(super) fn down_line(d: &crate::capabilities::mcp::tools::Down) -> String {
    format!(
        "**MCP server down:** `{}` {}{}",
        d.problem.server,
        d.problem.why,
        last_output(d)
    )
}

/// The last lines a server wrote to stderr, for a person reading why it is down.
pub(super) fn last_output(d: &crate::capabilities::mcp::tools::Down) -> String {
    let lines: Vec<&str> = d.problem.stderr.lines().collect();
    let tail = &lines[lines.len().saturating_sub(3)..];
    if tail.is_empty() {
        String::new()
    } else {
        format!(" — its last output: `{}`", tail.join(" | "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn role(schedule: &str) -> Role {
        crate::setup::role::RoleSet::from_texts(
            [(
                "r".to_string(),
                std::path::PathBuf::from("roles/r.md"),
                Ok(format!("# R\n## Schedule\n{schedule}\n")),
            )],
            &crate::setup::role::LoadContext::new(chrono_tz::UTC, crate::base::environment::Env::default()),
        )
        .roles["r"]
            .clone()
    }

    #[test]
    fn the_cache_ttl_follows_the_schedule_unless_configured() {
        let now: DateTime<Utc> = "2026-11-23T08:00:00Z".parse().unwrap();
        let mut config = Config::default();
        assert_eq!(
            cache_ttl(&role("every 30 min, 9am-6pm weekdays"), &config, now),
            CacheTtl::OneHour
        );
        assert_eq!(
            cache_ttl(&role("9am and 5pm, weekdays"), &config, now),
            CacheTtl::FiveMinutes
        );
        assert_eq!(cache_ttl(&role("on-demand"), &config, now), CacheTtl::FiveMinutes);
        config.provider.cache_ttl = Some(CacheTtl::FiveMinutes);
        assert_eq!(
            cache_ttl(&role("every 30 min"), &config, now),
            CacheTtl::FiveMinutes
        );
    }

    /// The prompt's "approvals decided" lines show a checkpoint as what it was and what happened
    /// ("checkpoint after 3 calls: continued"), never the person's instruction as an outcome.
    #[test]
    fn a_decided_checkpoint_reads_as_one_in_the_prompt() {
        let mut state = State::default();
        let mut a: crate::gate::approvals::Approval = serde_json::from_value(serde_json::json!({
            "role": "r", "tool": "checkpoint", "exposed": "checkpoint", "risk": "read",
            "note": "agent/approvals/c.md", "args_hash": "", "run_id": "run-1",
            "created": "2026-11-28T18:00:00Z", "expires": "2026-11-30T18:00:00Z", "phase": "done",
            "outcome": "continued with your instruction", "instruction": "use the archive",
            "kind": {"checkpoint": {"calls": 3, "every": 3}}
        }))
        .unwrap();
        state.approvals.insert("c1".into(), a.clone());
        a.kind = Default::default();
        a.exposed = "write_file".into();
        a.outcome = Some("ran: wrote x.md".into());
        state.approvals.insert("w1".into(), a);
        let lines: Vec<String> = decided_approvals(&state, &role("on-demand"))
            .into_iter()
            .map(|l| l.1)
            .collect();
        assert!(
            lines.contains(&"- checkpoint after 3 calls (asked in run run-1, note [[agent/approvals/c]]): continued with your instruction".to_string()),
            "{lines:?}"
        );
        assert!(
            lines.iter().any(|l| l.starts_with("- `write_file` (asked")),
            "{lines:?}"
        );
        assert!(lines.iter().all(|l| !l.contains("use the archive")), "{lines:?}");
    }
}
