//! What an MCP tool result becomes for the model: text, other content kinds summarised, at most
//! 64 KiB (like `read_file`).

use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};

/// Most bytes of a result the model gets.
pub const MAX_RESULT_BYTES: usize = 64 * 1024;

/// The result as text, and whether the server said it is an error.
pub fn to_text(result: &CallToolResult) -> (String, bool) {
    let mut parts: Vec<String> = Vec::new();
    for block in &result.content {
        parts.push(block_text(block));
    }
    if parts.iter().all(|p| p.trim().is_empty()) {
        if let Some(structured) = &result.structured_content {
            parts = vec![structured.to_string()];
        }
    }
    let mut text = parts.join("\n");
    if text.trim().is_empty() {
        text = "(the tool returned nothing)".into();
    }
    (cap(text, MAX_RESULT_BYTES), result.is_error.unwrap_or(false))
}

fn block_text(block: &ContentBlock) -> String {
    let v = serde_json::to_value(block).unwrap_or_default();
    match v.get("type").and_then(|t| t.as_str()) {
        Some("text") => v["text"].as_str().unwrap_or("").to_string(),
        Some("image") | Some("audio") => format!(
            "[{} content: {}, {} bytes of base64 — not shown]",
            v["type"].as_str().unwrap_or("binary"),
            v["mimeType"].as_str().unwrap_or("unknown type"),
            v["data"].as_str().map_or(0, str::len)
        ),
        Some("resource") => match serde_json::from_value::<ResourceContents>(v["resource"].clone()) {
            Ok(ResourceContents::TextResourceContents { uri, text, .. }) => {
                format!("[resource {uri}]\n{text}")
            }
            Ok(ResourceContents::BlobResourceContents { uri, mime_type, .. }) => format!(
                "[resource {uri}: {} — binary, not shown]",
                mime_type.as_deref().unwrap_or("unknown type")
            ),
            _ => format!("[resource: {}]", v["resource"]),
        },
        Some("resource_link") => format!(
            "[link to resource {} ({})]",
            v["uri"].as_str().unwrap_or("?"),
            v["name"].as_str().unwrap_or("")
        ),
        Some(other) => format!("[{other} content — not shown]"),
        None => v.to_string(),
    }
}

/// Cuts `text` to `max` bytes at a char boundary, saying so.
pub(crate) fn cap(mut text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    let end = crate::base::text::floor_boundary(&text, max);
    let total = text.len();
    text.truncate(end);
    text.push_str(&format!("\n[… result cut at {end} of {total} bytes]"));
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn result(v: serde_json::Value) -> CallToolResult {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn text_images_resources_and_errors() {
        let r = result(json!({"content": [
            {"type": "text", "text": "hello"},
            {"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"},
            {"type": "resource", "resource": {"uri": "file:///a.txt", "text": "inside"}},
        ], "isError": true}));
        let (text, error) = to_text(&r);
        assert!(error);
        assert_eq!(
            text,
            "hello\n[image content: image/png, 8 bytes of base64 — not shown]\n[resource file:///a.txt]\ninside"
        );
    }

    #[test]
    fn structured_results_and_huge_ones() {
        let r = result(json!({"content": [], "structuredContent": {"n": 1}}));
        assert_eq!(to_text(&r).0, "{\"n\":1}");
        let big = "é".repeat(MAX_RESULT_BYTES);
        let r = result(json!({"content": [{"type": "text", "text": big}]}));
        let (text, _) = to_text(&r);
        assert!(text.len() < MAX_RESULT_BYTES + 100 && text.contains("result cut at"));
    }
}
