//! `triage_model` (docs/spec.md §25) checked against the config, at the setting's line: a warning when
//! it cannot be used as written (a CLI agent's provider), is the role's own model, or has no
//! price tabd knows (its runs would read as free).

use super::RoleDef;
use crate::base::cost::PriceBook;
use crate::base::diag::Diagnostic;
use crate::setup::config::{ProviderConfig, ProviderKind};

/// What the config says of models, for these checks.
#[derive(Debug, Clone)]
pub struct ModelsKnown {
    pub provider: ProviderConfig,
    pub prices: PriceBook,
}

/// Warnings for the `triage_model` a role file sets itself.
pub(super) fn check(def: &mut RoleDef, known: &ModelsKnown) {
    let Some(triage) = def.settings.triage_model.clone() else {
        return;
    };
    let line = def.key_lines.get("triage_model").copied().unwrap_or(0);
    let model = def.settings.model(&known.provider);
    let problem = match known.provider.kind {
        ProviderKind::Command => Some(
            "`triage_model` is not used with [provider] kind = \"command\": an agent CLI's turn is a whole \
             session, not one request a cheaper model could answer; remove it"
                .to_string(),
        ),
        _ if triage == model => Some(format!(
            "`triage_model` is the role's own model ({model}): a scheduled run that finds work would ask it \
             twice; name a cheaper model of the same provider, or remove it"
        )),
        ProviderKind::Anthropic if known.prices.price(&triage).is_none() => Some(format!(
            "`triage_model` {triage} has no price tabd knows: its requests are counted as $0; check the \
             name, or add [prices.\"{triage}\"] to the config"
        )),
        _ => None,
    };
    if let Some(message) = problem {
        def.diagnostics
            .push(Diagnostic::warning(&def.path, line, message));
    }
}
