//! Delegation (docs/spec.md §18, issue 22): a role hands tasks to other roles and gets their answers in
//! the same run. Driven through the real binary (`tabd fire`, the daemon, an agent CLI) against
//! the fake model, which answers the parent and each child by what its request says.

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::fake_model::{canned, FakeModel, Recorded, Reply};
use crate::support::{describe, stdout, wire, TestVault};

/// Whether a request is a child's (and which task it carries).
fn child_task(r: &Recorded) -> Option<String> {
    let text = wire::all_text(&r.body);
    let at = text.find("## Your task (from Delivery Manager)")?;
    let rest = &text[at..];
    let body = rest.split("\n\n").nth(1).unwrap_or("");
    Some(body.lines().next().unwrap_or("").to_string())
}

/// The fake model as a parent and its children: the parent's first request calls `delegate` with
/// `input`, its next ends the run; every child request is answered by `child`.
fn parent_delegates(
    fake: &FakeModel,
    input: Value,
    child: impl Fn(&Recorded) -> Reply + Send + Sync + 'static,
) {
    fake.respond_with(move |r, _| {
        if child_task(r).is_some() {
            return child(r);
        }
        if wire::tool_results(&r.body).is_empty() {
            return wire::tools(
                "anthropic",
                Some("I'll ask."),
                &[("d1", "delegate", input.clone())],
            );
        }
        wire::text("anthropic", "done")
    });
}

fn offered(r: &Recorded) -> Vec<String> {
    r.body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str().map(String::from))
        .collect()
}

/// A reply with the given usage.
fn costly(mut reply: Value, input: u64, output: u64) -> Reply {
    reply["usage"] = canned::anthropic_usage(input, output, 0, 0);
    Reply::ok(reply)
}

/// The stock vault, no schedules, with `frontmatter` added to delivery and `risk_frontmatter` to
/// risk; the fake model behind `config`.
fn vault(fake: &FakeModel, delivery: &str, risk: &str, config: &str) -> TestVault {
    let v = TestVault::new();
    v.unschedule_stock_roles();
    let d = v.read("roles/delivery.md");
    v.write(
        "roles/delivery.md",
        &d.replacen("extends: _base\n", &format!("extends: _base\n{delivery}\n"), 1),
    );
    let r = v.read("roles/risk.md");
    v.write(
        "roles/risk.md",
        &r.replacen("extends: _base\n", &format!("extends: _base\n{risk}\n"), 1),
    );
    v.use_model(fake, "anthropic", config);
    v
}

fn parent_records(v: &TestVault) -> (Value, Vec<Value>) {
    let records = v.records();
    let parent = records
        .iter()
        .find(|r| r["role"] == "delivery")
        .cloned()
        .expect("the parent's record");
    let children = records
        .into_iter()
        .filter(|r| r["trigger"]["kind"] == "delegate")
        .collect();
    (parent, children)
}

/// One child: the parent asks, the child (a whole run of risk) answers, the parent gets the
/// answer in the same run; records and the daily log tie them together; the child never sees the
/// parent's conversation.
#[test]
fn one_child_answers_in_the_parents_run() {
    let fake = FakeModel::start();
    let v = vault(&fake, "can_delegate_to: [risk]", "", "");
    v.write(
        "agent/inbox/delivery/slip.md",
        "The API slipped a week. PARENT-ONLY-DETAIL",
    );
    parent_delegates(
        &fake,
        json!({"role": "risk", "task": "Rate the risk of a one-week API slip for the launch."}),
        |_| wire::text("anthropic", "Risk: high. The launch moves unless QA overlaps."),
    );
    let out = v.tabd(&["fire", "delivery"]);
    assert!(out.status.success(), "{}", describe(&out));

    let requests = fake.requests();
    let child: Vec<&Recorded> = requests.iter().filter(|r| child_task(r).is_some()).collect();
    assert_eq!(child.len(), 1);
    let child_text = wire::all_text(&child[0].body);
    assert!(child_text.contains("Rate the risk of a one-week API slip"));
    assert!(
        !child_text.contains("PARENT-ONLY-DETAIL"),
        "no parent conversation"
    );
    assert!(
        !offered(child[0]).contains(&"delegate".to_string()),
        "depth 1: children cannot delegate"
    );
    assert!(offered(&requests[0]).contains(&"delegate".to_string()));

    let (parent, children) = parent_records(&v);
    assert_eq!(children.len(), 1);
    let c = &children[0];
    assert_eq!(c["role"], "risk");
    assert_eq!(c["outcome"], "ok");
    assert_eq!(c["trigger"]["parent_run_id"], parent["run_id"]);
    assert_eq!(
        c["trigger"]["task"],
        "Rate the risk of a one-week API slip for the launch."
    );
    assert_eq!(c["moved"], json!([]), "a child moves no notes");
    assert_eq!(parent["children"], json!([c["run_id"]]));
    assert_eq!(
        v.files_in("agent/inbox/delivery/processed"),
        ["slip.md"],
        "the parent's note moved"
    );

    // What the parent's model got back.
    let last = requests.last().unwrap();
    let (_, result, is_error) = &wire::tool_results(&last.body)[0];
    assert!(!is_error, "{result}");
    let result: Value = serde_json::from_str(result).unwrap();
    assert_eq!(result["run_id"], c["run_id"]);
    assert_eq!(result["outcome"], "ok");
    assert!(result["answer"].as_str().unwrap().starts_with("Risk: high"));
    assert!(result["cost_usd"].is_number());

    // The child is a subsection of the parent's run, not a run of its own in the log.
    let daily = v.daily();
    let section = daily.find("· Delivery Manager · manual").expect(&daily);
    let sub = daily.find("### Delegated · Risk Manager").expect(&daily);
    let summary = daily.rfind("### Summary").unwrap();
    assert!(section < sub && sub < summary, "{daily}");
    assert!(!daily.contains("· Risk Manager · delegate"), "{daily}");
    assert!(daily.contains("- **With delegated runs:** 1 run"), "{daily}");
    assert!(daily.contains("> Risk: high."), "{daily}");
}

/// A batch runs in parallel (up to max_parallel_delegates): each child's request reaches the
/// model before any child's answer could have come back.
#[test]
fn a_batch_runs_its_children_in_parallel() {
    let fake = FakeModel::start();
    let v = vault(
        &fake,
        "can_delegate_to: [risk]\nmax_parallel_delegates: 3",
        "",
        "",
    );
    let answer_after = Duration::from_secs(2);
    let tasks: Vec<Value> = ["A", "B", "C"]
        .iter()
        .map(|t| json!({"role": "risk", "task": format!("task {t}")}))
        .collect();
    parent_delegates(&fake, json!({ "tasks": tasks }), move |r| {
        let task = child_task(r).unwrap_or_default();
        wire::text("anthropic", &format!("answer to {task}")).delayed(answer_after)
    });
    let out = v.tabd(&["fire", "delivery"]);
    assert!(out.status.success(), "{}", describe(&out));
    let requests = fake.requests();
    let children: Vec<&Recorded> = requests.iter().filter(|r| child_task(r).is_some()).collect();
    assert_eq!(children.len(), 3);
    let first = children.iter().map(|r| r.at).min().unwrap();
    let last = children.iter().map(|r| r.at).max().unwrap();
    assert!(
        last - first < answer_after,
        "in sequence, the last child would have asked ≥ {answer_after:?} after the first: {:?}",
        last - first
    );
    // Results come back in the order of the tasks.
    let (_, result, _) = &wire::tool_results(&requests.last().unwrap().body)[0];
    let result: Value = serde_json::from_str(result).unwrap();
    let answers: Vec<&str> = result["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["answer"].as_str().unwrap())
        .collect();
    assert_eq!(
        answers,
        ["answer to task A", "answer to task B", "answer to task C"]
    );
    assert_eq!(parent_records(&v).1.len(), 3);
}

/// Refusals: a role not in can_delegate_to, and a child (depth 1) that tries to delegate itself —
/// neither starts a run.
#[test]
fn delegation_outside_can_delegate_to_or_past_the_depth_is_refused() {
    let fake = FakeModel::start();
    let v = vault(&fake, "can_delegate_to: [risk]", "can_delegate_to: [comms]", "");
    fake.respond_with(|r, _| {
        if child_task(r).is_some() {
            if wire::tool_results(&r.body).is_empty() {
                return wire::tools(
                    "anthropic",
                    None,
                    &[(
                        "c1",
                        "delegate",
                        json!({"role": "comms", "task": "tell everyone"}),
                    )],
                );
            }
            return wire::text("anthropic", "could not delegate");
        }
        match wire::tool_results(&r.body).len() {
            0 => wire::tools(
                "anthropic",
                None,
                &[("d1", "delegate", json!({"role": "comms", "task": "announce"}))],
            ),
            1 => wire::tools(
                "anthropic",
                None,
                &[(
                    "d2",
                    "delegate",
                    json!({"role": "risk", "task": "ask comms for me"}),
                )],
            ),
            _ => wire::text("anthropic", "done"),
        }
    });
    let out = v.tabd(&["fire", "delivery"]);
    assert!(out.status.success(), "{}", describe(&out));
    let requests = fake.requests();
    let parent_results = wire::tool_results(&requests.last().unwrap().body);
    let (_, first, first_err) = &parent_results[0];
    assert!(
        *first_err && first.contains("may not delegate to `comms`"),
        "{first}"
    );

    let child_requests: Vec<&Recorded> = requests.iter().filter(|r| child_task(r).is_some()).collect();
    assert!(!offered(child_requests[0]).contains(&"delegate".to_string()));
    let (_, refused, is_error) = &wire::tool_results(&child_requests.last().unwrap().body)[0];
    assert!(*is_error && refused.contains("may not delegate"), "{refused}");
    let roles: Vec<Value> = v.records().iter().map(|r| r["role"].clone()).collect();
    assert!(
        !roles.contains(&json!("comms")),
        "no comms run started: {roles:?}"
    );
}

/// A child's tokens count against the parent's max_tokens_per_run and daily budget: the parent
/// is stopped by what its child spent; the global budget counts each token once.
#[test]
fn childrens_spending_rolls_up_and_stops_the_parent() {
    let fake = FakeModel::start();
    let v = vault(&fake, "can_delegate_to: [risk]\nmax_tokens_per_run: 5000", "", "");
    fake.respond_with(|r, _| {
        if child_task(r).is_some() {
            return costly(canned::anthropic_text("an expensive answer"), 6000, 500);
        }
        if wire::tool_results(&r.body).is_empty() {
            return costly(
                canned::anthropic_tool_use(
                    None,
                    &[("d1", "delegate", json!({"role": "risk", "task": "go deep"}))],
                ),
                1000,
                100,
            );
        }
        costly(canned::anthropic_text("summary at the limit"), 1000, 100)
    });
    let out = v.tabd(&["fire", "delivery"]);
    assert!(out.status.success(), "{}", describe(&out));
    let (parent, children) = parent_records(&v);
    assert_eq!(
        children[0]["outcome"], "ok",
        "the child's own ceiling (default) held"
    );
    assert_eq!(parent["outcome"], "limit");
    assert_eq!(
        parent["error"], "limit reached: max_tokens_per_run (5000)",
        "stopped by its child's 6,500 tokens"
    );
    assert!(
        wire::tools_forbidden(&fake.requests().last().unwrap().body),
        "the wrap-up asks for a summary only"
    );
    let state = v.state();
    let parent_tokens = parent["usage"]["input_tokens"].as_u64().unwrap()
        + parent["usage"]["output_tokens"].as_u64().unwrap();
    assert_eq!(
        state["roles"]["delivery"]["tokens_today"].as_u64().unwrap(),
        parent_tokens + 6500,
        "the parent's day includes its child"
    );
    assert_eq!(state["roles"]["risk"]["tokens_today"], 6500);
    assert_eq!(
        state["global"]["tokens_today"].as_u64().unwrap(),
        parent_tokens + 6500,
        "counted once globally"
    );
    assert!(v.daily().contains("in all"), "{}", v.daily());
}

/// A child's `ask` call becomes an approval note of the child role, like any run's.
#[test]
fn a_childs_ask_call_becomes_an_approval_note() {
    let fake = FakeModel::start();
    let v = vault(&fake, "can_delegate_to: [risk]", "approve: {write_file: ask}", "");
    parent_delegates(
        &fake,
        json!({"role": "risk", "task": "record the slip risk"}),
        |r| {
            if wire::tool_results(&r.body).is_empty() {
                return wire::tools(
                    "anthropic",
                    Some("Record it."),
                    &[(
                        "c1",
                        "write_file",
                        json!({"path": "project/risks/slip.md", "content": "high"}),
                    )],
                );
            }
            wire::text("anthropic", "asked for approval")
        },
    );
    let out = v.tabd(&["fire", "delivery"]);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(
        !v.path("project/risks/slip.md").exists(),
        "not written before approval"
    );
    let notes = v.files_in("agent/approvals");
    assert_eq!(notes.len(), 1, "{notes:?}");
    let note = v.read(&format!("agent/approvals/{}", notes[0]));
    assert!(
        note.contains("role: risk") && note.contains("write_file"),
        "{note}"
    );
}

const SCHEMA: &str = r#"{"type": "object", "required": ["level"], "properties": {"level": {"enum": ["low", "medium", "high"]}}, "additionalProperties": false}"#;

/// An output schema: a wrong answer gets one repair turn; repaired, the parent gets the JSON as
/// `output`; still wrong, the child fails with the errors and the parent is told.
#[test]
fn an_invalid_output_is_repaired_once_then_fails() {
    for (second, ok) in [(r#"{"level": "high"}"#, true), (r#"{"level": "dire"}"#, false)] {
        let fake = FakeModel::start();
        let v = vault(
            &fake,
            "can_delegate_to: [risk]",
            "output: {schema: schemas/risk.json, path: \"project/risks/{role}-{run_id}.md\"}",
            "",
        );
        v.write("schemas/risk.json", SCHEMA);
        let second = second.to_string();
        parent_delegates(&fake, json!({"role": "risk", "task": "rate it"}), move |r| {
            let repair = wire::all_text(&r.body).contains("does not: ");
            wire::text("anthropic", if repair { &second } else { "It is high, I think." })
        });
        let out = v.tabd(&["fire", "delivery"]);
        assert!(out.status.success(), "{}", describe(&out));
        let requests = fake.requests();
        let child: Vec<&Recorded> = requests.iter().filter(|r| child_task(r).is_some()).collect();
        assert_eq!(child.len(), 2, "one answer, one repair turn");
        assert!(wire::all_text(&child[0].body).contains("## Your answer"));
        assert!(
            wire::tools_forbidden(&child[1].body),
            "the repair turn calls no tools"
        );
        let (_, result, _) = &wire::tool_results(&requests.last().unwrap().body)[0];
        let result: Value = serde_json::from_str(result).unwrap();
        let (_, children) = parent_records(&v);
        if ok {
            assert_eq!(result["output"], json!({"level": "high"}));
            assert_eq!(children[0]["outcome"], "ok");
            let report = format!(
                "project/risks/risk-{}.md",
                children[0]["run_id"].as_str().unwrap()
            );
            assert_eq!(
                v.read(&report),
                r#"{"level": "high"}"#,
                "output.path holds the answer"
            );
        } else {
            assert_eq!(children[0]["outcome"], "failed");
            let error = result["error"].as_str().unwrap();
            assert!(
                error.contains("output schema") && error.contains("dire"),
                "{error}"
            );
            assert!(
                !v.files_in("project/risks").iter().any(|f| f.starts_with("risk-")),
                "a failed answer is not written"
            );
        }
    }
}

/// A child ends by its parent's deadline, however long its own would be.
#[test]
fn a_childs_deadline_is_cut_by_the_parents() {
    let fake = FakeModel::start();
    let v = vault(
        &fake,
        "can_delegate_to: [risk]",
        "",
        "[limits]\nrun_deadline = \"3s\"\n",
    );
    parent_delegates(
        &fake,
        json!({"role": "risk", "task": "think for a long time"}),
        |_| wire::text("anthropic", "too late").delayed(Duration::from_secs(30)),
    );
    let started = std::time::Instant::now();
    let out = v.tabd(&["fire", "delivery"]);
    assert!(
        started.elapsed() < Duration::from_secs(25),
        "not the child's 30 s"
    );
    let (_, children) = parent_records(&v);
    assert_eq!(children[0]["outcome"], "failed", "{}", describe(&out));
    let error = children[0]["error"].as_str().unwrap();
    assert!(error.contains("deadline"), "{error}");
}

/// Validation: can_delegate_to naming a missing role, a cycle within the depth, a missing
/// schema — each an error with file and line.
#[test]
fn bad_delegation_settings_are_errors_with_file_and_line() {
    let fake = FakeModel::start();
    let v = vault(
        &fake,
        "can_delegate_to: [rsik]",
        "can_delegate_to: [risk]\noutput: {schema: schemas/none.json}",
        "",
    );
    let out = v.tabd(&["validate"]);
    let text = format!("{}{}", stdout(&out), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("roles/delivery.md:3: error: `can_delegate_to` names `rsik`")
            && text.contains("did you mean `risk`"),
        "{text}"
    );
    assert!(
        text.contains("roles/risk.md:3: error: delegation comes back round") && text.contains("risk → risk"),
        "{text}"
    );
    assert!(
        text.contains("roles/risk.md:4: error: `output.schema`: cannot read schemas/none.json"),
        "{text}"
    );
}

/// `tabd prompt ROLE --task` shows what a child is sent: the task in place of notes, no
/// `delegate` tool at depth 1.
#[test]
fn tabd_prompt_shows_what_a_child_is_sent() {
    let fake = FakeModel::start();
    let v = vault(&fake, "", "", "");
    v.write(
        "agent/inbox/risk/waiting.md",
        "an inbox note the child never sees",
    );
    let out = v.tabd(&["prompt", "risk", "--task", "Rate the API slip"]);
    let text = stdout(&out);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(
        text.contains("## Your task (from") && text.contains("Rate the API slip"),
        "{text}"
    );
    assert!(!text.contains("an inbox note the child never sees"), "{text}");
}

/// `delegate` is a tool like any other: `deny_tools` takes it away (not offered, refused if called
/// anyway), and `approve: {delegate: ask}` turns a call into an approval note — no child runs.
#[test]
fn deny_tools_and_approve_apply_to_delegate() {
    let fake = FakeModel::start();
    let v = vault(&fake, "can_delegate_to: [risk]\ndeny_tools: [delegate]", "", "");
    parent_delegates(&fake, json!({"role": "risk", "task": "rate it"}), |_| {
        wire::text("anthropic", "never asked")
    });
    let out = v.tabd(&["fire", "delivery"]);
    assert!(out.status.success(), "{}", describe(&out));
    let requests = fake.requests();
    assert!(!offered(&requests[0]).contains(&"delegate".to_string()));
    let (_, refused, is_error) = &wire::tool_results(&requests[1].body)[0];
    assert!(*is_error && refused.contains("may not delegate"), "{refused}");
    assert!(parent_records(&v).1.is_empty(), "no child ran");

    let fake = FakeModel::start();
    let v = vault(&fake, "can_delegate_to: [risk]\napprove: {delegate: ask}", "", "");
    parent_delegates(&fake, json!({"role": "risk", "task": "rate it"}), |_| {
        wire::text("anthropic", "never asked")
    });
    let out = v.tabd(&["fire", "delivery"]);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(
        fake.requests().iter().all(|r| child_task(r).is_none()),
        "no child ran"
    );
    let notes = v.files_in("agent/approvals");
    assert_eq!(notes.len(), 1, "{notes:?}");
    let note = v.read(&format!("agent/approvals/{}", notes[0]));
    assert!(
        note.contains("tool: delegate") && note.contains("rate it"),
        "{note}"
    );
}

/// An approved `delegate` call runs through the same door as any approved call: once, its child a
/// whole run of the named role whose answer lands in the note's `## Result`; children of an
/// approved call may not delegate further.
#[test]
fn an_approved_delegate_runs_its_child_once_and_the_answer_lands_in_the_note() {
    use crate::support::daemon::{wait_until, Daemon};
    let fake = FakeModel::start();
    let v = vault(
        &fake,
        "can_delegate_to: [risk]\napprove: {delegate: ask}",
        "can_delegate_to: [comms]",
        "",
    );
    parent_delegates(&fake, json!({"role": "risk", "task": "rate the launch"}), |r| {
        let offered = offered(r);
        wire::text(
            "anthropic",
            &format!(
                "risk is low (delegate offered: {})",
                offered.contains(&"delegate".to_string())
            ),
        )
    });
    let out = v.tabd(&["fire", "delivery"]);
    assert!(out.status.success(), "{}", describe(&out));
    let notes = v.files_in("agent/approvals");
    assert_eq!(notes.len(), 1, "{notes:?}");
    let note = format!("agent/approvals/{}", notes[0]);
    let id = notes[0]
        .trim_end_matches(".md")
        .rsplit('-')
        .next()
        .unwrap()
        .to_string();
    let out = v.tabd(&["approve", &id]);
    assert!(out.status.success(), "{}", describe(&out));

    let _d = Daemon::start(&v);
    wait_until(Duration::from_secs(20), "the approved call done", || {
        v.read(&note).contains("status: done")
    });
    let text = v.read(&note);
    assert!(
        text.contains("## Result") && text.contains("risk is low (delegate offered: false)"),
        "{text}"
    );
    let children: Vec<_> = fake.requests().iter().filter_map(child_task).collect();
    assert_eq!(children, ["rate the launch"], "one child, once");
    let (_, records) = parent_records(&v);
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0]["role"], "risk");
}

/// A delegated child counts its own calls (docs/spec.md §28): the child (`checkpoint_every: 2`)
/// scripts three calls; it cannot wait for the person inside its parent's call, so it ends at
/// its checkpoint — its third call never made — and its parent is told so, with the calls it
/// made; the day says it. The parent's count holds only its own call: a parent with no
/// checkpoint, and one with `checkpoint_every: 2` (which the child's calls would have crossed),
/// both go on to their answer.
#[test]
fn a_delegated_child_stops_at_its_own_checkpoint_and_its_calls_are_not_its_parents() {
    for parent in ["", "checkpoint_every: 2"] {
        let fake = FakeModel::start();
        let v = vault(
            &fake,
            &format!("can_delegate_to: [risk]\n{parent}"),
            "checkpoint_every: 2",
            "",
        );
        v.write("agent/inbox/delivery/slip.md", "The API slipped a week.");
        parent_delegates(
            &fake,
            json!({"role": "risk", "task": "Write three risk notes."}),
            |r| {
                let n = wire::tool_results(&r.body).len() + 1;
                if n > 3 {
                    return wire::text("anthropic", "Three risks written.");
                }
                wire::tools(
                    "anthropic",
                    Some(&format!("Next I write r{n}.md.")),
                    &[(
                        &format!("c{n}"),
                        "write_file",
                        json!({"path": format!("project/risks/r{n}.md"), "content": format!("risk {n}")}),
                    )],
                )
            },
        );
        let out = v.tabd(&["fire", "delivery"]);
        assert!(out.status.success(), "{parent}: {}", describe(&out));

        let requests = fake.requests();
        let child: Vec<&Recorded> = requests.iter().filter(|r| child_task(r).is_some()).collect();
        assert_eq!(
            child.len(),
            2,
            "{parent}: no request after the child's second call"
        );
        assert_eq!(v.read("project/risks/r2.md"), "risk 2");
        assert!(
            !v.path("project/risks/r3.md").exists(),
            "{parent}: the third call never made"
        );

        let last = requests.last().unwrap();
        assert!(child_task(last).is_none(), "{parent}: the parent's last request");
        let results = wire::tool_results(&last.body);
        assert_eq!(results.len(), 1, "{parent}: {results:?}");
        let answer: Value = serde_json::from_str(&results[0].1).unwrap();
        let error = answer["error"].as_str().unwrap_or_default();
        assert!(
            error.starts_with("stopped at its checkpoint after 2 tool calls (checkpoint_every: 2)"),
            "{parent}: {answer}"
        );
        assert!(
            error.contains("1. write_file") && error.contains("2. write_file"),
            "{parent}: the calls: {error}"
        );
        assert_eq!(answer["outcome"], "limit", "{parent}: {answer}");

        let (record, children) = parent_records(&v);
        assert_eq!(record["outcome"], "ok", "{parent}: {record}");
        assert!(record["ended"].is_null(), "{parent}: not waiting: {record}");
        assert_eq!(children.len(), 1);
        assert!(
            v.daily().contains("stopped at its checkpoint after 2 tool calls"),
            "{parent}: {}",
            v.daily()
        );
        assert!(
            v.files_in("agent/approvals").is_empty(),
            "{parent}: nothing to decide"
        );
    }
}
