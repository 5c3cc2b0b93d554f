//! The circuit breaker of one deployment: a pure state machine, the time
//! passed in.

use std::time::{Duration, Instant};

/// When a breaker opens and how long it stays open.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Policy {
    /// Consecutive failures (before the first event) that open the breaker.
    pub(crate) failures_to_open: u32,
    /// How long an opened breaker stays open before one probe is let through.
    pub(crate) cool_down: Duration,
    /// The longest cool-down a `Retry-After` may ask for.
    pub(crate) max_retry_after: Duration,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum State {
    /// Calls go through.
    Closed,
    /// No call goes through until `until`.
    Open { until: Instant },
    /// The cool-down is over: one call (the probe) goes through; its outcome
    /// closes or opens the breaker again.
    HalfOpen { probing: bool },
}

/// One deployment's breaker. Closed, it counts consecutive failures; open, it
/// refuses calls until its cool-down ends; then it lets one probe through.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Breaker {
    failures: u32,
    state: State,
}

/// A call let through by [`Breaker::admit`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Admission {
    /// The breaker is closed.
    Normal,
    /// The one call a half-open breaker lets through.
    Probe,
}

impl Breaker {
    pub(crate) fn new() -> Self {
        Breaker {
            failures: 0,
            state: State::Closed,
        }
    }

    /// Whether [`admit`](Self::admit) would let a call through at `now`.
    pub(crate) fn admits(&self, now: Instant) -> bool {
        match self.state {
            State::Closed => true,
            State::Open { until } => now >= until,
            State::HalfOpen { probing } => !probing,
        }
    }

    /// Lets a call through at `now`, if the breaker admits one.
    pub(crate) fn admit(&mut self, now: Instant) -> Option<Admission> {
        if !self.admits(now) {
            return None;
        }
        if self.state == State::Closed {
            return Some(Admission::Normal);
        }
        self.state = State::HalfOpen { probing: true };
        Some(Admission::Probe)
    }

    /// The deployment answered: the breaker closes.
    pub(crate) fn succeeded(&mut self) {
        *self = Breaker::new();
    }

    /// A call failed at `now` before its first event, the deployment asking to
    /// be left alone for `retry_after` if it said so. The breaker opens for
    /// that long (at most `policy.max_retry_after`); otherwise for
    /// `policy.cool_down` once the failures in a row reach
    /// `policy.failures_to_open`, or at once when the probe failed.
    pub(crate) fn failed(&mut self, now: Instant, policy: &Policy, retry_after: Option<Duration>) {
        self.failures = self.failures.saturating_add(1);
        let tripped = self.failures >= policy.failures_to_open
            || matches!(self.state, State::HalfOpen { .. });
        let cool_down = match retry_after {
            Some(wait) => wait.min(policy.max_retry_after),
            None if tripped => policy.cool_down,
            None => return,
        };
        // A far future that `Instant` cannot hold: a century will do.
        let century = Duration::from_secs(100 * 365 * 24 * 3600);
        let until = now
            .checked_add(cool_down)
            .or_else(|| now.checked_add(century))
            .unwrap_or(now);
        let until = match self.state {
            State::Open { until: later } if later > until => later,
            _ => until,
        };
        self.state = State::Open { until };
    }

    /// A probe ended without an outcome (its call was dropped): another may go.
    pub(crate) fn probe_abandoned(&mut self) {
        if self.state == (State::HalfOpen { probing: true }) {
            self.state = State::HalfOpen { probing: false };
        }
    }

    /// When an open breaker lets a probe through; `None` when it is not open.
    pub(crate) fn open_until(&self) -> Option<Instant> {
        match self.state {
            State::Open { until } => Some(until),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: Policy = Policy {
        failures_to_open: 3,
        cool_down: Duration::from_secs(10),
        max_retry_after: Duration::from_secs(60),
    };

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn opens_after_the_failures_in_a_row_and_half_opens_after_the_cool_down() {
        let start = Instant::now();
        let mut breaker = Breaker::new();
        for _ in 0..2 {
            assert_eq!(breaker.admit(start), Some(Admission::Normal));
            breaker.failed(start, &POLICY, None);
        }
        assert!(breaker.admits(start), "two failures keep it closed");
        breaker.failed(start, &POLICY, None);
        assert!(!breaker.admits(start), "the third opens it");
        assert!(!breaker.admits(start + secs(9)));
        assert_eq!(breaker.open_until(), Some(start + secs(10)));
        assert_eq!(breaker.admit(start + secs(10)), Some(Admission::Probe));
        assert_eq!(breaker.admit(start + secs(10)), None, "one probe at a time");
        breaker.succeeded();
        assert_eq!(breaker.admit(start + secs(10)), Some(Admission::Normal));
    }

    #[test]
    fn a_success_resets_the_count() {
        let now = Instant::now();
        let mut breaker = Breaker::new();
        breaker.failed(now, &POLICY, None);
        breaker.failed(now, &POLICY, None);
        breaker.succeeded();
        breaker.failed(now, &POLICY, None);
        breaker.failed(now, &POLICY, None);
        assert!(breaker.admits(now));
    }

    #[test]
    fn a_failed_probe_opens_it_again_for_a_whole_cool_down() {
        let start = Instant::now();
        let mut breaker = Breaker::new();
        for _ in 0..3 {
            breaker.failed(start, &POLICY, None);
        }
        let later = start + secs(10);
        assert_eq!(breaker.admit(later), Some(Admission::Probe));
        breaker.failed(later, &POLICY, None);
        assert_eq!(breaker.open_until(), Some(later + secs(10)));
        assert_eq!(breaker.admit(later + secs(9)), None);
    }

    #[test]
    fn an_abandoned_probe_lets_another_through() {
        let start = Instant::now();
        let mut breaker = Breaker::new();
        breaker.failed(start, &POLICY, Some(secs(1)));
        assert_eq!(breaker.admit(start + secs(1)), Some(Admission::Probe));
        assert!(!breaker.admits(start + secs(1)));
        breaker.probe_abandoned();
        assert_eq!(breaker.admit(start + secs(1)), Some(Admission::Probe));
    }

    #[test]
    fn retry_after_opens_it_at_once_for_that_long_capped() {
        let now = Instant::now();
        let mut breaker = Breaker::new();
        breaker.failed(now, &POLICY, Some(secs(3)));
        assert_eq!(breaker.open_until(), Some(now + secs(3)));
        breaker.failed(now, &POLICY, Some(secs(1)));
        assert_eq!(breaker.open_until(), Some(now + secs(3)), "never shortened");
        let mut breaker = Breaker::new();
        breaker.failed(now, &POLICY, Some(secs(3600)));
        assert_eq!(breaker.open_until(), Some(now + secs(60)), "capped");
        let mut breaker = Breaker::new();
        breaker.failed(now, &POLICY, Some(Duration::MAX));
        assert_eq!(breaker.open_until(), Some(now + secs(60)));
    }

    #[test]
    fn a_cool_down_past_what_an_instant_holds_does_not_panic() {
        let now = Instant::now();
        let huge = Policy {
            failures_to_open: 1,
            cool_down: Duration::MAX,
            max_retry_after: Duration::MAX,
        };
        let mut breaker = Breaker::new();
        breaker.failed(now, &huge, None);
        assert!(!breaker.admits(now + secs(3600)));
    }
}
