//! tabd: a daemon that runs an AI agent's roles against a Markdown (Obsidian) vault.
pub mod diag;
pub mod environment;
pub mod frontmatter;
pub mod role;
pub mod schedule;
pub mod text;
