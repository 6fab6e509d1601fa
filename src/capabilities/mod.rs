//! Floor 5, capabilities: the vault tools, the MCP client, the model APIs, agent CLIs, reaching
//! the person (notify), the other devices of a vault (cluster: NATS JetStream), traces
//! (telemetry: OpenTelemetry over OTLP/HTTP), and webhooks in (http: `POST /hooks/<role>`).
//!
//! See the floor table in `lib.rs`: a module here imports only from this floor or below.
pub mod agent_cli;
pub mod cluster;
pub mod http;
pub mod mcp;
pub mod notify;
pub mod provider;
pub mod telemetry;
pub mod tools;
