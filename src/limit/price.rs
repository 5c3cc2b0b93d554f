//! What a model's tokens cost: a price table, and the spend of a reply's
//! usage in millionths of its currency (integers, so that stores add them
//! exactly).

use serde::Deserialize;

use crate::Usage;

/// A model's prices per million tokens, in the currency its budgets are
/// given in: `[models.NAME.price] input = 3.0 cached_input = 0.3 output =
/// 15.0` in `lmstack serve`'s configuration. Input tokens read from the
/// provider's cache cost `cached_input` (the `input` price when left out).
///
/// ```
/// use lmstack::Usage;
/// use lmstack::limit::Price;
///
/// let price = Price { input: 3.0, cached_input: Some(0.3), output: 15.0 };
/// let usage = Usage {
///     input_tokens: 1_000_000,
///     cached_input_tokens: Some(500_000),
///     output_tokens: 100_000,
///     ..Usage::default()
/// };
/// // 0.5 M × 3 + 0.5 M × 0.3 + 0.1 M × 15 = 3.15
/// assert_eq!(price.cost_micros(&usage), 3_150_000);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Per million input tokens not read from the cache.
    #[serde(default)]
    pub input: f64,
    /// Per million input tokens read from the provider's cache.
    pub cached_input: Option<f64>,
    /// Per million output tokens (reasoning included).
    #[serde(default)]
    pub output: f64,
}

impl Price {
    /// What `usage` costs, in millionths of the currency, rounded up (a price
    /// per million tokens is the cost of one token in millionths). Negative or
    /// not-a-number prices count as free.
    pub fn cost_micros(&self, usage: &Usage) -> u64 {
        let cached = usage
            .cached_input_tokens
            .unwrap_or(0)
            .min(usage.input_tokens);
        let fresh = usage.input_tokens - cached;
        let cached_price = self.cached_input.unwrap_or(self.input);
        let cost = fresh as f64 * positive(self.input)
            + cached as f64 * positive(cached_price)
            + usage.output_tokens as f64 * positive(self.output);
        // `as` saturates: an absurd cost is the most a counter holds.
        cost.ceil() as u64
    }
}

fn positive(price: f64) -> f64 {
    if price > 0.0 { price } else { 0.0 }
}

/// An amount of the currency in millionths of it, rounded up (a budget of
/// `5.0` is 5 000 000); negative or not a number is 0.
pub(super) fn micros(amount: f64) -> u64 {
    (positive(amount) * 1e6).ceil() as u64
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn cost_grows_with_every_token_and_is_never_negative(
            input in 0u64..1 << 40,
            cached in 0u64..1 << 40,
            output in 0u64..1 << 40,
            more in 1u64..1000,
            prices in (-1.0f64..100.0, proptest::option::of(-1.0f64..100.0), -1.0f64..100.0),
        ) {
            let price = Price { input: prices.0, cached_input: prices.1, output: prices.2 };
            let usage = Usage {
                input_tokens: input,
                cached_input_tokens: Some(cached),
                output_tokens: output,
                ..Usage::default()
            };
            let cost = price.cost_micros(&usage);
            let mut bigger = usage.clone();
            bigger.output_tokens += more;
            prop_assert!(price.cost_micros(&bigger) >= cost);
            let free = Price::default();
            prop_assert_eq!(free.cost_micros(&usage), 0);
        }
    }

    #[test]
    fn budgets_are_counted_in_millionths() {
        assert_eq!(micros(5.0), 5_000_000);
        assert_eq!(micros(0.000_000_1), 1);
        assert_eq!(micros(-3.0), 0);
        assert_eq!(micros(f64::NAN), 0);
    }
}
