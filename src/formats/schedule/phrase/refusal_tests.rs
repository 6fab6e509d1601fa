//! Refusals suggest few forms, near what was typed, and only forms tabd accepts (issue 39,
//! item 7: `weekdays 9-5 every hour` was told to "write `every 9 min`", which is refused, after
//! a list of ~25 forms).

use super::near::FORMS;
use super::*;

/// Every backquoted piece of a message: the forms it suggests.
fn suggestions(message: &str) -> Vec<&str> {
    message.split('`').skip(1).step_by(2).collect()
}

/// Accepted as a role's `## Schedule` reads it: a line, or lines joined by `;`.
fn accepted(form: &str) -> Result<(), String> {
    for part in form.split(';') {
        compile(part).map_err(|e| format!("`{form}` → {e}"))?;
    }
    Ok(())
}

/// Phrases people get wrong: the docs' refused table, typos of accepted forms, numbers where
/// times go, intervals that do not divide the hour or day, windows without am/pm.
#[allow(
    clippy::too_many_lines,
    reason = "a table of phrases, one a line; length is a production rule"
)]
fn refusals() -> Vec<String> {
    let mut out: Vec<String> = [
        "every other day",
        "every 2 days at 9am",
        "biweekly on monday",
        "fortnightly",
        "31st of the month",
        "29th of the month at 9am",
        "1st and 15th of the month",
        "15th of the month and last friday of the month",
        "on the 1st, weekly",
        "twice a week",
        "2x/week",
        "twice a month",
        "weekdays at 9am and saturdays",
        "4pm EST",
        "9am CET",
        "weekdays 9-5 every hour",
        "9-5 weekdays",
        "every hour 9-17",
        "every 9 min",
        "every 45 min",
        "every 5 hours",
        "every 7 seconds",
        "every 30 parsecs",
        "every",
        "during lunch",
        "every 30 min at 9am",
        "9am-6pm",
        "monthly every 30 min",
        "first monday of the month on fridays",
        "sixth monday of the month",
        "13pm",
        "25:00",
        "9:5",
        "9:75",
        "4x/day",
        "at 9am Europe/Lisbn",
        "at 9am UTC in Asia/Tokyo",
        "9am and 5pn",
        "mondayz at 10am",
        "0 9 * * 8",
        "61 * * * *",
        "0 25 * * *",
        "@fortnightly",
        "soon",
        "whenever",
        "9",
        "at 99",
        "weekdays 17",
        "every day at 9am #",
        // Issue 48: the new user's walk.
        "every hour between 6 and 10",
        "every hour between 22 and 2",
        "every hour between 0 and 6",
        "sunday at 9 and every day at 5 except sunday",
        "every 30 min 4-8",
        "between 9 and 5",
        "every evening at 7:30",
        "every night at 12",
        "every sunday night at midnight",
        "every morning at 3pm",
        "every morning at 8 and evening at 6",
        "every 30 min in the morning",
        "second business day of the month",
        "every day except holidays",
        "weekends except saturday and sunday",
        "every other Monday",
        "every second friday",
        "every 2 weeks on friday",
        "every other week",
        "every other month",
        "every 2 months",
        "every other hour",
        "every other minute",
        "every other blue",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for n in 0..=130 {
        out.push(format!("{n}"));
        out.push(format!("weekdays {n}"));
        out.push(format!("every {n} min"));
        out.push(format!("every {n} hours"));
        out.push(format!("every {n} seconds"));
        out.push(format!("{n}-{} weekdays", (n + 8) % 24));
    }
    // A typo in each word of each form.
    for form in FORMS {
        let words: Vec<&str> = form.split_whitespace().collect();
        for i in 0..words.len() {
            let mut typo = words.clone();
            let bent = format!("{}q", words[i]);
            typo[i] = &bent;
            out.push(typo.join(" "));
        }
    }
    out.retain(|p| compile(p).is_err());
    out
}

#[test]
fn every_form_a_refusal_suggests_is_accepted() {
    for form in FORMS {
        assert!(accepted(form).is_ok(), "{form}: {:?}", accepted(form));
    }
    let refused = refusals();
    assert!(refused.len() > 800, "{} refusals", refused.len());
    let mut wrong = Vec::new();
    for phrase in &refused {
        let Err(e) = compile(phrase) else { continue };
        let message = e.to_string();
        for form in suggestions(&message) {
            if let Err(why) = accepted(form) {
                wrong.push(format!("{phrase:?} suggests {why}\n  {message}"));
            }
        }
        let near = message
            .split("Forms like it: ")
            .nth(1)
            .map_or(0, |rest| rest.matches(" · ").count() + 1);
        if !(1..=3).contains(&near) {
            wrong.push(format!("{phrase:?} lists {near} forms: {message}"));
        }
    }
    assert!(wrong.is_empty(), "{} wrong:\n{}", wrong.len(), wrong.join("\n"));
}

#[test]
fn a_refusal_lists_the_forms_near_what_was_typed() {
    for (phrase, near) in [
        ("weekdays 9-30 every hour", "every hour, 9am-5pm"),
        ("every 45 min", "every 30 min"),
        ("1st and 15th of the month", "1st of the month at 9am"),
        ("twice a week", "weekly on monday"),
        ("mondayz at 10am", "mondays at 10am"),
        ("4pm EST", "every friday at 4pm UTC"),
        ("sixth monday of the month", "first monday of the month"),
    ] {
        let message = compile(phrase).unwrap_err().to_string();
        let listed = message.split("Forms like it: ").nth(1).unwrap_or_default();
        assert!(listed.contains(&format!("`{near}`")), "{phrase}: {message}");
    }
    let message = compile("weekdays 9-30 every hour").unwrap_err().to_string();
    assert!(!message.contains("every 9 min"), "{message}");
    assert!(message.contains("`every hour, 9am-5pm`"), "{message}");
}
