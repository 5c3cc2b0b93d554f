//! Printing on stdout, shared by the commands: values as JSON lines, and a
//! conversation as it streams — readable text (the model's words, each tool call
//! with its result) or its messages as JSON lines.

use std::io::{self, Write};

use futures::StreamExt;
use lmstack::message::ToolAggregateMessage;
use lmstack::{ContentBlock, Error, Event, Joiner, MediaSource, Message, Reply, Role};

/// Prints a value as one JSON line on stdout, written as it is serialised (a
/// line is never held whole: it may be as large as the input). When stdout is
/// closed (`| head`) the program ends quietly, as command-line filters do.
pub fn print_json_line(value: &impl serde::Serialize) {
    let mut out = io::stdout().lock();
    let written = serde_json::to_writer(&mut out, value)
        .map_err(io::Error::from)
        .and_then(|()| out.write_all(b"\n"));
    if let Err(error) = written {
        if error.kind() == io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("error: writing stdout: {error}");
        std::process::exit(1);
    }
}

/// Prints each message of `reply` as a JSON line as soon as it is complete.
pub async fn json_lines(mut reply: Reply) -> Result<(), Error> {
    let mut lines = MessageLines::default();
    while let Some(item) = reply.next().await {
        lines.push(item?);
    }
    lines.finish();
    Ok(())
}

/// Events joined into messages, each printed as a JSON line as soon as it is
/// complete.
#[derive(Default)]
pub struct MessageLines(Joiner);

impl MessageLines {
    /// Folds `event` in, and prints the messages it completes.
    pub fn push(&mut self, event: Event) {
        self.0.push(event);
        self.0.take_completed().iter().for_each(print_json_line);
    }

    /// Prints the messages still being joined.
    pub fn finish(self) {
        self.0.finish().iter().for_each(print_json_line);
    }
}

/// Prints `opening`, then the conversation as it streams (see [`TextOut`]).
pub async fn text(mut reply: Reply, opening: &str) -> Result<(), Error> {
    let mut out = TextOut::default();
    out.view.shown = format!("{opening}\n");
    while let Some(item) = reply.next().await {
        out.event(&item?)?;
    }
    out.end()
}

/// A conversation printed as readable text as it streams: the assistant's text
/// as it arrives (streamed deltas or whole messages), and each tool call with
/// its result. Whitespace between tool calls is not shown.
pub struct TextOut {
    view: TextView,
    /// Whether anything was printed: only then is there a line to end.
    started: bool,
}

impl Default for TextOut {
    fn default() -> Self {
        TextOut {
            view: TextView {
                shown: String::new(),
                new_turn: true,
                spaces: String::new(),
            },
            started: false,
        }
    }
}

impl TextOut {
    /// Prints what `event` adds to the conversation.
    pub fn event(&mut self, event: &Event) -> Result<(), Error> {
        match event {
            Event::TextDelta(delta) => self.view.text(&delta.text),
            Event::Message {
                message: Message::Text(message),
            } if message.role == Role::Assistant => self.view.text(&message.text),
            Event::Message {
                message: Message::ToolAggregate(aggregate),
            } => self.view.aggregate(aggregate),
            _ => {}
        }
        if self.view.shown.is_empty() {
            return Ok(());
        }
        let mut out = io::stdout().lock();
        write!(out, "{}", self.view.shown)
            .and_then(|()| out.flush())
            .map_err(cannot_write)?;
        self.view.shown.clear();
        self.started = true;
        Ok(())
    }

    /// Ends the conversation's last line, if anything was printed.
    pub fn end(self) -> Result<(), Error> {
        if !self.started {
            return Ok(());
        }
        writeln!(io::stdout().lock()).map_err(cannot_write)
    }
}

fn cannot_write(error: io::Error) -> Error {
    Error::stage("output", format!("cannot write the output: {error}"))
}

/// The readable view of a conversation: what to show next.
struct TextView {
    /// Text not written yet.
    shown: String,
    /// Whether the next text starts a new assistant turn on screen.
    new_turn: bool,
    /// The whitespace at the end of the text so far, shown only if more text follows.
    spaces: String,
}

impl TextView {
    fn text(&mut self, piece: &str) {
        let piece = if self.new_turn {
            piece.trim_start()
        } else {
            piece
        };
        let body = piece.trim_end();
        if !body.is_empty() {
            if self.new_turn {
                self.shown.push_str("\nassistant: ");
                self.new_turn = false;
            }
            self.shown.push_str(&self.spaces);
            self.shown.push_str(body);
            self.spaces.clear();
        }
        self.spaces.push_str(&piece[body.len()..]);
    }

    fn aggregate(&mut self, aggregate: &ToolAggregateMessage) {
        if !self.new_turn {
            self.shown.push('\n');
        }
        self.spaces.clear();
        for (call, result) in aggregate.calls.iter().zip(&aggregate.results) {
            self.shown
                .push_str(&format!("  ⚙ {} {}\n", call.name, call.arguments));
            let mark = if result.is_error { "✗" } else { "→" };
            for block in &result.content {
                self.shown
                    .push_str(&format!("    {mark} {}\n", describe(block)));
            }
        }
        self.new_turn = true;
    }
}

/// One line about a content block.
pub fn describe(block: &ContentBlock) -> String {
    let media = match block {
        ContentBlock::Text { text, .. } => return text.clone(),
        ContentBlock::Image(media) | ContentBlock::Document(media) | ContentBlock::Audio(media) => {
            media
        }
    };
    let kind = media.media_type().unwrap_or("media");
    let name = media.name.as_deref();
    match &media.source {
        MediaSource::Base64 { .. } => {
            let size = media
                .decode()
                .and_then(Result::ok)
                .map_or(0, |bytes| bytes.len());
            format!(
                "[{kind} {}, {:.1} KiB]",
                name.unwrap_or("inline"),
                size as f64 / 1024.0
            )
        }
        MediaSource::Url { url, .. } => format!("[{kind} {}]", name.unwrap_or(url)),
        MediaSource::Ref { reference, .. } => {
            let digest = reference.hex();
            format!(
                "[{kind} {}, stored as sha256:{}…]",
                name.unwrap_or("by reference"),
                &digest[..12]
            )
        }
    }
}

/// Prints a request's messages as the model reads them: each message's role,
/// then its text, with media as one line each.
pub fn request(messages: &[Message]) -> Result<(), Error> {
    let mut out = io::stdout().lock();
    for message in messages {
        let role = serde_json::to_value(message.role()).expect("a role serialises");
        let body = match message {
            Message::Text(text) => text.text.clone(),
            Message::Multimodal(multimodal) => {
                let mut body = String::new();
                for block in &multimodal.content {
                    match block {
                        ContentBlock::Text { text, .. } => body.push_str(text),
                        media => {
                            if !body.is_empty() && !body.ends_with('\n') {
                                body.push('\n');
                            }
                            body.push_str(&describe(media));
                            body.push('\n');
                        }
                    }
                }
                body
            }
            other => serde_json::to_string(other).expect("a message serialises"),
        };
        writeln!(
            out,
            "── {} ──\n{}\n",
            role.as_str().unwrap_or("?"),
            body.trim_end()
        )
        .map_err(|error| Error::stage("output", format!("cannot write the output: {error}")))?;
    }
    Ok(())
}
