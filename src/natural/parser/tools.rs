//! The request's tools as the parser sees them: names, schemas and validators.

use std::sync::Arc;

use jsonschema::Validator;

use crate::schema::SchemaCache;
use crate::{Error, ToolSpec};

/// The tools of one request.
#[derive(Debug, Default)]
pub(super) struct ToolTable {
    entries: Vec<Entry>,
}

/// One tool and its compiled validator.
#[derive(Debug)]
pub(super) struct Entry {
    pub(super) spec: ToolSpec,
    pub(super) validator: Option<Arc<Validator>>,
}

/// The result of looking a name up.
pub(super) enum Lookup {
    /// The tool at this index (matched case-insensitively).
    Known(usize),
    /// No tool of that name.
    Unknown,
    /// The request has no tools: any name goes, unchecked.
    Any,
}

impl ToolTable {
    /// The table for `tools`, with validators from `cache`.
    pub(super) fn new(tools: &[ToolSpec], cache: &SchemaCache) -> Result<Self, Error> {
        let entries = tools
            .iter()
            .map(|spec| {
                Ok(Entry {
                    validator: Some(cache.validator(spec)?),
                    spec: spec.clone(),
                })
            })
            .collect::<Result<_, Error>>()?;
        Ok(ToolTable { entries })
    }

    pub(super) fn lookup(&self, name: &str) -> Lookup {
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

    /// The tool names, for error messages.
    pub(super) fn names(&self) -> String {
        let names: Vec<&str> = self.entries.iter().map(|e| e.spec.name.as_str()).collect();
        names.join(", ")
    }
}
