//! The configuration of `lmstack serve` (TOML; a complete commented example is
//! in docs/serve.md): the `[server]` table, and the models, each the library's
//! [`ModelConfig`] (which builds its stack).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;

use lmstack::Error;
use lmstack::config::{ModelConfig, Seconds};
use serde::Deserialize;

/// The whole file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// How the gateway listens.
    #[serde(default)]
    pub server: Server,
    /// The models, by the name clients ask for.
    #[serde(default)]
    pub models: BTreeMap<String, ModelConfig>,
}

/// The `[server]` table.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Server {
    /// The address to listen on (`--listen` wins).
    pub listen: Option<SocketAddr>,
    /// The environment variable that holds the clients' token
    /// (`LMSTACK_SERVE_TOKEN` when left out).
    pub token_env: Option<String>,
    /// The most bytes of a request body.
    pub body_limit: Option<usize>,
    /// The most bytes of request bodies read and decoded at once.
    pub body_budget: Option<usize>,
    /// Seconds a stream may be silent before a keep-alive goes out (0: none).
    pub keep_alive_secs: Option<Seconds>,
    /// Seconds for a request's head to arrive.
    pub header_timeout_secs: Option<Seconds>,
    /// Seconds for a request's whole body to arrive.
    pub body_timeout_secs: Option<Seconds>,
    /// Seconds a connection may sit idle, or leave its response unread.
    pub idle_timeout_secs: Option<Seconds>,
    /// The most connections open at once.
    pub max_connections: Option<usize>,
    /// Host names a gateway without a token answers besides loopback ones.
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
    /// Browser origins that may call the gateway.
    #[serde(default)]
    pub allowed_origins: Vec<String>,
}

impl Config {
    /// Reads the file at `path`; a mistake names the file and the place.
    pub fn read(path: &Path) -> Result<Config, Error> {
        let text = std::fs::read_to_string(path).map_err(|error| {
            Error::InvalidRequest(format!("reading {}: {error}", path.display()))
        })?;
        toml::from_str(&text)
            .map_err(|error| Error::InvalidRequest(format!("{}: {error}", path.display())))
    }
}
