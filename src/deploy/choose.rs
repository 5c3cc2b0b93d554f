//! Which deployment takes a call: pure functions of the deployments' loads
//! and the call's session key.

/// The deployment for a call, among those that may take it: `loads[i]` is
/// deployment `i`'s requests in flight, `None` when it may not take the call
/// (its breaker is open, or the call failed there already).
///
/// With a session key, the deployment whose rendezvous score for the key is
/// highest ("highest random weight" hashing): a key stays on its deployment
/// while that one may take calls, whatever happens to the others, and moves
/// only when it may not — then back when it may again. Without one, the
/// deployment with the fewest requests in flight, the first listed on a tie.
pub(crate) fn choose(loads: &[Option<usize>], key: Option<u64>) -> Option<usize> {
    let open = loads
        .iter()
        .enumerate()
        .filter_map(|(index, load)| Some((index, (*load)?)));
    match key {
        Some(key) => open.max_by_key(|&(index, _)| (score(key, index), index)),
        None => open.min_by_key(|&(index, load)| (load, index)),
    }
    .map(|(index, _)| index)
}

/// A session key as a number: FNV-1a of its bytes (a fixed hash, so that every
/// replica of a gateway and every build sends a key to the same deployment).
pub(crate) fn key_hash(key: &str) -> u64 {
    key.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The rendezvous score of deployment `index` for a key: SplitMix64's
/// finaliser of the two mixed.
fn score(key: u64, index: usize) -> u64 {
    let mut z = key ^ (index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn without_a_key_the_least_loaded_first_listed() {
        assert_eq!(choose(&[Some(2), Some(1), Some(1)], None), Some(1));
        assert_eq!(choose(&[Some(0), Some(0)], None), Some(0));
        assert_eq!(choose(&[None, Some(5), Some(3)], None), Some(2));
        assert_eq!(choose(&[None, None], None), None);
        assert_eq!(choose(&[], Some(7)), None);
    }

    #[test]
    fn keys_spread_over_the_deployments() {
        let mut counts = [0; 4];
        for n in 0..4000 {
            let key = key_hash(&format!("session-{n}"));
            counts[choose(&[Some(0); 4], Some(key)).unwrap()] += 1;
        }
        assert!(
            counts.iter().all(|&c| (800..1200).contains(&c)),
            "{counts:?}"
        );
    }

    #[test]
    fn a_key_ignores_the_load() {
        let key = key_hash("conversation");
        let chosen = choose(&[Some(0); 3], Some(key)).unwrap();
        let mut loads = [Some(0); 3];
        loads[chosen] = Some(100);
        assert_eq!(choose(&loads, Some(key)), Some(chosen));
    }

    proptest! {
        /// Among a fixed set of deployments that may take calls, a key stays on
        /// its own, whatever the loads, and while others drop out; when its own
        /// may not take it, it goes to one other, and comes back after.
        #[test]
        fn affinity_is_stable(
            key in ".{0,40}",
            loads in proptest::collection::vec(proptest::option::of(0usize..10), 1..12),
            others in proptest::collection::vec(proptest::option::of(0usize..10), 12),
        ) {
            let key = key_hash(&key);
            let Some(chosen) = choose(&loads, Some(key)) else {
                prop_assert!(loads.iter().all(Option::is_none));
                return Ok(());
            };
            // The others change load, or some may no longer take calls: the
            // key does not move.
            let mut changed: Vec<_> =
                loads.iter().zip(&others).map(|(load, other)| load.and(*other)).collect();
            changed[chosen] = loads[chosen];
            prop_assert_eq!(choose(&changed, Some(key)), Some(chosen));
            // Its own deployment may not take it: it moves, always to one place.
            changed[chosen] = None;
            let moved = choose(&changed, Some(key));
            prop_assert_ne!(moved, Some(chosen));
            prop_assert_eq!(moved, choose(&changed, Some(key)));
            // And it comes back.
            changed[chosen] = Some(0);
            prop_assert_eq!(choose(&changed, Some(key)), Some(chosen));
        }
    }
}
