//! Images, documents and audio in tool results: the policy every provider's
//! lowering follows, and the texts the policy writes, in one place.
//!
//! Providers differ in where a tool's files may go: Anthropic takes images and
//! documents inside `tool_result` (and no audio anywhere), Gemini 3 images and
//! documents inside `functionResponse.parts` (audio after the responses),
//! Chat Completions and Gemini 2.x only in a user message. Media bytes are
//! never turned into text, whatever the policy.

use crate::Error;
use crate::message::{ContentBlock, MediaRef, ToolResult};

/// What a provider's lowering does with images, documents and audio in tool
/// results.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ToolResultMedia {
    /// The tool result keeps its text plus a note that the files follow
    /// ([`text_with_note`]); a synthetic user message with the files
    /// ([`attachments_heading`], then the files) comes right after the run of
    /// results.
    #[default]
    Inject,
    /// The files go inside the tool result, for providers and servers that
    /// accept it (Anthropic, Gemini 3, llama.cpp, vLLM with vision models).
    Native,
    /// A tool result with a file is an error ([`rejected`]).
    Reject,
}

#[cfg(any(
    feature = "openai",
    feature = "openai-responses",
    feature = "anthropic",
    feature = "gemini"
))]
/// A wire's part type, as the [`MediaPlan`] writes it: a text part (the
/// heading of injected files) and a file.
pub(crate) trait MediaPart: Sized {
    /// A text part.
    fn text(text: String) -> Self;
    /// A file (an image, a document, audio) as the wire writes it in a user
    /// message.
    fn file(block: &ContentBlock) -> Result<Self, Error>;
}

#[cfg(any(
    feature = "openai",
    feature = "openai-responses",
    feature = "anthropic",
    feature = "gemini"
))]
/// Where a tool result's files go, by [`ToolResultMedia`] — the plan every
/// lowering follows, each over its own part type `P`: the files injected
/// after a run of tool results wait here for the user message that follows
/// the run ([`take_waiting`](MediaPlan::take_waiting)).
#[derive(Debug)]
pub(crate) struct MediaPlan<P> {
    provider: &'static str,
    policy: ToolResultMedia,
    waiting: Vec<P>,
}

#[cfg(any(
    feature = "openai",
    feature = "openai-responses",
    feature = "anthropic",
    feature = "gemini"
))]
/// What the [`MediaPlan`] made of one tool result.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Placement {
    /// It holds no file: the wire writes its text.
    NoFiles,
    /// Its files go inside it: the wire writes them its own way.
    Native,
    /// Its files wait for the next user message; the result itself is this
    /// text, which says so.
    Injected(String),
}

#[cfg(any(
    feature = "openai",
    feature = "openai-responses",
    feature = "anthropic",
    feature = "gemini"
))]
impl<P: MediaPart> MediaPlan<P> {
    pub(crate) fn new(provider: &'static str, policy: ToolResultMedia) -> Self {
        MediaPlan {
            provider,
            policy,
            waiting: Vec::new(),
        }
    }

    /// Places `result`'s files: an error under [`ToolResultMedia::Reject`];
    /// under `Inject`, queued under a heading that names the call by
    /// `shown_id` (the id the model saw, if any).
    pub(crate) fn place(
        &mut self,
        result: &ToolResult,
        shown_id: Option<&str>,
    ) -> Result<Placement, Error> {
        if !result
            .content
            .iter()
            .any(|block| block.as_media().is_some())
        {
            return Ok(Placement::NoFiles);
        }
        match self.policy {
            ToolResultMedia::Native => Ok(Placement::Native),
            ToolResultMedia::Reject => Err(rejected(self.provider, result)),
            ToolResultMedia::Inject => {
                let files = result.content.iter().filter(|b| b.as_media().is_some());
                self.inject(result, shown_id, files)?;
                Ok(Placement::Injected(text_with_note(result)))
            }
        }
    }

    /// Queues `files` of `result` for the next user message, under a heading
    /// that names the call by `shown_id`.
    pub(crate) fn inject<'a>(
        &mut self,
        result: &ToolResult,
        shown_id: Option<&str>,
        files: impl IntoIterator<Item = &'a ContentBlock>,
    ) -> Result<(), Error> {
        let heading = attachments_heading(shown_id, &result.name);
        self.waiting.push(P::text(heading));
        for block in files {
            self.waiting.push(P::file(block)?);
        }
        Ok(())
    }

    /// The parts waiting for a user message, if any: the run of tool results
    /// they follow is over.
    pub(crate) fn take_waiting(&mut self) -> Option<Vec<P>> {
        (!self.waiting.is_empty()).then(|| std::mem::take(&mut self.waiting))
    }
}

/// The error of a tool result refused under [`ToolResultMedia::Reject`]: it
/// names the call and the media types.
pub fn rejected(provider: &str, result: &ToolResult) -> Error {
    let types: Vec<&str> = result
        .content
        .iter()
        .filter_map(|block| block.as_media())
        .map(|media| media.media_type().unwrap_or("a file of unknown type"))
        .collect();
    Error::InvalidRequest(format!(
        "{provider}: the result of tool call `{}` ({}) holds {} (tool result media policy: reject)",
        result.call_id,
        result.name,
        types.join(", ")
    ))
}

/// The error of media by reference that reaches a provider unresolved: a
/// provider with no media store, or a lowering called on a request whose
/// references were not resolved. It names the reference.
pub fn unresolved(provider: &str, reference: &MediaRef) -> Error {
    Error::InvalidRequest(format!(
        "{provider}: media {reference} is by reference, and no media store resolved it \
         (give the provider one with `ProviderConfig::media_store`, or resolve the \
         messages first with `store::rehydrate`)"
    ))
}

/// The text of a tool result whose files are injected after it: its text,
/// then a note saying what follows in the next message.
pub fn text_with_note(result: &ToolResult) -> String {
    let files = result
        .content
        .iter()
        .filter(|block| block.as_media().is_some());
    text_with_note_of(result, files)
}

/// The text of a tool result of which only the files `moved` are injected
/// after it (the others travel inside it): its text, then a note counting
/// `moved`.
pub fn text_with_note_of<'a>(
    result: &ToolResult,
    moved: impl IntoIterator<Item = &'a ContentBlock>,
) -> String {
    let mut text = result.text_content();
    if !text.is_empty() {
        text.push_str("\n\n");
    }
    text.push_str(&attachment_note(moved));
    text
}

/// The text that opens the injected files of one tool result: it names the call
/// by its id, or by its tool alone when the wire never showed the model an id
/// (`call_id: None`, Gemini's generated ids).
pub fn attachments_heading(call_id: Option<&str>, name: &str) -> String {
    match call_id {
        Some(id) => format!("Attachments from tool call `{id}` ({name}):"),
        None => format!("Attachments from the call of `{name}`:"),
    }
}

/// "(The tool returned 1 image, 2 documents and 1 audio clip; they follow in
/// the next message.)"
fn attachment_note<'a>(files: impl IntoIterator<Item = &'a ContentBlock>) -> String {
    let mut counts = [0usize; 3];
    for block in files {
        match block {
            ContentBlock::Image(_) => counts[0] += 1,
            ContentBlock::Document(_) => counts[1] += 1,
            ContentBlock::Audio(_) => counts[2] += 1,
            ContentBlock::Text { .. } => {}
        }
    }
    let what: Vec<String> = counts
        .iter()
        .zip(["image", "document", "audio clip"])
        .filter(|(n, _)| **n > 0)
        .map(|(n, what)| match n {
            1 => format!("1 {what}"),
            n => format!("{n} {what}s"),
        })
        .collect();
    let pronoun = if counts.iter().sum::<usize>() == 1 {
        "it follows"
    } else {
        "they follow"
    };
    format!(
        "(The tool returned {}; {pronoun} in the next message.)",
        listed(&what)
    )
}

/// "a", "a and b", "a, b and c".
fn listed(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [only] => only.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Media;

    #[cfg(any(
        feature = "openai",
        feature = "openai-responses",
        feature = "anthropic",
        feature = "gemini"
    ))]
    impl MediaPart for String {
        fn text(text: String) -> Self {
            text
        }

        fn file(block: &ContentBlock) -> Result<Self, Error> {
            Ok(block
                .as_media()
                .and_then(Media::media_type)
                .unwrap_or("?")
                .to_owned())
        }
    }

    #[cfg(any(
        feature = "openai",
        feature = "openai-responses",
        feature = "anthropic",
        feature = "gemini"
    ))]
    #[test]
    fn the_plan_places_files_by_policy_and_hands_the_waiting_ones_out_once() {
        let text = ToolResult::text("c1", "shot", "plain");
        let shot = ToolResult::new(
            "c1",
            "shot",
            vec![
                ContentBlock::text("Here."),
                ContentBlock::image_bytes("image/png", b"png"),
            ],
        );
        let mut native = MediaPlan::<String>::new("p", ToolResultMedia::Native);
        assert_eq!(native.place(&text, Some("c1")).unwrap(), Placement::NoFiles);
        assert_eq!(native.place(&shot, Some("c1")).unwrap(), Placement::Native);
        assert_eq!(native.take_waiting(), None);

        let mut inject = MediaPlan::<String>::new("p", ToolResultMedia::Inject);
        let Placement::Injected(note) = inject.place(&shot, Some("c1")).unwrap() else {
            panic!("injected");
        };
        assert!(
            note.starts_with("Here.\n\n(The tool returned 1 image"),
            "{note}"
        );
        assert_eq!(
            inject.take_waiting(),
            Some(vec![
                "Attachments from tool call `c1` (shot):".to_owned(),
                "image/png".to_owned()
            ])
        );
        assert_eq!(inject.take_waiting(), None);

        let mut reject = MediaPlan::<String>::new("p", ToolResultMedia::Reject);
        assert_eq!(reject.place(&text, None).unwrap(), Placement::NoFiles);
        let error = reject.place(&shot, None).unwrap_err().to_string();
        assert!(
            error.starts_with("invalid request: p: the result of tool call `c1`"),
            "{error}"
        );
    }

    #[test]
    fn the_note_counts_every_kind_of_file() {
        let image = ContentBlock::image_bytes("image/png", b"png");
        let audio = ContentBlock::audio_bytes("audio/wav", b"RIFF");
        let pdf = ContentBlock::Document(Media::from_bytes("application/pdf", b"%PDF"));
        assert_eq!(
            attachment_note([&image, &audio]),
            "(The tool returned 1 image and 1 audio clip; they follow in the next message.)"
        );
        assert_eq!(
            attachment_note([&audio]),
            "(The tool returned 1 audio clip; it follows in the next message.)"
        );
        assert_eq!(
            attachment_note([&image, &pdf, &pdf, &audio, &audio]),
            "(The tool returned 1 image, 2 documents and 2 audio clips; they follow in the next message.)"
        );
        let result = ToolResult::new(
            "call_1",
            "speak",
            vec![ContentBlock::text("Said."), image, audio.clone()],
        );
        assert_eq!(
            text_with_note_of(&result, [&audio]),
            "Said.\n\n(The tool returned 1 audio clip; it follows in the next message.)"
        );
    }
}
