//! Time, as logic sees it. Decisions take `now` from a `Clock` (or as a parameter), so tests
//! drive time: the wall clock for schedules and logs, the monotonic clock for waits.
//!
//! The two are separate on purpose: the monotonic clock stops while the machine sleeps and
//! never jumps, the wall clock jumps on suspend and NTP steps. The daemon compares them to
//! notice a jump (docs/spec.md §4).

use std::sync::Mutex;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::time::Instant;

pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Wall-clock time.
    fn now(&self) -> DateTime<Utc>;
    /// Monotonic time (tokio's, so paused test time applies).
    fn instant(&self) -> Instant;
}

/// The real clocks.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
    fn instant(&self) -> Instant {
        Instant::now()
    }
}

/// A clock tests move by hand: `advance` moves both clocks, `jump_wall` only the wall clock
/// (a suspend or an NTP step).
#[derive(Debug)]
pub struct ManualClock {
    inner: Mutex<(DateTime<Utc>, Instant)>,
}

impl ManualClock {
    pub fn new(wall: DateTime<Utc>) -> Self {
        Self {
            inner: Mutex::new((wall, Instant::now())),
        }
    }

    pub fn advance(&self, by: Duration) {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        g.0 += chrono::Duration::from_std(by).unwrap_or_default();
        g.1 += by;
    }

    pub fn jump_wall(&self, by: chrono::Duration) {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        g.0 += by;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).0
    }
    fn instant(&self) -> Instant {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).1
    }
}

/// The system clocks with the wall clock moved by a number of seconds read from a file at every
/// look: how the end-to-end tests drive a real wall-clock jump (a suspend, an NTP step) in the
/// real binary. Set by `TABD_TEST_CLOCK_OFFSET_FILE`; never in normal use.
#[derive(Debug)]
pub struct OffsetClock {
    file: std::path::PathBuf,
}

impl OffsetClock {
    pub fn new(file: std::path::PathBuf) -> Self {
        Self { file }
    }
}

impl Clock for OffsetClock {
    fn now(&self) -> DateTime<Utc> {
        let secs: i64 = std::fs::read_to_string(&self.file)
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or(0);
        Utc::now() + chrono::Duration::seconds(secs)
    }
    fn instant(&self) -> Instant {
        Instant::now()
    }
}

/// Whether the kernel keeps the system clock in step with a time source (NTP, chrony,
/// systemd-timesyncd), as far as it says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TimeSync {
    Synced,
    /// The kernel's estimate of the clock's error has reached its ceiling: nothing steers it.
    Unsynced,
    /// It could not be asked (not Linux, or the call failed): why.
    Unknown(String),
}

/// The ceiling of the kernel's maximum error estimate (16 s, `NTP_PHASE_LIMIT`): a clock whose
/// estimate is below it has been steered recently.
const MAX_ERROR_SYNCED_US: i64 = 16_000_000;

/// Asks the kernel, read-only (`adjtimex(2)` with no mode bits), whether the clock is steered:
/// the rule systemd's `timedatectl` shows as `NTPSynchronized` (its `ntp_synced()`): the maximum
/// error below 16 s. `STA_UNSYNC` alone is not used, as systemd does not: a time daemon may set
/// it to keep the kernel from writing the hardware clock. The kernel's answer is the machine's
/// (a container reads its host's), and no program is started for it.
pub fn kernel_time_sync() -> TimeSync {
    #[cfg(target_os = "linux")]
    {
        #[allow(
            unsafe_code,
            reason = "timex is plain data, for which all zeros is a valid value; adjtimex with modes 0 \
                      only reads into the struct it is given, which lives across the call"
        )]
        // SAFETY: see the reason above.
        let (rc, tx) = unsafe {
            let mut tx: libc::timex = std::mem::zeroed();
            let rc = libc::adjtimex(&mut tx);
            (rc, tx)
        };
        if rc < 0 {
            return TimeSync::Unknown(format!("adjtimex: {}", std::io::Error::last_os_error()));
        }
        #[expect(
            clippy::useless_conversion,
            reason = "maxerror is a c_long: i64 here, i32 on 32-bit targets"
        )]
        let max_error = i64::from(tx.maxerror);
        if max_error < MAX_ERROR_SYNCED_US {
            TimeSync::Synced
        } else {
            TimeSync::Unsynced
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        TimeSync::Unknown("only Linux is asked".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel answers (synced or not, whatever this machine is): Linux always can be asked.
    #[test]
    #[cfg(target_os = "linux")]
    fn the_kernel_says_whether_the_clock_is_synced() {
        let said = kernel_time_sync();
        assert!(!matches!(said, TimeSync::Unknown(_)), "{said:?}");
    }

    #[test]
    fn manual_clock_moves_both_or_only_the_wall() {
        let t0: DateTime<Utc> = "2026-11-22T09:00:00Z".parse().unwrap();
        let c = ManualClock::new(t0);
        let m0 = c.instant();
        c.advance(Duration::from_secs(30));
        assert_eq!(c.now(), t0 + chrono::Duration::seconds(30));
        assert_eq!(c.instant() - m0, Duration::from_secs(30));
        c.jump_wall(chrono::Duration::hours(2));
        assert_eq!(c.now(), t0 + chrono::Duration::seconds(7230));
        assert_eq!(
            c.instant() - m0,
            Duration::from_secs(30),
            "a wall jump leaves the monotonic clock"
        );
    }
}
