use super::*;

fn vault() -> (tempfile::TempDir, Vault) {
    let dir = tempfile::tempdir().unwrap();
    let v = Vault::open(dir.path()).unwrap();
    (dir, v)
}

fn put(dir: &tempfile::TempDir, rel: &str, text: &str) {
    let p = dir.path().join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// The format's own valid and invalid examples, and `skills-ref`'s Unicode rule.
#[test]
fn names_follow_the_format() {
    for good in [
        "pdf-processing",
        "data-analysis",
        "code-review",
        "a",
        "v2",
        "données",
        &"a".repeat(64),
    ] {
        assert!(check_name(good).is_ok(), "{good}");
    }
    for bad in [
        "PDF-Processing",
        "-pdf",
        "pdf-",
        "pdf--processing",
        "",
        "a_b",
        "a.b",
        "..",
        "a/b",
        "a b",
        &"a".repeat(65),
    ] {
        assert!(check_name(bad).is_err(), "{bad}");
    }
}

#[test]
fn a_good_skill_is_listed_with_its_description_on_one_line() {
    let (d, v) = vault();
    put(
        &d,
        "skills/weekly-report/SKILL.md",
        "---\nname: weekly-report\ndescription: >\n  Writes the weekly report.\n  Use on Fridays.\nlicense: MIT\nmetadata:\n  version: \"1.0\"\nallowed-tools: Read Write\ncompatibility: any\n---\n# Weekly report\nSee [the template](assets/template.md) and ![chart](assets/c.png), [site](https://example.com), [top](#top).\n",
    );
    put(&d, "skills/weekly-report/assets/template.md", "t");
    put(&d, "skills/weekly-report/assets/c.png", "p");
    let (skill, warnings) = load(&v, "weekly-report").unwrap();
    assert_eq!(skill.description, "Writes the weekly report. Use on Fridays.");
    assert_eq!(skill.path.as_str(), "skills/weekly-report/SKILL.md");
    assert!(warnings.is_empty(), "{warnings:?}");
}

/// Each problem at its line of SKILL.md: a name unlike the folder, a description too long, a
/// field of the wrong shape, a link to nothing and one out of the folder; an unknown field warns.
#[test]
fn every_problem_is_named_at_its_line() {
    let (d, v) = vault();
    let long = "x".repeat(1025);
    put(
        &d,
        "skills/report/SKILL.md",
        &format!(
            "---\nname: reports\ndescription: {long}\nmetadata: [a]\nauthor: me\n---\n# R\n\nSee [gone](references/gone.md).\nAnd [out](../other/SKILL.md) and [abs](/etc/passwd).\n"
        ),
    );
    let Err(SkillError::Invalid(errors)) = load(&v, "report") else {
        panic!("not invalid")
    };
    let said: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
    let said = said.join("\n");
    for expected in [
        "skills/report/SKILL.md:2: error: `name: reports` differs from the skill's folder `report`",
        "skills/report/SKILL.md:3: error: `description` is 1025 characters; the format allows at most 1024",
        "skills/report/SKILL.md:4: error: `metadata` should be a mapping",
        "skills/report/SKILL.md:9: error: the link `references/gone.md` names skills/report/references/gone.md, which does not exist",
        "skills/report/SKILL.md:10: error: the link `../other/SKILL.md` leads out of the skill's folder",
        "skills/report/SKILL.md:10: error: the link `/etc/passwd` is absolute; write it relative to the skill's folder",
    ] {
        assert!(said.contains(expected), "missing {expected}\nin:\n{said}");
    }
    let all = diagnostics(&v, &[("report".into(), PathBuf::from("roles/ops.md"), 7)]);
    assert!(
        all.iter()
            .any(|d| d.to_string() == "skills/report/SKILL.md:5: warning: `author` is not a field of the skill format (name, description, license, compatibility, metadata, allowed-tools); tabd ignores it"),
        "{all:?}"
    );
}

#[test]
fn a_missing_skill_or_a_bad_name_is_named_at_the_roles_line() {
    let (d, v) = vault();
    put(&d, "skills/nofm/SKILL.md", "# no frontmatter\n");
    let all = diagnostics(
        &v,
        &[
            ("gone".into(), PathBuf::from("roles/ops.md"), 7),
            ("Bad_Name".into(), PathBuf::from("roles/ops.md"), 8),
            ("nofm".into(), PathBuf::from("roles/ops.md"), 9),
        ],
    );
    let said: Vec<String> = all.iter().map(|d| d.to_string()).collect();
    assert!(
        said.contains(&"roles/ops.md:7: error: skill `gone`: there is no skills/gone/SKILL.md; the role runs without it".to_string()),
        "{said:?}"
    );
    assert!(
        said.iter()
            .any(|s| s.starts_with("roles/ops.md:8: error: skill `Bad_Name`: `Bad_Name` has capitals")),
        "{said:?}"
    );
    assert!(
        said.iter()
            .any(|s| s.starts_with("skills/nofm/SKILL.md:1: error: a SKILL.md opens with frontmatter")),
        "{said:?}"
    );
}

/// A SKILL.md that is a link out of its folder is not the skill; a link inside it is.
#[test]
fn a_skill_file_linked_from_outside_its_folder_is_refused() {
    let (d, v) = vault();
    put(&d, "project/fake.md", "---\nname: x\ndescription: y\n---\n");
    std::fs::create_dir_all(d.path().join("skills/x")).unwrap();
    std::os::unix::fs::symlink("../../project/fake.md", d.path().join("skills/x/SKILL.md")).unwrap();
    let e = load(&v, "x").unwrap_err();
    assert!(e.to_string().contains("outside the skill's folder"), "{e}");
}

/// The example the stock template ships passes every check, with nothing to warn of.
#[test]
fn the_template_example_skill_is_valid() {
    let (d, v) = vault();
    let example = crate::base::template::Plan {
        layout: Default::default(),
        example: true,
        log: "daily".into(),
    };
    crate::base::template::init_vault(d.path(), &example).unwrap();
    let (skill, warnings) = load(&v, "status-report").unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    assert!(skill
        .description
        .starts_with("Writes a short weekly status report"));
}

#[test]
fn within_is_exact_and_needs_a_listed_valid_name() {
    let listed = vec!["report".to_string(), "Bad".to_string()];
    let p = |s: &str| VaultPath::parse(s, false).unwrap();
    assert!(within(&Default::default(), &listed, &p("skills/report/SKILL.md")));
    assert!(within(
        &Default::default(),
        &listed,
        &p("skills/report/references/a.md")
    ));
    assert!(!within(&Default::default(), &listed, &p("skills/report")));
    assert!(!within(
        &Default::default(),
        &listed,
        &p("skills/reports/SKILL.md")
    ));
    assert!(!within(&Default::default(), &listed, &p("skills/other/SKILL.md")));
    assert!(!within(
        &Default::default(),
        &listed,
        &p("Skills/report/SKILL.md")
    ));
    assert!(!within(&Default::default(), &listed, &p("skills/Bad/SKILL.md")));
    assert!(!within(
        &Default::default(),
        &listed,
        &p("project/report/SKILL.md")
    ));
}
