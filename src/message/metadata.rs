//! Message metadata.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// Metadata carried by a message or an event: a generation id, the agent that
/// produced it, and free keys. Every layer preserves it.
///
/// ```json
/// {"generation_id":"chatcmpl-123","from_agent":"planner","cost_usd":0.002}
/// ```
///
/// Most messages and nearly every streaming delta carry none, so empty metadata
/// costs one null pointer: the fields live in a box that exists only while one
/// of them is set.
///
/// ```
/// use lmstack::Metadata;
/// let mut metadata = Metadata::generation("gen-1");
/// metadata.set_from_agent("planner").insert("step", 3.into());
/// assert_eq!(metadata.generation_id(), Some("gen-1"));
/// assert_eq!(
///     serde_json::to_string(&metadata).unwrap(),
///     r#"{"generation_id":"gen-1","from_agent":"planner","step":3}"#
/// );
/// assert!(Metadata::new().is_empty());
/// ```
#[derive(Clone, Default, PartialEq)]
pub struct Metadata(
    /// `None` exactly when no field is set.
    Option<Box<Fields>>,
);

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct Fields {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    generation_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    from_agent: Option<String>,
    #[serde(flatten)]
    extra: Map<String, Value>,
}

impl Fields {
    fn is_empty(&self) -> bool {
        self.generation_id.is_none() && self.from_agent.is_none() && self.extra.is_empty()
    }
}

impl Metadata {
    /// Empty metadata.
    pub const fn new() -> Self {
        Metadata(None)
    }

    /// Metadata with only a generation id.
    pub fn generation(id: impl Into<String>) -> Self {
        let mut metadata = Metadata::new();
        metadata.set_generation_id(id);
        metadata
    }

    /// True when no field is set.
    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    /// The id the provider gave the generation (the response id).
    pub fn generation_id(&self) -> Option<&str> {
        self.0.as_ref()?.generation_id.as_deref()
    }

    /// Sets the generation id.
    pub fn set_generation_id(&mut self, id: impl Into<String>) -> &mut Self {
        self.fields_mut().generation_id = Some(id.into());
        self
    }

    /// The agent that produced the message, in multi-agent setups.
    pub fn from_agent(&self) -> Option<&str> {
        self.0.as_ref()?.from_agent.as_deref()
    }

    /// Sets the agent that produced the message.
    pub fn set_from_agent(&mut self, agent: impl Into<String>) -> &mut Self {
        self.fields_mut().from_agent = Some(agent.into());
        self
    }

    /// Sets a free key.
    pub fn insert(&mut self, key: impl Into<String>, value: Value) -> &mut Self {
        self.fields_mut().extra.insert(key.into(), value);
        self
    }

    /// A free key's value.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0.as_ref()?.extra.get(key)
    }

    /// Removes a free key and returns its value.
    pub fn remove(&mut self, key: &str) -> Option<Value> {
        let value = self.0.as_mut()?.extra.remove(key);
        self.normalise();
        value
    }

    /// The free keys and their values, in order.
    pub fn extra(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.0
            .iter()
            .flat_map(|fields| fields.extra.iter())
            .map(|(key, value)| (key.as_str(), value))
    }

    /// Fills in from `other` every field that `self` does not set yet: `self` takes
    /// precedence, nothing of `other` that does not conflict is lost. A key
    /// both hold as objects merges the same way, field by field (a wire's
    /// fields kept from several pieces of one message add up).
    ///
    /// ```
    /// use lmstack::Metadata;
    /// use serde_json::json;
    /// let mut first = Metadata::generation("gen-1");
    /// first.insert("wire", json!({"a": 1, "b": {"x": 1}}));
    /// let mut second = Metadata::generation("gen-2");
    /// second.insert("agent_step", 3.into());
    /// second.insert("wire", json!({"a": 2, "b": {"y": 2}, "c": 3}));
    /// first.merge_missing(&second);
    /// assert_eq!(first.generation_id(), Some("gen-1"));
    /// assert_eq!(first.get("agent_step"), Some(&3.into()));
    /// assert_eq!(first.get("wire"), Some(&json!({"a": 1, "b": {"x": 1, "y": 2}, "c": 3})));
    /// ```
    #[inline]
    pub fn merge_missing(&mut self, other: &Metadata) {
        // Streamed pieces nearly always carry none: that case costs one test.
        if let Some(theirs) = &other.0 {
            self.merge_fields(theirs);
        }
    }

    fn merge_fields(&mut self, theirs: &Fields) {
        let Some(ours) = &mut self.0 else {
            self.0 = Some(Box::new(theirs.clone()));
            return;
        };
        if ours.generation_id.is_none() {
            ours.generation_id.clone_from(&theirs.generation_id);
        }
        if ours.from_agent.is_none() {
            ours.from_agent.clone_from(&theirs.from_agent);
        }
        fill_missing(&mut ours.extra, &theirs.extra);
    }

    fn fields_mut(&mut self) -> &mut Fields {
        self.0.get_or_insert_with(Box::default)
    }

    /// Keeps the invariant: no box without a field.
    fn normalise(&mut self) {
        if self.0.as_ref().is_some_and(|fields| fields.is_empty()) {
            self.0 = None;
        }
    }
}

/// Adds to `ours` the fields of `theirs` it lacks; where both hold an
/// object, the same one level down.
fn fill_missing(ours: &mut Map<String, Value>, theirs: &Map<String, Value>) {
    for (key, value) in theirs {
        match (ours.get_mut(key), value) {
            (None, _) => {
                ours.insert(key.clone(), value.clone());
            }
            (Some(Value::Object(ours)), Value::Object(theirs)) => fill_missing(ours, theirs),
            (Some(_), _) => {}
        }
    }
}

impl fmt::Debug for Metadata {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut map = f.debug_map();
        if let Some(fields) = &self.0 {
            if let Some(id) = &fields.generation_id {
                map.entry(&"generation_id", id);
            }
            if let Some(agent) = &fields.from_agent {
                map.entry(&"from_agent", agent);
            }
            map.entries(&fields.extra);
        }
        map.finish()
    }
}

impl Serialize for Metadata {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match &self.0 {
            Some(fields) => fields.serialize(serializer),
            None => Map::new().serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for Metadata {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut metadata = Metadata(Some(Box::new(Fields::deserialize(deserializer)?)));
        metadata.normalise();
        Ok(metadata)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_is_one_pointer_and_empty_holds_no_box() {
        assert_eq!(
            std::mem::size_of::<Metadata>(),
            std::mem::size_of::<usize>()
        );
        let read: Metadata = serde_json::from_str("{}").unwrap();
        assert_eq!(read, Metadata::new());
        let mut metadata = Metadata::new();
        metadata.insert("k", 1.into());
        assert_eq!(metadata.remove("k"), Some(1.into()));
        assert_eq!(metadata, Metadata::new(), "emptied metadata equals new");
    }

    #[test]
    fn debug_shows_the_fields() {
        let mut metadata = Metadata::generation("g");
        metadata.insert("k", 1.into());
        assert_eq!(
            format!("{metadata:?}"),
            r#"{"generation_id": "g", "k": Number(1)}"#
        );
    }
}
