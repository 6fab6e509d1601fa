//! The few accepted forms nearest what was typed, for a refusal: the forms that share the most
//! kinds of word with it (an interval, a window, weekdays, a day of the month, times a day,
//! clock times, cron), then the most words. Every form here is accepted
//! (`tests::every_form_a_refusal_suggests_is_accepted`).

/// What a refusal may suggest, in the order ties are broken.
pub(super) const FORMS: &[&str] = &[
    "9am and 5pm, weekdays",
    "every 30 min",
    "every 30 min, 9am-6pm weekdays",
    "every hour, 9am-5pm",
    "every 2 hours",
    "hourly",
    "every 15 min during work hours",
    "daily at 8:30",
    "at 9",
    "at noon",
    "twice a day",
    "2x/day",
    "mondays at 10am",
    "every friday at 4pm",
    "mon,wed,fri at 9am",
    "tue,thu at 14:00",
    "weekends at 11am",
    "weekly on monday",
    "monthly",
    "1st of the month at 9am",
    "first monday of the month",
    "last friday of the month",
    "last day of the month at 18:00",
    "every friday at 4pm UTC",
    "weekdays at 9am in America/New_York",
    "0 9,17 * * 1-5",
    "@daily",
    "on-demand",
    // Issue 48: forms a new user reached for.
    "at 9 and 5",
    "every morning at 8",
];

/// How many forms a refusal lists.
const HOW_MANY: usize = 3;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Interval,
    Window,
    Weekday,
    MonthDay,
    PerDay,
    Clock,
    Cron,
    Zone,
    NoSchedule,
}

fn kinds_of(word: &str) -> Vec<Kind> {
    let w = word.trim_matches(|c: char| c == ',' || c == '.' || c == ';');
    let days = [
        "sun", "mon", "tue", "wed", "thu", "fri", "sat", "weekday", "weekend", "week",
    ];
    let mut out = Vec::new();
    let digits = w.chars().any(|c| c.is_ascii_digit());
    if [
        "every", "min", "mins", "minute", "minutes", "hour", "hours", "hourly", "sec", "seconds",
    ]
    .contains(&w)
    {
        out.push(Kind::Interval);
    }
    if ["between", "during", "until", "to", "work", "business", "office"].contains(&w)
        || (digits && w.contains('-') && !w.contains('*'))
    {
        out.push(Kind::Window);
    }
    if days.iter().any(|d| w.starts_with(d)) {
        out.push(Kind::Weekday);
    }
    let ordinal = digits && ["st", "nd", "rd", "th"].iter().any(|s| w.ends_with(s));
    if ordinal
        || [
            "month", "monthly", "first", "second", "third", "fourth", "fifth", "last",
        ]
        .contains(&w)
    {
        out.push(Kind::MonthDay);
    }
    if ["once", "twice", "thrice", "times", "daily", "day", "everyday"].contains(&w) || w.contains("x/") {
        out.push(Kind::PerDay);
    }
    if w == "at" || w == "noon" || w == "midnight" || (digits && !ordinal && !w.contains('*')) {
        out.push(Kind::Clock);
    }
    if w.contains('*') || w.starts_with('@') {
        out.push(Kind::Cron);
    }
    let zones = [
        "utc", "gmt", "in", "est", "edt", "cst", "cdt", "mst", "mdt", "pst", "pdt", "cet", "cest", "bst",
        "ist", "eet", "eest", "wet", "west", "jst", "aest",
    ];
    if (w.contains('/') && !w.contains("x/")) || zones.contains(&w) {
        out.push(Kind::Zone);
    }
    if ["on-demand", "manual", "none", "never", "demand"].contains(&w) {
        out.push(Kind::NoSchedule);
    }
    out
}

/// The words of a phrase or form, lower case, split at spaces and commas.
fn words_of(text: &str) -> Vec<String> {
    text.to_lowercase()
        .split(|c: char| c.is_whitespace() || c == ',' || c == ';')
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

fn score(typed: &[String], form: &str) -> usize {
    let form_words = words_of(form);
    let kinds = |words: &[String]| -> Vec<Kind> {
        let mut all: Vec<Kind> = Vec::new();
        for k in words.iter().flat_map(|w| kinds_of(w)) {
            if !all.contains(&k) {
                all.push(k);
            }
        }
        all
    };
    let (typed_kinds, form_kinds) = (kinds(typed), kinds(&form_words));
    let shared_kinds = form_kinds.iter().filter(|k| typed_kinds.contains(k)).count();
    let missing = form_kinds.len() - shared_kinds;
    let stop = ["at", "the", "of", "a", "and", "on", "in"];
    let shared_words = form_words
        .iter()
        .filter(|w| !stop.contains(&w.as_str()) && typed.contains(w))
        .count();
    (3 * shared_kinds + 2 * shared_words).saturating_sub(missing)
}

/// The forms nearest `phrase`, best first, at most three.
pub(super) fn forms_like(phrase: &str) -> Vec<&'static str> {
    let typed = words_of(phrase);
    let mut scored: Vec<(usize, usize, &'static str)> = FORMS
        .iter()
        .enumerate()
        .map(|(i, f)| (score(&typed, f), i, *f))
        .filter(|(s, _, _)| *s > 0)
        .collect();
    scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut out: Vec<&'static str> = scored.into_iter().take(HOW_MANY).map(|(_, _, f)| f).collect();
    if out.is_empty() {
        out = FORMS[..HOW_MANY].to_vec();
    }
    out
}

/// `` `a` · `b` · `c` ``, for the message.
pub(super) fn listed(phrase: &str) -> String {
    forms_like(phrase)
        .iter()
        .map(|f| format!("`{f}`"))
        .collect::<Vec<_>>()
        .join(" · ")
}
