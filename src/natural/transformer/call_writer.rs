//! The calls of a message as text: the tagged form, Hermes's, or a model
//! family's own (listed at [`Dialect`]). A call a family's form cannot carry
//! faithfully is written in the tagged form, apart from the others by `---`
//! lines.
//!
//! ```text
//! <tool_call name="get_weather" id="call_1">
//! {
//!   "city": "Paris"
//! }
//! </tool_call>
//!
//! <tool_call>
//! {"name": "get_weather", "id": "call_1", "arguments": {"city": "Paris"}}
//! </tool_call>
//! ```

use serde_json::Value;

use super::python_literal::{identifier, joined, python};
use crate::ToolCall;
use crate::natural::dialect::Dialect;
use crate::natural::json_text::{one_line, pretty};
use crate::natural::markers::{
    DEEPSEEK, GLM, GRANITE_CALLS, HARMONY, KIMI_K2, MINIMAX, MISTRAL, SEPARATOR, Section, TAGGED,
    Xml,
};
use crate::natural::result_text::open_tag;
use crate::natural::scan::NAME_LIMIT;
use crate::natural::scan::xml_value::reads_raw_value;

/// Writes calls in a row, joined as the dialect joins several calls of one
/// message; a call its form cannot carry (see [`carries`]) is written in the
/// tagged form, apart from the others by `---` lines. Ids only when `ids` is
/// set; `first` is the number, in the conversation, of the first call (Kimi
/// K2's ids count the conversation's calls). `dialect` is one the transformer
/// renders ([`Dialect::rendered_as`]).
pub(crate) fn write_calls(
    out: &mut String,
    calls: &[ToolCall],
    dialect: Dialect,
    ids: bool,
    first: usize,
) {
    let form = |call: &ToolCall| {
        if carries(dialect, call, ids) {
            dialect
        } else {
            Dialect::Tagged
        }
    };
    let mut number = first;
    for (i, run) in calls.chunk_by(|a, b| form(a) == form(b)).enumerate() {
        if i > 0 {
            out.push_str(SEPARATOR);
        }
        write_run(out, run, form(&run[0]), ids, number);
        number += run.len();
    }
}

/// A sample call with arguments `arguments`, as a model should write it (no id).
pub(crate) fn write_example(out: &mut String, name: &str, arguments: &Value, dialect: Dialect) {
    write_calls(
        out,
        &[ToolCall::new("", name, arguments.clone())],
        dialect,
        false,
        0,
    );
}

/// True when the form has a place for a call's id; the other forms keep ids in
/// the message's metadata, as `call_ids(false)` does.
pub(crate) fn writes_ids(dialect: Dialect) -> bool {
    matches!(
        dialect,
        Dialect::Tagged | Dialect::Hermes | Dialect::Mistral
    )
}

/// True when `dialect`'s form writes `call` so that it reads back as itself: its
/// name (and id, when written) fit the form's bare text, and every value reads
/// back as the same value. Otherwise the call goes in the tagged form.
fn carries(dialect: Dialect, call: &ToolCall, ids: bool) -> bool {
    let object = call.arguments.as_object();
    match dialect {
        Dialect::Llama3Json | Dialect::Granite => object.is_some(),
        Dialect::Pythonic => {
            identifier(&call.name)
                && object.is_some_and(|args| args.keys().all(|key| identifier(key)))
        }
        Dialect::Mistral => {
            bare_name(&call.name) && object.is_some() && (!ids || bare_name(&call.id))
        }
        Dialect::KimiK2 | Dialect::DeepSeek | Dialect::Harmony => {
            bare_name(&call.name) && object.is_some()
        }
        Dialect::Glm | Dialect::MiniMax => {
            let xml = xml_markers(dialect);
            bare_name(&call.name)
                && object.is_some_and(|args| {
                    args.iter()
                        .all(|(key, value)| bare_name(key) && xml_value(value, xml).is_some())
                })
        }
        _ => true,
    }
}

/// A name a form writes bare: ASCII letters, digits, `_`, `-`, `.`, at most
/// [`NAME_LIMIT`] bytes.
fn bare_name(name: &str) -> bool {
    (1..=NAME_LIMIT).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// Writes a run of calls that `form` carries, joined as the family joins the
/// calls of one message; `first` is the number of its first call.
fn write_run(out: &mut String, run: &[ToolCall], form: Dialect, ids: bool, first: usize) {
    match form {
        Dialect::Hermes => joined(out, run, SEPARATOR, |out, call| {
            out.push('<');
            out.push_str(TAGGED.call);
            out.push_str(">\n");
            json_call(out, call, id_of(call, ids), "arguments");
            out.push('\n');
            out.push_str(TAGGED.call_close);
        }),
        Dialect::Mistral => joined(out, run, "", |out, call| {
            out.push_str(MISTRAL.calls);
            out.push_str(&call.name);
            if let Some(id) = id_of(call, ids) {
                out.push_str(MISTRAL.call_id);
                out.push_str(id);
            }
            out.push_str(MISTRAL.args);
            out.push_str(&one_line(&call.arguments));
        }),
        Dialect::Llama3Json => joined(out, run, "\n", |out, call| {
            json_call(out, call, None, "parameters");
        }),
        Dialect::Granite => {
            out.push_str(GRANITE_CALLS);
            out.push('[');
            joined(out, run, ", ", |out, call| {
                json_call(out, call, None, "arguments");
            });
            out.push(']');
        }
        Dialect::Pythonic => {
            out.push('[');
            joined(out, run, ", ", |out, call| {
                out.push_str(&call.name);
                out.push('(');
                let arguments = call.arguments.as_object().into_iter().flatten();
                joined(out, arguments, ", ", |out, (key, value)| {
                    out.push_str(key);
                    out.push('=');
                    python(out, value);
                });
                out.push(')');
            });
            out.push(']');
        }
        Dialect::KimiK2 => section(out, &KIMI_K2, run, |call, number| {
            format!("functions.{}:{}", call.name, first + number)
        }),
        Dialect::DeepSeek => section(out, &DEEPSEEK, run, |call, _| call.name.clone()),
        Dialect::Harmony => joined(out, run, "", |out, call| {
            let h = &HARMONY;
            out.push_str(&format!(
                "{}assistant{}commentary to={}{} {}json{}{}{}",
                h.start,
                h.channel,
                h.functions,
                call.name,
                h.constrain,
                h.message,
                one_line(&call.arguments),
                h.call,
            ));
        }),
        Dialect::Glm => joined(out, run, "\n", |out, call| xml_call(out, &GLM, call)),
        Dialect::MiniMax => {
            start_tag(out, MINIMAX.block);
            out.push('\n');
            joined(out, run, "\n", |out, call| xml_call(out, &MINIMAX, call));
            out.push('\n');
            end_tag(out, MINIMAX.block);
        }
        // Tagged, and what renders as tagged.
        _ => joined(out, run, SEPARATOR, |out, call| {
            open_tag(out, TAGGED.call, &call.name, id_of(call, ids));
            out.push_str(">\n");
            out.push_str(&pretty(&call.arguments));
            out.push('\n');
            out.push_str(TAGGED.call_close);
        }),
    }
}

/// The id `call` is written with: its own when `ids` is set.
fn id_of(call: &ToolCall, ids: bool) -> Option<&str> {
    ids.then_some(call.id.as_str())
}

/// `{"name": F, ["id": …, ]"KEY": {…}}`, one line.
fn json_call(out: &mut String, call: &ToolCall, id: Option<&str>, key: &str) {
    out.push_str("{\"name\": ");
    out.push_str(&one_line(&call.name));
    if let Some(id) = id {
        out.push_str(", \"id\": ");
        out.push_str(&one_line(&id));
    }
    out.push_str(&format!(", \"{key}\": {}}}", one_line(&call.arguments)));
}

/// A run of calls as a section of a family's special tokens; `header` gives a
/// call's header from the call and its index in the run.
fn section(
    out: &mut String,
    markers: &Section,
    run: &[ToolCall],
    header: impl Fn(&ToolCall, usize) -> String,
) {
    out.push_str(markers.section_begin);
    for (index, call) in run.iter().enumerate() {
        out.push_str(markers.call_begin);
        out.push_str(&header(call, index));
        out.push_str(markers.separator);
        out.push_str(&one_line(&call.arguments));
        out.push_str(markers.call_end);
    }
    out.push_str(markers.section_end);
}

/// The element names of an XML form (GLM, MiniMax).
fn xml_markers(dialect: Dialect) -> &'static Xml {
    if dialect == Dialect::Glm {
        &GLM
    } else {
        &MINIMAX
    }
}

/// `<element>`.
fn start_tag(out: &mut String, element: &str) {
    out.push('<');
    out.push_str(element);
    out.push('>');
}

/// `</element>`.
fn end_tag(out: &mut String, element: &str) {
    out.push_str("</");
    out.push_str(element);
    out.push('>');
}

/// One call of an XML form, its parameters one per line, each value as
/// [`xml_value`] writes it: GLM's name on the call's first line, MiniMax's in
/// its `name` attribute.
fn xml_call(out: &mut String, xml: &Xml, call: &ToolCall) {
    if xml.key.is_some() {
        start_tag(out, xml.call);
        out.push_str(&call.name);
    } else {
        open_tag(out, xml.call, &call.name, None);
        out.push('>');
    }
    out.push('\n');
    for (key, value) in call.arguments.as_object().into_iter().flatten() {
        if let Some(key_element) = xml.key {
            start_tag(out, key_element);
            out.push_str(key);
            end_tag(out, key_element);
            out.push('\n');
            start_tag(out, xml.value);
        } else {
            open_tag(out, xml.value, key, None);
            out.push('>');
        }
        out.push_str(&xml_value(value, xml).unwrap_or_default());
        end_tag(out, xml.value);
        out.push('\n');
    }
    end_tag(out, xml.call);
}

/// A value as the XML forms (GLM, MiniMax) write it: a string raw, anything
/// else as JSON (as their templates do); `None` for a value that would not
/// read back as itself whatever the schema says — a string that reads as
/// another JSON value or holds the closing tag (which this parser would read
/// back, but a reader that takes the first closing tag would not), or a value
/// the parser's scan would not give back whole ([`reads_raw_value`]: a tag in
/// it that ends a value without the closing tag — the next parameter, the end
/// of the call or block — or a wrapping newline).
fn xml_value(value: &Value, xml: &Xml) -> Option<String> {
    let text = match value {
        Value::String(text) => {
            let other_json =
                serde_json::from_str::<Value>(text.trim()).is_ok_and(|v| !v.is_string());
            let mut close = String::new();
            end_tag(&mut close, xml.value);
            (!other_json && !text.contains(&close)).then(|| text.clone())?
        }
        value => one_line(value),
    };
    reads_raw_value(xml.key.is_some(), &text).then_some(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `calls` written in `dialect`, with ids where its form has a place.
    fn written(dialect: Dialect, calls: &[ToolCall]) -> String {
        let mut out = String::new();
        write_calls(&mut out, calls, dialect, writes_ids(dialect), 0);
        out
    }

    /// The exact text of one call, and of two, in `dialect`.
    fn check_form(dialect: Dialect, one: &str, two: &str) {
        let weather = ToolCall::new("call_1", "get_weather", json!({"city": "Paris"}));
        let add = ToolCall::new("call_2", "add", json!({"a": 1, "b": true}));
        assert_eq!(
            written(dialect, std::slice::from_ref(&weather)),
            one,
            "{dialect}"
        );
        assert_eq!(written(dialect, &[weather, add]), two, "{dialect}");
    }

    #[test]
    fn tagged_and_hermes_calls() {
        let weather = "<tool_call name=\"get_weather\" id=\"call_1\">\n{\n  \"city\": \"Paris\"\n}\n</tool_call>";
        check_form(
            Dialect::Tagged,
            weather,
            &format!(
                "{weather}\n---\n<tool_call name=\"add\" id=\"call_2\">\n{{\n  \"a\": 1,\n  \"b\": true\n}}\n</tool_call>"
            ),
        );
        let weather = "<tool_call>\n{\"name\": \"get_weather\", \"id\": \"call_1\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
        check_form(
            Dialect::Hermes,
            weather,
            &format!(
                "{weather}\n---\n<tool_call>\n{{\"name\": \"add\", \"id\": \"call_2\", \"arguments\": {{\"a\": 1, \"b\": true}}}}\n</tool_call>"
            ),
        );
    }

    #[test]
    fn mistral_calls_one_marker_each_with_their_ids() {
        check_form(
            Dialect::Mistral,
            "[TOOL_CALLS]get_weather[CALL_ID]call_1[ARGS]{\"city\": \"Paris\"}",
            "[TOOL_CALLS]get_weather[CALL_ID]call_1[ARGS]{\"city\": \"Paris\"}\
             [TOOL_CALLS]add[CALL_ID]call_2[ARGS]{\"a\": 1, \"b\": true}",
        );
    }

    #[test]
    fn llama3_json_calls_one_per_line() {
        check_form(
            Dialect::Llama3Json,
            "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}",
            "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}\n\
             {\"name\": \"add\", \"parameters\": {\"a\": 1, \"b\": true}}",
        );
    }

    #[test]
    fn pythonic_calls_in_one_list() {
        check_form(
            Dialect::Pythonic,
            "[get_weather(city=\"Paris\")]",
            "[get_weather(city=\"Paris\"), add(a=1, b=True)]",
        );
    }

    #[test]
    fn kimi_k2_calls_in_one_section_numbered() {
        check_form(
            Dialect::KimiK2,
            "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0\
             <|tool_call_argument_begin|>{\"city\": \"Paris\"}<|tool_call_end|><|tool_calls_section_end|>",
            "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0\
             <|tool_call_argument_begin|>{\"city\": \"Paris\"}<|tool_call_end|>\
             <|tool_call_begin|>functions.add:1<|tool_call_argument_begin|>{\"a\": 1, \"b\": true}\
             <|tool_call_end|><|tool_calls_section_end|>",
        );
    }

    #[test]
    fn deepseek_calls_in_one_section() {
        check_form(
            Dialect::DeepSeek,
            "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Paris\"}\
             <｜tool▁call▁end｜><｜tool▁calls▁end｜>",
            "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Paris\"}\
             <｜tool▁call▁end｜><｜tool▁call▁begin｜>add<｜tool▁sep｜>{\"a\": 1, \"b\": true}\
             <｜tool▁call▁end｜><｜tool▁calls▁end｜>",
        );
    }

    #[test]
    fn glm_calls_one_block_each() {
        check_form(
            Dialect::Glm,
            "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>",
            "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>\n\
             <tool_call>add\n<arg_key>a</arg_key>\n<arg_value>1</arg_value>\n\
             <arg_key>b</arg_key>\n<arg_value>true</arg_value>\n</tool_call>",
        );
    }

    #[test]
    fn harmony_calls_one_message_each() {
        check_form(
            Dialect::Harmony,
            "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json\
             <|message|>{\"city\": \"Paris\"}<|call|>",
            "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json\
             <|message|>{\"city\": \"Paris\"}<|call|>\
             <|start|>assistant<|channel|>commentary to=functions.add <|constrain|>json\
             <|message|>{\"a\": 1, \"b\": true}<|call|>",
        );
    }

    #[test]
    fn minimax_calls_as_invokes_of_one_block() {
        check_form(
            Dialect::MiniMax,
            "<minimax:tool_call>\n<invoke name=\"get_weather\">\n\
             <parameter name=\"city\">Paris</parameter>\n</invoke>\n</minimax:tool_call>",
            "<minimax:tool_call>\n<invoke name=\"get_weather\">\n\
             <parameter name=\"city\">Paris</parameter>\n</invoke>\n<invoke name=\"add\">\n\
             <parameter name=\"a\">1</parameter>\n<parameter name=\"b\">true</parameter>\n\
             </invoke>\n</minimax:tool_call>",
        );
    }

    #[test]
    fn granite_calls_in_one_list() {
        check_form(
            Dialect::Granite,
            "<|tool_call|>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]",
            "<|tool_call|>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}, \
             {\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": true}}]",
        );
    }

    #[test]
    fn python_literals_and_xml_values() {
        let call = ToolCall::new(
            "c",
            "f",
            json!({"s": "a\"b\\c\nd\u{1}é", "n": null, "l": [1.5, false], "d": {"k": "v"}}),
        );
        assert_eq!(
            written(Dialect::Pythonic, &[call]),
            "[f(s=\"a\\\"b\\\\c\\nd\\u0001é\", n=None, l=[1.5, False], d={\"k\": \"v\"})]"
        );
        let call = ToolCall::new("c", "f", json!({"l": ["</arg_value>"], "s": "x y"}));
        assert_eq!(
            written(Dialect::Glm, &[call]),
            "<tool_call>f\n<arg_key>l</arg_key>\n<arg_value>[\"<\\/arg_value>\"]</arg_value>\n\
             <arg_key>s</arg_key>\n<arg_value>x y</arg_value>\n</tool_call>"
        );
    }

    /// A call whose form cannot carry it goes in the tagged form, between the
    /// runs of the others.
    #[test]
    fn calls_a_form_cannot_carry_are_tagged() {
        let plain = ToolCall::new("c1", "f", json!({"s": "x"}));
        for (dialect, awkward) in [
            // Would read back as a number, or end the value early.
            (Dialect::Glm, json!({"s": "1"})),
            (Dialect::Glm, json!({"s": "a</arg_value>b"})),
            (Dialect::MiniMax, json!({"s": "true"})),
            (Dialect::MiniMax, json!({"s": "a</parameter>b"})),
            (Dialect::MiniMax, json!({"s": "\nx"})),
            // A tag that ends a value although its closing tag is not there:
            // the next parameter, the end of the call or of the block.
            (Dialect::Glm, json!({"s": "</tool_call>"})),
            (Dialect::Glm, json!({"s": "a<arg_key>b</arg_key>"})),
            (Dialect::Glm, json!({"l": ["<arg_key>"]})),
            (Dialect::MiniMax, json!({"s": "a</invoke>"})),
            (Dialect::MiniMax, json!({"s": "</minimax:tool_call> b"})),
            (
                Dialect::MiniMax,
                json!({"d": {"k": "<parameter name='p'>"}}),
            ),
            (Dialect::Pythonic, json!({"not-an-identifier": 1})),
            (Dialect::Pythonic, json!({"class": 1})),
            (Dialect::Llama3Json, json!("not an object")),
        ] {
            let odd = ToolCall::new("c2", "f", awkward);
            let mut tagged = String::new();
            write_calls(
                &mut tagged,
                std::slice::from_ref(&odd),
                Dialect::Tagged,
                false,
                0,
            );
            let own = written(dialect, std::slice::from_ref(&plain));
            assert_eq!(
                written(dialect, &[plain.clone(), odd, plain.clone()]),
                format!("{own}{SEPARATOR}{tagged}{SEPARATOR}{own}"),
                "{dialect}"
            );
        }
        let spaced = ToolCall::new("c 1", "get weather", json!({}));
        let long = ToolCall::new("c1", "f".repeat(NAME_LIMIT + 1), json!({}));
        for dialect in [Dialect::KimiK2, Dialect::Mistral, Dialect::Pythonic] {
            assert!(written(dialect, std::slice::from_ref(&long)).starts_with("<tool_call name="));
            assert!(
                written(dialect, std::slice::from_ref(&spaced)).starts_with("<tool_call name=")
            );
        }
        let odd_id = ToolCall::new("call 1", "f", json!({}));
        assert_eq!(
            written(Dialect::Mistral, &[odd_id]),
            "<tool_call name=\"f\" id=\"call 1\">\n{}\n</tool_call>"
        );
    }

    /// Each family's model names pick its own form, and the form written holds
    /// the family's own markers.
    #[test]
    fn every_family_is_written_in_its_own_form() {
        for (model, own) in [
            (
                "Qwen/Qwen2.5-7B-Instruct",
                "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ",
            ),
            (
                "Qwen/Qwen3-Coder-30B-A3B-Instruct",
                "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ",
            ),
            (
                "NousResearch/Hermes-3-Llama-3.1-8B",
                "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ",
            ),
            (
                "mistralai/Mistral-Small-3.2-24B-Instruct-2506",
                "[TOOL_CALLS]get_weather[ARGS]{",
            ),
            (
                "mistralai/Devstral-Small-2507",
                "[TOOL_CALLS]get_weather[ARGS]{",
            ),
            (
                "mistralai/Magistral-Small-2509",
                "[TOOL_CALLS]get_weather[ARGS]{",
            ),
            (
                "meta-llama/Llama-3.1-8B-Instruct",
                "{\"name\": \"get_weather\", \"parameters\": ",
            ),
            (
                "meta-llama/Llama-3.3-70B-Instruct",
                "{\"name\": \"get_weather\", \"parameters\": ",
            ),
            (
                "meta-llama/Llama-3.2-3B-Instruct",
                "[get_weather(city=\"Paris\")]",
            ),
            (
                "meta-llama/Llama-4-Scout-17B-16E-Instruct",
                "[get_weather(city=\"Paris\")]",
            ),
            (
                "moonshotai/Kimi-K2-Instruct-0905",
                "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{",
            ),
            (
                "deepseek-ai/DeepSeek-V3.1",
                "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{",
            ),
            (
                "zai-org/GLM-4.6",
                "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris",
            ),
            (
                "openai/gpt-oss-20b",
                "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{",
            ),
            (
                "MiniMaxAI/MiniMax-M2",
                "<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"city\">Paris",
            ),
            (
                "ibm-granite/granite-3.3-8b-instruct",
                "<|tool_call|>[{\"name\": \"get_weather\", \"arguments\": ",
            ),
            (
                "HuggingFaceTB/SmolLM2-135M-Instruct",
                "<tool_call name=\"get_weather\">\n{",
            ),
        ] {
            let mut out = String::new();
            let dialect = Dialect::for_model(model).rendered_as();
            write_example(&mut out, "get_weather", &json!({"city": "Paris"}), dialect);
            assert!(out.starts_with(own), "{model}: {out}");
        }
    }
}
