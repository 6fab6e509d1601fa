//! The harness: the one function every tool call passes through, from every door — the model of
//! an API run, an agent CLI over MCP, `tabd mcp serve` (Claude Desktop), a call the person
//! approved in a note. One place applies, in this order:
//!
//! 1. **the role's lists** — `## Tools`, MCP allows, `deny_tools` (checked at listing and again here);
//!    then **the person's pre_tool hooks** (`gate::hooks`), which may deny the call or replace its
//!    arguments — every step below checks the arguments they let through;
//! 2. **`approve`** — auto runs, deny refuses, ask queues an approval note (a person-approved call
//!    skips this step, but is refused if the role now denies it);
//! 3. **limits** — the day's budgets (a call is a step: none runs once a daily budget is spent)
//!    and `max_tool_calls` for the whole run, whatever door the calls came through;
//! 4. **the sandbox and hops** — inside the vault tools (`access`, `max_chain_depth`) and the MCP
//!    argument check;
//! 5. **the record** — every call that counts, with what it changed; a call that ran is then
//!    shown to **the person's post_tool hooks**, whose lines the model gets with its result.
//!
//! The model is treated as hostile (docs/spec.md §8): nothing it sends can widen what the role may do.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::base::calls::{self, Change, Mode, Risk, ToolCallRecord, ToolResult, ToolSpec};
use crate::base::clock::Clock;
use crate::base::vault::Vault;
use crate::base::vault::VaultPath;
use crate::capabilities::mcp::tools::{McpTool, RunTools};
use crate::capabilities::provider::BoxFuture;
use crate::capabilities::telemetry::{Approval, ToolSpan};
use crate::capabilities::tools::{self, FatalToolError, ToolContext};
use crate::gate::approvals::request::{AskContext, Call};
use crate::records::access::AccessPolicy;
use crate::records::authorship::{Authorship, Whose};
use crate::records::state::StateStore;
use crate::setup::role::{Role, RoleSet};

mod hooked;
mod limit;
pub use limit::{Day, Limit};

/// Who is calling: the model (through any door: an API run, an agent CLI, an MCP client), or
/// the person, by approving a call in a note.
#[derive(Debug, Clone, Copy)]
pub enum Caller<'a> {
    /// The model asked for it (an API run, an agent CLI, an MCP client): `approve` decides.
    /// `reason` is the model's text before the call, shown in an approval note; `call_id` the
    /// model's id for the call, where the door has one (an API run).
    Model {
        reason: &'a str,
        call_id: Option<&'a str>,
    },
    /// The person approved it in a note: it runs unless the role now denies it.
    Approved,
}

/// What a call came to.
#[derive(Debug, Clone)]
pub struct Called {
    pub result: ToolResult,
    /// Set when the call was refused because the run reached a limit: the run should end.
    pub limit: Option<Limit>,
    /// The record of the call (`None` for a call refused by the limit: it did not count).
    pub record: Option<ToolCallRecord>,
}

/// Runs the model's tool calls: the turn loop talks to this, never to a tool.
pub trait ToolExecutor: Send + Sync {
    /// Runs the model's call `id` of tool `name`.
    fn call<'a>(
        &'a self,
        id: &'a str,
        name: &'a str,
        input: &'a Value,
        reason: &'a str,
    ) -> BoxFuture<'a, Result<Called, FatalToolError>>;
}

/// Runs the tasks a `delegate` call hands to other roles (docs/spec.md §18). The run layer provides
/// it (a child is a whole run); the harness only decides whether the call may happen.
pub trait Delegator: Send + Sync {
    /// Runs every task (in parallel up to the role's `max_parallel_delegates`) and returns what
    /// each came to, in order.
    fn run(&self, tasks: Vec<tools::delegate::Task>) -> BoxFuture<'_, Vec<tools::delegate::DelegateOutcome>>;
}

/// What one run (or one `tabd mcp serve` session) may do, fixed when it starts.
#[derive(Clone)]
pub struct Ticket {
    /// Chain depth of the notes that started the run (0 for a scheduled run).
    pub hops: u32,
    pub max_chain_depth: u32,
    pub max_tool_calls: u32,
    /// Where `ask` calls are queued; `None`: no approval can be asked for (the call is refused).
    pub asks: Option<AskContext>,
    /// Told of every call that runs.
    pub progress: crate::base::progress::Progress,
    /// Runs `delegate` calls; `None`: this run may not delegate (none named, or the depth is
    /// used up), and `delegate` is not offered.
    pub delegator: Option<Arc<dyn Delegator>>,
    /// Where vault changes are journaled for undo (docs/spec.md §19); `None`: not journaled.
    pub journal: Option<Arc<crate::records::journal::RunJournal>>,
    /// What the run holds in the cluster (docs/spec.md §23): checked before every call that runs.
    pub fence: crate::base::fence::Fence,
    /// The run's span: each call gets an `execute_tool` child (nothing when telemetry is off).
    pub trace: crate::capabilities::telemetry::RunSpan,
    /// Whose each vault file is: a change to the person's own note waits for their approval
    /// (docs/spec.md §26), and what the run makes is recorded as tabd's.
    pub authorship: Arc<Authorship>,
    /// The day the run spends in: a call is a step, and none runs once a daily budget is spent.
    /// `None`: the door checks the day itself (`tabd mcp serve`), or no budget applies (an undo).
    pub day: Option<Arc<dyn Day>>,
    /// The person's pre_tool and post_tool hooks (docs/spec.md §28): every call the role has runs
    /// past them, whatever door it came through.
    pub hooks: Arc<crate::gate::hooks::Hooks>,
}

impl std::fmt::Debug for Ticket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ticket")
            .field("hops", &self.hops)
            .field("max_chain_depth", &self.max_chain_depth)
            .field("max_tool_calls", &self.max_tool_calls)
            .field("may_delegate", &self.delegator.is_some())
            .finish()
    }
}

/// Everything the run's calls did, in order.
#[derive(Debug, Default, Clone)]
pub struct CallLog {
    pub calls: Vec<ToolCallRecord>,
    pub changes: Vec<Change>,
    /// Lines the calls left for the run's daily section (leftovers a child's call left, moved).
    pub notes: Vec<String>,
}

/// The tools of one run of one role.
pub struct Harness {
    vault: Arc<Vault>,
    role: Role,
    roles: Arc<RoleSet>,
    policy: AccessPolicy,
    clock: Arc<dyn Clock>,
    store: StateStore,
    mcp: Arc<RunTools>,
    ticket: Ticket,
    /// Calls that counted against `max_tool_calls` (taken before a call starts).
    used: AtomicU32,
    log: Mutex<CallLog>,
}

/// What `decide` made of a call: its result, the approval note it queued and how it was let
/// through; or the refusal at `max_tool_calls` (it does not count, so it is not recorded).
enum Gated {
    Done(ToolResult, Option<String>, Approval),
    Limit(Called),
}

/// A call as the approval policy sees it: its name in the role file (`write_file`,
/// `server/tool`), its risk class, and the MCP tool behind it, if any.
struct Classified<'a> {
    key: String,
    risk: Risk,
    mcp: Option<&'a McpTool>,
}

/// Why a run's final answer was not written to its `output.path` (said in its daily section).
#[derive(Debug, thiserror::Error)]
pub enum AnswerNotWritten {
    #[error(transparent)]
    Fence(#[from] crate::base::fence::Lost),
    #[error(transparent)]
    Failed(#[from] tools::FatalToolError),
    /// The write was refused as a tool call would be: the refusal's text.
    #[error("{0}")]
    Refused(String),
}

/// Why the harness does not offer a tool this run asked for by name (the model reads it as the
/// call's result; an approved call's note says it).
#[derive(Debug, thiserror::Error)]
pub enum NotOffered {
    #[error(
        "refused: this run may not delegate: it is itself a delegated task at the depth \
         max_delegation_depth allows; do the work yourself"
    )]
    DelegationTooDeep,
    /// The role names no roles to ask (in `file`); `tools`: what it may call.
    #[error(
        "refused: this role may not delegate (a person names roles with can_delegate_to in {}); its tools are: {}",
        .file.display(),
        .tools.join(", ")
    )]
    MayNotDelegate {
        file: std::path::PathBuf,
        tools: Vec<String>,
    },
    /// A vault tool the role does not list (`tools::not_listed`'s sentence).
    #[error("refused: {0}")]
    NotListed(String),
    #[error("refused: this role may not use `{name}` ({server}/{tool} is in its deny_tools)")]
    DeniedTool {
        name: String,
        server: String,
        tool: String,
    },
    #[error("refused: there is no tool named `{name}` for this role; its tools are: {}", .tools.join(", "))]
    NoSuchTool { name: String, tools: Vec<String> },
}

/// Why a call cannot run as it now stands (`Harness::check`, before an approved call runs).
#[derive(Debug, thiserror::Error)]
pub enum NotCallable {
    #[error(transparent)]
    NotOffered(#[from] NotOffered),
    #[error("the arguments cannot be read: {0}")]
    Unreadable(crate::formats::json::JsonError),
    /// The role's `approve` now says `deny` for this tool (its name in the role file).
    #[error("the role's `approve` setting now denies {0}")]
    Denied(String),
    #[error("the arguments do not fit the tool's schema: {0}")]
    Unfit(crate::capabilities::mcp::schema::Mismatch),
}

impl Harness {
    pub fn new(
        vault: Arc<Vault>,
        role: &Role,
        roles: Arc<RoleSet>,
        clock: Arc<dyn Clock>,
        mcp: Arc<RunTools>,
        ticket: Ticket,
    ) -> Self {
        Self {
            store: StateStore::new(vault.clone()),
            vault,
            policy: AccessPolicy::for_role(role)
                .with_inboxes(roles.roles.values().filter(|r| !r.is_abstract).map(|r| &r.inbox)),
            role: role.clone(),
            roles,
            clock,
            mcp,
            ticket,
            used: AtomicU32::new(0),
            log: Mutex::new(CallLog::default()),
        }
    }

    pub fn role(&self) -> &Role {
        &self.role
    }

    pub fn ticket(&self) -> &Ticket {
        &self.ticket
    }

    pub fn mcp(&self) -> &RunTools {
        &self.mcp
    }

    /// What the model is offered: the role's vault tools, `delegate` if this run may delegate,
    /// then its MCP tools.
    pub fn specs(&self) -> Vec<ToolSpec> {
        let mut specs = tools::specs_for(&self.role);
        if self.may_delegate() {
            specs.push(tools::delegate::spec(&self.role));
        }
        specs.extend(self.mcp.specs());
        specs
    }

    /// Whether this run offers `delegate`.
    fn may_delegate(&self) -> bool {
        self.role.may_delegate() && self.ticket.delegator.is_some()
    }

    /// The risk class of a tool the harness offers, by the name the model sees.
    pub fn risk_of(&self, name: &str) -> Option<Risk> {
        if name == calls::DELEGATE {
            return Some(Risk::Write);
        }
        tools::vault_risk(name).or_else(|| self.mcp.get(name).map(|t| t.risk))
    }

    /// A line for the run's daily section from outside a call (what an agent CLI's turn left
    /// in the vault, moved aside).
    pub fn note(&self, line: String) {
        self.log
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .notes
            .push(line);
    }

    /// Everything recorded so far (the run's record takes it at the end).
    pub fn log(&self) -> CallLog {
        self.log.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The name the role file uses for the tool the model calls `name` (`write_file`,
    /// `server/tool`), if the role has it.
    pub fn key_of(&self, name: &str) -> Option<String> {
        self.classify(name).ok().map(|c| c.key)
    }

    /// Everything `call` would check before running, without running: the lists, `approve`
    /// (deny), and the input against the tool's schema. For a call the person approved, checked
    /// before tabd records that it is executing.
    pub fn check(&self, name: &str, input: &Value) -> Result<(), NotCallable> {
        let call = self.classify(name)?;
        crate::formats::json::check(input).map_err(NotCallable::Unreadable)?;
        if crate::gate::approvals::mode_for(&self.role, &call.key, call.risk) == Mode::Deny {
            return Err(NotCallable::Denied(call.key));
        }
        let schema = match call.mcp {
            Some(t) => t.spec.input_schema.clone(),
            None if name == calls::DELEGATE => tools::delegate::spec(&self.role).input_schema,
            None => tools::specs_for(&self.role)
                .into_iter()
                .find(|s| s.name == name)
                .map(|s| s.input_schema)
                .unwrap_or_default(),
        };
        crate::capabilities::mcp::schema::InputSchema::new(name, &schema)
            .check(input)
            .map_err(NotCallable::Unfit)
    }

    /// The one door every tool call passes through, in an `execute_tool` span of the run's.
    pub async fn call(
        &self,
        name: &str,
        input: &Value,
        caller: Caller<'_>,
    ) -> Result<Called, FatalToolError> {
        let (call_id, ran) = match caller {
            Caller::Model { call_id, .. } => (call_id, Approval::Allowed),
            Caller::Approved => (None, Approval::Approved),
        };
        let mut span = self.ticket.trace.tool(name, call_id);
        match self.gate(name, input, caller, &mut span).await {
            Ok((called, approval)) => {
                span.end(approval, input, Ok(&called.result));
                Ok(called)
            }
            Err(fatal) => {
                span.end(ran, input, Err(&fatal.0));
                Err(fatal)
            }
        }
    }

    /// The lists, `approve`, the limits and the sandbox, then the call and its record; with how
    /// the call was let through.
    async fn gate(
        &self,
        name: &str,
        input: &Value,
        caller: Caller<'_>,
        span: &mut ToolSpan,
    ) -> Result<(Called, Approval), FatalToolError> {
        let too_deep = crate::formats::json::check(input).err();
        // What the call runs with: the model's arguments, or those a pre_tool hook put instead.
        let mut args = std::borrow::Cow::Borrowed(input);
        let (result, server, note, approval) = match self.classify(name) {
            Err(refusal) => (
                ToolResult::error(refusal.to_string()),
                None,
                None,
                Approval::Refused,
            ),
            // Refused before anything keeps them: records around them must stay readable.
            Ok(_) if too_deep.is_some() => (
                ToolResult::error(format!(
                    "refused: the arguments cannot be read: {}; send them flatter",
                    too_deep.as_ref().map(ToString::to_string).unwrap_or_default()
                )),
                None,
                None,
                Approval::Refused,
            ),
            Ok(call) => {
                let server = call.mcp.map(|t| t.server.clone());
                span.known(&call.key, call.risk, server.as_deref());
                match self.hooked(name, &mut args, caller, &call).await? {
                    Gated::Done(result, note, approval) => (result, server, note, approval),
                    Gated::Limit(called) => return Ok((called, Approval::Refused)),
                }
            }
        };
        self.settle_journal();
        let kept = match too_deep {
            Some(_) => std::borrow::Cow::Owned(Value::String(format!(
                "[arguments nested more than {} deep: not kept]",
                crate::formats::json::MAX_DEPTH
            ))),
            None => args,
        };
        let mut record = calls::record_of(name, &kept, &result, server.as_deref());
        record.approval = note;
        {
            let mut log = self.log.lock().unwrap_or_else(|p| p.into_inner());
            log.calls.push(record.clone());
            log.changes.extend(result.changes.iter().cloned());
            log.notes.extend(result.notes.iter().cloned());
        }
        let called = Called {
            result,
            limit: None,
            record: Some(record),
        };
        Ok((called, approval))
    }

    /// A call the role has: `approve` decides (deny, ask, auto; a person-approved call runs),
    /// then the cluster's fence and `max_tool_calls`, then the tool runs.
    async fn decide(
        &self,
        name: &str,
        input: &Value,
        caller: Caller<'_>,
        call: &Classified<'_>,
    ) -> Result<Gated, FatalToolError> {
        let mode = crate::gate::approvals::mode_for(&self.role, &call.key, call.risk);
        let ran = match caller {
            Caller::Model { .. } => Approval::Allowed,
            Caller::Approved => Approval::Approved,
        };
        let targets = self.targets(name, input, call);
        let theirs = self.persons_of(&targets);
        let person_mode = theirs
            .iter()
            .map(|p| self.policy.person_note_mode(p))
            .fold(Mode::Auto, Mode::stricter);
        if mode != Mode::Deny && person_mode == Mode::Deny {
            let result =
                ToolResult::error(format!(
                "refused: {} is the person's own note, and this role's `approve: {{person_notes: deny}}` \
                 refuses changes to their notes; write a new note instead",
                theirs.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
            ));
            return Ok(Gated::Done(result, None, Approval::Refused));
        }
        Ok(match (caller, mode.stricter(person_mode)) {
            (_, Mode::Deny) => Gated::Done(
                ToolResult::error(format!(
                    "refused: this role's `approve` setting denies `{}` ({} risk); do not retry it",
                    call.key,
                    call.risk.as_str()
                )),
                None,
                Approval::Refused,
            ),
            (Caller::Model { reason, .. }, Mode::Ask) => {
                let (result, note) = self.queue(name, input, reason, call, &theirs);
                let approval = if note.is_some() {
                    Approval::Asked
                } else {
                    Approval::Refused
                };
                Gated::Done(result, note, approval)
            }
            (Caller::Model { .. }, Mode::Auto) | (Caller::Approved, _) => {
                if let Err(lost) = self.ticket.fence.check() {
                    let result = ToolResult::error(format!("not run: {lost}; end the run now"));
                    return Ok(Gated::Done(result, None, Approval::Refused));
                }
                if let Some(limit) = self.day_spent().or_else(|| self.take_slot()) {
                    return Ok(Gated::Limit(limit));
                }
                self.ticket.progress.emit(crate::base::progress::Step::Tool {
                    name: name.to_string(),
                    subject: subject_of(input),
                });
                let result = match call.mcp {
                    Some(t) => t.call(input).await,
                    None if name == calls::DELEGATE => self.call_delegate(input).await,
                    None => self.call_vault(name, input)?,
                };
                if result.ok {
                    self.settle_authorship(name, &targets);
                }
                Gated::Done(result, None, ran)
            }
        })
    }

    /// The files a changing vault call would touch (`calls::CHANGING_TOOLS`), each with whose it
    /// is now; none for any other call. A file whose owner cannot be told counts as the
    /// person's: a missing record is never read as "tabd made it".
    fn targets(&self, name: &str, input: &Value, call: &Classified<'_>) -> Vec<(VaultPath, Whose)> {
        if call.mcp.is_some() || !calls::CHANGING_TOOLS.contains(&name) {
            return Vec::new();
        }
        let ctx = self.tool_context();
        let paths = crate::base::blocking::run(|| tools::changed_paths(&ctx, name, input));
        if paths.is_empty() {
            return Vec::new();
        }
        let whose =
            crate::base::blocking::run(|| self.ticket.authorship.whose_each(&paths)).unwrap_or_else(|e| {
                tracing::warn!(
                    "role {}: cannot tell whose {} is ({e}); treating it as the person's",
                    self.role.name,
                    paths
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                );
                vec![Whose::Persons; paths.len()]
            });
        paths.into_iter().zip(whose).collect()
    }

    /// The person's own notes a call of `name` with `input` would change as the vault stands now
    /// (an approved call checks them against those its note showed: `approvals::person::outdated`).
    pub fn persons_notes(&self, name: &str, input: &Value) -> Vec<VaultPath> {
        match self.classify(name) {
            Ok(call) => self.persons_of(&self.targets(name, input, &call)),
            Err(_) => Vec::new(),
        }
    }

    /// The person's own notes among `targets`.
    fn persons_of(&self, targets: &[(VaultPath, Whose)]) -> Vec<VaultPath> {
        targets
            .iter()
            .filter(|(_, w)| *w == Whose::Persons)
            .map(|(p, _)| p.clone())
            .collect()
    }

    /// After a changing call ran: what it made or changed of tabd's is recorded as tabd's; the
    /// person's notes stay theirs. A record that cannot be written leaves the file the person's
    /// (its next change asks): said, never fatal.
    fn settle_authorship(&self, name: &str, targets: &[(VaultPath, Whose)]) {
        if targets.is_empty() {
            return;
        }
        let authorship = &self.ticket.authorship;
        let settled = crate::base::blocking::run(|| match (name, targets) {
            ("move_file", [(from, was), (to, _)]) => authorship.moved(from, to, *was),
            _ => authorship.settle(targets),
        });
        if let Err(e) = settled {
            tracing::warn!(
                "role {}: cannot record what tabd made in {} ({e}); until it is, a change to it asks the person",
                self.role.name,
                crate::base::vault::layout::AUTHORSHIP
            );
        }
    }

    /// The role's lists: a call to a tool the role does not have is refused with what it has.
    fn classify(&self, name: &str) -> Result<Classified<'_>, NotOffered> {
        if name == calls::DELEGATE {
            if !self.may_delegate() {
                return Err(if self.role.may_delegate() {
                    NotOffered::DelegationTooDeep
                } else {
                    NotOffered::MayNotDelegate {
                        file: self.role.path.clone(),
                        tools: self.tool_names_owned(),
                    }
                });
            }
            return Ok(Classified {
                key: name.to_string(),
                risk: Risk::Write,
                mcp: None,
            });
        }
        if let Some(risk) = tools::vault_risk(name) {
            if !self.role.has_tool(name) {
                return Err(NotOffered::NotListed(tools::not_listed(
                    name,
                    &self.role,
                    &self.tool_names(),
                )));
            }
            return Ok(Classified {
                key: name.to_string(),
                risk,
                mcp: None,
            });
        }
        match self.mcp.get(name) {
            Some(t) if !self.role.allows_mcp(&t.server, &t.tool) => Err(NotOffered::DeniedTool {
                name: name.to_string(),
                server: t.server.clone(),
                tool: t.tool.clone(),
            }),
            Some(t) => Ok(Classified {
                key: format!("{}/{}", t.server, t.tool),
                risk: t.risk,
                mcp: Some(t),
            }),
            None => Err(NotOffered::NoSuchTool {
                name: name.to_string(),
                tools: self.tool_names_owned(),
            }),
        }
    }

    fn tool_names_owned(&self) -> Vec<String> {
        self.tool_names().into_iter().map(str::to_string).collect()
    }

    fn tool_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self
            .role
            .tools
            .iter()
            .map(String::as_str)
            .filter(|t| self.role.has_tool(t))
            .collect();
        names.extend(self.mcp.names());
        names
    }

    /// A call is a step of its run: none runs once a daily budget is spent (whatever spent it:
    /// this run, the runs it delegated to, other runs going on). It does not count.
    fn day_spent(&self) -> Option<Called> {
        let day = self.ticket.day.as_ref()?;
        let crossed = crate::base::blocking::run(|| day.crossed())?;
        Some(Called {
            result: ToolResult::error(format!(
                "not run: the {crossed}; this run ends now, and the role's work waits until midnight"
            )),
            limit: Some(Limit::Day(crossed)),
            record: None,
        })
    }

    /// Counts a call against `max_tool_calls`; `Some` when the run has none left.
    fn take_slot(&self) -> Option<Called> {
        let max = self.ticket.max_tool_calls;
        let taken = self
            .used
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| (n < max).then_some(n + 1));
        if taken.is_ok() {
            return None;
        }
        Some(Called {
            result: ToolResult::error(format!(
                "not run: this run reached its limit of {max} tool calls; finish with a short summary"
            )),
            limit: Some(Limit::ToolCalls(max)),
            record: None,
        })
    }

    /// Runs a `delegate` call: the tasks checked against `can_delegate_to`, then each a run of
    /// its role. One call counts once against `max_tool_calls`, whatever the number of tasks.
    async fn call_delegate(&self, input: &Value) -> ToolResult {
        let tasks = match tools::delegate::tasks(&self.role, input) {
            Ok(t) => t,
            Err(why) => return ToolResult::error(why.to_string()),
        };
        let Some(delegator) = &self.ticket.delegator else {
            return ToolResult::error("refused: this run may not delegate".into());
        };
        let single = tasks.len() == 1 && input.get("tasks").is_none();
        let outcomes = delegator.run(tasks).await;
        let all_failed = outcomes.iter().all(tools::delegate::DelegateOutcome::failed);
        // The contract's JSON (docs/spec.md §18) is made here, for the model, and nowhere earlier.
        let results: Vec<Value> = outcomes
            .iter()
            .map(tools::delegate::DelegateOutcome::to_json)
            .collect();
        let body = if single {
            results.into_iter().next().unwrap_or(Value::Null)
        } else {
            serde_json::json!({ "results": results })
        };
        let text = serde_json::to_string_pretty(&body).unwrap_or_default();
        if all_failed {
            ToolResult::error(text)
        } else {
            ToolResult::ok(text, 0, Vec::new())
        }
    }

    /// What the vault tools of this run work with: its role, sandbox, chain depth and journal.
    fn tool_context(&self) -> ToolContext<'_> {
        ToolContext {
            vault: &self.vault,
            role: &self.role,
            roles: &self.roles,
            policy: &self.policy,
            hops: self.ticket.hops,
            max_chain_depth: self.ticket.max_chain_depth,
            now: self.clock.now().with_timezone(&self.role.schedule.tz),
            journal: self.ticket.journal.as_deref(),
            authorship: Some(&self.ticket.authorship),
        }
    }

    /// Writes the run's final answer to `path` (the role's `output.path`), under the role's
    /// sandbox; the change joins the run's record. `Err` says why it was not written.
    pub fn write_output(&self, path: &str, answer: &str) -> Result<(), AnswerNotWritten> {
        self.ticket.fence.check()?;
        let ctx = self.tool_context();
        // The person named this note in the role file: their grant, so no approval is asked. What
        // tabd makes there is recorded as tabd's all the same.
        let input = serde_json::json!({ "path": path, "content": "" });
        let paths = crate::base::blocking::run(|| tools::changed_paths(&ctx, "write_file", &input));
        let whose = crate::base::blocking::run(|| self.ticket.authorship.whose_each(&paths))
            .unwrap_or_else(|_| vec![Whose::Persons; paths.len()]);
        let result = crate::base::blocking::run(|| tools::write_answer(&ctx, path, answer))?;
        if !result.ok {
            return Err(AnswerNotWritten::Refused(result.text));
        }
        self.settle_authorship("write_file", &paths.into_iter().zip(whose).collect::<Vec<_>>());
        self.settle_journal();
        let mut log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        log.changes.extend(result.changes);
        Ok(())
    }

    /// The undo journal records what the call left of each file it changed (so a run that
    /// crashes later is undone exactly as its dry run says).
    fn settle_journal(&self) {
        // Most calls change nothing: no file work, no trip off the runtime then.
        if let Some(j) = self.ticket.journal.as_ref().filter(|j| j.unsettled()) {
            if let Err(e) = crate::base::blocking::run(|| j.settle()) {
                tracing::warn!("run {}: cannot record in its undo journal: {e}", j.run_id());
            }
        }
    }

    /// Runs one vault tool call (filesystem work, off the async runtime's hands).
    fn call_vault(&self, name: &str, input: &Value) -> Result<ToolResult, FatalToolError> {
        let ctx = self.tool_context();
        crate::base::blocking::run(|| tools::execute(&ctx, name, input))
    }

    /// A call whose mode is `ask`: queued as an approval note; the model is told it has not run.
    fn queue(
        &self,
        name: &str,
        input: &Value,
        reason: &str,
        call: &Classified<'_>,
        theirs: &[VaultPath],
    ) -> (ToolResult, Option<String>) {
        let Some(ctx) = &self.ticket.asks else {
            let why = match theirs {
                [] => format!("({} risk)", call.risk.as_str()),
                _ => format!(
                    "(it changes the person's own note {})",
                    theirs
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            };
            return (
                ToolResult::error(format!(
                    "refused: `{}` needs the person's approval {why}, and approvals cannot be asked for here",
                    call.key,
                )),
                None,
            );
        };
        let theirs = crate::base::blocking::run(|| {
            crate::gate::approvals::person::asked(&self.vault, name, input, theirs)
        });
        let description = match call.mcp {
            Some(t) => t.spec.description.as_str(),
            None => tools::vault_description(name).unwrap_or(""),
        };
        let ask = Call {
            tool: &call.key,
            exposed: name,
            risk: call.risk,
            description,
            reason,
            args: input,
            theirs: &theirs,
        };
        let now = self.clock.now();
        let queued = crate::base::blocking::run(|| {
            crate::gate::approvals::request::ask(&self.store, ctx, &self.role, &ask, self.ticket.hops, now)
        });
        match queued {
            Ok(q) => (
                ToolResult::ok(crate::gate::approvals::request::queued_text(&q), 0, Vec::new()),
                Some(q.note),
            ),
            Err(why) => {
                tracing::error!("role {}: {why}", self.role.name);
                (
                    ToolResult::error(format!("not run: it needs approval, and {why}")),
                    None,
                )
            }
        }
    }
}

/// What a call is about, in a few words (a path, a role), for progress.
fn subject_of(input: &Value) -> String {
    ["path", "from", "role", "query"]
        .iter()
        .find_map(|k| input.get(k).and_then(Value::as_str))
        .map(|s| crate::base::text::one_line(s, 60))
        .unwrap_or_default()
}

impl ToolExecutor for Harness {
    fn call<'a>(
        &'a self,
        id: &'a str,
        name: &'a str,
        input: &'a Value,
        reason: &'a str,
    ) -> BoxFuture<'a, Result<Called, FatalToolError>> {
        Box::pin(Harness::call(
            self,
            name,
            input,
            Caller::Model {
                reason,
                call_id: Some(id),
            },
        ))
    }
}

/// A harness for tests: the one role `ops` of `role_text`, a run allowed `max_tool_calls` calls,
/// on the vault at `dir`.
#[cfg(test)]
pub(crate) fn for_test(dir: &std::path::Path, role_text: &str, max_tool_calls: u32) -> Harness {
    use crate::setup::role::{LoadContext, RoleSet};
    let vault = Arc::new(crate::base::vault::Vault::open(dir).expect("a vault"));
    let env = crate::base::environment::Env::from_pairs([("HOME", "/nonexistent")]);
    let file = (
        "ops".to_string(),
        std::path::PathBuf::from(crate::base::vault::layout::Layout::default().role_file("ops")),
        Ok(role_text.to_string()),
    );
    let roles = Arc::new(RoleSet::from_texts(
        [file],
        &LoadContext::new(chrono_tz::UTC, env),
    ));
    let role = roles.roles["ops"].clone();
    let ticket = Ticket {
        hops: 0,
        max_chain_depth: 3,
        max_tool_calls,
        asks: None,
        progress: Default::default(),
        delegator: None,
        journal: None,
        fence: Default::default(),
        trace: Default::default(),
        authorship: Arc::new(Authorship::new(
            vault.clone(),
            Arc::new(crate::base::signing::Key::shared(b"the harness tests' key")),
        )),
        day: None,
        hooks: Default::default(),
    };
    let clock = Arc::new(crate::base::clock::SystemClock);
    let tools = Arc::new(crate::capabilities::mcp::tools::RunTools::default());
    Harness::new(vault, &role, roles, clock, tools, ticket)
}

#[cfg(test)]
mod tests;
