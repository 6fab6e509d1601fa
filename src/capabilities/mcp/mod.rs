//! MCP servers: tools beyond the vault (DESIGN §14).
//!
//! - `config` — `[mcp.NAME]` tables;
//! - `client` — one connection: start, list, call, stop (the whole process group);
//! - `tools` — the MCP tools of one run: which servers a role uses, their tools under the names
//!   the model sees, risk classes, argument checks, results as text;
//! - `pool` — `keep_alive` servers, started once by the daemon and restarted with backoff;
//! - `serve` — the other direction: a role's tools as an MCP server (`tabd mcp serve`).

pub mod client;
pub mod content;
pub mod naming;
pub mod pool;
pub mod schema;
pub mod tools;
