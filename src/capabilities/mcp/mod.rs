//! MCP servers: tools beyond the vault (docs/spec.md §14).
//!
//! - `config` — `[mcp.NAME]` tables;
//! - `client` — one connection: start, list, call, stop (the whole process group);
//! - `tools` — the MCP tools of one run: which servers a role uses, their tools under the names
//!   the model sees, risk classes, argument checks, results as text;
//! - `task` — a call a server answers with a task (2026-07-28 extension, 2025-11-25 Tasks): the
//!   handle, its states, the raw requests rmcp does not type;
//! - `wait` — polling a task until it ends, cancelled past its limit or when the run stops;
//! - `pool` — `keep_alive` servers, started once by the daemon and restarted with backoff;
//! - `serve` — the other direction: a role's tools as an MCP server (`tabd mcp serve`).

pub mod client;
pub mod content;
pub mod naming;
pub mod pool;
pub mod schema;
pub mod task;
pub mod tools;
pub mod wait;
