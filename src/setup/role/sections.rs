//! A role file's Markdown body → its H1 title and H2 sections, with line numbers.
//!
//! pulldown-cmark finds headings and list items (so code blocks, setext headings and every
//! list style are handled as Markdown defines them); the text of each item and section is taken
//! from the source by offset so nothing the person wrote is reformatted.

use pulldown_cmark::{Event, HeadingLevel, Options, Parser, Tag, TagEnd};

use crate::base::text::{strip_list_marker, LineIndex};

/// The sections tabd understands. Headings are matched case-insensitively, trailing `:` ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SectionKind {
    Mission,
    Goals,
    Context,
    Tools,
    Schedule,
    Inbox,
    Preferences,
    Rules,
    /// `## Skills`: the Agent Skills the role may use (docs/spec.md §25).
    Skills,
    /// Any other heading: kept and passed to the model under its own name.
    Other,
}

impl SectionKind {
    pub fn from_heading(heading: &str) -> Self {
        let h = heading.trim().trim_end_matches(':').trim().to_lowercase();
        match h.as_str() {
            "mission" => Self::Mission,
            "goals" => Self::Goals,
            "context files" | "context" => Self::Context,
            "tools" => Self::Tools,
            "schedule" => Self::Schedule,
            "inbox" => Self::Inbox,
            "user preferences" | "preferences" => Self::Preferences,
            "rules" => Self::Rules,
            "skills" => Self::Skills,
            _ => Self::Other,
        }
    }
}

/// A top-level list item of a section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// The item's text without its marker; continuation lines joined with `\n`.
    pub text: String,
    /// 1-based file line of the marker.
    pub line: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    pub heading: String,
    pub kind: SectionKind,
    /// 1-based file line of the heading.
    pub line: usize,
    /// The section's Markdown, trimmed.
    pub body: String,
    /// 1-based file line where the body starts.
    pub body_line: usize,
    pub items: Vec<Item>,
}

impl Section {
    /// The section's content as lines: its list items if it has any, else its non-empty lines.
    pub fn lines(&self) -> Vec<Item> {
        if !self.items.is_empty() {
            return self.items.clone();
        }
        self.body
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(i, l)| Item {
                text: l.trim().to_string(),
                line: self.body_line + i,
            })
            .collect()
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoleBody {
    pub title: Option<String>,
    pub title_line: usize,
    pub sections: Vec<Section>,
}

/// Parses the whole file text (frontmatter included: pulldown-cmark skips it as a metadata block).
pub fn parse(text: &str) -> RoleBody {
    let lines = LineIndex::new(text);
    let mut body = RoleBody::default();
    let opts = Options::ENABLE_YAML_STYLE_METADATA_BLOCKS;

    let mut heading: Option<(HeadingLevel, usize, usize, String)> = None; // level, start, end, text
    let mut list_depth = 0usize;
    let mut item_start: Option<usize> = None;
    // Section being built: index into body.sections and where its body starts.
    let mut open: Option<(usize, usize)> = None;
    let mut in_metadata = false;

    for (event, range) in Parser::new_ext(text, opts).into_offset_iter() {
        match event {
            Event::Start(Tag::MetadataBlock(_)) => in_metadata = true,
            Event::End(TagEnd::MetadataBlock(_)) => in_metadata = false,
            _ if in_metadata => {}
            Event::Start(Tag::Heading { level, .. }) => {
                heading = Some((level, range.start, range.end, String::new()));
            }
            Event::Text(t) | Event::Code(t) if heading.is_some() => {
                if let Some((_, _, _, h)) = heading.as_mut() {
                    h.push_str(&t);
                }
            }
            Event::End(TagEnd::Heading(_)) => {
                let Some((level, start, end, title)) = heading.take() else {
                    continue;
                };
                if level > HeadingLevel::H2 {
                    continue;
                }
                if let Some((idx, body_start)) = open.take() {
                    finish(&mut body.sections[idx], text, body_start, start, &lines);
                }
                if level == HeadingLevel::H1 {
                    if body.title.is_none() {
                        body.title = Some(title.trim().to_string());
                        body.title_line = lines.line_of(start);
                    }
                } else {
                    body.sections.push(Section {
                        kind: SectionKind::from_heading(&title),
                        heading: title.trim().trim_end_matches(':').trim().to_string(),
                        line: lines.line_of(start),
                        body: String::new(),
                        body_line: 0,
                        items: Vec::new(),
                    });
                    open = Some((body.sections.len() - 1, end));
                }
            }
            Event::Start(Tag::List(_)) => list_depth += 1,
            Event::End(TagEnd::List(_)) => list_depth = list_depth.saturating_sub(1),
            Event::Start(Tag::Item) if list_depth == 1 => item_start = Some(range.start),
            Event::End(TagEnd::Item) if list_depth == 1 => {
                if let (Some(start), Some((idx, _))) = (item_start.take(), open) {
                    let raw = &text[start..range.end];
                    body.sections[idx].items.push(Item {
                        text: item_text(raw),
                        line: lines.line_of(start),
                    });
                }
            }
            _ => {}
        }
    }
    if let Some((idx, body_start)) = open {
        finish(&mut body.sections[idx], text, body_start, text.len(), &lines);
    }
    body
}

fn finish(section: &mut Section, text: &str, start: usize, end: usize, lines: &LineIndex) {
    let raw = &text[start.min(end)..end];
    let leading = raw.len() - raw.trim_start().len();
    section.body = raw.trim().replace("\r\n", "\n");
    section.body_line = lines.line_of(start + leading);
}

fn item_text(raw: &str) -> String {
    let mut out = Vec::new();
    for (i, line) in raw.lines().enumerate() {
        let line = line.trim_end_matches('\r');
        if i == 0 {
            out.push(strip_list_marker(line).unwrap_or(line.trim()).trim().to_string());
        } else if !line.trim().is_empty() {
            out.push(line.trim().to_string());
        }
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROLE: &str = "---\nmodel: x\n---\n# Delivery Manager\n\n## Mission\nKeep it on time.\nSecond line.\n\n\
## goals:\n- one\n* two\n+ three\n1. four\n2) five\n\n## Context Files\n- project/scope.md\n- [[team]]\n\n\
## context\n- extra.md\n\n## Tools\n- read_file\n\n## Schedule\n9am and 5pm, weekdays\n\n## Inbox\nagent/inbox/delivery/\n\n\
## User Preferences\nShort notes.\n\n### Detail\nMore.\n\n## Preferences\nAlias.\n\n## Rules\n- never email\n\n## Glossary\nTPM: me\n";

    #[test]
    fn every_section_and_alias() {
        let body = parse(ROLE);
        assert_eq!(body.title.as_deref(), Some("Delivery Manager"));
        assert_eq!(body.title_line, 4);
        let kinds: Vec<SectionKind> = body.sections.iter().map(|s| s.kind).collect();
        use SectionKind::*;
        assert_eq!(
            kinds,
            [
                Mission,
                Goals,
                Context,
                Context,
                Tools,
                Schedule,
                Inbox,
                Preferences,
                Preferences,
                Rules,
                Other
            ]
        );
        assert_eq!(body.sections[0].body, "Keep it on time.\nSecond line.");
        assert_eq!(body.sections[0].body_line, 7);
        assert_eq!(body.sections[1].heading, "goals");
        assert_eq!(body.sections[10].heading, "Glossary");
        assert!(
            body.sections[7].body.contains("### Detail"),
            "H3 stays inside its section"
        );
    }

    #[test]
    fn every_list_style_with_lines() {
        let body = parse(ROLE);
        let goals = &body.sections[1].items;
        let texts: Vec<&str> = goals.iter().map(|i| i.text.as_str()).collect();
        assert_eq!(texts, ["one", "two", "three", "four", "five"]);
        let lines: Vec<usize> = goals.iter().map(|i| i.line).collect();
        assert_eq!(lines, [11, 12, 13, 14, 15]);
    }

    #[test]
    fn plain_lines_when_no_list() {
        let body = parse(ROLE);
        let sched = body.sections[5].lines();
        assert_eq!(
            sched,
            [Item {
                text: "9am and 5pm, weekdays".into(),
                line: 28
            }]
        );
    }

    #[test]
    fn crlf_lines_and_text() {
        let text = ROLE.replace('\n', "\r\n");
        let body = parse(&text);
        assert_eq!(body.sections[1].items[2].line, 13);
        assert_eq!(body.sections[0].body, "Keep it on time.\nSecond line.");
        assert_eq!(body.sections[2].items[1].text, "[[team]]");
    }

    #[test]
    fn headings_in_code_blocks_are_not_sections() {
        let body = parse("# R\n## Mission\n```\n## Tools\n```\n");
        assert_eq!(body.sections.len(), 1);
    }

    #[test]
    fn nested_items_stay_with_their_parent() {
        let body = parse("# R\n## Goals\n- parent\n  - child\n- next\n");
        let items = &body.sections[0].items;
        assert_eq!(items.len(), 2);
        assert_eq!(items[0].text, "parent\n- child");
    }
}
