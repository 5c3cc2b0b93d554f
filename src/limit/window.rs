//! The arithmetic of counting windows, pure: which window a moment falls in,
//! when it ends, whether an amount fits under a limit. Times are Unix
//! milliseconds (UTC), given by the caller.

use std::time::Duration;

/// One counting window: from `start` to `end` (Unix milliseconds; no end for
/// a count that never resets). Its `start` names it among the windows of its
/// kind, so a store's counter for it expires at its `end`.
///
/// ```
/// use lmstack::limit::Window;
///
/// let minute = Window::fixed(90_500, 60_000);
/// assert_eq!(minute, Window { start: 60_000, end: Some(120_000) });
/// assert_eq!(minute.wait(90_500).map(|wait| wait.as_millis()), Some(29_500));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// When it began.
    pub start: u64,
    /// When it ends (exclusive), if ever.
    pub end: Option<u64>,
}

impl Window {
    /// The window of `length` milliseconds (at least 1) that holds `now`,
    /// windows being aligned on the Unix epoch.
    pub fn fixed(now: u64, length: u64) -> Window {
        let length = length.max(1);
        let start = now - now % length;
        Window {
            start,
            end: Some(start.saturating_add(length)),
        }
    }

    /// How long from `now` until the window ends: the wait before a refused
    /// request may find room; `None` for a window that never ends.
    pub fn wait(&self, now: u64) -> Option<Duration> {
        self.end
            .map(|end| Duration::from_millis(end.saturating_sub(now)))
    }
}

/// Whether `amount` may be added to a window that holds `count` under
/// `limit`: only if the window has room left (`count < limit`) and the sum
/// stays within the limit. An amount of 0 checks for room: a spend under its
/// budget. (A store applies this rule atomically.)
///
/// ```
/// use lmstack::limit::fits;
///
/// assert!(fits(59, 1, 60));
/// assert!(!fits(60, 1, 60));
/// assert!(!fits(0, 61, 60));
/// assert!(fits(59, 0, 60) && !fits(60, 0, 60), "a check for room");
/// ```
pub fn fits(count: u64, amount: u64, limit: u64) -> bool {
    count < limit && count.checked_add(amount).is_some_and(|sum| sum <= limit)
}

/// The period a spend budget is counted over, in UTC: it resets at the start
/// of each day or month, or never (`total`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Period {
    /// A calendar day, UTC.
    Day,
    /// A calendar month, UTC (the default).
    #[default]
    Month,
    /// For ever: the budget never resets.
    Total,
}

/// Milliseconds in a day.
const DAY: u64 = 86_400_000;

impl Period {
    /// The window of this period that holds `now`.
    ///
    /// ```
    /// use lmstack::limit::{Period, Window};
    ///
    /// // 2025-02-10T12:00:00Z
    /// let now = 1_739_188_800_000;
    /// let month = Period::Month.window(now);
    /// assert_eq!(month.start, 1_738_368_000_000); // 2025-02-01
    /// assert_eq!(month.end, Some(1_740_787_200_000)); // 2025-03-01
    /// assert_eq!(Period::Total.window(now), Window { start: 0, end: None });
    /// ```
    pub fn window(self, now: u64) -> Window {
        match self {
            Period::Day => Window::fixed(now, DAY),
            Period::Month => {
                let (year, month, _) = civil_from_days(now / DAY);
                let (next_year, next_month) = match month {
                    12 => (year + 1, 1),
                    _ => (year, month + 1),
                };
                Window {
                    start: days_from_civil(year, month, 1) * DAY,
                    end: Some(days_from_civil(next_year, next_month, 1) * DAY),
                }
            }
            Period::Total => Window {
                start: 0,
                end: None,
            },
        }
    }

    /// Its name in words: `day`, `month`, `total`.
    pub fn name(self) -> &'static str {
        match self {
            Period::Day => "day",
            Period::Month => "month",
            Period::Total => "total",
        }
    }
}

/// The date (year, month 1–12, day 1–31) of `days` since 1970-01-01, in the
/// proleptic Gregorian calendar (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let day_of_era = z % 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * shifted_month + 2) / 5 + 1;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

/// The days since 1970-01-01 of a date from 1970 on (Howard Hinnant's
/// `days_from_civil`).
fn days_from_civil(year: u64, month: u64, day: u64) -> u64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year / 400;
    let year_of_era = year % 400;
    let shifted_month = if month > 2 { month - 3 } else { month + 9 };
    let day_of_year = (153 * shifted_month + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn months_begin_on_their_first_day_across_leap_years_and_new_years() {
        // 2024-02-29T23:59:59.999Z, in a leap year.
        let leap = Period::Month.window(1_709_251_199_999);
        assert_eq!(leap.start, 1_706_745_600_000); // 2024-02-01
        assert_eq!(leap.end, Some(1_709_251_200_000)); // 2024-03-01
        // 2024-12-31T10:00:00Z.
        let december = Period::Month.window(1_735_639_200_000);
        assert_eq!(december.start, 1_733_011_200_000); // 2024-12-01
        assert_eq!(december.end, Some(1_735_689_600_000)); // 2025-01-01
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(Period::Month.window(0).start, 0);
    }

    proptest! {
        #[test]
        fn a_moment_lies_in_its_window_and_the_wait_reaches_its_end(
            now in 0u64..1 << 50,
            length in 1u64..1 << 40,
        ) {
            let window = Window::fixed(now, length);
            let end = window.end.unwrap();
            prop_assert!(window.start <= now && now < end);
            prop_assert_eq!(end - window.start, length);
            prop_assert_eq!(window.start % length, 0);
            let wait = window.wait(now).unwrap().as_millis() as u64;
            prop_assert_eq!(now + wait, end);
            // Every moment of the window names the same one.
            prop_assert_eq!(Window::fixed(end - 1, length), window);
            prop_assert_eq!(Window::fixed(end, length).start, end);
        }

        #[test]
        fn days_and_months_tile_the_time_line(now in 0u64..253_402_300_799_000) {
            for period in [Period::Day, Period::Month] {
                let window = period.window(now);
                let end = window.end.unwrap();
                prop_assert!(window.start <= now && now < end);
                prop_assert_eq!(window.start % DAY, 0);
                prop_assert_eq!(period.window(end).start, end, "{:?}", period);
                prop_assert_eq!(period.window(end - 1), window);
            }
            let month = Period::Month.window(now);
            let (_, _, first) = civil_from_days(month.start / DAY);
            prop_assert_eq!(first, 1);
            let days = (month.end.unwrap() - month.start) / DAY;
            prop_assert!((28..=31).contains(&days));
        }

        #[test]
        fn dates_round_trip(days in 0u64..2_932_896) {
            let (year, month, day) = civil_from_days(days);
            prop_assert_eq!(days_from_civil(year, month, day), days);
        }

        #[test]
        fn an_amount_fits_only_in_a_window_with_room_and_within_the_limit(
            count in any::<u64>(),
            amount in any::<u64>(),
            limit in any::<u64>(),
        ) {
            let fits = fits(count, amount, limit);
            let sum = u128::from(count) + u128::from(amount);
            prop_assert_eq!(fits, count < limit && sum <= u128::from(limit));
        }
    }
}
