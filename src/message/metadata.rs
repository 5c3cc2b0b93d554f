//! Message metadata.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Metadata carried by a message: a generation id, the agent that produced it, and
/// free keys. Every layer preserves it.
///
/// ```json
/// {"generation_id":"chatcmpl-123","from_agent":"planner","cost_usd":0.002}
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Metadata {
    /// The id the provider gave the generation (the response id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation_id: Option<String>,
    /// The agent that produced the message, in multi-agent setups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_agent: Option<String>,
    /// Any other keys.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Metadata {
    /// Metadata with only a generation id.
    pub fn generation(id: impl Into<String>) -> Self {
        Metadata {
            generation_id: Some(id.into()),
            ..Metadata::default()
        }
    }

    /// True when no field is set.
    pub fn is_empty(&self) -> bool {
        self.generation_id.is_none() && self.from_agent.is_none() && self.extra.is_empty()
    }

    /// Sets a free key.
    pub fn insert(&mut self, key: impl Into<String>, value: Value) -> &mut Self {
        self.extra.insert(key.into(), value);
        self
    }

    /// A free key's value.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.extra.get(key)
    }

    /// Fills in from `other` every field that `self` does not set yet: `self` takes
    /// precedence, nothing of `other` that does not conflict is lost.
    ///
    /// ```
    /// use lmstack::Metadata;
    /// let mut first = Metadata::generation("gen-1");
    /// let mut second = Metadata::generation("gen-2");
    /// second.insert("agent_step", 3.into());
    /// first.merge_missing(&second);
    /// assert_eq!(first.generation_id.as_deref(), Some("gen-1"));
    /// assert_eq!(first.get("agent_step"), Some(&3.into()));
    /// ```
    pub fn merge_missing(&mut self, other: &Metadata) {
        if other.is_empty() {
            return;
        }
        if self.generation_id.is_none() {
            self.generation_id.clone_from(&other.generation_id);
        }
        if self.from_agent.is_none() {
            self.from_agent.clone_from(&other.from_agent);
        }
        for (key, value) in &other.extra {
            if !self.extra.contains_key(key) {
                self.extra.insert(key.clone(), value.clone());
            }
        }
    }
}
