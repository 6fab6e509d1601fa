//! YAML frontmatter of role files and notes, with true file line numbers.
//!
//! The block is delimited by pulldown-cmark's YAML-style metadata blocks (the same parser that
//! reads the body, so body offsets agree) and parsed by saphyr, whose nodes carry source
//! markers. gray_matter, named in the original design, strips CRLF and leading blank lines and
//! reports type errors without a line, so it cannot give the lines this module promises
//! (see docs/design-notes.md).
//!
//! Every file tabd reads is someone's input, so the block is bounded before a tree is built:
//! at most [`MAX_BYTES`], and at most [`MAX_DEPTH`] lists and mappings inside each other
//! (counted on saphyr's event stream, aliases included), so nothing after the parser — the
//! tree's keys, the conversion to JSON, dropping the values — recurses deeper than that.

use std::collections::HashMap;

use pulldown_cmark::{Event, MetadataBlockKind, Options, Parser, Tag};
use saphyr::{MarkedYamlOwned, ScalarOwned, YamlDataOwned, YamlLoader};
use saphyr_parser::{Event as YamlEvent, Span, SpannedEventReceiver};
use serde_json::Value;

use crate::base::text::LineIndex;

/// Most bytes of frontmatter tabd parses (the YAML between the `---` lines).
pub const MAX_BYTES: usize = 256 * 1024;

/// Most lists and mappings inside each other in frontmatter (`a: {b: [c]}` is 3).
pub const MAX_DEPTH: usize = 64;

/// A problem with a file's frontmatter, at a 1-based file line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct FrontmatterError {
    pub line: usize,
    pub message: String,
}

/// One top-level `key: value` of a frontmatter block.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    pub key: String,
    /// 1-based file line of the key.
    pub line: usize,
    pub value: Value,
}

/// A parsed frontmatter block.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Frontmatter {
    pub entries: Vec<Field>,
}

impl Frontmatter {
    pub fn get(&self, key: &str) -> Option<&Field> {
        self.entries.iter().find(|e| e.key == key)
    }

    /// The string value of `key`, if it is a string.
    pub fn get_str(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(|e| e.value.as_str())
    }

    /// The whole block as a JSON object (for run records and prompts).
    pub fn to_json(&self) -> Value {
        Value::Object(
            self.entries
                .iter()
                .map(|e| (e.key.clone(), e.value.clone()))
                .collect(),
        )
    }
}

/// A file split into its frontmatter and body.
#[derive(Debug, Clone, PartialEq)]
pub struct Split {
    pub frontmatter: Option<Frontmatter>,
    /// Byte offset in the original text where the body starts.
    pub body_offset: usize,
}

/// Splits `text` into frontmatter and body and parses the frontmatter.
pub fn split(text: &str) -> Result<Split, FrontmatterError> {
    let bom = if text.starts_with('\u{feff}') { 3 } else { 0 };
    let src = &text[bom..];
    let Some(first_line) = src.lines().next() else {
        return Ok(Split {
            frontmatter: None,
            body_offset: bom,
        });
    };
    if first_line.trim_end() != "---" {
        return Ok(Split {
            frontmatter: None,
            body_offset: bom,
        });
    }
    let lines = LineIndex::new(text);
    let (yaml_range, body_offset) = locate(src).ok_or_else(|| FrontmatterError {
        line: 1,
        message: "the frontmatter opened with `---` on line 1 is never closed: add a line \
                  `---` after the last setting, or remove line 1"
            .into(),
    })?;
    let yaml = &src[yaml_range.clone()];
    let first_yaml_line = lines.line_of(bom + yaml_range.start);
    let frontmatter = parse_yaml(yaml, first_yaml_line)?;
    Ok(Split {
        frontmatter: Some(frontmatter),
        body_offset: bom + body_offset,
    })
}

/// Where the body of `text` starts when it opens with a frontmatter block, whether or not the
/// block can be read (too deep, too large, not YAML): the byte after its closing line. `None`: no
/// block, or one never closed. For keeping the text of a block that `split` refuses.
pub fn block_end(text: &str) -> Option<usize> {
    let bom = if text.starts_with('\u{feff}') { 3 } else { 0 };
    let src = &text[bom..];
    if src.lines().next()?.trim_end() != "---" {
        return None;
    }
    locate(src).map(|(_, body)| bom + body)
}

/// A block of `key: value` lines closed by `---` whose opening `---` is missing (deleted by
/// hand, say): what it would have been had the file opened with `---`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Headless {
    /// Each top-level key, with its 1-based file line.
    pub keys: Vec<(String, usize)>,
    /// The 1-based file line of the `---` that closes it.
    pub closing_line: usize,
    /// The byte offset just past the closing line (where the body would start).
    pub end: usize,
}

impl Headless {
    /// The 1-based file line of its first key: where the opening `---` belongs above.
    pub fn first_line(&self) -> usize {
        self.keys.first().map_or(self.closing_line, |(_, line)| *line)
    }
}

/// The settings block `text` opens with when its opening `---` is missing: the lines before its
/// first `---` line are only `key: value` lines (a key is one word), the indented or `- ` lines
/// of a key's value, YAML comments and blank lines — at least one key. `None` for a file that
/// opens with `---`, and for one whose opening text is anything else (prose before a thematic
/// break is not settings). Markdown reads such a block as a heading (`---` underlines the text
/// above it), so the caller decides whether the keys say it is a lost frontmatter.
pub fn headless_block(text: &str) -> Option<Headless> {
    let bom = if text.starts_with('\u{feff}') { 3 } else { 0 };
    let src = &text[bom..];
    if src.lines().next()?.trim_end() == "---" {
        return None;
    }
    let mut keys = Vec::new();
    let mut offset = bom;
    for (i, line) in src.split_inclusive('\n').enumerate() {
        offset += line.len();
        let t = line.trim_end();
        let file_line = i + 1;
        if t == "---" {
            return (!keys.is_empty()).then_some(Headless {
                keys,
                closing_line: file_line,
                end: offset,
            });
        }
        let continues_a_value = t.starts_with([' ', '\t']) || t.starts_with("- ") || t == "-";
        if t.is_empty() || t == "#" || t.starts_with("# ") || (continues_a_value && !keys.is_empty()) {
            continue;
        }
        keys.push((setting_key(t)?.to_string(), file_line));
    }
    None
}

/// The key of a `key: value` line whose key is one word (letters, digits, `_`, `-`).
fn setting_key(line: &str) -> Option<&str> {
    let (key, rest) = line.split_once(':')?;
    let word = key.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    (word && (rest.is_empty() || rest.starts_with([' ', '\t']))).then_some(key)
}

/// The YAML's range and the body's offset of the block `src` opens with (its first line is
/// `---`); `None` when no line closes it.
fn locate(src: &str) -> Option<(std::ops::Range<usize>, usize)> {
    match metadata_block(src) {
        Some(block) => {
            let yaml = yaml_range_in_block(src, block.clone());
            // The block ends at its closing delimiter; the body starts after that line's break.
            let rest = &src[block.end..];
            let eol = rest.find('\n').map_or(rest.len(), |i| i + 1);
            Some((yaml, block.end + eol))
        }
        None => manual_block(src),
    }
}

/// The byte range of a YAML metadata block at the very start of `src`, as pulldown-cmark sees it.
fn metadata_block(src: &str) -> Option<std::ops::Range<usize>> {
    let mut events = Parser::new_ext(src, Options::ENABLE_YAML_STYLE_METADATA_BLOCKS).into_offset_iter();
    match events.next()? {
        (Event::Start(Tag::MetadataBlock(MetadataBlockKind::YamlStyle)), range) if range.start == 0 => {
            Some(range)
        }
        _ => None,
    }
}

/// Within a metadata block, the range between the opening line and the closing delimiter.
fn yaml_range_in_block(src: &str, block: std::ops::Range<usize>) -> std::ops::Range<usize> {
    let text = &src[block.clone()];
    let open_end = text.find('\n').map_or(text.len(), |i| i + 1);
    let mut close_start = text.len();
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let t = line.trim_end();
        if offset >= open_end && (t == "---" || t == "...") {
            close_start = offset;
        }
        offset += line.len();
    }
    block.start + open_end..block.start + close_start.max(open_end)
}

/// Blocks pulldown-cmark declines (empty, or starting with a blank line) but Obsidian accepts.
/// Returns the YAML range and the body offset, or `None` when no closing line exists.
fn manual_block(src: &str) -> Option<(std::ops::Range<usize>, usize)> {
    let mut offset = 0;
    let mut open_end = None;
    for line in src.split_inclusive('\n') {
        let end = offset + line.len();
        match open_end {
            None => open_end = Some(end),
            Some(start) => {
                let t = line.trim_end();
                if t == "---" || t == "..." {
                    return Some((start..offset, end));
                }
            }
        }
        offset = end;
    }
    None
}

/// What to do about YAML's most common complaints, in a person's words.
fn yaml_hint(info: &str) -> &'static str {
    if info.contains("mapping values are not allowed") {
        " — a value that holds `: ` must be quoted, like `title: \"Status: weekly\"`"
    } else if info.contains("did not find expected key") || info.contains("block end") {
        " — check the indentation: list items and nested keys line up under their parent"
    } else if info.contains("found character that cannot start any token") {
        " — a value starting with `@`, `` ` `` or `%` must be quoted"
    } else {
        ""
    }
}

fn parse_yaml(yaml: &str, first_line: usize) -> Result<Frontmatter, FrontmatterError> {
    let file_line = |yaml_line: usize| first_line + yaml_line.saturating_sub(1);
    if yaml.len() > MAX_BYTES {
        return Err(FrontmatterError {
            line: first_line.saturating_sub(1).max(1),
            message: format!(
                "the frontmatter is {} bytes; tabd reads at most {} KiB of it — move long text \
                 below the closing `---`",
                yaml.len(),
                MAX_BYTES / 1024
            ),
        });
    }
    let docs = load(yaml).map_err(|e| FrontmatterError {
        line: file_line(e.line),
        message: e.message,
    })?;
    let Some(doc) = docs.into_iter().next() else {
        return Ok(Frontmatter::default());
    };
    match doc.data {
        YamlDataOwned::Mapping(map) => {
            let mut entries: Vec<Field> = Vec::with_capacity(map.len());
            let at_line = |e: LoadError| FrontmatterError {
                line: file_line(e.line),
                message: e.message,
            };
            for (key, value) in map {
                entries.push(Field {
                    line: file_line(key.span.start.line()),
                    key: key_of(&key).map_err(at_line)?,
                    value: to_json(&value).map_err(at_line)?,
                });
            }
            Ok(Frontmatter { entries })
        }
        YamlDataOwned::Value(ScalarOwned::Null) => Ok(Frontmatter::default()),
        _ => Err(FrontmatterError {
            line: file_line(doc.span.start.line()),
            message: "the frontmatter must be `key: value` lines".into(),
        }),
    }
}

/// Why the YAML could not be loaded, at a line of the YAML.
struct LoadError {
    line: usize,
    message: String,
}

/// The YAML's documents, loaded by saphyr's own loader from saphyr's own parser, with the
/// nesting counted on the way: the first event that would make the tree deeper than
/// [`MAX_DEPTH`] stops the load, before any deep tree exists (saphyr bounds flow nesting only,
/// at 255, and its tree's hashing, comparing and dropping recurse).
fn load(yaml: &str) -> Result<Vec<MarkedYamlOwned>, LoadError> {
    let mut guard = DepthGuard::default();
    for event in saphyr_parser::Parser::new_from_str(yaml) {
        let (event, span) = event.map_err(|e| LoadError {
            line: e.marker().line(),
            // saphyr's scanner reads flow collections ahead of the events: past its own bound
            // (255) it stops before the guard has seen the 65th level. Too deep, all the same.
            message: if e.info().contains("recursion limit exceeded") {
                too_deep()
            } else {
                format!(
                    "the frontmatter is not valid YAML: {}{}",
                    e.info(),
                    yaml_hint(e.info())
                )
            },
        })?;
        if let Some(line) = guard.too_deep(&event, span) {
            return Err(LoadError {
                line,
                message: too_deep(),
            });
        }
        guard.loader.on_event(event, span);
    }
    if let Some(e) = guard.loader.error() {
        return Err(LoadError {
            line: e.marker().line(),
            message: format!("the frontmatter is not valid YAML: {}", e.info()),
        });
    }
    Ok(guard.loader.into_documents())
}

fn too_deep() -> String {
    format!(
        "the frontmatter nests lists and mappings more than {MAX_DEPTH} deep; tabd reads at most \
         {MAX_DEPTH} levels — flatten it"
    )
}

/// Counts how deep the tree being loaded is: the collections open now, and for each the height
/// of what it holds so far; an alias counts as deep as the node its anchor names (saphyr copies
/// that node in), so anchors cannot stack depth that the events do not show.
#[derive(Default)]
struct DepthGuard<'input> {
    loader: YamlLoader<'input, MarkedYamlOwned>,
    /// For each open collection: its height so far (1: itself) and its anchor id (0: none).
    open: Vec<(usize, usize)>,
    /// The height of the node each anchor id names.
    anchors: HashMap<usize, usize>,
}

impl DepthGuard<'_> {
    /// The YAML line at which `event` makes the tree deeper than [`MAX_DEPTH`], if it does.
    fn too_deep(&mut self, event: &YamlEvent<'_>, span: Span) -> Option<usize> {
        let height = match event {
            YamlEvent::SequenceStart(anchor, _) | YamlEvent::MappingStart(anchor, _) => {
                self.open.push((1, *anchor));
                return (self.open.len() > MAX_DEPTH).then(|| span.start.line());
            }
            YamlEvent::SequenceEnd | YamlEvent::MappingEnd => {
                let (height, anchor) = self.open.pop()?;
                self.name(anchor, height);
                height
            }
            YamlEvent::Scalar(_, _, anchor, _) => {
                self.name(*anchor, 0);
                0
            }
            YamlEvent::Alias(id) => self.anchors.get(id).copied().unwrap_or(0),
            _ => return None,
        };
        if self.open.len() + height > MAX_DEPTH {
            return Some(span.start.line());
        }
        if let Some((parent, _)) = self.open.last_mut() {
            *parent = (*parent).max(height + 1);
        }
        None
    }

    fn name(&mut self, anchor: usize, height: usize) {
        if anchor > 0 {
            self.anchors.insert(anchor, height);
        }
    }
}

/// A node as JSON. Recursive: the loader's [`DepthGuard`] keeps every tree within [`MAX_DEPTH`].
fn to_json(node: &MarkedYamlOwned) -> Result<Value, LoadError> {
    Ok(match &node.data {
        YamlDataOwned::Value(s) => match s {
            ScalarOwned::Null => Value::Null,
            ScalarOwned::Boolean(b) => Value::Bool(*b),
            ScalarOwned::Integer(i) => Value::from(*i),
            ScalarOwned::FloatingPoint(f) => serde_json::Number::from_f64(f.into_inner())
                .map_or_else(|| Value::String(f.to_string()), Value::Number),
            ScalarOwned::String(s) => Value::String(s.clone()),
        },
        YamlDataOwned::Representation(s, _, _) => Value::String(s.clone()),
        YamlDataOwned::Sequence(items) => Value::Array(items.iter().map(to_json).collect::<Result<_, _>>()?),
        YamlDataOwned::Mapping(map) => Value::Object(
            map.iter()
                .map(|(k, v)| Ok((key_of(k)?, to_json(v)?)))
                .collect::<Result<_, LoadError>>()?,
        ),
        YamlDataOwned::Tagged(_, inner) => to_json(inner)?,
        YamlDataOwned::Alias(_) | YamlDataOwned::BadValue => Value::Null,
    })
}

/// A mapping key as text: a word, a number, `true`. A list or mapping as a key (YAML's `? `) is
/// refused: JSON keys are text, and writing one as JSON text inside the next escaped each
/// level's quotes again — a 40-byte `? ? ? … x: 1` grew to gigabytes and stalled the parse.
fn key_of(node: &MarkedYamlOwned) -> Result<String, LoadError> {
    match &node.data {
        YamlDataOwned::Sequence(_) | YamlDataOwned::Mapping(_) => Err(LoadError {
            line: node.span.start.line(),
            message: "a key of the frontmatter is a list or a mapping (YAML's `? `); keys are \
                      words or text, like `tags:`"
                .into(),
        }),
        YamlDataOwned::Tagged(_, inner) => key_of(inner),
        _ => Ok(match to_json(node)? {
            Value::String(s) => s,
            other => other.to_string(),
        }),
    }
}

/// Writes `fields` as a frontmatter block (`---`, YAML, `---`, newline) with a real YAML
/// emitter, so any value — a colon, a quote, a newline, `yes` — round-trips through `split`.
pub fn render(fields: &[(&str, Value)]) -> String {
    use saphyr::{Mapping, Scalar, Yaml, YamlEmitter};
    use std::borrow::Cow;
    fn yaml(v: &Value) -> Yaml<'static> {
        match v {
            Value::Null => Yaml::Value(Scalar::Null),
            Value::Bool(b) => Yaml::Value(Scalar::Boolean(*b)),
            Value::Number(n) => match (n.as_i64(), n.as_f64()) {
                (Some(i), _) => Yaml::Value(Scalar::Integer(i)),
                (None, Some(f)) => Yaml::Value(Scalar::FloatingPoint(f.into())),
                _ => Yaml::Value(Scalar::String(Cow::Owned(n.to_string()))),
            },
            Value::String(s) => Yaml::Value(Scalar::String(Cow::Owned(s.clone()))),
            Value::Array(items) => Yaml::Sequence(items.iter().map(yaml).collect()),
            Value::Object(map) => {
                let mut m = Mapping::new();
                for (k, v) in map {
                    m.insert(Yaml::Value(Scalar::String(Cow::Owned(k.clone()))), yaml(v));
                }
                Yaml::Mapping(m)
            }
        }
    }
    let mut map = Mapping::new();
    for (k, v) in fields {
        map.insert(Yaml::Value(Scalar::String(Cow::Owned((*k).to_string()))), yaml(v));
    }
    let mut out = String::new();
    let mut emitter = YamlEmitter::new(&mut out);
    // An empty mapping has nothing to emit; the block is then just the delimiters.
    if !fields.is_empty() && emitter.dump(&Yaml::Mapping(map)).is_err() {
        out.clear();
    }
    // The emitter starts with its own `---` line; keep exactly one opening delimiter.
    let body = out.strip_prefix("---").unwrap_or(&out).trim_start_matches('\n');
    format!("---\n{}\n---\n", body.trim_end_matches('\n')).replace("---\n\n---\n", "---\n---\n")
}

#[cfg(test)]
pub mod hostile;

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    proptest! {
        #![proptest_config(hostile::config(96))]
        /// Deep, huge and malformed frontmatter: read (every value within the bound), or refused
        /// with a line inside the file and a sentence; never a panic or an overflow.
        #[test]
        fn any_frontmatter_is_read_within_the_bound_or_refused_with_a_line(
            text in hostile::file_with(hostile::any_yaml())
        ) {
            let lines = text.lines().count().max(1);
            match split(&text) {
                Ok(s) => {
                    prop_assert!(s.body_offset <= text.len() && text.is_char_boundary(s.body_offset));
                    for e in s.frontmatter.iter().flat_map(|f| &f.entries) {
                        prop_assert!(crate::formats::json::depth(&e.value) < MAX_DEPTH, "{}", e.key);
                        prop_assert!(e.line >= 2 && e.line <= lines);
                    }
                }
                Err(e) => {
                    prop_assert!(e.line >= 1 && e.line <= lines, "line {} of {lines}: {e}", e.line);
                    prop_assert!(e.message.len() > 20, "a sentence: {e}");
                }
            }
        }
    }

    fn fm(text: &str) -> Frontmatter {
        split(text).unwrap().frontmatter.unwrap()
    }

    #[test]
    fn keys_carry_their_file_lines() {
        let text = "---\nmodel: m\n\nmax_tool_calls: 30\n---\n# Title\n";
        let f = fm(text);
        assert_eq!(f.entries[0].key, "model");
        assert_eq!(f.entries[0].line, 2);
        assert_eq!(f.entries[1].line, 4);
        assert_eq!(f.entries[1].value, json!(30));
        let s = split(text).unwrap();
        assert_eq!(&text[s.body_offset..], "# Title\n");
    }

    #[test]
    fn crlf_files_keep_lines_and_body() {
        let text = "---\r\nmodel: m\r\nenabled: false\r\n---\r\n# T\r\n";
        let s = split(text).unwrap();
        let f = s.frontmatter.unwrap();
        assert_eq!(f.get("enabled").unwrap().line, 3);
        assert_eq!(f.get("enabled").unwrap().value, json!(false));
        assert_eq!(f.get_str("model"), Some("m"));
        assert_eq!(&text[s.body_offset..], "# T\r\n");
    }

    #[test]
    fn unclosed_block_is_an_error_on_line_1() {
        let err = split("---\nmodel: m\n# Title\n").unwrap_err();
        assert_eq!(err.line, 1);
        assert!(err.message.contains("never closed"), "{err}");
    }

    #[test]
    fn empty_and_blank_led_blocks_are_accepted() {
        let s = split("---\n---\nbody").unwrap();
        assert_eq!(s.frontmatter.unwrap().entries.len(), 0);
        let f = fm("---\n\nmodel: x\n---\nbody");
        assert_eq!(f.get("model").unwrap().line, 3);
    }

    #[test]
    fn yaml_syntax_error_reports_file_line() {
        let err = split("---\nmodel: m\nlist: [a, b\n---\n").unwrap_err();
        assert_eq!(
            err.line, 4,
            "found where the unclosed list should have ended: {err:?}"
        );
        assert!(err.message.contains("not valid YAML"));
    }

    #[test]
    fn non_mapping_frontmatter_is_an_error() {
        let err = split("---\n- a\n- b\n---\n").unwrap_err();
        assert_eq!(err.line, 2);
    }

    #[test]
    fn no_frontmatter_and_bom() {
        let s = split("# Just a note\n").unwrap();
        assert!(s.frontmatter.is_none());
        assert_eq!(s.body_offset, 0);
        let text = "\u{feff}---\nfrom: risk\n---\nhi";
        let s = split(text).unwrap();
        assert_eq!(s.frontmatter.unwrap().get("from").unwrap().line, 2);
        assert_eq!(&text[s.body_offset..], "hi");
    }

    /// The body of a note whose block cannot be read still starts where `split` would start it.
    #[test]
    fn a_blocks_end_is_found_whether_or_not_it_reads() {
        let deep = format!(
            "---\nstatus: x\ndeep: {}{}\n---\n# Body\n",
            "[".repeat(70),
            "]".repeat(70)
        );
        let broken = "---\nstatus: [unclosed\n---\r\n# Body\n";
        let bom = "\u{feff}---\nstatus: ok\n---\n# Body\n";
        for text in [deep.as_str(), broken, bom] {
            let end = block_end(text).unwrap();
            assert_eq!(&text[end..], "# Body\n", "{text:?}");
        }
        assert!(split(&deep).is_err() && split(broken).is_err());
        assert_eq!(split(bom).unwrap().body_offset, block_end(bom).unwrap());
        for none in ["# No block\n---\n", "---\nnever: closed\n", ""] {
            assert_eq!(block_end(none), None, "{none:?}");
        }
    }

    #[test]
    fn nested_values_become_json() {
        let f = fm("---\ncan_trigger: [risk, comms]\nwatch:\n  - project/a.md\nx: 1.5\n---\n");
        assert_eq!(f.get("can_trigger").unwrap().value, json!(["risk", "comms"]));
        assert_eq!(f.get("watch").unwrap().value, json!(["project/a.md"]));
        assert_eq!(f.get("x").unwrap().value, json!(1.5));
    }

    /// Issue 48: a role file whose opening `---` was deleted — its settings are found with
    /// their lines; prose, a heading or a list before a thematic break is not settings.
    #[test]
    fn a_block_without_its_opening_line_is_found_and_prose_before_a_break_is_not() {
        let text =
            "extends: _base\n# inherited\ncan_trigger:\n  - delivery\n- comms\n\nmodel: m\n---\n# Risk\n";
        let h = headless_block(text).unwrap();
        let keys: Vec<(&str, usize)> = h.keys.iter().map(|(k, l)| (k.as_str(), *l)).collect();
        assert_eq!(keys, [("extends", 1), ("can_trigger", 3), ("model", 7)]);
        assert_eq!(h.closing_line, 8);
        assert_eq!(&text[h.end..], "# Risk\n");
        let bom = "\u{feff}\r\nmodel: m\r\n---\r\nbody";
        assert_eq!(headless_block(bom).unwrap().closing_line, 3);
        for not_settings in [
            "---\nmodel: m\n---\n",
            "Some intro text.\n\n---\n\nmodel: m\n",
            "# Title\n\nA paragraph.\n---\n",
            "- a list\nmodel: m\n---\n",
            "model: m\nand then prose\n---\n",
            "See: https://example.com\n",
            "http://example.com: x\n---\n",
            "two words: x\n---\n",
            "model: m\n",
            "\n\n---\n",
            "",
        ] {
            assert_eq!(headless_block(not_settings), None, "{not_settings:?}");
        }
    }

    #[test]
    fn thematic_break_later_is_not_frontmatter() {
        let s = split("# T\n\n---\n\ntext").unwrap();
        assert!(s.frontmatter.is_none());
    }

    #[test]
    fn render_round_trips_hostile_values() {
        let fields = [
            ("from", Value::String("a: b".into())),
            (
                "note",
                Value::String("line one\nline two: \"quoted\" # not a comment".into()),
            ),
            ("yes_word", Value::String("yes".into())),
            ("hops", Value::from(2)),
            ("tags", serde_json::json!(["x", "y: z"])),
        ];
        let text = format!("{}body\n", render(&fields));
        let split = split(&text).unwrap();
        let f = split.frontmatter.unwrap();
        for (k, v) in &fields {
            assert_eq!(&f.get(k).unwrap().value, v, "{k} in\n{text}");
        }
        assert_eq!(&text[split.body_offset..], "body\n");
    }

    /// Runs `f` on a thread with a small stack: anything that recursed per level of nesting
    /// would overflow it long before the inputs below are read.
    fn on_small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(f)
            .unwrap()
            .join()
            .unwrap()
    }

    #[test]
    fn deep_block_and_flow_nesting_is_an_error_with_its_line_not_a_stack_overflow() {
        let deep = |n: usize| {
            [
                format!("---\nfrom: me\nx:\n{}x\n---\nbody\n", "- ".repeat(n)),
                // A list as the whole block (after `from: me` it was not valid YAML at any depth).
                format!("---\n{}x\n---\nbody\n", "- ".repeat(n)),
                format!("---\nfrom: me\nx: {}{}\n---\n", "[".repeat(n), "]".repeat(n)),
                format!("---\nfrom: me\nx: {}1{}\n---\n", "{a: ".repeat(n), "}".repeat(n)),
                format!("---\nfrom: me\n{}x: 1\n---\n", "? ".repeat(n)),
                format!(
                    "---\nfrom: me\nx:\n{}\n---\n",
                    (0..n.min(400))
                        .map(|i| format!("{}-\n", "  ".repeat(i)))
                        .collect::<String>()
                ),
            ]
        };
        for n in [MAX_DEPTH + 1, 300, 20_000] {
            for text in deep(n) {
                let err = on_small_stack(move || split(&text).unwrap_err());
                // Every form is refused for its depth (issue 37: `|| contains("not valid YAML")` let
                // a form that was never deep, and saphyr's "recursion limit exceeded", pass).
                assert!(err.message.contains("more than 64 deep"), "{err}");
                assert!(err.line >= 2, "a line inside the block: {err}");
            }
        }
        let err = split(&deep(20_000)[0]).unwrap_err();
        assert_eq!(err.line, 4, "the line where it got too deep: {err}");
        assert!(err.message.contains("more than 64 deep"), "{err}");
        // The deepest nesting allowed is read as it was written.
        let f = fm(&format!(
            "---\nx: {}1{}\n---\n",
            "[".repeat(MAX_DEPTH - 1),
            "]".repeat(MAX_DEPTH - 1)
        ));
        let mut v = &f.get("x").unwrap().value;
        for _ in 0..MAX_DEPTH - 1 {
            v = &v[0];
        }
        assert_eq!(v, &json!(1));
    }

    #[test]
    fn a_list_or_mapping_as_a_key_is_refused_at_once() {
        // Found by the property test: each level's key was written as JSON text into the next,
        // escaping it again, so 27 `? ` took a minute and 40 would never end.
        for n in [1, 27, 40, MAX_DEPTH - 1] {
            let err = split(&format!("---\nfrom: me\n{}x: 1\n---\n", "? ".repeat(n))).unwrap_err();
            assert_eq!(err.line, 3, "{err}");
            assert!(
                err.message
                    .contains("a key of the frontmatter is a list or a mapping"),
                "{err}"
            );
        }
        let err = split("---\nok: 1\nnested:\n  ? [a, b]\n  : 1\n---\n").unwrap_err();
        assert_eq!(err.line, 4, "{err}");
        assert_eq!(
            fm("---\n1: a\ntrue: b\n---\n").get("true").unwrap().value,
            json!("b")
        );
    }

    #[test]
    fn aliases_count_as_deep_as_what_they_copy() {
        // Each anchor holds the one before it: the events stay two deep, the tree grows by one.
        let mut text = String::from("---\na0: &a0 [x]\n");
        for i in 1..200 {
            text.push_str(&format!("a{i}: &a{i} [*a{}]\n", i - 1));
        }
        text.push_str("---\n");
        let err = on_small_stack(move || split(&text).unwrap_err());
        assert!(err.message.contains("more than 64 deep"), "{err}");
        assert_eq!(
            err.line,
            2 + MAX_DEPTH - 1,
            "the alias that crossed the line: {err}"
        );
        let f = fm("---\na: &a [1, [2]]\nb: [*a, *a]\n---\n");
        assert_eq!(f.get("b").unwrap().value, json!([[1, [2]], [1, [2]]]));
    }

    #[test]
    fn frontmatter_over_the_size_limit_is_an_error_on_its_first_line() {
        let text = format!("---\nnote: \"{}\"\n---\nbody\n", "x".repeat(MAX_BYTES));
        let err = split(&text).unwrap_err();
        assert_eq!(err.line, 1);
        assert!(err.message.contains("at most 256 KiB"), "{err}");
        let fits = format!("---\nnote: \"{}\"\n---\nbody\n", "x".repeat(MAX_BYTES - 20));
        assert!(split(&fits).is_ok());
    }

    #[test]
    fn a_colon_in_a_value_gets_a_hint_to_quote_it() {
        let e = split("---\ntitle: Status: weekly\n---\nbody\n").unwrap_err();
        assert!(e.message.contains("must be quoted"), "{}", e.message);
        assert_eq!(e.line, 2);
    }
}
