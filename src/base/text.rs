//! Byte offsets → 1-based line numbers, and small text helpers shared by the parsers.

/// Maps byte offsets in a source text to 1-based line numbers.
///
/// Works for `\n` and `\r\n` files alike because it only counts `\n`.
#[derive(Debug, Clone)]
pub struct LineIndex {
    line_starts: Vec<usize>,
    /// The last line a person sees: a text ending in a line break has no line after it.
    last_line: usize,
}

impl LineIndex {
    pub fn new(text: &str) -> Self {
        let mut line_starts = vec![0];
        line_starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        let last_line = if text.ends_with('\n') {
            line_starts.len() - 1
        } else {
            line_starts.len()
        };
        Self {
            line_starts,
            last_line,
        }
    }

    /// The 1-based line holding byte `offset`. The end of the text is on its last line, also
    /// after a final line break (where a parser's "unexpected end" points): a file of two lines
    /// has no error on line 3.
    pub fn line_of(&self, offset: usize) -> usize {
        let line = match self.line_starts.binary_search(&offset) {
            Ok(i) => i + 1,
            Err(i) => i,
        };
        line.min(self.last_line).max(1)
    }
}

/// Strips a Markdown list marker (`-`, `*`, `+`, `1.`, `1)`) and an optional task box from the
/// start of `line`. Returns `None` when the line is not a list item.
pub fn strip_list_marker(line: &str) -> Option<&str> {
    let trimmed = line.trim_start();
    let rest = if let Some(r) = trimmed
        .strip_prefix("- ")
        .or_else(|| trimmed.strip_prefix("* "))
        .or_else(|| trimmed.strip_prefix("+ "))
    {
        r
    } else {
        let digits = trimmed.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 || digits > 9 {
            return None;
        }
        let after = &trimmed[digits..];
        after.strip_prefix(". ").or_else(|| after.strip_prefix(") "))?
    };
    let rest = rest.trim_start();
    let rest = rest
        .strip_prefix("[ ] ")
        .or_else(|| rest.strip_prefix("[x] "))
        .unwrap_or(rest);
    Some(rest)
}

/// Formats an integer with `,` thousands separators (`12480` → `12,480`), as the run log shows it.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// An instant as every human-facing text of tabd shows one (issue 30: one format): local time,
/// `2026-11-25 14:02`. Machine formats (JSON, frontmatter, the run records) use RFC 3339.
pub fn shown(t: chrono::DateTime<chrono::Utc>, tz: chrono_tz::Tz) -> String {
    t.with_timezone(&tz).format("%Y-%m-%d %H:%M").to_string()
}

/// The closest of `candidates` to `word`, if it is close enough to be a likely typo.
pub fn did_you_mean<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let word = word.to_lowercase();
    candidates
        .into_iter()
        .map(|c| (strsim::levenshtein(&word, &c.to_lowercase()), c))
        .filter(|(d, c)| *d <= 2.max(c.len() / 4))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// A URL as tabd may print or record it (docs/spec.md §8, issue 29): no user name or password, no
/// query value (`?api_key=…`), no fragment — a daily note every role can read must never hold
/// them. Each query key stays, its value shown as `…`. A `${NAME}` written in it stays readable.
/// (Values expanded into the path are hidden by the environment's redactor, docs/spec.md §24.)
pub fn display_url(url: &str) -> String {
    unbrace(&display_url_encoded(url))
}

/// A webhook's URL as tabd shows it: as `display_url`, with the last part of its path hidden too
/// (`https://ntfy.sh/…`) — an ntfy topic, a Slack or Discord token is the path's end, and is as
/// good as a password even when written out in the config.
pub fn display_webhook(url: &str) -> String {
    let shown = display_url(url);
    let (before_query, query) = match shown.find('?') {
        Some(q) => shown.split_at(q),
        None => (shown.as_str(), ""),
    };
    let path_from = before_query
        .find("://")
        .map(|s| s + 3)
        .and_then(|host| before_query[host..].find('/').map(|p| host + p));
    let Some(path_from) = path_from else {
        return shown;
    };
    let trimmed = before_query.trim_end_matches('/');
    match trimmed.rfind('/') {
        Some(last) if last >= path_from && last + 1 < trimmed.len() => {
            format!("{}…{query}", &trimmed[..last + 1])
        }
        _ => shown,
    }
}

/// A service's URL as tabd shows it (an MCP server's): as `display_url`, with each part of its path
/// that looks like a token hidden (`https://mcp.example.com/…/mcp`) — services put a secret in
/// the path (Zapier's, many webhooks), and a literal one written in the config is no `${VAR}` the
/// redactor knows. A part is taken for a token when it is 16 characters or more and holds both
/// letters and digits; `${NAME}` stays readable.
pub fn display_endpoint(url: &str) -> String {
    let shown = display_url(url);
    let (head, query) = match shown.find('?') {
        Some(q) => shown.split_at(q),
        None => (shown.as_str(), ""),
    };
    let Some(path_from) = head
        .find("://")
        .map(|s| s + 3)
        .and_then(|host| head[host..].find('/').map(|p| host + p))
    else {
        return shown;
    };
    let path: Vec<String> = head[path_from..]
        .split('/')
        .map(|part| {
            if looks_like_a_token(part) {
                "…".to_string()
            } else {
                part.to_string()
            }
        })
        .collect();
    format!("{}{}{query}", &head[..path_from], path.join("/"))
}

fn looks_like_a_token(part: &str) -> bool {
    !part.starts_with("${")
        && part.chars().count() >= 16
        && part.chars().any(|c| c.is_ascii_digit())
        && part.chars().any(|c| c.is_alphabetic())
}

/// `text` with every `http://` or `https://` URL in it shown as `display_endpoint` shows it: an
/// error a library wrote (reqwest's, rmcp's) may quote the URL it was given, secret and all.
pub fn endpoints_shown(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = ["https://", "http://"].iter().filter_map(|s| rest.find(s)).min() {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| c.is_whitespace() || matches!(c, ')' | '(' | '"' | '\'' | '<' | '>' | ','))
            .unwrap_or(tail.len());
        out.push_str(&display_endpoint(&tail[..end]));
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

/// `$%7BNAME%7D` (how a URL writes `${NAME}`) back as `${NAME}`.
fn unbrace(url: &str) -> String {
    let mut out = String::with_capacity(url.len());
    let mut rest = url;
    while let Some(at) = rest.find("$%7B") {
        let after = &rest[at + 4..];
        let name_len = after
            .bytes()
            .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
            .count();
        out.push_str(&rest[..at]);
        if name_len > 0 && after[name_len..].starts_with("%7D") {
            out.push_str(&format!("${{{}}}", &after[..name_len]));
            rest = &after[name_len + 3..];
        } else {
            out.push_str("$%7B");
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

fn display_url_encoded(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut u) if u.has_host() => {
            #[expect(clippy::let_underscore_must_use, reason = "cannot fail: the URL has a host")]
            let _ = u.set_username("");
            #[expect(clippy::let_underscore_must_use, reason = "cannot fail: the URL has a host")]
            let _ = u.set_password(None);
            let keys: Vec<String> = u.query_pairs().map(|(k, _)| k.into_owned()).collect();
            u.set_query(None);
            u.set_fragment(None);
            let mut out = u.to_string();
            if !keys.is_empty() {
                out.push('?');
                out.push_str(
                    &keys
                        .iter()
                        .map(|k| format!("{k}=…"))
                        .collect::<Vec<_>>()
                        .join("&"),
                );
            }
            out
        }
        // Not a URL we can read: cut everything after `://` up to the host's `@`, and after `?`.
        _ => {
            let mut out = url.split(['?', '#']).next().unwrap_or("").to_string();
            if let Some(scheme_end) = out.find("://") {
                let rest = &out[scheme_end + 3..];
                let host_end = rest.find('/').unwrap_or(rest.len());
                if let Some(at) = rest[..host_end].rfind('@') {
                    out = format!("{}{}", &out[..scheme_end + 3], &rest[at + 1..]);
                }
            }
            out
        }
    }
}

/// `text` with every occurrence of `url` written as `display_url` writes it (an error message
/// that quotes the URL it failed on).
pub fn scrub_url(text: &str, url: &str) -> String {
    if url.is_empty() {
        return text.to_string();
    }
    text.replace(url, &display_url(url))
}

/// Model text as a note may hold it (docs/spec.md §21): the one renderer for everything a model wrote
/// that lands in a note tabd keeps (the daily log's thinking and summary, a child's answer, an
/// approval's reason). Every line ending Markdown knows (`\r\n`, `\n`, a lone `\r`) becomes
/// `\n`; then no line can start a heading (a `#` heading becomes a bold line; a `===`/`---`
/// underline is escaped), a fence (`` ``` ``, `~~~`), a quote or callout (`>`), an HTML block or
/// comment (`<`, `%%`): its first character is backslash-escaped (it reads the same), even after
/// a list marker or indentation. So nothing the model writes can open, close or forge a section
/// of tabd's.
pub fn for_note(text: &str) -> String {
    without_controls(&unify_line_ends(text))
        .lines()
        .map(tame_line)
        .collect::<Vec<_>>()
        .join("\n")
        .trim()
        .to_string()
}

/// `text` with every line ending Markdown knows (`\r\n`, `\n`, a lone `\r`) as `\n`: a lone
/// carriage return ends a line for Obsidian, not for `str::lines`. So are the breaks other
/// readers split lines on — Python's `splitlines()`, a JavaScript `^` — (U+2028, U+2029, NEL,
/// vertical tab, form feed, the file, group and record separators): kept, a model's `Undo:` line
/// after one was a line of tabd's to such a script.
pub fn unify_line_ends(text: &str) -> String {
    text.replace("\r\n", "\n").replace(LINE_BREAKS, "\n")
}

/// What ends a line for some reader of a note, besides `\n`.
const LINE_BREAKS: [char; 9] = [
    '\r', '\u{2028}', '\u{2029}', '\u{85}', '\u{0b}', '\u{0c}', '\u{1c}', '\u{1d}', '\u{1e}',
];

/// `text` with every control character but line feed and tab — escape sequences (`ESC [`,
/// `ESC ]`), bell, the C1 controls, DEL — as U+FFFD: model or server text printed on a terminal
/// (`tabd fire`, `tabd logs`) could otherwise move the cursor, rewrite what tabd printed above,
/// set the terminal's title or write the clipboard (OSC 52).
/// `text` as a terminal may be given it: every control character but line breaks and tabs (an
/// escape sequence would retitle the window, move the cursor, or hide what follows) and every
/// bidirectional override (it would show a name backwards) replaced by `�`. What tabd prints
/// comes from notes, role files, records and servers.
pub fn for_terminal(text: &str) -> std::borrow::Cow<'_, str> {
    const BIDI: [char; 11] = [
        '\u{200e}', '\u{200f}', '\u{202a}', '\u{202b}', '\u{202c}', '\u{202d}', '\u{202e}', '\u{2066}',
        '\u{2067}', '\u{2068}', '\u{2069}',
    ];
    let odd = |c: char| (c.is_control() && c != '\n' && c != '\t') || BIDI.contains(&c);
    if !text.chars().any(odd) {
        return std::borrow::Cow::Borrowed(text);
    }
    std::borrow::Cow::Owned(
        text.chars()
            .map(|c| if odd(c) { '\u{fffd}' } else { c })
            .collect(),
    )
}

pub fn without_controls(text: &str) -> String {
    if !text.chars().any(|c| c.is_control() && c != '\n' && c != '\t') {
        return text.to_string();
    }
    text.chars()
        .map(|c| {
            if c.is_control() && c != '\n' && c != '\t' {
                '\u{fffd}'
            } else {
                c
            }
        })
        .collect()
}

/// One line of model text, made unable to start a block of its own.
fn tame_line(line: &str) -> String {
    let indent = line.len() - line.trim_start().len();
    let (lead, rest) = line.split_at(indent);
    // After a list marker (`- `, `* `, `+ `, `1. `) the same rules apply to the item's text.
    let marker = list_marker_len(rest);
    let (marker, body) = rest.split_at(marker);
    if body.starts_with('#') {
        let title = body.trim_start_matches('#').trim();
        return if title.is_empty() {
            String::new()
        } else {
            format!("{lead}{marker}**{}**", title.replace('*', "\\*"))
        };
    }
    // The lines tabd writes into a run's section (`Undo: …`, `- **Outcome:** …`), forged: the
    // same to read, but no script that reads the log takes them for tabd's.
    if let Some(rest) = body.strip_prefix("Undo:") {
        return format!("{lead}{marker}Undo\\:{rest}");
    }
    if TABD_FIELDS.iter().any(|f| body.starts_with(f)) {
        return format!("{lead}{marker}\\{body}");
    }
    let setext = !body.is_empty() && body.trim_end().chars().all(|c| c == '=' || c == '-');
    let opens = ["#", "```", "~~~", ">", "<", "%%"]
        .iter()
        .any(|p| body.starts_with(p));
    if opens || (setext && marker.is_empty()) {
        format!("{lead}{marker}\\{body}")
    } else {
        line.to_string()
    }
}

/// The bold field names tabd starts its own lines with in a run's section and a note.
const TABD_FIELDS: &[&str] = &[
    "**Outcome:**",
    "**Trigger:**",
    "**Changed:**",
    "**Run:**",
    "**Task:**",
    "**Actions:**",
    "**Answer:**",
    "**Why:**",
    "**Tool:**",
    "**Not run",
    "**Invalid",
    "**MCP server down:**",
];

fn list_marker_len(s: &str) -> usize {
    let bytes = s.as_bytes();
    if bytes.len() >= 2 && matches!(bytes[0], b'-' | b'*' | b'+') && bytes[1] == b' ' {
        return 2;
    }
    let digits = bytes.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits > 0
        && bytes.len() > digits + 1
        && matches!(bytes[digits], b'.' | b')')
        && bytes[digits + 1] == b' '
    {
        return digits + 2;
    }
    0
}

pub fn one_line(s: &str, max: usize) -> String {
    let flat = without_controls(&s.split_whitespace().collect::<Vec<_>>().join(" "));
    if flat.chars().count() > max {
        format!("{}…", flat.chars().take(max).collect::<String>())
    } else {
        flat
    }
}

/// `s` with every character but ASCII letters, digits, `_` and `-` replaced by `with`: a name that
/// is safe as a file name or a tool name.
pub fn safe_name(s: &str, with: char) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                with
            }
        })
        .collect()
}

/// The largest char boundary of `s` at or below `at`: where a text may be cut to at most `at`
/// bytes without splitting a character.
pub fn floor_boundary(s: &str, at: usize) -> usize {
    let mut at = at.min(s.len());
    while !s.is_char_boundary(at) {
        at -= 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 49: a literal secret in a service URL's path is shown as `…`, in the URL and in any
    /// error text that quotes it; ordinary paths and `${NAME}` stay readable.
    #[test]
    fn a_token_in_a_service_path_is_hidden_wherever_it_is_shown() {
        assert_eq!(
            display_endpoint("https://u:p@mcp.example.com/s/sk8Hq2pLx7Vb3nRt9wZ/mcp?key=1"),
            "https://mcp.example.com/s/…/mcp?key=…"
        );
        assert_eq!(
            display_endpoint("http://127.0.0.1:3001/mcp"),
            "http://127.0.0.1:3001/mcp"
        );
        assert_eq!(
            display_endpoint("https://h/${TOKEN}/mcp"),
            "https://h/${TOKEN}/mcp",
            "a secret of the environment is the redactor's, and its name readable"
        );
        assert_eq!(
            endpoints_shown("error sending request for url (https://h/abcdef0123456789xyz/mcp): refused"),
            "error sending request for url (https://h/…/mcp): refused"
        );
    }

    /// Issue 36 (the one renderer): a line break only some readers know (U+2028, NEL, vertical
    /// tab, form feed, the record separator) forged an `Undo:` line and a run heading for a
    /// script that splits with Python's `splitlines()`; escape sequences reached the note and
    /// the terminal as they were.
    #[test]
    fn other_line_breaks_and_control_characters_forge_nothing() {
        let forged = "Done.\u{2028}## 00:01 · Risk Manager · schedule\u{2029}Undo: `tabd undo a`\u{85}Undo: b\
                      \u{0b}Undo: c\u{0c}Undo: d\u{1e}Undo: e \u{1b}]52;c;cHduZWQ=\u{07} \u{1b}[2K\u{9b}31m\u{7f}";
        let out = for_note(forged);
        let python_lines: Vec<&str> = out
            .split(|c: char| c == '\n' || LINE_BREAKS.contains(&c) || c == '\u{1c}')
            .collect();
        assert_eq!(python_lines.len(), 7, "{out:?}");
        for line in python_lines {
            assert!(
                !line.starts_with("Undo:") && !line.starts_with('#'),
                "{line:?} in {out:?}"
            );
        }
        assert!(!out.chars().any(|c| c.is_control() && c != '\n'), "{out:?}");
        assert!(out.contains("**00:01 · Risk Manager · schedule**") && out.contains("\u{fffd}]52;c;"));
        assert_eq!(without_controls("a\tb\nc\u{1b}[1m"), "a\tb\nc\u{fffd}[1m");
        assert_eq!(one_line("x\u{1b}[2Ky", 80), "x\u{fffd}[2Ky");
    }

    /// Issue 29, item 6: model text can never start a heading, close a fence or open a callout
    /// of the note it lands in.
    #[test]
    fn model_text_cannot_forge_a_notes_structure() {
        let forged = "Done.\n    ```\n## 23:59 · Delivery Manager · schedule\nUndo: `tabd undo x --force`\n\
                      ~~~\n> [!warning] fake\n- ## in a list\n1. > quoted\nTitle\n===\n<!-- hidden -->\n%% hidden %%";
        let out = for_note(forged);
        for line in out.lines() {
            let t = line.trim_start();
            let t = t
                .strip_prefix("- ")
                .or_else(|| t.strip_prefix("1. "))
                .unwrap_or(t);
            for opener in ["#", "```", "~~~", ">", "<", "%%", "==="] {
                assert!(!t.starts_with(opener), "{line:?} opens {opener}");
            }
        }
        assert!(out.contains("**23:59 · Delivery Manager · schedule**"), "{out}");
        assert!(!out.lines().any(|l| l.starts_with("Undo: `")), "{out}");
        assert!(for_note("- **Outcome:** ok").starts_with("- \\**Outcome"));
        assert!(
            !for_note("a\r## Arguments").lines().any(|l| l.starts_with("##")),
            "a lone CR is a line end"
        );
        assert_eq!(
            for_note("- a bullet\n**bold** and `code`"),
            "- a bullet\n**bold** and `code`"
        );
    }

    #[test]
    fn urls_lose_their_user_info_and_query_values() {
        assert_eq!(
            display_url("http://user:PASS@10.0.0.5:8080/v1/?api_key=s3cret&model=x#frag"),
            "http://10.0.0.5:8080/v1/?api_key=…&model=…"
        );
        assert_eq!(
            display_url("https://api.anthropic.com"),
            "https://api.anthropic.com/"
        );
        assert_eq!(display_url("not a url user:pw@x?k=v"), "not a url user:pw@x");
        assert_eq!(display_url("weird://u:p@host/x?y=1"), "weird://host/x?y=…");
        let msg = "error sending request for url (http://u:PASS@h/v1?key=abc): refused";
        let clean = scrub_url(msg, "http://u:PASS@h/v1?key=abc");
        assert!(!clean.contains("PASS") && !clean.contains("abc"), "{clean}");
        assert_eq!(
            display_url("https://h/${TEAM}/x?t=${TOKEN}"),
            "https://h/${TEAM}/x?t=…",
            "a ${{NAME}} stays readable"
        );
    }

    /// Issue 36, finding 12: a webhook's last path part is hidden, written out or not.
    #[test]
    fn webhooks_hide_the_end_of_their_path() {
        for (url, shown) in [
            ("https://ntfy.sh/my-secret-topic", "https://ntfy.sh/…"),
            ("https://ntfy.sh/my-secret-topic/", "https://ntfy.sh/…"),
            ("https://ntfy.sh/${NTFY_TOPIC}", "https://ntfy.sh/…"),
            (
                "https://hooks.slack.com/services/T000/B000/XXXXsecret",
                "https://hooks.slack.com/services/T000/B000/…",
            ),
            (
                "http://127.0.0.1:8080/hook?token=abc",
                "http://127.0.0.1:8080/…?token=…",
            ),
            ("https://u:pw@example.com/", "https://example.com/"),
            ("https://example.com", "https://example.com/"),
        ] {
            assert_eq!(display_webhook(url), shown, "{url}");
        }
    }

    #[test]
    fn line_index_counts_lf_and_crlf() {
        let text = "a\r\nbb\r\n\r\nc";
        let idx = LineIndex::new(text);
        assert_eq!(idx.line_of(0), 1);
        assert_eq!(idx.line_of(3), 2);
        assert_eq!(idx.line_of(7), 3);
        assert_eq!(idx.line_of(9), 4);
        let ended = LineIndex::new("a\nb\n");
        assert_eq!(ended.line_of(2), 2);
        assert_eq!(
            ended.line_of(4),
            2,
            "the end after a final line break is on the last line"
        );
        assert_eq!(LineIndex::new("").line_of(0), 1);
        assert_eq!(LineIndex::new("\n").line_of(1), 1);
    }

    #[test]
    fn list_markers_of_every_style() {
        for (line, want) in [
            ("- a", Some("a")),
            ("* a", Some("a")),
            ("+ a", Some("a")),
            ("1. a", Some("a")),
            ("12) a", Some("a")),
            ("  - [ ] task", Some("task")),
            ("- [x] done", Some("done")),
            ("plain", None),
            ("-nospace", None),
            ("1.5 kg", None),
        ] {
            assert_eq!(strip_list_marker(line), want, "{line}");
        }
    }

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(12480), "12,480");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }

    #[test]
    fn suggestions_only_for_near_misses() {
        let keys = ["model", "max_tokens", "timezone"];
        assert_eq!(did_you_mean("modle", keys), Some("model"));
        assert_eq!(did_you_mean("timezome", keys), Some("timezone"));
        assert_eq!(did_you_mean("banana", keys), None);
    }
}
