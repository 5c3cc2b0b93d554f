//! Every wire format lmstack speaks, named once: for errors, logs, the CLI's
//! `--provider` and `lmstack serve`'s `provider = "…"`.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A wire format, as a client or an upstream speaks it.
///
/// ```
/// use lmstack::provider::Kind;
///
/// assert_eq!("anthropic".parse::<Kind>(), Ok(Kind::Anthropic));
/// assert_eq!(Kind::OpenAiChat.to_string(), "openai");
/// assert_eq!("openai-responses".parse::<Kind>(), Ok(Kind::OpenAiResponses));
/// assert!("bedrock".parse::<Kind>().unwrap_err().contains("openai, openai-responses, anthropic, gemini"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(into = "&'static str", try_from = "String")]
pub enum Kind {
    /// OpenAI Chat Completions and the servers compatible with it
    /// ([`openai_chat`](super::openai_chat)).
    OpenAiChat,
    /// OpenAI Responses ([`openai_responses`](super::openai_responses)).
    OpenAiResponses,
    /// Anthropic Messages ([`anthropic`](super::anthropic)).
    Anthropic,
    /// Google Gemini's `generateContent` ([`gemini`](super::gemini)).
    Gemini,
}

impl Kind {
    /// Every wire format, in the order names are listed.
    pub const ALL: [Kind; 4] = [
        Kind::OpenAiChat,
        Kind::OpenAiResponses,
        Kind::Anthropic,
        Kind::Gemini,
    ];

    /// Whether the wire takes cache breakpoints ([`CacheControl`](crate::CacheControl)):
    /// Anthropic's only — OpenAI caches a prompt's prefix by itself, Gemini's
    /// request has no place for them.
    pub const fn takes_cache_breakpoints(self) -> bool {
        matches!(self, Kind::Anthropic)
    }

    /// Its name: `openai`, `openai-responses`, `anthropic`, `gemini`.
    pub const fn name(self) -> &'static str {
        match self {
            Kind::OpenAiChat => "openai",
            Kind::OpenAiResponses => "openai-responses",
            Kind::Anthropic => "anthropic",
            Kind::Gemini => "gemini",
        }
    }
}

impl Kind {
    /// The provider's name in the OpenTelemetry GenAI conventions
    /// (`gen_ai.provider.name`): `openai` for both OpenAI wires (and the
    /// servers compatible with them), `anthropic`, `gcp.gemini`.
    ///
    /// ```
    /// use lmstack::provider::Kind;
    ///
    /// assert_eq!(Kind::Gemini.gen_ai_provider_name(), "gcp.gemini");
    /// ```
    pub const fn gen_ai_provider_name(self) -> &'static str {
        match self {
            Kind::OpenAiChat | Kind::OpenAiResponses => "openai",
            Kind::Anthropic => "anthropic",
            Kind::Gemini => "gcp.gemini",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Kind {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, String> {
        Kind::ALL
            .into_iter()
            .find(|kind| kind.name() == name)
            .ok_or_else(|| {
                let names: Vec<_> = Kind::ALL.iter().map(|kind| kind.name()).collect();
                format!(
                    "unknown provider `{name}`: expected one of {}",
                    names.join(", ")
                )
            })
    }
}

impl From<Kind> for &'static str {
    fn from(kind: Kind) -> Self {
        kind.name()
    }
}

impl TryFrom<String> for Kind {
    type Error = String;

    fn try_from(name: String) -> Result<Self, String> {
        name.parse()
    }
}
