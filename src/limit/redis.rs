//! The counters in Redis (feature `redis`): each step one Lua script, run
//! atomically by the server; keys expire with their window.

use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{Client, Script};
use tokio::sync::OnceCell;

use super::store::{Add, Admission, Counter, LimitFuture, LimitStore, Take};
use crate::Error;

/// Takes from each of KEYS in turn if every one fits, else from none:
/// ARGV[1] is now (Unix ms), then per key its amount, its limit and when it
/// expires (Unix ms; 0: never). A key fits while under its limit with the
/// amount added ([`fits`](super::fits)); an expired key is not written.
/// `{refused (1-based; 0: none), count of each key}`.
const TAKE_ALL: &str = r"
local now = tonumber(ARGV[1])
local after, refused = {}, 0
for i, key in ipairs(KEYS) do
  local amount, limit = tonumber(ARGV[3 * i - 1]), tonumber(ARGV[3 * i])
  local count = after[key] or tonumber(redis.call('GET', key) or '0')
  if refused == 0 and (count >= limit or count + amount > limit) then refused = i end
  after[key] = count + amount
end
local result = {refused}
for i, key in ipairs(KEYS) do
  local amount, expires = ARGV[3 * i - 1], ARGV[3 * i + 1]
  local live = expires == '0' or tonumber(expires) > now
  local count
  if refused ~= 0 or (live and amount == '0') then
    count = tonumber(redis.call('GET', key) or '0')
  elseif live then
    count = redis.call('INCRBY', key, amount)
    if expires ~= '0' then redis.call('PEXPIREAT', key, expires) end
  else
    count = 0
  end
  result[i + 1] = count
end
return result
";

/// Adds to each of KEYS in turn: ARGV[1] is now (Unix ms), then per key its
/// amount (maybe negative; the count stays at least 0) and when it expires
/// (Unix ms; 0: never); an expired key is not written (counts 0). The count
/// of each key.
const ADD_ALL: &str = r"
local now = tonumber(ARGV[1])
local counts = {}
for i, key in ipairs(KEYS) do
  local amount, expires = ARGV[2 * i], ARGV[2 * i + 1]
  local count = 0
  if expires == '0' or tonumber(expires) > now then
    count = redis.call('INCRBY', key, amount)
    if count < 0 then
      redis.call('SET', key, 0)
      count = 0
    end
    if expires ~= '0' then redis.call('PEXPIREAT', key, expires) end
  end
  counts[i] = count
end
return counts
";

/// A [`LimitStore`] in Redis, which replicas of a gateway share: each step is
/// one Lua script over all its counters (one round trip, atomic on the
/// server, sent as `EVALSHA`), each key carries a prefix and expires at its
/// window's end. The connection is made on first use (a
/// gateway starts while Redis is down) and remade when lost; every step has
/// a [`timeout`](Self::timeout) (500 ms by default), past which it fails.
///
/// ```no_run
/// use lmstack::limit::{KeyLimits, LimitLayer, RedisLimitStore};
///
/// let store = RedisLimitStore::new("redis://127.0.0.1:6379/")?.prefix("team-gateway:");
/// let limits = LimitLayer::new()
///     .store(store)
///     .key("alice", KeyLimits::new().requests_per_minute(60));
/// # Ok::<(), lmstack::Error>(())
/// ```
pub struct RedisLimitStore {
    client: Client,
    connection: OnceCell<ConnectionManager>,
    prefix: String,
    timeout: Duration,
    take_all: Script,
    add_all: Script,
}

impl std::fmt::Debug for RedisLimitStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisLimitStore")
            .field("prefix", &self.prefix)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl RedisLimitStore {
    /// The prefix of the keys, by default.
    pub const DEFAULT_PREFIX: &'static str = "lmstack:limit:";

    /// The longest a step may take, by default.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(500);

    /// The store at `url` (`redis://host:port/db`, `rediss://` for TLS where
    /// the `redis` crate was built with it); nothing is connected yet.
    pub fn new(url: &str) -> Result<Self, Error> {
        let client = Client::open(url)
            .map_err(|error| Error::InvalidRequest(format!("the Redis URL: {error}")))?;
        Ok(RedisLimitStore {
            client,
            connection: OnceCell::new(),
            prefix: Self::DEFAULT_PREFIX.to_owned(),
            timeout: Self::DEFAULT_TIMEOUT,
            take_all: Script::new(TAKE_ALL),
            add_all: Script::new(ADD_ALL),
        })
    }

    /// Puts `prefix` before every key (one per gateway, or per environment,
    /// sharing a Redis).
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Sets the longest a step (connecting included) may take.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Runs `step` on the connection (made first if need be) within the
    /// timeout.
    async fn run<T>(
        &self,
        step: impl AsyncFnOnce(&mut ConnectionManager) -> redis::RedisResult<T>,
    ) -> Result<T, Error> {
        let run = async {
            let connection = self
                .connection
                .get_or_try_init(|| {
                    let config = ConnectionManagerConfig::new()
                        .set_connection_timeout(Some(self.timeout))
                        .set_response_timeout(Some(self.timeout));
                    ConnectionManager::new_with_config(self.client.clone(), config)
                })
                .await?;
            step(&mut connection.clone()).await
        };
        match tokio::time::timeout(self.timeout, run).await {
            Ok(done) => done.map_err(|error| Error::stage("redis limit store", error.to_string())),
            Err(_) => Err(Error::stage(
                "redis limit store",
                format!("no answer within {:?}", self.timeout),
            )),
        }
    }

    fn key(&self, counter: &Counter) -> String {
        format!("{}{}", self.prefix, counter.key)
    }
}

/// An amount as Redis takes it (a signed 64-bit integer).
fn signed(amount: u64) -> i64 {
    i64::try_from(amount).unwrap_or(i64::MAX)
}

/// A count as Redis answers it (never below 0).
fn unsigned(count: i64) -> u64 {
    u64::try_from(count).unwrap_or(0)
}

impl LimitStore for RedisLimitStore {
    fn take_all<'a>(&'a self, takes: &'a [Take], now: u64) -> LimitFuture<'a, Admission> {
        Box::pin(async move {
            let answer: Vec<i64> = self
                .run(async |connection| {
                    let mut invocation = self.take_all.prepare_invoke();
                    invocation.arg(now);
                    for take in takes {
                        invocation
                            .key(self.key(&take.counter))
                            .arg(signed(take.amount))
                            .arg(signed(take.limit))
                            .arg(take.counter.expires_at.unwrap_or(0));
                    }
                    invocation.invoke_async(connection).await
                })
                .await?;
            let (refused, counts) = answer
                .split_first()
                .ok_or_else(|| Error::stage("redis limit store", "an empty answer to a take"))?;
            Ok(Admission {
                refused: usize::try_from(*refused)
                    .ok()
                    .and_then(|refused| refused.checked_sub(1)),
                counts: counts.iter().copied().map(unsigned).collect(),
            })
        })
    }

    fn add_all<'a>(&'a self, adds: &'a [Add], now: u64) -> LimitFuture<'a, Vec<u64>> {
        Box::pin(async move {
            let counts: Vec<i64> = self
                .run(async |connection| {
                    let mut invocation = self.add_all.prepare_invoke();
                    invocation.arg(now);
                    for add in adds {
                        invocation
                            .key(self.key(&add.counter))
                            .arg(add.amount)
                            .arg(add.counter.expires_at.unwrap_or(0));
                    }
                    invocation.invoke_async(connection).await
                })
                .await?;
            Ok(counts.into_iter().map(unsigned).collect())
        })
    }
}
