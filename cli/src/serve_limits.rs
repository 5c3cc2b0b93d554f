//! The clients' keys and their limits in `lmstack serve`'s configuration
//! (`[[server.keys]]`, `[server.limits]`; docs/serve.md), read into the
//! gateway's keys and the library's `LimitLayer`.

use lmstack::Error;
use lmstack::config::Seconds;
use lmstack::limit::{
    KeyLimits, LimitLayer, MemoryLimitStore, OnStoreError, Period, RedisLimitStore,
};
use serde::Deserialize;

/// One `[[server.keys]]` entry: a client key, its name and its limits.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyConfig {
    /// The key's name (in the log lines, and the limits' counters).
    pub name: String,
    /// The environment variable that holds the key.
    pub key_env: String,
    /// Requests per minute.
    pub requests_per_minute: Option<u64>,
    /// Tokens (input and output) per minute.
    pub tokens_per_minute: Option<u64>,
    /// Spend per `budget_period`, in the currency of the models' prices.
    pub budget: Option<f64>,
    /// `day`, `month` (the default) or `total`.
    #[serde(default)]
    pub budget_period: Period,
}

/// The `[server.limits]` table: where the counters live, and what happens
/// while that store fails.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsConfig {
    /// Redis (`redis://host:port/db`) shared by replicas; in memory when left
    /// out.
    pub redis_url: Option<String>,
    /// The environment variable that holds the Redis URL (one with a
    /// password), instead of `redis_url`.
    pub redis_url_env: Option<String>,
    /// The prefix of the Redis keys.
    pub key_prefix: Option<String>,
    /// Seconds a store step may take before it counts as failed.
    pub store_timeout_secs: Option<Seconds>,
    /// `open` (requests pass, the default) or `closed` (refused with 503).
    #[serde(default)]
    pub on_store_error: OnStoreError,
    /// Output tokens reserved for a request without `max_tokens`.
    pub default_max_tokens: Option<u64>,
}

impl KeyConfig {
    /// Its limits, if it has any.
    fn limits(&self) -> Option<KeyLimits> {
        let mut limits = KeyLimits::new();
        limits.requests_per_minute = self.requests_per_minute;
        limits.tokens_per_minute = self.tokens_per_minute;
        limits.budget = self.budget;
        limits.budget_period = self.budget_period;
        (limits != KeyLimits::new()).then_some(limits)
    }

    /// The key itself, from its variable (trimmed).
    pub fn token(&self) -> Result<String, Error> {
        std::env::var(&self.key_env)
            .ok()
            .map(|token| token.trim().to_owned())
            .filter(|token| !token.is_empty())
            .ok_or_else(|| {
                Error::InvalidRequest(format!(
                    "server.keys `{}`: its key_env {} is not set",
                    self.name, self.key_env
                ))
            })
    }
}

/// The limits of the keys that have some, counted where `config` says; none
/// when no key has limits.
pub fn layer(keys: &[KeyConfig], config: &LimitsConfig) -> Result<Option<LimitLayer>, Error> {
    let limited: Vec<(&str, KeyLimits)> = keys
        .iter()
        .filter_map(|key| Some((key.name.as_str(), key.limits()?)))
        .collect();
    if limited.is_empty() {
        return Ok(None);
    }
    let mut layer = LimitLayer::new().on_store_error(config.on_store_error);
    let url = match &config.redis_url_env {
        Some(var) => Some(std::env::var(var).map_err(|_| {
            Error::InvalidRequest(format!("server.limits.redis_url_env: {var} is not set"))
        })?),
        None => config.redis_url.clone(),
    };
    layer = match url {
        Some(url) => {
            let mut store = RedisLimitStore::new(&url)?;
            if let Some(prefix) = &config.key_prefix {
                store = store.prefix(prefix);
            }
            if let Some(Seconds(timeout)) = config.store_timeout_secs {
                store = store.timeout(timeout);
            }
            layer.store(store)
        }
        None => layer.store(MemoryLimitStore::new()),
    };
    if let Some(tokens) = config.default_max_tokens {
        layer = layer.default_max_tokens(tokens);
    }
    for (name, limits) in limited {
        layer = layer.key(name, limits);
    }
    Ok(Some(layer))
}

/// Each key's name is its own, and not `default` when the single token is set
/// too (the name it gets).
pub fn check_names(keys: &[KeyConfig], with_token: bool) -> Result<(), String> {
    let mut seen = std::collections::BTreeSet::new();
    if with_token {
        seen.insert("default");
    }
    for key in keys {
        if !seen.insert(key.name.as_str()) {
            return Err(format!(
                "server.keys: the name `{}` is taken twice",
                key.name
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_read_with_their_limits_and_names_are_unique() {
        let keys: Vec<KeyConfig> = toml::from_str::<toml::Table>(
            "[[keys]]\nname = \"alice\"\nkey_env = \"A\"\nrequests_per_minute = 60\n\
             budget = 5.0\nbudget_period = \"day\"\n[[keys]]\nname = \"bob\"\nkey_env = \"B\"\n",
        )
        .unwrap()["keys"]
            .clone()
            .try_into()
            .unwrap();
        let alice = keys[0].limits().unwrap();
        assert_eq!(alice.requests_per_minute, Some(60));
        assert_eq!(alice.budget_period, Period::Day);
        assert_eq!(keys[1].limits(), None);
        assert_eq!(check_names(&keys, true), Ok(()));
        let twice = [&keys[..], &keys[..1]].concat();
        assert!(check_names(&twice, false).unwrap_err().contains("`alice`"));
        assert!(layer(&keys, &LimitsConfig::default()).unwrap().is_some());
        assert!(
            layer(&keys[1..], &LimitsConfig::default())
                .unwrap()
                .is_none()
        );
    }
}
