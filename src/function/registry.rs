//! The registry: the tools a function layer runs, with their compiled validators.

use std::fmt;
use std::sync::Arc;

use serde_json::Value;

use super::tool::Tool;
use crate::{ChatOptions, Error, ToolSpec};

/// The tools a [`FunctionCallLayer`](super::FunctionCallLayer) can run.
///
/// Built once: names must be unique (compared case-insensitively, as
/// [`ChatOptions::find_tool`] does) and every schema is compiled into a validator
/// here, so that checking a call's arguments costs no compilation. Cloning is cheap
/// (the registry is shared).
///
/// ```
/// use lmstack::function::{Tool, ToolRegistry};
/// use serde_json::json;
///
/// let tool = |name| Tool::dynamic(name, "", json!({"type": "object"}), |_| async {
///     Ok::<_, std::convert::Infallible>("ok")
/// });
/// let registry = ToolRegistry::new([tool("a"), tool("b")]).unwrap();
/// assert_eq!(registry.names().collect::<Vec<_>>(), ["a", "b"]);
/// assert!(matches!(
///     ToolRegistry::new([tool("a"), tool("A")]),
///     Err(lmstack::Error::DuplicateTool { .. })
/// ));
/// ```
#[derive(Clone)]
pub struct ToolRegistry {
    entries: Arc<[Entry]>,
}

/// A tool with its compiled validator.
pub(crate) struct Entry {
    pub(crate) tool: Tool,
    validator: jsonschema::Validator,
}

impl ToolRegistry {
    /// A registry of `tools`. Fails on a duplicate name or a schema that is not a
    /// valid JSON Schema (remote `$ref`s are not fetched).
    pub fn new(tools: impl IntoIterator<Item = Tool>) -> Result<Self, Error> {
        let mut entries: Vec<Entry> = Vec::new();
        for tool in tools {
            if entries
                .iter()
                .any(|e| e.tool.name().eq_ignore_ascii_case(tool.name()))
            {
                return Err(Error::DuplicateTool {
                    name: tool.name().to_owned(),
                });
            }
            let validator =
                jsonschema::validator_for(&tool.spec().parameters).map_err(|error| {
                    Error::stage(
                        "tool registry",
                        format!(
                            "the schema of `{}` is not a valid JSON Schema: {error}",
                            tool.name()
                        ),
                    )
                })?;
            entries.push(Entry { tool, validator });
        }
        Ok(ToolRegistry {
            entries: entries.into(),
        })
    }

    /// The tool with this name (compared case-insensitively).
    pub fn get(&self, name: &str) -> Option<&Tool> {
        self.entry(name).map(|entry| &entry.tool)
    }

    /// The tools' names, in registration order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|entry| entry.tool.name())
    }

    /// The tools' specs, in registration order.
    pub fn specs(&self) -> impl Iterator<Item = &ToolSpec> {
        self.entries.iter().map(|entry| entry.tool.spec())
    }

    /// The number of tools.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when the registry has no tool.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Adds the tools' specs to `options.tools`, deduplicated by name: a spec of the
    /// same name already there is replaced in place by the registry's (the tool that
    /// will run is the one the model must see); the others are appended in
    /// registration order.
    ///
    /// ```
    /// use lmstack::function::{Tool, ToolRegistry};
    /// use lmstack::{ChatOptions, ToolSpec};
    /// use serde_json::json;
    ///
    /// let add = Tool::dynamic("add", "Adds", json!({"type": "object"}), |_| async {
    ///     Ok::<_, std::convert::Infallible>("3")
    /// });
    /// let registry = ToolRegistry::new([add]).unwrap();
    /// let mut options = ChatOptions::default();
    /// options.tools.push(ToolSpec::new("search", "Searches", json!({"type": "object"})));
    /// registry.inject(&mut options);
    /// registry.inject(&mut options); // idempotent
    /// let names: Vec<_> = options.tools.iter().map(|t| t.name.as_str()).collect();
    /// assert_eq!(names, ["search", "add"]);
    /// ```
    pub fn inject(&self, options: &mut ChatOptions) {
        for spec in self.specs() {
            match options
                .tools
                .iter_mut()
                .find(|existing| existing.name.eq_ignore_ascii_case(&spec.name))
            {
                Some(existing) => existing.clone_from(spec),
                None => options.tools.push(spec.clone()),
            }
        }
    }

    /// The tool with this name, with its validator.
    pub(crate) fn entry(&self, name: &str) -> Option<&Entry> {
        self.entries
            .iter()
            .find(|entry| entry.tool.name().eq_ignore_ascii_case(name))
    }
}

impl Entry {
    /// Checks `arguments` against the tool's schema: `Err` says what is wrong and
    /// where, in the words the parser uses for the same fault.
    pub(crate) fn validate(&self, arguments: &Value) -> Result<(), String> {
        crate::schema::check(&self.validator, self.tool.name(), arguments)
    }
}

impl fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.entries.iter().map(|entry| &entry.tool))
            .finish()
    }
}
