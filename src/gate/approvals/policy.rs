//! Which calls run at once, which wait for the person and which are refused.

use crate::base::calls::{Mode, Risk};
use crate::setup::role::Role;

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
