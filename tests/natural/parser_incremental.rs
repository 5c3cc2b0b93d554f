//! The parser fed by hand (`NaturalToolUseParser::incremental`): the same events
//! as the machine driven by the one driver, over any cutting, and joined, the
//! messages of `parse`.

use futures::executor::block_on;
use futures::stream::{self, StreamExt};
use lmstack::natural::{NaturalToolUseParser, OnInvalid};
use lmstack::service::MachineStream;
use lmstack::testing::Chunking;
use lmstack::{Error, Event, InvalidCallKind, Joiner};
use proptest::prelude::*;

use crate::dialects::harness::tools;
use crate::parser::fragment;

/// An item of a reply, its error as text (errors are not `PartialEq`).
type Item = Result<Event, String>;

fn items(items: impl IntoIterator<Item = Result<Event, Error>>) -> Vec<Item> {
    items
        .into_iter()
        .map(|item| item.map_err(|error| error.to_string()))
        .collect()
}

/// `text` fed in the pieces of `chunking`, then finished.
fn fed(parser: &NaturalToolUseParser, text: &str, chunking: Chunking) -> Vec<Item> {
    let mut parse = parser.incremental(&tools()).unwrap();
    let mut out = Vec::new();
    for piece in chunking.split(text) {
        out.extend(items(parse.feed(piece)));
    }
    out.extend(items(parse.finish()));
    out
}

/// The same pieces through the parser's machine, run by the one driver.
fn driven(parser: &NaturalToolUseParser, text: &str, chunking: Chunking) -> Vec<Item> {
    let machine = parser.machine(&tools(), 0).unwrap();
    let pieces = chunking
        .split(text)
        .into_iter()
        .map(|piece| Ok(Event::text(piece)));
    let pieces: Vec<_> = pieces.collect();
    items(block_on(
        MachineStream::new(stream::iter(pieces), machine).collect::<Vec<_>>(),
    ))
}

#[test]
fn an_error_comes_after_the_events_before_it_and_ends_the_parse() {
    let parser = NaturalToolUseParser::new().on_invalid(OnInvalid::Error);
    let mut parse = parser.incremental(&tools()).unwrap();
    let got: Vec<_> = parse.feed("Hi <tool_call name=\"nope\">{\"a\": ").collect();
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].as_ref().unwrap(), &Event::text("Hi "));
    let got: Vec<_> = parse.feed("1}</tool_call> and").collect();
    assert!(
        matches!(&got[..], [Err(Error::InvalidToolCall { invalid, .. })] if invalid.kind == InvalidCallKind::UnknownTool),
        "{got:?}"
    );
    assert_eq!(
        parse.feed(" more text").count(),
        0,
        "nothing after the error"
    );
    assert_eq!(parse.finish().count(), 0);
}

#[test]
fn text_before_a_fault_in_the_same_piece_comes_out_before_the_error() {
    let parser = NaturalToolUseParser::new().on_invalid(OnInvalid::Error);
    let text = "Hi <tool_call name=\"nope\">{}</tool_call> and";
    for chunking in [Chunking::Whole, Chunking::Bytes(4)] {
        let got = fed(&parser, text, chunking);
        let (events, errors): (Vec<_>, Vec<_>) = got.into_iter().partition(Result::is_ok);
        let events = Joiner::join(events.into_iter().map(Result::unwrap));
        assert_eq!(events, [lmstack::Message::assistant("Hi ")], "{chunking:?}");
        assert_eq!(errors.len(), 1, "{chunking:?}");
    }
}

#[test]
fn held_back_text_comes_out_when_the_text_ends() {
    let mut parse = NaturalToolUseParser::new().incremental(&[]).unwrap();
    let text = |events: Vec<Event>| Joiner::join(events)[0].as_text().map(str::to_owned);
    let got = parse.feed("a < b and <tool").map(Result::unwrap).collect();
    assert_eq!(
        text(got).as_deref(),
        Some("a < b and "),
        "a possible tag is held"
    );
    let rest = parse.finish().map(Result::unwrap).collect();
    assert_eq!(text(rest).as_deref(), Some("<tool"));
}

proptest! {
    #![proptest_config(crate::regressions::beside(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(128),
    )))]

    #[test]
    fn feeding_any_cutting_gives_the_machines_events_and_the_messages_of_parse(
        fragments in prop::collection::vec(fragment(), 0..6),
        seed in any::<u64>(),
        max in 1usize..24,
        policy in prop_oneof![Just(OnInvalid::Text), Just(OnInvalid::Mark), Just(OnInvalid::Error)],
        limit in prop_oneof![Just(8usize << 20), Just(40usize)],
    ) {
        let text = fragments.concat();
        let parser = NaturalToolUseParser::new().on_invalid(policy).call_limit(limit);
        let whole = parser.parse(&text, &tools()).map_err(|error| error.to_string());
        for chunking in [Chunking::Whole, Chunking::Bytes(1), Chunking::Random { seed, max }] {
            let got = fed(&parser, &text, chunking);
            prop_assert_eq!(&got, &driven(&parser, &text, chunking), "{:?}", chunking);
            let (events, errors): (Vec<_>, Vec<_>) = got.into_iter().partition(Result::is_ok);
            let events = Joiner::join(events.into_iter().map(Result::unwrap));
            match &whole {
                Ok(messages) => {
                    prop_assert!(errors.is_empty(), "{:?}", errors);
                    prop_assert_eq!(&events, messages);
                }
                // The same error whatever the cutting, also where a block is
                // both over the limit and invalid.
                Err(error) => prop_assert_eq!(errors, vec![Err(error.clone())], "{:?}", chunking),
            }
        }
    }
}
