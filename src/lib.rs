//! tabd: a daemon that runs an AI agent's roles against a Markdown (Obsidian) vault.
pub mod diag;
pub mod frontmatter;
pub mod text;
pub mod schedule;
