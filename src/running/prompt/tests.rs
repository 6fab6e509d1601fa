//! Context budgets: big folders degrade to an index, closed notes go to the index, one-file
//! entries keep their share.

use std::time::{Duration, SystemTime};

use super::*;

fn loaded(path: &str, text: &str, age_days: u64) -> Loaded {
    Loaded {
        path: VaultPath::parse(path, false).unwrap(),
        text: text.to_string(),
        hash: String::new(),
        modified: Some(SystemTime::now() - Duration::from_secs(age_days * 86_400)),
        size: text.len() as u64,
    }
}

fn cfg(max_context_bytes: usize) -> ContextConfig {
    ContextConfig {
        max_file_bytes: 1000,
        max_context_bytes,
    }
}

fn fates(plan: &[(String, Vec<Shown>)]) -> Vec<(String, &'static str)> {
    plan.iter()
        .flat_map(|(_, shown)| shown.iter())
        .map(|s| match s {
            Shown::Full(l) => (l.path.as_str().to_string(), "full"),
            Shown::Index(l, _) => (l.path.as_str().to_string(), "index"),
        })
        .collect()
}

#[test]
fn a_big_folder_shows_its_newest_notes_and_indexes_the_rest() {
    let body = "x".repeat(300);
    let risks: Vec<Loaded> = (0..10)
        .map(|i| loaded(&format!("project/risks/r{i}.md"), &body, i))
        .collect();
    let groups = vec![
        (
            "project/scope.md".to_string(),
            false,
            vec![loaded("project/scope.md", &body, 30)],
        ),
        ("project/risks/".to_string(), true, risks),
    ];
    // 300 for scope, 1,000 left for the folder: its three newest notes fit.
    let plan = plan_shares(groups, &cfg(1300));
    let f = fates(&plan);
    assert_eq!(
        f[0],
        ("project/scope.md".to_string(), "full"),
        "one-file entries first"
    );
    let full: Vec<&str> = f[1..]
        .iter()
        .filter(|x| x.1 == "full")
        .map(|x| x.0.as_str())
        .collect();
    assert_eq!(
        full,
        [
            "project/risks/r0.md",
            "project/risks/r1.md",
            "project/risks/r2.md"
        ]
    );
    assert_eq!(f.iter().filter(|x| x.1 == "index").count(), 7);
}

#[test]
fn closed_notes_go_to_the_index_however_new() {
    let groups = vec![(
        "project/decisions/".to_string(),
        true,
        vec![
            loaded("project/decisions/a.md", "---\nstatus: done\n---\n# A\n", 0),
            loaded("project/decisions/b.md", "---\nstatus: open\n---\n# B\n", 1),
            loaded("project/decisions/c.md", "---\nstatus: Archived\n---\n# C\n", 2),
        ],
    )];
    let plan = plan_shares(groups, &cfg(100_000));
    assert_eq!(
        fates(&plan),
        [
            ("project/decisions/b.md".to_string(), "full"),
            ("project/decisions/a.md".to_string(), "index"),
            ("project/decisions/c.md".to_string(), "index"),
        ]
    );
    let Shown::Index(_, why) = &plan[0].1[1] else {
        panic!()
    };
    assert_eq!(*why, Indexed::Closed("done".into()));
    assert_eq!(why.to_string(), "status: done");
}

#[test]
fn the_index_lists_path_title_date_and_size_and_render_says_why() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..30 {
        let p = dir.path().join(format!("project/risks/r{i:02}.md"));
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, format!("# Risk number {i}\n{}", "detail ".repeat(200))).unwrap();
    }
    let vault = Vault::open(dir.path()).unwrap();
    let role = crate::setup::role::RoleSet::from_texts(
        [(
            "r".to_string(),
            std::path::PathBuf::from("roles/r.md"),
            Ok("# R\n## Context Files\n- project/risks/\n".to_string()),
        )],
        &crate::setup::role::LoadContext::new(chrono_tz::UTC, crate::base::environment::Env::default()),
    )
    .roles["r"]
        .clone();
    let mut config = Config::default();
    config.context.max_context_bytes = 8 * 1024;
    let p = build(&PromptInput {
        vault: &vault,
        role: &role,
        config: &config,
        previous: None,
        now: Utc::now(),
        trigger: &Trigger::manual(),
        notes: &[],
        tools: Vec::new(),
    });
    assert!(p
        .context
        .contains("## Index of project/risks/ (not included above; open one with read_file)"));
    assert!(p.context.contains("- project/risks/r"), "{}", p.context);
    assert!(
        p.context.contains("— \"Risk number"),
        "titles from the first heading"
    );
    assert!(!p.indexed.is_empty() && p.indexed.len() < 30);
    assert_eq!(p.hashes.len(), 30, "indexed notes are still watched for changes");
    assert!(p.render().contains(&format!(
        "===== INDEXED, NOT INCLUDED ({}) =====",
        p.indexed.len()
    )));
}
