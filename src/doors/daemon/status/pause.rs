//! What `tabd status` and `agent/status.md` show of the person's pauses (docs/spec.md §28): the kill
//! switch first — one line (or callout) per pause, with until when and how to end it — and each
//! paused role's state. Pure: `status` calls these with the pauses that hold now.

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use serde::{Deserialize, Serialize};

use crate::records::state::pause::{Held, Paused, Target};

/// A pause as status shows it (`tabd status --json`: `pauses`, and each role's `paused`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PauseView {
    /// The role it holds; `null` with `all`.
    pub role: Option<String>,
    /// It holds every role (`tabd pause --all`).
    pub all: bool,
    /// When it began (`null`: not known — its record is gone).
    pub since: Option<DateTime<Utc>>,
    /// When it ends by itself (`--for`); `null`: at `tabd resume`.
    pub until: Option<DateTime<Utc>>,
    /// The device it was asked on.
    pub by: String,
    /// With `[cluster]`: every device holds it (`false`: this device only).
    pub every_device: bool,
    /// Why it holds without a record of it (a restored copy, a book that cannot be read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unrecorded: Option<String>,
}

impl PauseView {
    fn of(h: &Held) -> Self {
        Self {
            role: h.target.role().map(str::to_string),
            all: h.target == Target::All,
            since: h.since,
            until: h.until,
            by: h.by.clone(),
            every_device: h.shared,
            unrecorded: h.unrecorded.clone(),
        }
    }

    fn resume_arg(&self) -> &str {
        self.role.as_deref().unwrap_or("--all")
    }

    /// `every role until 13:05 (by laptop; every device) — `tabd resume --all``.
    fn words(&self, tz: Tz) -> String {
        let what = match &self.role {
            None => "every role".to_string(),
            Some(r) => r.clone(),
        };
        if let Some(why) = &self.unrecorded {
            return format!("{what}: {why}");
        }
        let until = self.until.map_or_else(
            || "until you resume it".to_string(),
            |u| format!("until {}", crate::base::text::shown(u, tz)),
        );
        let mut by = Vec::new();
        if let Some(s) = self.since {
            by.push(format!("since {}", crate::base::text::shown(s, tz)));
        }
        if !self.by.is_empty() {
            by.push(format!("by {}", self.by));
        }
        if self.every_device {
            by.push("every device".into());
        }
        format!(
            "{what} {until} ({}) — `tabd resume {}` ends it",
            by.join(", "),
            self.resume_arg()
        )
    }
}

/// Every pause that holds, for the report.
pub fn views(paused: &Paused) -> Vec<PauseView> {
    paused.iter().map(PauseView::of).collect()
}

/// The pause that holds `role`, for its status.
pub fn of(paused: &Paused, role: &str) -> Option<PauseView> {
    paused.of(role).map(PauseView::of)
}

/// The top lines of `tabd status`: `PAUSED BY YOU: …`, one per pause.
pub fn text_lines(pauses: &[PauseView], tz: Tz) -> String {
    pauses
        .iter()
        .map(|p| format!("PAUSED BY YOU: {}\n", p.words(tz)))
        .collect()
}

/// The callout at the top of `agent/status.md`.
pub fn callout(pauses: &[PauseView], tz: Tz) -> String {
    if pauses.is_empty() {
        return String::new();
    }
    let mut s = String::from(
        "> [!warning] Paused by you (`tabd pause`)\n> Nothing of a paused role runs: its scheduled runs are skipped (not caught up), its notes wait in its inbox.\n",
    );
    for p in pauses {
        s.push_str(&format!("> - {}\n", p.words(tz)));
    }
    s.push('\n');
    s
}

/// What a paused role's state line adds: ` · PAUSED until 13:05`.
pub fn state_suffix(paused: Option<&PauseView>, tz: Tz) -> String {
    let Some(p) = paused else {
        return String::new();
    };
    let until = p.until.map_or_else(
        || "until you resume it".to_string(),
        |u| format!("until {}", crate::base::text::shown(u, tz)),
    );
    let all = if p.all { " (every role)" } else { "" };
    format!(" · PAUSED{all} {until}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pause_is_said_with_its_end_and_how_to_end_it() {
        let tz = chrono_tz::UTC;
        let held = Held {
            target: Target::Role("risk".into()),
            since: Some("2026-11-25T09:00:00Z".parse().unwrap()),
            until: Some("2026-11-25T11:00:00Z".parse().unwrap()),
            by: "laptop".into(),
            shared: true,
            unrecorded: None,
        };
        let paused = Paused([(held.target.clone(), held)].into_iter().collect());
        let v = views(&paused);
        assert_eq!(
            text_lines(&v, tz),
            "PAUSED BY YOU: risk until 2026-11-25 11:00 (since 2026-11-25 09:00, by laptop, every device) — `tabd resume risk` ends it\n"
        );
        assert!(callout(&v, tz).starts_with("> [!warning] Paused by you"));
        assert_eq!(
            state_suffix(of(&paused, "risk").as_ref(), tz),
            " · PAUSED until 2026-11-25 11:00"
        );
        assert!(of(&paused, "ops").is_none());
        assert_eq!(callout(&[], tz), "");
    }
}
