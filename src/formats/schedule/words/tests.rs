use crate::formats::schedule::ScheduleLine;

fn words(phrase: &str) -> String {
    ScheduleLine::compile(phrase, 1)
        .unwrap_or_else(|e| panic!("{phrase}: {e}"))
        .unwrap_or_else(|| panic!("{phrase}: no schedule"))
        .understood
}

#[test]
fn words_are_read_from_the_compiled_fields() {
    for (phrase, want) in [
        ("9am and 5pm, weekdays", "weekdays at 09:00 and 17:00"),
        ("0 9,17 * * 1-5", "weekdays at 09:00 and 17:00"),
        ("9:30am and 5pm", "every day at 09:30 and 17:00"),
        ("every 30 min", "every day, every 30 min"),
        ("every 2 hours", "every day, every 2 hours"),
        ("hourly", "every day, every hour"),
        (
            "every 30 min, 9am-6pm weekdays",
            "weekdays, every 30 min from 09:00 to 17:30",
        ),
        (
            "every 2 hours, 9am-6pm",
            "every day, every 2 hours from 09:00 to 17:00",
        ),
        (
            "every 30 min, 10pm-2am",
            "every day, every 30 min from 00:00 to 01:30 and every 30 min from 22:00 to 23:30",
        ),
        ("*/10 * * * * *", "every day, every 10 seconds"),
        ("tue,thu at 14:00", "tue,thu at 14:00"),
        ("mon-wed and fri at 9am", "mon-wed,fri at 09:00"),
        ("weekends at 11am", "weekends at 11:00"),
        ("friday at 4pm and monday at 9am", "fri at 16:00; mon at 09:00"),
        ("monthly on the 15th at 10am", "the 15th of the month at 10:00"),
        ("first monday of the month", "the 1st mon of the month at 09:00"),
        (
            "last friday of the month at 4pm",
            "the last fri of the month at 16:00",
        ),
        (
            "last day of the month at 18:00",
            "the last day of the month at 18:00",
        ),
        ("0 9 1,15 * *", "the 1st and 15th of the month at 09:00"),
        ("0 9 1 * 1", "the 1st of the month or mon at 09:00"),
        ("@yearly", "the 1st of jan at 00:00"),
        ("@weekly", "sun at 00:00"),
        ("0 12 * 6-8 1-5", "weekdays in jun-aug at 12:00"),
        ("every friday at 4pm UTC", "fri at 16:00 (UTC)"),
        ("every 12 hours, 9am-6pm", "every day at 09:00"),
    ] {
        assert_eq!(words(phrase), want, "{phrase}");
    }
}
