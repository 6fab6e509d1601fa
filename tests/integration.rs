//! One integration test binary (fast to link); one module per area.
mod support;

mod agent_cli;
mod approvals;
mod attacks;
mod big_notes;
mod cli_foundation;
mod cost;
mod crash_points;
mod daemon_e2e;
mod daemon_limits;
mod delegation;
mod doors;
mod first_hour;
mod hostile_input;
mod layering;
mod load;
mod mcp;
mod notify;
mod owned;
mod providers;
mod resume;
mod robustness;
mod sandbox;
mod signed_records;
mod turn_e2e;
mod undo;
