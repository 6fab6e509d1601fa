//! The schedule corpus (issue 39, item 7): several hundred phrases — every form in
//! docs/schedules.md and generated combinations of days, dates, times, intervals and windows —
//! each compiled, put into words from its crons, those words read back (`meaning`, which knows
//! nothing of croner or of `words`), and the fires croner gives compared with the fires the
//! words promise over a year and across the DST changes of Europe/Berlin and America/New_York.

mod meaning;
mod phrases;

use chrono::{DateTime, Duration, NaiveDate, Utc};
use chrono_tz::Tz;

use super::{Schedule, ScheduleLine};

/// The fires compared from each start: the first forty, within two years.
const FIRES: usize = 40;
const HORIZON_DAYS: i64 = 731;

fn utc(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s)
        .unwrap_or_else(|e| panic!("{s}: {e}"))
        .with_timezone(&Utc)
}

/// Zones with the instants their clocks change in 2026.
fn zones() -> Vec<(Tz, [DateTime<Utc>; 2])> {
    vec![
        (
            chrono_tz::Europe::Berlin,
            [utc("2026-03-29T01:00:00Z"), utc("2026-10-25T01:00:00Z")],
        ),
        (
            chrono_tz::America::New_York,
            [utc("2026-03-08T07:00:00Z"), utc("2026-11-01T06:00:00Z")],
        ),
    ]
}

/// The starts to compare from: the year's, and a day and ten minutes before each change (a
/// dense grid's forty fires reach the change only from the second).
fn starts(changes: &[DateTime<Utc>; 2]) -> Vec<DateTime<Utc>> {
    let mut out = vec![utc("2026-01-01T00:00:00Z")];
    for c in changes {
        out.push(*c - Duration::hours(26));
        out.push(*c - Duration::minutes(10));
    }
    out
}

fn corpus() -> Vec<phrases::Case> {
    let mut all = phrases::documented();
    all.extend(phrases::days_and_times());
    all.extend(phrases::monthly());
    all.extend(phrases::intervals());
    all.extend(phrases::others());
    all.extend(phrases::walk());
    all
}

/// The new user's walk (issue 48): each phrase compiles to its crons, or is refused with the
/// advice it was written to get, the phrase quoted.
#[test]
fn the_walk_reads_as_expected() {
    let mut wrong = Vec::new();
    for (phrase, expect) in phrases::WALK {
        let got = super::phrase::compile(phrase);
        match (expect, &got) {
            (phrases::Expect::Crons(want), Ok(Some(c))) if c.crons == *want => {}
            (phrases::Expect::Refused(words), Err(e))
                if e.to_string().contains(words) && e.to_string().contains(&format!("\"{phrase}\"")) => {}
            (phrases::Expect::Crons(want), _) => {
                wrong.push(format!("{phrase:?}: want {want:?}, got {got:?}"))
            }
            (phrases::Expect::Refused(words), _) => wrong.push(format!(
                "{phrase:?}: want a refusal saying {words:?}, got {}",
                match &got {
                    Ok(c) => format!("{c:?}"),
                    Err(e) => e.to_string(),
                }
            )),
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {}:\n{}",
        wrong.len(),
        phrases::WALK.len(),
        wrong.join("\n")
    );
}

fn show(times: &[DateTime<Utc>], tz: Tz) -> Vec<String> {
    times
        .iter()
        .map(|t| t.with_timezone(&tz).format("%a %F %T %Z").to_string())
        .collect()
}

/// Phrase → cron → words, and every accepted phrase fires exactly when its words say.
#[test]
fn every_phrase_fires_when_its_words_say() {
    let cases = corpus();
    assert!(cases.len() >= 500, "{} phrases", cases.len());
    // Two workers: the corpus takes ~7 s of one core in a debug build.
    let (left, right) = cases.split_at(cases.len() / 2);
    let (mut checked, mut wrong) = (0, Vec::new());
    std::thread::scope(|s| {
        let workers = [left, right].map(|part| s.spawn(move || part.iter().map(check).collect::<Vec<_>>()));
        for worker in workers {
            for r in worker
                .join()
                .unwrap_or_else(|_| panic!("a corpus worker panicked"))
            {
                match r {
                    Ok(true) => checked += 1,
                    Ok(false) => {}
                    Err(e) => wrong.push(e),
                }
            }
        }
    });
    assert!(
        wrong.is_empty(),
        "{} of {} phrases:\n{}",
        wrong.len(),
        cases.len(),
        wrong.join("\n")
    );
    assert!(checked >= 500, "{checked} phrases checked");
}

/// One phrase: `Ok(false)` when it is no schedule (`on-demand`), `Err` with what disagrees.
fn check(case: &phrases::Case) -> Result<bool, String> {
    let Some(line) = ScheduleLine::compile(&case.phrase, 1)
        .map_err(|e| format!("the corpus phrase {:?} is refused: {e}", case.phrase))?
    else {
        return Ok(false);
    };
    let words = &line.understood;
    let crons = line.cron_exprs().collect::<Vec<_>>();
    let meaning = meaning::read(words).map_err(|e| {
        format!(
            "{:?} → {crons:?} → {words:?} does not read back: {e}",
            case.phrase
        )
    })?;
    if let Some(intended) = &case.intended {
        let mut d = NaiveDate::from_ymd_opt(2026, 1, 1).unwrap_or_default();
        for _ in 0..366 {
            let (said, meant) = (meaning.times_on(d), intended(d));
            if said != meant {
                return Err(format!(
                        "{:?} → {crons:?} → {words:?} on {d}: the words say {said:?}, it was written to mean {meant:?}",
                        case.phrase
                    ));
            }
            d += Duration::days(1);
        }
    }
    for (tz, changes) in zones() {
        let schedule = Schedule {
            lines: vec![line.clone()],
            tz,
        };
        for start in starts(&changes) {
            let until = start + Duration::days(HORIZON_DAYS);
            let fired = schedule.fires_between(start, until, FIRES);
            let said = meaning.fires(tz, start, until, FIRES);
            if fired != said {
                let zone = line.zone.unwrap_or(tz);
                let (fired, said) = (show(&fired, zone), show(&said, zone));
                let at = fired.iter().zip(&said).position(|(a, b)| a != b).unwrap_or(0);
                return Err(format!(
                    "{:?} → {crons:?} → {words:?} in {tz} after {start}: fired {:?}, the words say {:?}",
                    case.phrase,
                    &fired[at..(at + 3).min(fired.len())],
                    &said[at..(at + 3).min(said.len())]
                ));
            }
        }
    }
    Ok(true)
}
