//! The request's tools as the parser sees them: names, schemas and validators,
//! and the checks of a call's arguments against them.

use std::sync::Arc;

use serde_json::Value;

use crate::message::InvalidCallKind;
use crate::schema::{Compiled, ParamKind, SchemaCache};
use crate::{Error, ToolChoice, ToolSpec};

/// The tools of one request, and the calls its `tool_choice` allows.
#[derive(Debug, Default)]
pub(super) struct ToolTable {
    entries: Vec<Entry>,
    choice: Option<ToolChoice>,
}

/// One tool and its compiled schema.
#[derive(Debug)]
pub(super) struct Entry {
    pub(super) spec: ToolSpec,
    schema: Arc<Compiled>,
}

/// The result of looking a name up.
pub(super) enum Lookup {
    /// The tool at this index (matched case-insensitively).
    Known(usize),
    /// No tool of that name.
    Unknown,
    /// The request has no tools: any name goes, unchecked.
    Any,
    /// The request's `tool_choice` does not allow calling this tool.
    NotAllowed,
}

impl ToolTable {
    /// The table for `tools` under `choice`, with validators from `cache`.
    pub(super) fn new(
        tools: &[ToolSpec],
        choice: Option<&ToolChoice>,
        cache: &SchemaCache,
    ) -> Result<Self, Error> {
        let entries = tools
            .iter()
            .map(|spec| {
                Ok(Entry {
                    schema: cache.compiled(spec)?,
                    spec: spec.clone(),
                })
            })
            .collect::<Result<_, Error>>()?;
        Ok(ToolTable {
            entries,
            choice: choice.cloned(),
        })
    }

    pub(super) fn lookup(&self, name: &str) -> Lookup {
        if self
            .choice
            .as_ref()
            .is_some_and(|choice| !choice.allows(name))
        {
            return Lookup::NotAllowed;
        }
        if self.entries.is_empty() {
            return Lookup::Any;
        }
        match self
            .entries
            .iter()
            .position(|entry| entry.spec.name.eq_ignore_ascii_case(name))
        {
            Some(index) => Lookup::Known(index),
            None => Lookup::Unknown,
        }
    }

    pub(super) fn entry(&self, index: usize) -> &Entry {
        &self.entries[index]
    }

    /// How the schema of the tool at index `tool` types `param`.
    pub(super) fn param_kind(&self, tool: usize, param: &str) -> ParamKind {
        self.entries[tool].schema.kind(param)
    }

    /// Checks a call's arguments: JSON, an object, and — for a call of the
    /// tool at index `tool` — the tool's schema.
    pub(super) fn check(
        &self,
        tool: Option<usize>,
        args: &str,
    ) -> Result<(), (InvalidCallKind, String)> {
        let arguments = if args.trim().is_empty() {
            Value::Object(Default::default())
        } else {
            serde_json::from_str(args).map_err(|error| {
                (
                    InvalidCallKind::MalformedArguments,
                    format!("the arguments are not valid JSON: {error}"),
                )
            })?
        };
        if !arguments.is_object() {
            return Err((
                InvalidCallKind::MalformedArguments,
                "the arguments are not a JSON object".into(),
            ));
        }
        let Some(entry) = tool.map(|tool| self.entry(tool)) else {
            return Ok(());
        };
        crate::schema::check(&entry.schema.validator, &entry.spec.name, &arguments)
            .map_err(|message| (InvalidCallKind::SchemaViolation, message))
    }

    /// The tool names, for error messages.
    pub(super) fn names(&self) -> String {
        let names: Vec<&str> = self.entries.iter().map(|e| e.spec.name.as_str()).collect();
        names.join(", ")
    }
}
