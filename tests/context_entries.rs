//! Issue 39, item 6: what `tabd validate` says of context entries that find nothing — with the
//! role file's line, a did-you-mean where one is near, and no warning for a folder that is only
//! empty for now.

use crate::support::{describe, stdout, TestVault};

/// The lines `tabd validate` prints about context entries.
fn context_lines(v: &TestVault) -> Vec<String> {
    let out = v.tabd(&["validate"]);
    assert!(out.status.code() == Some(0), "{}", describe(&out));
    stdout(&out)
        .lines()
        .filter(|l| l.contains("context entry"))
        .map(str::to_string)
        .collect()
}

#[test]
fn a_context_entry_that_finds_nothing_is_named_at_its_line_with_what_was_meant() {
    let v = TestVault::new();
    v.write(
        "roles/ops.md",
        "# Ops\n## Mission\nKeep the plan.\n\n## Context Files\n- project/scope\n- project/timelne.md\n- project/blockers\n- project/risk/\n- nowhere/at-all.md\n",
    );
    let lines = context_lines(&v);
    let said = lines.join("\n");
    assert!(
        said.contains(
            "roles/ops.md:6: warning: context entry `project/scope` matches no file in the vault; the role will not see it — did you mean `project/scope.md`?"
        ),
        "{said}"
    );
    assert!(
        said.contains("roles/ops.md:7: warning: context entry `project/timelne.md` matches no file")
            && said.contains("did you mean `project/timeline.md`?"),
        "{said}"
    );
    assert!(
        said.contains("roles/ops.md:8: warning: context entry `project/blockers` matches no file")
            && said.contains("it is a folder: write `project/blockers/`"),
        "{said}"
    );
    assert!(
        said.contains("roles/ops.md:9: warning: context entry `project/risk/` matches no file")
            && said.contains("did you mean `project/risks/`?"),
        "{said}"
    );
    assert!(
        said.contains("roles/ops.md:10: warning: context entry `nowhere/at-all.md` matches no file in the vault; the role will not see it\n")
            || said.ends_with("roles/ops.md:10: warning: context entry `nowhere/at-all.md` matches no file in the vault; the role will not see it"),
        "no did-you-mean when nothing is near: {said}"
    );
}

/// `daily/` on day one (tabd makes it and writes into it) and a folder of the person's with no
/// notes yet are empty for now: a note, not a warning; the summary counts no warning.
#[test]
fn an_empty_folder_entry_is_empty_for_now_not_wrong() {
    let v = TestVault::new();
    std::fs::create_dir_all(v.path("project/meetings")).unwrap();
    v.write(
        "roles/ops.md",
        "# Ops\n## Mission\nKeep the plan.\n## Context Files\n- daily/\n- project/meetings/\n",
    );
    let out = v.tabd(&["validate"]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(
        text.contains("roles/ops.md:5: note: context entry `daily/` is empty for now (tabd makes this folder and writes into it)"),
        "{text}"
    );
    assert!(
        text.contains("roles/ops.md:6: note: context entry `project/meetings/` is empty for now (the folder has no notes yet)"),
        "{text}"
    );
    assert!(!text.contains("warning: context entry"), "{text}");
    assert!(text.contains("0 errors, 0 warnings"), "{text}");
}

/// An entry a role inherits is named at its parent's line.
#[test]
fn an_inherited_context_entry_is_named_in_the_parent_file() {
    let v = TestVault::new();
    v.write(
        "roles/_ops.md",
        "# Ops base\n## Mission\nBase.\n## Context Files\n- project/scope\n",
    );
    v.write(
        "roles/ops.md",
        "---\nextends: _ops\n---\n# Ops\n## Mission\nKeep the plan.\n",
    );
    let said = context_lines(&v).join("\n");
    assert!(
        said.contains("roles/_ops.md:5: warning: context entry `project/scope` matches no file")
            && said.contains("did you mean `project/scope.md`?"),
        "{said}"
    );
}
