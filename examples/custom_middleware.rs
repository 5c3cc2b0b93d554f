//! A custom middleware, written once as a pure state machine and unit-tested with
//! `lmstack::testing`: it masks a word in the model's text, in streaming and
//! non-streaming mode alike, however the text is cut into deltas.
//!
//! Run with `cargo run --example custom_middleware`; its tests run with `cargo test`.

use lmstack::service::{Machine, MachineFactory, MachineLayer, Output};
use lmstack::{ChatRequest, Error, Event, Message, TextDelta};

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

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    use lmstack::testing::{Chunking, ScriptedModel};
    use tower::{Layer, ServiceExt};

    let model = ScriptedModel::new()
        .chunking(Chunking::Chars)
        .reply("The password is swordfish, I repeat: swordfish.");
    let service = Censor::layer("swordfish").layer(model);
    let request = ChatRequest::new(vec![Message::user("What is the password?")]).streaming(true);
    for message in service.oneshot(request).await?.collect().await? {
        println!("{}", message.as_text().unwrap_or_default());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use lmstack::testing::{Chunking, ScriptedModel, collect_both};
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
