//! tabd: a daemon that runs an AI agent's roles against a Markdown (Obsidian) vault.
//!
//! The binary (`src/main.rs`) is thin; everything lives here so tests and benchmarks can use it.
pub mod cli;
pub mod commands;
pub mod config;
pub mod daemon;
pub mod diag;
pub mod environment;
pub mod frontmatter;
pub mod inbox;
pub mod prompt;
pub mod provider;
pub mod role;
pub mod run;
pub mod runlog;
pub mod schedule;
pub mod state;
pub mod template;
pub mod text;
pub mod tools;
pub mod turn;
pub mod vault;
