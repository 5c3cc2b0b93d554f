//! The dialects tool calls are written in as text: read by the parser,
//! rendered by the transformer.

use std::fmt;
use std::str::FromStr;

/// A way of writing tool calls as text.
///
/// The XML-like dialects (`Tagged`, `Hermes`, `Qwen3Coder`, `ClaudeXml`, `Glm`,
/// `MiniMax`) are read together by `Auto`. Each model family's own dialect
/// (`Mistral`, `Llama3Json`, `Pythonic`, `KimiK2`, `DeepSeek`, `Glm`, `Harmony`,
/// `MiniMax`, `Granite`) reads its family's markup and also the tagged form,
/// which the transformer falls back to for a call the family's form cannot
/// carry; [`Dialect::for_model`] picks one from a model's name.
///
/// The transformer renders the dialects of [`Dialect::RENDERED`] in their own
/// form; any other is rendered as [`Dialect::rendered_as`] says (`Auto` is
/// read-only: it renders the tagged form).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// The XML-like dialects at once (the default).
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
    /// Mistral: `[TOOL_CALLS][{"name": F, "arguments": {…}}]` (v0.3) and
    /// `[TOOL_CALLS]F[ARGS]{…}` (one per call, newer tokenizers).
    Mistral,
    /// Llama 3.x JSON: a bare `{"name": F, "parameters": {…}}` at the start of a
    /// line, or after `<|python_tag|>`; several separated by `;`.
    Llama3Json,
    /// Pythonic (Llama 4, Llama 3.2 small): `[get_weather(city="Paris"), add(a=1, b=2)]`.
    Pythonic,
    /// Kimi K2: `<|tool_calls_section_begin|><|tool_call_begin|>functions.F:0<|tool_call_argument_begin|>{…}<|tool_call_end|><|tool_calls_section_end|>`.
    KimiK2,
    /// DeepSeek V3 / R1 / V3.1: `<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>…<｜tool▁call▁end｜><｜tool▁calls▁end｜>`.
    DeepSeek,
    /// GLM-4.5 / 4.6 / 4.7: `<tool_call>F\n<arg_key>k</arg_key>\n<arg_value>v</arg_value></tool_call>`.
    Glm,
    /// gpt-oss Harmony: `<|channel|>analysis<|message|>…<|end|>` and
    /// `<|channel|>commentary to=functions.F <|constrain|>json<|message|>{…}<|call|>`.
    Harmony,
    /// MiniMax-M2: `<minimax:tool_call><invoke name="F"><parameter name="p">v</parameter></invoke></minimax:tool_call>`.
    MiniMax,
    /// Granite: `<|tool_call|>[{"name": F, "arguments": {…}}]`.
    Granite,
}

impl Dialect {
    /// Every dialect, by its CLI name.
    pub const ALL: [Dialect; 15] = [
        Dialect::Auto,
        Dialect::Tagged,
        Dialect::Hermes,
        Dialect::Qwen3Coder,
        Dialect::ClaudeXml,
        Dialect::Json,
        Dialect::Mistral,
        Dialect::Llama3Json,
        Dialect::Pythonic,
        Dialect::KimiK2,
        Dialect::DeepSeek,
        Dialect::Glm,
        Dialect::Harmony,
        Dialect::MiniMax,
        Dialect::Granite,
    ];

    /// The CLI name: `auto`, `tagged`, `hermes`, `qwen3-coder`, `claude-xml`,
    /// `json`, `mistral`, `llama3-json`, `pythonic`, `kimi-k2`, `deepseek`,
    /// `glm`, `harmony`, `minimax`, `granite`.
    pub fn name(self) -> &'static str {
        match self {
            Dialect::Auto => "auto",
            Dialect::Tagged => "tagged",
            Dialect::Hermes => "hermes",
            Dialect::Qwen3Coder => "qwen3-coder",
            Dialect::ClaudeXml => "claude-xml",
            Dialect::Json => "json",
            Dialect::Mistral => "mistral",
            Dialect::Llama3Json => "llama3-json",
            Dialect::Pythonic => "pythonic",
            Dialect::KimiK2 => "kimi-k2",
            Dialect::DeepSeek => "deepseek",
            Dialect::Glm => "glm",
            Dialect::Harmony => "harmony",
            Dialect::MiniMax => "minimax",
            Dialect::Granite => "granite",
        }
    }

    /// Every dialect the transformer renders in its own form, by CLI name.
    pub const RENDERED: [Dialect; 11] = {
        let mut rendered = [Dialect::Tagged; 11];
        let (mut all, mut written) = (0, 0);
        while all < Dialect::ALL.len() {
            if Dialect::ALL[all].renders() {
                rendered[written] = Dialect::ALL[all];
                written += 1;
            }
            all += 1;
        }
        assert!(written == rendered.len());
        rendered
    };

    /// True when the transformer renders this dialect's own form (one of
    /// [`RENDERED`](Self::RENDERED)): all but the read-only `Auto`,
    /// `Qwen3Coder`, `ClaudeXml` and `Json`.
    pub const fn renders(self) -> bool {
        !matches!(
            self,
            Dialect::Auto | Dialect::Qwen3Coder | Dialect::ClaudeXml | Dialect::Json
        )
    }

    /// The form the transformer renders for this dialect: its own when it
    /// [`renders`](Self::renders) it, Hermes for Qwen3-Coder (the form Qwen's
    /// chat templates show), else tagged (`Auto`, `ClaudeXml`, `Json`).
    ///
    /// ```
    /// use lmstack::natural::Dialect;
    /// assert_eq!(Dialect::Granite.rendered_as(), Dialect::Granite);
    /// assert_eq!(Dialect::Qwen3Coder.rendered_as(), Dialect::Hermes);
    /// assert_eq!(Dialect::Auto.rendered_as(), Dialect::Tagged);
    /// ```
    pub fn rendered_as(self) -> Dialect {
        match self {
            Dialect::Qwen3Coder => Dialect::Hermes,
            dialect if dialect.renders() => dialect,
            _ => Dialect::Tagged,
        }
    }

    /// The dialect to read what is rendered for this one with, when the text
    /// may hold other forms too: `Auto` when it reads that form (tagged,
    /// Hermes, GLM, MiniMax), else the family's own dialect.
    pub fn read_by(self) -> Dialect {
        let rendered = self.rendered_as();
        if Dialect::Auto.reads(rendered) {
            Dialect::Auto
        } else {
            rendered
        }
    }

    /// The dialect named `name` among those the transformer renders (the
    /// `lmstack render --dialect` names); the error lists them.
    pub fn parse_rendered(name: &str) -> Result<Dialect, String> {
        name.parse()
            .ok()
            .filter(|dialect: &Dialect| dialect.renders())
            .ok_or_else(|| unknown(name, "the transformer writes", &Dialect::RENDERED))
    }

    /// True when reading `self` includes reading `other`: `Auto` reads the
    /// XML-like dialects, each family's own dialect (GLM and MiniMax included)
    /// also reads `Tagged`.
    pub fn reads(self, other: Dialect) -> bool {
        self == other
            || match self {
                Dialect::Auto => other.is_xml(),
                Dialect::Tagged
                | Dialect::Hermes
                | Dialect::Qwen3Coder
                | Dialect::ClaudeXml
                | Dialect::Json => false,
                Dialect::Glm
                | Dialect::MiniMax
                | Dialect::Mistral
                | Dialect::Llama3Json
                | Dialect::Pythonic
                | Dialect::KimiK2
                | Dialect::DeepSeek
                | Dialect::Harmony
                | Dialect::Granite => other == Dialect::Tagged,
            }
    }

    /// True for the XML-like dialects, which `Auto` reads.
    fn is_xml(self) -> bool {
        matches!(
            self,
            Dialect::Tagged
                | Dialect::Hermes
                | Dialect::Qwen3Coder
                | Dialect::ClaudeXml
                | Dialect::Glm
                | Dialect::MiniMax
        )
    }

    /// The dialect a model writes, guessed from its name (case-insensitive,
    /// with or without an organisation prefix); `Auto` for names it does not
    /// know.
    ///
    /// ```
    /// use lmstack::natural::Dialect;
    /// assert_eq!(Dialect::for_model("mistralai/Devstral-Small-2507"), Dialect::Mistral);
    /// assert_eq!(Dialect::for_model("meta-llama/Llama-3.1-8B-Instruct"), Dialect::Llama3Json);
    /// assert_eq!(Dialect::for_model("meta-llama/Llama-4-Scout-17B-16E-Instruct"), Dialect::Pythonic);
    /// assert_eq!(Dialect::for_model("Qwen/Qwen3-Coder-30B-A3B-Instruct"), Dialect::Qwen3Coder);
    /// assert_eq!(Dialect::for_model("openai/gpt-oss-20b"), Dialect::Harmony);
    /// assert_eq!(Dialect::for_model("smollm2-135m"), Dialect::Auto);
    /// ```
    pub fn for_model(model: &str) -> Dialect {
        let model = model.to_ascii_lowercase();
        let name = model.rsplit('/').next().unwrap_or(&model);
        let has = |part: &str| name.contains(part);
        if has("deepseek") {
            Dialect::DeepSeek
        } else if has("qwen3-coder") || has("qwen3coder") {
            Dialect::Qwen3Coder
        } else if has("qwen") || has("hermes") {
            Dialect::Hermes
        } else if has("mistral")
            || has("devstral")
            || has("magistral")
            || has("ministral")
            || has("mixtral")
            || has("codestral")
        {
            Dialect::Mistral
        } else if has("llama-4") || has("llama4") || has("llama-3.2-1b") || has("llama-3.2-3b") {
            Dialect::Pythonic
        } else if has("llama-3") || has("llama3") {
            Dialect::Llama3Json
        } else if has("kimi-k2") || has("kimi_k2") {
            Dialect::KimiK2
        } else if has("glm-4") || has("glm4") {
            Dialect::Glm
        } else if has("gpt-oss") {
            Dialect::Harmony
        } else if has("minimax") {
            Dialect::MiniMax
        } else if has("granite") {
            Dialect::Granite
        } else {
            Dialect::Auto
        }
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
            .ok_or_else(|| unknown(name, "the dialects are", &Dialect::ALL))
    }
}

/// The error for an unknown dialect `name`: `known`, listed after `lead`.
fn unknown(name: &str, lead: &str, known: &[Dialect]) -> String {
    let names: Vec<&str> = known.iter().map(|d| d.name()).collect();
    format!("unknown dialect `{name}`; {lead}: {}", names.join(", "))
}

#[cfg(test)]
mod tests {
    use super::Dialect;

    #[test]
    fn every_family_the_issue_names_is_picked_by_its_model_names() {
        for (model, dialect) in [
            ("Qwen/Qwen2.5-7B-Instruct", Dialect::Hermes),
            ("NousResearch/Hermes-3-Llama-3.1-8B", Dialect::Hermes),
            ("Qwen/Qwen3-Coder-480B-A35B-Instruct", Dialect::Qwen3Coder),
            ("mistralai/Mistral-7B-Instruct-v0.3", Dialect::Mistral),
            ("mistralai/Magistral-Small-2509", Dialect::Mistral),
            ("meta-llama/Llama-3.3-70B-Instruct", Dialect::Llama3Json),
            ("meta-llama/Llama-3.2-3B-Instruct", Dialect::Pythonic),
            (
                "meta-llama/Llama-4-Maverick-17B-128E-Instruct",
                Dialect::Pythonic,
            ),
            ("moonshotai/Kimi-K2-Instruct-0905", Dialect::KimiK2),
            ("deepseek-ai/DeepSeek-V3.1", Dialect::DeepSeek),
            ("deepseek-ai/DeepSeek-R1-0528", Dialect::DeepSeek),
            ("deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", Dialect::DeepSeek),
            ("zai-org/GLM-4.6", Dialect::Glm),
            ("openai/gpt-oss-120b", Dialect::Harmony),
            ("MiniMaxAI/MiniMax-M2", Dialect::MiniMax),
            ("ibm-granite/granite-3.3-8b-instruct", Dialect::Granite),
            ("HuggingFaceTB/SmolLM2-135M-Instruct", Dialect::Auto),
        ] {
            assert_eq!(Dialect::for_model(model), dialect, "{model}");
        }
    }

    #[test]
    fn auto_reads_the_xml_family_and_the_families_read_tagged() {
        assert!(Dialect::Auto.reads(Dialect::Glm));
        assert!(Dialect::Auto.reads(Dialect::MiniMax));
        assert!(!Dialect::Auto.reads(Dialect::Json));
        assert!(!Dialect::Auto.reads(Dialect::Mistral));
        assert!(Dialect::Harmony.reads(Dialect::Tagged));
        assert!(!Dialect::Harmony.reads(Dialect::Hermes));
        assert!(Dialect::Glm.reads(Dialect::Tagged));
        assert!(Dialect::MiniMax.reads(Dialect::Tagged));
        assert!(!Dialect::Hermes.reads(Dialect::Tagged));
    }

    #[test]
    fn names_read_back_and_only_the_rendered_dialects_parse_as_rendered() {
        for dialect in Dialect::ALL {
            assert_eq!(dialect.name().parse::<Dialect>(), Ok(dialect));
            assert!(dialect.rendered_as().renders(), "{dialect}");
            assert!(dialect.read_by().reads(dialect.rendered_as()), "{dialect}");
        }
        let rendered = "tagged, hermes, mistral, llama3-json, pythonic, kimi-k2, deepseek, glm, \
                        harmony, minimax, granite";
        assert_eq!(Dialect::RENDERED.map(Dialect::name).join(", "), rendered);
        for dialect in Dialect::RENDERED {
            assert_eq!(dialect.rendered_as(), dialect);
            assert_eq!(Dialect::parse_rendered(dialect.name()), Ok(dialect));
        }
        for name in ["auto", "qwen3-coder", "claude-xml", "json", "nope"] {
            let error = Dialect::parse_rendered(name).unwrap_err();
            let expected = format!("unknown dialect `{name}`; the transformer writes: {rendered}");
            assert_eq!(error, expected);
        }
        assert_eq!(Dialect::Hermes.read_by(), Dialect::Auto);
        assert_eq!(Dialect::Qwen3Coder.read_by(), Dialect::Auto);
        assert_eq!(Dialect::Mistral.read_by(), Dialect::Mistral);
    }
}
