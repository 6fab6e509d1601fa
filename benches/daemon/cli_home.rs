//! `TABD_BENCH=cli_home`: what rebuilding an agent CLI's private folder adds to each CLI run
//! (issue 36, finding 13).

use std::time::Instant;

use serde_json::{json, Value};

use super::median;

/// An agent CLI's private folder, rebuilt for every run (issue 36): in a new run folder,
/// `agent_cli::private_home` for the claude profile (its `HOME`, temp and `.claude` folders made,
/// the person's login file copied in), then the run folder removed with everything in it; against
/// the run folder made and removed alone (what every CLI run did before). Medians of 200.
pub fn cli_home(out: &mut Value) {
    use tabd::capabilities::agent_cli;
    let person = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(person.path().join(".claude")).unwrap();
    let login = json!({"claudeAiOauth": {"accessToken": "a".repeat(108), "refreshToken": "r".repeat(108),
        "expiresAt": 0, "scopes": ["user:inference", "user:profile"], "subscriptionType": "max"}});
    std::fs::write(person.path().join(".claude/.credentials.json"), login.to_string()).unwrap();
    let launcher = tabd::base::process::Launcher {
        env: tabd::base::environment::Env::from_pairs([("HOME", person.path().display().to_string())]),
        ..Default::default()
    };
    let profile = tabd::setup::config::profile::builtin("claude").unwrap();
    let runs = tabd::base::sandbox::folders::make_root(&person.path().join("runs")).unwrap();
    let time = |with_home: bool| -> f64 {
        let t = Instant::now();
        let dir = tempfile::Builder::new().prefix("ops-").tempdir_in(&runs).unwrap();
        if with_home {
            let home = agent_cli::private_home(dir.path(), &profile, &launcher).unwrap();
            assert!(home.dirs.state.join(".claude/.credentials.json").exists());
        }
        drop(dir);
        t.elapsed().as_secs_f64() * 1000.0
    };
    let mut plain: Vec<f64> = (0..200).map(|_| time(false)).collect();
    let mut rebuilt: Vec<f64> = (0..200).map(|_| time(true)).collect();
    let (plain, rebuilt) = (median(&mut plain), median(&mut rebuilt));
    println!(
        "agent CLI private folder rebuilt per run: +{:.3} ms (run folder alone {plain:.3} ms, with the CLI's home {rebuilt:.3} ms)",
        rebuilt - plain
    );
    out["cli_home"] = json!({ "run_folder_ms": plain, "with_home_ms": rebuilt, "added_ms": rebuilt - plain });
}
