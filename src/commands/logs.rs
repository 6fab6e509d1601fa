//! `tabd logs [ROLE] [-f]`: today's daily log — every run's section and the one-line events — or
//! only one role's; with `-f`, what is appended next, as it comes (like `tail -f`).

use std::time::Duration;

use super::fire::runnable_role;
use super::{CliError, Workspace};
use crate::vault::VaultPath;

/// How often `-f` looks at the file (a person reading along does not need it faster).
const FOLLOW_EVERY: Duration = Duration::from_millis(500);

pub fn run(ws: &Workspace, role: Option<&str>, follow: bool) -> Result<u8, CliError> {
    let who = match role {
        Some(name) => Some(runnable_role(ws, name)?.display_name.clone()),
        None => None,
    };
    let log = crate::runlog::RunLog::new(ws.vault.clone(), ws.config.timezone);
    let mut day = log.daily_path(chrono::Utc::now());
    let mut printed = 0usize;
    let text = read(ws, &day);
    if text.is_empty() && !follow {
        println!("Nothing logged today yet ({day}).");
        return Ok(0);
    }
    print!("{}", pick(&text, who.as_deref()));
    printed += text.len();
    if !follow {
        return Ok(0);
    }
    loop {
        std::thread::sleep(FOLLOW_EVERY);
        let today = log.daily_path(chrono::Utc::now());
        if today != day {
            day = today; // a new day, a new file
            printed = 0;
        }
        let text = read(ws, &day);
        if text.len() > printed {
            // Whole sections only: what was appended since, from its first line.
            print!("{}", pick(&text[printed..], who.as_deref()));
            printed = text.len();
        }
    }
}

fn read(ws: &Workspace, day: &VaultPath) -> String {
    ws.vault.read_text(day, 64 * 1024 * 1024).unwrap_or_default()
}

/// The parts of a daily log about `who` (a role's display name): its run sections and its
/// event lines; everything when `who` is `None`.
fn pick(text: &str, who: Option<&str>) -> String {
    let Some(who) = who else {
        return text.to_string();
    };
    let tag = format!(" · {who} · ");
    let mut out = String::new();
    let mut in_section = false;
    for line in text.split_inclusive('\n') {
        if line.starts_with("## ") {
            in_section = line.contains(&tag);
            if in_section {
                out.push('\n');
            }
        } else if line.starts_with("- ") && line.contains(&tag) && !in_section {
            out.push_str(line);
            continue;
        }
        if in_section {
            out.push_str(line);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::pick;

    #[test]
    fn one_roles_sections_and_events() {
        let day = "# 2026-11-23\n\n## 09:00 · Delivery Manager · schedule\n- **Outcome:** ok\n\n### Summary\nDone.\n\n\
                   ## 09:05 · Risk Manager · inbox\n- **Outcome:** ok\n\n## Events\n- 10:00 · Delivery Manager · skipped — budget\n\
                   - 10:01 · Risk Manager · paused\n";
        let d = pick(day, Some("Delivery Manager"));
        assert!(
            d.contains("## 09:00 · Delivery Manager") && d.contains("Done."),
            "{d}"
        );
        assert!(d.contains("- 10:00 · Delivery Manager · skipped"), "{d}");
        assert!(!d.contains("Risk Manager"), "{d}");
        assert_eq!(pick(day, None), day);
    }
}
