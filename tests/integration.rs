//! One integration test binary (fast to link); one module per area.
mod support;

mod cli_foundation;
mod daemon_e2e;
mod providers;
mod turn_e2e;
