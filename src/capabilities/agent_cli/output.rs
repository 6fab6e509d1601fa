//! What an agent CLI printed, read per output format: the final text, token usage, the CLI's own
//! cost figure, and whether the run failed — and if so, whether it is an outage (not logged in,
//! rate-limited: pause, no attempt) or a bad run (an attempt).

use serde_json::Value;

use crate::base::cost::Usage;
use crate::setup::config::profile::OutputFormat;

/// The run as the CLI reported it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CliReport {
    pub summary: String,
    pub usage: Usage,
    pub cost_usd: Option<f64>,
    pub model: String,
    /// Why the run failed, and whether that is an outage.
    pub failure: Option<(String, bool)>,
    /// Nothing in the output could be read as the CLI's result.
    pub unreadable: bool,
}

/// Words in a CLI's error that mean "the service cannot be used right now", not "this run was bad".
const OUTAGE_SIGNS: &[&str] = &[
    "not logged in",
    "/login",
    "log in",
    "authentication",
    "unauthorized",
    "invalid api key",
    "invalid x-api-key",
    "api key",
    "401",
    "rate limit",
    "rate_limit",
    "429",
    "quota",
    "overloaded",
    "529",
    "credit balance",
    "usage limit",
    "auth method",
    "api_key",
    "login required",
];

pub fn is_outage(message: &str) -> bool {
    let lower = message.to_lowercase();
    OUTAGE_SIGNS.iter().any(|s| lower.contains(s))
}

fn fail(message: String) -> Option<(String, bool)> {
    let outage = is_outage(&message);
    Some((message, outage))
}

fn u(v: &Value, k: &str) -> u64 {
    v.get(k).and_then(Value::as_u64).unwrap_or(0)
}

/// Reads the CLI's output. `exit_ok` is false for a non-zero exit status.
pub fn read(format: OutputFormat, stdout: &str, stderr: &str, exit_ok: bool) -> CliReport {
    let mut r = match format {
        OutputFormat::ClaudeJson => claude(stdout),
        OutputFormat::CodexJsonl => codex(stdout),
        // gemini prints its error object on stderr when it cannot start a session.
        OutputFormat::GeminiJson if last_json(stdout).is_none() && last_json(stderr).is_some() => {
            gemini(stderr)
        }
        OutputFormat::GeminiJson => gemini(stdout),
        OutputFormat::Text => CliReport {
            summary: stdout.trim().to_string(),
            ..CliReport::default()
        },
    };
    // A CLI that exited with an error and printed nothing readable: its stderr says why.
    if !exit_ok && (r.failure.is_none() || r.unreadable) {
        let tail: String = stderr
            .lines()
            .rev()
            .filter(|l| !l.trim().is_empty())
            .take(5)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join(" | ");
        let what = if tail.is_empty() {
            crate::base::text::one_line(stdout, 300)
        } else {
            tail
        };
        r.failure = fail(format!("the CLI exited with an error: {what}"));
    }
    r
}

/// The last JSON object in `text` (CLIs may print warnings before it).
fn last_json(text: &str) -> Option<Value> {
    if let Ok(v) = serde_json::from_str::<Value>(text.trim()) {
        return Some(v);
    }
    text.lines().rev().find_map(|l| {
        serde_json::from_str::<Value>(l.trim())
            .ok()
            .filter(Value::is_object)
    })
}

/// A CLI whose output held no JSON result (a crash, a changed output format).
fn no_json(stdout: &str) -> CliReport {
    CliReport {
        failure: fail(format!(
            "the CLI printed no JSON result: {}",
            crate::base::text::one_line(stdout, 300)
        )),
        unreadable: true,
        ..CliReport::default()
    }
}

fn claude(stdout: &str) -> CliReport {
    let Some(v) = last_json(stdout) else {
        return no_json(stdout);
    };
    let usage = v.get("usage").cloned().unwrap_or(Value::Null);
    let mut r = CliReport {
        summary: v["result"].as_str().unwrap_or("").trim().to_string(),
        usage: Usage {
            input_tokens: u(&usage, "input_tokens"),
            output_tokens: u(&usage, "output_tokens"),
            cache_read_tokens: u(&usage, "cache_read_input_tokens"),
            cache_write_tokens: u(&usage, "cache_creation_input_tokens"),
        },
        cost_usd: v["total_cost_usd"].as_f64(),
        model: v["modelUsage"]
            .as_object()
            .and_then(|m| m.keys().next().cloned())
            .unwrap_or_default(),
        ..CliReport::default()
    };
    if v["is_error"].as_bool() == Some(true) || v["subtype"].as_str().is_some_and(|s| s.starts_with("error"))
    {
        let why = if r.summary.is_empty() {
            v["subtype"].as_str().unwrap_or("error").to_string()
        } else {
            r.summary.clone()
        };
        r.failure = fail(format!(
            "the CLI reported an error: {}",
            crate::base::text::one_line(&why, 300)
        ));
    } else if let Some(denied) = v["permission_denials"].as_array().filter(|d| !d.is_empty()) {
        let names: Vec<&str> = denied.iter().filter_map(|d| d["tool_name"].as_str()).collect();
        // A denial is a bad run, never an outage: the model asked for something it may not have.
        r.failure = Some((
            format!(
                "the CLI refused {} tool call(s) the role does not have: {}",
                denied.len(),
                names.join(", ")
            ),
            false,
        ));
    }
    r
}

fn codex(stdout: &str) -> CliReport {
    let mut r = CliReport::default();
    let mut any = false;
    for line in stdout.lines() {
        let Ok(v) = serde_json::from_str::<Value>(line.trim()) else {
            continue;
        };
        any = true;
        match v["type"].as_str().unwrap_or("") {
            "item.completed" if v["item"]["type"] == "agent_message" => {
                r.summary = v["item"]["text"].as_str().unwrap_or("").trim().to_string();
            }
            "turn.completed" => {
                let usage = &v["usage"];
                r.usage.add(Usage {
                    input_tokens: u(usage, "input_tokens").saturating_sub(u(usage, "cached_input_tokens")),
                    output_tokens: u(usage, "output_tokens"),
                    cache_read_tokens: u(usage, "cached_input_tokens"),
                    cache_write_tokens: 0,
                });
            }
            "turn.failed" => {
                let msg = v["error"]["message"]
                    .as_str()
                    .unwrap_or("turn failed")
                    .to_string();
                r.failure = fail(format!("the CLI reported an error: {msg}"));
            }
            "error" => {
                let msg = v["message"].as_str().unwrap_or("error").to_string();
                r.failure = fail(format!("the CLI reported an error: {msg}"));
            }
            _ => {}
        }
    }
    if !any {
        return no_json(stdout);
    }
    r
}

fn gemini(stdout: &str) -> CliReport {
    let Some(v) = last_json(stdout) else {
        return no_json(stdout);
    };
    let mut r = CliReport {
        summary: v["response"].as_str().unwrap_or("").trim().to_string(),
        ..CliReport::default()
    };
    if let Some(models) = v["stats"]["models"].as_object() {
        for (name, m) in models {
            if r.model.is_empty() {
                r.model = name.clone();
            }
            let t = &m["tokens"];
            let cached = u(t, "cached");
            r.usage.add(Usage {
                input_tokens: u(t, "prompt").saturating_sub(cached),
                output_tokens: u(t, "candidates"),
                cache_read_tokens: cached,
                cache_write_tokens: 0,
            });
        }
    }
    if let Some(e) = v.get("error").filter(|e| !e.is_null()) {
        let msg = e["message"]
            .as_str()
            .map_or_else(|| e.to_string(), str::to_string);
        r.failure = fail(format!("the CLI reported an error: {msg}"));
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn claude_success_error_and_denials() {
        let ok = json!({"type": "result", "subtype": "success", "is_error": false, "result": "Posted the update.",
            "total_cost_usd": 0.0123, "usage": {"input_tokens": 100, "output_tokens": 20, "cache_read_input_tokens": 50, "cache_creation_input_tokens": 10},
            "modelUsage": {"claude-sonnet-4-5": {}}, "permission_denials": []});
        let r = read(OutputFormat::ClaudeJson, &format!("warning: x\n{ok}\n"), "", true);
        assert_eq!(r.summary, "Posted the update.");
        assert_eq!(r.usage.input_tokens, 100);
        assert_eq!(r.usage.cache_read_tokens, 50);
        assert_eq!(r.cost_usd, Some(0.0123));
        assert_eq!(r.model, "claude-sonnet-4-5");
        assert_eq!(r.failure, None);

        let err = json!({"type": "result", "subtype": "success", "is_error": true, "result": "Invalid API key · Please run /login"});
        let r = read(OutputFormat::ClaudeJson, &err.to_string(), "", true);
        assert!(r.failure.as_ref().unwrap().1, "not logged in is an outage: {r:?}");

        let bad = json!({"type": "result", "subtype": "error_max_turns", "is_error": true, "result": ""});
        let r = read(OutputFormat::ClaudeJson, &bad.to_string(), "", true);
        assert!(!r.failure.as_ref().unwrap().1, "a bad run is an attempt");

        let denied = json!({"type": "result", "subtype": "success", "is_error": false, "result": "done",
            "permission_denials": [{"tool_name": "Bash", "tool_use_id": "x", "tool_input": {}}]});
        let r = read(OutputFormat::ClaudeJson, &denied.to_string(), "", true);
        let (msg, outage) = r.failure.unwrap();
        assert!(msg.contains("Bash") && !outage, "{msg}");

        let r = read(OutputFormat::ClaudeJson, "Segmentation fault", "", true);
        assert!(r.failure.unwrap().0.contains("no JSON result"));
        let r = read(
            OutputFormat::ClaudeJson,
            "",
            "boom\nfatal: out of memory\n",
            false,
        );
        assert!(r
            .failure
            .unwrap()
            .0
            .contains("exited with an error: boom | fatal: out of memory"));
    }

    #[test]
    fn codex_and_gemini_shapes() {
        let lines = [
            json!({"type": "thread.started", "thread_id": "t"}),
            json!({"type": "item.completed", "item": {"id": "i1", "type": "reasoning", "text": "thinking"}}),
            json!({"type": "item.completed", "item": {"id": "i2", "type": "agent_message", "text": "All done."}}),
            json!({"type": "turn.completed", "usage": {"input_tokens": 300, "cached_input_tokens": 100, "output_tokens": 40}}),
        ]
        .map(|v| v.to_string())
        .join("\n");
        let r = read(OutputFormat::CodexJsonl, &lines, "", true);
        assert_eq!(r.summary, "All done.");
        assert_eq!(
            (
                r.usage.input_tokens,
                r.usage.cache_read_tokens,
                r.usage.output_tokens
            ),
            (200, 100, 40)
        );
        let failed =
            json!({"type": "turn.failed", "error": {"message": "stream error: 429 Too Many Requests"}})
                .to_string();
        assert!(
            read(OutputFormat::CodexJsonl, &failed, "", false)
                .failure
                .unwrap()
                .1
        );

        let g = json!({"response": "Summary here.", "stats": {"models": {"gemini-2.5-pro": {"tokens": {"prompt": 500, "candidates": 60, "cached": 200, "total": 560}}}}});
        let r = read(OutputFormat::GeminiJson, &g.to_string(), "", true);
        assert_eq!(r.summary, "Summary here.");
        assert_eq!(
            (
                r.usage.input_tokens,
                r.usage.cache_read_tokens,
                r.usage.output_tokens
            ),
            (300, 200, 60)
        );
        assert_eq!(r.model, "gemini-2.5-pro");
        let e = json!({"response": null, "error": {"type": "Error", "message": "Quota exceeded for quota metric", "code": 429}});
        assert!(
            read(OutputFormat::GeminiJson, &e.to_string(), "", false)
                .failure
                .unwrap()
                .1
        );
        let r = read(OutputFormat::Text, "plain answer\n", "", true);
        assert_eq!(r.summary, "plain answer");
    }
}
