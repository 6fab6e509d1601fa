//! Approval notes in tests: list them, read and set their status, wait for one, find the note a
//! tool result names, and what the MCP test server was asked to do.

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

use super::daemon::{daemon_config, vault_with, wait_until};
use super::fake_model::FakeModel;
use super::mcp_server::server_log;
use super::wire;
use super::TestVault;

/// The test server's calls of `tool`.
pub fn calls_of(log: &Path, tool: &str) -> Vec<Value> {
    server_log(log)
        .into_iter()
        .filter(|c| c["tool"] == tool)
        .collect()
}

/// Every approval note, as vault paths.
pub fn notes(v: &TestVault) -> Vec<String> {
    v.files_in("agent/approvals")
        .into_iter()
        .filter(|p| p.ends_with(".md"))
        .map(|p| format!("agent/approvals/{p}"))
        .collect()
}

pub fn status_of(v: &TestVault, note: &str) -> String {
    v.read(note)
        .lines()
        .find_map(|l| l.strip_prefix("status: "))
        .unwrap_or("")
        .trim()
        .to_string()
}

/// What a person does in Obsidian's Properties editor: the `status` line, changed.
pub fn set_status(v: &TestVault, note: &str, status: &str) {
    let text = v.read(note);
    let line = text
        .lines()
        .find(|l| l.starts_with("status: "))
        .expect("a status line")
        .to_string();
    v.write(note, &text.replacen(&line, &format!("status: {status}"), 1));
}

pub fn wait_status(v: &TestVault, note: &str, want: &str) {
    wait_until(Duration::from_secs(20), &format!("{note} → {want}"), || {
        status_of(v, note) == want
    });
}

/// The approval note named in a tool result (`[[agent/approvals/…]]`).
pub fn note_in(results: &[(String, String, bool)], id: &str) -> String {
    let text = &results.iter().find(|r| r.0 == id).expect("result").1;
    let start = text.find("[[agent/approvals/").expect("a note link") + 2;
    let end = start + text[start..].find("]]").expect("link end");
    format!("{}.md", &text[start..end])
}

/// A vault whose role `ops` asks before `write_file`, and a model that writes the plan (so the
/// run waits for the person's approval).
pub fn ops_asks_to_write_the_plan() -> (TestVault, FakeModel) {
    let fake = FakeModel::start();
    let v = vault_with(&fake, &daemon_config(""));
    v.write(
        "roles/ops.md",
        "---\napprove:\n  write_file: ask\n---\n# Ops\n## Mission\nKeep the plan.\n## Tools\n- read_file\n- write_file\n",
    );
    fake.respond_with(|req, _| {
        if wire::tool_results(&req.body).is_empty() {
            wire::tools(
                "anthropic",
                Some("Record the plan."),
                &[(
                    "w1",
                    "write_file",
                    json!({"path": "project/plan.md", "content": "ship on Friday"}),
                )],
            )
        } else {
            wire::text("anthropic", "Recorded the plan.")
        }
    });
    (v, fake)
}

/// A run of `ops` that waited for the person's approval of its write, whose call the person
/// approved (it ran on its own, creating project/plan.md) and which then went on (its second
/// part, the same run id): all done, the daemon stopped. Returns the vault, the model and the
/// run's id.
pub fn ops_run_approved_and_resumed() -> (TestVault, FakeModel, String) {
    let t = Duration::from_secs(30);
    let (v, fake) = ops_asks_to_write_the_plan();
    let mut d = super::daemon::Daemon::start(&v);
    v.write("agent/inbox/ops/plan.md", "Write the plan down.");
    wait_until(t, "the approval note", || notes(&v).len() == 1);
    set_status(&v, &notes(&v)[0], "approved");
    wait_until(t, "the second part recorded", || {
        v.path("project/plan.md").exists() && v.records().iter().any(|r| r["trigger"]["kind"] == "resume")
    });
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_exit(t), Some(0), "{}", d.stderr());
    let run_id = v.records()[0]["run_id"].as_str().expect("a run id").to_string();
    (v, fake, run_id)
}
