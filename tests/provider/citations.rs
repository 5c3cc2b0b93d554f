//! Citations on assistant text, from every wire and back out: Anthropic's
//! text-block `citations` and `citations_delta`, OpenAI's `url_citation`
//! annotations and Gemini's grounding are lifted to canonical citations, the
//! same whole and streamed and however the stream is cut; the served encoders
//! write them back in their wire's form; an Anthropic client's history holds
//! them typed, and lowers back to what it sent.

#![cfg(all(feature = "anthropic", feature = "openai", feature = "gemini"))]

use lmstack::message::TextMessage;
use lmstack::provider::anthropic::{self, BLOCK_KEY};
use lmstack::provider::body::{BodyDecoder, Lift};
use lmstack::provider::{gemini, openai_chat};
use lmstack::service::{Machine, Output};
use lmstack::{Citation, CitationSource, Event, Joiner, Message};
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::common::{decode_cut, fixture};

fn lift<L: Lift>(decoder: BodyDecoder<L>, body: &[u8], sizes: &[usize]) -> Vec<Message> {
    Joiner::join(decode_cut(decoder, body, sizes).unwrap())
}

/// The text messages of a reply that are not a server tool's block.
fn texts(messages: &[Message]) -> Vec<&TextMessage> {
    messages
        .iter()
        .filter_map(|message| match message {
            Message::Text(text) if text.metadata.get(BLOCK_KEY).is_none() => Some(text),
            _ => None,
        })
        .collect()
}

/// What each citation of `text` cites, with the text it spans.
fn cited(text: &TextMessage) -> Vec<(String, CitationSource)> {
    text.metadata
        .citations()
        .into_iter()
        .map(|citation| {
            let span = citation.span.expect("a span");
            let words = text
                .text
                .chars()
                .skip(span.start)
                .take(span.end - span.start);
            (words.collect(), citation.source)
        })
        .collect()
}

fn web(url: &str, title: &str) -> CitationSource {
    CitationSource::Url {
        url: url.into(),
        title: Some(title.into()),
        encrypted_index: None,
    }
}

const SHANNON: &str = "https://en.wikipedia.org/wiki/Claude_Shannon";

#[test]
fn anthropic_web_search_citations_span_their_block_streamed_and_whole() {
    let streamed = lift(
        BodyDecoder::sse(anthropic::Lifter::new()),
        &fixture("anthropic/hand-made/citations-web-search.sse"),
        &[usize::MAX],
    );
    let whole = lift(
        BodyDecoder::json(anthropic::Lifter::new()),
        &fixture("anthropic/hand-made/citations-web-search.json"),
        &[usize::MAX],
    );
    assert_eq!(streamed, whole);
    let texts = texts(&whole);
    assert_eq!(texts.len(), 2, "the text before the search, the answer");
    assert!(texts[0].metadata.citations().is_empty());
    let answer = texts[1];
    assert_eq!(
        answer.text,
        "Based on the search results, Claude Shannon was born on April 30, 1916."
    );
    let citation = &answer.metadata.citations()[0];
    assert_eq!(
        citation.cited_text.as_deref(),
        Some(
            "Claude Elwood Shannon (April 30, 1916 – February 24, 2001) was an American mathematician"
        )
    );
    let CitationSource::Url {
        encrypted_index, ..
    } = &citation.source
    else {
        panic!("{citation:?}")
    };
    assert_eq!(
        encrypted_index.as_deref(),
        Some("Eo8BCioIAhgBIiQyYjQ0OWJmZi1lNm")
    );
    let (words, _) = &cited(answer)[0];
    assert_eq!(words, "Claude Shannon was born on April 30, 1916");
}

#[test]
fn anthropic_document_and_search_result_citations_keep_their_locations() {
    let messages = lift(
        BodyDecoder::json(anthropic::Lifter::new()),
        &fixture("anthropic/hand-made/citations-documents.json"),
        &[usize::MAX],
    );
    let texts = texts(&messages);
    assert_eq!(texts.len(), 1);
    let cited = cited(texts[0]);
    let words: Vec<&str> = cited.iter().map(|(words, _)| words.as_str()).collect();
    assert_eq!(
        words,
        [
            "the grass is green",
            "the sky is blue",
            "the sky is blue",
            "the sky is blue"
        ]
    );
    let sources: Vec<Value> = texts[0]
        .metadata
        .citations()
        .into_iter()
        .map(|citation| serde_json::to_value(citation.source).unwrap())
        .collect();
    assert_eq!(
        sources,
        [
            json!({"type": "document", "document_index": 0, "document_title": "Nature",
                "location": {"unit": "char", "start": 0, "end": 20}}),
            json!({"type": "document", "document_index": 1,
                "location": {"unit": "page", "start": 2, "end": 3}}),
            json!({"type": "document", "document_index": 2, "document_title": "Notes",
                "location": {"unit": "content_block", "start": 0, "end": 1}}),
            json!({"type": "search_result", "search_result_index": 0,
                "source": "https://kb.example/sky", "title": "Sky",
                "start_block_index": 0, "end_block_index": 1}),
        ]
    );
}

#[test]
fn openai_url_annotations_are_web_citations_streamed_and_whole() {
    let streamed = lift(
        BodyDecoder::sse(openai_chat::Lifter::new()),
        &fixture("openai/hand-made/url-citations.sse"),
        &[usize::MAX],
    );
    let whole = lift(
        BodyDecoder::json(openai_chat::Lifter::new()),
        &fixture("openai/hand-made/url-citations.json"),
        &[usize::MAX],
    );
    assert_eq!(texts(&streamed), texts(&whole));
    assert_eq!(
        cited(texts(&whole)[0]),
        [
            (
                "The Louvre is in Paris, France".to_owned(),
                web("https://en.wikipedia.org/wiki/Louvre", "Louvre - Wikipedia")
            ),
            (
                "on the Right Bank of the Seine.".to_owned(),
                web("https://www.louvre.fr/en", "Louvre Museum")
            ),
        ]
    );
}

#[test]
fn gemini_grounding_is_web_citations_in_characters_streamed_and_whole() {
    let streamed = lift(
        BodyDecoder::sse(gemini::Lifter::new()),
        &fixture("google/hand-made/grounding.sse"),
        &[usize::MAX],
    );
    let whole = lift(
        BodyDecoder::json(gemini::Lifter::new()),
        &fixture("google/hand-made/grounding.json"),
        &[usize::MAX],
    );
    assert_eq!(streamed, whole);
    let prado = "https://vertexaisearch.cloud.google.com/grounding-api-redirect/AAA";
    let wikipedia = "https://vertexaisearch.cloud.google.com/grounding-api-redirect/BBB";
    assert_eq!(
        cited(texts(&whole)[0]),
        [
            (
                "Las Meninas está en el Prado".to_owned(),
                web(prado, "museodelprado.es")
            ),
            (
                "Las Meninas está en el Prado".to_owned(),
                web(wikipedia, "wikipedia.org")
            ),
            ("en Madrid".to_owned(), web(wikipedia, "wikipedia.org")),
        ]
    );
}

/// Encodes events with an encoder of the served half into one body.
fn encode(
    mut encoder: impl Machine<In = Result<Event, lmstack::Error>, Out = bytes::Bytes>,
    events: Vec<Event>,
) -> Vec<u8> {
    let mut out = Output::new();
    for event in events {
        encoder.push(Ok(event), &mut out).unwrap();
    }
    encoder.finish(&mut out).unwrap();
    out.drain().flat_map(|bytes| bytes.to_vec()).collect()
}

/// The events an Anthropic fixture lifts to, as a stage that streams gives them.
fn anthropic_events(name: &str) -> Vec<Event> {
    let body = fixture(name);
    let decoder = match name.ends_with(".sse") {
        true => BodyDecoder::sse(anthropic::Lifter::new()),
        false => BodyDecoder::json(anthropic::Lifter::new()),
    };
    decode_cut(decoder, &body, &[usize::MAX]).unwrap()
}

/// The texts of messages and their citations, without spans.
fn cited_texts(messages: &[Message]) -> Vec<(String, Vec<Citation>)> {
    let unspanned = |citation: Citation| Citation {
        span: None,
        ..citation
    };
    texts(messages)
        .into_iter()
        .map(|text| {
            let citations = text.metadata.citations().into_iter().map(unspanned);
            (text.text.clone(), citations.collect())
        })
        .collect()
}

#[test]
fn the_anthropic_encoder_gives_back_the_blocks_and_citations_it_was_given() {
    for name in [
        "anthropic/hand-made/citations-web-search.json",
        "anthropic/hand-made/citations-documents.json",
    ] {
        let given: Value = serde_json::from_slice(&fixture(name)).unwrap();
        let events = anthropic_events(name);
        let lifted = Joiner::join(events.clone());
        // Whole: the same blocks, from the deltas or from the joined messages.
        for events in [events.clone(), Joiner::join_events(events.clone())] {
            let body = encode(
                anthropic::ReplyEncoder::new("msg_1", "claude", false),
                events,
            );
            let body: Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(body["content"], given["content"], "{name}");
        }
        // Streamed: the same texts and citations (the uncited text before a
        // cited block shares its block: a stream cannot cut what it sent).
        let body = encode(
            anthropic::ReplyEncoder::new("msg_1", "claude", true),
            events,
        );
        let back = lift(
            BodyDecoder::sse(anthropic::Lifter::new()),
            &body,
            &[usize::MAX],
        );
        assert_eq!(cited_texts(&back), cited_texts(&lifted), "{name}");
        assert!(String::from_utf8_lossy(&body).contains(r#""type":"citations_delta""#));
    }
}

#[test]
fn the_openai_encoder_writes_web_citations_as_annotations_counted_in_content() {
    let events = anthropic_events("anthropic/hand-made/citations-web-search.sse");
    for stream in [false, true] {
        let mut encoder = openai_chat::ReplyEncoder::new("chatcmpl-1", 0, "gpt");
        if stream {
            encoder = encoder.streaming(false);
        }
        let body = encode(encoder, events.clone());
        let decoder = match stream {
            true => BodyDecoder::sse(openai_chat::Lifter::new()),
            false => BodyDecoder::json(openai_chat::Lifter::new()),
        };
        let messages = lift(decoder, &body, &[usize::MAX]);
        let texts = texts(&messages);
        assert_eq!(
            texts[0].text,
            "Let me search.Based on the search results, Claude Shannon was born on April 30, 1916."
        );
        assert_eq!(
            cited(texts[0]),
            [(
                "Claude Shannon was born on April 30, 1916".to_owned(),
                web(SHANNON, "Claude Shannon - Wikipedia")
            )],
            "stream {stream}"
        );
    }
    // Citations of documents have no place there.
    let documents = anthropic_events("anthropic/hand-made/citations-documents.json");
    let body = encode(
        openai_chat::ReplyEncoder::new("chatcmpl-1", 0, "gpt"),
        documents,
    );
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert!(
        body["choices"][0]["message"].get("annotations").is_none(),
        "{body}"
    );
}

#[test]
fn anthropic_history_sends_citations_back_on_the_blocks_they_cite() {
    let name = "anthropic/hand-made/citations-documents.json";
    let given: Value = serde_json::from_slice(&fixture(name)).unwrap();
    let mut history = vec![Message::user("What colour are grass and sky?")];
    history.extend(lift(
        BodyDecoder::json(anthropic::Lifter::new()),
        &fixture(name),
        &[usize::MAX],
    ));
    history.push(Message::user("Thanks"));
    let request = lmstack::ChatRequest::new(history);
    let body = anthropic::lower(&request, &anthropic::LowerOptions::default()).unwrap();
    assert_eq!(body["messages"][1]["content"], given["content"]);
    // A web page cited on another wire has no `encrypted_index` to send.
    let mut text = TextMessage {
        role: lmstack::Role::Assistant,
        text: "Paris.".into(),
        metadata: Default::default(),
    };
    text.metadata
        .add_citations([Citation::url("https://a.example", None).with_span(0, 5)]);
    let request = lmstack::ChatRequest::new(vec![Message::user("Where?"), Message::Text(text)]);
    let body = anthropic::lower(&request, &anthropic::LowerOptions::default()).unwrap();
    assert_eq!(
        body["messages"][1]["content"],
        json!([{"type": "text", "text": "Paris."}])
    );
}

proptest! {
    #![proptest_config(crate::regressions::beside(ProptestConfig::with_cases(64)))]

    #[test]
    fn any_cutting_of_a_cited_stream_joins_to_the_same_citations(
        sizes in proptest::collection::vec(1usize..48, 1..12),
    ) {
        let anthropic = fixture("anthropic/hand-made/citations-web-search.sse");
        let openai = fixture("openai/hand-made/url-citations.sse");
        let gemini = fixture("google/hand-made/grounding.sse");
        let cases = [
            (lift(BodyDecoder::sse(anthropic::Lifter::new()), &anthropic, &sizes),
             lift(BodyDecoder::sse(anthropic::Lifter::new()), &anthropic, &[usize::MAX])),
            (lift(BodyDecoder::sse(openai_chat::Lifter::new()), &openai, &sizes),
             lift(BodyDecoder::sse(openai_chat::Lifter::new()), &openai, &[usize::MAX])),
            (lift(BodyDecoder::sse(gemini::Lifter::new()), &gemini, &sizes),
             lift(BodyDecoder::sse(gemini::Lifter::new()), &gemini, &[usize::MAX])),
        ];
        for (cut, whole) in cases {
            prop_assert!(texts(&whole).iter().any(|text| !text.metadata.citations().is_empty()));
            prop_assert_eq!(cut, whole);
        }
    }
}

/// One citation as an Anthropic client writes it in its history, every field
/// given (`null` for an absent title, as the API writes it).
fn wire_citation() -> impl Strategy<Value = Value> {
    let title = proptest::option::of("[A-Za-z ]{1,8}");
    let cited = "[a-zé ]{1,10}";
    let document = (
        cited,
        0u32..4,
        title.clone(),
        proptest::option::of("file_[a-z0-9]{4}"),
        proptest::sample::select(vec![
            ("char_location", "start_char_index", "end_char_index"),
            ("page_location", "start_page_number", "end_page_number"),
            ("content_block_location", "start_block_index", "end_block_index"),
        ]),
        0u64..50,
        1u64..50,
    )
        .prop_map(|(cited, index, title, file, (kind, start, end), from, length)| {
            let mut citation = json!({"type": kind, "cited_text": cited, "document_index": index,
                "document_title": title, start: from, end: from + length});
            if let Some(file) = file {
                citation["file_id"] = json!(file);
            }
            citation
        });
    let page = (cited, "[a-z]{1,8}", title.clone(), "[A-Za-z0-9+/]{4,12}").prop_map(
        |(cited, host, title, index)| {
            json!({"type": "web_search_result_location", "cited_text": cited,
                "url": format!("https://{host}.example"), "title": title, "encrypted_index": index})
        },
    );
    let result = (cited, 0u32..4, "[a-z:/.]{1,12}", title, 0u32..3, 1u32..3).prop_map(
        |(cited, index, source, title, start, length)| {
            json!({"type": "search_result_location", "cited_text": cited,
                "search_result_index": index, "source": source, "title": title,
                "start_block_index": start, "end_block_index": start + length})
        },
    );
    prop_oneof![document, page, result]
}

proptest! {
    #![proptest_config(crate::regressions::beside(ProptestConfig::with_cases(64)))]

    /// An Anthropic client's history: each assistant text block's citations
    /// decode typed, spanning the block's text; lowered for Anthropic they
    /// come back as they were sent, and the other wires' lowerings, whose
    /// requests carry no citations, send the text without them.
    #[test]
    fn a_clients_cited_history_decodes_typed_and_lowers_back_as_sent(
        blocks in proptest::collection::vec(
            ("[a-zé .]{1,16}", proptest::collection::vec(wire_citation(), 0..3)),
            1..4,
        ),
    ) {
        let content: Vec<Value> = blocks
            .iter()
            .map(|(text, citations)| match citations.is_empty() {
                true => json!({"type": "text", "text": text}),
                false => json!({"type": "text", "text": text, "citations": citations}),
            })
            .collect();
        let body = json!({"model": "m", "max_tokens": 16, "messages": [
            {"role": "user", "content": "Where?"},
            {"role": "assistant", "content": content},
            {"role": "user", "content": "Thanks"},
        ]});
        let request = anthropic::decode_request(body.to_string().as_bytes()).unwrap();
        let assistant: Vec<&TextMessage> = texts(&request.messages)
            .into_iter()
            .filter(|text| text.role == lmstack::Role::Assistant)
            .collect();
        prop_assert_eq!(assistant.len(), blocks.len());
        for (text, (sent, citations)) in assistant.iter().zip(&blocks) {
            let expected: Vec<Citation> = citations
                .iter()
                .map(|citation| {
                    anthropic::citation::lift(citation)
                        .unwrap()
                        .with_span(0, sent.chars().count())
                })
                .collect();
            prop_assert_eq!(text.metadata.citations(), expected);
            prop_assert!(text.metadata.get(anthropic::EXTRA_KEY).is_none());
        }
        let lowered = anthropic::lower(&request, &anthropic::LowerOptions::default()).unwrap();
        prop_assert_eq!(&lowered["messages"], &body["messages"]);

        let said: String = blocks.iter().map(|(text, _)| text.as_str()).collect();
        let openai = openai_chat::lower(&request, &openai_chat::LowerOptions::default()).unwrap();
        prop_assert_eq!(&openai["messages"][1], &json!({"role": "assistant", "content": said}));
        let gemini = gemini::lower(&request, &gemini::LowerOptions::default()).unwrap();
        let parts = &gemini["contents"][1]["parts"];
        let written: String = parts
            .as_array()
            .unwrap()
            .iter()
            .map(|part| part["text"].as_str().unwrap())
            .collect();
        prop_assert_eq!(written, said);
        prop_assert!(!gemini.to_string().contains("cited"), "{}", gemini);
    }
}

#[test]
fn a_client_citation_of_an_unknown_kind_keeps_the_blocks_citations_raw() {
    let citations = json!([
        {"type": "char_location", "cited_text": "a", "document_index": 0,
            "document_title": null, "start_char_index": 0, "end_char_index": 1},
        {"type": "x_future_location", "cited_text": "a"},
    ]);
    let body = json!({"model": "m", "max_tokens": 16, "messages": [
        {"role": "user", "content": "Where?"},
        {"role": "assistant", "content": [{"type": "text", "text": "Paris.", "citations": citations}]},
        {"role": "user", "content": "Thanks"},
    ]});
    let request = anthropic::decode_request(body.to_string().as_bytes()).unwrap();
    assert!(request.messages[1].metadata().citations().is_empty());
    let lowered = anthropic::lower(&request, &anthropic::LowerOptions::default()).unwrap();
    assert_eq!(lowered["messages"], body["messages"]);
}
