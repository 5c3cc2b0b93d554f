//! Tool sources: tools that come from elsewhere — an MCP server, a plugin
//! directory — and whose list may change while the registry is in use.

use std::fmt;
use std::sync::{Arc, RwLock};

use super::tool::Tool;

/// A list of tools that may change: a [`ToolRegistry`](super::ToolRegistry) holds
/// sources beside its local tools and takes each source's current list for every
/// request.
///
/// [`version`](Self::version) is read on every request and must be cheap; it changes
/// whenever the list does, and only then is [`tools`](Self::tools) read again (and
/// its schemas compiled).
pub trait ToolSource: Send + Sync + 'static {
    /// A name for messages: the server's name, say.
    fn name(&self) -> &str;

    /// A number that changes whenever the list changes.
    fn version(&self) -> u64;

    /// The tools now.
    fn tools(&self) -> Arc<[Tool]>;
}

/// A [`ToolSource`] whose list is replaced by hand: a handle shared by whoever
/// updates it and the registries that read it.
///
/// ```
/// use lmstack::function::{Tool, ToolList, ToolRegistry};
/// use serde_json::json;
///
/// let tool = |name| Tool::dynamic(name, "", json!({"type": "object"}), |_| async { "ok" });
/// let plugins = ToolList::new("plugins", [tool("a")]);
/// let registry = ToolRegistry::builder().source(plugins.clone()).build().unwrap();
/// assert_eq!(registry.tools().names().collect::<Vec<_>>(), ["a"]);
///
/// plugins.replace([tool("a"), tool("b")]);
/// assert_eq!(registry.tools().names().collect::<Vec<_>>(), ["a", "b"]);
/// ```
#[derive(Clone)]
pub struct ToolList {
    name: Arc<str>,
    current: Arc<RwLock<Listed>>,
}

struct Listed {
    version: u64,
    tools: Arc<[Tool]>,
}

impl ToolList {
    /// A source named `name` holding `tools`.
    pub fn new(name: impl Into<Arc<str>>, tools: impl IntoIterator<Item = Tool>) -> Self {
        ToolList {
            name: name.into(),
            current: Arc::new(RwLock::new(Listed {
                version: 0,
                tools: tools.into_iter().collect(),
            })),
        }
    }

    /// Replaces the list: requests made from now on see the new tools.
    pub fn replace(&self, tools: impl IntoIterator<Item = Tool>) {
        let tools = tools.into_iter().collect();
        let mut current = self.current.write().unwrap_or_else(|e| e.into_inner());
        current.version += 1;
        current.tools = tools;
    }
}

impl ToolSource for ToolList {
    fn name(&self) -> &str {
        &self.name
    }

    fn version(&self) -> u64 {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .version
    }

    fn tools(&self) -> Arc<[Tool]> {
        let current = self.current.read().unwrap_or_else(|e| e.into_inner());
        current.tools.clone()
    }
}

impl fmt::Debug for ToolList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolList")
            .field("name", &self.name)
            .field("tools", &self.tools())
            .finish()
    }
}
