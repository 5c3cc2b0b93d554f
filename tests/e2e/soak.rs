//! Soak (issue 11, faults the crate must survive): many tool loops at once, each
//! with random faults, through the real stack — `ToolLoop → FunctionCall →
//! Retry → model` — for `LMSTACK_SOAK_SECONDS` (default 20).
//!
//! Half the conversations go to llmock through the OpenAI provider, half to a
//! [`ScriptedModel`] with a random [`Chunking`]; a quarter run in
//! non-streaming mode. Each has its own model name, so llmock's scripted
//! behaviours of one never reach another. Round 1 calls 1 to 3 tools, round 2
//! answers in text. Before a round's first event come retryable faults (HTTP
//! 503 or 429 with a short `Retry-After`, a stream dropped or truncated before
//! its first chunk; for the scripted model a failed call or a stream broken at
//! once); sometimes a stream breaks after its first event (dropped, truncated,
//! malformed), which must end the reply with that error, not replay it.
//!
//! Per conversation it checks: the number of model calls (each early fault
//! retried once, nothing replayed); every tool call ran exactly once, or at
//! most once and only if complete when its round broke; every call has one
//! result with its id; the messages are exactly the scripted ones, in both
//! modes (so a joined stream equals the non-streaming reply); a broken round
//! ends the reply with its error, after exactly what arrived; and the tool
//! futures are gone once the reply ends. At the end: no tool future and no
//! tokio task left, nothing scripted left unconsumed, and the resident memory
//! within 64 MiB of what it was after a warm-up (Linux only).
//!
//! `LMSTACK_SOAK_SEED` replays the same plans (not the same timing); the seed
//! of a run is printed, shown when it fails.

#![cfg(all(feature = "openai", feature = "retry", feature = "function"))]

#[path = "../common/mod.rs"]
mod common;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::convert::Infallible;
use std::ops::RangeInclusive;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::llmock::{llmock, pending, script, unique};
use fastrand::Rng;
use lmstack::function::{FunctionCallLayer, Tool, ToolLoopLayer, ToolRegistry};
use lmstack::provider::TransportErrorKind;
use lmstack::provider::openai_chat::{OpenAi, OpenAiConfig};
use lmstack::provider::transport::{HttpConfig, HttpTransport};
use lmstack::retry::RetryLayer;
use lmstack::testing::{Chunking, ScriptedModel, Turn, stream_messages};
use lmstack::{ChatRequest, Error, Event, Joiner, Message, Reply, Role, ToolCall, ToolResult};
use serde_json::{Value, json};
use tokio::task::JoinSet;
use tower::util::BoxCloneService;
use tower::{Service, ServiceBuilder, ServiceExt};

/// Conversations in flight at once: enough to interleave, modest for two cores.
const CONCURRENCY: usize = 24;
/// A hang guard: the longest a conversation, or the winding down of its tasks,
/// may take.
const HANG: Duration = Duration::from_secs(30);
/// The latency of a tool that must be cancelled: an hour.
const STUCK_MS: u64 = 3_600_000;
/// The resident memory the main phase may add to the warm-up's.
const MAX_GROWTH_KIB: u64 = 64 * 1024;

type Chat = BoxCloneService<ChatRequest, Reply, Error>;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a running llmock server: .ci/test starts one and sets LMSTACK_LLMOCK_URL"]
async fn faults_under_load_lose_nothing_and_leak_nothing() {
    let seconds: f64 = env_or("LMSTACK_SOAK_SECONDS", 20.0);
    let seed: u64 = env_or("LMSTACK_SOAK_SEED", fastrand::u64(..));
    println!("soak: {seconds} s, LMSTACK_SOAK_SEED={seed}");
    let ledger = Arc::new(Ledger::default());
    let mut soak = Soak {
        prefix: format!("{}-{seed}", unique("soak")),
        seed,
        llmock: stack(&ledger, retry(), provider()),
        ledger: ledger.clone(),
        started: 0,
        kinds: BTreeMap::new(),
    };

    let start = Instant::now();
    let total = Duration::from_secs_f64(seconds);
    soak.run_until(start + total / 4).await;
    let baseline = resident_kib();
    soak.run_until(start + total).await;
    let prefix = soak.prefix.clone();
    println!("soak: {:?} in {:.1?}", soak.kinds, start.elapsed());
    drop(soak);

    settled("tool futures alive", || ledger.live.load(SeqCst)).await;
    let metrics = tokio::runtime::Handle::current().metrics();
    settled("tokio tasks alive", || metrics.num_alive_tasks()).await;
    let left: Vec<String> = ledger
        .conversations
        .lock()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert!(
        left.is_empty(),
        "tools or model calls after their conversation ended: {left:?}"
    );
    let unconsumed = pending(&prefix).await;
    assert!(
        unconsumed.is_empty(),
        "scripted, never asked for: {unconsumed:?}"
    );
    match (baseline, resident_kib()) {
        (Some(before), Some(after)) => {
            println!("soak: resident {before} KiB after the warm-up, {after} KiB at the end");
            assert!(
                after < before + MAX_GROWTH_KIB,
                "resident memory grew from {before} KiB to {after} KiB"
            );
        }
        _ => println!("soak: memory not checked (no /proc/self/status here)"),
    }
}

/// The variable `name` parsed, or `default` when it is not set.
fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Ok(value) => value
            .parse()
            .unwrap_or_else(|_| panic!("{name}={value:?} is not a number")),
        Err(_) => default,
    }
}

/// The process's resident memory in KiB, on Linux.
fn resident_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))?;
    line.trim().trim_end_matches("kB").trim().parse().ok()
}

/// Waits until `count()` is 0; fails after [`HANG`].
async fn settled(what: &str, count: impl Fn() -> usize) {
    let quiet = async {
        while count() != 0 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    };
    if tokio::time::timeout(HANG, quiet).await.is_err() {
        panic!("{what}: still {} after {HANG:?}", count());
    }
}

/// The OpenAI provider on llmock. It lets go of idle connections before
/// llmock's server closes them (after 5 s): a request sent as the server hangs
/// up would fail, and be retried, once more than planned.
fn provider() -> OpenAi {
    let client = reqwest::Client::builder()
        .read_timeout(HANG)
        .pool_idle_timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let max_error_body = HttpConfig::default().max_error_body;
    let transport = HttpTransport::from_client("openai", client, max_error_body);
    OpenAi::with_transport(OpenAiConfig::new(format!("{}/v1", llmock())), transport)
}

/// The retry layer of both stacks: the default policy, a short backoff.
fn retry() -> RetryLayer {
    RetryLayer::new().initial_backoff(Duration::from_millis(10))
}

/// The stack under test over `model`, counting the model calls in the ledger.
fn stack<S>(ledger: &Arc<Ledger>, retry: RetryLayer, model: S) -> Chat
where
    S: Service<ChatRequest, Response = Reply, Error = Error> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    let counter = ledger.clone();
    let service = ServiceBuilder::new()
        .layer(ToolLoopLayer::new())
        .layer(FunctionCallLayer::new(
            ToolRegistry::new([lookup(ledger)]).unwrap(),
        ))
        .layer(retry)
        .map_request(move |request: ChatRequest| {
            let model = request.options.model.as_deref().unwrap_or_default();
            counter.tally(model).attempts.fetch_add(1, SeqCst);
            request
        })
        .service(model);
    BoxCloneService::new(service)
}

/// The tool: waits the call's `latency_ms`, and records in the ledger that it
/// started and finished, and that its future is alive.
fn lookup(ledger: &Arc<Ledger>) -> Tool {
    let ledger = ledger.clone();
    let parameters = json!({
        "type": "object",
        "properties": {
            "conversation": {"type": "string"},
            "call": {"type": "integer"},
            "latency_ms": {"type": "integer"},
            "note": {"type": "string"},
        },
        "required": ["conversation", "call", "latency_ms"],
    });
    Tool::dynamic("lookup", "Looks a thing up", parameters, move |arguments| {
        let ledger = ledger.clone();
        async move {
            let tally = ledger.tally(arguments["conversation"].as_str().unwrap());
            let _alive = Alive::new([ledger.live.clone(), tally.live.clone()]);
            let call = arguments["call"].as_u64().unwrap();
            tally.record(call, Run::Started);
            let latency = arguments["latency_ms"].as_u64().unwrap();
            tokio::time::sleep(Duration::from_millis(latency)).await;
            tally.record(call, Run::Finished);
            Ok::<_, Infallible>(output(&arguments))
        }
    })
}

/// The text of `messages` when they are one assistant text message (whatever
/// its metadata: llmock's completion id).
fn text_of(messages: &[Message]) -> Option<&str> {
    match messages {
        [message @ Message::Text(_)] if message.role() == Role::Assistant => message.as_text(),
        _ => None,
    }
}

/// What the tool answers to a call.
fn output(arguments: &Value) -> String {
    format!(
        "{}#{} looked up",
        arguments["conversation"], arguments["call"]
    )
}

/// What the tool and the model calls did, per conversation (by model name).
#[derive(Default)]
struct Ledger {
    conversations: Mutex<HashMap<String, Arc<Tally>>>,
    /// Tool futures alive, in every conversation.
    live: Arc<AtomicUsize>,
}

impl Ledger {
    fn tally(&self, conversation: &str) -> Arc<Tally> {
        let mut conversations = self.conversations.lock().unwrap();
        conversations
            .entry(conversation.into())
            .or_default()
            .clone()
    }

    fn close(&self, conversation: &str) {
        self.conversations.lock().unwrap().remove(conversation);
    }
}

/// One conversation's record.
#[derive(Default)]
struct Tally {
    /// Per call (its `call` argument): how often it started and finished.
    runs: Mutex<BTreeMap<u64, [usize; 2]>>,
    /// Model calls.
    attempts: AtomicUsize,
    /// Tool futures alive.
    live: Arc<AtomicUsize>,
}

#[derive(Clone, Copy)]
enum Run {
    Started,
    Finished,
}

impl Tally {
    fn record(&self, call: u64, run: Run) {
        self.runs.lock().unwrap().entry(call).or_default()[run as usize] += 1;
    }

    fn runs(&self, call: usize) -> [usize; 2] {
        let runs = self.runs.lock().unwrap();
        runs.get(&(call as u64)).copied().unwrap_or_default()
    }
}

/// Counts a future as alive, in each counter, until it is dropped (finished
/// or aborted).
struct Alive([Arc<AtomicUsize>; 2]);

impl Alive {
    fn new(counters: [Arc<AtomicUsize>; 2]) -> Self {
        for counter in &counters {
            counter.fetch_add(1, SeqCst);
        }
        Alive(counters)
    }
}

impl Drop for Alive {
    fn drop(&mut self) {
        for counter in &self.0 {
            counter.fetch_sub(1, SeqCst);
        }
    }
}

/// The soak's state: the shared llmock stack, and how many conversations of
/// each kind ran.
struct Soak {
    prefix: String,
    seed: u64,
    llmock: Chat,
    ledger: Arc<Ledger>,
    started: u64,
    kinds: BTreeMap<String, usize>,
}

impl Soak {
    /// Runs conversations, [`CONCURRENCY`] at a time, until `deadline`, then
    /// waits for those running; a failed check fails the soak.
    async fn run_until(&mut self, deadline: Instant) {
        let mut running = JoinSet::new();
        loop {
            while running.len() < CONCURRENCY && Instant::now() < deadline {
                let index = self.started;
                self.started += 1;
                let mut rng = Rng::with_seed(self.seed.wrapping_add(index));
                let plan =
                    Plan::random(&mut rng, format!("{}-{index}", self.prefix), index % 2 == 1);
                *self.kinds.entry(plan.kind()).or_default() += 1;
                running.spawn(converse(self.ledger.clone(), self.llmock.clone(), plan));
            }
            match running.join_next().await {
                None => return,
                Some(Ok(())) => {}
                Some(Err(error)) => std::panic::resume_unwind(error.into_panic()),
            }
        }
    }
}

/// Runs the conversation of `plan`, then checks it.
async fn converse(ledger: Arc<Ledger>, llmock_stack: Chat, plan: Plan) {
    let service = match plan.backend {
        Backend::Llmock => {
            script(&plan.name, plan.behaviors()).await;
            llmock_stack
        }
        Backend::Scripted(chunking) => {
            let model = plan
                .turns()
                .into_iter()
                .fold(ScriptedModel::new().chunking(chunking), ScriptedModel::turn);
            let retry = retry().classifier(|error: &Error| matches!(error, Error::Stage { .. }));
            stack(&ledger, retry, model)
        }
    };
    let tally = ledger.tally(&plan.name);
    let request = ChatRequest::new(vec![Message::user("Look these up, then answer.")])
        .model(&plan.name)
        .streaming(plan.stream);
    let reply = async {
        match service.oneshot(request).await {
            Ok(reply) => reply.collect_partial().await,
            Err(error) => (Vec::new(), Some(error)),
        }
    };
    let (messages, error) = tokio::time::timeout(HANG, reply)
        .await
        .unwrap_or_else(|_| panic!("no answer after {HANG:?}: {plan:?}"));
    let futures = format!("tool futures of {}", plan.name);
    settled(&futures, || tally.live.load(SeqCst)).await;
    ledger.close(&plan.name);
    plan.check(messages, error, &tally);
}

/// Where a conversation's model runs.
#[derive(Clone, Copy, Debug)]
enum Backend {
    /// llmock, through the OpenAI provider.
    Llmock,
    /// A scripted model cutting its deltas this way.
    Scripted(Chunking),
}

/// A fault before a round's first event: retried.
#[derive(Clone, Copy, Debug)]
enum Early {
    /// An HTTP error with this status and `Retry-After` (in ms); for the
    /// scripted model, a failed call.
    Status(u16, u64),
    /// A stream that ends this way before its first event.
    Stream(Break),
}

/// How a stream breaks.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Break {
    Disconnect,
    Truncate,
    Malformed,
}

/// The faults of one round.
#[derive(Clone, Debug, Default)]
struct Round {
    early: Vec<Early>,
    /// The stream breaks this way after `.1` pieces: llmock's chunks (counting
    /// the first, which only says `role`), the scripted model's events.
    broken: Option<(Break, usize)>,
}

/// One conversation: what the model says, and the faults on the way.
#[derive(Debug)]
struct Plan {
    name: String,
    backend: Backend,
    stream: bool,
    /// The arguments of round 1's calls.
    calls: Vec<Value>,
    /// Round 2's answer.
    text: String,
    /// Round 2 is there unless round 1 breaks.
    rounds: Vec<Round>,
    /// llmock holds its first answer this long (seconds).
    delay: Option<f64>,
    /// llmock holds its first streamed chunk this long (seconds).
    slow_first_token: Option<f64>,
}

/// The words of the scripted texts, some wider than a byte.
const WORDS: &str = "alpha größe naïve 日本語 crab🦀 tool loop fault retry zeta";

fn words(rng: &mut Rng, count: RangeInclusive<usize>) -> String {
    let vocabulary: Vec<&str> = WORDS.split(' ').collect();
    let count = rng.usize(count);
    let words: Vec<&str> = (0..count)
        .map(|_| *rng.choice(&vocabulary).unwrap())
        .collect();
    words.join(" ")
}

impl Plan {
    fn random(rng: &mut Rng, name: String, scripted: bool) -> Plan {
        let stream = rng.usize(..4) != 0;
        let backend = match scripted {
            false => Backend::Llmock,
            true => Backend::Scripted(match rng.usize(..4) {
                0 => Chunking::Whole,
                1 => Chunking::Chars,
                2 => Chunking::Bytes(rng.usize(1..=8)),
                _ => Chunking::Random {
                    seed: rng.u64(..),
                    max: rng.usize(1..=16),
                },
            }),
        };
        let breaks = [(); 2].map(|()| {
            let kinds = [Break::Disconnect, Break::Truncate, Break::Malformed];
            (stream && rng.usize(..5) == 0).then(|| kinds[rng.usize(..3)])
        });
        // When round 1 breaks, its tools never finish on their own: only
        // cancelling them ends them.
        let latency = |rng: &mut Rng| match breaks[0] {
            Some(_) => STUCK_MS,
            None => rng.u64(0..=20),
        };
        let calls = (0..rng.usize(1..=3))
            .map(|call| {
                json!({
                    "conversation": name, "call": call,
                    "latency_ms": latency(rng), "note": words(rng, 0..=6),
                })
            })
            .collect();
        let delay = |rng: &mut Rng| (rng.usize(..4) == 0).then(|| rng.f64() * 0.05);
        let mut plan = Plan {
            name,
            backend,
            stream,
            calls,
            text: words(rng, 3..=12),
            rounds: Vec::new(),
            delay: delay(rng),
            slow_first_token: delay(rng).filter(|_| stream),
        };
        for (round, broken) in breaks.into_iter().enumerate() {
            let early = (0..rng.usize(0..=2))
                .filter_map(|_| plan.early(rng, round))
                .collect();
            let broken = broken.map(|kind| (kind, rng.usize(plan.break_points(round))));
            plan.rounds.push(Round { early, broken });
            if broken.is_some() {
                break;
            }
        }
        plan
    }

    /// A random fault before round `round`'s first event, if one applies.
    /// llmock answers every scripted HTTP error first, so they all fall in
    /// round 1; a stream fault needs a stream.
    fn early(&self, rng: &mut Rng, round: usize) -> Option<Early> {
        let llmock = matches!(self.backend, Backend::Llmock);
        let status = (round == 0 || !llmock).then(|| {
            let status = if rng.bool() { 503 } else { 429 };
            Early::Status(status, rng.u64(1..=50))
        });
        let dropped = (self.stream || !llmock).then(|| {
            Early::Stream(if rng.bool() {
                Break::Disconnect
            } else {
                Break::Truncate
            })
        });
        match (status, dropped) {
            (Some(status), Some(dropped)) => Some(if rng.bool() { status } else { dropped }),
            (status, dropped) => status.or(dropped),
        }
    }

    /// Where round `round` may break with an event delivered and before its end.
    fn break_points(&self, round: usize) -> RangeInclusive<usize> {
        match (self.backend, round) {
            // Chunk 0 says `role`, chunk 1 starts the first call.
            (Backend::Llmock, 0) => 2..=1 + self.calls.len(),
            // Chunk 0 says `role`, then a chunk per word.
            (Backend::Llmock, _) => 2..=self.pieces().len(),
            (Backend::Scripted(_), round) => 1..=self.events(round).len(),
        }
    }

    /// The words of the answer as llmock streams them, each with its space.
    fn pieces(&self) -> Vec<String> {
        let mut pieces: Vec<String> = self.text.split(' ').map(|w| format!("{w} ")).collect();
        pieces.last_mut().unwrap().pop();
        pieces
    }

    /// The scripted model's reply in round `round`.
    fn messages(&self, round: usize) -> Vec<Message> {
        match round {
            0 => vec![Message::tool_calls(
                (0..)
                    .zip(&self.calls)
                    .map(|(i, arguments)| {
                        ToolCall::new(format!("call_{i}"), "lookup", arguments.clone())
                    })
                    .collect(),
            )],
            _ => vec![Message::assistant(&self.text)],
        }
    }

    /// The scripted model's stream of round `round`.
    fn events(&self, round: usize) -> Vec<Event> {
        let Backend::Scripted(chunking) = self.backend else {
            unreachable!("llmock makes its own stream")
        };
        stream_messages(self.messages(round), chunking)
    }

    /// The scripted model's turns.
    fn turns(&self) -> Vec<Turn> {
        let mut turns = Vec::new();
        for (round, faults) in self.rounds.iter().enumerate() {
            turns.extend(faults.early.iter().map(|early| match early {
                Early::Status(status, _) => Turn::Fail(format!("HTTP {status}")),
                Early::Stream(kind) => Turn::Break(Vec::new(), format!("{kind:?}")),
            }));
            turns.push(match faults.broken {
                Some((kind, at)) => {
                    Turn::Break(self.events(round)[..at].to_vec(), format!("{kind:?}"))
                }
                None => Turn::Messages(self.messages(round)),
            });
        }
        turns
    }

    /// llmock's behaviours. An HTTP error answers a request at once, before
    /// everything else; every other request takes the next stream fault and the
    /// next reply, so each gets one (a stream fault that never fires when it has
    /// none), and nothing is left over.
    fn behaviors(&self) -> Value {
        let mut fails = Vec::new();
        // The other requests, in order: their stream fault, their reply.
        let mut attempts = Vec::new();
        for (round, faults) in self.rounds.iter().enumerate() {
            for early in &faults.early {
                match *early {
                    Early::Status(status, ms) => fails.push(json!({
                        "type": "fail", "status": status, "retry_after": ms as f64 / 1000.0,
                    })),
                    Early::Stream(kind) => attempts.push((Some((kind, 0)), round)),
                }
            }
            attempts.push((faults.broken, round));
        }
        let faulty = attempts.iter().rposition(|(fault, _)| fault.is_some());
        let mut behaviors = fails;
        for (i, (fault, round)) in attempts.into_iter().enumerate() {
            if faulty.is_some_and(|last| i <= last) {
                let (kind, after_chunks) = fault.unwrap_or((Break::Disconnect, usize::MAX));
                let kind = format!("{kind:?}").to_lowercase();
                behaviors.push(
                    json!({"type": "stream_fault", "kind": kind, "after_chunks": after_chunks}),
                );
            }
            behaviors.push(self.reply(round));
        }
        let delays = [
            ("delay", self.delay),
            ("slow_first_token", self.slow_first_token),
        ];
        for (kind, seconds) in delays {
            behaviors.extend(seconds.map(|seconds| json!({"type": kind, "seconds": seconds})));
        }
        Value::Array(behaviors)
    }

    /// llmock's reply in round `round`.
    fn reply(&self, round: usize) -> Value {
        if round > 0 {
            return json!({"type": "reply", "text": self.text});
        }
        let calls: Vec<Value> = self
            .calls
            .iter()
            .map(|arguments| json!({"name": "lookup", "arguments": arguments}))
            .collect();
        json!({"type": "reply", "tool_calls": calls})
    }

    /// A label for the summary: backend, mode, and where it broke.
    fn kind(&self) -> String {
        let backend = match self.backend {
            Backend::Llmock => "llmock",
            Backend::Scripted(_) => "scripted",
        };
        let mode = if self.stream { "stream" } else { "whole" };
        let end = match self.broken() {
            None => "complete".to_owned(),
            Some((round, _, _)) => format!("broken in round {}", round + 1),
        };
        format!("{backend} {mode} {end}")
    }

    /// The round that breaks, how, and after how many pieces.
    fn broken(&self) -> Option<(usize, Break, usize)> {
        let (kind, at) = self.rounds.last()?.broken?;
        Some((self.rounds.len() - 1, kind, at))
    }

    /// The calls of round 1 that may have run when it broke after `at`
    /// pieces: a call runs once the next one starts.
    fn may_run(&self, at: usize) -> usize {
        match self.backend {
            // Call j starts at chunk j + 1 at the earliest.
            Backend::Llmock => at.saturating_sub(2),
            Backend::Scripted(_) => {
                let starts = |event: &&Event| match event {
                    Event::ToolCallDelta(delta) => delta.id().is_some(),
                    _ => false,
                };
                let started = self.events(0)[..at].iter().filter(starts).count();
                started.saturating_sub(1)
            }
        }
    }

    /// The answer's text that arrived before round 2 broke after `at` pieces.
    fn arrived(&self, at: usize) -> String {
        match self.backend {
            Backend::Llmock => self.pieces()[..at - 1].concat(),
            Backend::Scripted(_) => self.events(1)[..at]
                .iter()
                .filter_map(|event| match event {
                    Event::TextDelta(delta) => Some(delta.text.as_str()),
                    _ => None,
                })
                .collect(),
        }
    }

    /// Checks a conversation's reply and record against the plan.
    fn check(&self, messages: Vec<Message>, error: Option<Error>, tally: &Tally) {
        let attempts: usize = self.rounds.iter().map(|round| round.early.len() + 1).sum();
        assert_eq!(
            tally.attempts.load(SeqCst),
            attempts,
            "model calls: each early fault retried once, nothing replayed: {self:?}"
        );
        let messages: Vec<Message> = messages
            .into_iter()
            .filter(|message| !matches!(message, Message::Usage(_)))
            .collect();
        let Some((round, kind, at)) = self.broken() else {
            assert!(error.is_none(), "{error:?}: {self:?}");
            let answer = self.check_round_one(&messages, tally);
            assert_eq!(text_of(answer), Some(&*self.text), "{answer:?}: {self:?}");
            return;
        };
        let error = error.unwrap_or_else(|| panic!("a broken stream ended well: {self:?}"));
        match self.backend {
            Backend::Llmock => {
                let expected = match kind {
                    Break::Disconnect => TransportErrorKind::Interrupted,
                    Break::Truncate => TransportErrorKind::Truncated,
                    Break::Malformed => TransportErrorKind::Malformed,
                };
                let found = error.transport_error().map(|error| error.kind);
                assert_eq!(found, Some(expected), "{error:?}: {self:?}");
            }
            Backend::Scripted(_) => {
                assert_eq!(
                    error.to_string(),
                    format!("scripted model: {kind:?}"),
                    "{self:?}"
                );
            }
        }
        if round == 0 {
            self.check_abandoned(&messages, at);
            for call in 0..self.calls.len() {
                let [started, finished] = tally.runs(call);
                let may_run = call < self.may_run(at);
                assert!(
                    started <= usize::from(may_run) && finished == 0,
                    "call {call} started {started} times, finished {finished}: {self:?}"
                );
            }
        } else {
            let answer = self.check_round_one(&messages, tally);
            let arrived = self.arrived(at);
            assert_eq!(text_of(answer), Some(&*arrived), "{answer:?}: {self:?}");
        }
    }

    /// A round 1 broken after `at` pieces hands back the calls that arrived:
    /// those complete as scripted, the last one — still being read when the
    /// reply broke — marked as cut off. A run with a call still running (never,
    /// here: the tools take an hour) comes back without results, as a
    /// `tool_calls` message; a run of only the cut-off call is answered at once,
    /// with an error result (an aggregate).
    fn check_abandoned(&self, messages: &[Message], at: usize) {
        let arrived = match messages {
            [Message::ToolCalls(arrived)] => &arrived.calls,
            [Message::ToolAggregate(aggregate)] => {
                let cut = |call: &ToolCall| call.invalid.is_some();
                assert!(
                    aggregate.calls.iter().all(cut)
                        && aggregate.results.len() == aggregate.calls.len()
                        && aggregate.results.iter().all(|result| result.is_error),
                    "only cut-off calls are answered at once: {aggregate:?}: {self:?}"
                );
                &aggregate.calls
            }
            _ => panic!("round 1 broke and gave {messages:?}: {self:?}"),
        };
        let count = arrived.len();
        assert!(
            (1..=self.calls.len()).contains(&count),
            "{arrived:?}: {self:?}"
        );
        for (i, call) in arrived.iter().enumerate() {
            let whole = call.arguments == self.calls[i] && call.invalid.is_none();
            // Marked invalid: cut off when the reply broke while it was read.
            let cut = i + 1 == count && call.invalid.is_some();
            assert!(
                call.name == "lookup" && (whole != cut),
                "{arrived:?}: {self:?}"
            );
        }
        if let Backend::Scripted(_) = self.backend {
            // Exactly what arrived, the call being read marked cut off.
            let mut joiner = Joiner::new();
            for event in self.events(0)[..at].iter().cloned() {
                joiner.push(event);
            }
            joiner.break_off();
            let sent = joiner.finish();
            assert_eq!(
                sent.iter().flat_map(Message::calls).collect::<Vec<_>>(),
                arrived.iter().collect::<Vec<_>>(),
                "exactly what arrived: {self:?}"
            );
        }
    }

    /// Round 1's reply is its calls with one result each, every call run once;
    /// returns the messages after it.
    fn check_round_one<'m>(&self, messages: &'m [Message], tally: &Tally) -> &'m [Message] {
        let [round_one @ Message::ToolAggregate(aggregate), answer @ ..] = messages else {
            panic!("round 1 gave {messages:?}: {self:?}");
        };
        // The scripted calls under the ids they came with, each with its result.
        let calls: Vec<ToolCall> = (aggregate.calls.iter().zip(&self.calls))
            .map(|(call, arguments)| ToolCall::new(&call.id, "lookup", arguments.clone()))
            .collect();
        let results = (calls.iter())
            .map(|call| ToolResult::text(&call.id, "lookup", output(&call.arguments)))
            .collect();
        let ids: HashSet<&str> = calls.iter().map(|call| call.id.as_str()).collect();
        assert_eq!(
            ids.len(),
            self.calls.len(),
            "unique ids: {aggregate:?}: {self:?}"
        );
        let expected = Message::tool_aggregate(calls, results);
        assert_eq!(round_one, &expected, "{self:?}");
        for call in 0..self.calls.len() {
            assert_eq!(tally.runs(call), [1, 1], "call {call} ran once: {self:?}");
        }
        answer
    }
}
