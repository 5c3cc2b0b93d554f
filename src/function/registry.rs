//! The registry: the tools a function layer runs — local ones and those of tool
//! sources — with their compiled validators.

use std::fmt;
use std::sync::{Arc, RwLock};

use serde_json::Value;

use super::source::ToolSource;
use super::tool::Tool;
use crate::{ChatOptions, Error, ToolSpec};

/// The tools a [`FunctionCallLayer`](super::FunctionCallLayer) can run: local
/// tools, and the tools of [`ToolSource`]s (an MCP server's, say) whose lists may
/// change.
///
/// Names must be unique, compared case-insensitively as
/// [`ChatOptions::find_tool`] does. Every schema is compiled into a validator once,
/// when its tool joins, so that checking a call's arguments costs no compilation.
/// Each request works with the registry's [`tools`](Self::tools) at that moment; a
/// source whose list changed is read again then. Cloning is cheap (the registry is
/// shared).
///
/// **Name clashes.** [`build`](ToolRegistryBuilder::build) fails on two tools of
/// one name. Sources whose names may clash with others' are added with a prefix
/// ([`source_prefixed`](ToolRegistryBuilder::source_prefixed)): the model then sees
/// `prefix__name`, and the source's tool still runs under its own name. A tool that
/// a source adds later under a name already taken, or with a schema that does not
/// compile, is left out (with a warning in the log) rather than failing requests.
///
/// ```
/// use lmstack::function::{Tool, ToolList, ToolRegistry};
/// use serde_json::json;
///
/// let tool = |name| Tool::dynamic(name, "", json!({"type": "object"}), |_| async { "ok" });
/// let registry = ToolRegistry::new([tool("a"), tool("b")]).unwrap();
/// assert_eq!(registry.tools().names().collect::<Vec<_>>(), ["a", "b"]);
/// assert!(matches!(
///     ToolRegistry::new([tool("a"), tool("A")]),
///     Err(lmstack::Error::DuplicateTool { .. })
/// ));
///
/// // A source whose `a` would clash, under a prefix.
/// let server = ToolList::new("files", [tool("a")]);
/// let registry = ToolRegistry::builder()
///     .tools([tool("a")])
///     .source_prefixed(server, "files")
///     .build()
///     .unwrap();
/// assert_eq!(registry.tools().names().collect::<Vec<_>>(), ["a", "files__a"]);
/// ```
#[derive(Clone)]
pub struct ToolRegistry {
    shared: Arc<Shared>,
}

struct Shared {
    local: Vec<Arc<Entry>>,
    sources: Vec<Attached>,
    current: RwLock<Arc<Built>>,
}

/// A source with the prefix its tools' names take.
struct Attached {
    source: Box<dyn ToolSource>,
    prefix: Option<String>,
}

/// The tools as built from given versions of the sources.
struct Built {
    versions: Vec<u64>,
    /// Each source's entries, compiled at its version.
    from_sources: Vec<Arc<[Arc<Entry>]>>,
    set: ToolSet,
}

/// The registry's tools at one moment: what one request works with.
#[derive(Clone)]
pub struct ToolSet {
    entries: Arc<[Arc<Entry>]>,
}

/// A tool with its compiled validator.
pub(crate) struct Entry {
    pub(crate) tool: Tool,
    validator: jsonschema::Validator,
}

/// Builds a [`ToolRegistry`] of local tools and tool sources.
#[derive(Default)]
pub struct ToolRegistryBuilder {
    tools: Vec<Tool>,
    sources: Vec<Attached>,
}

/// How a problem with one tool is met: by failing the build, or by leaving the
/// tool out of a later refresh.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Strictness {
    Fail,
    LeaveOut,
}

impl ToolRegistry {
    /// A registry of local `tools`. Fails on a duplicate name or a schema that is
    /// not a valid JSON Schema (remote `$ref`s are not fetched).
    pub fn new(tools: impl IntoIterator<Item = Tool>) -> Result<Self, Error> {
        Self::builder().tools(tools).build()
    }

    /// A builder, for registries with tool sources.
    pub fn builder() -> ToolRegistryBuilder {
        ToolRegistryBuilder::default()
    }

    /// The tools now: the local ones, then each source's, in the order they were
    /// added. A source whose list changed since the last call is read again.
    pub fn tools(&self) -> ToolSet {
        let shared = &self.shared;
        let current = shared.current.read().unwrap_or_else(|e| e.into_inner());
        if shared.fresh(&current) {
            return current.set.clone();
        }
        drop(current);
        let mut current = shared.current.write().unwrap_or_else(|e| e.into_inner());
        if !shared.fresh(&current) {
            *current = Arc::new(shared.rebuild(&current));
        }
        current.set.clone()
    }
}

impl Shared {
    /// True when every source is at the version `built` was made from.
    fn fresh(&self, built: &Built) -> bool {
        self.sources
            .iter()
            .zip(&built.versions)
            .all(|(attached, &version)| attached.source.version() == version)
    }

    /// The tools after a change of some sources: only those are read and compiled
    /// again, and their problems leave tools out instead of failing.
    fn rebuild(&self, previous: &Built) -> Built {
        let mut versions = Vec::with_capacity(self.sources.len());
        let mut from_sources = Vec::with_capacity(self.sources.len());
        for (i, attached) in self.sources.iter().enumerate() {
            let version = attached.source.version();
            let entries = if version == previous.versions[i] {
                previous.from_sources[i].clone()
            } else {
                tracing::info!(source = attached.source.name(), "tool list changed");
                attached
                    .compile(Strictness::LeaveOut)
                    .unwrap_or_else(|_| Arc::from([]))
            };
            versions.push(version);
            from_sources.push(entries);
        }
        let set = assemble(&self.local, &from_sources, Strictness::LeaveOut)
            .unwrap_or_else(|_| ToolSet::empty());
        Built {
            versions,
            from_sources,
            set,
        }
    }
}

impl Attached {
    /// The source's tools now, named with the prefix and compiled.
    fn compile(&self, strictness: Strictness) -> Result<Arc<[Arc<Entry>]>, Error> {
        let mut entries = Vec::new();
        for tool in self.source.tools().iter() {
            let tool = match &self.prefix {
                Some(prefix) => tool.clone().renamed(format!("{prefix}__{}", tool.name())),
                None => tool.clone(),
            };
            match Entry::compile(tool) {
                Ok(entry) => entries.push(Arc::new(entry)),
                Err(error) if strictness == Strictness::Fail => return Err(error),
                Err(error) => {
                    tracing::warn!(source = self.source.name(), "tool left out: {error}");
                }
            }
        }
        Ok(entries.into())
    }
}

/// The local tools, then each source's, with names checked to be unique.
fn assemble(
    local: &[Arc<Entry>],
    from_sources: &[Arc<[Arc<Entry>]>],
    strictness: Strictness,
) -> Result<ToolSet, Error> {
    let mut entries: Vec<Arc<Entry>> = Vec::with_capacity(local.len());
    let all = local
        .iter()
        .chain(from_sources.iter().flat_map(|s| s.iter()));
    for entry in all {
        let name = entry.tool.name();
        if !entries
            .iter()
            .any(|e| e.tool.name().eq_ignore_ascii_case(name))
        {
            entries.push(entry.clone());
        } else if strictness == Strictness::Fail {
            return Err(Error::DuplicateTool {
                name: name.to_owned(),
            });
        } else {
            tracing::warn!("tool `{name}` left out: another tool has its name");
        }
    }
    Ok(ToolSet {
        entries: entries.into(),
    })
}

impl ToolRegistryBuilder {
    /// Adds a local tool.
    pub fn tool(mut self, tool: Tool) -> Self {
        self.tools.push(tool);
        self
    }

    /// Adds local tools.
    pub fn tools(mut self, tools: impl IntoIterator<Item = Tool>) -> Self {
        self.tools.extend(tools);
        self
    }

    /// Adds a source whose tools keep their names.
    pub fn source(mut self, source: impl ToolSource) -> Self {
        self.sources.push(Attached {
            source: Box::new(source),
            prefix: None,
        });
        self
    }

    /// Adds a source whose tools the model sees as `prefix__name`.
    pub fn source_prefixed(mut self, source: impl ToolSource, prefix: impl Into<String>) -> Self {
        self.sources.push(Attached {
            source: Box::new(source),
            prefix: Some(prefix.into()),
        });
        self
    }

    /// The registry. Fails on two tools of one name, or a schema that is not a
    /// valid JSON Schema.
    pub fn build(self) -> Result<ToolRegistry, Error> {
        let local = self
            .tools
            .into_iter()
            .map(|tool| Entry::compile(tool).map(Arc::new))
            .collect::<Result<Vec<_>, _>>()?;
        let versions: Vec<u64> = self.sources.iter().map(|a| a.source.version()).collect();
        let from_sources = self
            .sources
            .iter()
            .map(|attached| attached.compile(Strictness::Fail))
            .collect::<Result<Vec<_>, _>>()?;
        let set = assemble(&local, &from_sources, Strictness::Fail)?;
        let built = Built {
            versions,
            from_sources,
            set,
        };
        Ok(ToolRegistry {
            shared: Arc::new(Shared {
                local,
                sources: self.sources,
                current: RwLock::new(Arc::new(built)),
            }),
        })
    }
}

impl ToolSet {
    fn empty() -> Self {
        ToolSet {
            entries: Arc::from([]),
        }
    }

    /// The tool with this name (compared case-insensitively).
    pub fn get(&self, name: &str) -> Option<&Tool> {
        self.entry(name).map(|entry| &entry.tool)
    }

    /// The tools' names, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|entry| entry.tool.name())
    }

    /// The tools' specs, in order.
    pub fn specs(&self) -> impl Iterator<Item = &ToolSpec> {
        self.entries.iter().map(|entry| entry.tool.spec())
    }

    /// The number of tools.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when there is no tool.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Adds the tools' specs to `options.tools`, deduplicated by name: a spec of the
    /// same name already there is replaced in place (the tool that will run is the
    /// one the model must see); the others are appended in order.
    ///
    /// ```
    /// use lmstack::function::{Tool, ToolRegistry};
    /// use lmstack::{ChatOptions, ToolSpec};
    /// use serde_json::json;
    ///
    /// let add = Tool::dynamic("add", "Adds", json!({"type": "object"}), |_| async { "3" });
    /// let tools = ToolRegistry::new([add]).unwrap().tools();
    /// let mut options = ChatOptions::default();
    /// options.tools.push(ToolSpec::new("search", "Searches", json!({"type": "object"})));
    /// tools.inject(&mut options);
    /// tools.inject(&mut options); // idempotent
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
            .map(Arc::as_ref)
    }
}

impl Entry {
    /// The tool with its schema compiled; fails on a schema that does not compile.
    fn compile(tool: Tool) -> Result<Entry, Error> {
        let validator = jsonschema::validator_for(&tool.spec().parameters).map_err(|error| {
            Error::stage(
                "tool registry",
                format!(
                    "the schema of `{}` is not a valid JSON Schema: {error}",
                    tool.name()
                ),
            )
        })?;
        Ok(Entry { tool, validator })
    }

    /// Checks `arguments` against the tool's schema: `Err` says what is wrong and
    /// where, in the words the parser uses for the same fault.
    pub(crate) fn validate(&self, arguments: &Value) -> Result<(), String> {
        crate::schema::check(&self.validator, self.tool.name(), arguments)
    }
}

impl fmt::Debug for ToolSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.entries.iter().map(|entry| &entry.tool))
            .finish()
    }
}

impl fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sources: Vec<&str> = self
            .shared
            .sources
            .iter()
            .map(|a| a.source.name())
            .collect();
        f.debug_struct("ToolRegistry")
            .field("tools", &self.tools())
            .field("sources", &sources)
            .finish()
    }
}

impl fmt::Debug for ToolRegistryBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sources: Vec<&str> = self.sources.iter().map(|a| a.source.name()).collect();
        f.debug_struct("ToolRegistryBuilder")
            .field("tools", &self.tools)
            .field("sources", &sources)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::function::ToolList;

    fn tool(name: &str) -> Tool {
        Tool::dynamic(name, "", json!({"type": "object"}), |_| async { "ok" })
    }

    fn names(registry: &ToolRegistry) -> Vec<String> {
        registry.tools().names().map(str::to_owned).collect()
    }

    #[test]
    fn a_source_clashing_with_a_local_tool_fails_the_build_unless_prefixed() {
        let server = ToolList::new("server", [tool("a")]);
        let clash = ToolRegistry::builder()
            .tool(tool("A"))
            .source(server.clone())
            .build();
        assert!(matches!(clash, Err(Error::DuplicateTool { name }) if name == "a"));
        let registry = ToolRegistry::builder()
            .tool(tool("A"))
            .source_prefixed(server, "server")
            .build()
            .unwrap();
        assert_eq!(names(&registry), ["A", "server__a"]);
    }

    #[test]
    fn a_changed_source_is_read_again_and_its_clashes_are_left_out() {
        let server = ToolList::new("server", [tool("b")]);
        let registry = ToolRegistry::builder()
            .tool(tool("a"))
            .source(server.clone())
            .build()
            .unwrap();
        let before = registry.tools();
        server.replace([tool("c"), tool("a"), tool("d")]);
        assert_eq!(
            names(&registry),
            ["a", "c", "d"],
            "the clashing `a` is left out"
        );
        assert_eq!(
            before.names().collect::<Vec<_>>(),
            ["a", "b"],
            "a set taken before is unchanged"
        );
    }

    #[test]
    fn a_tool_whose_schema_does_not_compile_fails_the_build_but_not_a_refresh() {
        let broken = Tool::dynamic("broken", "", json!({"type": 12}), |_| async { "" });
        let server = ToolList::new("server", [broken.clone()]);
        assert!(ToolRegistry::builder().source(server).build().is_err());
        let server = ToolList::new("server", []);
        let registry = ToolRegistry::builder()
            .source(server.clone())
            .build()
            .unwrap();
        server.replace([broken, tool("ok")]);
        assert_eq!(names(&registry), ["ok"]);
    }
}
