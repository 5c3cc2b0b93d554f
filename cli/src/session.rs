//! The interactive `lmstack chat`: prompts read from stdin line by line, each
//! one turn over the whole conversation so far, its reply streamed as it
//! arrives; commands start with `/`.
//!
//! What a turn leaves in the history: its user line and every message of the
//! reply (text, reasoning, tool calls with their results; not `usage`) when the
//! reply ends well. A turn that fails or is cancelled (Ctrl-C) leaves the
//! history as it was before it: its user line and its images are not kept.
//!
//! The conversation goes to stdout; the prompt marker (only when stdin is a
//! terminal), notes and errors go to stderr.

use std::io::{IsTerminal, Write};
use std::path::Path;

use futures::StreamExt;
use lmstack::function::MediaPolicy;
use lmstack::service::ChatService;
use lmstack::transcript::TranscriptLayer;
use lmstack::{ChatRequest, ContentBlock, Error, Event, Joiner, Message, Role};
use tokio::sync::mpsc;
use tower::ServiceExt;

use crate::input::Limit;
use crate::{conversation, show};

/// The commands of the session, as `/help` and `lmstack chat --help` list them.
pub const COMMANDS: &str = "\
Without PROMPT, chat is an interactive session: each line of stdin is a prompt
sent with the whole conversation so far, and the reply streams as it arrives.
Commands:
  /reset        forget the conversation so far
  /save FILE    write the conversation to FILE as JSON lines of messages, its
                images by reference in media/ beside FILE (continue it later
                with --resume FILE)
  /image PATH   attach an image file (PNG, JPEG, GIF, WebP) to the next prompt
  /help         show these commands
  /quit         end the session (as does the end of stdin, Ctrl-D)
Ctrl-C during a reply cancels that reply: the conversation stays as it was
before that prompt (which is not kept). Ctrl-C at the prompt does not end the
session.";

/// An interactive session over `stack`.
pub struct Session<S> {
    pub stack: S,
    /// The request each turn sends, but for its messages.
    pub template: ChatRequest,
    /// The conversation so far.
    pub history: Vec<Message>,
    /// Print the messages as JSON lines instead of text.
    pub json: bool,
    /// The transcript, flushed after each turn.
    pub log: Option<TranscriptLayer>,
    /// The limit of stdin.
    pub limit: Limit,
}

/// A line of input.
#[derive(Debug, PartialEq)]
enum Line<'a> {
    Blank,
    Prompt(&'a str),
    Reset,
    Save(&'a str),
    Image(&'a str),
    Help,
    Quit,
}

impl<'a> Line<'a> {
    /// Reads a line: a command when it starts with `/`, else a prompt.
    fn parse(line: &'a str) -> Result<Self, String> {
        let line = line.trim();
        let Some(command) = line.strip_prefix('/') else {
            return Ok(if line.is_empty() {
                Line::Blank
            } else {
                Line::Prompt(line)
            });
        };
        let (name, argument) = command
            .split_once(char::is_whitespace)
            .map_or((command, ""), |(name, rest)| (name, rest.trim()));
        let needs = |what: &str| format!("/{name} needs {what}");
        match name {
            "reset" => Ok(Line::Reset),
            "help" => Ok(Line::Help),
            "quit" => Ok(Line::Quit),
            "save" if argument.is_empty() => Err(needs("a FILE")),
            "save" => Ok(Line::Save(argument)),
            "image" if argument.is_empty() => Err(needs("a PATH")),
            "image" => Ok(Line::Image(argument)),
            _ => Err(format!("unknown command /{name} (/help lists them)")),
        }
    }
}

impl<S: ChatService> Session<S> {
    /// Runs the session until `/quit` or the end of stdin. Only what stops the
    /// session is an error: stdin or stdout failing.
    pub async fn run(mut self) -> Result<(), Error> {
        let terminal = std::io::stdin().is_terminal();
        let mut interrupts = Interrupts::new()?;
        let mut lines = stdin_lines(self.limit)?;
        let mut attached = Vec::new();
        loop {
            if terminal {
                eprint!("> ");
                let _ = std::io::stderr().flush();
            }
            let line = tokio::select! {
                line = lines.recv() => line,
                () = interrupts.next() => {
                    if terminal {
                        eprintln!();
                    }
                    note("(Ctrl-C: /quit or the end of input, Ctrl-D, ends the session)");
                    continue;
                }
            };
            let Some(line) = line.transpose()? else {
                if terminal {
                    eprintln!();
                }
                break;
            };
            let Ok(line) = String::from_utf8(line) else {
                note("error: the line is not UTF-8 text");
                continue;
            };
            match Line::parse(&line) {
                Err(error) => note(&format!("error: {error}")),
                Ok(Line::Blank) => {}
                Ok(Line::Prompt(text)) => {
                    let user = user_message(text, std::mem::take(&mut attached));
                    self.turn(user, &mut interrupts).await?;
                }
                Ok(Line::Reset) => {
                    self.history.clear();
                    attached.clear();
                    note("the conversation is cleared");
                }
                Ok(Line::Save(file)) => match conversation::save(Path::new(file), &self.history) {
                    Ok(()) => note(&format!("saved {} messages to {file}", self.history.len())),
                    Err(error) => note(&format!("error: {error}")),
                },
                Ok(Line::Image(path)) => match image(Path::new(path)) {
                    Ok(block) => {
                        attached.push(block);
                        note(&format!("{path} goes with the next prompt"));
                    }
                    Err(error) => note(&format!("error: {error}")),
                },
                Ok(Line::Help) => note(COMMANDS),
                Ok(Line::Quit) => break,
            }
        }
        self.flush_log().await;
        Ok(())
    }

    /// Sends the history and `user`, shows the reply as it streams, and keeps
    /// both in the history if the reply ends well. Ctrl-C cancels the reply.
    async fn turn(&mut self, user: Message, interrupts: &mut Interrupts) -> Result<(), Error> {
        let mut request = self.template.clone();
        request.messages = self.history.clone();
        request.messages.push(user.clone());
        let mut shown = Shown::new(self.json);
        let mut joiner = Joiner::new();
        let outcome = tokio::select! {
            outcome = reply(&mut self.stack, request, &mut shown, &mut joiner) => Some(outcome),
            () = interrupts.next() => None,
        };
        shown.end()?;
        match outcome {
            Some(Ok(())) => {
                self.history.push(user);
                self.history.extend(
                    joiner
                        .finish()
                        .into_iter()
                        .filter(|message| !matches!(message, Message::Usage(_))),
                );
            }
            Some(Err(Failure::Model(error))) => note(&format!("error: {error}")),
            Some(Err(Failure::Output(error))) => return Err(error),
            None => note("[cancelled]"),
        }
        self.flush_log().await;
        Ok(())
    }

    async fn flush_log(&self) {
        if let Some(log) = &self.log {
            log.flush().await;
        }
    }
}

/// Why a reply did not end well: the model's side (the session goes on), or
/// stdout (it ends).
enum Failure {
    Model(Error),
    Output(Error),
}

impl From<Error> for Failure {
    fn from(error: Error) -> Self {
        Failure::Model(error)
    }
}

/// Calls `stack` with `request` and shows the reply as it streams, joining its
/// messages in `joiner`.
async fn reply<S: ChatService>(
    stack: &mut S,
    request: ChatRequest,
    shown: &mut Shown,
    joiner: &mut Joiner,
) -> Result<(), Failure> {
    let service = stack.ready().await.map_err(Into::<Error>::into)?;
    let mut reply = service.call(request).await.map_err(Into::<Error>::into)?;
    while let Some(item) = reply.next().await {
        let event = item?;
        shown.event(&event).map_err(Failure::Output)?;
        joiner.push(event);
    }
    Ok(())
}

/// How replies are shown: as text, or as JSON lines of messages.
enum Shown {
    Text(show::TextOut),
    Json(show::MessageLines),
}

impl Shown {
    fn new(json: bool) -> Self {
        if json {
            Shown::Json(show::MessageLines::default())
        } else {
            Shown::Text(show::TextOut::default())
        }
    }

    fn event(&mut self, event: &Event) -> Result<(), Error> {
        match self {
            Shown::Text(out) => out.event(event),
            Shown::Json(lines) => {
                lines.push(event.clone());
                Ok(())
            }
        }
    }

    /// Shows the end of the reply (what was shown of a cancelled one stays).
    fn end(self) -> Result<(), Error> {
        match self {
            Shown::Text(out) => out.end(),
            Shown::Json(lines) => {
                lines.finish();
                Ok(())
            }
        }
    }
}

/// The user's message: the text alone, or with the images attached to it.
fn user_message(text: &str, mut images: Vec<ContentBlock>) -> Message {
    if images.is_empty() {
        return Message::user(text);
    }
    images.insert(0, ContentBlock::text(text));
    Message::multimodal(Role::User, images)
}

/// The image file at `path`, checked as the function layer checks tools'
/// media: a regular file within the size limit whose bytes are an image.
fn image(path: &Path) -> Result<ContentBlock, Error> {
    let refused = |error: &dyn std::fmt::Display| {
        Error::InvalidRequest(format!("{}: {error}", path.display()))
    };
    let real = path.canonicalize().map_err(|error| refused(&error))?;
    let (Some(directory), Some(name)) = (real.parent(), real.file_name()) else {
        return Err(refused(&"not a file"));
    };
    let images = MediaPolicy::DEFAULT_ALLOWED
        .iter()
        .copied()
        .filter(|media_type| media_type.starts_with("image/"));
    MediaPolicy::new()
        .allow_only(images)
        .root(directory)
        .read_block(Path::new(name), None)
        .map_err(|error| refused(&error))
}

/// Prints a note on stderr.
fn note(text: &str) {
    eprintln!("{text}");
}

/// The lines of stdin, read on a thread of their own (a read of a terminal
/// cannot be cancelled), one at a time as the session takes them. The channel
/// ends with stdin; an error (stdin unreadable, over the limit) is its last item.
fn stdin_lines(limit: Limit) -> Result<mpsc::Receiver<Result<Vec<u8>, Error>>, Error> {
    let (sender, receiver) = mpsc::channel(1);
    std::thread::Builder::new()
        .name("stdin".into())
        .spawn(move || {
            let mut input = limit.stdin();
            while let Some(line) = input.line().transpose() {
                let failed = line.is_err();
                if sender.blocking_send(line).is_err() || failed {
                    break;
                }
            }
        })
        .map_err(|error| Error::stage("lmstack", format!("reading stdin: {error}")))?;
    Ok(receiver)
}

/// Ctrl-C (SIGINT), caught from the start of the session to its end: the
/// process is not ended by it meanwhile.
struct Interrupts {
    #[cfg(unix)]
    signal: tokio::signal::unix::Signal,
    #[cfg(windows)]
    signal: tokio::signal::windows::CtrlC,
}

impl Interrupts {
    fn new() -> Result<Self, Error> {
        #[cfg(unix)]
        let signal = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt());
        #[cfg(windows)]
        let signal = tokio::signal::windows::ctrl_c();
        let signal =
            signal.map_err(|error| Error::stage("lmstack", format!("catching Ctrl-C: {error}")))?;
        Ok(Interrupts { signal })
    }

    /// Resolves at the next Ctrl-C.
    async fn next(&mut self) {
        if self.signal.recv().await.is_none() {
            std::future::pending::<()>().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Line;

    #[test]
    fn lines_are_prompts_or_commands() {
        assert_eq!(
            Line::parse("  hello there \r"),
            Ok(Line::Prompt("hello there"))
        );
        assert_eq!(Line::parse(" "), Ok(Line::Blank));
        assert_eq!(
            Line::parse("/save  a b.jsonl "),
            Ok(Line::Save("a b.jsonl"))
        );
        assert_eq!(Line::parse("/image x.png"), Ok(Line::Image("x.png")));
        assert_eq!(Line::parse("/quit"), Ok(Line::Quit));
        assert_eq!(Line::parse("/save"), Err("/save needs a FILE".into()));
        assert_eq!(
            Line::parse("/nope 1"),
            Err("unknown command /nope (/help lists them)".into())
        );
    }
}
