//! Arguments checked against a tool's JSON Schema before tabd sends the call (the harness is
//! authoritative, docs/spec.md §8), with messages the model can act on.

use serde_json::Value;

/// A compiled input schema. A schema the validator cannot compile checks only that the input is
/// an object (and says so once in the log).
pub struct InputSchema {
    validator: Option<jsonschema::Validator>,
}

impl InputSchema {
    pub fn new(tool: &str, schema: &Value) -> Self {
        match jsonschema::validator_for(schema) {
            Ok(v) => Self { validator: Some(v) },
            Err(e) => {
                tracing::warn!("the input schema of {tool} cannot be used ({e}); its arguments are checked only to be an object");
                Self { validator: None }
            }
        }
    }

    /// `Err` with every problem, each with where in the input it is.
    pub fn check(&self, input: &Value) -> Result<(), Mismatch> {
        if !input.is_object() {
            return Err(Mismatch {
                problems: vec![format!("expected a JSON object of arguments, got {input}")],
            });
        }
        let Some(v) = &self.validator else { return Ok(()) };
        problems(v, input, 5)
    }
}

/// How a value breaks a schema: each problem with where in the value it is (`/path: …`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .problems.join("; "))]
pub struct Mismatch {
    pub problems: Vec<String>,
}

/// Where `value` breaks `schema`, at most `max` problems, each with where in the value it is;
/// `Ok` when it fits. (Shared by tool arguments and output contracts.)
pub fn problems(schema: &jsonschema::Validator, value: &Value, max: usize) -> Result<(), Mismatch> {
    let found: Vec<String> = schema
        .iter_errors(value)
        .take(max)
        .map(|e| {
            let at = e.instance_path().to_string();
            if at.is_empty() {
                e.to_string()
            } else {
                format!("{at}: {e}")
            }
        })
        .collect();
    if found.is_empty() {
        Ok(())
    } else {
        Err(Mismatch { problems: found })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn required_fields_types_and_extra_fields() {
        let s = InputSchema::new(
            "t",
            &json!({"type": "object", "properties": {"channel": {"type": "string"}, "n": {"type": "integer"}},
                    "required": ["channel"], "additionalProperties": false}),
        );
        assert!(s.check(&json!({"channel": "C1"})).is_ok());
        let e = s.check(&json!({"n": "three", "extra": 1})).unwrap_err();
        assert!(
            e.problems
                .iter()
                .any(|p| p.contains("\"channel\" is a required property")),
            "{e}"
        );
        assert!(
            e.problems
                .contains(&"/n: \"three\" is not of type \"integer\"".to_string()),
            "{e}"
        );
        assert!(s.check(&json!("text")).is_err());
    }
}
