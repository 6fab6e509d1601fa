//! Which calls run at once, which wait for the person and which are refused.

use serde::{Deserialize, Serialize};

use crate::role::Role;
use crate::tools::Risk;

/// What happens to a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Runs at once.
    Auto,
    /// Becomes an approval note; runs only when the person approves it.
    Ask,
    /// Refused; the model is told.
    Deny,
}

impl Mode {
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim() {
            "auto" => Some(Self::Auto),
            "ask" => Some(Self::Ask),
            "deny" => Some(Self::Deny),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Ask => "ask",
            Self::Deny => "deny",
        }
    }
}

/// The default for a class when the role says nothing: reads and vault writes run, anything that
/// reaches outside the vault asks.
pub fn default_mode(risk: Risk) -> Mode {
    match risk {
        Risk::Read | Risk::Write => Mode::Auto,
        Risk::Network | Risk::Destructive => Mode::Ask,
    }
}

/// The mode for a call of `tool` — a vault tool's name or `server/tool` — of class `risk`:
/// the tool's own entry, then `server/*`, then the class, then the default.
pub fn mode_for(role: &Role, tool: &str, risk: Risk) -> Mode {
    let map = &role.settings.approve;
    if let Some(m) = map.get(tool) {
        return *m;
    }
    if let Some((server, _)) = tool.split_once('/') {
        if let Some(m) = map.get(&format!("{server}/*")) {
            return *m;
        }
    }
    map.get(risk.as_str())
        .copied()
        .unwrap_or_else(|| default_mode(risk))
}
