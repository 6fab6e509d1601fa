//! Why one try of one channel failed, and whether another try could help.

use std::process::ExitStatus;

/// A failed delivery to one channel. Its text is what `tabd status` shows after the channel's
/// name, so it never holds a secret (URLs are shown as written, `${TOKEN}` and all).
#[derive(Debug, thiserror::Error)]
pub enum DeliveryError {
    #[error("cannot start `{program}`: {source}")]
    Start { program: String, source: std::io::Error },
    #[error("`{program}`: {source}")]
    Io { program: String, source: std::io::Error },
    #[error("`{program}` did not finish within {}", humantime::format_duration(*after))]
    Timeout {
        program: String,
        after: std::time::Duration,
    },
    #[error("`{program}` exited with {status}{}", if said.is_empty() { String::new() } else { format!(": {said}") })]
    Exited {
        program: String,
        status: ExitStatus,
        said: String,
    },
    /// The server answered, with an error status.
    #[error("{shown}: HTTP {status}")]
    Http { shown: String, status: u16 },
    /// The request did not get an answer (connection refused, TLS, time-out); already scrubbed.
    #[error("{0}")]
    Transport(String),
    /// Something only the person can fix: an unset `${VAR}`, a URL of the wrong shape, no
    /// session bus, no `notify-send`.
    #[error("{0}")]
    Setup(String),
}

impl DeliveryError {
    /// Whether trying again could succeed: a server error, a busy server, a dropped connection,
    /// a command that failed or hung. Not: a missing program, a page that is not there (404),
    /// refused credentials (401/403), a setting that is wrong — those wait for the person, and
    /// retrying them only delays the status that says so.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Start { source, .. } => !matches!(
                source.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied
            ),
            Self::Io { .. } | Self::Timeout { .. } | Self::Exited { .. } | Self::Transport(_) => true,
            Self::Http { status, .. } => *status >= 500 || matches!(status, 408 | 425 | 429),
            Self::Setup(_) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_a_retry_could_fix_is_retried() {
        let http = |status| DeliveryError::Http {
            shown: "http://x/".into(),
            status,
        };
        assert!(http(500).is_transient());
        assert!(http(503).is_transient());
        assert!(http(429).is_transient());
        assert!(!http(404).is_transient());
        assert!(!http(401).is_transient());
        let start = |kind| DeliveryError::Start {
            program: "notify".into(),
            source: std::io::Error::from(kind),
        };
        assert!(!start(std::io::ErrorKind::NotFound).is_transient());
        assert!(start(std::io::ErrorKind::WouldBlock).is_transient());
        assert!(!DeliveryError::Setup("no session D-Bus".into()).is_transient());
        assert!(DeliveryError::Transport("connection refused".into()).is_transient());
    }

    #[test]
    fn an_exit_says_what_the_program_wrote_if_anything() {
        use std::os::unix::process::ExitStatusExt;
        let exited = |said: &str| DeliveryError::Exited {
            program: "notify-send".into(),
            status: ExitStatus::from_raw(1 << 8),
            said: said.into(),
        };
        assert_eq!(exited("").to_string(), "`notify-send` exited with exit status: 1");
        assert_eq!(
            exited("no bus").to_string(),
            "`notify-send` exited with exit status: 1: no bus"
        );
    }
}
