//! The harness a run's model works through: which tools the role has, and every call checked
//! and run by tabd (DESIGN §8). The model never touches anything else.

use std::sync::Arc;

use serde_json::Value;

use crate::access::AccessPolicy;
use crate::blocking;
use crate::calls::Mode;
use crate::calls::{self, Risk, ToolCallRecord, ToolResult, ToolSpec};
use crate::clock::Clock;
use crate::mcp::tools::RunTools;
use crate::provider::BoxFuture;
use crate::role::{Role, RoleSet};
use crate::tools::{self, FatalToolError, ToolContext};
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
        let record = calls::record_of(name, input, &result, None);
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
    /// A call whose mode is `ask`: queued as an approval note; the model is told it has not run.
    fn queue(
        &self,
        name: &str,
        input: &Value,
        reason: &str,
        call: &Classified<'_>,
    ) -> (ToolResult, ToolCallRecord) {
        let server = call.mcp.map(|t| t.server.as_str());
        let refused = |text: String| {
            let result = ToolResult::error(text);
            (result.clone(), calls::record_of(name, input, &result, server))
        };
        let Some(ctx) = &self.approvals else {
            return refused(format!(
                "refused: `{}` needs the person's approval ({} risk), and approvals cannot be asked for outside a run",
                call.key,
                call.risk.as_str()
            ));
        };
        let description = match call.mcp {
            Some(t) => t.spec.description.as_str(),
            None => tools::vault_description(name).unwrap_or(""),
        };
        let store = crate::state::StateStore::new(self.vault.clone());
        let ask = crate::approvals::request::Call {
            tool: &call.key,
            exposed: name,
            risk: call.risk,
            description,
            reason,
            args: input,
        };
        let queued =
            blocking::run(|| crate::approvals::request::ask(&store, ctx, &self.role, &ask, self.clock.now()));
        match queued {
            Ok(q) => {
                let result = ToolResult::ok(crate::approvals::request::queued_text(&q), 0, Vec::new());
                let mut record = calls::record_of(name, input, &result, server);
                record.approval = Some(q.note);
                (result, record)
            }
            Err(why) => {
                tracing::error!("role {}: {why}", self.role.name);
                refused(format!("not run: it needs approval, and {why}"))
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
        let call = match (tools::vault_risk(name), self.mcp.get(name)) {
            // The vault tools refuse one the role lacks themselves, with the role's tool list.
            (Some(_), _) if !self.role.has_tool(name) => return self.call_vault(name, input),
            (Some(risk), _) => Classified {
                key: name.to_string(),
                risk,
                mcp: None,
            },
            (None, None) => return Ok(self.unknown(name, input)),
            (None, Some(t)) if !self.role.allows_mcp(&t.server, &t.tool) => {
                let result = ToolResult::error(format!(
                    "refused: this role may not use `{name}` ({}/{} is in its deny_tools)",
                    t.server, t.tool
                ));
                return Ok((
                    result.clone(),
                    calls::record_of(name, input, &result, Some(&t.server)),
                ));
            }
            (None, Some(t)) => Classified {
                key: format!("{}/{}", t.server, t.tool),
                risk: t.risk,
                mcp: Some(t),
            },
        };
        match crate::approvals::mode_for(&self.role, &call.key, call.risk) {
            Mode::Auto => match call.mcp {
                Some(t) => Ok(t.call(input).await),
                None => self.call_vault(name, input),
            },
            Mode::Deny => {
                let result = ToolResult::error(format!(
                    "refused: this role's `approve` setting denies `{}` ({} risk); do not retry it",
                    call.key,
                    call.risk.as_str()
                ));
                let server = call.mcp.map(|t| t.server.as_str());
                Ok((result.clone(), calls::record_of(name, input, &result, server)))
            }
            Mode::Ask => Ok(self.queue(name, input, reason, &call)),
        }
    }
}

/// A call as the approval policy sees it: its name in the role file (`write_file`,
/// `server/tool`), its risk class, and the MCP tool behind it, if any.
struct Classified<'a> {
    key: String,
    risk: Risk,
    mcp: Option<&'a crate::mcp::tools::McpTool>,
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
