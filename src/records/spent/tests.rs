use super::*;

fn vault_with_records(day: &str, lines: &[serde_json::Value]) -> (tempfile::TempDir, Vault) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".tabd/runs")).unwrap();
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(dir.path().join(format!(".tabd/runs/{day}.jsonl")), text).unwrap();
    let v = Vault::open(dir.path()).unwrap();
    (dir, v)
}

fn rec(
    id: &str,
    role: &str,
    outcome: &str,
    tokens: u64,
    cost: f64,
    extra: serde_json::Value,
) -> serde_json::Value {
    let mut r = serde_json::json!({
        "run_id": id, "role": role, "outcome": outcome,
        "started_at": "2026-11-29T09:00:00Z", "ended_at": "2026-11-29T09:01:00Z",
        "trigger": {"kind": "manual", "notes": []},
        "usage": {"input_tokens": tokens, "output_tokens": 0, "cache_read_tokens": 0, "cache_write_tokens": 0, "cost_usd": cost}
    });
    if let (Some(o), Some(e)) = (r.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            o.insert(k.clone(), v.clone());
        }
    }
    r
}

fn day() -> NaiveDate {
    NaiveDate::from_ymd_opt(2026, 11, 29).unwrap()
}

/// Each role's own runs, its children's spend in its day too, each spend once in all; a skip
/// and an outage that spent nothing are no run.
#[test]
fn the_records_of_a_day_add_up_per_role_and_in_all() {
    let (_d, v) = vault_with_records(
        "2026-11-29",
        &[
            rec("a", "delivery", "ok", 100, 0.5, serde_json::json!({})),
            rec(
                "b",
                "risk",
                "ok",
                40,
                0.25,
                serde_json::json!({"trigger": {"kind": "delegate", "notes": [], "parent_run_id": "a"}}),
            ),
            rec("c", "delivery", "skipped", 0, 0.0, serde_json::json!({})),
            rec(
                "d",
                "delivery",
                "failed",
                0,
                0.0,
                serde_json::json!({"ended": "paused"}),
            ),
            rec(
                "e",
                "risk",
                "ok",
                1,
                0.0,
                serde_json::json!({"ended_at": "2026-11-28T23:00:00Z"}),
            ),
        ],
    );
    let s = of_day(&v, chrono_tz::UTC, day());
    assert_eq!(s.tokens, 140);
    assert!((s.cost_usd - 0.75).abs() < 1e-9);
    assert_eq!(s.roles["delivery"].0, 140, "its child's spend is its too");
    assert_eq!(
        s.roles["delivery"].2, 1,
        "one run: the skip and the outage are none"
    );
    assert_eq!(s.roles["risk"], (40, 0.25, 1), "yesterday's run is not today's");
}

/// State is raised to the records, never lowered.
#[test]
fn reconcile_raises_and_never_lowers() {
    let mut state = State::default();
    state.add_usage(
        "delivery",
        day(),
        crate::base::cost::Usage {
            input_tokens: 500,
            ..Default::default()
        },
        1.0,
    );
    let spent = Spent {
        roles: [
            ("delivery".to_string(), (200, 0.5, 3)),
            ("risk".to_string(), (50, 0.1, 1)),
        ]
        .into(),
        tokens: 250,
        cost_usd: 0.6,
    };
    assert!(reconcile(&mut state, day(), &spent));
    let d = state.roles["delivery"].today(day());
    assert_eq!(
        (d.tokens, d.runs),
        (500, 3),
        "tokens kept (state knew more), runs raised"
    );
    assert_eq!(state.roles["risk"].today(day()).tokens, 50);
    assert_eq!(state.global.today(day()).tokens, 500);
    assert!(
        !reconcile(&mut state, day(), &spent),
        "a second time changes nothing"
    );
}

/// Failed attempts come back for notes still in their inbox only.
#[test]
fn attempts_come_back_for_notes_still_waiting() {
    let (dir, v) = vault_with_records(
        "2026-11-29",
        &[
            rec(
                "a",
                "delivery",
                "failed",
                10,
                0.0,
                serde_json::json!({"trigger": {"kind": "inbox", "notes": ["agent/inbox/delivery/x.md", "agent/inbox/delivery/gone.md"]}}),
            ),
            rec(
                "b",
                "delivery",
                "failed",
                10,
                0.0,
                serde_json::json!({"ended": "paused", "trigger": {"kind": "inbox", "notes": ["agent/inbox/delivery/x.md"]}}),
            ),
        ],
    );
    std::fs::create_dir_all(dir.path().join("agent/inbox/delivery")).unwrap();
    std::fs::write(dir.path().join("agent/inbox/delivery/x.md"), "x").unwrap();
    let a = attempts(&v, chrono_tz::UTC, day(), 7);
    assert_eq!(a["delivery"].len(), 1, "{a:?}");
    assert_eq!(
        a["delivery"]["agent/inbox/delivery/x.md"].count, 1,
        "the paused run counts none"
    );
}
