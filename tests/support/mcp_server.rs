//! The in-repo MCP test server (`examples/mcp_test_server.rs`, built by `cargo test`): where it
//! is, how the config names it, and what it logged.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// An example binary cargo built beside tabd (`mcp_test_server`, `fake_agent_cli`).
pub fn example_bin(name: &str) -> PathBuf {
    let bin = Path::new(env!("CARGO_BIN_EXE_tabd"));
    let p = bin.parent().expect("target dir").join("examples").join(name);
    assert!(p.exists(), "{} missing: run through `cargo test`", p.display());
    p
}

/// The test server binary.
pub fn server_bin() -> PathBuf {
    example_bin("mcp_test_server")
}

/// `[mcp.NAME]` for the test server in `mode`, logging its calls to `log` (its folder granted
/// writable: the server is sandboxed like any child); `extra` appended.
pub fn server_config(name: &str, mode: &str, log: &Path, extra: &str) -> String {
    format!(
        "[mcp.{name}]\ncommand = \"{}\"\nenv = {{ MCP_TEST_MODE = \"{mode}\", MCP_TEST_LOG = \"{}\" }}\nwritable = [\"{}\"]\n{extra}\n",
        server_bin().display(),
        log.display(),
        log.parent().unwrap().display()
    )
}

/// The calls the test server logged.
pub fn server_log(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}
