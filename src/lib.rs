//! tabd: a daemon that runs an AI agent's roles against a Markdown (Obsidian) vault.
//!
//! The binary (`src/main.rs`) is thin; everything lives here so tests and benchmarks can use it.
//! The module map, top down (each uses only those below it):
//!
//! - `commands` — one module per subcommand; `cli` — the command line.
//! - `daemon` — `tabd run`: a pure decision core (`daemon::core`) and the I/O shell around it.
//! - `run` — one run of a role: prompt, skip gate, turn, then record, log and move notes.
//! - `turn` — the think-then-act loop; `toolbox` — the harness the model's calls go through.
//! - `prompt`, `context` — what a run sends; `inbox` — notes; `runlog` — the logs; `state`.
//! - `provider` — model APIs; `tools` — the vault tools and their policy; `mcp` — MCP servers;
//!   `approvals` — risky calls that wait for the person.
//! - `role`, `schedule`, `config`, `limits`, `cost` — what the person wrote, typed and checked.
//! - `vault` — the only way to touch files; `clock`, `blocking`, `faults`, `text`, `diag`.
pub mod access;
pub mod agent_cli;
pub mod approvals;
pub mod approved;
pub(crate) mod blocking;
pub mod calls;
pub mod cli;
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
pub(crate) mod limits;
pub mod mcp;
pub mod mcp_server;
pub mod process;
pub mod prompt;
pub mod provider;
pub mod role;
pub mod run;
pub mod runlog;
pub mod schedule;
pub mod state;
pub(crate) mod template;
pub mod text;
pub mod tools;
pub mod trigger;
pub(crate) mod turn;
pub mod vault;
