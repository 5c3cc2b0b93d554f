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
    /// The model that answers a name not configured (nor an alias); none by
    /// default: such a name is answered 404.
    pub default_model: Option<String>,
    /// The clients' keys, each with its name and limits (`[[server.keys]]`).
    #[serde(default)]
    pub keys: Vec<crate::serve_limits::KeyConfig>,
    /// Where the keys' limits are counted, and what happens while that store
    /// fails (`[server.limits]`).
    #[serde(default)]
    pub limits: crate::serve_limits::LimitsConfig,
}

impl Config {
    /// Reads the file at `path`; a mistake names the file and the place.
    pub fn read(path: &Path) -> Result<Config, Error> {
        let text = std::fs::read_to_string(path).map_err(|error| {
            Error::InvalidRequest(format!("reading {}: {error}", path.display()))
        })?;
        let config: Config = toml::from_str(&text)
            .map_err(|error| Error::InvalidRequest(format!("{}: {error}", path.display())))?;
        config
            .check_names()
            .map_err(|error| Error::InvalidRequest(format!("{}: {error}", path.display())))?;
        Ok(config)
    }

    /// Every name a client may ask for names one model: an alias is no
    /// model's name nor another model's alias, and the default model is
    /// configured; a model's fallbacks are other models.
    fn check_names(&self) -> Result<(), String> {
        let mut aliased: BTreeMap<&str, &str> = BTreeMap::new();
        for (name, model) in &self.models {
            for alias in &model.aliases {
                if self.models.contains_key(alias) {
                    return Err(format!(
                        "models.{name}.aliases: `{alias}` is the name of a model"
                    ));
                }
                if let Some(first) = aliased.insert(alias, name) {
                    return Err(format!(
                        "models.{name}.aliases: `{alias}` is an alias of `{first}` already"
                    ));
                }
            }
        }
        for (name, model) in &self.models {
            for fallback in &model.fallbacks {
                if fallback == name || !self.models.contains_key(fallback) {
                    return Err(format!(
                        "models.{name}.fallbacks: `{fallback}` is not another model's name"
                    ));
                }
            }
        }
        match &self.server.default_model {
            Some(model) if !self.models.contains_key(model) => {
                Err(format!("server.default_model: no model is named `{model}`"))
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_configuration_reads_whole() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/serve.md");
        let docs = std::fs::read_to_string(path).unwrap();
        let start = docs.find("```toml\n# lmstack.toml").expect("the example") + 8;
        let text = &docs[start..][..docs[start..].find("```").unwrap()];
        let config: Config = toml::from_str(text).unwrap();
        assert_eq!(config.check_names(), Ok(()));
        assert_eq!(config.server.keys.len(), 1);
        let claude = &config.models["claude"];
        assert_eq!(claude.deployments.len(), 2);
        assert_eq!(claude.fallbacks, ["gpt"]);
        assert!(config.models["gpt"].price.is_some());
    }

    fn checked(text: &str) -> Result<(), String> {
        toml::from_str::<Config>(text).unwrap().check_names()
    }

    #[test]
    fn every_name_a_client_may_ask_for_names_one_model() {
        let models = "[models.a]\nprovider = \"openai\"\naliases = [\"claude-haiku-4-5\"]\n\
                      [models.b]\nprovider = \"anthropic\"\n";
        assert_eq!(checked(models), Ok(()));
        let with_default = format!("[server]\ndefault_model = \"b\"\n{models}");
        assert_eq!(checked(&with_default), Ok(()));
        let unknown = format!("[server]\ndefault_model = \"c\"\n{models}");
        assert!(
            checked(&unknown)
                .unwrap_err()
                .contains("no model is named `c`")
        );
        let a_model = models.replace("claude-haiku-4-5", "b");
        assert!(
            checked(&a_model)
                .unwrap_err()
                .contains("`b` is the name of a model")
        );
        let fallback = format!("{models}fallbacks = [\"a\"]\n");
        assert_eq!(checked(&fallback), Ok(()));
        for bad in ["b", "c", "claude-haiku-4-5"] {
            let fallback = format!("{models}fallbacks = [\"{bad}\"]\n");
            assert!(checked(&fallback).unwrap_err().contains(&format!(
                "models.b.fallbacks: `{bad}` is not another model's name"
            )));
        }
        let twice = format!("{models}aliases = [\"claude-haiku-4-5\"]\n");
        assert!(
            checked(&twice)
                .unwrap_err()
                .contains("`claude-haiku-4-5` is an alias of `a` already")
        );
    }
}
