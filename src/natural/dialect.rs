//! The dialects the parser reads.

use std::fmt;
use std::str::FromStr;

/// A way of writing tool calls as text.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// The four XML-like dialects at once (the default).
    #[default]
    Auto,
    /// `<tool_call name="F">` + JSON arguments, bare or in a ```` ```json ```` fence.
    Tagged,
    /// Hermes / Qwen2.5: `<tool_call>{"name": F, "arguments": {…}}</tool_call>`.
    Hermes,
    /// Qwen3-Coder: `<tool_call><function=F><parameter=p>v</parameter></function></tool_call>`.
    Qwen3Coder,
    /// Claude-style: `<function_calls><invoke name="F"><parameter name="p">v</parameter></invoke></function_calls>`.
    ClaudeXml,
    /// The JSON protocol `{"type":"tool_use","tool_uses":[{"name":F,"params":{…}}]}`.
    Json,
}

impl Dialect {
    /// Every dialect, by its CLI name.
    pub const ALL: [Dialect; 6] = [
        Dialect::Auto,
        Dialect::Tagged,
        Dialect::Hermes,
        Dialect::Qwen3Coder,
        Dialect::ClaudeXml,
        Dialect::Json,
    ];

    /// The CLI name: `auto`, `tagged`, `hermes`, `qwen3-coder`, `claude-xml`, `json`.
    pub fn name(self) -> &'static str {
        match self {
            Dialect::Auto => "auto",
            Dialect::Tagged => "tagged",
            Dialect::Hermes => "hermes",
            Dialect::Qwen3Coder => "qwen3-coder",
            Dialect::ClaudeXml => "claude-xml",
            Dialect::Json => "json",
        }
    }

    /// True when reading `self` includes reading `other`.
    pub fn reads(self, other: Dialect) -> bool {
        self == other || (self == Dialect::Auto && other != Dialect::Json)
    }
}

impl fmt::Display for Dialect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Dialect {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Dialect::ALL
            .into_iter()
            .find(|dialect| dialect.name() == name)
            .ok_or_else(|| {
                let names: Vec<&str> = Dialect::ALL.iter().map(|d| d.name()).collect();
                format!(
                    "unknown dialect `{name}`; the dialects are: {}",
                    names.join(", ")
                )
            })
    }
}
