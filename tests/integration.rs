//! One integration test binary (fast to link); one module per area.

// Tests may unwrap and read top to bottom; clippy.toml's allow-*-in-tests covers only
// `#[test]` functions, and the helpers in support/ are not. Length is a production rule.
// `let _ =` guards tabd's own side writes (a dropped daily line, a dropped state write);
// a test harness drops what it does not assert (a kill of a child that may have exited).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::too_many_lines,
    clippy::let_underscore_must_use
)]
mod support;

mod agent_cli;
mod approval_records;
mod approvals;
mod attacks;
mod big_notes;
mod budget;
mod checkpoint;
mod cli_foundation;
mod cluster;
mod cluster_approvals;
mod cluster_daemons;
mod cluster_pause;
mod cluster_resilience;
mod cluster_synced;
mod consent;
mod context_entries;
mod cost;
mod crash_points;
mod daemon_e2e;
mod daemon_limits;
mod delegation;
mod doctor;
mod doors;
mod first_hour;
mod forecast;
mod hooks;
mod hostile_input;
mod layering;
mod load;
mod log_place;
mod mcp;
mod mcp_serve;
mod mcp_tasks;
mod notify;
mod ntfy_replies;
mod outcomes;
mod owed_slots;
mod owned;
mod pause;
mod peer_stories;
mod providers;
mod read_back;
mod reload;
mod resume;
mod robustness;
mod sandbox;
mod secrets;
mod service;
mod signed_records;
mod skills;
mod spent;
mod telegram;
mod telemetry;
mod triage;
mod turn_e2e;
mod undo;
mod vault_you_have;
mod webhooks;
