//! Each model family's markers, one table a family: spelled once for the
//! parser, which reads them, and the transformer, which writes them.

/// The tagged form's elements (Hermes wraps its JSON in the same ones).
pub(crate) struct Tagged {
    /// The element of a call: `<tool_call name="F">`, or Hermes's bare one.
    pub(crate) call: &'static str,
    /// What closes a call.
    pub(crate) call_close: &'static str,
    /// The element of a result: `<tool_response name="F">`.
    pub(crate) response: &'static str,
    /// What closes a result.
    pub(crate) response_close: &'static str,
}

/// The tagged form and Hermes.
pub(crate) const TAGGED: Tagged = Tagged {
    call: "tool_call",
    call_close: "</tool_call>",
    response: "tool_response",
    response_close: "</tool_response>",
};

/// Mistral's tokens: `[TOOL_CALLS]F[CALL_ID]id[ARGS]{…}`, or v0.3's
/// `[TOOL_CALLS][{…}]`; Magistral reasons between `[THINK]` and `[/THINK]`.
pub(crate) struct Mistral {
    pub(crate) calls: &'static str,
    pub(crate) call_id: &'static str,
    pub(crate) args: &'static str,
    pub(crate) think: &'static str,
    pub(crate) think_close: &'static str,
}

/// Mistral.
pub(crate) const MISTRAL: Mistral = Mistral {
    calls: "[TOOL_CALLS]",
    call_id: "[CALL_ID]",
    args: "[ARGS]",
    think: "[THINK]",
    think_close: "[/THINK]",
};

/// Granite's marker before its JSON list of calls.
pub(crate) const GRANITE_CALLS: &str = "<|tool_call|>";

/// The special tokens of a family that writes a run of calls as a section:
/// `SECTION_BEGIN (CALL_BEGIN header SEPARATOR {…} CALL_END)* SECTION_END`.
pub(crate) struct Section {
    pub(crate) section_begin: &'static str,
    pub(crate) call_begin: &'static str,
    /// Between a call's header (its name, or Kimi's id) and its arguments.
    pub(crate) separator: &'static str,
    pub(crate) call_end: &'static str,
    pub(crate) section_end: &'static str,
}

/// Kimi K2; a call's header is its id, `functions.F:N`.
pub(crate) const KIMI_K2: Section = Section {
    section_begin: "<|tool_calls_section_begin|>",
    call_begin: "<|tool_call_begin|>",
    separator: "<|tool_call_argument_begin|>",
    call_end: "<|tool_call_end|>",
    section_end: "<|tool_calls_section_end|>",
};

/// DeepSeek V3 / R1 / V3.1; a call's header is its name (V3.1) or `function`.
pub(crate) const DEEPSEEK: Section = Section {
    section_begin: "<｜tool▁calls▁begin｜>",
    call_begin: "<｜tool▁call▁begin｜>",
    separator: "<｜tool▁sep｜>",
    call_end: "<｜tool▁call▁end｜>",
    section_end: "<｜tool▁calls▁end｜>",
};

/// gpt-oss Harmony's tokens: a call is the message
/// `<|start|>assistant<|channel|>commentary to=functions.F <|constrain|>json<|message|>{…}<|call|>`.
pub(crate) struct Harmony {
    pub(crate) start: &'static str,
    pub(crate) channel: &'static str,
    pub(crate) constrain: &'static str,
    pub(crate) message: &'static str,
    /// The terminator of a call's message.
    pub(crate) call: &'static str,
    /// The terminator of any other message.
    pub(crate) end: &'static str,
    /// The terminator of the reply's last message.
    pub(crate) ret: &'static str,
    /// The recipient prefix of the request's tools.
    pub(crate) functions: &'static str,
}

/// Harmony.
pub(crate) const HARMONY: Harmony = Harmony {
    start: "<|start|>",
    channel: "<|channel|>",
    constrain: "<|constrain|>",
    message: "<|message|>",
    call: "<|call|>",
    end: "<|end|>",
    ret: "<|return|>",
    functions: "functions.",
};

/// The element names of an XML form whose values are raw text.
pub(crate) struct Xml {
    /// The element around a run of calls.
    pub(crate) block: &'static str,
    /// The element of one call.
    pub(crate) call: &'static str,
    /// The element naming the next value, where names are not attributes.
    pub(crate) key: Option<&'static str>,
    /// The element of a value.
    pub(crate) value: &'static str,
}

/// GLM's element naming the next value.
pub(crate) const GLM_KEY: &str = "arg_key";

/// GLM: `<tool_call>F\n<arg_key>k</arg_key>\n<arg_value>v</arg_value></tool_call>`;
/// the call is the block.
pub(crate) const GLM: Xml = Xml {
    block: TAGGED.call,
    call: TAGGED.call,
    key: Some(GLM_KEY),
    value: "arg_value",
};

/// MiniMax-M2: `<minimax:tool_call><invoke name="F"><parameter name="p">v</parameter></invoke></minimax:tool_call>`.
pub(crate) const MINIMAX: Xml = Xml {
    block: "minimax:tool_call",
    call: "invoke",
    key: None,
    value: "parameter",
};

/// The line between consecutive calls, between consecutive results, and
/// between a family's run of calls and the tagged calls it cannot carry.
pub(crate) const SEPARATOR: &str = "\n---\n";
