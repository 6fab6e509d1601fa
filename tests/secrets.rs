//! Issue 36, finding 12 (docs/spec.md §24): every value expanded from `${VAR}` is a secret wherever it
//! lands. A `${VAR}` in the provider's `base_url` path — in every URL an error quotes, and echoed
//! by the server — reaches none of what tabd prints or writes.

use std::time::Duration;

use serde_json::json;

use crate::support::daemon::{daemon_config, vault_with, wait_until, Daemon};
use crate::support::describe;
use crate::support::fake_model::{FakeModel, Reply};

const T: Duration = Duration::from_secs(30);

/// The value: its variable's name does not look like a secret's, so only "it was expanded from
/// `${VAR}`" can hide it.
const SEGMENT: &str = "p7-private-segment-91";

#[test]
fn a_secret_in_the_provider_url_path_is_printed_nowhere() {
    let fake = FakeModel::start();
    let v = vault_with(&fake, &daemon_config(""));
    // The model server lives under the secret path, and says which path it did not know.
    let config = std::fs::read_to_string(&v.config).unwrap().replace(
        &format!("base_url = \"{}\"", fake.anthropic_url()),
        &format!("base_url = \"{}/${{TENANT_SEGMENT}}\"", fake.anthropic_url()),
    );
    assert!(config.contains("${TENANT_SEGMENT}"), "{config}");
    v.set_config(&config);
    fake.respond_with(|req, _| {
        Reply::status(
            404,
            json!({"type": "error", "error": {"type": "not_found_error", "message": format!("no route for {}", req.path)}}),
        )
    });
    v.write("roles/ops.md", "# Ops\n## Mission\nKeep the plan.\n");
    let env = [("TENANT_SEGMENT", SEGMENT), ("TABD_LOG", "debug")];
    let with_env = |args: &[&str]| {
        let mut cmd = v.command(args);
        cmd.envs(env);
        cmd.output().expect("run tabd")
    };
    let fire = with_env(&["fire", "ops"]);
    assert_eq!(fire.status.code(), Some(1), "{}", describe(&fire));
    let requests = fake.requests();
    assert!(
        requests.iter().any(|r| r.path.contains(SEGMENT)),
        "the secret is used where it belongs: the request's path"
    );
    let fire_said = describe(&fire);
    let d = Daemon::start_with_env(&v, &env);
    v.write("agent/inbox/ops/plan.md", "Write the plan.");
    wait_until(T, "the daemon to pause model calls", || {
        v.status_json()
            .is_some_and(|s| s["provider_paused"].as_str().is_some_and(|p| p.contains("404")))
    });
    let status = with_env(&["status"]);
    let status_json = with_env(&["status", "--json"]);
    let texts = [
        ("tabd fire", fire_said),
        ("tabd status", describe(&status)),
        ("tabd status --json", describe(&status_json)),
        ("agent/status.md", v.read("agent/status.md")),
        (".tabd/status.json", v.read(".tabd/status.json")),
        (".tabd/state.json", v.read(".tabd/state.json")),
        ("the daily note", v.daily()),
        ("the run records", format!("{:?}", v.records())),
        ("the daemon's log", d.stderr()),
    ];
    for (what, text) in &texts {
        assert!(!text.contains(SEGMENT), "{what} holds the secret:\n{text}");
    }
    assert!(texts[0].1.contains("${TENANT_SEGMENT}"), "{}", texts[0].1);
    assert!(
        texts[1].1.contains("at http://127.0.0.1") && texts[1].1.contains("/${TENANT_SEGMENT}"),
        "the status shows the URL as written: {}",
        texts[1].1
    );
    assert!(
        v.records().iter().any(|r| r["error"]
            .as_str()
            .is_some_and(|e| e.contains("${TENANT_SEGMENT}"))),
        "the records say what failed, the secret written as its name"
    );
}
