//! One role's load never holds another's (docs/spec.md §24, issue 36): what a role may ask for is
//! capped, `validate` names the cap; a role at the expectation cap says each missing file once,
//! and another role's notes go on being handled beside it.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::support::daemon::{setup, wait_until, Daemon};
use crate::support::{describe, stdout, TestVault};

const T: Duration = Duration::from_secs(30);

/// `n` expectations of files nobody writes, with a deadline every second (a cron with seconds).
fn expectations(n: usize) -> String {
    (0..n)
        .map(|i| format!("  - {{path: \"reports/r{i}-{{date}}.md\", by: \"* * * * * *\"}}\n"))
        .collect()
}

/// The review's role had 15,000 expectations (a 1 MiB role file allowed them; its frontmatter is
/// now at most 256 KiB, which still holds 4,000) and a context list of 5,000; `validate` refuses
/// both at their lines, naming the cap, and the other roles are fine.
#[test]
fn validate_names_the_cap_a_role_goes_over() {
    let v = TestVault::new();
    v.write(
        "roles/heavy.md",
        &format!("---\nexpect:\n{}---\n# Heavy\n", expectations(4_000)),
    );
    let entries: String = (0..5_000).map(|i| format!("- notes/{i}.md\n")).collect();
    v.write("roles/wide.md", &format!("# Wide\n\n## Context Files\n{entries}"));
    let out = v.tabd(&["validate"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let text = stdout(&out);
    assert!(
        text.contains("roles/heavy.md:2: error: `expect` has 4000 expectations; a role may have at most 50"),
        "{text}"
    );
    assert!(
        text.contains(
            "roles/wide.md:3: error: `## Context Files` has 5000 entries; a role may have at most 200"
        ),
        "{text}"
    );
    assert!(
        text.contains("roles: 4 ok (comms, delivery, product, risk)"),
        "{text}"
    );
    assert!(text.contains("broken: 2 (heavy, wide)"), "{text}");
}

fn expect_checked(v: &TestVault, role: &str) -> Option<DateTime<Utc>> {
    v.state()["roles"][role]["expect_checked"]
        .as_str()
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        .map(|t| t.with_timezone(&Utc))
}

/// A role at the cap, every expectation missed every second: each missing file is said once
/// (the daily note does not grow with each check), while another role's notes are each handled;
/// a role one over the cap is broken with the cap in its error, and the others run.
#[test]
fn a_role_at_the_expectation_cap_says_each_missing_file_once_beside_another_roles_notes() {
    let (v, _fake) = setup("");
    v.write(
        "roles/heavy.md",
        &format!(
            "---\nexpect:\n{}---\n# Heavy\n## Mission\nReport.\n",
            expectations(50)
        ),
    );
    v.write(
        "roles/greedy.md",
        &format!(
            "---\nexpect:\n{}---\n# Greedy\n## Mission\nReport.\n",
            expectations(51)
        ),
    );
    v.write("roles/ops.md", "# Ops\n## Mission\nHandle the note.\n");
    let d = Daemon::start(&v);
    let said = |v: &TestVault| v.daily().matches("Heavy · expected [[reports/").count();
    wait_until(T, "every missing report said", || said(&v) >= 50);
    for i in 0..3 {
        let before = expect_checked(&v, "heavy").expect("checked");
        v.write(&format!("agent/inbox/ops/n{i}.md"), "Handle this.");
        wait_until(T, "the ops note handled", || {
            v.path(&format!("agent/inbox/ops/processed/n{i}.md")).exists()
        });
        // Deadlines passed and were checked again since.
        wait_until(T, "two more checks", || {
            expect_checked(&v, "heavy").is_some_and(|t| t >= before + chrono::Duration::seconds(2))
        });
    }
    let daily = v.daily();
    assert_eq!(said(&v), 50, "each missing file once, not once a check:\n{daily}");
    assert_eq!(
        v.records().iter().filter(|r| r["role"] == "ops").count(),
        3,
        "{}",
        d.stderr()
    );
    assert!(
        daily.contains("`expect` has 51 expectations; a role may have at most 50"),
        "the broken role's error in the daily note:\n{daily}"
    );
    assert!(!daily.contains("Greedy · expected"), "{daily}");
}
