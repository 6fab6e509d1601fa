use serde_json::json;

use super::Harness;

/// A harness for `ops`, which reads and writes, but whose `approve` denies `write_file`.
fn harness(dir: &std::path::Path) -> Harness {
    let text = "---\napprove:\n  write_file: deny\n---\n# Ops\n## Mission\nRead.\n## Tools\n- read_file\n- write_file\n";
    super::for_test(dir, text, 10)
}

/// Why an approved call cannot run as it now stands, byte for byte as the approval note and the
/// ledger have always said it (issue 37 item 3 made the reasons a type, not the words).
#[test]
fn each_check_says_what_it_always_said() {
    let dir = tempfile::tempdir().unwrap();
    let h = harness(dir.path());
    let mut deep = json!("x");
    for _ in 0..70 {
        deep = json!([deep]);
    }
    let cases = [
        (
            "move_file",
            json!({}),
            "refused: this role may not use `move_file`; its tools are: read_file, write_file \
             (a person can add it under ## Tools in roles/ops.md)",
        ),
        (
            "fly",
            json!({}),
            "refused: there is no tool named `fly` for this role; its tools are: read_file, write_file",
        ),
        (
            "delegate",
            json!({}),
            "refused: this role may not delegate (a person names roles with can_delegate_to in roles/ops.md); \
             its tools are: read_file, write_file",
        ),
        (
            "read_file",
            json!({ "path": deep }),
            "the arguments cannot be read: it nests arrays and objects more than 64 deep; tabd reads at most 64 levels",
        ),
        (
            "write_file",
            json!({"path": "a.md", "content": "x"}),
            "the role's `approve` setting now denies write_file",
        ),
        (
            "read_file",
            json!({"path": 3}),
            "the arguments do not fit the tool's schema: /path: 3 is not of type \"string\"",
        ),
    ];
    for (name, input, want) in cases {
        let said = h.check(name, &input).map_err(|e| e.to_string());
        assert_eq!(said, Err(want.to_string()), "{name}");
    }
    assert_eq!(
        h.check("read_file", &json!({"path": "a.md"}))
            .map_err(|e| e.to_string()),
        Ok(())
    );
}

/// A run's answer written to its `output.path` is a note tabd made: recorded as tabd's, so the
/// role's next change to it runs at once; a note of the person's at that path stays theirs.
#[test]
fn an_answer_written_to_output_path_is_tabds_and_a_persons_note_stays_theirs() {
    use crate::records::authorship::Whose;
    let dir = tempfile::tempdir().unwrap();
    let h = super::for_test(
        dir.path(),
        "# Ops\n## Mission\nReport.\n## Tools\n- read_file\n",
        10,
    );
    let p = |s: &str| crate::base::vault::VaultPath::parse(s, false).unwrap();
    h.write_output("reports/week.md", "the answer").unwrap();
    assert_eq!(
        h.ticket.authorship.whose(&p("reports/week.md")).unwrap(),
        Whose::Tabds
    );
    std::fs::write(dir.path().join("mine.md"), "the person's\n").unwrap();
    h.write_output("mine.md", "the answer").unwrap();
    assert_eq!(h.ticket.authorship.whose(&p("mine.md")).unwrap(), Whose::Persons);
}

/// A role allowed folder moves cannot move the person's note inside a folder by way of a name
/// tabd's listing leaves out (`…` in a title): the move asks (here, where no approval can be
/// asked for, it is refused) and nothing moves.
#[tokio::test]
async fn a_folder_move_with_a_persons_note_tabd_cannot_name_asks() {
    let dir = tempfile::tempdir().unwrap();
    let h = super::for_test(
        dir.path(),
        "---\nmove_folders: true\n---\n# Ops\n## Mission\nTidy.\n## Tools\n- move_file\n",
        10,
    );
    std::fs::create_dir_all(dir.path().join("Journal")).unwrap();
    std::fs::write(dir.path().join("Journal/Thoughts\u{2026}.md"), "the person's\n").unwrap();
    let called = h
        .call(
            "move_file",
            &json!({"from": "Journal", "to": "Archive/Journal"}),
            super::Caller::Model {
                reason: "",
                call_id: None,
            },
        )
        .await
        .unwrap();
    assert!(!called.result.ok, "{}", called.result.text);
    assert!(
        called.result.text.contains("person's own note"),
        "{}",
        called.result.text
    );
    assert!(dir.path().join("Journal/Thoughts\u{2026}.md").exists());
}

/// A day whose budget is spent once `spent` is set.
#[derive(Debug, Default)]
struct Spent(std::sync::atomic::AtomicBool);

impl super::Day for Spent {
    fn spent(&self, _tokens: u64, _usd: f64) {}

    fn crossed(&self) -> Option<crate::records::limits::Crossed> {
        self.0
            .load(std::sync::atomic::Ordering::SeqCst)
            .then(|| crate::records::limits::Crossed {
                stop: crate::records::limits::DailyStop::CostBudget,
                role: "ops".into(),
                spent: 0.052,
                budget: 0.05,
            })
    }
}

/// Issue 49, item 2: every call is a step, from every door (an API run, an agent CLI's calls
/// over MCP, a session): once the day's budget is spent, none runs — refused with the budget
/// and its numbers, not counted against max_tool_calls, not recorded — and the run is told to end.
#[tokio::test]
async fn no_call_runs_once_the_days_budget_is_spent() {
    use super::{Caller, Limit};
    let dir = tempfile::tempdir().unwrap();
    let mut h = super::for_test(
        dir.path(),
        "# Ops\n## Mission\nKeep notes.\n## Tools\n- read_file\n- write_file\n",
        2,
    );
    let day = std::sync::Arc::new(Spent::default());
    h.ticket.day = Some(day.clone());
    let caller = Caller::Model {
        reason: "",
        call_id: None,
    };
    let write = json!({"path": "a.md", "content": "first"});
    let ran = h.call("write_file", &write, caller).await.unwrap();
    assert!(ran.result.ok && ran.limit.is_none(), "{:?}", ran.result);
    day.0.store(true, std::sync::atomic::Ordering::SeqCst);
    let again = json!({"path": "b.md", "content": "second"});
    let refused = h.call("write_file", &again, caller).await.unwrap();
    assert!(!refused.result.ok);
    assert_eq!(
        refused.result.text,
        "not run: the daily cost budget of role `ops` ($0.052 of $0.050 spent today); this run ends now, \
         and the role's work waits until midnight"
    );
    assert!(matches!(refused.limit, Some(Limit::Day(_))));
    assert!(refused.record.is_none());
    assert!(!dir.path().join("b.md").exists(), "it did not run");
    assert_eq!(h.log().calls.len(), 1, "only the call that ran is recorded");
    day.0.store(false, std::sync::atomic::Ordering::SeqCst);
    let after = h.call("write_file", &again, caller).await.unwrap();
    assert!(after.result.ok, "the refusal did not use up max_tool_calls");
}
