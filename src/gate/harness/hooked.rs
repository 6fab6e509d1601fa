//! The person's hooks around one call (docs/spec.md §28): the pre_tool hooks before `approve` and
//! everything after it sees the arguments they let through; the post_tool hooks' lines beside
//! the result of a call that ran.

use serde_json::Value;

use super::{Caller, Classified, Gated, Harness};
use crate::base::calls::ToolResult;
use crate::capabilities::telemetry::Approval;
use crate::capabilities::tools::FatalToolError;

impl Harness {
    /// A call the role has, past the person's hooks: the pre_tool hooks first (a denial is the
    /// call's result; arguments they replace are what every later check and the call itself
    /// see), then `decide`, then — for a call that ran — the post_tool hooks' lines beside its
    /// result. A hook that fails says so in the run's daily section.
    pub(super) async fn hooked(
        &self,
        name: &str,
        args: &mut std::borrow::Cow<'_, Value>,
        caller: Caller<'_>,
        call: &Classified<'_>,
    ) -> Result<Gated, FatalToolError> {
        let hooks = self.ticket.hooks.clone();
        if hooks.is_empty() {
            return self.decide(name, args, caller, call).await;
        }
        let (call_id, approved) = match caller {
            Caller::Model { call_id, .. } => (call_id, false),
            Caller::Approved => (None, true),
        };
        let asked = crate::gate::hooks::Call {
            tool: &call.key,
            risk: call.risk,
            input: args,
            call_id,
            approved,
        };
        let mut replaced = false;
        match hooks.pre_tool(&asked).await {
            crate::gate::hooks::Verdict::Deny { to_model, daily } => {
                if let Some(line) = daily {
                    self.note(line);
                }
                return Ok(Gated::Done(ToolResult::error(to_model), None, Approval::Refused));
            }
            crate::gate::hooks::Verdict::Allow(None) => {}
            crate::gate::hooks::Verdict::Allow(Some(new)) if new != **args => {
                if let Some(refusal) = self.unfit_replacement(&new, caller) {
                    return Ok(Gated::Done(ToolResult::error(refusal), None, Approval::Refused));
                }
                *args = std::borrow::Cow::Owned(new);
                replaced = true;
            }
            crate::gate::hooks::Verdict::Allow(Some(_)) => {}
        }
        let gated = self.decide(name, args, caller, call).await?;
        let Gated::Done(mut result, note, approval @ (Approval::Allowed | Approval::Approved)) = gated else {
            return Ok(gated);
        };
        if replaced {
            result
                .text
                .push_str("\n\nhook: the person's pre_tool hook changed this call's arguments before it ran");
        }
        let ran = crate::gate::hooks::Call {
            tool: &call.key,
            risk: call.risk,
            input: args,
            call_id,
            approved,
        };
        let after = hooks.post_tool(&ran, &result).await;
        for line in after.for_model {
            result.text.push_str("\n\n");
            result.text.push_str(&line);
        }
        for line in after.daily {
            self.note(line);
        }
        Ok(Gated::Done(result, note, approval))
    }

    /// Why arguments a pre_tool hook put in place of the call's are refused: nested too deep to
    /// keep, or — for a call the person approved — not those they approved.
    fn unfit_replacement(&self, new: &Value, caller: Caller<'_>) -> Option<String> {
        if let Err(e) = crate::formats::json::check(new) {
            return Some(format!(
                "refused: the arguments the person's pre_tool hook gave cannot be read: {e}"
            ));
        }
        match caller {
            Caller::Approved => Some(
                "not run: the person's pre_tool hook changed the arguments the person approved;                  what runs must be what they saw"
                    .into(),
            ),
            Caller::Model { .. } => None,
        }
    }
}
