//! A note larger than one prompt (issue 36, finding 3): the prompt holds its start and says how
//! to read the rest; the model reads it in pages with `read_file`; the run's record and daily
//! section say the note was larger than one prompt and how much of it the model read.

use serde_json::{json, Value};

use crate::support::fake_model::{FakeModel, Recorded, Reply};
use crate::support::{describe, stdout, wire, TestVault};

const NOTE: &str = "agent/inbox/delivery/transcript.md";

/// A call transcript of about `bytes` bytes, one numbered line per utterance.
fn transcript(bytes: usize) -> String {
    let mut t = String::with_capacity(bytes + 100);
    let mut i = 0;
    while t.len() < bytes {
        i += 1;
        t.push_str(&format!(
            "[{:05}] Speaker {}: this is what was said on line {i} of the call\n",
            i,
            i % 3
        ));
    }
    t
}

/// The `read_file` arguments the prompt tells the model to use for the next page.
fn call_in_prompt(body: &Value) -> Value {
    let text = wire::all_text(body);
    let line = text
        .lines()
        .find(|l| l.starts_with("read_file {"))
        .unwrap_or_else(|| panic!("no read_file call in the prompt:\n{}", tail(&text)));
    serde_json::from_str(&line["read_file ".len()..]).expect("the call in the prompt is JSON")
}

/// The next page a `read_file` result points to: `offset=N` (and `line_byte=M`), if any.
fn next_in_result(result: &str) -> Option<Value> {
    let re = regex::Regex::new(r"offset=(\d+)(?: and line_byte=(\d+))?\b").unwrap();
    let c = re.captures(result.lines().last()?)?;
    let mut args = json!({"path": NOTE, "offset": c[1].parse::<u64>().unwrap()});
    if let Some(b) = c.get(2) {
        args["line_byte"] = json!(b.as_str().parse::<u64>().unwrap());
    }
    Some(args)
}

fn tail(text: &str) -> &str {
    let mut at = text.len().saturating_sub(3000);
    while !text.is_char_boundary(at) {
        at += 1;
    }
    &text[at..]
}

/// A model that does as it is told: reads the page the prompt names, then every page the last
/// result names, up to `pages` calls, then ends its turn.
fn reader(kind: &'static str, pages: usize) -> impl Fn(&Recorded, usize) -> Reply + Send + Sync {
    move |req, n| {
        let next = if n == 0 {
            Some(call_in_prompt(&req.body))
        } else {
            let results = wire::tool_results(&req.body);
            results.last().and_then(|(_, text, _)| next_in_result(text))
        };
        match next {
            Some(args) if n < pages => wire::tools(kind, None, &[(&format!("t{n}"), "read_file", args)]),
            _ => wire::text(kind, "Read the transcript."),
        }
    }
}

fn big_note_record(v: &TestVault) -> Value {
    let recs = v.records();
    assert_eq!(recs.len(), 1, "{recs:?}");
    recs[0].clone()
}

#[test]
fn a_note_larger_than_one_prompt_is_read_in_pages_and_the_logs_say_so() {
    for kind in ["anthropic", "openai"] {
        let v = TestVault::new();
        let fake = FakeModel::start();
        v.use_model(&fake, kind, "");
        let text = transcript(5_900_000);
        let lines: Vec<&str> = text.split_inclusive('\n').collect();
        v.write(NOTE, &text);
        // One page beyond the prompt, then the model stops.
        fake.respond_with(reader(kind, 1));
        let out = v.tabd(&["fire", "delivery"]);
        assert_eq!(out.status.code(), Some(0), "{kind}: {}", describe(&out));
        assert!(
            stdout(&out).contains(&format!("{NOTE} is larger than one prompt: the model saw ")),
            "{kind}: {}",
            describe(&out)
        );

        // The prompt: the note's start, a marker with its size and lines, the next page's call.
        let reqs = fake.requests();
        assert_eq!(reqs.len(), 2, "{kind}");
        let prompt = wire::all_text(&reqs[0].body);
        let call = call_in_prompt(&reqs[0].body);
        let next = call["offset"].as_u64().unwrap() as usize;
        assert_eq!(call["path"], NOTE);
        assert!(
            call.get("line_byte").is_none(),
            "the prompt ends at a line end: {call}"
        );
        assert!(
            prompt.contains(lines[next - 2]) && !prompt.contains(&format!("said on line {next} of")),
            "{kind}: the prompt shows lines 1 to {}, not line {next}",
            next - 1
        );
        assert!(
            prompt.contains(&format!(
                "this note is larger than one prompt: {} bytes in {} lines. Above are its first {} bytes (lines 1–{})",
                thousands(text.len()),
                thousands(lines.len()),
                thousands(lines[..next - 1].iter().map(|l| l.len()).sum()),
                next - 1
            )),
            "{kind}: {}",
            tail(&prompt)
        );
        assert!(prompt.contains(&format!("The note stays at {NOTE} until this run ends")));
        let included: usize = lines[..next - 1].iter().map(|l| l.len()).sum();
        assert!(
            included <= 64 * 1024 && included > 60 * 1024,
            "{kind}: max_file_bytes of it: {included}"
        );

        // Page 2: the lines after the prompt's, and where the page after it starts.
        let results = wire::tool_results(&reqs[1].body);
        let (_, page, is_error) = &results[0];
        assert!(!is_error, "{kind}: {page}");
        let header = page.lines().next().unwrap();
        let last: usize = header
            .split(['–', ' '])
            .nth(4)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("{header}"));
        assert_eq!(header, format!("{NOTE} — lines {next}–{last} of {}", lines.len()));
        let read: usize = lines[next - 1..last].iter().map(|l| l.len()).sum();
        assert!(page.contains(&lines[next - 1..last].concat()), "{kind}");
        assert!(
            read <= 64 * 1024 && read > 60 * 1024,
            "{kind}: one 64 KiB page: {read}"
        );
        assert!(
            page.ends_with(&format!("call read_file with offset={}]", last + 1)),
            "{kind}: {}",
            tail(page)
        );

        // The record: larger than one prompt, what the prompt held, what the model read.
        let r = big_note_record(&v);
        assert_eq!(r["outcome"], "ok");
        assert_eq!(
            r["notes_truncated"],
            json!([{"path": NOTE, "bytes": text.len(), "lines": lines.len(), "included_bytes": included, "read_bytes": read}]),
            "{kind}"
        );
        // The daily section: never a bare `ok`.
        let daily = v.daily();
        let unread_pct = (text.len() - included - read) * 100 / text.len();
        assert!(
            daily.contains(&format!(
                "- **Outcome:** ok — note larger than one prompt (5.9 MB), {unread_pct}% of it never read · "
            )),
            "{kind}: {daily}"
        );
        assert!(
            daily.contains(
                "- **Larger than one prompt:** [[agent/inbox/delivery/processed/transcript]] — 5.9 MB in "
            ),
            "{kind}: {daily}"
        );
        assert_eq!(v.files_in("agent/inbox/delivery/processed"), ["transcript.md"]);
        assert!(fake.violations().is_empty(), "{:?}", fake.violations());
    }
}

#[test]
fn a_one_line_note_is_read_to_its_end_in_parts_of_the_line() {
    let kind = "anthropic";
    let v = TestVault::new();
    let fake = FakeModel::start();
    v.use_model(&fake, kind, "");
    // 300 KB on one line (a JSON export, say): the prompt holds 64 KiB of it, the rest comes in
    // parts of the same line.
    let text: String = (0..30_000).map(|i| format!("{i:09},")).collect();
    v.write(NOTE, &text);
    fake.respond_with(reader(kind, 30));
    let out = v.tabd(&["fire", "delivery"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let reqs = fake.requests();
    let call = call_in_prompt(&reqs[0].body);
    assert_eq!(call["offset"], 1);
    assert_eq!(call["line_byte"], 64 * 1024, "{call}");
    // Every part, in order, is the line again: nothing skipped, nothing twice.
    let mut seen = text[..64 * 1024].to_string();
    for req in &reqs[1..] {
        let results = wire::tool_results(&req.body);
        let (_, page, is_error) = results.last().unwrap();
        assert!(!is_error, "{page}");
        let body = page.split_once("\n\n").unwrap().1;
        let body = body.split("\n[line 1 goes on").next().unwrap();
        seen.push_str(body);
    }
    assert_eq!(seen, text, "the parts make the whole line");
    let r = big_note_record(&v);
    assert_eq!(
        r["notes_truncated"][0]["read_bytes"],
        text.len() - 64 * 1024,
        "{}",
        r["notes_truncated"]
    );
    let daily = v.daily();
    assert!(
        daily.contains("- **Outcome:** ok — note larger than one prompt (300 KB), read in full in pages · "),
        "{daily}"
    );
    assert!(daily.contains("nothing left unread"), "{daily}");
}

fn thousands(n: usize) -> String {
    tabd::base::text::thousands(n as u64)
}

/// Bytes no UTF-8 reader takes: the start of a PNG, then binary noise.
fn binary() -> Vec<u8> {
    let mut b = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
    b.extend((0..4096u32).map(|i| (i * 151 % 256) as u8));
    b
}

/// More than the 8 MiB a run can read: 9 MiB of ordinary lines.
fn over_the_cap() -> String {
    transcript(9 * 1024 * 1024)
}

#[test]
fn fire_refuses_a_binary_note_and_one_over_the_cap_with_the_reason_and_runs_the_rest() {
    let v = TestVault::new();
    let fake = FakeModel::start();
    v.use_model(&fake, "anthropic", "");
    std::fs::write(v.path("agent/inbox/delivery/scan.md"), binary()).unwrap();
    let huge = over_the_cap();
    v.write("agent/inbox/delivery/huge.md", &huge);
    v.write("agent/inbox/delivery/ok.md", "an ordinary note\n");
    fake.script([wire::text("anthropic", "Handled the ordinary note.")]);
    let out = v.tabd(&["fire", "delivery"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("agent/inbox/delivery/scan.md cannot be read (it is not UTF-8 text (a binary file, or text saved in another encoding)"),
        "{}",
        describe(&out)
    );
    assert!(
        err.contains(&format!(
            "agent/inbox/delivery/huge.md cannot be read (it is {} bytes, more than the 8 MiB a run can read (read_file's limit); split it into smaller notes)",
            thousands(huge.len())
        )),
        "{}",
        describe(&out)
    );
    assert_eq!(v.files_in("agent/inbox/delivery/failed"), ["huge.md", "scan.md"]);
    assert_eq!(v.files_in("agent/inbox/delivery/processed"), ["ok.md"]);
    assert_eq!(
        std::fs::read(v.path("agent/inbox/delivery/failed/scan.md")).unwrap(),
        binary(),
        "kept as it was"
    );
    let daily = v.daily();
    assert!(
        daily.contains("[[agent/inbox/delivery/failed/scan]] cannot be read — it is not UTF-8 text"),
        "{daily}"
    );
    assert!(
        daily.contains("[[agent/inbox/delivery/failed/huge]] cannot be read — it is "),
        "{daily}"
    );
    let recs = v.records();
    let failed: Vec<&Value> = recs.iter().filter(|r| r["outcome"] == "failed").collect();
    assert_eq!(failed.len(), 2, "one failed record per refused note: {recs:?}");
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 1);
    let asked = wire::all_text(&reqs[0].body);
    assert!(
        asked.contains("## Trigger notes (1)") && !asked.contains("scan.md") && !asked.contains("huge.md"),
        "only the ordinary note reaches the model"
    );
}

#[test]
fn the_daemon_moves_a_binary_note_to_failed_and_runs_the_rest() {
    use crate::support::daemon::{setup, wait_until, Daemon};
    let (v, fake) = setup("");
    std::fs::write(v.path("agent/inbox/delivery/scan.md"), binary()).unwrap();
    v.write("agent/inbox/delivery/ok.md", "an ordinary note\n");
    let _d = Daemon::start(&v);
    wait_until(
        std::time::Duration::from_secs(30),
        "the binary note refused and the other one run",
        || {
            v.files_in("agent/inbox/delivery/failed") == ["scan.md"]
                && v.files_in("agent/inbox/delivery/processed") == ["ok.md"]
        },
    );
    assert!(
        v.daily()
            .contains("[[agent/inbox/delivery/failed/scan]] cannot be read — it is not UTF-8 text"),
        "{}",
        v.daily()
    );
    let asked: String = fake.requests().iter().map(|r| wire::all_text(&r.body)).collect();
    assert!(!asked.contains("scan.md"), "no model saw it");
}
