//! How many deliveries a role takes: at most `per_minute` in any sixty seconds, each role on its
//! own. The times of the last deliveries are kept per hook (at most `per_minute` of them; the
//! hooks are the config's, so the map is bounded too), and `now` comes in, so a test plays an
//! hour in microseconds.
//!
//! Counted are only deliveries whose signature held: a stranger's requests cannot use up the
//! sender's minute.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use tokio::time::Instant;

const WINDOW: Duration = Duration::from_secs(60);

/// The deliveries each hook took in the last minute.
#[derive(Debug)]
pub struct Rate {
    per_minute: usize,
    taken: HashMap<String, VecDeque<Instant>>,
}

impl Rate {
    pub fn new(per_minute: u32) -> Self {
        Self {
            per_minute: per_minute.max(1) as usize,
            taken: HashMap::new(),
        }
    }

    /// Takes one delivery for `hook` at `now`, or says how long until one is taken.
    pub fn take(&mut self, hook: &str, now: Instant) -> Result<(), Duration> {
        let taken = self.taken.entry(hook.to_string()).or_default();
        while taken
            .front()
            .is_some_and(|t| now.saturating_duration_since(*t) >= WINDOW)
        {
            taken.pop_front();
        }
        if taken.len() < self.per_minute {
            taken.push_back(now);
            return Ok(());
        }
        let oldest = taken.front().copied().unwrap_or(now);
        Err((oldest + WINDOW).saturating_duration_since(now))
    }
}

/// `Retry-After`'s whole seconds for `wait` (rounded up: a sender that waits this long is taken).
pub fn retry_after(wait: Duration) -> u64 {
    wait.as_secs() + u64::from(wait.subsec_nanos() > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_role_takes_its_minute_and_waits_for_the_oldest_to_age() {
        let t0 = Instant::now();
        let mut r = Rate::new(3);
        for s in [0, 10, 20] {
            assert_eq!(r.take("delivery", t0 + Duration::from_secs(s)), Ok(()), "{s}");
        }
        assert_eq!(
            r.take("delivery", t0 + Duration::from_secs(30)),
            Err(Duration::from_secs(30)),
            "the first ages out at 60 s"
        );
        assert_eq!(
            r.take("risk", t0 + Duration::from_secs(30)),
            Ok(()),
            "each role on its own"
        );
        assert_eq!(r.take("delivery", t0 + Duration::from_secs(60)), Ok(()));
        assert_eq!(
            r.take("delivery", t0 + Duration::from_millis(60_500)),
            Err(Duration::from_millis(9_500))
        );
        assert_eq!(retry_after(Duration::from_millis(9_500)), 10);
        assert_eq!(retry_after(Duration::from_secs(9)), 9);
    }

    #[test]
    fn a_refused_delivery_is_not_counted() {
        let t0 = Instant::now();
        let mut r = Rate::new(1);
        assert_eq!(r.take("d", t0), Ok(()));
        for s in 1..60 {
            assert!(r.take("d", t0 + Duration::from_secs(s)).is_err());
        }
        assert_eq!(r.take("d", t0 + Duration::from_secs(60)), Ok(()));
    }
}
