//! A scripted HTTP server on loopback: each POST (to any path, such as
//! `/v1/chat/completions`) takes the next scripted answer, whose body is written
//! in the given pieces (or made of the request: an echo) — but a POST to a path
//! holding a standing answer's fragment (such as `:countTokens`) gets that one,
//! as often as asked.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::post;
use serde_json::Value;

/// One scripted answer.
#[derive(Clone, Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    /// The body, written piece by piece, yielding between pieces.
    pub pieces: Vec<Vec<u8>>,
    /// After the pieces, the connection is dropped instead of ending the body.
    pub break_after: bool,
    /// A pause before the first piece.
    pub stall: Duration,
    /// The pieces are written again and again: the body never ends (until the
    /// client goes away).
    pub endless: bool,
    /// A pause before each piece after the first: a body that trickles.
    pub pace: Duration,
    /// When set, the body is made of the request's headers and its path and
    /// query, in one piece (an upstream that echoes what it was sent).
    pub echo: Option<fn(&HeaderMap, &str) -> Vec<u8>>,
    /// When set, the body is made of the request's JSON body, in one piece (an
    /// upstream whose answer depends on what it was sent, such as a text built
    /// from a tool's result).
    pub made_of: Option<fn(&Value) -> Vec<u8>>,
}

impl Answer {
    /// A 200 answer with this content type, cut in `sizes` (cycled).
    pub fn ok(content_type: &str, body: &[u8], sizes: &[usize]) -> Self {
        let mut pieces = Vec::new();
        let mut rest = body;
        let mut sizes = sizes.iter().cycle();
        while !rest.is_empty() {
            let size = (*sizes.next().unwrap()).clamp(1, rest.len());
            pieces.push(rest[..size].to_vec());
            rest = &rest[size..];
        }
        Answer {
            status: 200,
            headers: vec![("content-type", content_type.to_owned())],
            pieces,
            break_after: false,
            stall: Duration::ZERO,
            endless: false,
            pace: Duration::ZERO,
            echo: None,
            made_of: None,
        }
    }

    /// An error answer with a JSON body.
    pub fn error(status: u16, body: &[u8], headers: &[(&'static str, &str)]) -> Self {
        let mut answer = Answer::ok("application/json", body, &[usize::MAX]);
        answer.status = status;
        answer
            .headers
            .extend(headers.iter().map(|(k, v)| (*k, v.to_string())));
        answer
    }

    /// A 200 answer with this content type whose body `made_of` makes of the
    /// request's JSON body.
    pub fn made_of(content_type: &str, made_of: fn(&Value) -> Vec<u8>) -> Self {
        Answer {
            made_of: Some(made_of),
            ..Answer::ok(content_type, b"", &[usize::MAX])
        }
    }

    /// An error answer whose JSON body `echo` makes of the request's headers
    /// and its path and query.
    pub fn echo(status: u16, echo: fn(&HeaderMap, &str) -> Vec<u8>) -> Self {
        Answer {
            echo: Some(echo),
            ..Answer::error(status, b"", &[])
        }
    }
}

#[derive(Default)]
struct Script {
    answers: VecDeque<Answer>,
    /// Answers for the paths holding their fragment, never used up.
    standing: Vec<(&'static str, Answer)>,
    requests: Vec<(HeaderMap, Value)>,
    /// The path and query of each request.
    uris: Vec<String>,
    /// Answers whose body was dropped before its end: the client went away.
    abandoned: usize,
}

/// The running server.
#[derive(Clone)]
pub struct Server {
    pub addr: SocketAddr,
    script: Arc<Mutex<Script>>,
}

impl Server {
    /// Starts a server that plays `answers` in order.
    pub async fn start(answers: Vec<Answer>) -> Server {
        Server::start_with_standing(answers, Vec::new()).await
    }

    /// Starts a server that plays `answers` in order to every request but
    /// those to a path holding the fragment of one of `standing`, which get
    /// that answer, every time.
    pub async fn start_with_standing(
        answers: Vec<Answer>,
        standing: Vec<(&'static str, Answer)>,
    ) -> Server {
        let script = Arc::new(Mutex::new(Script {
            answers: answers.into(),
            standing,
            requests: Vec::new(),
            uris: Vec::new(),
            abandoned: 0,
        }));
        let app = axum::Router::new()
            .fallback(post(answer))
            .with_state(script.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        // Each piece goes out as written: no coalescing of small writes.
        let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
            let _ = tcp.set_nodelay(true);
        });
        tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Server { addr, script }
    }

    /// The base URL (`http://127.0.0.1:PORT/v1`).
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The path and query of each request received so far.
    pub fn uris(&self) -> Vec<String> {
        self.script.lock().unwrap().uris.clone()
    }

    /// How many answers' bodies were dropped before their end, because the
    /// client went away.
    pub fn abandoned(&self) -> usize {
        self.script.lock().unwrap().abandoned
    }

    /// The requests received so far: headers and JSON body.
    pub fn requests(&self) -> Vec<(HeaderMap, Value)> {
        self.script.lock().unwrap().requests.clone()
    }
}

async fn answer(
    State(script): State<Arc<Mutex<Script>>>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let mut answer = {
        let mut script = script.lock().unwrap();
        let path = uri.path();
        let standing = script.standing.iter().find(|(part, _)| path.contains(part));
        match standing {
            Some((_, answer)) => answer.clone(),
            None => match script.answers.pop_front() {
                Some(answer) => answer,
                None => {
                    drop(script);
                    panic!("a scripted answer for every request: none for {uri}");
                }
            },
        }
    };
    if let Some(echo) = answer.echo {
        answer.pieces = vec![echo(&headers, &uri.to_string())];
    }
    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
    if let Some(made_of) = answer.made_of {
        answer.pieces = vec![made_of(&body)];
    }
    {
        let mut script = script.lock().unwrap();
        script.uris.push(uri.to_string());
        script.requests.push((headers, body));
    }
    let mut response = Response::builder().status(StatusCode::from_u16(answer.status).unwrap());
    for (name, value) in &answer.headers {
        response = response.header(*name, value);
    }
    response.body(async_stream_body(answer, script)).unwrap()
}

/// Counts the body as abandoned when it is dropped before its end.
struct Abandoned {
    script: Arc<Mutex<Script>>,
    ended: bool,
}

impl Abandoned {
    fn end(&mut self) {
        self.ended = true;
    }
}

impl Drop for Abandoned {
    fn drop(&mut self) {
        if !self.ended {
            self.script.lock().unwrap().abandoned += 1;
        }
    }
}

fn async_stream_body(answer: Answer, script: Arc<Mutex<Script>>) -> Body {
    let Answer {
        pieces,
        stall,
        break_after,
        endless,
        pace,
        ..
    } = answer;
    let pieces: Vec<Bytes> = pieces.into_iter().map(Bytes::from).collect();
    let count = if endless { usize::MAX } else { pieces.len() };
    let pieces = pieces.into_iter().cycle().take(count);
    let guard = Abandoned {
        script,
        ended: false,
    };
    let stream = futures::stream::unfold(
        (pieces.into_iter(), true, guard),
        move |(mut pieces, first, mut guard)| async move {
            if first && !stall.is_zero() {
                tokio::time::sleep(stall).await;
            }
            match pieces.next() {
                Some(piece) => {
                    if first || pace.is_zero() {
                        tokio::task::yield_now().await;
                    } else {
                        tokio::time::sleep(pace).await;
                    }
                    Some((Ok::<_, std::io::Error>(piece), (pieces, false, guard)))
                }
                None if break_after => {
                    guard.end();
                    // Lets what was written reach the client before the connection drops.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    Some((
                        Err(std::io::Error::other("connection dropped on purpose")),
                        (pieces, false, guard),
                    ))
                }
                None => {
                    guard.end();
                    None
                }
            }
        },
    );
    Body::from_stream(stream)
}
