//! Paths of the vault with a meaning of their own (docs/spec.md §8, §24), and the one way tabd compares
//! a name with them.
//!
//! - `TABD_OWNS`: tabd's own files — the daily log, `agent/status.md`, approval notes, memory,
//!   `.tabd/`. No role's write tools write them, whatever its `write_paths` say; no child writes
//!   them either (`vault = "write"` keeps them read-only). Memory changes through `remember` only.
//! - `PROTECTED`: folders a role writes only where its `write_paths` name them (role files,
//!   skills, the inboxes, Obsidian's and git's folders, the trash); read-only for a child.
//! - Files other programs load as settings or code: every hidden name (`.git/`, `.envrc`,
//!   `.claude/` …, at any depth) and the visible names of `LOADED` (`CLAUDE.md`, `mise.toml`,
//!   `package.json` …). Written by a role only where its `write_paths` name them; never left
//!   behind by a child.
//!
//! Every comparison goes through `fold`: a path is protected when it is one of these in either
//! of its two forms (see `Folded`), so `CLAUDE.MD`, `ＣＬＡＵＤＥ.md`, `claude.md.`, `claude.md `,
//! `agent/INBOX/` and `agent/approvaIs/` all are. `docs/security.md` lists every name, who loads
//! it and why (a test holds the two together).

use unicode_normalization::char::is_combining_mark;
use unicode_normalization::UnicodeNormalization;

use super::layout;

/// Folders no tool reads: tabd's own state and git's.
pub const UNREADABLE: &[&str] = &[layout::TABD, ".git"];

/// tabd's own files and folders (docs/spec.md §24): never a write target of a role — not through its
/// tools, not through `write_paths`, not through `output.path` or an undo — and read-only for a
/// child. tabd writes them itself; memory changes only through `remember`. Each name is relative
/// to tabd's home (`Layout`); the log folder (`DAILY`) is the layout's (`Layout::daily`).
pub const TABD_OWNS: &[(&str, &str)] = &[
    (
        layout::DAILY,
        "the daily run log: tabd writes each run's section and its Undo line",
    ),
    (
        layout::LOG_ELSEWHERE,
        "the daily run log of a day whose note in the log folder is not tabd's (yours, or Obsidian's Daily Notes)",
    ),
    (
        layout::STATUS_NOTE,
        "the status note: tabd rewrites it after every run",
    ),
    (
        layout::APPROVALS,
        "approval notes are decided by the person; a role can never create, edit or move them, so it cannot approve its own calls",
    ),
    (
        layout::TABD,
        "tabd's own state: run records, the undo journal, suspended runs, process groups",
    ),
    (
        layout::MEMORY,
        "the memory every role reads in its prompt; it changes only through `remember`",
    ),
    (
        layout::ROLE_MEMORIES,
        "each role's memory, read in its prompt; it changes only through `remember`",
    ),
];

/// Folders no tool writes unless the role's `write_paths` names them explicitly. The first three
/// are tabd's (under its home, `Layout`); Obsidian's and git's are at the vault's root.
pub const PROTECTED: &[(&str, &str)] = &[
    (layout::ROLES, "role files are edited by you, not by the agent"),
    (
        layout::SKILLS,
        "skills are edited by you: every role that lists one reads its description in its prompt and follows its instructions",
    ),
    // Inboxes are written only by `trigger_role`, which sets `hops`, so chains stay bounded.
    (layout::INBOXES, "inboxes take notes through trigger_role only"),
    (".obsidian", "Obsidian's settings and plugins"),
    (".git", "the vault's git history and hooks"),
    (".trash", "Obsidian's trash"),
];

/// Names of `TABD_OWNS` and `PROTECTED` that stay at the vault's root wherever tabd's home is.
const AT_ROOT: &[&str] = &[layout::TABD, ".obsidian", ".git", ".trash"];

/// `name` of `TABD_OWNS` or `PROTECTED` where `layout` puts it.
pub fn placed(name: &str, layout: &layout::Layout) -> String {
    if AT_ROOT.contains(&name) {
        name.to_string()
    } else if name == layout::DAILY {
        layout.daily()
    } else {
        layout.at(name)
    }
}

/// Visible names other programs load as instructions, settings or code (hidden names are all
/// treated so). A name with a `/` is the end of a path (`mise/config.toml`); one `*` in the
/// last part stands for any text (`mise.*.toml`).
pub struct Loaded {
    pub names: &'static [&'static str],
    /// Which programs load it.
    pub who: &'static str,
    /// What it does for them.
    pub why: &'static str,
}

/// Instructions an agent follows there read as orders from you; settings and build files run
/// commands as you the next time you (or an agent) open, enter or build that folder.
pub const LOADED: &[Loaded] = &[
    Loaded {
        names: &["CLAUDE.md", "CLAUDE.local.md"],
        who: "Claude Code",
        why: "instructions it follows in that folder and below",
    },
    Loaded {
        names: &["AGENTS.md", "AGENTS.override.md", "AGENT.md"],
        who: "Codex, GitHub Copilot, Cursor, opencode, Amp, Jules, goose, Zed, Warp and most other agents",
        why: "instructions they follow in that folder and below",
    },
    Loaded {
        names: &["GEMINI.md"],
        who: "Gemini CLI",
        why: "instructions it follows",
    },
    Loaded {
        names: &["QWEN.md"],
        who: "Qwen Code",
        why: "instructions it follows",
    },
    Loaded {
        names: &["CRUSH.md"],
        who: "Crush",
        why: "instructions it follows",
    },
    Loaded {
        names: &["WARP.md"],
        who: "Warp",
        why: "project rules its agents follow",
    },
    Loaded {
        names: &["AmazonQ.md"],
        who: "Amazon Q Developer CLI",
        why: "context it loads by default",
    },
    Loaded {
        names: &["CONVENTIONS.md"],
        who: "aider",
        why: "conventions it is told to follow",
    },
    Loaded {
        names: &["opencode.json", "opencode.jsonc", "crush.json"],
        who: "opencode, Crush",
        why: "settings that start MCP servers and allow commands",
    },
    Loaded {
        names: &["mise.toml", "mise.*.toml", "mise/config.toml"],
        who: "mise",
        why: "environment, tools, tasks and hooks that run when you enter the folder",
    },
    Loaded {
        names: &[
            "flake.nix",
            "shell.nix",
            "default.nix",
            "devenv.nix",
            "devenv.yaml",
        ],
        who: "Nix, direnv (`use flake`, `use nix`), devenv",
        why: "evaluated again when it changes, on entering the folder",
    },
    Loaded {
        names: &["package.json", "bunfig.toml"],
        who: "npm, pnpm, yarn, bun",
        why: "install scripts that run on `npm install`; bun's preload scripts",
    },
    Loaded {
        names: &[
            "Makefile",
            "makefile",
            "GNUmakefile",
            "justfile",
            "Taskfile.yml",
            "Taskfile.yaml",
            "Rakefile",
        ],
        who: "make, just, task, rake",
        why: "commands a bare `make` (`just`, `task`, `rake`) runs",
    },
    Loaded {
        names: &["Gemfile", "Vagrantfile"],
        who: "Bundler, Vagrant",
        why: "Ruby they run on every `bundle` or `vagrant` command",
    },
    Loaded {
        names: &[
            "conftest.py",
            "pyproject.toml",
            "setup.py",
            "tox.ini",
            "noxfile.py",
        ],
        who: "pytest, pip, uv, tox, nox",
        why: "code they import or build on a plain `pytest`, `pip install .`, `uv run`, `tox`, `nox`",
    },
    Loaded {
        names: &["Cargo.toml", "build.rs", "rust-toolchain", "rust-toolchain.toml"],
        who: "cargo, rustup",
        why: "build scripts `cargo build` runs; the toolchain rustup runs",
    },
    Loaded {
        names: &[
            "build.gradle",
            "build.gradle.kts",
            "settings.gradle",
            "settings.gradle.kts",
            "pom.xml",
        ],
        who: "Gradle, Maven, and IDEs that import them on opening",
        why: "build code that runs on import",
    },
    Loaded {
        names: &[
            "compose.yaml",
            "compose.yml",
            "docker-compose.yml",
            "docker-compose.yaml",
        ],
        who: "Docker Compose",
        why: "what `docker compose up` starts and mounts",
    },
    Loaded {
        names: &["lefthook.yml", "lefthook.yaml", "lefthook-local.yml"],
        who: "lefthook",
        why: "commands its git hooks run on every commit",
    },
    Loaded {
        names: &["*.code-workspace", "*.sublime-project"],
        who: "VS Code, Sublime Text",
        why: "workspace settings and tasks (`runOn: folderOpen`)",
    },
    Loaded {
        names: &["logseq/custom.js", "logseq/config.edn"],
        who: "Logseq",
        why: "JavaScript and settings it loads with the graph",
    },
];

/// Why a hidden name is treated as one other programs load.
pub const HIDDEN_WHY: &str =
    "a hidden file or folder: git (`.git/config`, hooks), CI (`.github/workflows`), editors and agents \
     (`.vscode`, `.claude`, `.cursor`, `.cursorrules`, `.mcp.json` …) and tools (`.envrc`, `.npmrc`, \
     `.mise.toml`) load such files as settings that run as you";

/// A name or path in the two forms tabd compares (docs/spec.md §24: one comparison, for roles and
/// children alike), each a list of folded parts:
///
/// - `cased`: width and compatibility forms folded (NFKC: `ＣＬＡＵＤＥ` is `CLAUDE`), then lower
///   case, then look-alikes (Unicode TR39 skeleton, accents and invisible characters dropped),
///   then lower case again. Every case and width variant of a name has the same `cased` form
///   (`CLAUDE.MD`, `Claude.md`, `claude.md`); folding look-alikes before case did not (an `M`
///   kept its shape, an `m` became `rn`).
/// - `shaped`: the same with look-alikes folded before case, so a capital `I` is an `l` and a
///   Cyrillic capital is the Latin letter it looks like (`agent/approvaIs` is `agent/approvals`,
///   which lower case first cannot see: it makes the `I` an `i`).
///
/// Both cut trailing dots and spaces from each part (what Windows does to a name), and drop
/// parts left empty. A path is one of a list's when either form is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Folded {
    pub cased: Vec<String>,
    pub shaped: Vec<String>,
}

/// `path` (parts separated by `/`) in its two forms.
pub fn fold(path: &str) -> Folded {
    let mut cased = Vec::new();
    let mut shaped = Vec::new();
    for part in path.split('/') {
        let (c, s) = fold_part(part);
        if !c.is_empty() || !s.is_empty() {
            cased.push(c);
            shaped.push(s);
        }
    }
    Folded { cased, shaped }
}

/// One part in its two forms, trailing dots and spaces cut.
fn fold_part(part: &str) -> (String, String) {
    let (cased, shaped) = fold_text(part);
    (cut_end(cased), cut_end(shaped))
}

/// Text in its two forms, nothing cut.
fn fold_text(text: &str) -> (String, String) {
    if text.is_ascii() {
        // The common case, on every path a run writes: the skeleton of ASCII without its tables
        // (checked against them in the tests).
        let mut cased = String::with_capacity(text.len() + 4);
        let mut shaped = String::with_capacity(text.len() + 4);
        for c in text.chars() {
            push_lower(&mut cased, ascii_prototype(c.to_ascii_lowercase()));
            push_lower(&mut shaped, ascii_prototype(c));
        }
        return (cased, shaped);
    }
    let wide: String = text.nfkc().collect();
    let cased = skeleton(&wide.to_lowercase()).to_lowercase();
    let shaped = skeleton(&wide).to_lowercase();
    (cased, shaped)
}

/// TR39 skeleton, combining marks (accents) dropped.
fn skeleton(text: &str) -> String {
    unicode_security::skeleton(text)
        .filter(|c| !is_combining_mark(*c))
        .collect()
}

/// What Windows cuts from the end of a name: dots and spaces (and any other white space, which
/// reads as a space).
fn cut_end(mut s: String) -> String {
    let kept = s.trim_end_matches(|c: char| c == '.' || c.is_whitespace()).len();
    s.truncate(kept);
    s
}

/// `proto` (a prototype of an ASCII character) in lower case onto `out`.
fn push_lower(out: &mut String, proto: &str) {
    if proto.is_ascii() {
        out.extend(proto.chars().map(|c| c.to_ascii_lowercase()));
    } else {
        out.push_str(&proto.to_lowercase());
    }
}

/// The TR39 prototype of an ASCII character (the eight that have one other than themselves).
fn ascii_prototype(c: char) -> &'static str {
    match c {
        '"' => "''",
        '%' => "°/₀",
        '0' => "O",
        '1' | 'I' | '|' => "l",
        '`' => "'",
        'm' => "rn",
        _ => ascii_str(c),
    }
}

/// `c` as a one-character string (ASCII only).
fn ascii_str(c: char) -> &'static str {
    const ASCII: &str = "\0\x01\x02\x03\x04\x05\x06\x07\x08\t\n\x0b\x0c\r\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f !\"#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrstuvwxyz{|}~\x7f";
    let i = c as usize;
    ASCII.get(i..i + 1).unwrap_or("")
}

impl Folded {
    /// This path with one more part, `name` (what a walk down a folder does).
    pub fn join(&self, name: &str) -> Folded {
        let mut out = self.clone();
        let (c, s) = fold_part(name);
        if !c.is_empty() || !s.is_empty() {
            out.cased.push(c);
            out.shaped.push(s);
        }
        out
    }

    /// True when this path is `dir` or inside it, in either form.
    pub fn within(&self, dir: &Folded) -> bool {
        self.cased.starts_with(&dir.cased) || self.shaped.starts_with(&dir.shaped)
    }

    /// True when this path is a folder that holds `dir` (and is not `dir`), in either form.
    pub fn holds(&self, dir: &Folded) -> bool {
        (dir.cased.len() > self.cased.len() && dir.cased.starts_with(&self.cased))
            || (dir.shaped.len() > self.shaped.len() && dir.shaped.starts_with(&self.shaped))
    }

    /// The path as its `cased` form spells it (for messages).
    pub fn shown(&self) -> String {
        self.cased.join("/")
    }

    /// The first part (from the root) that makes this path one other programs load, if any:
    /// its index and why. `LOADED` names that end a path match at any depth.
    pub fn loaded_at(&self) -> Option<(usize, &'static str)> {
        (0..self.cased.len()).find_map(|i| self.loaded_part(i).map(|why| (i, why)))
    }

    /// Whether part `i` (with the parts before it) names a file other programs load.
    fn loaded_part(&self, i: usize) -> Option<&'static str> {
        if self.cased[i].starts_with('.') || self.shaped[i].starts_with('.') {
            return Some(HIDDEN_WHY);
        }
        let n = normal();
        if let Some(why) = n
            .cased
            .get(&self.cased[i])
            .or_else(|| n.shaped.get(&self.shaped[i]))
        {
            return Some(why);
        }
        n.loaded
            .iter()
            .find(|(rule, _)| rule.matches(self, i))
            .map(|(_, why)| *why)
    }
}

/// One `LOADED` name, folded: the parts before its last, and its last as text before and after
/// a `*` (`after` is `None` without one).
struct Rule {
    before: Folded,
    last: (String, String),
    after: Option<(String, String)>,
}

impl Rule {
    fn new(name: &str) -> Self {
        let (dirs, last) = name.rsplit_once('/').unwrap_or(("", name));
        let before = fold(dirs);
        match last.split_once('*') {
            None => Rule {
                before,
                last: fold_part(last),
                after: None,
            },
            // The text on each side of the `*` is folded as it is: no trailing dot to cut.
            Some((head, tail)) => Rule {
                before,
                last: fold_text(head),
                after: Some(fold_text(tail)),
            },
        }
    }

    /// Whether part `i` of `path`, with the parts before it, is this name, in either form.
    fn matches(&self, path: &Folded, i: usize) -> bool {
        let form = |parts: &[String], before: &[String], last: &str, after: Option<&str>| {
            let n = before.len();
            if i < n || parts[i - n..i] != *before {
                return false;
            }
            let part = &parts[i];
            match after {
                None => part == last,
                Some(tail) => {
                    part.len() >= last.len() + tail.len() && part.starts_with(last) && part.ends_with(tail)
                }
            }
        };
        form(
            &path.cased,
            &self.before.cased,
            &self.last.0,
            self.after.as_ref().map(|a| a.0.as_str()),
        ) || form(
            &path.shaped,
            &self.before.shaped,
            &self.last.1,
            self.after.as_ref().map(|a| a.1.as_str()),
        )
    }
}

/// The lists in folded form, worked out once.
pub struct Normal {
    pub unreadable: Vec<Folded>,
    /// `LOADED` names of one part without a `*`, by each form (a walk of a large vault asks for
    /// every entry).
    cased: std::collections::HashMap<String, &'static str>,
    shaped: std::collections::HashMap<String, &'static str>,
    /// The other `LOADED` names (a `*`, or more than one part).
    loaded: Vec<(Rule, &'static str)>,
}

/// `Normal`, made on first use (constants, not state).
pub fn normal() -> &'static Normal {
    static NORMAL: std::sync::LazyLock<Normal> = std::sync::LazyLock::new(|| {
        type Names = Vec<(&'static str, &'static str)>;
        let (simple, other): (Names, Names) = LOADED
            .iter()
            .flat_map(|l| l.names.iter().map(|n| (*n, l.why)))
            .partition(|(n, _)| !n.contains(['*', '/']));
        Normal {
            unreadable: UNREADABLE.iter().map(|n| fold(n)).collect(),
            cased: simple.iter().map(|(n, why)| (fold_part(n).0, *why)).collect(),
            shaped: simple.iter().map(|(n, why)| (fold_part(n).1, *why)).collect(),
            loaded: other.iter().map(|(n, why)| (Rule::new(n), *why)).collect(),
        }
    });
    &NORMAL
}

/// tabd's own and protected places of one layout, each as placed and folded.
#[derive(Debug)]
pub struct OwnPlaces {
    /// `TABD_OWNS`: (its name in the list, where it is, folded, why).
    pub tabd_owns: Vec<Place>,
    /// `PROTECTED`, likewise.
    pub protected: Vec<Place>,
    /// The most parts one of these paths has: below that depth only `LOADED` names and hidden
    /// ones can match.
    anchored: usize,
}

/// One place of `OwnPlaces`.
#[derive(Debug)]
pub struct Place {
    /// Its name in `TABD_OWNS` or `PROTECTED` (relative to tabd's home).
    pub name: &'static str,
    /// Where it is in the vault.
    pub path: String,
    pub folded: Folded,
    pub why: &'static str,
}

impl Place {
    /// Whether this is the log folder (`[log] folder` may move the log away from it).
    pub fn is_log(&self) -> bool {
        self.name == layout::DAILY
    }
}

/// The own places of `layout`, worked out once per layout (a pure function of it, kept).
pub fn own_places(layout: &layout::Layout) -> std::sync::Arc<OwnPlaces> {
    type Memo = std::sync::Mutex<std::collections::HashMap<layout::Layout, std::sync::Arc<OwnPlaces>>>;
    static MEMO: std::sync::LazyLock<Memo> = std::sync::LazyLock::new(Default::default);
    let mut memo = MEMO.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    memo.entry(layout.clone())
        .or_insert_with(|| {
            let list = |l: &[(&'static str, &'static str)]| -> Vec<Place> {
                l.iter()
                    .map(|(name, why)| {
                        let path = placed(name, layout);
                        Place {
                            name,
                            folded: fold(&path),
                            path,
                            why,
                        }
                    })
                    .collect()
            };
            let tabd_owns = list(TABD_OWNS);
            let protected = list(PROTECTED);
            let anchored = tabd_owns
                .iter()
                .chain(&protected)
                .map(|p| p.folded.cased.len().max(p.folded.shaped.len()))
                .max()
                .unwrap_or(0);
            std::sync::Arc::new(OwnPlaces {
                tabd_owns,
                protected,
                anchored,
            })
        })
        .clone()
}

/// Why `path` is tabd's own (`TABD_OWNS`) in `layout`, if it is: the owned place, and why.
pub fn owned_by_tabd(path: &Folded, layout: &layout::Layout) -> Option<(String, &'static str)> {
    own_places(layout)
        .tabd_owns
        .iter()
        .find(|p| path.within(&p.folded))
        .map(|p| (p.path.clone(), p.why))
}

/// Why a role's inbox (wherever its `## Inbox` puts it) is kept from children.
pub const INBOX_WHY: &str =
    "a role's inbox: a note there starts a run as if you had dropped it (roles send one only through \
     trigger_role, which counts the chain)";

/// Every role's inbox (vault-relative, as `## Inbox` puts it), shared by the parts of tabd that
/// start children and kept current by the one that loads the roles: a child started later (a
/// keep-alive server started again, say) is kept from the inboxes of the roles of that moment.
#[derive(Debug, Clone, Default)]
pub struct RoleInboxes(std::sync::Arc<std::sync::RwLock<Vec<String>>>);

impl RoleInboxes {
    pub fn new<'a>(inboxes: impl IntoIterator<Item = &'a str>) -> Self {
        let this = Self::default();
        this.set(inboxes);
        this
    }

    /// The roles changed: these are their inboxes now.
    pub fn set<'a>(&self, inboxes: impl IntoIterator<Item = &'a str>) {
        let list: Vec<String> = inboxes
            .into_iter()
            .map(|i| i.trim_end_matches('/').to_string())
            .collect();
        // No panic can leave the list half written (it is swapped in one move): a poisoned lock
        // holds a whole list.
        *self.0.write().unwrap_or_else(std::sync::PoisonError::into_inner) = list;
    }

    /// The inboxes as they are now.
    pub fn get(&self) -> Vec<String> {
        self.0
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

/// Role inboxes (vault-relative), folded; the vault's root (an empty path) is none.
pub fn fold_inboxes(inboxes: &[String]) -> Vec<Folded> {
    inboxes
        .iter()
        .map(|i| fold(i))
        .filter(|f| !f.cased.is_empty() || !f.shaped.is_empty())
        .collect()
}

/// `kept_from_children` for a path whose folders a walk from the vault's root found writable:
/// only its last part can make it kept (what is above was looked at on the way down).
pub fn kept_from_children_below(
    path: &Folded,
    inboxes: &[Folded],
    layout: &layout::Layout,
) -> Option<&'static str> {
    let depth = path.cased.len().max(path.shaped.len());
    if depth <= own_places(layout).anchored || inboxes.iter().any(|dir| path.within(dir)) {
        return kept_from_children(path, inboxes, layout);
    }
    path.loaded_part(path.cased.len().checked_sub(1)?)
}

/// Why a child granted `vault = "write"` may not write `path` (vault-relative): tabd's own, a
/// protected folder, one of the roles' `inboxes` (folded: `fold_inboxes`) wherever it is, or a
/// file other programs load. The same rules as a role without `write_paths`.
pub fn kept_from_children(
    path: &Folded,
    inboxes: &[Folded],
    layout: &layout::Layout,
) -> Option<&'static str> {
    if let Some((_, why)) = owned_by_tabd(path, layout) {
        return Some(why);
    }
    if let Some(p) = own_places(layout)
        .protected
        .iter()
        .find(|p| path.within(&p.folded))
    {
        return Some(p.why);
    }
    if inboxes.iter().any(|dir| path.within(dir)) {
        return Some(INBOX_WHY);
    }
    path.loaded_at().map(|(_, why)| why)
}

#[cfg(test)]
mod tests;
