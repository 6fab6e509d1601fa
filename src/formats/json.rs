//! JSON that comes from outside tabd — a model's response, a tool call's arguments, an answer
//! checked against a schema, a schema file a person wrote — bounded in depth.
//!
//! serde_json's parser stops at 128 levels, so parsing itself never overflows; but what tabd
//! keeps of such a value goes into its own records a few levels down (`state.json`'s pending
//! run, a suspended run's conversation), and a tool input 120 deep made `state.json` unreadable
//! to tabd the next time it was loaded (it was set aside and every count reset). So a value from
//! outside may nest at most [`MAX_DEPTH`] levels: every record around it stays well under 128,
//! and whatever walks a value recursively (jsonschema, the serializer, `Drop`) stays shallow.

use serde_json::Value;

/// Most arrays and objects inside each other in a JSON value from outside (`{"a": [1]}` is 2).
pub const MAX_DEPTH: usize = 64;

/// Why JSON from outside was not taken.
#[derive(Debug, thiserror::Error)]
pub enum JsonError {
    #[error("{0}")]
    Syntax(#[from] serde_json::Error),
    #[error("it nests arrays and objects more than {MAX_DEPTH} deep; tabd reads at most {MAX_DEPTH} levels")]
    TooDeep,
}

/// How many arrays and objects `value` holds inside each other (a number or a string is 0).
/// Walks with a stack of its own, so any value can be measured.
pub fn depth(value: &Value) -> usize {
    let mut deepest = 0;
    let mut todo: Vec<(&Value, usize)> = vec![(value, 0)];
    while let Some((v, above)) = todo.pop() {
        let level = above + 1;
        match v {
            Value::Array(items) => todo.extend(items.iter().map(|c| (c, level))),
            Value::Object(map) => todo.extend(map.values().map(|c| (c, level))),
            _ => continue,
        }
        deepest = deepest.max(level);
    }
    deepest
}

/// `Ok` when `value` nests at most [`MAX_DEPTH`] levels.
pub fn check(value: &Value) -> Result<(), JsonError> {
    if depth(value) > MAX_DEPTH {
        return Err(JsonError::TooDeep);
    }
    Ok(())
}

/// Parses `text` as one JSON value nesting at most [`MAX_DEPTH`] levels.
pub fn parse(text: &str) -> Result<Value, JsonError> {
    let value: Value = serde_json::from_str(text)?;
    check(&value)?;
    Ok(value)
}

/// [`parse`] for bytes.
pub fn parse_slice(bytes: &[u8]) -> Result<Value, JsonError> {
    let value: Value = serde_json::from_slice(bytes)?;
    check(&value)?;
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::frontmatter::hostile;
    use proptest::prelude::*;
    use serde_json::json;

    proptest! {
        #![proptest_config(hostile::config(128))]
        /// Deep and malformed JSON: parsed within the bound or refused with words; never a panic.
        #[test]
        fn any_json_is_parsed_within_the_bound_or_refused(text in hostile::any_json()) {
            match parse(&text) {
                Ok(v) => prop_assert!(depth(&v) <= MAX_DEPTH),
                Err(e) => prop_assert!(e.to_string().len() > 10, "{e}"),
            }
        }
    }

    fn nested(n: usize) -> String {
        format!("{}{}", "[".repeat(n), "]".repeat(n))
    }

    #[test]
    fn depth_counts_arrays_and_objects_inside_each_other() {
        assert_eq!(depth(&json!(1)), 0);
        assert_eq!(depth(&json!([])), 1);
        assert_eq!(depth(&json!({"a": [1, {"b": 2}], "c": 3})), 3);
        assert_eq!(depth(&serde_json::from_str(&nested(100)).unwrap()), 100);
    }

    #[test]
    fn values_deeper_than_the_limit_are_refused_with_a_sentence() {
        assert!(parse(&nested(MAX_DEPTH)).is_ok());
        let err = parse(&nested(MAX_DEPTH + 1)).unwrap_err();
        assert!(matches!(err, JsonError::TooDeep));
        assert_eq!(
            err.to_string(),
            "it nests arrays and objects more than 64 deep; tabd reads at most 64 levels"
        );
        // Past serde_json's own stop (128), the parser says so itself; nothing overflows.
        let err = parse_slice(nested(100_000).as_bytes()).unwrap_err();
        assert!(err.to_string().contains("recursion limit exceeded"), "{err}");
        assert!(parse("{\"a\": ").is_err());
    }
}
