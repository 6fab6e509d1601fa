//! A session: what every door opens before a single tool can be called (docs/spec.md §21) — an API
//! run, a delegated child, a CLI run, `tabd mcp serve`, an approved call, an undo. It owns the
//! session's id (`base::run_id`: one format, unique even for two sessions started in the same second), its
//! account (tokens and dollars, with the ceilings of every session above it), its hop count, the
//! gate its `delegate` children pass (`max_parallel_delegates` for the whole session, whatever
//! door the calls came through), its undo journal, its MCP servers and its delegator. It is
//! closed once (`close`), and a session dropped unclosed (a panic, a cancelled task) still seals
//! its journal and stops its servers.
//!
//! Every ceiling holds the same from every door: the account carries the run and dollar
//! ceilings of every session above; a run's day (`day::RunDay`) counts what it spends in its
//! role's day and in those above it, and its harness and turn check the daily budgets between
//! two steps; a delegated child is refused when its role's day is spent (`limits::day_spent`,
//! the check the daemon makes before a scheduled run).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use tokio::time::Instant;

use super::day::RunDay;
use super::delegate::{delegator_for, Lineage, RunDelegator};
use super::env::RunEnv;
use crate::base::cost::Account;
use crate::base::run_id::RunId;
use crate::base::trigger::Trigger;
use crate::capabilities::mcp::tools::RunTools;
use crate::capabilities::telemetry::{RunEnd, RunSpan, RunStart, Telemetry};
use crate::gate::approvals::request::AskContext;
use crate::gate::harness::{Harness, Ticket};
use crate::records::journal::RunJournal;
use crate::records::limits::RoleLimits;
use crate::setup::config::Config;
use crate::setup::role::Role;

/// Which door opened a session (its journal and record say so).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenedBy {
    /// A run: scheduled, from notes, fired, or delegated (the trigger says which).
    Run,
    /// `tabd mcp serve --role R`: an MCP client's session.
    McpServe,
    /// A call the person approved in a note.
    Approved,
    /// `tabd undo`.
    Undo,
}

impl OpenedBy {
    /// The label its journal keeps.
    fn label(self, trigger: &Trigger) -> &str {
        match self {
            Self::Run => trigger.kind.as_str(),
            Self::McpServe => "mcp",
            Self::Approved => "approved",
            Self::Undo => crate::records::journal::UNDO_TRIGGER,
        }
    }
}

/// Which of the role's MCP servers a session starts.
#[derive(Debug, Clone, Copy)]
pub enum Servers<'a> {
    /// Every one the role uses.
    All,
    /// Only this one (an approved call needs one).
    Only(&'a str),
    /// None (an undo).
    None,
}

/// What a door knows when it opens a session.
pub struct Opening<'a> {
    pub opened_by: OpenedBy,
    pub role: &'a Role,
    pub trigger: &'a Trigger,
    /// The session's id (`RunId::new`, or the first part's when a run goes on).
    pub id: RunId,
    pub started: DateTime<Utc>,
    /// Chain depth of what started it (notes' hops; an approved call's asking run's).
    pub hops: u32,
    /// The session that delegated to this one, if any: its account, deadline and hops.
    pub lineage: Lineage,
    pub servers: Servers<'a>,
    /// How many levels it may still delegate, when the door knows less than the trigger says
    /// (an approved `delegate`: its asking run's depth is not kept); `None`: the role's.
    pub depth_left: Option<u32>,
}

/// One session of one role (see the module's text).
pub struct Session {
    pub id: RunId,
    pub opened_by: OpenedBy,
    pub role: Role,
    pub started: DateTime<Utc>,
    pub limits: RoleLimits,
    pub account: Account,
    /// The chain depth: the most of what started it and of the session above it.
    pub hops: u32,
    /// When it must end (its own deadline, or the delegating session's, if sooner).
    pub deadline: Instant,
    pub journal: Arc<RunJournal>,
    pub mcp: Arc<RunTools>,
    pub delegator: Option<Arc<RunDelegator>>,
    /// Its `invoke_agent` span (empty when telemetry is off, and for an undo).
    pub trace: RunSpan,
    /// The day a run spends in (a run's session only: `tabd mcp serve` counts its session's day
    /// itself, an approved call or an undo calls no model).
    pub day: Option<Arc<RunDay>>,
    env: RunEnv,
    closed: AtomicBool,
}

impl Session {
    /// Opens a session: its account under its ceilings (and those above it), its journal, its
    /// delegator and its MCP servers.
    pub async fn open(env: &RunEnv, o: Opening<'_>) -> Session {
        let limits = RoleLimits::resolve(o.role, &env.config.limits);
        let account = match &o.lineage.account {
            Some(parent) => parent.child(limits.max_tokens_per_run, limits.max_cost_usd),
            None => Account::new(limits.max_tokens_per_run, limits.max_cost_usd),
        };
        let own_deadline = env.clock.instant() + limits.run_deadline;
        let deadline = o.lineage.deadline.map_or(own_deadline, |d| d.min(own_deadline));
        let hops = o.hops.max(o.lineage.hops);
        let trace = open_trace(&env.config, &env.telemetry, &o);
        let day = (o.opened_by == OpenedBy::Run).then(|| {
            Arc::new(RunDay::open(
                env,
                o.role,
                &limits,
                &o.lineage.day,
                o.trigger.over_budget,
            ))
        });
        let journal = Arc::new(
            RunJournal::new(
                env.vault.clone(),
                env.key.clone(),
                &o.id,
                &o.role.name,
                o.started,
                o.opened_by.label(o.trigger),
            )
            .with_faults(env.faults.clone())
            .with_max_kept(crate::records::journal::max_kept(&env.config.journal)),
        );
        let delegator = delegator_for(
            env,
            o.role,
            &o.id,
            o.trigger,
            o.depth_left.unwrap_or_else(|| o.role.delegation_left(o.trigger)),
            Lineage {
                account: Some(account.clone()),
                deadline: Some(deadline),
                hops,
                trace: trace.clone(),
                day: day.as_ref().map(|d| d.chain().to_vec()).unwrap_or_default(),
            },
        );
        let mcp = open_servers(env, o.role, o.servers).await.until(deadline);
        Session {
            id: o.id,
            opened_by: o.opened_by,
            role: o.role.clone(),
            started: o.started,
            limits,
            account,
            hops,
            deadline,
            journal,
            mcp: Arc::new(mcp),
            delegator,
            trace,
            day,
            env: env.clone(),
            closed: AtomicBool::new(false),
        }
    }

    /// What its calls may do: its hops and limits, where `ask` calls go (`asks`: `None` where
    /// no approval can be asked for), its delegator, its journal.
    pub fn ticket(&self, asks: Option<AskContext>, progress: crate::base::progress::Progress) -> Ticket {
        Ticket {
            hops: self.hops,
            max_chain_depth: self.limits.max_chain_depth,
            max_tool_calls: self.limits.max_tool_calls,
            asks,
            progress,
            delegator: self
                .delegator
                .clone()
                .map(|d| d as Arc<dyn crate::gate::harness::Delegator>),
            journal: Some(self.journal.clone()),
            fence: self.env.fence.clone(),
            trace: self.trace.clone(),
            authorship: Arc::new(crate::records::authorship::Authorship::new(
                self.env.vault.clone(),
                self.env.key.clone(),
            )),
            day: self.day.clone().map(|d| d as Arc<dyn crate::gate::harness::Day>),
            hooks: Arc::new(hooks_for(&self.env, &self.role, self.id.as_ref())),
        }
    }

    /// Where this session's `ask` calls are queued.
    pub fn asks(&self) -> AskContext {
        AskContext {
            run_id: self.id.to_string(),
            run_log: self.env.log.daily_path(self.started).as_str().to_string(),
            expire_after: self.env.config.approvals.expire_after,
            tz: self.env.config.timezone,
            secrets: self.env.launcher.env.redactor(),
            side: self.env.side.clone(),
        }
    }

    /// Its role's `checkpoint_every` for its turn, `before` tool calls made already; `waits`:
    /// the run waits for the person at one (else it ends there).
    pub fn checkpoints(&self, before: u32, waits: bool) -> Option<crate::running::turn::Checkpoints> {
        super::checkpoint::of(
            &self.role,
            self.asks(),
            (self.env.store.clone(), self.env.clock.clone()),
            (self.hops, before),
            waits,
        )
    }

    /// The harness its calls go through.
    pub fn harness(&self, ticket: Ticket) -> Harness {
        Harness::new(
            self.env.vault.clone(),
            &self.role,
            self.env.roles.clone(),
            self.env.clock.clone(),
            self.mcp.clone(),
            ticket,
        )
    }

    /// The delegated runs it started, in the order they ended.
    pub fn take_children(&self) -> Vec<super::RunResult> {
        self.delegator
            .as_ref()
            .map(|d| d.take_children())
            .unwrap_or_default()
    }

    /// Tokens and dollars its finished children recorded themselves.
    pub fn children_spent(&self) -> (u64, f64) {
        let Some(d) = self.delegator.as_ref() else {
            return (0, 0.0);
        };
        let children = d.children.lock().unwrap_or_else(|p| p.into_inner());
        children.iter().fold((0, 0.0), |(t, u), c| {
            (t + c.record.usage.tokens.total(), u + c.record.usage.cost_usd)
        })
    }

    /// Stops its servers and seals its journal with the notes it moved (`moved`: from, to).
    pub async fn close(&self, moved: &[(String, String)]) {
        if self.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        self.mcp.close().await;
        let now = self.env.clock.now();
        let journal = self.journal.clone();
        let moved = moved.to_vec();
        if let Err(e) = crate::base::blocking::run(move || journal.seal(&moved, now)) {
            tracing::warn!("session {}: cannot close its undo journal: {e}", self.id);
        }
    }
}

/// The person's hooks for a session or run `id` of `role` (docs/spec.md §28): the config's `[hooks]`,
/// then the sets its `hooks:` names; never given the provider's key.
pub fn hooks_for(env: &RunEnv, role: &Role, id: &str) -> crate::gate::hooks::Hooks {
    crate::gate::hooks::Hooks::new(
        &env.config.hooks,
        &role.settings.hooks,
        &env.launcher,
        &[env.config.provider.api_key_env.as_str()],
        (env.vault.root().to_path_buf(), &role.name, id),
    )
}

/// The role's MCP servers a session starts (`servers` says which).
async fn open_servers(env: &RunEnv, role: &Role, servers: Servers<'_>) -> RunTools {
    let only = match servers {
        Servers::All => None,
        Servers::Only(s) => Some(s),
        Servers::None => return RunTools::default(),
    };
    RunTools::open_only(role, &env.config, &env.launcher, env.mcp_pool.as_deref(), only).await
}

/// A session's `invoke_agent` span, under the delegating session's; none for an undo (no agent).
fn open_trace(config: &Config, telemetry: &Telemetry, o: &Opening<'_>) -> RunSpan {
    if o.opened_by == OpenedBy::Undo || !telemetry.is_on() {
        return RunSpan::default();
    }
    let p = &config.provider;
    let provider = match (&p.profile, p.kind) {
        (Some(profile), crate::setup::config::ProviderKind::Command) => profile.name.as_str(),
        _ => p.kind.as_str(),
    };
    let start = RunStart {
        role: &o.role.name,
        run_id: &o.id,
        door: match o.opened_by {
            OpenedBy::Run => "run",
            OpenedBy::McpServe => "mcp",
            OpenedBy::Approved => "approved",
            OpenedBy::Undo => "undo",
        },
        trigger: o.trigger.kind.as_str(),
        provider,
        model: &o.role.settings.model(p),
    };
    telemetry.run(&start, &o.lineage.trace)
}

/// Ends a run's span with what its record says.
pub fn end_trace(trace: &RunSpan, record: &crate::records::runlog::RunRecord) {
    if !trace.is_on() {
        return;
    }
    trace.end(&RunEnd {
        outcome: record.shown_outcome(),
        usage: &record.usage.tokens,
        cost_usd: record.usage.cost_usd,
        model: &record.model,
        error: record.error.as_deref(),
    });
}

impl Drop for Session {
    /// A session dropped unclosed (a panic, a cancelled task): its journal is sealed with what it
    /// did, and its servers are stopped (their handles kill them when the last one goes).
    fn drop(&mut self) {
        if self.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        if let Err(e) = self.journal.seal(&[], self.env.clock.now()) {
            tracing::warn!("session {}: cannot close its undo journal: {e}", self.id);
        }
        let mcp = self.mcp.clone();
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move { mcp.close().await });
        }
    }
}
