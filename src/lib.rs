//! tabd: a daemon that runs an AI agent's roles against a Markdown (Obsidian) vault.
//!
//! The binary (`src/main.rs`) is thin; everything lives here so tests and benchmarks can use it.
//!
//! # Floors
//!
//! Each module lives on one floor and imports only from its own floor or those below; no two
//! files import each other, directly or around a circle. A floor is a folder of `src/`, so a path
//! says its floor (`crate::base::vault` is on floor 1). `tests/layering.rs` reads this table and
//! every `crate::…` path of `src/`, and fails on an import that climbs, a circle, or a floor
//! folder that declares other modules than its row (a function over 70 lines is clippy's
//! `too_many_lines`, set in `clippy.toml`). A new feature finds its floor here first.
//! `docs/design-notes.md` has one line per module.
//!
//! | floor | folder | modules | what lives there |
//! |---|---|---|---|
//! | 8 | `doors` | `approval_pass` `daemon` `commands` `args` | doors: the approvals pass, `tabd run`, the subcommands and their arguments |
//! | 7 | `running` | `run` `turn` `prompt` `mcp_server` | one run: prompt, the loop, the harness over MCP, finish |
//! | 6 | `gate` | `harness` `hooks` `approvals` | the one door every tool call goes through; the person's hooks around it; approval notes |
//! | 5 | `capabilities` | `tools` `mcp` `provider` `agent_cli` `notify` `cluster` `telemetry` `http` | capabilities: vault tools, MCP client, model APIs, CLIs, reaching the person, the other devices, traces, webhooks in |
//! | 4 | `records` | `state` `inbox` `access` `authorship` `limits` `context` `runlog` `spent` `journal` `forecast` | records and rules the run reads |
//! | 3 | `setup` | `config` `role` `skills` | what the person wrote, typed and checked |
//! | 2 | `formats` | `frontmatter` `json` `schedule` | formats |
//! | 1 | `base` | `vault` `process` `calls` `cost` `clock` `environment` `text` `diag` `trigger` `blocking` `faults` `template` `progress` `sandbox` `memory` `signing` `fence` `sidewrites` `run_id` | foundations |
pub mod base;
pub mod capabilities;
pub mod doors;
pub mod formats;
pub mod gate;
pub mod records;
pub mod running;
pub mod setup;
