//! The harness a run's model works through: which tools the role has, and every call checked
//! and run by tabd (DESIGN §8). The model never touches anything else.

use std::sync::Arc;

use serde_json::Value;

use crate::blocking;
use crate::clock::Clock;
use crate::mcp::tools::RunTools;
use crate::provider::{BoxFuture, ToolSpec};
use crate::role::{Role, RoleSet};
use crate::tools::{self, AccessPolicy, FatalToolError, ToolCallRecord, ToolContext, ToolResult};
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

impl ToolExecutor for Toolbox {
    fn call<'a>(
        &'a self,
        name: &'a str,
        input: &'a Value,
    ) -> BoxFuture<'a, Result<(ToolResult, ToolCallRecord), FatalToolError>> {
        Box::pin(async move {
            if tools::is_vault_tool(name) {
                return self.call_vault(name, input);
            }
            match self.mcp.get(name) {
                // Deny wins over allow: checked at listing, and again here.
                Some(t) if self.role.allows_mcp(&t.server, &t.tool) => Ok(t.call(input).await),
                Some(t) => {
                    let result = ToolResult::error(format!(
                        "refused: this role may not use `{name}` ({}/{} is in its deny_tools)",
                        t.server, t.tool
                    ));
                    Ok((
                        result.clone(),
                        tools::record_of(name, input, &result, Some(&t.server)),
                    ))
                }
                None => Ok(self.unknown(name, input)),
            }
        })
    }
}
