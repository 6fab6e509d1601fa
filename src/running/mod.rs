//! Floor 7, one run: its prompt, the think-then-act loop, the harness served over MCP, and the
//! run's start and finish.
//!
//! See the floor table in `lib.rs`: a module here imports only from this floor or below.
pub mod mcp_server;
pub mod prompt;
pub mod run;
pub(crate) mod turn;
