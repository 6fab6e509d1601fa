//! Floor 5: capabilities: vault tools, MCP client, model APIs, CLIs, reaching the person.
//!
//! See the floor table in `lib.rs`: a module here imports only from this floor or below.
pub mod agent_cli;
pub mod mcp;
pub mod notify;
pub mod provider;
pub mod tools;
