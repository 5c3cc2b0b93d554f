//! The SSE decoder, by property: whatever the line ends, comments and cutting,
//! decoding a rendered stream gives back exactly the events rendered; and the
//! encoder's output decodes to what it was given.

use lmstack::provider::sse::{SseDecoder, SseEvent, encode_event};
use lmstack::service::Output;
use proptest::prelude::*;

#[derive(Clone, Debug)]
struct Rendered {
    event: Option<String>,
    lines: Vec<String>,
    id: Option<String>,
}

fn event() -> impl Strategy<Value = Rendered> {
    let line = "[^\r\n]{0,30}";
    (
        proptest::option::of("[a-z_]{1,12}"),
        proptest::collection::vec(line, 1..4),
        proptest::option::of("[a-z0-9]{1,8}"),
    )
        .prop_map(|(event, lines, id)| Rendered { event, lines, id })
}

/// Renders events with line ends drawn from `ends` (0 LF, 1 CRLF, 2 CR), a
/// comment before some events, and no blank line after the last one when `open_end`.
fn render(events: &[Rendered], ends: &[u8], open_end: bool) -> Vec<u8> {
    let mut ends = ends.iter().cycle();
    let mut out = String::new();
    let mut line = |out: &mut String, text: &str| {
        let end = match ends.next().unwrap() {
            // After a CR, a lone LF would join it into one CRLF line end.
            0 if out.ends_with('\r') && text.is_empty() => "\r\n",
            0 => "\n",
            1 => "\r\n",
            _ => "\r",
        };
        out.push_str(text);
        out.push_str(end);
    };
    for (n, event) in events.iter().enumerate() {
        if n % 2 == 1 {
            line(&mut out, ": keep-alive");
        }
        if let Some(name) = &event.event {
            line(&mut out, &format!("event: {name}"));
        }
        if let Some(id) = &event.id {
            line(&mut out, &format!("id:{id}"));
        }
        for data in &event.lines {
            line(&mut out, &format!("data: {data}"));
        }
        if !(open_end && n + 1 == events.len()) {
            line(&mut out, "");
        }
    }
    out.into_bytes()
}

fn expected(events: &[Rendered]) -> Vec<SseEvent> {
    let mut last_id = None;
    events
        .iter()
        .map(|event| {
            if event.id.is_some() {
                last_id.clone_from(&event.id);
            }
            SseEvent {
                event: event.event.clone(),
                data: event.lines.join("\n"),
                id: last_id.clone(),
            }
        })
        .collect()
}

fn decode(bytes: &[u8], sizes: &[usize]) -> Vec<SseEvent> {
    let mut decoder = SseDecoder::new();
    let mut out = Output::new();
    let mut rest = bytes;
    let mut sizes = sizes.iter().cycle();
    while !rest.is_empty() {
        let size = (*sizes.next().unwrap()).clamp(1, rest.len());
        decoder.push(&rest[..size], &mut out).unwrap();
        rest = &rest[size..];
    }
    decoder.finish(&mut out).unwrap();
    out.drain().collect()
}

proptest! {
    #![proptest_config(crate::regressions::beside(ProptestConfig::with_cases(512)))]

    #[test]
    fn decoding_gives_back_what_was_rendered_however_it_is_cut(
        events in proptest::collection::vec(event(), 1..6),
        ends in proptest::collection::vec(0u8..3, 1..8),
        open_end in any::<bool>(),
        sizes in proptest::collection::vec(1usize..20, 1..8),
    ) {
        let bytes = render(&events, &ends, open_end);
        prop_assert_eq!(decode(&bytes, &sizes), expected(&events));
    }

    #[test]
    fn what_the_encoder_writes_decodes_to_what_it_was_given(
        events in proptest::collection::vec(
            (proptest::option::of("[a-z_.\r\n]{1,12}"), "(?s).{0,40}"),
            1..6,
        ),
        sizes in proptest::collection::vec(1usize..20, 1..8),
    ) {
        let mut bytes = Vec::new();
        for (name, data) in &events {
            encode_event(&mut bytes, name.as_deref(), data);
        }
        // Line breaks in names become spaces; in data, each is one LF.
        let want: Vec<SseEvent> = events
            .iter()
            .map(|(name, data)| SseEvent {
                event: name.as_ref().map(|n| n.replace(['\r', '\n'], " ")),
                data: data.replace("\r\n", "\n").replace('\r', "\n"),
                id: None,
            })
            .collect();
        prop_assert_eq!(decode(&bytes, &sizes), want);
    }
}
