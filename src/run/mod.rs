//! One run of one role, start to finish (DESIGN §5, §7, §9): prepare the prompt, skip at zero
//! tokens when nothing changed, run the turn, then finish (`finish.rs`): decide, record, log,
//! move notes.

mod finish;

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};

use crate::blocking;
use crate::clock::Clock;
use crate::config::Config;
use crate::cost::CacheTtl;
use crate::faults::Faults;
use crate::inbox::Note;
use crate::limits::RoleLimits;
use crate::mcp::tools::RunTools;
use crate::prompt::{self, Prompt, PromptInput};
use crate::provider::{FailureClass, Provider, RetryPolicy};
use crate::role::{Role, RoleSet};
use crate::runlog::{RunLog, RunRecord};
use crate::state::{State, StateStore};
use crate::toolbox::Toolbox;
use crate::trigger::Trigger;
use crate::turn::{self, TurnEnd, TurnLimits, TurnOutcome};
use crate::vault::{Vault, VaultPath};

pub use finish::{record_crash, record_crash_in_memory, recover, run_lock_path};

/// Everything a run needs from the daemon or the command line; cheap to clone.
#[derive(Clone)]
pub struct RunEnv {
    pub vault: Arc<Vault>,
    pub config: Arc<Config>,
    pub roles: Arc<RoleSet>,
    pub provider: Arc<dyn Provider>,
    pub store: StateStore,
    pub log: Arc<RunLog>,
    pub clock: Arc<dyn Clock>,
    pub faults: Faults,
    /// tabd's own environment, for `${VAR}` in MCP servers' settings.
    pub process_env: crate::environment::Env,
    /// The daemon's `keep_alive` MCP servers (none for `tabd fire`: they start for the run).
    pub mcp_pool: Option<Arc<crate::mcp::pool::Pool>>,
}

/// What a run ended as.
#[derive(Debug, Clone)]
pub struct RunResult {
    pub record: RunRecord,
    pub summary: String,
    /// Set when the run failed; `Outage` means "pause model calls", not "blame the notes".
    pub failure: Option<(FailureClass, String)>,
    pub daily_log: VaultPath,
    /// Every file the run's tools changed (written, appended, moved to, triggered, remembered).
    pub changes: Vec<crate::calls::Change>,
    /// The run was skipped at zero tokens (`skip_unchanged`): why.
    pub skipped: Option<String>,
    /// Logs that could not be written (the run itself is recorded in state and its notes moved).
    pub log_errors: Vec<String>,
}

impl RunResult {
    pub fn succeeded(&self) -> bool {
        self.failure.is_none()
    }
}

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
        model: role.settings.model.clone().unwrap_or_else(|| p.model.clone()),
        max_tokens: role.settings.max_tokens.unwrap_or(p.max_tokens),
        temperature: role.settings.temperature.or(p.temperature),
        thinking_budget: role.settings.thinking_budget.unwrap_or(p.thinking_budget),
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

/// Builds the prompt a run of `role` would send now, from state as it is (also what
/// `tabd prompt` prints: one function, so the two can never differ).
pub fn build_prompt(
    src: &PromptSources<'_>,
    role: &Role,
    trigger: &Trigger,
    notes: &[Note],
    tools: Vec<crate::calls::ToolSpec>,
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
        tools,
        notices: Vec::new(),
    })
}

fn run_id(role: &str, at: DateTime<Utc>) -> String {
    format!(
        "{}-{role}-{:04x}",
        at.format("%Y%m%dT%H%M%SZ"),
        rand::random::<u16>()
    )
}

/// What a run knows before it calls the model.
pub(crate) struct Prepared {
    pub id: String,
    pub started: DateTime<Utc>,
    pub state: State,
    /// Memory and context hashes the prompt was built from.
    pub hashes: BTreeMap<String, String>,
    pub limits: RoleLimits,
    pub ttl: CacheTtl,
    pub toolbox: Toolbox,
    /// Extra lines for the run's daily-log section (servers that were down).
    pub notes: Vec<String>,
}

/// Reads state, builds the toolbox and the prompt (filesystem work: off the runtime's hands).
fn prepare(env: &RunEnv, role: &Role, trigger: &Trigger, notes: &[Note]) -> (Prepared, Prompt) {
    let started = env.clock.now();
    let limits = RoleLimits::resolve(role, &env.config.limits);
    // A note whose chain depth cannot be read counts as the end of a chain.
    let hops = if notes.iter().any(|n| n.hops_unknown) {
        limits.max_chain_depth
    } else {
        notes.iter().map(|n| n.hops).max().unwrap_or(0)
    };
    let toolbox = Toolbox::new(
        env.vault.clone(),
        role,
        env.roles.clone(),
        hops,
        limits.max_chain_depth,
        env.clock.clone(),
    );
    blocking::run(|| {
        // One read of state serves the prompt (last hashes) and the attempt counts; the role's
        // run lock keeps anyone else from changing either meanwhile.
        let state = env.store.load();
        let src = PromptSources {
            vault: &env.vault,
            config: &env.config,
            state: &state,
        };
        let prompt = build_prompt(&src, role, trigger, notes, toolbox.specs(), started);
        let id = run_id(&role.name, started);
        let mut toolbox = toolbox;
        toolbox.approvals = Some(crate::approvals::request::AskContext {
            run_id: id.clone(),
            run_log: env.log.daily_path(started).as_str().to_string(),
            expire_after: env.config.approvals.expire_after,
            tz: env.config.timezone,
        });
        let prep = Prepared {
            id,
            started,
            ttl: cache_ttl(role, &env.config, started),
            state,
            hashes: prompt.hashes.clone(),
            limits,
            toolbox,
            notes: Vec::new(),
        };
        (prep, prompt)
    })
}

/// Runs `role` once for `trigger` with `notes` (already chosen, in order).
pub async fn run_role(env: &RunEnv, role: &Role, trigger: Trigger, notes: Vec<Note>) -> RunResult {
    if env.faults.hit("panic-in-run") {
        panic!("TABD_FAULTS: panic-in-run");
    }
    let (mut prep, mut prompt) = prepare(env, role, &trigger, &notes);
    if trigger.skip_if_unchanged && notes.is_empty() {
        let unchanged = previous_hashes(&prep.state, role).is_some_and(|h| *h == prep.hashes);
        if unchanged {
            return blocking::run(|| finish::skipped(env, role, &trigger, &prep));
        }
    }
    // MCP servers start only now: a skipped slot never starts one.
    let mcp = Arc::new(RunTools::open(role, &env.config, &env.process_env, env.mcp_pool.as_deref()).await);
    prep.notes = mcp.down.iter().map(down_line).collect();
    let outcome = match mcp.required_down() {
        Some(d) => TurnOutcome::ended(TurnEnd::ServerDown {
            cause: format!("{} (it is required)", d.problem),
            last_output: last_output(d),
        }),
        None => {
            prompt.tools.extend(mcp.specs());
            if let Some((title, body)) = mcp.notice() {
                prompt.add_notice(&title, &body);
            }
            let decided = decided_approvals(&prep.state, role);
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
            prep.toolbox.mcp = mcp.clone();
            let outcome = call_model(env, role, &prep, prompt).await;
            if outcome.requests > 0 && !decided.is_empty() {
                // The model has been told: later runs are not.
                let ids: Vec<String> = decided.into_iter().map(|(id, _)| id).collect();
                let store = env.store.clone();
                let marked = blocking::run(move || {
                    store.update(|s| {
                        for id in &ids {
                            if let Some(a) = s.approvals.get_mut(id) {
                                a.reported = true;
                            }
                        }
                    })
                });
                if let Err(e) = marked {
                    tracing::warn!(
                        "role {}: cannot record that approvals were reported: {e}",
                        role.name
                    );
                }
            }
            outcome
        }
    };
    mcp.close().await;
    blocking::run(|| finish::finish(env, role, trigger, notes, prep, outcome))
}

/// The role's approvals decided since it was last told, as prompt lines (DESIGN §15).
fn decided_approvals(state: &State, role: &Role) -> Vec<(String, String)> {
    let mut v: Vec<(&String, &crate::approvals::Approval)> = state
        .approvals
        .iter()
        .filter(|(_, a)| a.role == role.name && a.phase.is_decided() && !a.reported)
        .collect();
    v.sort_by_key(|(_, a)| a.decided);
    v.into_iter()
        .map(|(id, a)| {
            let outcome = a.outcome.clone().unwrap_or_else(|| a.phase.as_str().to_string());
            (
                id.clone(),
                format!(
                    "- `{}` (asked in run {}, note {}): {outcome}",
                    a.exposed,
                    a.run_id,
                    crate::runlog::wikilink(&a.note)
                ),
            )
        })
        .collect()
}

/// A server that was down, for the run's daily-log section (with the end of its stderr).
fn down_line(d: &crate::mcp::tools::Down) -> String {
    format!(
        "**MCP server down:** `{}` {}{}",
        d.problem.server,
        d.problem.why,
        last_output(d)
    )
}

/// The last lines a server wrote to stderr, for a person reading why it is down.
fn last_output(d: &crate::mcp::tools::Down) -> String {
    let lines: Vec<&str> = d.problem.stderr.lines().collect();
    let tail = &lines[lines.len().saturating_sub(3)..];
    if tail.is_empty() {
        String::new()
    } else {
        format!(" — its last output: `{}`", tail.join(" | "))
    }
}

async fn call_model(env: &RunEnv, role: &Role, prep: &Prepared, prompt: Prompt) -> TurnOutcome {
    let ms = model_settings(role, &env.config);
    let limits = TurnLimits {
        max_tool_calls: prep.limits.max_tool_calls,
        max_tokens_per_run: prep.limits.max_tokens_per_run,
        max_cost_usd: prep.limits.max_cost_usd,
        price: env.config.prices.price(&ms.model),
        cache_ttl: prep.ttl,
        deadline: env.clock.instant() + prep.limits.run_deadline,
    };
    if env.config.provider.kind == crate::config::ProviderKind::Command {
        let tools: Vec<String> = prompt.tools.iter().map(|t| t.name.clone()).collect();
        let request = prompt.into_request(&ms.model, ms.max_tokens, ms.temperature, ms.thinking_budget);
        let text = crate::agent_cli::prompt_text(&request);
        // The servers were opened for the tool list and the required-server check; the CLI's
        // `tabd mcp serve` opens its own, so these stop before it starts (never two at once).
        prep.toolbox.mcp.close().await;
        return crate::agent_cli::run_turn(env, role, &prep.id, text, &tools, prep.limits.run_deadline).await;
    }
    let request = prompt.into_request(&ms.model, ms.max_tokens, ms.temperature, ms.thinking_budget);
    let retry = RetryPolicy::from_config(&env.config.provider);
    turn::run_turn(env.provider.as_ref(), &retry, request, &limits, &prep.toolbox).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn role(schedule: &str) -> Role {
        crate::role::RoleSet::from_texts(
            [(
                "r".to_string(),
                std::path::PathBuf::from("roles/r.md"),
                Ok(format!("# R\n## Schedule\n{schedule}\n")),
            )],
            &crate::role::LoadContext::new(chrono_tz::UTC, crate::environment::Env::default()),
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
}
