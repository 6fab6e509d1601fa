//! tabd: a daemon that runs an AI agent's roles against a Markdown (Obsidian) vault.
//!
//! The binary (`src/main.rs`) is thin; everything lives here so tests and benchmarks can use it.
//!
//! # Floors
//!
//! Each module lives on one floor and imports only from its own floor or those below; no two
//! files import each other, directly or around a circle. `tests/layering.rs` reads this table
//! and every `use crate::…` of `src/`, and fails on an import that climbs, a circle, a module
//! missing from the table, or a production function over 80 lines. A new feature finds its floor
//! here first. `docs/design-notes.md` has one line per module.
//!
//! | floor | modules | what lives there |
//! |---|---|---|
//! | 8 | `approval_pass` `daemon` `commands` `args` | doors: the approvals pass, `tabd run`, the subcommands and their arguments |
//! | 7 | `run` `turn` `prompt` `mcp_server` | one run: prompt, the loop, the harness over MCP, finish |
//! | 6 | `harness` `approvals` | the one door every tool call goes through; approval notes |
//! | 5 | `tools` `mcp` `provider` `agent_cli` `notify` | capabilities: vault tools, MCP client, model APIs, CLIs, reaching the person |
//! | 4 | `state` `inbox` `access` `limits` `context` `runlog` `journal` | records and rules the run reads |
//! | 3 | `config` `role` | what the person wrote, typed and checked |
//! | 2 | `frontmatter` `schedule` | formats |
//! | 1 | `vault` `process` `calls` `cost` `clock` `environment` `text` `diag` `trigger` `blocking` `faults` `template` `progress` `sandbox` `memory` | foundations |
pub mod access;
pub mod agent_cli;
pub mod approval_pass;
pub mod approvals;
pub mod args;
pub(crate) mod blocking;
pub mod calls;
pub mod clock;
pub mod commands;
pub mod config;
pub(crate) mod context;
pub mod cost;
pub(crate) mod daemon;
pub mod diag;
pub mod environment;
pub mod faults;
pub mod frontmatter;
pub mod harness;
pub mod inbox;
pub mod journal;
pub(crate) mod limits;
pub mod mcp;
pub mod mcp_server;
pub mod memory;
pub mod notify;
pub mod process;
pub mod progress;
pub mod prompt;
pub mod provider;
pub mod role;
pub mod run;
pub mod runlog;
pub mod sandbox;
pub mod schedule;
pub mod state;
pub(crate) mod template;
pub mod text;
pub mod tools;
pub mod trigger;
pub(crate) mod turn;
pub mod vault;
