//! Floor 7: one run: prompt, the loop, the harness over MCP, finish.
//!
//! See the floor table in `lib.rs`: a module here imports only from this floor or below.
pub mod mcp_server;
pub mod prompt;
pub mod run;
pub(crate) mod turn;
