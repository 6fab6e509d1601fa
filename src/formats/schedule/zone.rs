//! Time zones by their IANA names: the only kind a schedule or a setting accepts.

use std::str::FromStr;

use chrono_tz::Tz;

/// A name that is not in the IANA time zone database.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("\"{name}\" is not an IANA time zone name; write one like Europe/Lisbon or America/New_York")]
pub struct UnknownZone {
    pub name: String,
}

/// Parses an IANA time zone name (`Europe/Lisbon`).
pub fn parse_tz(name: &str) -> Result<Tz, UnknownZone> {
    Tz::from_str(name.trim()).map_err(|_| UnknownZone { name: name.into() })
}

/// The system's time zone (`/etc/localtime`), or UTC when it cannot be read.
pub fn system_tz() -> Tz {
    iana_time_zone::get_timezone()
        .ok()
        .and_then(|name| Tz::from_str(&name).ok())
        .unwrap_or(Tz::UTC)
}
