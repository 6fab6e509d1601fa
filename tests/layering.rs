//! The floors of `src/lib.rs`, checked against the code (issue 20): every module is on a floor,
//! imports only from its floor or below, and no files import each other around a circle. Each
//! rule is also shown failing on a small made-up crate, so a green run means the checker can see
//! a climb, not only that none exists. A function's length is clippy's `too_many_lines` (70, in
//! clippy.toml), not a rule of this file.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Longest file of the daemon's shell.
const MAX_DAEMON_MOD_LINES: usize = 600;
/// The daemon shell's struct holds at most this many fields, each a group that owns one thing.
const MAX_DAEMON_FIELDS: usize = 8;

/// One source file: its path under `src/` (`running/run/finish.rs`) and its text without tests and
/// comments.
struct Source {
    path: String,
    code: String,
}

/// One row of the floor table of `lib.rs`: a floor's number, its folder under `src/` and the
/// modules that live in that folder.
struct Floor {
    number: u32,
    folder: String,
    modules: BTreeSet<String>,
}

/// The floor table of `lib.rs` (`//! | 1 | `base` | `vault` `clock` | what |`).
fn floor_table(lib: &str) -> Vec<Floor> {
    let mut out = Vec::new();
    for line in lib.lines() {
        let Some(row) = line.strip_prefix("//! | ") else {
            continue;
        };
        let cells: Vec<&str> = row.split(" | ").collect();
        let Some(Ok(number)) = cells.first().map(|c| c.trim().parse::<u32>()) else {
            continue;
        };
        let names = |cell: Option<&&str>| -> Vec<String> {
            cell.map(|c| c.split('`').skip(1).step_by(2).map(String::from).collect())
                .unwrap_or_default()
        };
        let Some(folder) = names(cells.get(1)).into_iter().next() else {
            continue;
        };
        out.push(Floor {
            number,
            folder,
            modules: names(cells.get(2)).into_iter().collect(),
        });
    }
    out
}

/// Floor folder → its number.
fn floors(lib: &str) -> BTreeMap<String, u32> {
    floor_table(lib)
        .into_iter()
        .map(|f| (f.folder, f.number))
        .collect()
}

/// The modules a `lib.rs` or a folder's `mod.rs` declares.
fn declared(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|l| {
            let l = l.trim();
            let rest = l
                .strip_prefix("pub mod ")
                .or_else(|| l.strip_prefix("pub(crate) mod "))
                .or_else(|| l.strip_prefix("mod "))?;
            Some(rest.trim_end_matches(';').to_string())
        })
        .collect()
}

/// The code of a file without its inline test module and without comments (a doc comment may
/// name `crate::x` without importing it).
fn production_code(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        if line.trim_start().starts_with("#[cfg(test)]") {
            if let Some(next) = lines.peek() {
                if next.trim_start().starts_with("mod tests {") {
                    break; // the test module is the end of the file
                }
            }
            continue;
        }
        let code = match line.find("//") {
            Some(i) if !line[..i].contains('"') => &line[..i],
            _ => line,
        };
        out.push_str(code);
        out.push('\n');
    }
    out
}

fn read_sources(src: &Path) -> Vec<Source> {
    let mut out = Vec::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = entry.path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            let rel = p.strip_prefix(src).unwrap().to_string_lossy().replace('\\', "/");
            let is_test = rel.ends_with("/tests.rs") || rel == "tests.rs";
            if !rel.ends_with(".rs") || is_test || rel == "main.rs" || rel == "lib.rs" {
                continue;
            }
            out.push(Source {
                path: rel,
                code: production_code(&std::fs::read_to_string(&p).unwrap()),
            });
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

/// The floor folder a file belongs to.
fn floor_folder_of(path: &str) -> String {
    path.split('/')
        .next()
        .unwrap()
        .trim_end_matches(".rs")
        .to_string()
}

/// The module path of a file (`running/run/finish.rs` → `running::run::finish`, `running/run/mod.rs` →
/// `running::run`).
fn module_path(path: &str) -> Vec<String> {
    let mut parts: Vec<String> = path
        .trim_end_matches(".rs")
        .split('/')
        .map(String::from)
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

/// Every path a file names, as module paths from the crate root (`crate::a::b::C`,
/// `super::x`, grouped `use crate::{a, b::c}`), without the item names' case checked.
fn references(source: &Source) -> Vec<Vec<String>> {
    let here = module_path(&source.path);
    let mut out = Vec::new();
    let code = &source.code;
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    // A folder's `mod.rs` is its face: it declares, re-exports and calls its children by their
    // bare names (`child::x`), which are not counted. Everything else — `crate::…` and
    // `super::…` — is.
    let mut i = 0;
    while i < code.len() {
        let rest = &code[i..];
        let (base, skip): (Vec<String>, usize) =
            if rest.starts_with("crate::") && !code[..i].ends_with(|c: char| ident(c)) {
                (Vec::new(), "crate::".len())
            } else if rest.starts_with("super::") && !code[..i].ends_with(|c: char| ident(c) || c == ':') {
                // `super` of `a/b.rs` (a::b) and of `a/b/mod.rs` (also a::b) is `a`.
                let mut b = here.clone();
                b.pop();
                // `super::super::`: one more level each.
                let mut s = "super::".len();
                while code[i + s..].starts_with("super::") {
                    b.pop();
                    s += "super::".len();
                }
                (b, s)
            } else {
                i += rest.chars().next().map_or(1, char::len_utf8);
                continue;
            };
        let after = &code[i + skip..];
        if let Some(group) = after.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                let mut p = base.clone();
                p.extend(
                    item.trim()
                        .split("::")
                        .map(|s| s.trim().to_string())
                        .filter(|s| !s.is_empty()),
                );
                out.push(p);
            }
        } else {
            let len = after
                .char_indices()
                .find(|(_, c)| !(ident(*c) || *c == ':'))
                .map_or(after.len(), |(n, _)| n);
            let mut p = base.clone();
            p.extend(
                after[..len]
                    .split("::")
                    .filter(|s| !s.is_empty())
                    .map(String::from),
            );
            out.push(p);
        }
        i += skip;
    }
    out.retain(|p| !p.is_empty());
    out
}

/// The file a module path points into: its longest prefix that is a file of the crate.
fn file_of(path: &[String], files: &BTreeSet<String>) -> Option<String> {
    for n in (1..=path.len()).rev() {
        let stem = path[..n].join("/");
        for candidate in [format!("{stem}.rs"), format!("{stem}/mod.rs")] {
            if files.contains(&candidate) {
                return Some(candidate);
            }
        }
    }
    None
}

/// Imports that climb: a file on one floor that names a module of a higher floor (the floor is
/// the file's top folder: `src/base/vault/mod.rs` is on `base`'s floor).
fn climbs(sources: &[Source], floors: &BTreeMap<String, u32>) -> Vec<String> {
    let mut out = Vec::new();
    for s in sources {
        let own = floor_folder_of(&s.path);
        let Some(&mine) = floors.get(&own) else { continue };
        let mut seen = BTreeSet::new();
        for r in references(s) {
            let Some(target) = r.first() else { continue };
            // `floor::module`, named once per file.
            let module = r.iter().take(2).cloned().collect::<Vec<_>>().join("::");
            if *target == own || !seen.insert(module.clone()) {
                continue;
            }
            if let Some(&theirs) = floors.get(target) {
                if theirs > mine {
                    out.push(format!(
                        "src/{} (`{own}`, floor {mine}) imports `{module}` (floor {theirs}): move what it needs down to \
                         floor {mine} or lower, or move this code up",
                        s.path
                    ));
                }
            }
        }
    }
    out
}

/// Files that import each other around a circle (each circle once, its files sorted).
fn circles(sources: &[Source]) -> Vec<Vec<String>> {
    let files: BTreeSet<String> = sources.iter().map(|s| s.path.clone()).collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for s in sources {
        let to = edges.entry(s.path.clone()).or_default();
        for r in references(s) {
            if let Some(f) = file_of(&r, &files) {
                if f != s.path {
                    to.insert(f);
                }
            }
        }
    }
    // Tarjan's strongly connected components.
    struct T<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<String, usize>,
        low: BTreeMap<String, usize>,
        stack: Vec<String>,
        on: BTreeSet<String>,
        next: usize,
        out: Vec<Vec<String>>,
    }
    fn visit(t: &mut T<'_>, v: &str) {
        t.index.insert(v.to_string(), t.next);
        t.low.insert(v.to_string(), t.next);
        t.next += 1;
        t.stack.push(v.to_string());
        t.on.insert(v.to_string());
        let targets: Vec<String> = t
            .edges
            .get(v)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default();
        for w in targets {
            if !t.index.contains_key(&w) {
                visit(t, &w);
                let lw = t.low[&w];
                let lv = t.low[v];
                t.low.insert(v.to_string(), lv.min(lw));
            } else if t.on.contains(&w) {
                let iw = t.index[&w];
                let lv = t.low[v];
                t.low.insert(v.to_string(), lv.min(iw));
            }
        }
        if t.low[v] == t.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on.remove(&w);
                let done = w == v;
                comp.push(w);
                if done {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                t.out.push(comp);
                t.out.sort();
            }
        }
    }
    let mut t = T {
        edges: &edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !t.index.contains_key(v) {
            visit(&mut t, v);
        }
    }
    t.out
}

/// The only files that may run a tool: the harness (every call of every door goes through it),
/// and the tools themselves. Anything else that names the tool runners would be a second door.
const TOOL_RUNNERS: &[&str] = &["tools::execute", "tools::write_answer", "McpTool"];

/// Files outside the harness that name a tool runner (production code only).
fn doors_around_the_harness(sources: &[Source]) -> Vec<String> {
    let allowed = |p: &str| {
        p.starts_with("gate/harness/")
            || p.starts_with("capabilities/tools/")
            || p == "capabilities/mcp/tools.rs"
    };
    let mut out = Vec::new();
    for s in sources.iter().filter(|s| !allowed(&s.path)) {
        for runner in TOOL_RUNNERS {
            if s.code.contains(runner) {
                out.push(format!(
                    "src/{} names `{runner}`: only the harness runs tools",
                    s.path
                ));
            }
        }
    }
    out
}

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn every_module_is_on_a_floor_and_imports_only_from_its_floor_or_below() {
    let lib = std::fs::read_to_string(src_dir().join("lib.rs")).unwrap();
    let floors = floors(&lib);
    let on_floors: BTreeSet<String> = floors.keys().cloned().collect();
    assert_eq!(
        declared(&lib),
        on_floors,
        "lib.rs declares exactly the floor folders of its table"
    );
    // The folder is the floor: each floor's `mod.rs` declares the modules its row names, and
    // nothing else lives in it.
    for floor in floor_table(&lib) {
        let face = std::fs::read_to_string(src_dir().join(&floor.folder).join("mod.rs")).unwrap();
        assert_eq!(
            declared(&face),
            floor.modules,
            "src/{}/mod.rs declares the modules of floor {} in lib.rs's table",
            floor.folder,
            floor.number
        );
        let other: Vec<&str> = face
            .lines()
            .filter(|l| !l.starts_with("//!") && !l.trim().is_empty() && declared(l).is_empty())
            .collect();
        assert!(
            other.is_empty(),
            "src/{}/mod.rs only declares its floor's modules: {other:?}",
            floor.folder
        );
    }
    let sources = read_sources(&src_dir());
    assert!(
        sources.len() > 50,
        "the checker reads the crate ({} files)",
        sources.len()
    );
    let problems = climbs(&sources, &floors);
    assert!(
        problems.is_empty(),
        "imports that climb a floor:\n{}",
        problems.join("\n")
    );
}

/// Issue 29: every door to a tool goes through the harness — no other file runs a vault tool or
/// an MCP tool itself.
#[test]
fn only_the_harness_runs_tools() {
    let sources = read_sources(&src_dir());
    let found = doors_around_the_harness(&sources);
    assert!(found.is_empty(), "{}", found.join("\n"));
    let fake = vec![Source {
        path: "doors/approval_pass/execute.rs".into(),
        code: production_code("fn go() { crate::tools::execute(&ctx, \"write_file\", &input); }\n"),
    }];
    assert_eq!(
        doors_around_the_harness(&fake).len(),
        1,
        "the rule sees a second door"
    );
}

#[test]
fn no_files_import_each_other_around_a_circle() {
    let sources = read_sources(&src_dir());
    let found = circles(&sources);
    assert!(
        found.is_empty(),
        "files that import each other: {}",
        found.iter().map(|c| c.join(" → ")).collect::<Vec<_>>().join("\n")
    );
}

#[test]
fn the_daemon_shell_stays_short() {
    let daemon = std::fs::read_to_string(src_dir().join("doors/daemon/mod.rs")).unwrap();
    let n = daemon.lines().count();
    assert!(
        n <= MAX_DAEMON_MOD_LINES,
        "src/doors/daemon/mod.rs is {n} lines (at most {MAX_DAEMON_MOD_LINES})"
    );
}

/// The fields of `pub struct NAME { … }` in `text`, each with whether a `///` line stands above
/// it.
fn struct_fields(text: &str, name: &str) -> Vec<(String, bool)> {
    let Some(start) = text.find(&format!("pub struct {name} {{")) else {
        return Vec::new();
    };
    let mut fields = Vec::new();
    let mut documented = false;
    for line in text[start..].lines().skip(1) {
        let t = line.trim();
        if line.starts_with('}') {
            break;
        }
        if t.starts_with("///") {
            documented = true;
            continue;
        }
        // A field starts at the struct's own indent: `name: Type,` (maybe `pub(super)`).
        let field = t.trim_start_matches("pub(super) ").trim_start_matches("pub ");
        let is_field = line.starts_with("    ")
            && !line.starts_with("     ")
            && field.split_once(':').is_some_and(|(n, _)| {
                !n.is_empty() && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            });
        if is_field {
            let n = field.split_once(':').map_or("", |(n, _)| n);
            fields.push((n.to_string(), documented));
        }
        if !t.starts_with("#[") {
            documented = false;
        }
    }
    fields
}

/// Issue 37: the daemon's shell is an executor of the core's effects with a handful of fields,
/// each a group that owns one thing and says what in one doc line.
#[test]
fn the_daemon_shell_has_a_handful_of_fields() {
    let daemon = std::fs::read_to_string(src_dir().join("doors/daemon/mod.rs")).unwrap();
    let fields = struct_fields(&daemon, "Daemon");
    assert!(!fields.is_empty(), "struct Daemon is in src/doors/daemon/mod.rs");
    assert!(
        fields.len() <= MAX_DAEMON_FIELDS,
        "struct Daemon has {} fields (at most {MAX_DAEMON_FIELDS}): {:?}",
        fields.len(),
        fields.iter().map(|f| &f.0).collect::<Vec<_>>()
    );
    let bare: Vec<&String> = fields.iter().filter(|f| !f.1).map(|f| &f.0).collect();
    assert!(
        bare.is_empty(),
        "fields of struct Daemon without a doc line: {bare:?}"
    );
    // The checker itself, on a made-up struct: it counts fields, not their types' lines.
    let made_up = "pub struct Daemon {\n    /// a\n    a: A,\n    b: HashMap<\n        String,\n        u8,\n    >,\n}\n";
    assert_eq!(
        struct_fields(made_up, "Daemon"),
        [("a".to_string(), true), ("b".to_string(), false)]
    );
}

/// The checker on a made-up crate: an upward import and a circle are found, an import in tests
/// is not one.
#[test]
fn the_checker_sees_a_climb_and_a_circle() {
    let lib = "//! | 2 | `high` | `up` | up |\n//! | 1 | `low` | `a` `b` `other` | down |\npub mod high;\npub mod low;\n";
    let floors = floors(lib);
    assert_eq!(floors["high"], 2);
    assert_eq!(floors["low"], 1);
    let table = floor_table(lib);
    assert_eq!(
        table[1].modules,
        ["a", "b", "other"].map(String::from).into(),
        "a floor's row names its modules"
    );
    let src = |path: &str, text: &str| Source {
        path: path.into(),
        code: production_code(text),
    };
    let sources = vec![
        src("high/up.rs", "use crate::low::a::Thing;\n"),
        src(
            "low/a/mod.rs",
            "mod inner;\nuse crate::high::up::Up; // climbs\npub use self::inner::A;\n",
        ),
        src("low/a/inner.rs", "use crate::low::b::B;\n"),
        src(
            "low/b.rs",
            "use super::a::inner::A;\n// use crate::high::up::Nope; (a comment: not an import)\n",
        ),
        src(
            "low/other.rs",
            "fn short() {}\n#[cfg(test)]\nmod tests {\n    use crate::high::up::X;\n}\n",
        ),
    ];
    let up = climbs(&sources, &floors);
    assert_eq!(up.len(), 1, "{up:?}");
    assert!(
        up[0].contains("src/low/a/mod.rs") && up[0].contains("imports `high::up`"),
        "{up:?}"
    );
    let found = circles(&sources);
    assert_eq!(
        found,
        vec![
            vec!["high/up.rs".to_string(), "low/a/mod.rs".to_string()],
            vec!["low/a/inner.rs".to_string(), "low/b.rs".to_string()],
        ],
        "the climb is a circle too"
    );
}

/// Where a module's name starts on a line of the design notes' module map.
const MAP_NAME_COLUMN: usize = 24;

/// The module map of `docs/design-notes.md`: its entries as `floor-folder/name` (`name/` for a
/// folder, `name` for a file; the foundations' last line lists several, comma-separated). A line
/// that starts with `floor N  folder/` opens that floor's entries.
fn mapped_modules(notes: &str) -> BTreeSet<String> {
    let start = notes.find("```\nfloor 8").expect("the module map's block");
    let block = &notes[start + 4..];
    let block = &block[..block.find("```").expect("the block's end")];
    let mut names = BTreeSet::new();
    let mut floor = String::new();
    for line in block.lines() {
        if let Some(label) = line.strip_prefix("floor ") {
            floor = label
                .get(3..)
                .unwrap_or("")
                .split_whitespace()
                .next()
                .unwrap_or("")
                .to_string();
        }
        let Some(rest) = line.get(MAP_NAME_COLUMN..) else {
            continue;
        };
        if line[..MAP_NAME_COLUMN].ends_with(' ') && !rest.starts_with(' ') {
            // "clock, environment (Env, redaction), diag": the names outside brackets.
            let mut depth = 0;
            let outside: String = rest
                .chars()
                .filter(|c| {
                    match c {
                        '(' => depth += 1,
                        ')' => depth -= 1,
                        _ => {}
                    }
                    depth == 0 && *c != ')'
                })
                .collect();
            let listed =
                outside.split(", ").count() > 1 && !outside.split(", ").next().unwrap().contains(' ');
            let tokens: Vec<&str> = if listed {
                outside.split(", ").map(str::trim).collect()
            } else {
                outside.split_whitespace().take(1).collect()
            };
            names.extend(tokens.into_iter().map(|t| format!("{floor}{t}")));
        }
    }
    names
}

/// Issue 32: the module map in the design notes names exactly the modules of the floor table,
/// each under its floor's folder, with a folder (`name/`) where the module is a folder's `mod.rs`.
#[test]
fn the_module_map_in_the_design_notes_matches_the_tree() {
    let lib = std::fs::read_to_string(src_dir().join("lib.rs")).unwrap();
    let notes_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/design-notes.md");
    let notes = std::fs::read_to_string(notes_path).unwrap();
    let mapped = mapped_modules(&notes);
    let expected: BTreeSet<String> = floor_table(&lib)
        .into_iter()
        .flat_map(|floor| {
            floor.modules.into_iter().map(move |m| {
                let dir = src_dir().join(&floor.folder).join(&m);
                let slash = if dir.join("mod.rs").is_file() { "/" } else { "" };
                format!("{}/{m}{slash}", floor.folder)
            })
        })
        .collect();
    assert!(expected.len() > 40, "the floor table's modules: {expected:?}");
    assert_eq!(mapped, expected, "docs/design-notes.md's module map against src/");
}

/// The lines of production code that make or start a process, outside the files allowed to.
fn starts_outside(sources: &[Source], allowed: &[&str]) -> Vec<String> {
    sources
        .iter()
        .filter(|s| !allowed.contains(&s.path.as_str()))
        .flat_map(|s| {
            s.code
                .lines()
                .enumerate()
                .filter(|(_, line)| line.contains("Command::new(") || line.contains(".spawn()"))
                .map(|(i, line)| format!("src/{}:{}: {}", s.path, i + 1, line.trim()))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Issue 37 item 5: every child the daemon starts (MCP servers, agent CLIs, notify programs)
/// goes through the one launcher, so none misses a step (tabd's environment cleared, a tenant,
/// its confinement). `tabd service` runs `systemctl` in the foreground for the person.
#[test]
fn only_the_launcher_starts_children() {
    const ALLOWED: [&str; 2] = ["base/process/launch.rs", "doors/commands/service.rs"];
    let found = starts_outside(&read_sources(&src_dir()), &ALLOWED);
    assert!(
        found.is_empty(),
        "processes started outside base/process/launch.rs:\n{}",
        found.join("\n")
    );
    let fake = vec![Source {
        path: "capabilities/notify/deliver.rs".into(),
        code: production_code(
            "let mut cmd = tokio::process::Command::new(program);\nlet child = cmd.spawn()?;\n",
        ),
    }];
    assert_eq!(starts_outside(&fake, &ALLOWED).len(), 2, "the rule sees a start");
}

/// Issue 32, item 2: the vault's fixed paths are spelled once, in `vault::layout`; production
/// code names them through it (a literal elsewhere drifts when the layout changes).
#[test]
fn the_vaults_fixed_paths_are_spelled_only_in_the_layout() {
    const FIXED: [&str; 9] = [
        "\"memory.md",
        "\"agent/memory",
        "\"agent/inbox",
        "\".tabd/",
        "\".tabd\"",
        "\"daily/",
        "\"roles/",
        "\"agent/approvals",
        "\"agent/status",
    ];
    let found: Vec<String> = read_sources(&src_dir())
        .iter()
        .filter(|s| s.path != "base/vault/layout.rs")
        .flat_map(|s| {
            s.code
                .lines()
                .enumerate()
                .filter(|(_, line)| FIXED.iter().any(|f| line.contains(f)))
                .map(|(i, line)| format!("src/{}:{}: {}", s.path, i + 1, line.trim()))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(
        found.is_empty(),
        "fixed vault paths spelled outside vault::layout:\n{}",
        found.join("\n")
    );
}

/// Every file of the repository a maintainer reads: the code, the tests, the docs, the scripts.
fn repository_texts() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = Vec::new();
    let mut stack: Vec<PathBuf> = ["src", "tests", "docs", "benches", "scripts", ".ci"]
        .iter()
        .map(|d| root.join(d))
        .collect();
    stack.push(root.join("README.md"));
    while let Some(p) = stack.pop() {
        if p.is_dir() {
            stack.extend(std::fs::read_dir(&p).unwrap().flatten().map(|e| e.path()));
        } else if let Ok(text) = std::fs::read_to_string(&p) {
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/");
            out.push((rel, text));
        }
    }
    out
}

/// Issue 50, item 7: the code cites the spec in the repository (`docs/spec.md §N`), never a
/// document outside it; each section it cites is there; and where the design document the spec
/// was copied from sits beside the repository, the copy is the same.
#[test]
fn the_spec_the_code_cites_is_in_the_repository() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let spec = std::fs::read_to_string(root.join("docs/spec.md")).unwrap();
    let sections: BTreeSet<String> = spec
        .lines()
        .filter_map(|l| l.strip_prefix("## "))
        .filter_map(|h| h.split_once('.').map(|(n, _)| n.to_string()))
        .filter(|n| n.chars().all(|c| c.is_ascii_digit()))
        .collect();
    assert!(sections.len() > 20, "the spec's numbered sections: {sections:?}");
    let outside = ["DESIGN §", "DESIGN.md", "../shared/", "/work/shared"];
    let mut wrong = Vec::new();
    for (path, text) in repository_texts() {
        if path == "docs/spec.md" || path == "tests/layering.rs" {
            continue;
        }
        let flat = text
            .replace("\n//! ", " ")
            .replace("\n/// ", " ")
            .replace("\n// ", " ");
        for o in outside {
            if flat.contains(o) {
                wrong.push(format!("{path}: cites `{o}`, outside the repository"));
            }
        }
        for (i, _) in flat.match_indices("docs/spec.md §") {
            let n: String = flat[i + "docs/spec.md §".len()..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            if !sections.contains(&n) {
                wrong.push(format!("{path}: docs/spec.md §{n} is no section of the spec"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    let original = root.join("../shared/DESIGN.md");
    if let Ok(design) = std::fs::read_to_string(&original) {
        assert!(
            design == spec,
            "{} changed: copy it to docs/spec.md (the contract the code cites)",
            original.display()
        );
    }
}
