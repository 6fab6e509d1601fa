//! One run of a role through `tabd fire`, against the fake model server, for both providers.

use std::time::Duration;

use serde_json::json;

use crate::support::fake_model::{FakeModel, Reply};
use crate::support::{describe, stdout, wire, TestVault};

const KINDS: [&str; 2] = ["anthropic", "openai"];

#[test]
fn delivery_run_reads_writes_remembers_triggers_and_logs() {
    for kind in KINDS {
        let v = TestVault::new();
        let fake = FakeModel::start();
        v.use_model(&fake, kind, "");
        v.write(
            "agent/inbox/delivery/paylane.md",
            "---\nfrom: Ana\n---\nPaylane says production onboarding takes 3 weeks.\n",
        );
        fake.script([
            wire::tools(kind, Some("The Paylane news threatens launch; check the timeline."), &[("t1", "read_file", json!({"path": "project/timeline.md"}))]),
            wire::tools(kind, None, &[
                ("t2", "write_file", json!({"path": "project/blockers/paylane-production.md", "content": "# Paylane production onboarding\n3 weeks.\n"})),
                ("t3", "remember", json!({"note": "Paylane production onboarding takes 3 weeks", "scope": "global"})),
                ("t4", "trigger_role", json!({"role": "risk", "note": "Re-rate the payment provider risk: onboarding takes 3 weeks.", "priority": "high"})),
            ]),
            wire::text(kind, "Recorded the Paylane blocker and asked Risk to re-rate."),
        ]);
        let out = v.tabd(&["fire", "delivery"]);
        assert_eq!(out.status.code(), Some(0), "{kind}: {}", describe(&out));
        assert!(
            stdout(&out).contains("Recorded the Paylane blocker"),
            "{}",
            describe(&out)
        );

        // Files.
        assert!(v
            .read("project/blockers/paylane-production.md")
            .contains("3 weeks"));
        let today = chrono::Utc::now().format("%Y-%m-%d");
        assert!(
            v.read("memory.md").ends_with(&format!(
                "- {today}: Paylane production onboarding takes 3 weeks\n"
            )),
            "{}",
            v.read("memory.md")
        );
        let risk_notes = v.files_in("agent/inbox/risk");
        assert_eq!(risk_notes.len(), 1, "{}", v.listing());
        let risk_note = v.read(&format!("agent/inbox/risk/{}", risk_notes[0]));
        assert!(
            risk_note.contains("from: delivery\n")
                && risk_note.contains("hops: 1\n")
                && risk_note.contains("priority: high\n"),
            "{risk_note}"
        );
        // The trigger note moved.
        assert_eq!(v.files_in("agent/inbox/delivery"), Vec::<String>::new());
        assert_eq!(v.files_in("agent/inbox/delivery/processed"), ["paylane.md"]);

        // Daily log.
        let daily = v.daily();
        assert!(
            daily.contains(" · Delivery Manager · manual\n- **Outcome:** ok · "),
            "{daily}"
        );
        assert!(daily.contains("4 tool calls"), "{daily}");
        assert!(
            daily.contains("- **Trigger:** manual [[agent/inbox/delivery/processed/paylane]]"),
            "{daily}"
        );
        assert!(
            daily.contains("[[project/blockers/paylane-production]] (written)"),
            "{daily}"
        );
        assert!(daily.contains("[[memory]] (remembered)"), "{daily}");
        assert!(
            daily.contains("### Thinking\nThe Paylane news threatens launch; check the timeline."),
            "{daily}"
        );
        assert!(daily.contains("1. `read_file` project/timeline.md\n2. `write_file` project/blockers/paylane-production.md\n"), "{daily}");
        assert!(
            daily.contains("4. `trigger_role` → risk: Re-rate the payment provider risk"),
            "{daily}"
        );
        assert!(
            daily.contains("### Summary\nRecorded the Paylane blocker and asked Risk to re-rate."),
            "{daily}"
        );

        // JSONL record.
        let recs = v.records();
        assert_eq!(recs.len(), 1);
        let r = &recs[0];
        assert_eq!(r["role"], "delivery");
        assert_eq!(r["outcome"], "ok");
        assert_eq!(r["error"], serde_json::Value::Null);
        assert_eq!(r["trigger"]["kind"], "manual");
        assert_eq!(r["trigger"]["notes"], json!(["agent/inbox/delivery/paylane.md"]));
        assert_eq!(
            r["moved"],
            json!([{"from": "agent/inbox/delivery/paylane.md", "to": "agent/inbox/delivery/processed/paylane.md"}])
        );
        assert_eq!(r["tool_calls"].as_array().unwrap().len(), 4);
        assert_eq!(r["tool_calls"][0]["name"], "read_file");
        assert_eq!(r["tool_calls"][0]["ok"], true);
        assert!(r["usage"]["input_tokens"].as_u64().unwrap() > 0);
        for key in [
            "run_id",
            "started_at",
            "ended_at",
            "model",
            "usage",
            "tool_calls",
            "moved",
        ] {
            assert!(r.get(key).is_some(), "{key}");
        }
        // The model saw the note and got tool results back for every call.
        let reqs = fake.requests();
        assert!(wire::all_text(&reqs[0].body).contains("Paylane says production onboarding takes 3 weeks."));
        assert_eq!(wire::tool_results(&reqs[2].body).len(), 4);
        assert!(
            wire::tool_results(&reqs[2].body).iter().all(|(_, _, err)| !err),
            "{:?}",
            wire::tool_results(&reqs[2].body)
        );
        assert!(fake.violations().is_empty(), "{:?}", fake.violations());
        assert!(
            !daily.contains(crate::support::TEST_KEY) && !r.to_string().contains(crate::support::TEST_KEY)
        );
    }
}

#[test]
fn provider_500s_leave_notes_without_counting_an_attempt() {
    for kind in KINDS {
        let v = TestVault::new();
        let fake = FakeModel::start();
        v.use_model(&fake, kind, "");
        fake.respond_with(move |_, _| {
            wire::error(
                if kind == "anthropic" {
                    "anthropic"
                } else {
                    "openai"
                },
                500,
                "api_error",
                "Internal server error",
            )
        });
        v.write("agent/inbox/delivery/a.md", "hello");
        let out = v.tabd(&["fire", "delivery"]);
        assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
        assert_eq!(fake.requests().len(), 2, "one try and max_retries = 1 retry");
        assert_eq!(v.files_in("agent/inbox/delivery"), ["a.md"], "the note stays");
        let state = v.state();
        assert_eq!(
            state["roles"]["delivery"]["attempts"],
            json!({}),
            "no attempt counted"
        );
        let daily = v.daily();
        assert!(
            daily.contains("Delivery Manager · paused — ")
                && daily.contains("HTTP 500: Internal server error"),
            "{daily}"
        );
        assert!(
            daily.contains("1 note(s) wait in the inbox, no attempt counted"),
            "{daily}"
        );
        assert_eq!(v.records()[0]["outcome"], "failed");
    }
}

#[test]
fn a_missing_api_key_never_walks_notes_into_failed() {
    let v = TestVault::new();
    let fake = FakeModel::start();
    v.use_model(&fake, "anthropic", "");
    v.with_key.set(false);
    v.write("agent/inbox/delivery/a.md", "hello");
    for _ in 0..4 {
        let out = v.tabd(&["fire", "delivery"]);
        assert_eq!(out.status.code(), Some(1));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("set ANTHROPIC_API_KEY"),
            "{}",
            describe(&out)
        );
    }
    assert!(fake.requests().is_empty());
    assert_eq!(v.files_in("agent/inbox/delivery"), ["a.md"]);
    assert!(v.files_in("agent/inbox/delivery/failed").is_empty());
    assert_eq!(
        v.daily().matches("paused — anthropic: no API key").count(),
        1,
        "logged once per cause:\n{}",
        v.daily()
    );
    // Nobody's fault: `tabd runs` says paused, not failed.
    let runs = String::from_utf8_lossy(&v.tabd(&["runs"]).stdout).to_string();
    assert!(runs.contains(" paused ") && !runs.contains(" failed "), "{runs}");
}

#[test]
fn invalid_request_three_times_moves_the_note_to_failed() {
    let v = TestVault::new();
    let fake = FakeModel::start();
    v.use_model(&fake, "anthropic", "");
    fake.respond_with(|_, _| {
        wire::error(
            "anthropic",
            400,
            "invalid_request_error",
            "prompt is too long: 210000 tokens > 200000 maximum",
        )
    });
    v.write("agent/inbox/delivery/huge.md", "hello");
    for attempt in 1..=3 {
        let out = v.tabd(&["fire", "delivery"]);
        assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
        let in_inbox = v.files_in("agent/inbox/delivery");
        if attempt < 3 {
            assert_eq!(in_inbox, ["huge.md"], "attempt {attempt}");
            let state = v.state();
            assert_eq!(
                state["roles"]["delivery"]["attempts"]["agent/inbox/delivery/huge.md"]["count"],
                attempt
            );
        } else {
            assert!(in_inbox.is_empty());
        }
    }
    assert_eq!(v.files_in("agent/inbox/delivery/failed"), ["huge.md"]);
    assert_eq!(fake.requests().len(), 3, "400 is never retried");
    let daily = v.daily();
    assert_eq!(
        daily
            .matches("- **Outcome:** failed — anthropic: HTTP 400: prompt is too long")
            .count(),
        3,
        "{daily}"
    );
    assert!(
        daily.contains("- **Will retry:** [[agent/inbox/delivery/huge]] (attempt 1 failed)"),
        "{daily}"
    );
    assert!(
        daily.contains("- **Moved to failed/:** [[agent/inbox/delivery/failed/huge]] after 3 failed runs"),
        "{daily}"
    );
    assert_eq!(
        v.records()[2]["moved"],
        json!([{"from": "agent/inbox/delivery/huge.md", "to": "agent/inbox/delivery/failed/huge.md"}])
    );
}

#[test]
fn refused_tools_and_bad_arguments_go_back_to_the_model() {
    for kind in KINDS {
        let v = TestVault::new();
        let fake = FakeModel::start();
        v.use_model(&fake, kind, "");
        fake.script([
            wire::tools(
                kind,
                None,
                &[
                    (
                        "t1",
                        "write_file",
                        json!({"path": "project/x.md", "content": "x"}),
                    ),
                    ("t2", "read_file", json!({"file": "project/timeline.md"})),
                    ("t3", "read_file", json!({"path": "../../etc/passwd"})),
                ],
            ),
            wire::text(kind, "done"),
        ]);
        // Risk's tools: read_file, list_files, search_files, remember, write_file, append_file, trigger_role — not move_file.
        v.write(
            "roles/comms.md",
            "---\nextends: _base\n---\n# Communication Manager\n",
        );
        let out = v.tabd(&["fire", "comms"]);
        assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
        let results = wire::tool_results(&fake.requests()[1].body);
        assert_eq!(results.len(), 3);
        assert!(results.iter().all(|r| r.2), "{results:?}");
        assert!(results[0].1.contains("may not use `write_file`"), "{results:?}");
        assert!(results[1].1.contains("unknown field `file`"), "{results:?}");
        assert!(results[2].1.contains("leaves the vault"), "{results:?}");
        assert!(!v.path("project/x.md").exists());
        let daily = v.daily();
        assert!(
            daily.contains("1. `write_file` project/x.md — refused: this role may not use `write_file`"),
            "{daily}"
        );
    }
}

#[test]
fn a_model_that_never_stops_is_ended_at_max_tool_calls_with_a_summary() {
    for kind in KINDS {
        let v = TestVault::new();
        let fake = FakeModel::start();
        v.use_model(&fake, kind, "");
        // The role's own setting beats the config (the stock _base says 30).
        v.write(
            "roles/delivery.md",
            &v.read("roles/delivery.md")
                .replace("extends: _base\n", "extends: _base\nmax_tool_calls: 3\n"),
        );
        fake.respond_with(move |req, i| {
            if wire::tools_forbidden(&req.body) {
                wire::text(kind, "I read the timeline three times; nothing else done.")
            } else {
                wire::tools(
                    kind,
                    None,
                    &[(
                        &format!("call{i}"),
                        "read_file",
                        json!({"path": "project/timeline.md"}),
                    )],
                )
            }
        });
        let out = v.tabd(&["fire", "delivery"]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "a limit is not a failure: {}",
            describe(&out)
        );
        let reqs = fake.requests();
        assert_eq!(reqs.len(), 5, "3 allowed calls, 1 refused, 1 summary");
        assert!(wire::tools_forbidden(&reqs[4].body));
        let r = &v.records()[0];
        assert_eq!(r["outcome"], "limit");
        assert_eq!(r["tool_calls"].as_array().unwrap().len(), 3);
        let daily = v.daily();
        assert!(
            daily.contains("- **Outcome:** limit — limit reached: max_tool_calls (3)"),
            "{daily}"
        );
        assert!(
            daily.contains("### Summary\nI read the timeline three times; nothing else done."),
            "{daily}"
        );
    }
}

#[test]
fn context_over_the_cap_is_truncated_and_missing_files_are_listed() {
    let v = TestVault::new();
    let fake = FakeModel::start();
    v.use_model(
        &fake,
        "anthropic",
        "[context]\nmax_file_bytes = 200\nmax_context_bytes = 400\n",
    );
    v.write("project/timeline.md", &"A long timeline line.\n".repeat(100));
    v.write(
        "roles/delivery.md",
        &v.read("roles/delivery.md")
            .replace("- project/team.md", "- project/team.md\n- project/gone.md"),
    );
    fake.script([wire::text("anthropic", "ok")]);
    let out = v.tabd(&["fire", "delivery"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let text = wire::all_text(&fake.requests()[0].body);
    assert!(
        text.contains(
            "[… truncated: showing the first 200 of 2,200 bytes; use read_file project/timeline.md"
        ),
        "{text}"
    );
    assert!(
        text.contains("[context limit of 400 bytes reached; not included (use read_file): project/team.md"),
        "{text}"
    );
    // A folder entry with no room left is listed as an index the model can open from (issue 12).
    assert!(
        text.contains("## Index of project/blockers/ (not included above; open one with read_file)\n- project/blockers/auth-delay.md — \"Paylane sandbox credentials delayed\""),
        "{text}"
    );
    assert!(
        text.contains("Listed in your role but missing: project/gone.md"),
        "{text}"
    );
}

#[test]
fn two_roles_logging_at_once_keep_their_sections_intact() {
    let v = TestVault::new();
    let fake = FakeModel::start();
    v.use_model(&fake, "anthropic", "");
    fake.respond_with(|req, _| {
        let who = if wire::all_text(&req.body).contains("You are the Risk Manager") {
            "RISK"
        } else {
            "DELIVERY"
        };
        Reply::ok(crate::support::fake_model::canned::anthropic_text(
            &format!("{who} line\n").repeat(200),
        ))
        .delayed(Duration::from_millis(300))
    });
    // Piped, so a failure shows their output (inherited, 400 lines of it drowned the test
    // runner's report of another test).
    let fire = |role: &str| {
        v.command(&["fire", role])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (fire("delivery"), fire("risk"));
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    assert!(
        a.status.success() && b.status.success(),
        "{}\n{}",
        describe(&a),
        describe(&b)
    );
    let daily = v.daily();
    let sections: Vec<&str> = daily.split("\n## ").skip(1).collect();
    assert_eq!(sections.len(), 2, "{daily}");
    for s in sections {
        let who = if s.contains("Risk Manager") {
            "RISK"
        } else {
            "DELIVERY"
        };
        let other = if who == "RISK" { "DELIVERY" } else { "RISK" };
        assert_eq!(s.matches(&format!("{who} line")).count(), 200);
        assert!(!s.contains(&format!("{other} line")), "interleaved:\n{s}");
    }
    assert_eq!(v.records().len(), 2);
}

#[test]
fn prompt_prints_exactly_what_the_model_receives() {
    let v = TestVault::new();
    let fake = FakeModel::start();
    v.use_model(&fake, "anthropic", "");
    v.write(
        "agent/inbox/delivery/q.md",
        "---\npriority: high\n---\nWhat does the Paylane delay do to the launch?\n",
    );
    let printed = stdout(&v.tabd(&["prompt", "delivery"]));
    assert!(fake.requests().is_empty(), "prompt never calls the model");
    fake.script([wire::text("anthropic", "ok")]);
    let out = v.tabd(&["fire", "delivery"]);
    assert!(out.status.success(), "{}", describe(&out));
    let body = &fake.requests()[0].body;
    let section = |name: &str| -> String {
        let start = printed.find(&format!("===== {name}")).unwrap();
        let after = &printed[start..];
        let body_start = after.find("=====\n").unwrap() + 6;
        let rest = &after[body_start..];
        rest[..rest.find("\n\n===== ").unwrap()].to_string()
    };
    assert_eq!(body["system"][0]["text"].as_str().unwrap(), section("SYSTEM"));
    assert_eq!(
        body["messages"][0]["content"][0]["text"].as_str().unwrap(),
        section("CONTEXT")
    );
    // The run part differs only in its "Now:" and "Why" lines (prompt shows an inbox trigger, fire a manual one).
    let strip = |s: &str| {
        s.lines()
            .filter(|l| !l.starts_with("Now: ") && !l.starts_with("Why this run: "))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(
        strip(body["messages"][0]["content"][1]["text"].as_str().unwrap()),
        strip(&section("THIS RUN"))
    );
    let tools: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        printed.contains(&format!("===== TOOLS ({}) =====", tools.join(", "))),
        "{printed}"
    );
}

#[test]
fn fire_refuses_abstract_unknown_and_broken_roles() {
    let v = TestVault::new();
    let out = v.tabd(&["fire", "_base"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("abstract"));
    let out = v.tabd(&["prompt", "nobody"]);
    assert_eq!(out.status.code(), Some(2));
    v.write("roles/risk.md", "---\nmax_tool_calls: x\n---\n# Risk\n");
    let out = v.tabd(&["fire", "risk"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("roles/risk.md:2: error:"),
        "{}",
        describe(&out)
    );
}

#[test]
fn fire_with_a_note_from_outside_the_vault_copies_it_in() {
    let v = TestVault::new();
    let fake = FakeModel::start();
    v.use_model(&fake, "anthropic", "");
    fake.script([wire::text("anthropic", "ok")]);
    let outside = v.dir.path().join("question.md");
    std::fs::write(&outside, "Is the launch date safe?").unwrap();
    let out = v.tabd(&["fire", "delivery", "--note", outside.to_str().unwrap()]);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(outside.exists(), "the original is left where it was");
    assert_eq!(v.files_in("agent/inbox/delivery/processed"), ["question.md"]);
    assert!(wire::all_text(&fake.requests()[0].body).contains("Is the launch date safe?"));
}

#[test]
fn a_paused_turn_is_continued_and_a_full_context_window_fails_the_run() {
    let v = TestVault::new();
    let fake = FakeModel::start();
    v.use_model(&fake, "anthropic", "");
    let mut paused = crate::support::fake_model::canned::anthropic_text("Still reading the timeline…");
    paused["stop_reason"] = json!("pause_turn");
    fake.script([
        Reply::ok(paused.clone()),
        wire::text("anthropic", "Done after the pause."),
    ]);
    let out = v.tabd(&["fire", "delivery"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 2, "the paused turn was sent back to continue");
    assert_eq!(
        reqs[1].body["messages"][1]["content"], paused["content"],
        "echoed as received"
    );
    assert!(
        v.daily().contains("### Summary\nDone after the pause."),
        "{}",
        v.daily()
    );

    // model_context_window_exceeded: a failure of this run, so the note counts an attempt.
    let mut full = crate::support::fake_model::canned::anthropic_text("");
    full["stop_reason"] = json!("model_context_window_exceeded");
    fake.script([Reply::ok(full)]);
    v.write("agent/inbox/delivery/big.md", "a lot of text");
    let out = v.tabd(&["fire", "delivery"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert_eq!(v.files_in("agent/inbox/delivery"), ["big.md"]);
    let state = v.state();
    assert_eq!(
        state["roles"]["delivery"]["attempts"]["agent/inbox/delivery/big.md"]["count"],
        1
    );
    assert!(
        v.daily()
            .contains("failed — the conversation outgrew the model's context window"),
        "{}",
        v.daily()
    );
}
