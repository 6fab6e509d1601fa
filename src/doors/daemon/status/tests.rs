//! The two renderers, each checked whole against a snapshot (`insta`: `cargo insta review`, or
//! `INSTA_UPDATE=always cargo test` and read the diff): a quiet day, and a day where everything
//! that can hold work back does. A change of wording shows as a diff of the whole status a
//! person reads, not as one substring among hundreds.

use chrono::{DateTime, Utc};

use super::pause::PauseView;
use super::text::render_text_at;
use super::*;

fn at(t: &str) -> DateTime<Utc> {
    format!("2026-11-25T{t}Z").parse().expect("a time")
}

fn role(name: &str) -> RoleStatus {
    RoleStatus {
        role: name.to_string(),
        name: name.to_string(),
        state: "enabled".into(),
        daily_token_budget: 200_000,
        ..RoleStatus::default()
    }
}

/// A daemon at rest: two roles, one that ran this morning, nothing waiting.
fn quiet() -> StatusReport {
    let mut delivery = role("delivery");
    delivery.name = "Delivery Manager".into();
    delivery.last_run = Some(LastRunView {
        at: at("09:00:02"),
        outcome: "ok".into(),
        tokens: 12_345,
        cost_usd: 0.0421,
        error: None,
    });
    delivery.next_fire = Some(at("17:00:00"));
    delivery.tokens_today = 12_345;
    delivery.cost_today_usd = 0.0421;
    delivery.runs_today = 1;
    let risk = role("risk");
    StatusReport {
        vault: "/home/ana/Vault".into(),
        daemon_pid: Some(4242),
        provider: "anthropic claude-sonnet-4-5 at https://api.anthropic.com".into(),
        provider_paused: None,
        watching: "watching 2 inboxes".into(),
        tokens_today: 12_345,
        global_daily_token_budget: 1_000_000,
        cost_today_usd: 0.0421,
        global_daily_cost_budget_usd: Some(5.0),
        ledger_error: None,
        mcp_servers: vec![McpServerStatus {
            name: "memory".into(),
            up: true,
            error: None,
        }],
        roles: vec![delivery, risk],
        stranded: Vec::new(),
        unsandboxed: None,
        config_error: None,
        notify_problems: Vec::new(),
        write_problem: None,
        updated_at: at("10:15:00"),
        generation: 7,
        cluster: None,
        pauses: Vec::new(),
    }
}

/// Everything that holds work back at once: a paused role, a broken config, channels and
/// servers down, notes settling and waiting, approvals and a waiting run, role-file errors,
/// stranded notes, a cluster without quorum.
fn troubled() -> StatusReport {
    let mut r = quiet();
    let paused = PauseView {
        role: Some("risk".into()),
        all: false,
        since: Some(at("08:00:00")),
        until: Some(at("12:00:00")),
        by: "laptop".into(),
        every_device: true,
        unrecorded: None,
    };
    r.pauses = vec![paused.clone()];
    r.config_error = Some("config.toml:12: unknown key `tokns` (did you mean `tokens`?)".into());
    r.unsandboxed = Some("Landlock is not available on this kernel".into());
    r.provider_paused =
        Some("the key was refused (401) at 10:02; runs wait until the env file changes".into());
    r.notify_problems = vec!["ntfy: connection refused".into()];
    r.write_problem = Some("2 writes failed since 09:40 (disk full): daily/2026-11-25.md".into());
    r.ledger_error = Some("cannot write .tabd/state.json: disk full".into());
    r.mcp_servers.push(McpServerStatus {
        name: "github".into(),
        up: false,
        error: Some("exited with status 1: GITHUB_TOKEN is not set".into()),
    });
    r.stranded = vec![
        "agent/inbox/deliverry/ (1 note) — did you mean agent/inbox/delivery/? Move the notes there".into(),
    ];
    r.cluster = Some(a_cluster_without_quorum());
    let delivery = &mut r.roles[0];
    delivery.pending_notes = 3;
    delivery.draft_notes = 1;
    delivery.failed_notes = 2;
    delivery.unreadable_notes = vec!["link.md (a symlink)".into()];
    delivery.pending_approvals = vec!["agent/approvals/2026-11-25-delivery-post-a1b2.md".into()];
    delivery.waiting_runs = vec![("20261125-0900-delivery-x1".into(), at("09:01:10"))];
    delivery.next_fire = Some(at("17:00:00"));
    delivery.live = Some(InboxView {
        notes: 3,
        ready: 1,
        settling: 1,
        settle_until: Some(at("10:15:42")),
        typing: true,
        running_since: Some(at("10:14:30")),
        running_trigger: Some("inbox".into()),
        drafts: 1,
        waits: Some(Wait {
            until: at("10:20:00"),
            why: "min_interval 10m since its last run".into(),
        }),
        ..InboxView::default()
    });
    let risk = &mut r.roles[1];
    risk.state = "error (running last good version)".into();
    risk.paused = Some(paused);
    risk.errors = vec!["roles/risk.md:7: `schedule: 9am mondya` — did you mean `monday`?".into()];
    r
}

/// This device cannot reach a majority of the servers; the desktop ran the last delivery.
fn a_cluster_without_quorum() -> ClusterView {
    ClusterView {
        device: "laptop".into(),
        quorum: Some(false),
        lease_s: 30,
        when_alone: "wait".into(),
        devices: vec![
            DeviceView {
                device: "desktop".into(),
                last_heartbeat: at("10:14:58"),
            },
            DeviceView {
                device: "laptop".into(),
                last_heartbeat: at("10:14:59"),
            },
        ],
        last_runs: vec![RoleRunView {
            role: "delivery".into(),
            device: "desktop".into(),
            at: at("09:00:02"),
            outcome: "ok".into(),
        }],
    }
}

#[test]
fn the_status_note_of_a_quiet_day() {
    insta::assert_snapshot!(render_note(&quiet(), chrono_tz::Europe::Berlin));
}

#[test]
fn the_status_note_when_everything_holds_work_back() {
    insta::assert_snapshot!(render_note(&troubled(), chrono_tz::Europe::Berlin));
}

#[test]
fn tabd_status_on_a_quiet_day() {
    let r = quiet();
    insta::assert_snapshot!(render_text_at(&r, chrono_tz::Europe::Berlin, r.updated_at));
}

#[test]
fn tabd_status_when_everything_holds_work_back() {
    let r = troubled();
    insta::assert_snapshot!(render_text_at(&r, chrono_tz::Europe::Berlin, r.updated_at));
}

/// Without a daemon the note says so, and nothing only a daemon knows is claimed.
#[test]
fn the_status_note_written_with_no_daemon() {
    let mut r = quiet();
    r.daemon_pid = None;
    r.watching = "not running".into();
    r.mcp_servers.clear();
    insta::assert_snapshot!(render_note(&r, chrono_tz::UTC));
}
