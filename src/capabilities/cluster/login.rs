//! Whether the servers let this device in. async-nats tries a refused login again for ever and
//! logs every refusal (twice a second at first); tabd says it once, in its own words, and while
//! it lasts says it as the reason no quorum answers.

use async_nats::{ClientError, Event};
use tokio::sync::watch;

/// The servers' last word on this device's login: `Some(why)` while they refuse it.
#[derive(Clone)]
pub(super) struct Login {
    refused: watch::Sender<Option<String>>,
    /// The last error a server sent once connected (a permission it lacks), said once.
    said: std::sync::Arc<std::sync::Mutex<Option<String>>>,
}

impl Login {
    pub(super) fn new() -> Self {
        Self {
            refused: watch::Sender::new(None),
            said: Default::default(),
        }
    }

    /// What a connection event says of the login; said in the log when it changes.
    pub(super) fn saw(&self, event: &Event) {
        match event {
            Event::ClientError(ClientError::Other(why)) if is_refusal(why) => {
                let first = self.refused.send_if_modified(|r| {
                    let first = r.is_none();
                    *r = Some(why.clone());
                    first
                });
                if first {
                    tracing::error!(
                        "cluster: the NATS servers refused this device's login ({why}): check the user and password (or token) in [cluster] nats, or its creds file; tabd tries again, and until the servers let it in, slots and notes go by when_alone"
                    );
                }
            }
            Event::Connected if self.refused.send_if_modified(|r| r.take().is_some()) => {
                tracing::info!("cluster: the NATS servers let this device in now");
            }
            // What only the server can say (a permission the login lacks, a limit reached): the
            // requests it refuses only time out. Said once per distinct error.
            Event::ServerError(e) => {
                let text = e.to_string();
                let mut said = self.said.lock().unwrap_or_else(|p| p.into_inner());
                if said.as_deref() != Some(text.as_str()) {
                    tracing::warn!("cluster: a NATS server says: {text}");
                    *said = Some(text);
                }
            }
            _ => {}
        }
    }

    /// Why the servers refuse the login, while they do.
    pub(super) fn refusal(&self) -> Option<String> {
        self.refused.borrow().clone()
    }

    pub(super) fn watch(&self) -> watch::Receiver<Option<String>> {
        self.refused.subscribe()
    }
}

/// async-nats's words for a login the servers refused (`ConnectErrorKind`'s `Display`).
fn is_refusal(why: &str) -> bool {
    why.contains("authorization violation") || why.contains("failed signing nonce")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_is_kept_until_a_connection_and_other_errors_are_not_refusals() {
        let login = Login::new();
        login.saw(&Event::ClientError(ClientError::Other("IO error".into())));
        assert_eq!(login.refusal(), None, "a server down is not a refused login");
        login.saw(&Event::ClientError(ClientError::Other(
            "authorization violation".into(),
        )));
        assert_eq!(login.refusal().as_deref(), Some("authorization violation"));
        login.saw(&Event::Disconnected);
        assert!(login.refusal().is_some());
        login.saw(&Event::Connected);
        assert_eq!(login.refusal(), None);
        let denied = async_nats::ServerError::Other("permissions violation".into());
        login.saw(&Event::ServerError(denied.clone()));
        assert_eq!(
            login.said.lock().unwrap().as_deref(),
            Some("nats: permissions violation")
        );
    }
}
