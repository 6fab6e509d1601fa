//! The harness a run's model works through: which tools the role has, and every call checked
//! and run by tabd (DESIGN §8). The model never touches anything else.

use std::sync::Arc;

use serde_json::Value;

use crate::approvals::Mode;
use crate::blocking;
use crate::clock::Clock;
use crate::mcp::tools::RunTools;
use crate::provider::{BoxFuture, ToolSpec};
use crate::role::{Role, RoleSet};
use crate::tools::{self, AccessPolicy, FatalToolError, Risk, ToolCallRecord, ToolContext, ToolResult};
use crate::turn::ToolExecutor;
use crate::vault::Vault;

/// The tools of one run of one role.
pub struct Toolbox {
    pub vault: Arc<Vault>,
    pub role: Role,
    pub roles: Arc<RoleSet>,
    pub policy: AccessPolicy,
    /// Chain depth of the notes that triggered this run.
    pub hops: u32,
    pub max_chain_depth: u32,
    pub clock: Arc<dyn Clock>,
    /// The role's MCP tools for this run (empty until the servers are opened).
    pub mcp: Arc<RunTools>,
    /// Where `ask` calls are queued (DESIGN §15); `None` outside a run (no call is ever queued).
    pub approvals: Option<crate::approvals::request::AskContext>,
}

impl Toolbox {
    pub fn new(
        vault: Arc<Vault>,
        role: &Role,
        roles: Arc<RoleSet>,
        hops: u32,
        max_chain_depth: u32,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            vault,
            policy: AccessPolicy::for_role(role),
            role: role.clone(),
            roles,
            hops,
            max_chain_depth,
            clock,
            mcp: Arc::new(RunTools::default()),
            approvals: None,
        }
    }

    /// What the model is offered: the role's vault tools, then its MCP tools.
    pub fn specs(&self) -> Vec<ToolSpec> {
        let mut specs = tools::specs_for(&self.role);
        specs.extend(self.mcp.specs());
        specs
    }

    /// A call to a tool the role does not have: refused, with what it does have.
    fn unknown(&self, name: &str, input: &Value) -> (ToolResult, ToolCallRecord) {
        let mut names: Vec<&str> = self.role.tools.iter().map(String::as_str).collect();
        names.extend(self.mcp.names());
        let result = ToolResult::error(format!(
            "refused: there is no tool named `{name}` for this role; its tools are: {}",
            names.join(", ")
        ));
        let record = tools::record_of(name, input, &result, None);
        (result, record)
    }

    /// Runs one vault tool call (filesystem work, off the async runtime's hands).
    pub fn call_vault(
        &self,
        name: &str,
        input: &Value,
    ) -> Result<(ToolResult, ToolCallRecord), FatalToolError> {
        let ctx = ToolContext {
            vault: &self.vault,
            role: &self.role,
            roles: &self.roles,
            policy: &self.policy,
            hops: self.hops,
            max_chain_depth: self.max_chain_depth,
            now: self.clock.now().with_timezone(&self.role.schedule.tz),
        };
        blocking::run(|| tools::execute(&ctx, name, input))
    }
}

impl Toolbox {
    /// The call as the approval policy sees it: its name in the role file (`write_file`,
    /// `server/tool`), class and server. `None` for a tool the role does not have at all.
    fn classify(&self, name: &str) -> Option<(String, Risk, Option<String>, String)> {
        if let Some(risk) = tools::vault_risk(name) {
            let description = tools::specs_for(&self.role)
                .into_iter()
                .find(|s| s.name == name)
                .map(|s| s.description)
                .unwrap_or_default();
            return Some((name.to_string(), risk, None, description));
        }
        self.mcp.get(name).map(|t| {
            (
                format!("{}/{}", t.server, t.tool),
                t.risk,
                Some(t.server.clone()),
                t.spec.description.clone(),
            )
        })
    }

    /// A call whose mode is `ask`: queued as an approval note; the model is told it has not run.
    fn queue(
        &self,
        name: &str,
        input: &Value,
        reason: &str,
        (tool, risk, server, description): (String, Risk, Option<String>, String),
    ) -> (ToolResult, ToolCallRecord) {
        let Some(ctx) = &self.approvals else {
            let result = ToolResult::error(format!(
                "refused: `{tool}` needs the person's approval ({} risk), and approvals cannot be asked for outside a run",
                risk.as_str()
            ));
            return (
                result.clone(),
                tools::record_of(name, input, &result, server.as_deref()),
            );
        };
        let store = crate::state::StateStore::new(self.vault.clone());
        let call = crate::approvals::request::Call {
            tool: &tool,
            exposed: name,
            risk,
            description: &description,
            reason,
            args: input,
        };
        let queued = blocking::run(|| {
            crate::approvals::request::ask(&store, ctx, &self.role, &call, self.clock.now())
        });
        match queued {
            Ok(q) => {
                let result = ToolResult::ok(crate::approvals::request::queued_text(&q), 0, Vec::new());
                let mut record = tools::record_of(name, input, &result, server.as_deref());
                record.approval = Some(q.note);
                (result, record)
            }
            Err(why) => {
                tracing::error!("role {}: {why}", self.role.name);
                let result = ToolResult::error(format!("not run: it needs approval, and {why}"));
                (
                    result.clone(),
                    tools::record_of(name, input, &result, server.as_deref()),
                )
            }
        }
    }

    /// Allow and deny lists (checked at listing, and again here), then the approval mode.
    async fn dispatch(
        &self,
        name: &str,
        input: &Value,
        reason: &str,
    ) -> Result<(ToolResult, ToolCallRecord), FatalToolError> {
        let is_vault = tools::is_vault_tool(name);
        let mcp = self.mcp.get(name);
        if !is_vault {
            match mcp {
                None => return Ok(self.unknown(name, input)),
                Some(t) if !self.role.allows_mcp(&t.server, &t.tool) => {
                    let result = ToolResult::error(format!(
                        "refused: this role may not use `{name}` ({}/{} is in its deny_tools)",
                        t.server, t.tool
                    ));
                    return Ok((
                        result.clone(),
                        tools::record_of(name, input, &result, Some(&t.server)),
                    ));
                }
                Some(_) => {}
            }
        } else if !self.role.has_tool(name) {
            // The vault tools refuse it themselves, with the role's tool list.
            return self.call_vault(name, input);
        }
        let Some(class) = self.classify(name) else {
            return Ok(self.unknown(name, input));
        };
        match crate::approvals::mode_for(&self.role, &class.0, class.1) {
            Mode::Auto => match mcp {
                Some(t) if !is_vault => Ok(t.call(input).await),
                _ => self.call_vault(name, input),
            },
            Mode::Deny => {
                let result = ToolResult::error(format!(
                    "refused: this role's `approve` setting denies `{}` ({} risk); do not retry it",
                    class.0,
                    class.1.as_str()
                ));
                Ok((
                    result.clone(),
                    tools::record_of(name, input, &result, class.2.as_deref()),
                ))
            }
            Mode::Ask => Ok(self.queue(name, input, reason, class)),
        }
    }
}

impl ToolExecutor for Toolbox {
    fn call<'a>(
        &'a self,
        name: &'a str,
        input: &'a Value,
        reason: &'a str,
    ) -> BoxFuture<'a, Result<(ToolResult, ToolCallRecord), FatalToolError>> {
        Box::pin(self.dispatch(name, input, reason))
    }
}
