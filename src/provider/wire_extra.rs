//! A wire's bag of fields the canonical model has no place for: the fields of
//! a message, a call, a result or a content block that a client sent and no
//! canonical field holds (OpenAI's `name`, a field of a newer API version…),
//! kept as they came in the metadata of the canonical item they belong to,
//! under a key of the wire's own. The wire's decoder fills it, the same
//! wire's lowering writes it back; other wires never read the key, so no
//! wire's fields leak into another's body.
//!
//! A message's content blocks have no metadata: their fields are kept in the
//! message's (or the tool result's), one object per block in the blocks'
//! order, under a second key ([`keep_blocks`], [`kept_block`]).

use serde_json::{Map, Value};

use crate::message::Metadata;

/// Keeps `fields` under `key` in `metadata`, added to those already there;
/// nothing when `fields` is empty.
pub(crate) fn keep(metadata: &mut Metadata, key: &str, fields: Map<String, Value>) {
    if fields.is_empty() {
        return;
    }
    let mut all = kept(metadata, key);
    all.extend(fields);
    metadata.insert(key, Value::Object(all));
}

/// The fields kept under `key`, none when there are none.
pub(crate) fn kept(metadata: &Metadata, key: &str) -> Map<String, Value> {
    match metadata.get(key) {
        Some(Value::Object(fields)) => fields.clone(),
        _ => Map::new(),
    }
}

/// Keeps the fields of each content block, in the blocks' order, under `key`;
/// nothing when no block has any.
pub(crate) fn keep_blocks(metadata: &mut Metadata, key: &str, blocks: Vec<Map<String, Value>>) {
    if blocks.iter().all(Map::is_empty) {
        return;
    }
    let blocks = blocks.into_iter().map(Value::Object).collect();
    metadata.insert(key, Value::Array(blocks));
}

/// The fields kept under `key` for the content block at `index`, none when
/// there are none.
pub(crate) fn kept_block(metadata: &Metadata, key: &str, index: usize) -> Map<String, Value> {
    match metadata.get(key).and_then(|blocks| blocks.get(index)) {
        Some(Value::Object(fields)) => fields.clone(),
        _ => Map::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields(value: Value) -> Map<String, Value> {
        let Value::Object(fields) = value else {
            panic!("an object")
        };
        fields
    }

    #[test]
    fn fields_are_kept_merged_and_read_back() {
        let mut metadata = Metadata::new();
        keep(&mut metadata, "w", Map::new());
        assert!(metadata.is_empty(), "nothing kept for no fields");
        keep(&mut metadata, "w", fields(json!({"a": 1})));
        keep(&mut metadata, "w", fields(json!({"b": [2]})));
        assert_eq!(kept(&metadata, "w"), fields(json!({"a": 1, "b": [2]})));
        assert!(kept(&metadata, "other").is_empty());
    }

    #[test]
    fn block_fields_are_kept_by_position() {
        let mut metadata = Metadata::new();
        keep_blocks(&mut metadata, "w", vec![Map::new(), Map::new()]);
        assert!(metadata.is_empty(), "nothing kept when no block has fields");
        keep_blocks(
            &mut metadata,
            "w",
            vec![Map::new(), fields(json!({"x": 1}))],
        );
        assert!(kept_block(&metadata, "w", 0).is_empty());
        assert_eq!(kept_block(&metadata, "w", 1), fields(json!({"x": 1})));
        assert!(kept_block(&metadata, "w", 2).is_empty());
    }
}
