use super::*;

fn ctx() -> LoadContext {
    LoadContext {
        default_tz: chrono_tz::Europe::Lisbon,
        env: Env::from_pairs([("TEAM_MODEL", "env-model")]),
        mcp_servers: Some(["memory".to_string(), "slack".to_string()].into()),
        hook_sets: Some(["guard".to_string()].into()),
        models: None,
        layout: Default::default(),
    }
}

fn load(files: &[(&str, &str)]) -> RoleSet {
    RoleSet::from_texts(
        files.iter().map(|(name, text)| {
            (
                name.to_string(),
                PathBuf::from(format!("roles/{name}.md")),
                Ok(text.to_string()),
            )
        }),
        &ctx(),
    )
}

const BASE: &str = "---\nmax_tool_calls: 10\ncan_trigger: [risk]\nwrite_paths: [project/**]\n---\n# Base\n\n\
## Rules\n- Never delete notes\n\n## Context Files\n- memory.md\n\n## Tools\n- read_file\n\n## Schedule\ndaily at 8:00\n";

const DELIVERY: &str = "---\nextends: _base\nmodel: ${TEAM_MODEL}\nmax_tool_calls: 30\nwrite_paths: [daily/**]\n---\n\
# Delivery Manager\n\n## Mission\nShip.\n\n## Goals\n- Track\n\n## Rules\n- Be brief\n- Never delete notes\n\n\
## Context Files\n- project/timeline.md\n- memory.md\n\n## Tools\n- write_file\n\n## Schedule\n9am and 5pm, weekdays\n";

const RISK: &str = "# Risk Manager\n## Mission\nWatch risks.\n## Schedule\ndaily\n";

#[test]
fn extends_merges_lists_parent_first_and_child_wins_scalars() {
    let set = load(&[("_base", BASE), ("delivery", DELIVERY), ("risk", RISK)]);
    assert!(set.errors().next().is_none(), "{:#?}", set.diagnostics);
    let d = &set.roles["delivery"];
    assert_eq!(d.display_name, "Delivery Manager");
    assert!(!d.is_abstract);
    assert_eq!(d.settings.max_tool_calls, Some(30), "child wins");
    assert_eq!(
        d.settings.model.as_deref(),
        Some("env-model"),
        "${{VAR}} expanded"
    );
    assert_eq!(
        d.rules,
        ["Never delete notes", "Be brief"],
        "union, parent first, no duplicates"
    );
    assert_eq!(d.settings.write_paths, ["project/**", "daily/**"]);
    assert_eq!(d.settings.can_trigger, ["risk"]);
    assert_eq!(d.tools, ["read_file", "write_file"]);
    let ctx: Vec<String> = d.context.iter().map(|c| c.to_string()).collect();
    assert_eq!(ctx, ["memory.md", "project/timeline.md"]);
    assert_eq!(
        d.schedule.cron_exprs(),
        ["0 9,17 * * 1-5"],
        "child's schedule wins"
    );
    assert_eq!(d.schedule.tz, chrono_tz::Europe::Lisbon);
    assert_eq!(d.inbox.as_str(), "agent/inbox/delivery");
    assert!(set.roles["_base"].is_abstract);
    assert_eq!(set.runnable().count(), 2);
}

#[test]
fn default_tools_when_no_section() {
    let set = load(&[("risk", RISK)]);
    assert_eq!(set.roles["risk"].tools, DEFAULT_TOOLS);
}

#[test]
fn missing_parent_is_an_error_at_the_extends_line() {
    let set = load(&[
        ("a", "---\nmodel: x\nextends: _bse\n---\n# A\n"),
        ("_base", BASE),
        ("risk", RISK),
    ]);
    let errs: Vec<String> = set.errors().map(ToString::to_string).collect();
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(errs[0].starts_with("roles/a.md:3: error:"), "{}", errs[0]);
    assert!(errs[0].contains("did you mean `_base`"), "{}", errs[0]);
    assert!(set.broken.contains_key("a"));
}

#[test]
fn cycles_are_errors() {
    let set = load(&[
        ("a", "---\nextends: b\n---\n# A\n"),
        ("b", "---\nextends: a\n---\n# B\n"),
    ]);
    assert!(set.broken.contains_key("a") && set.broken.contains_key("b"));
    // Each error points at the `extends` line that closes the loop.
    let cycles: Vec<String> = set
        .errors()
        .filter(|d| d.message.contains("cycle"))
        .map(|d| format!("{}:{}", d.path.display(), d.line))
        .collect();
    assert_eq!(cycles, ["roles/a.md:2", "roles/b.md:2"]);
}

#[test]
fn depth_over_three_is_an_error() {
    let set = load(&[
        ("a", "---\nextends: b\n---\n# A\n"),
        ("b", "---\nextends: c\n---\n# B\n"),
        ("c", "---\nextends: d\n---\n# C\n"),
        ("d", "---\nextends: e\n---\n# D\n"),
        ("e", "# E\n"),
    ]);
    assert!(set.broken.contains_key("a"), "{:#?}", set.diagnostics);
    assert!(set.roles.contains_key("b"), "b → c → d → e is three levels");
    let deep: Vec<String> = set
        .errors()
        .filter(|d| d.message.contains("deeper than 3"))
        .map(|d| format!("{}:{}", d.path.display(), d.line))
        .collect();
    assert_eq!(deep, ["roles/a.md:2"], "at the role's own `extends` line");
}

#[test]
fn a_broken_parent_breaks_its_children_but_not_others() {
    let set = load(&[
        ("_base", "---\nmax_tool_calls: lots\n---\n# B\n"),
        ("delivery", DELIVERY),
        ("risk", RISK),
    ]);
    assert!(set.broken.contains_key("_base"));
    assert!(set.broken.contains_key("delivery"));
    assert!(set.roles.contains_key("risk"));
    let msgs: Vec<String> = set.errors().map(ToString::to_string).collect();
    assert!(
        msgs.iter()
            .any(|m| m.starts_with("roles/_base.md:2: error: `max_tool_calls`")),
        "{msgs:?}"
    );
    assert!(
        msgs.iter().any(|m| m.contains("inherits from `_base`")),
        "{msgs:?}"
    );
}

#[test]
fn error_lines_for_each_kind() {
    let text = "---\nmodel: x\nmax_tokens: many\n---\n# R\n\n## Tools\n- read_file\n- raed_file\n\n\
## Schedule\n- every 7 min\n- daily at 8:30\n\n## Context Files\n- ../outside.md\n\n## Inbox\n/abs/inbox\n";
    let set = load(&[("r", text)]);
    let got: Vec<(usize, bool)> = set.errors().map(|d| (d.line, d.is_error())).collect();
    assert_eq!(
        got.iter().map(|g| g.0).collect::<Vec<_>>(),
        [3, 9, 12, 16, 19],
        "{:#?}",
        set.diagnostics
    );
    let tool_err = set.errors().find(|d| d.line == 9).unwrap();
    assert!(tool_err.message.contains("did you mean `read_file`"));
}

#[test]
fn unclosed_frontmatter_is_an_error_on_line_one() {
    let set = load(&[("r", "---\nmodel: x\n# R\n## Mission\nm\n")]);
    let e = set.errors().next().unwrap();
    assert_eq!((e.line, e.path.to_str().unwrap()), (1, "roles/r.md"));
}

#[test]
fn crlf_role_files_parse_with_right_lines() {
    let set = load(&[(
        "r",
        "---\r\nmodel: x\r\nbogus: 1\r\n---\r\n# R\r\n## Schedule\r\nat noon\r\n",
    )]);
    let e = set.errors().next().unwrap();
    assert_eq!(e.line, 3);
    let set = load(&[(
        "r",
        &DELIVERY.replace("extends: _base\n", "").replace('\n', "\r\n"),
    )]);
    assert!(set.errors().next().is_none(), "{:#?}", set.diagnostics);
    assert_eq!(set.roles["r"].schedule.cron_exprs(), ["0 9,17 * * 1-5"]);
}

/// Issue 48: a role file whose opening `---` was deleted is an error at the settings' first line
/// saying what to add — not a warning about a heading the person never wrote — and the role does
/// not run without its settings.
#[test]
fn a_frontmatter_that_lost_its_opening_line_is_an_error_saying_to_add_it() {
    let lost = "\nextends: _base\nmodel: m\n---\n# Risk Manager\n\n## Mission\nWatch.\n";
    let set = load(&[("_base", BASE), ("risk", lost)]);
    assert!(set.broken.contains_key("risk"), "{:#?}", set.diagnostics);
    let said: Vec<String> = set.diagnostics.iter().map(|d| d.to_string()).collect();
    assert_eq!(
        said,
        [
            "roles/risk.md:2: error: the frontmatter's opening `---` is missing: lines 2–3 hold settings \
          (`extends`, `model`) closed by the `---` on line 4, but no `---` opens them, so none of them \
          is read; add a line `---` above line 2"
        ],
    );
    // Put back, the same file loads.
    let set = load(&[("_base", BASE), ("risk", &format!("---{lost}"))]);
    assert!(set.errors().next().is_none(), "{:#?}", set.diagnostics);
}

/// The other side: a role without frontmatter whose body has a thematic break after prose, or a
/// `Word: text` line that is no setting, loads as before.
#[test]
fn prose_or_an_unknown_key_before_a_thematic_break_is_body() {
    for text in [
        "# Risk\n\nWatches risks.\n\n---\n\n## Mission\nWatch.\n",
        "Note: this role is new\n---\n# Risk\n## Mission\nWatch.\n",
    ] {
        let set = load(&[("risk", text)]);
        assert!(set.roles.contains_key("risk"), "{text:?}: {:#?}", set.diagnostics);
        assert!(set.errors().next().is_none(), "{text:?}: {:#?}", set.diagnostics);
    }
}

#[test]
fn unknown_sections_are_kept_with_a_warning() {
    let set = load(&[("r", "# R\n## Mission\nm\n## Glossary\nTPM: me\n")]);
    let r = &set.roles["r"];
    assert_eq!(r.extra, [("Glossary".to_string(), "TPM: me".to_string())]);
    let w = &set.diagnostics[0];
    assert!(!w.is_error());
    assert_eq!(w.line, 4);
}

#[test]
fn can_trigger_must_name_real_runnable_roles() {
    let set = load(&[
        ("a", "---\ncan_trigger: [rsik]\n---\n# A\n"),
        ("risk", RISK),
        ("_base", "# B\n"),
    ]);
    let e = set.errors().next().unwrap();
    assert_eq!(e.line, 2);
    assert!(e.message.contains("did you mean `risk`"), "{}", e.message);
    let set = load(&[("a", "---\ncan_trigger: [_base]\n---\n# A\n"), ("_base", "# B\n")]);
    assert!(set.errors().next().unwrap().message.contains("abstract"));
}

#[test]
fn schedule_phrases_joined_by_semicolons_and_on_demand() {
    let set = load(&[
        ("p", "# P\n## Schedule\non-demand; mondays at 10am\n"),
        ("q", "# Q\n## Schedule\nmanual\n"),
    ]);
    assert_eq!(set.roles["p"].schedule.cron_exprs(), ["0 10 * * 1"]);
    assert!(set.roles["q"].schedule.is_empty());
}

#[test]
fn role_timezone_beats_default_and_skip_unchanged_defaults() {
    let set = load(&[
        (
            "c",
            "---\ntimezone: America/New_York\n---\n# C\n## Schedule\nevery 30 min\n",
        ),
        ("d", "# D\n## Schedule\nat noon\n"),
    ]);
    assert_eq!(set.roles["c"].schedule.tz, chrono_tz::America::New_York);
    assert!(set.roles["c"].skip_unchanged());
    assert!(!set.roles["d"].skip_unchanged());
}

#[test]
fn title_falls_back_to_name() {
    let set = load(&[("quiet", "## Mission\nm\n")]);
    assert_eq!(set.roles["quiet"].display_name, "quiet");
}

#[test]
fn a_repeated_section_is_a_warning_at_its_line_and_both_are_used() {
    let set = load(&[("r", "# R\n## Goals\n- a\n## goals:\n- b\n")]);
    let w: Vec<String> = set.diagnostics.iter().map(ToString::to_string).collect();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].starts_with("roles/r.md:4: warning: `## goals` repeats the section at line 2"),
        "{}",
        w[0]
    );
    assert_eq!(set.roles["r"].goals, ["a", "b"]);
}

#[test]
fn mcp_tools_are_allowed_per_server_or_tool_and_deny_wins() {
    let set = load(&[
        (
            "_base",
            "---\ndeny_tools: [memory/delete_entities]\n---\n# Base\n## Tools\n- read_file\n- memory/*\n",
        ),
        (
            "comms",
            "---\nextends: _base\ndeny_tools: [slack/*, write_file]\n---\n# Comms\n## Tools\n- slack/conversations_add_message\n- write_file\n",
        ),
    ]);
    let r = &set.roles["comms"];
    assert!(set.diagnostics.is_empty(), "{:?}", set.diagnostics);
    assert!(r.allows_mcp("memory", "read_graph"), "server/* from the parent");
    assert!(
        !r.allows_mcp("memory", "delete_entities"),
        "the parent's deny is kept"
    );
    assert!(
        !r.allows_mcp("slack", "conversations_add_message"),
        "deny wins over allow"
    );
    assert!(!r.has_tool("write_file"), "a vault tool can be denied too");
    assert!(r.has_tool("read_file"));
    assert_eq!(
        r.mcp_servers(),
        ["memory"],
        "a fully denied server is not started"
    );
}

#[test]
fn unknown_servers_and_malformed_entries_are_errors_with_their_line() {
    let set = load(&[(
        "ops",
        "# Ops\n## Tools\n- read_file\n- jira/*\n- memory/bad!\n- Memory/x\n- memory/read_graph — what it does\n",
    )]);
    let msgs: Vec<String> = set.diagnostics.iter().map(ToString::to_string).collect();
    assert!(
        msgs.iter().any(|m| m.starts_with("roles/ops.md:4: error: `jira/*` names MCP server `jira`, which the config does not declare (it declares: memory, slack)")),
        "{msgs:#?}"
    );
    assert!(
        msgs.iter().any(|m| m.starts_with("roles/ops.md:5: error:")),
        "{msgs:#?}"
    );
    assert!(
        msgs.iter().any(|m| m.starts_with("roles/ops.md:6: error:")),
        "{msgs:#?}"
    );
    assert!(set.broken.contains_key("ops"));
    let set = load(&[("x", "---\ndeny_tools: [rm -rf]\n---\n# X\n")]);
    assert!(
        set.diagnostics[0]
            .to_string()
            .contains("roles/x.md:2: error: `deny_tools`"),
        "{:?}",
        set.diagnostics
    );
}

#[test]
fn approve_maps_merge_through_extends_child_winning_per_key_and_decide_calls() {
    use crate::base::calls::Mode;
    use crate::base::calls::Risk;
    use crate::gate::approvals::mode_for;
    let set = load(&[
        (
            "_base",
            "---\napprove:\n  network: deny\n  slack/*: ask\n  write: ask\n---\n# Base\n",
        ),
        (
            "comms",
            "---\nextends: _base\napprove:\n  slack/conversations_history: auto\n  write: auto\n  remember: ask\n---\n# Comms\n## Tools\n- slack/*\n- write_file\n- remember\n",
        ),
        ("plain", "# Plain\n"),
    ]);
    assert!(set.errors().next().is_none(), "{:#?}", set.diagnostics);
    let r = &set.roles["comms"];
    assert_eq!(
        mode_for(r, "slack/conversations_history", Risk::Network),
        Mode::Auto,
        "tool entry"
    );
    assert_eq!(
        mode_for(r, "slack/conversations_add_message", Risk::Network),
        Mode::Ask,
        "server/*"
    );
    assert_eq!(
        mode_for(r, "memory/create_entities", Risk::Network),
        Mode::Deny,
        "class from the parent"
    );
    assert_eq!(
        mode_for(r, "write_file", Risk::Write),
        Mode::Auto,
        "the child wins per key"
    );
    assert_eq!(mode_for(r, "remember", Risk::Write), Mode::Ask);
    let p = &set.roles["plain"];
    assert_eq!(mode_for(p, "read_file", Risk::Read), Mode::Auto, "defaults");
    assert_eq!(mode_for(p, "write_file", Risk::Write), Mode::Auto);
    assert_eq!(mode_for(p, "x/y", Risk::Network), Mode::Ask);
    assert_eq!(mode_for(p, "x/z", Risk::Destructive), Mode::Ask);
}

#[test]
fn bad_approve_entries_are_errors_with_their_line() {
    let set = load(&[("x", "---\nmodel: m\napprove:\n  network: maybe\n---\n# X\n")]);
    let msg = set.errors().map(|d| d.to_string()).collect::<Vec<_>>().join("\n");
    assert!(
        msg.contains("roles/x.md:3: error: `approve`: `network` must be auto, ask or deny"),
        "{msg}"
    );
    let set = load(&[("y", "---\napprove:\n  networks: ask\n---\n# Y\n")]);
    let msg = set.errors().map(|d| d.to_string()).collect::<Vec<_>>().join("\n");
    assert!(msg.contains("`networks` is neither a risk class"), "{msg}");
    let set = load(&[("z", "---\napprove: ask\n---\n# Z\n")]);
    assert!(set.errors().next().is_some());
}

#[test]
fn a_schedule_that_never_fires_is_a_warning() {
    let set = load(&[("r", "# R\n## Schedule\n0 0 31 2 *\n")]);
    let warning = set
        .diagnostics
        .iter()
        .find(|d| !d.is_error() && d.message.contains("never fires"))
        .unwrap_or_else(|| panic!("{:?}", set.diagnostics));
    assert_eq!(warning.line, 3);
    assert!(
        set.roles.contains_key("r"),
        "still a role: it runs from its inbox"
    );
}

#[test]
fn a_near_miss_heading_is_an_error_with_did_you_mean() {
    let set = load(&[("r", "# R\n## Schedules\n9am\n## Notes for the model\nBe kind.\n")]);
    let e = set
        .errors()
        .next()
        .unwrap_or_else(|| panic!("{:?}", set.diagnostics));
    assert!(e.message.contains("did you mean `## Schedule`"), "{e}");
    assert_eq!(e.line, 2);
    assert!(
        set.diagnostics
            .iter()
            .any(|d| !d.is_error() && d.message.contains("Notes for the model")),
        "an unrelated heading is a warning only"
    );
}

/// "A role calls only the tools its ## Tools lists": a person who lists `delegate` there is
/// understood. With `can_delegate_to` it is accepted silently; without, a warning says where the
/// tool comes from — never an error that stops the role.
#[test]
fn delegate_listed_under_tools_is_accepted() {
    let with =
        "---\ncan_delegate_to: [risk]\n---\n# Boss\n## Mission\nAsk.\n## Tools\n- read_file\n- delegate\n";
    let without = "# Lone\n## Mission\nAsk.\n## Tools\n- delegate — ask others\n";
    let set = load(&[("boss", with), ("lone", without), ("risk", RISK)]);
    assert!(set.errors().next().is_none(), "{:#?}", set.diagnostics);
    assert!(set.roles["boss"].may_delegate());
    assert_eq!(set.roles["boss"].tools, ["read_file"]);
    let warning = set
        .diagnostics
        .iter()
        .find(|d| d.path.ends_with("lone.md"))
        .unwrap_or_else(|| panic!("{:?}", set.diagnostics));
    assert_eq!(
        (warning.severity, warning.line),
        (crate::base::diag::Severity::Warning, 5)
    );
    assert!(
        warning.message.contains("can_delegate_to: [risk]"),
        "{}",
        warning.message
    );
    assert!(set.roles.contains_key("lone") && !set.roles["lone"].may_delegate());
    assert!(
        !set.diagnostics.iter().any(|d| d.path.ends_with("boss.md")),
        "{:?}",
        set.diagnostics
    );
}

#[test]
fn enabled_takes_yes_and_no_as_people_write_them() {
    for (value, on) in [
        ("yes", true),
        ("No", false),
        ("off", false),
        ("true", true),
        ("false", false),
    ] {
        let set = load(&[("r", &format!("---\nenabled: {value}\n---\n# R\n## Mission\nM.\n"))]);
        assert!(set.errors().next().is_none(), "{value}: {:?}", set.diagnostics);
        assert_eq!(set.roles["r"].enabled(), on, "{value}");
    }
    let set = load(&[("r", "---\nenabled: maybe\n---\n# R\n")]);
    let e = set.errors().next().map(|d| d.message.clone()).unwrap_or_default();
    assert!(e.contains("true or false (yes or no)"), "{e}");
}

#[test]
fn expect_takes_a_path_and_a_deadline_schedule_and_says_what_is_wrong() {
    let ok = load(&[(
        "r",
        "---\nexpect:\n  - path: \"reports/{date}.md\"\n    by: weekdays at 8:30\n---\n# R\n",
    )]);
    assert!(ok.errors().next().is_none(), "{:?}", ok.diagnostics);
    let e = &ok.roles["r"].settings.expect[0];
    assert_eq!(
        e.path_on(chrono::NaiveDate::from_ymd_opt(2026, 11, 25).unwrap(), "r"),
        "reports/2026-11-25.md"
    );
    assert_eq!(e.deadlines().cron_exprs().collect::<Vec<_>>(), ["30 8 * * 1-5"]);
    for (bad, says) in [
        (
            "{path: \"r/{week}.md\", by: \"8:30\"}",
            "unknown placeholder {week}; use {date} or {role}",
        ),
        ("{path: \"r.md\"}", "needs `by`"),
        ("{path: \"r.md\", by: \"sometimes\"}", "cannot read schedule"),
        ("{path: \"../out.md\", by: \"8:30\"}", "expect.path"),
        ("{path: \"r.md\", by: \"8:30\", when: 1}", "no key `when`"),
    ] {
        let set = load(&[("r", &format!("---\nexpect: {bad}\n---\n# R\n"))]);
        let e = set.errors().next().map(|d| d.message.clone()).unwrap_or_default();
        assert!(e.contains(says), "{bad}: {e}");
    }
}

/// Issue 32: the list of known settings and what reads them cannot drift apart — every listed
/// key is read (a wrong value gets that key's own message, never "unknown setting"). Issue 37:
/// both come from one table now, and the table and docs/roles.md's settings table list the same
/// keys, both ways (`move_folders` was read and never documented).
#[test]
fn every_known_setting_is_read() {
    for key in crate::setup::role::settings::KNOWN_KEYS {
        let set = load(&[("r", &format!("---\n{key}: [[[nonsense]]]\n---\n# R\n"))]);
        for d in &set.diagnostics {
            assert!(!d.message.contains("unknown setting"), "{key}: {}", d.message);
        }
    }
    let doc = include_str!("../../../docs/roles.md");
    let section = doc
        .split("\n## Settings (frontmatter)\n")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("docs/roles.md has a `## Settings (frontmatter)` section");
    let documented: Vec<&str> = section
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .collect();
    let known = crate::setup::role::settings::KNOWN_KEYS;
    for key in known {
        assert!(
            documented.contains(key),
            "`{key}` is a setting docs/roles.md's table does not list"
        );
    }
    for key in &documented {
        assert!(
            known.contains(key),
            "docs/roles.md lists `{key}`, which no setting reads"
        );
    }
}

/// A child inherits every setting it does not set itself (checked field by field by the
/// compiler in `RoleSettings::inherit`; here, for a few, by behaviour).
#[test]
fn a_child_inherits_what_it_does_not_set() {
    let parent =
        "---\nresume: false\nmax_parallel_delegates: 2\nexpect: {path: \"r.md\", by: \"8:30\"}\n---\n# P\n";
    let set = load(&[
        ("_p", parent),
        ("c", "---\nextends: _p\n---\n# C\n## Mission\nM.\n"),
    ]);
    let c = &set.roles["c"].settings;
    assert_eq!(
        (c.resume, c.max_parallel_delegates, c.expect.len()),
        (Some(false), Some(2), 1)
    );
}

/// docs/spec.md §24: what one role may ask for is capped; past a cap the role is broken at the line
/// that asks, the message naming the cap, and the other roles load as before.
#[test]
fn a_role_asking_for_more_than_a_cap_is_broken_at_its_line_naming_the_cap() {
    let expects: String = (0..51)
        .map(|i| format!("  - {{path: \"r/{i}-{{date}}.md\", by: \"daily at 8:00\"}}\n"))
        .collect();
    let heavy = format!("---\nexpect:\n{expects}---\n# Heavy\n");
    let entries: String = (0..201).map(|i| format!("- n/{i}.md\n")).collect();
    let wide = format!("# Wide\n## Mission\nRead.\n## Context Files\n{entries}");
    let set = load(&[("heavy", &heavy), ("wide", &wide), ("risk", RISK)]);
    let errors: Vec<String> = set.errors().map(|d| d.to_string()).collect();
    assert!(
        errors.iter().any(|e| e.starts_with(
            "roles/heavy.md:2: error: `expect` has 51 expectations; a role may have at most 50"
        )),
        "{errors:#?}"
    );
    assert!(
        errors.iter().any(|e| e.starts_with(
            "roles/wide.md:4: error: `## Context Files` has 201 entries; a role may have at most 200"
        )),
        "{errors:#?}"
    );
    assert_eq!(set.broken.keys().collect::<Vec<_>>(), ["heavy", "wide"]);
    assert!(set.roles.contains_key("risk"));
    assert!(set.roles["risk"].context.is_empty());
}

#[test]
fn a_role_at_every_cap_loads() {
    let expects: String = (0..caps::EXPECT.max)
        .map(|i| format!("  - {{path: \"r/{i}-{{date}}.md\", by: \"daily at 8:00\"}}\n"))
        .collect();
    let entries: String = (0..caps::CONTEXT.max).map(|i| format!("- n/{i}.md\n")).collect();
    let text = format!("---\nexpect:\n{expects}---\n# Full\n## Context Files\n{entries}");
    let set = load(&[("full", &text)]);
    assert!(set.errors().next().is_none(), "{:#?}", set.diagnostics);
    assert_eq!(set.roles["full"].settings.expect.len(), caps::EXPECT.max);
    assert_eq!(set.roles["full"].context.len(), caps::CONTEXT.max);
}

/// Every list a role asks for in bulk is capped, in the frontmatter and in the body.
#[test]
fn every_bulk_list_has_its_cap() {
    let many = |n: usize, item: &dyn Fn(usize) -> String| -> String {
        (0..n).map(|i| format!("  - {}\n", item(i))).collect()
    };
    let cases: Vec<(caps::Cap, String)> = vec![
        (
            caps::WATCH,
            format!("---\nwatch:\n{}---\n", many(101, &|i| format!("w/{i}.md"))),
        ),
        (
            caps::WRITE_PATHS,
            format!("---\nwrite_paths:\n{}---\n", many(101, &|i| format!("w{i}/**"))),
        ),
        (
            caps::DENY_TOOLS,
            format!(
                "---\ndeny_tools:\n{}---\n",
                many(201, &|i| format!("memory/t{i}"))
            ),
        ),
        (
            caps::CAN_TRIGGER,
            format!("---\ncan_trigger:\n{}---\n", many(51, &|i| format!("r{i}"))),
        ),
        (
            caps::CAN_DELEGATE_TO,
            format!("---\ncan_delegate_to:\n{}---\n", many(51, &|i| format!("r{i}"))),
        ),
        (
            caps::APPROVE,
            format!(
                "---\napprove:\n{}---\n",
                (0..201)
                    .map(|i| format!("  memory/t{i}: ask\n"))
                    .collect::<String>()
            ),
        ),
        (
            caps::TOOLS,
            format!("## Tools\n{}", many(201, &|i| format!("memory/t{i}"))),
        ),
        (
            caps::SCHEDULE,
            format!(
                "## Schedule\n{}",
                many(51, &|i| format!("daily at {}:00", i % 24))
            ),
        ),
        (
            caps::GOALS,
            format!("## Goals\n{}", many(201, &|i| format!("goal {i}"))),
        ),
        (
            caps::RULES,
            format!("## Rules\n{}", many(201, &|i| format!("rule {i}"))),
        ),
        (
            caps::SECTIONS,
            (0..51)
                .map(|i| format!("## Part {i}\ntext\n"))
                .collect::<String>(),
        ),
    ];
    for (cap, text) in cases {
        let set = load(&[("r", &format!("{text}\n# R\n"))]);
        let said = format!("{} has ", cap.what);
        let at_most = format!("a role may have at most {}", cap.max);
        assert!(
            set.errors()
                .any(|d| d.message.starts_with(&said) && d.message.contains(&at_most)),
            "{}: {:#?}",
            cap.what,
            set.diagnostics
        );
        assert!(set.broken.contains_key("r"), "{}", cap.what);
    }
}

/// Each file within a cap, the two together over it: the child is broken at its `extends` line.
#[test]
fn a_cap_counts_what_a_role_inherits() {
    let watch = |from: usize| -> String { (from..from + 60).map(|i| format!("  - w/{i}.md\n")).collect() };
    let base = format!("---\nwatch:\n{}---\n# Base\n", watch(0));
    let child = format!("---\nextends: _base\nwatch:\n{}---\n# Child\n", watch(60));
    let set = load(&[("_base", &base), ("child", &child)]);
    assert!(set.roles.contains_key("_base"));
    let errors: Vec<String> = set.errors().map(|d| d.to_string()).collect();
    assert!(
        errors.iter().any(|e| e.starts_with(
            "roles/child.md:2: error: with what it inherits through `extends: _base`, `watch` has 120 paths; a role may have at most 100"
        )),
        "{errors:#?}"
    );
}

/// Hostile role files — deep, huge and malformed frontmatter over hostile Markdown — load as a
/// role or as a broken one with diagnostics at lines of the file, in words; never a panic or an
/// overflow, and the other roles of the set still load.
#[test]
fn any_role_file_loads_or_is_broken_with_lines_and_the_others_still_load() {
    use crate::formats::frontmatter::hostile;
    use proptest::prelude::*;
    let files = prop_oneof![hostile::file_with(hostile::any_yaml()), hostile::markdown()];
    let mut runner = proptest::test_runner::TestRunner::new(hostile::config(64));
    runner
        .run(&files, |text| {
            let lines = text.lines().count().max(1);
            let set = load(&[("odd", &text), ("risk", RISK)]);
            prop_assert!(set.roles.contains_key("risk"), "{:?}", set.diagnostics);
            prop_assert!(set.roles.contains_key("odd") || set.broken.contains_key("odd"));
            for d in &set.diagnostics {
                prop_assert!(d.line <= lines, "{d}");
                prop_assert!(d.message.len() > 10, "{d}");
            }
            Ok(())
        })
        .unwrap();
}

/// `## Skills` is inherited like `## Tools` (parent's first, each once, each at the line that
/// wrote it); a role that lists skills but not `read_file` gets `read_file` for them alone, and
/// `deny_tools` still wins.
#[test]
fn skills_are_inherited_and_give_read_file_for_themselves() {
    let parent = "# P\n## Tools\n- write_file\n## Skills\n- weekly-report\n";
    let child = "---\nextends: _p\n---\n# C\n## Skills\n- `triage` — sorting notes\n- weekly-report\n";
    let denied = "---\ndeny_tools: [read_file]\n---\n# D\n## Skills\n- triage\n";
    let set = load(&[("_p", parent), ("c", child), ("d", denied), ("risk", RISK)]);
    assert!(set.errors().next().is_none(), "{:#?}", set.diagnostics);
    let c = &set.roles["c"];
    assert_eq!(c.skills, ["weekly-report", "triage"]);
    assert_eq!(c.skill_lines["weekly-report"], (PathBuf::from("roles/_p.md"), 5));
    assert_eq!(c.skill_lines["triage"], (PathBuf::from("roles/c.md"), 6));
    assert!(c.has_tool("read_file") && c.reads_only_skills());
    assert!(
        !set.roles["risk"].reads_only_skills(),
        "no skills: the default tools"
    );
    assert!(!set.roles["d"].has_tool("read_file"), "deny_tools wins");
}

/// Issue 52, item 2: a role names the config's hook sets in `hooks:` (inherited like its tools,
/// the parent's first); a set the config lacks is an error at its line, never a role whose
/// calls go unchecked.
#[test]
fn hooks_name_the_configs_sets_and_are_inherited() {
    let set = load(&[
        ("_base", "---\nhooks: [guard]\n---\n# Base\n"),
        ("child", "---\nextends: _base\n---\n# Child\n"),
        ("typo", "---\nschedule: daily at 9\nhooks: [gaurd]\n---\n# Typo\n"),
    ]);
    assert_eq!(set.roles["child"].settings.hooks, ["guard"]);
    let errors: Vec<String> = set.diagnostics.iter().map(ToString::to_string).collect();
    assert!(
        errors.iter().any(|e| e.contains("typo.md:3")
            && e.contains("`gaurd` is no hook set")
            && e.contains("did you mean `guard`")),
        "{errors:?}"
    );
}
