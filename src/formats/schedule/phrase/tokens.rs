//! A schedule phrase as tokens: times (`9am`, `17:30`, `noon`), numbers, words, dashes, commas.

use super::Reason;

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Token {
    Time(u32, u32),
    Num(u32),
    Word(String),
    Dash,
    Comma,
}

pub(super) fn tokenize(s: &str) -> Result<Vec<Token>, Reason> {
    let chars: Vec<char> = s.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() || c == '&' {
            if c == '&' {
                out.push(Token::Word("and".into()));
            }
            i += 1;
        } else if c == ',' {
            out.push(Token::Comma);
            i += 1;
        } else if c == '-' {
            out.push(Token::Dash);
            i += 1;
        } else if c.is_ascii_digit() {
            out.extend(number(&chars, &mut i)?);
        } else if c.is_alphabetic() {
            let start = i;
            while i < chars.len() && (chars[i].is_alphabetic() || chars[i] == '/') {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            match word.as_str() {
                "noon" | "midday" => out.push(Token::Time(12, 0)),
                "midnight" => out.push(Token::Time(0, 0)),
                _ => out.push(Token::Word(word)),
            }
        } else {
            return Err(Reason::UnexpectedCharacter(c));
        }
    }
    Ok(out)
}

/// A number at `chars[*i]`: a time (`9am`, `9 am`, `17:30`), the `2x/day` shorthand, or a plain
/// number. Advances `*i` past what it read.
fn number(chars: &[char], i: &mut usize) -> Result<Vec<Token>, Reason> {
    let start = *i;
    while *i < chars.len() && chars[*i].is_ascii_digit() {
        *i += 1;
    }
    let num: String = chars[start..*i].iter().collect();
    let hour: u32 = num.parse().map_err(|_| Reason::NumberTooLarge(num.clone()))?;
    let mut minute = None;
    if chars.get(*i) == Some(&':') {
        let mstart = *i + 1;
        let mut j = mstart;
        while j < chars.len() && chars[j].is_ascii_digit() {
            j += 1;
        }
        if j - mstart != 2 {
            return Err(Reason::NotAClockTime(chars[start..j].iter().collect()));
        }
        minute = Some(
            chars[mstart..j]
                .iter()
                .collect::<String>()
                .parse::<u32>()
                .unwrap_or(99),
        );
        *i = j;
    }
    // `9 am` and `9am` alike.
    let mut k = *i;
    while k < chars.len() && chars[k] == ' ' {
        k += 1;
    }
    let suffix: String = chars[k..]
        .iter()
        .take_while(|c| c.is_ascii_alphabetic() || **c == '/')
        .collect();
    let meridiem = match suffix.as_str() {
        "am" | "a.m" => Some(false),
        "pm" | "p.m" => Some(true),
        _ => None,
    };
    if let Some(pm) = meridiem {
        *i = k + suffix.len();
        if !(1..=12).contains(&hour) {
            return Err(Reason::NotTwelveHour { hour, suffix });
        }
        let h = match (hour, pm) {
            (12, false) => 0,
            (12, true) => 12,
            (h, false) => h,
            (h, true) => h + 12,
        };
        return Ok(vec![Token::Time(h, check_minute(minute, hour)?)]);
    }
    if let Some(m) = minute {
        if hour > 23 {
            return Err(Reason::HourPast23 { hour, minute: m });
        }
        return Ok(vec![Token::Time(hour, check_minute(Some(m), hour)?)]);
    }
    if suffix.starts_with("x/") || suffix == "x" {
        // `2x/day` shorthand.
        *i = k + suffix.len();
        return Ok(vec![Token::Num(hour), Token::Word(suffix)]);
    }
    Ok(vec![Token::Num(hour)])
}

fn check_minute(minute: Option<u32>, hour: u32) -> Result<u32, Reason> {
    match minute {
        None => Ok(0),
        Some(m) if m < 60 => Ok(m),
        Some(m) => Err(Reason::MinutePast59 { hour, minute: m }),
    }
}
