//! The counters in Redis (feature `redis`): each step one Lua script, run
//! atomically by the server; keys expire with their window.

use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{Client, Script};
use tokio::sync::OnceCell;

use super::store::{Counter, LimitFuture, LimitStore, Taken};
use crate::Error;

/// Adds ARGV[1] to KEYS[1] if it then holds at most ARGV[2]; the key expires
/// at ARGV[3] (Unix ms; 0: never). `{admitted, count}`.
const TAKE: &str = r"
local count = tonumber(redis.call('GET', KEYS[1]) or '0')
local amount = tonumber(ARGV[1])
if count + amount > tonumber(ARGV[2]) then return {0, count} end
count = redis.call('INCRBY', KEYS[1], ARGV[1])
if ARGV[3] ~= '0' then redis.call('PEXPIREAT', KEYS[1], ARGV[3]) end
return {1, count}
";

/// Adds ARGV[1] (maybe negative; the count stays at least 0) to KEYS[1],
/// unless its expiry ARGV[2] (Unix ms; 0: never) is past ARGV[3] (now).
const ADD: &str = r"
local expires = ARGV[2]
if expires ~= '0' and tonumber(expires) <= tonumber(ARGV[3]) then return 0 end
local count = redis.call('INCRBY', KEYS[1], ARGV[1])
if count < 0 then
  redis.call('SET', KEYS[1], 0)
  count = 0
end
if expires ~= '0' then redis.call('PEXPIREAT', KEYS[1], expires) end
return count
";

/// A [`LimitStore`] in Redis, which replicas of a gateway share: each step is
/// one Lua script (atomic on the server), each key carries a prefix and
/// expires at its window's end. The connection is made on first use (a
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
    take: Script,
    add: Script,
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
            take: Script::new(TAKE),
            add: Script::new(ADD),
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

impl LimitStore for RedisLimitStore {
    fn take<'a>(
        &'a self,
        counter: &'a Counter,
        amount: u64,
        limit: u64,
        _now: u64,
    ) -> LimitFuture<'a, Taken> {
        Box::pin(async move {
            let key = self.key(counter);
            let expires = counter.expires_at.unwrap_or(0);
            let (admitted, count): (i64, i64) = self
                .run(async |connection| {
                    let mut invocation = self.take.key(&key);
                    invocation
                        .arg(signed(amount))
                        .arg(signed(limit))
                        .arg(expires);
                    invocation.invoke_async(connection).await
                })
                .await?;
            Ok(Taken {
                admitted: admitted == 1,
                count: count.max(0) as u64,
            })
        })
    }

    fn add<'a>(&'a self, counter: &'a Counter, amount: i64, now: u64) -> LimitFuture<'a, u64> {
        Box::pin(async move {
            let key = self.key(counter);
            let expires = counter.expires_at.unwrap_or(0);
            let count: i64 = self
                .run(async |connection| {
                    let mut invocation = self.add.key(&key);
                    invocation.arg(amount).arg(expires).arg(now);
                    invocation.invoke_async(connection).await
                })
                .await?;
            Ok(count.max(0) as u64)
        })
    }

    fn read<'a>(&'a self, counter: &'a Counter, _now: u64) -> LimitFuture<'a, u64> {
        Box::pin(async move {
            let key = self.key(counter);
            let count: Option<i64> = self
                .run(async |connection| redis::cmd("GET").arg(&key).query_async(connection).await)
                .await?;
            Ok(count.unwrap_or(0).max(0) as u64)
        })
    }
}
