//! Hostile text for the parsers' property tests (issue 36): deep, huge and malformed YAML,
//! JSON, TOML and Markdown. Every parser tabd runs on someone's file is tested with these for
//! "no panic, no overflow, `Ok` or a sentence", each set in a few seconds of a debug build:
//! depths run past every bound (64, 80, 128, 255) up to thousands, sizes past the 256 KiB
//! frontmatter cap, and random text from each format's own punctuation.

use proptest::prelude::*;

/// A few hundred cases: enough to mix every shape and size, small enough for CI in debug.
pub fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// How deep a generated nesting goes: mostly around the bounds, sometimes far past them.
fn depth() -> impl Strategy<Value = usize> {
    prop_oneof![3 => 0usize..140, 2 => 240usize..300, 1 => 1_000usize..30_000]
}

/// YAML that nests: block and flow lists and mappings, complex keys, indentation, anchors.
pub fn deep_yaml() -> impl Strategy<Value = String> {
    (0usize..7, depth()).prop_map(|(shape, n)| match shape {
        0 => format!("x:\n{}x\n", "- ".repeat(n)),
        1 => format!("{}x\n", "- ".repeat(n)),
        2 => format!("x: {}{}\n", "[".repeat(n), "]".repeat(n)),
        3 => format!("x: {}1{}\n", "{a: ".repeat(n), "}".repeat(n)),
        4 => format!("{}x: 1\n", "? ".repeat(n)),
        5 => (0..n.min(300))
            .map(|i| format!("{}-\n", "  ".repeat(i)))
            .collect(),
        _ => {
            let mut s = String::from("a0: &a0 [x]\n");
            for i in 1..n.min(400) {
                s.push_str(&format!("a{i}: &a{i} [*a{}, *a{}]\n", i - 1, i - 1));
            }
            s
        }
    })
}

/// YAML around and past the size cap (a long value), and big under it: many keys, long lists.
/// (A 256 KiB list of short items takes about a second to parse in a debug build, 10× less in
/// release; the big-under-the-cap shapes stay at 64 KiB to keep the set fast.)
pub fn huge_yaml() -> impl Strategy<Value = String> {
    (0usize..3, 1usize..64).prop_map(|(shape, kib)| match shape {
        0 => format!("note: \"{}\"\n", "x".repeat((250 + kib) * 1024)),
        1 => (0..kib * 100).map(|i| format!("k{i}: v\n")).collect(),
        _ => format!("tags: [{}]\n", "a, ".repeat(kib * 340)),
    })
}

/// Text made of YAML's own punctuation, lines and indentation.
pub fn malformed_yaml() -> impl Strategy<Value = String> {
    "([-:?&*!|>'\"#%@,\\[\\]{} \t]|[a-z0-9]|\n {0,6}|---|\\.\\.\\.|\u{feff}|é){0,300}"
}

/// Any of the above, and a valid frontmatter with bytes of hostile text spliced in.
pub fn any_yaml() -> impl Strategy<Value = String> {
    let spliced = (malformed_yaml(), 0usize..60).prop_map(|(junk, at)| {
        let valid = "from: risk\npriority: high\nhops: 2\ntags: [a, b]\nwatch:\n  - project/a.md\n";
        let at = at.min(valid.len());
        format!("{}{junk}{}", &valid[..at], &valid[at..])
    });
    prop_oneof![3 => deep_yaml(), 1 => huge_yaml(), 3 => malformed_yaml(), 3 => spliced]
}

/// A whole file: `---`, the YAML, `---` (or not), then a body.
pub fn file_with(yaml: impl Strategy<Value = String>) -> impl Strategy<Value = String> {
    (yaml, any::<bool>(), markdown()).prop_map(|(y, closed, body)| {
        let close = if closed { "\n---\n" } else { "\n" };
        format!("---\n{y}{close}{body}")
    })
}

/// Markdown bodies: deep quotes and lists, headings, fences, random punctuation.
pub fn markdown() -> impl Strategy<Value = String> {
    let deep = (0usize..5, depth()).prop_map(|(shape, n)| match shape {
        0 => format!("# T\n## Mission\n{} x\n", ">".repeat(n)),
        1 => format!("# T\n## Tools\n{}read_file\n", "- ".repeat(n)),
        2 => format!("# T\n## Mission\n{}x{}\n", "[".repeat(n), "](y)".repeat(n)),
        3 => format!("# T\n## Context Files\n{}\n", "*".repeat(n)),
        _ => format!("# T\n{}", "## Schedule\n".repeat(n.min(2000))),
    });
    let random = "(#{1,3} |## (Mission|Tools|Schedule|Context Files|Inbox)\n|- |```|>|\\[\\[|\\]\\]|[a-z0-9 :*_`]|\n){0,200}";
    prop_oneof![deep, random]
}

/// JSON that nests arrays and objects, `n` deep.
pub fn deep_json() -> impl Strategy<Value = String> {
    (0usize..3, depth()).prop_map(|(shape, n)| match shape {
        0 => format!("{}{}", "[".repeat(n), "]".repeat(n)),
        1 => format!("{}1{}", "{\"a\":".repeat(n), "}".repeat(n)),
        _ => format!("{{\"x\": {}", "[{\"y\": ".repeat(n)),
    })
}

/// Text made of JSON's punctuation and a few of its words.
pub fn malformed_json() -> impl Strategy<Value = String> {
    "([\\[\\]{}\",:]|true|null|-?[0-9]{1,3}(\\.[0-9])?|\"[a-z]{0,3}\"|\\\\u[0-9a-f]{0,4}| |\n){0,200}"
}

/// Any JSON-ish text, and a valid record with junk spliced in.
pub fn any_json() -> impl Strategy<Value = String> {
    let spliced = (malformed_json(), 0usize..40).prop_map(|(junk, at)| {
        let valid = r#"{"version": 1, "roles": {"delivery": {"attempts": {}, "pending": []}}}"#;
        let at = at.min(valid.len());
        format!("{}{junk}{}", &valid[..at], &valid[at..])
    });
    prop_oneof![2 => deep_json(), 2 => malformed_json(), 2 => spliced]
}

/// TOML that nests (arrays, inline tables, dotted keys and headers), and TOML's punctuation.
pub fn any_toml() -> impl Strategy<Value = String> {
    let deep = (0usize..4, depth()).prop_map(|(shape, n)| match shape {
        0 => format!("[limits]\nx = {}{}\n", "[".repeat(n), "]".repeat(n)),
        1 => format!("x = {}1{}\n", "{a=".repeat(n), "}".repeat(n)),
        2 => format!("x{} = 1\n", ".a".repeat(n)),
        _ => format!("[x{}]\nb = 1\n", ".a".repeat(n)),
    });
    let random = "(\\[|\\]|\\{|\\}|=|\\.|\"|'|,|#|[a-z_]{1,8}|[0-9]{1,3}|\\[limits\\]\n|\\[mcp\\.[a-z]\\]\n| |\n){0,200}";
    prop_oneof![deep, random]
}
