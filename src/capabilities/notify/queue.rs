//! One channel's queue: its own task, so a channel that hangs or fails never holds another
//! channel, and one event never holds the next one for more than one try.
//!
//! Each event is tried once in its turn. A try that failed in a way a retry could fix goes back
//! into the queue, due after backon's next wait (1, 2, 4 s); events due earlier — the next event,
//! which was due when it arrived — are tried first. So a channel whose every try hangs for its
//! whole time-out still tries each event in turn, one try at a time, rather than four tries of
//! the first event before the second is looked at.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::{DeliveryError, Event};

/// Events a stuck channel keeps before the oldest is dropped (and the log says so).
const MAX_WAITING: usize = 100;

/// How a channel retries.
#[derive(Debug, Clone, Copy)]
pub(super) struct Policy {
    /// The wait before an event's first retry; each later wait doubles it.
    pub first_retry: Duration,
    /// Retries after the first try (so `1 + retries` tries in all).
    pub retries: usize,
}

impl Policy {
    fn backoff(&self) -> ExponentialBackoff {
        ExponentialBuilder::default()
            .with_min_delay(self.first_retry)
            .with_max_delay(Duration::from_secs(30))
            .with_max_times(self.retries)
            .build()
    }
}

/// An event waiting for its next try.
struct Waiting {
    ev: Arc<Event>,
    due: Instant,
    /// Arrival order, so events due at once keep it.
    order: u64,
    /// The waits before its remaining retries.
    backoff: ExponentialBackoff,
}

/// What a channel's task needs from the rest of the notifier.
pub(super) trait Channel: Send {
    /// One try of one event.
    fn try_once(&mut self, ev: Arc<Event>) -> impl Future<Output = Result<(), DeliveryError>> + Send;
    /// Waits while tabd must keep quiet (quiet hours).
    fn quiet(&mut self) -> impl Future<Output = ()> + Send;
    /// An event's delivery is over: delivered, or failed for good. False: nobody listens any
    /// more (the notifier was dropped), and the task ends.
    fn done(&mut self, result: Result<(), DeliveryError>) -> bool;
}

/// Works through the events `rx` gets until the notifier is dropped.
pub(super) async fn serve(
    mut rx: mpsc::UnboundedReceiver<Arc<Event>>,
    policy: Policy,
    mut channel: impl Channel,
) {
    let mut queue: Vec<Waiting> = Vec::new();
    let mut order = 0u64;
    let mut push = |queue: &mut Vec<Waiting>, ev: Arc<Event>| {
        if queue.len() >= MAX_WAITING {
            if let Some(oldest) = (0..queue.len()).min_by_key(|&i| queue[i].order) {
                let dropped = queue.remove(oldest);
                tracing::warn!(
                    "notify: {MAX_WAITING} events wait for a channel that does not answer; \"{}\" dropped",
                    dropped.ev.title
                );
            }
        }
        queue.push(Waiting {
            ev,
            due: Instant::now(),
            order,
            backoff: policy.backoff(),
        });
        order += 1;
    };
    loop {
        let next = (0..queue.len()).min_by_key(|&i| (queue[i].due, queue[i].order));
        let Some(i) = next else {
            match rx.recv().await {
                Some(ev) => push(&mut queue, ev),
                None => return,
            }
            continue;
        };
        if queue[i].due > Instant::now() {
            tokio::select! {
                got = rx.recv() => match got {
                    Some(ev) => push(&mut queue, ev),
                    None => return,
                },
                () = tokio::time::sleep_until(queue[i].due) => {}
            }
            continue;
        }
        channel.quiet().await;
        let mut item = queue.swap_remove(i);
        let result = channel.try_once(item.ev.clone()).await;
        let retry = match &result {
            Err(e) if e.is_transient() => item.backoff.next(),
            _ => None,
        };
        match retry {
            Some(wait) => {
                item.due = Instant::now() + wait;
                queue.push(item);
            }
            None if !channel.done(result) => return,
            None => {}
        }
        // Whatever arrived during the try is due since it arrived: in the queue before the
        // next choice.
        while let Ok(ev) = rx.try_recv() {
            push(&mut queue, ev);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::setup::config::notify::EventKind;
    use std::sync::Mutex;

    const TRY: Duration = Duration::from_secs(30);

    fn event(key: &str) -> Arc<Event> {
        Arc::new(Event {
            kind: EventKind::Approval,
            role: "ops".into(),
            title: key.into(),
            message: String::new(),
            note: None,
            at: chrono::Utc::now(),
            key: key.into(),
            replies: None,
            replaces: None,
        })
    }

    /// A channel whose tries of events named in `hang` take the whole try time and time out
    /// (only the first try of each, with `hang_once`); the others succeed at once. Writes down
    /// (event, when) of each try and each result.
    #[derive(Clone, Default)]
    struct Fake {
        hang: Vec<&'static str>,
        hang_once: bool,
        tries: Arc<Mutex<Vec<(String, Duration)>>>,
        done: Arc<Mutex<Vec<Result<(), String>>>>,
        start: Option<Instant>,
    }

    impl Channel for Fake {
        fn try_once(&mut self, ev: Arc<Event>) -> impl Future<Output = Result<(), DeliveryError>> + Send {
            let at = Instant::now() - self.start.unwrap_or_else(Instant::now);
            let mut tries = self.tries.lock().unwrap();
            let tried_before = tries.iter().any(|(k, _)| *k == ev.key);
            tries.push((ev.key.clone(), at));
            let hangs = self.hang.contains(&ev.key.as_str()) && !(self.hang_once && tried_before);
            async move {
                if hangs {
                    tokio::time::sleep(TRY).await;
                    return Err(DeliveryError::Timeout {
                        program: "stuck".into(),
                        after: TRY,
                    });
                }
                Ok(())
            }
        }

        async fn quiet(&mut self) {}

        fn done(&mut self, result: Result<(), DeliveryError>) -> bool {
            self.done.lock().unwrap().push(result.map_err(|e| e.to_string()));
            true
        }
    }

    fn policy() -> Policy {
        Policy {
            first_retry: Duration::from_secs(1),
            retries: 3,
        }
    }

    /// Event `a` hangs every try; `b` arrives at once after it. `b` is tried after `a`'s first
    /// try — one try, not `a`'s four tries and their waits — and `a` still gets all its tries.
    #[tokio::test(start_paused = true)]
    async fn a_hanging_event_holds_the_next_one_for_one_try_only() {
        let fake = Fake {
            hang: vec!["a"],
            start: Some(Instant::now()),
            ..Fake::default()
        };
        let (tx, rx) = mpsc::unbounded_channel();
        tx.send(event("a")).unwrap();
        tx.send(event("b")).unwrap();
        let task = tokio::spawn(serve(rx, policy(), fake.clone()));
        // Four tries of `a` (30 s each) and their waits (1, 2, 4 s) are over after 127 s.
        tokio::time::sleep(Duration::from_secs(200)).await;
        drop(tx);
        task.await.unwrap();
        let tries = fake.tries.lock().unwrap().clone();
        let order: Vec<&str> = tries.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(order, ["a", "b", "a", "a", "a"], "{tries:?}");
        assert_eq!(tries[1].1, TRY, "b waited one try of a: {tries:?}");
        let done = fake.done.lock().unwrap().clone();
        assert_eq!(done.len(), 2, "{done:?}");
        assert_eq!(done[0], Ok(()), "b delivered first");
        assert!(
            done[1].as_ref().unwrap_err().contains("did not finish"),
            "{done:?}"
        );
    }

    /// Issue 49, item 3 (openclaw#102367): a try that timed out — the receiver may have taken
    /// the event — is retried with the same event (so the same id), and once the retry is
    /// delivered the event is reported delivered only: never as failed.
    #[tokio::test(start_paused = true)]
    async fn a_try_that_timed_out_then_a_delivered_retry_is_reported_delivered() {
        let fake = Fake {
            hang: vec!["a"],
            hang_once: true,
            start: Some(Instant::now()),
            ..Fake::default()
        };
        let (tx, rx) = mpsc::unbounded_channel();
        tx.send(event("a")).unwrap();
        let task = tokio::spawn(serve(rx, policy(), fake.clone()));
        tokio::time::sleep(Duration::from_secs(60)).await;
        drop(tx);
        task.await.unwrap();
        let tries = fake.tries.lock().unwrap().clone();
        let order: Vec<&str> = tries.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(order, ["a", "a"], "one try that timed out, one retry: {tries:?}");
        assert_eq!(*fake.done.lock().unwrap(), [Ok(())], "reported once: delivered");
    }

    /// While one event waits for its retry, later events are tried; a failure no retry could fix
    /// is reported at once.
    #[tokio::test(start_paused = true)]
    async fn events_arriving_during_a_retry_wait_go_first_and_a_hopeless_failure_is_not_retried() {
        struct Once(Arc<Mutex<Vec<String>>>, Arc<Mutex<Vec<bool>>>);
        impl Channel for Once {
            fn try_once(&mut self, ev: Arc<Event>) -> impl Future<Output = Result<(), DeliveryError>> + Send {
                let mut tries = self.0.lock().unwrap();
                tries.push(ev.key.clone());
                let first = tries.len() == 1;
                let key = ev.key.clone();
                async move {
                    match key.as_str() {
                        "a" if first => Err(DeliveryError::Transport("refused".into())),
                        "gone" => Err(DeliveryError::Http {
                            shown: "http://h/…".into(),
                            status: 404,
                        }),
                        _ => Ok(()),
                    }
                }
            }
            async fn quiet(&mut self) {}
            fn done(&mut self, result: Result<(), DeliveryError>) -> bool {
                self.1.lock().unwrap().push(result.is_ok());
                true
            }
        }
        let tries = Arc::new(Mutex::new(Vec::new()));
        let done = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(serve(rx, policy(), Once(tries.clone(), done.clone())));
        tx.send(event("a")).unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        tx.send(event("gone")).unwrap();
        tx.send(event("c")).unwrap();
        tokio::time::sleep(Duration::from_secs(10)).await;
        drop(tx);
        task.await.unwrap();
        assert_eq!(*tries.lock().unwrap(), ["a", "gone", "c", "a"]);
        assert_eq!(
            *done.lock().unwrap(),
            [false, true, true],
            "gone failed once, for good"
        );
    }
}
