//! Which deployment takes a call: pure functions of the deployments' loads,
//! their weights and the call's session key.

use std::cmp::Ordering;

/// What is known of a deployment that may take a call: its requests in flight
/// and its weight (at least 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Load {
    pub(crate) in_flight: usize,
    pub(crate) weight: u32,
}

/// The deployment for a call, among those that may take it: `loads[i]` is
/// deployment `i`'s [`Load`], `None` when it may not take the call (its
/// breaker is open, or the call failed there already).
///
/// With a session key, the deployment whose weighted rendezvous score for the
/// key is highest ("highest random weight" hashing): keys spread over the
/// deployments in proportion to their weights; a key stays on its deployment
/// while that one may take calls, whatever happens to the others, and moves
/// only when it may not — then back when it may again. Without one, the
/// deployment whose load once it takes the call, relative to its weight
/// (`(in_flight + 1) / weight`), is least; the first listed on a tie.
pub(crate) fn choose(loads: &[Option<Load>], key: Option<u64>) -> Option<usize> {
    let open = loads
        .iter()
        .enumerate()
        .filter_map(|(index, load)| Some((index, (*load)?)));
    match key {
        Some(key) => open
            .map(|(index, load)| (index, score(key, index, load.weight)))
            .max_by(|(a, a_score), (b, b_score)| a_score.total_cmp(b_score).then(a.cmp(b)))
            .map(|(index, _)| index),
        None => open
            .min_by(|(a, a_load), (b, b_load)| lighter(*a_load, *b_load).then(a.cmp(b)))
            .map(|(index, _)| index),
    }
}

/// How `a`'s load once it takes a call, relative to its weight, compares with
/// `b`'s: `(a.in_flight + 1) / a.weight` against `b`'s, without rounding.
fn lighter(a: Load, b: Load) -> Ordering {
    let side =
        |load: Load, other: Load| (load.in_flight as u128 + 1) * u128::from(other.weight.max(1));
    side(a, b).cmp(&side(b, a))
}

/// A session key as a number: FNV-1a of its bytes (a fixed hash, so that every
/// replica of a gateway and every build sends a key to the same deployment).
pub(crate) fn key_hash(key: &str) -> u64 {
    key.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The weighted rendezvous score of deployment `index` for a key: `weight /
/// -ln(u)`, where `u` in (0, 1) is the key and the index mixed (SplitMix64's
/// finaliser). The highest of these falls on each deployment with a chance in
/// proportion to its weight; with equal weights it is the highest `u`.
fn score(key: u64, index: usize, weight: u32) -> f64 {
    let mut z = key ^ (index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    // The top 53 bits, as a number strictly between 0 and 1.
    let unit = ((z >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
    f64::from(weight.max(1)) / -unit.ln()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Deployments of weight 1 with these requests in flight (`None`: closed).
    fn even(in_flight: &[Option<usize>]) -> Vec<Option<Load>> {
        let load = |in_flight| Load {
            in_flight,
            weight: 1,
        };
        in_flight.iter().map(|n| n.map(load)).collect()
    }

    /// Idle deployments of these weights.
    fn weighted(weights: &[u32]) -> Vec<Option<Load>> {
        let load = |&weight| {
            Some(Load {
                in_flight: 0,
                weight,
            })
        };
        weights.iter().map(load).collect()
    }

    #[test]
    fn without_a_key_the_least_loaded_first_listed() {
        assert_eq!(choose(&even(&[Some(2), Some(1), Some(1)]), None), Some(1));
        assert_eq!(choose(&even(&[Some(0), Some(0)]), None), Some(0));
        assert_eq!(choose(&even(&[None, Some(5), Some(3)]), None), Some(2));
        assert_eq!(choose(&even(&[None, None]), None), None);
        assert_eq!(choose(&[], Some(7)), None);
    }

    #[test]
    fn without_a_key_calls_in_flight_spread_in_proportion_to_weight() {
        // Calls that stay in flight: each goes where it weighs least.
        let mut loads = weighted(&[1, 3, 2]);
        for _ in 0..60 {
            let index = choose(&loads, None).unwrap();
            loads[index].as_mut().unwrap().in_flight += 1;
        }
        let in_flight: Vec<_> = loads.iter().map(|load| load.unwrap().in_flight).collect();
        assert_eq!(in_flight, [10, 30, 20]);
        // Idle, the heaviest takes the call; a weight of 0 counts as 1.
        assert_eq!(choose(&weighted(&[1, 3, 2]), None), Some(1));
        assert_eq!(choose(&weighted(&[0, 1]), None), Some(0));
    }

    #[test]
    fn keys_spread_over_the_deployments() {
        let mut counts = [0; 4];
        for n in 0..4000 {
            let key = key_hash(&format!("session-{n}"));
            counts[choose(&weighted(&[1; 4]), Some(key)).unwrap()] += 1;
        }
        assert!(
            counts.iter().all(|&c| (800..1200).contains(&c)),
            "{counts:?}"
        );
    }

    #[test]
    fn a_key_ignores_the_load() {
        let key = key_hash("conversation");
        let chosen = choose(&even(&[Some(0); 3]), Some(key)).unwrap();
        let mut loads = [Some(0); 3];
        loads[chosen] = Some(100);
        assert_eq!(choose(&even(&loads), Some(key)), Some(chosen));
    }

    proptest! {
        /// Keys spread over the deployments in proportion to their weights:
        /// over 6000 keys, each one's count within 5 standard deviations of
        /// its share (a binomial count's; one run in thousands of cases
        /// strays past 4, so a bound in percent of the share fails now and
        /// then, while a choice blind to weights is off by dozens).
        #[test]
        fn keys_spread_in_proportion_to_weight(
            weights in proptest::collection::vec(1u32..8, 1..5),
            salt in any::<u64>(),
        ) {
            const KEYS: usize = 6000;
            let loads = weighted(&weights);
            let mut counts = vec![0usize; weights.len()];
            for n in 0..KEYS {
                let key = key_hash(&format!("{salt}-{n}"));
                counts[choose(&loads, Some(key)).unwrap()] += 1;
            }
            let total: u32 = weights.iter().sum();
            for (count, weight) in counts.iter().zip(&weights) {
                let p = f64::from(*weight) / f64::from(total);
                let share = KEYS as f64 * p;
                let deviation = (KEYS as f64 * p * (1.0 - p)).sqrt().max(1.0);
                let off = (*count as f64 - share).abs() / deviation;
                prop_assert!(off < 5.0, "{counts:?} for weights {weights:?}: {off:.1} σ");
            }
        }

        /// Among a fixed set of deployments that may take calls, a key stays on
        /// its own, whatever the loads, and while others drop out; when its own
        /// may not take it, it goes to one other, and comes back after.
        #[test]
        fn affinity_is_stable(
            key in ".{0,40}",
            loads in proptest::collection::vec(
                proptest::option::of((0usize..10, 1u32..5)), 1..12),
            others in proptest::collection::vec(proptest::option::of(0usize..10), 12),
        ) {
            let key = key_hash(&key);
            let load = |(in_flight, weight)| Load { in_flight, weight };
            let loads: Vec<_> = loads.into_iter().map(|load_| load_.map(load)).collect();
            let Some(chosen) = choose(&loads, Some(key)) else {
                prop_assert!(loads.iter().all(Option::is_none));
                return Ok(());
            };
            // The others change load, or some may no longer take calls: the
            // key does not move.
            let mut changed: Vec<_> = loads
                .iter()
                .zip(&others)
                .map(|(load, other)| {
                    let in_flight = (*other)?;
                    load.map(|load| Load { in_flight, ..load })
                })
                .collect();
            changed[chosen] = loads[chosen];
            prop_assert_eq!(choose(&changed, Some(key)), Some(chosen));
            // Its own deployment may not take it: it moves, always to one place.
            changed[chosen] = None;
            let moved = choose(&changed, Some(key));
            prop_assert_ne!(moved, Some(chosen));
            prop_assert_eq!(moved, choose(&changed, Some(key)));
            // And it comes back.
            changed[chosen] = loads[chosen];
            prop_assert_eq!(choose(&changed, Some(key)), Some(chosen));
        }
    }
}
