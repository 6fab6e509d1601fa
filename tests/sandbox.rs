//! The children's sandbox (DESIGN §20, issue 24), attacked: the in-repo test server's `probe`
//! tool tries to read keys and tabd's state, read and write the vault, write outside its folder,
//! open the network — itself and from a grandchild — under two configs. Every attempt the config
//! does not grant fails; what it grants works.

use serde_json::{json, Value};

use crate::support::fake_model::FakeModel;
use crate::support::mcp_server::server_bin;
use crate::support::{describe, stdout, wire, TestVault};

/// Whether the kernel can sandbox (else these tests say so and check the unsandboxed report).
fn enforced(v: &TestVault) -> bool {
    let out = v.tabd(&["mcp", "list", "--json"]);
    let listed: Value = serde_json::from_str(&stdout(&out)).unwrap_or_default();
    listed["servers"][0]["sandbox"]["enforced"] == json!(true)
}

#[test]
fn a_hostile_server_reaches_only_what_its_config_grants() {
    let v = TestVault::new();
    let fake = FakeModel::start();
    let home = v.dir.path();
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_rsa"), "PRIVATE KEY").unwrap();
    let root = v.root();
    v.write("project/secret.md", "a note");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    v.use_model(
        &fake,
        "anthropic",
        &format!(
            "[mcp.locked]\ncommand = \"{bin}\"\nnetwork = false\n\n[mcp.reader]\ncommand = \"{bin}\"\nvault = \"read\"\n",
            bin = server_bin().display()
        ),
    );
    v.unschedule_stock_roles();
    v.write(
        "roles/ops.md",
        "---\napprove: {network: auto, destructive: auto}\n---\n# Ops\n## Mission\nProbe.\n## Tools\n- locked/*\n- reader/*\n",
    );
    if !enforced(&v) {
        eprintln!("skipped: this kernel cannot sandbox (tabd mcp list says why)");
        return;
    }
    let state = root.join(".tabd/state.json");
    std::fs::write(&state, "{}").unwrap_or_default();
    let p = |rel: &str| root.join(rel).display().to_string();
    let key = home.join(".ssh/id_rsa").display().to_string();
    let outside = home.join("outside.txt").display().to_string();
    let own = root.join(".tabd/children/locked/notes.txt").display().to_string();
    let attempts = json!({
        "read": [key, state.display().to_string(), p("project/secret.md")],
        "write": [outside, p("project/by-server.md"), own],
        "connect": addr,
        "grandchild": true,
    });
    fake.script([
        wire::tools(
            "anthropic",
            None,
            &[
                ("a", "locked__probe", attempts.clone()),
                ("b", "reader__probe", attempts.clone()),
            ],
        ),
        wire::text("anthropic", "probed"),
    ]);
    let out = v.tabd(&["fire", "ops"]);
    assert!(out.status.success(), "{}", describe(&out));
    let results = wire::tool_results(&fake.requests()[1].body);
    let parse =
        |i: usize| -> Value { serde_json::from_str(&results[i].1).unwrap_or_else(|_| panic!("{results:?}")) };
    let (locked, reader) = (parse(0), parse(1));
    let denied = |r: &Value, k: &str| r[k].as_str().is_some_and(|s| s.starts_with("denied"));
    let ok = |r: &Value, k: &str| r[k] == "ok";
    let read = |what: &str| format!("read {what}");
    let write = |what: &str| format!("write {what}");

    for (name, r) in [
        ("locked", &locked),
        ("locked's grandchild", &locked["grandchild"]),
    ] {
        assert!(denied(r, &read(&key)), "{name} read the ssh key: {r}");
        assert!(
            denied(r, &read(&state.display().to_string())),
            "{name} read tabd's state: {r}"
        );
        assert!(
            denied(r, &read(&p("project/secret.md"))),
            "{name} read the vault with vault = none: {r}"
        );
        assert!(
            denied(r, &write(&outside)),
            "{name} wrote outside its folder: {r}"
        );
        assert!(
            denied(r, &format!("connect {addr}")),
            "{name} connected with network = false: {r}"
        );
        assert!(
            denied(r, "udp socket"),
            "{name} opened a UDP socket with network = false: {r}"
        );
        assert!(
            ok(r, &write(&own)),
            "{name} could not write its own state folder: {r}"
        );
    }
    for (name, r) in [
        ("reader", &reader),
        ("reader's grandchild", &reader["grandchild"]),
    ] {
        assert!(
            ok(r, &read(&p("project/secret.md"))),
            "{name} could not read the vault with vault = read: {r}"
        );
        assert!(
            denied(r, &write(&p("project/by-server.md"))),
            "{name} wrote the vault with vault = read: {r}"
        );
        assert!(
            denied(r, &read(&state.display().to_string())),
            "{name} read .tabd/ through vault = read: {r}"
        );
        assert!(denied(r, &read(&key)), "{name} read the ssh key: {r}");
        assert!(
            ok(r, &format!("connect {addr}")),
            "{name} has the network by default: {r}"
        );
    }
    assert!(!v.path("project/by-server.md").exists());
    assert!(!home.join("outside.txt").exists());
}

/// `[sandbox] require = true` where a child cannot be sandboxed refuses it; granted paths that do
/// not exist are a validate warning; `tabd mcp list` shows each server's sandbox.
#[test]
fn the_sandbox_is_shown_and_checked() {
    let v = TestVault::new();
    v.set_config(&format!(
        "timezone = \"UTC\"\n[mcp.test]\ncommand = \"{}\"\nvault = \"read\"\nnetwork = false\nwritable = [\"/no/such/folder\"]\n",
        server_bin().display()
    ));
    let listed: Value = serde_json::from_str(&stdout(&v.tabd(&["mcp", "list", "--json"]))).unwrap();
    let sb = &listed["servers"][0]["sandbox"];
    assert_eq!(sb["vault"], "read");
    assert_eq!(sb["network"], false);
    assert!(
        sb["writable"]
            .as_array()
            .unwrap()
            .contains(&json!("/no/such/folder")),
        "{sb}"
    );
    assert!(sb["enforced"].is_boolean());
    let text = stdout(&v.tabd(&["mcp", "list"]));
    assert!(
        text.contains("sandbox:") && text.contains("vault read") && text.contains("no network"),
        "{text}"
    );
    let out = v.tabd(&["validate"]);
    let all = format!("{}{}", stdout(&out), String::from_utf8_lossy(&out.stderr));
    assert!(
        all.contains("[mcp.test] writable: /no/such/folder does not exist"),
        "{all}"
    );
}
