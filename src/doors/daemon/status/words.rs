//! The words both renderers share: times as a person reads them, spending against a budget, a
//! role's state line, notes still settling, drafts held, the cluster line.

use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use super::{ClusterView, InboxView, RoleStatus};
use crate::base::cost::dollars;
use crate::base::text::thousands;

pub(super) fn when(t: DateTime<Utc>, tz: Tz, now: DateTime<Utc>) -> String {
    let local = t.with_timezone(&tz);
    if local.date_naive() == now.with_timezone(&tz).date_naive() {
        local.format("%H:%M").to_string()
    } else {
        local.format("%a %m-%d %H:%M").to_string()
    }
}

/// `when`, with seconds: a time min_interval holds something back to is to the second.
pub(super) fn when_to_the_second(t: DateTime<Utc>, tz: Tz, now: DateTime<Utc>) -> String {
    let local = t.with_timezone(&tz);
    if local.date_naive() == now.with_timezone(&tz).date_naive() {
        local.format("%H:%M:%S").to_string()
    } else {
        local.format("%a %m-%d %H:%M:%S").to_string()
    }
}

pub(super) fn spend(tokens: u64, budget: u64, cost: f64, cost_budget: Option<f64>) -> String {
    let mut s = format!("{} / {}", thousands(tokens), thousands(budget));
    match cost_budget {
        Some(b) => s.push_str(&format!(" · {} / {}", dollars(cost), dollars(b))),
        None if cost > 0.0 => s.push_str(&format!(" · {}", dollars(cost))),
        None => {}
    }
    s
}

/// `, 1 draft — held` when notes wait as drafts: they are pending, but never run until the
/// person takes `status: draft` out.
pub(super) fn drafts_held(n: usize) -> String {
    match n {
        0 => String::new(),
        1 => " (1 draft — held until you remove its `status: draft`)".into(),
        n => format!(" ({n} drafts — held until you remove their `status: draft`)"),
    }
}

/// The role's state, with a pause that holds it and a run going on: `enabled · PAUSED until
/// `tabd resume` · running since 14:02:11 (inbox)`.
pub(super) fn state_line(role: &RoleStatus, tz: Tz) -> String {
    let paused = super::pause::state_suffix(role.paused.as_ref(), tz);
    let state = format!("{}{paused}", role.state);
    match role.live.as_ref().and_then(|l| l.running_since.map(|t| (t, l))) {
        Some((since, l)) => format!(
            "{state} · running since {} ({})",
            since.with_timezone(&tz).format("%H:%M:%S"),
            l.running_trigger.as_deref().unwrap_or("run")
        ),
        None => state,
    }
}

/// Notes still being written: `1 note settling — waits 42 s more for you to finish typing`.
pub(super) fn settling_line(view: &InboxView, now: DateTime<Utc>, tz: Tz) -> Option<String> {
    if view.settling == 0 {
        return None;
    }
    let count = format!(
        "{} note{} settling",
        view.settling,
        if view.settling == 1 { "" } else { "s" }
    );
    let wait = match view.settle_until {
        None => "empty, waits for its first words".to_string(),
        Some(t) => {
            let left = (t - now).num_seconds().max(0);
            let until = t.with_timezone(&tz).format("%H:%M:%S");
            if view.typing {
                format!(
                    "waits {left} s more (until {until}) for you to finish typing; `status: draft` holds it longer"
                )
            } else {
                format!("waits {left} s more (until {until}) to be sure it is complete")
            }
        }
    };
    Some(format!("{count} — {wait}"))
}

/// One line: `device laptop · quorum yes · devices: desktop (09:00:03), laptop (09:00:01)`.
pub(super) fn cluster_line(c: &ClusterView, tz: Tz) -> String {
    let quorum = match c.quorum {
        Some(true) => "yes".to_string(),
        Some(false) => format!("no (when_alone: {})", c.when_alone),
        None => "not known yet".to_string(),
    };
    let seen: Vec<String> = c
        .devices
        .iter()
        .map(|d| {
            format!(
                "{} ({})",
                d.device,
                d.last_heartbeat.with_timezone(&tz).format("%Y-%m-%d %H:%M:%S")
            )
        })
        .collect();
    format!(
        "device {} · quorum {quorum} · lease {} s · devices seen: {}",
        c.device,
        c.lease_s,
        if seen.is_empty() {
            "none yet".to_string()
        } else {
            seen.join(", ")
        }
    )
}
