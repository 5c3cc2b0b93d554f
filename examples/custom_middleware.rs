//! Two custom middlewares, unit-tested with `lmstack::testing`, each working in
//! streaming and non-streaming mode alike:
//!
//! - `Censor`, written once as a pure state machine (a `MachineFactory`): it masks
//!   a word in the model's text, however the text is cut into deltas;
//! - `Tally`, a plain tower layer (`map_response`) that counts the model's rounds
//!   and output tokens with `Reply::inspect`, which keeps the reply's form, and
//!   hands the counts back behind an `Arc`.
//!
//! Run with `cargo run --example custom_middleware`; its tests run with `cargo test`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use lmstack::service::{Machine, MachineFactory, MachineLayer, Output};
use lmstack::{ChatRequest, Error, Event, Message, Reply, TextDelta};
use tower::util::MapResponseLayer;

/// The layer's configuration: the word to mask.
#[derive(Clone, Debug)]
pub struct Censor {
    word: &'static str,
}

/// The layer.
pub type CensorLayer = MachineLayer<Censor>;

impl Censor {
    /// Masks every occurrence of `word` (non-empty) with asterisks.
    pub fn layer(word: &'static str) -> CensorLayer {
        assert!(!word.is_empty(), "the word to mask is empty");
        MachineLayer::new(Censor { word })
    }
}

impl MachineFactory for Censor {
    type Machine = CensorMachine;

    fn start(&self, _request: &mut ChatRequest) -> Result<CensorMachine, Error> {
        Ok(CensorMachine {
            word: self.word,
            held: String::new(),
        })
    }
}

/// Holds back at most the start of a possible occurrence that a later delta may
/// complete; everything else goes out at once.
pub struct CensorMachine {
    word: &'static str,
    held: String,
}

impl CensorMachine {
    /// Masks and releases the held text, keeping a tail that may start the word
    /// unless `all`.
    fn release(&mut self, all: bool, out: &mut Output) {
        let masked = self
            .held
            .replace(self.word, &"*".repeat(self.word.chars().count()));
        let keep = if all {
            0
        } else {
            // The longest tail of the text that begins the word.
            (1..self.word.len().min(masked.len() + 1))
                .rev()
                .find(|&n| {
                    let start = masked.len() - n;
                    masked.is_char_boundary(start) && self.word.starts_with(&masked[start..])
                })
                .unwrap_or(0)
        };
        let (ready, tail) = masked.split_at(masked.len() - keep);
        if !ready.is_empty() {
            out.push(Event::text(ready));
        }
        self.held = tail.to_owned();
    }
}

impl Machine for CensorMachine {
    type In = Event;
    type Out = Event;

    fn push(&mut self, event: Event, out: &mut Output) -> Result<(), Error> {
        match event {
            Event::TextDelta(TextDelta { text, .. }) => {
                self.held.push_str(&text);
                self.release(false, out);
            }
            Event::Message {
                message: Message::Text(mut text),
            } => {
                self.finish(out)?;
                text.text = text
                    .text
                    .replace(self.word, &"*".repeat(self.word.chars().count()));
                out.push(Event::message(Message::Text(text)));
            }
            other => {
                self.finish(out)?;
                out.push(other);
            }
        }
        Ok(())
    }

    fn finish(&mut self, out: &mut Output) -> Result<(), Error> {
        self.release(true, out);
        Ok(())
    }
}

/// Counts what the replies through its layer say, the same in both modes: the
/// model's rounds (`finish` events) and output tokens (`usage` events). Clones
/// share the counts.
#[derive(Clone, Debug, Default)]
pub struct Tally {
    rounds: Arc<AtomicU64>,
    output_tokens: Arc<AtomicU64>,
}

impl Tally {
    /// The layer: a plain `map_response` whose reply is the inner one, inspected.
    /// (`Reply::inspect` keeps a non-streaming reply ready; wrapping it in
    /// `Reply::from_stream` would not.)
    pub fn layer(&self) -> MapResponseLayer<impl Fn(Reply) -> Reply + Clone> {
        let tally = self.clone();
        MapResponseLayer::new(move |reply: Reply| {
            let tally = tally.clone();
            reply.inspect(move |event| match event {
                Event::Finish { .. } => {
                    tally.rounds.fetch_add(1, Ordering::Relaxed);
                }
                Event::Usage(usage) => {
                    tally
                        .output_tokens
                        .fetch_add(usage.output_tokens, Ordering::Relaxed);
                }
                _ => {}
            })
        })
    }

    /// The model rounds counted so far.
    pub fn rounds(&self) -> u64 {
        self.rounds.load(Ordering::Relaxed)
    }

    /// The output tokens counted so far.
    pub fn output_tokens(&self) -> u64 {
        self.output_tokens.load(Ordering::Relaxed)
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    use lmstack::testing::{Chunking, ScriptedModel};
    use tower::{ServiceBuilder, ServiceExt};

    let model = ScriptedModel::new()
        .chunking(Chunking::Chars)
        .reply_messages(vec![
            Message::assistant("The password is swordfish, I repeat: swordfish."),
            Message::usage(12, 11),
        ]);
    let tally = Tally::default();
    let service = ServiceBuilder::new()
        .layer(tally.layer())
        .layer(Censor::layer("swordfish"))
        .service(model);
    let request = ChatRequest::new(vec![Message::user("What is the password?")]).streaming(true);
    for message in service.oneshot(request).await?.collect().await? {
        if let Some(text) = message.as_text() {
            println!("{text}");
        }
    }
    println!(
        "{} round, {} output tokens",
        tally.rounds(),
        tally.output_tokens()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use lmstack::testing::{Chunking, ScriptedModel, assert_modes_agree, collect_both};
    use proptest::prelude::*;
    use tower::Layer;

    fn request() -> ChatRequest {
        ChatRequest::new(vec![Message::user("hi")])
    }

    #[tokio::test]
    async fn masks_the_word_even_when_a_delta_cuts_it() {
        let make = || {
            Censor::layer("secret").layer(
                ScriptedModel::new()
                    .chunking(Chunking::Bytes(2))
                    .reply("a secret, two secrets"),
            )
        };
        let (whole, streamed) = collect_both(make, request()).await.unwrap();
        assert_eq!(whole, vec![Message::assistant("a ******, two ******s")]);
        assert_eq!(streamed, whole);
    }

    #[tokio::test]
    async fn text_that_only_looks_like_the_start_of_the_word_is_released() {
        let make = || {
            Censor::layer("secret").layer(
                ScriptedModel::new()
                    .chunking(Chunking::Chars)
                    .reply("see sec"),
            )
        };
        let (whole, streamed) = collect_both(make, request()).await.unwrap();
        assert_eq!(whole, vec![Message::assistant("see sec")]);
        assert_eq!(streamed, whole);
    }

    #[tokio::test]
    async fn the_censor_keeps_the_non_streaming_contract() {
        let make = |chunking| {
            Censor::layer("secret").layer(
                ScriptedModel::new()
                    .chunking(chunking)
                    .reply_messages(vec![Message::assistant("a secret"), Message::usage(1, 2)]),
            )
        };
        let (messages, error) = assert_modes_agree(make, request()).await;
        assert!(error.is_none());
        assert_eq!(messages[0], Message::assistant("a ******"));
    }

    #[tokio::test]
    async fn the_tally_counts_alike_in_both_modes_and_keeps_the_contract() {
        let tally = Tally::default();
        let make = |chunking| {
            tally
                .layer()
                .layer(ScriptedModel::new().chunking(chunking).reply_messages(vec![
                    Message::assistant("Hello there"),
                    Message::usage(3, 4),
                ]))
        };
        assert_modes_agree(make, request()).await;
        // One non-streaming and five streamed runs, each one round of 4 tokens.
        assert_eq!((tally.rounds(), tally.output_tokens()), (6, 6 * 4));
    }

    proptest! {
        #[test]
        fn both_modes_agree_for_any_chunking(text in "(secret|sec|ret|[a-z ]){0,20}", seed: u64, max in 1usize..8) {
            let make = || Censor::layer("secret").layer(
                ScriptedModel::new().chunking(Chunking::Random { seed, max }).reply(text.clone()),
            );
            let (whole, streamed) = futures::executor::block_on(collect_both(make, request())).unwrap();
            prop_assert_eq!(&whole, &streamed);
            let masked = text.replace("secret", "******");
            prop_assert_eq!(whole, vec![Message::assistant(masked)]);
        }
    }
}
