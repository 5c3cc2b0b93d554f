//! The pure core of the function layer: which calls run, and the order of the output.
//!
//! [`Dispatch`] is a [`Machine`]: it takes the events of the inner reply and the
//! results of the calls it handed out, and hands out the events of the layer's
//! reply and the calls to run. It never runs a tool and never waits: it hands
//! each call out as an [`Action::Run`] as soon as the call is complete, takes the
//! result back as an [`Input::Resolved`], and releases events in order —
//! everything that follows a run of calls waits behind that run's aggregate.

use std::collections::VecDeque;
use std::mem;

use super::answer;
use super::registry::ToolSet;
use super::tool::Tool;
use crate::message::{
    Event, Joiner, Message, Metadata, ToolAggregateMessage, ToolCall, ToolCallsMessage, ToolResult,
};
use crate::service::{Machine, Output};
use crate::{Error, ToolChoice};

/// Events held behind a pending aggregate before the driver stops reading the inner
/// reply (backpressure, not an error).
const MAX_HELD: usize = 1024;

/// What the core takes.
pub(crate) enum Input {
    /// An event of the inner reply.
    Event(Event),
    /// The inner reply ended.
    Ended,
    /// The result of a job handed out before.
    Resolved(JobId, ToolResult),
}

/// What the core hands out.
pub(crate) enum Action {
    /// An event of the layer's reply.
    Emit(Event),
    /// A call for the driver to run; its result comes back as [`Input::Resolved`].
    Run(Box<Job>),
}

/// A call to run.
pub(crate) struct Job {
    /// Where its result goes.
    pub(crate) id: JobId,
    /// The tool.
    pub(crate) tool: Tool,
    /// The call, its arguments checked against the tool's schema.
    pub(crate) call: ToolCall,
}

/// What the function layer does with a call of a tool that neither its registry
/// nor the request declares ([`FunctionCallLayer::unknown_tools`](super::FunctionCallLayer::unknown_tools)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum UnknownTools {
    /// Answer it with an error result that lists the available tools, so that the
    /// model can correct itself (the default).
    #[default]
    Answer,
    /// Pass it through, as the calls of tools the request declared are passed
    /// through: the caller answers it (a gateway whose clients run tools the
    /// gateway does not know).
    PassThrough,
}

/// The place of a call's result: a run (by its absolute slot number) and a position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct JobId {
    slot: u64,
    index: usize,
}

/// The core state machine.
pub(crate) struct Dispatch {
    /// The registry's tools when the request was made.
    tools: ToolSet,
    /// The request's `tool_choice`: a call it does not allow is not run.
    choice: Option<ToolChoice>,
    /// Tools the request declared that the registry does not have: the caller runs
    /// them.
    foreign: Vec<String>,
    /// What becomes of a call of a tool neither the registry nor the request has.
    unknown: UnknownTools,
    /// The run of call deltas being read.
    open: Option<OpenRun>,
    /// The output, in order.
    slots: VecDeque<Slot>,
    /// The absolute number of `slots[0]`.
    first: u64,
    /// Events of an answered run, released before the next slot.
    ready: VecDeque<Event>,
    /// The inner reply ended normally.
    ended: bool,
}

struct OpenRun {
    joiner: Joiner,
    dispatched: usize,
    slot: u64,
}

enum Slot {
    Event(Event),
    Run(Run),
}

/// The calls of one run with their outcomes, in the model's order.
struct Run {
    open: bool,
    calls: Vec<(ToolCall, Outcome)>,
    pending: usize,
    metadata: Metadata,
}

enum Outcome {
    /// Passed through: executed by the provider, or a tool the caller runs.
    Foreign,
    /// Running, or waiting to run.
    Pending,
    /// Answered.
    Done(ToolResult),
}

impl Dispatch {
    /// A core for one reply. `declared` are the names of the request's tools before
    /// the registry's were injected; `choice` is the request's `tool_choice`.
    pub(crate) fn new<'a>(
        tools: ToolSet,
        declared: impl IntoIterator<Item = &'a str>,
        choice: Option<ToolChoice>,
        unknown: UnknownTools,
    ) -> Self {
        let foreign = declared
            .into_iter()
            .filter(|name| tools.get(name).is_none())
            .map(str::to_owned)
            .collect();
        Dispatch {
            tools,
            choice,
            foreign,
            unknown,
            open: None,
            slots: VecDeque::new(),
            first: 0,
            ready: VecDeque::new(),
            ended: false,
        }
    }

    /// True when so many events wait behind a pending aggregate that the inner reply
    /// should not be read further for now.
    pub(crate) fn backlogged(&self) -> bool {
        self.slots.len() >= MAX_HELD
    }

    /// Takes one event of the inner reply; calls that became complete are handed
    /// out to run.
    fn push_event(&mut self, event: Event, out: &mut Output<Action>) {
        match event {
            Event::ToolCallDelta(delta) => {
                let open = match &mut self.open {
                    Some(open) => open,
                    None => {
                        let slot = self.push_slot(Slot::Run(Run::new(Metadata::default())));
                        self.open.insert(OpenRun {
                            joiner: Joiner::new(),
                            dispatched: 0,
                            slot,
                        })
                    }
                };
                open.joiner.push(Event::ToolCallDelta(delta));
                let completed = &open.joiner.completed_calls()[open.dispatched..];
                if completed.is_empty() {
                    return;
                }
                let (slot, completed) = (open.slot, completed.to_vec());
                open.dispatched += completed.len();
                for call in completed {
                    self.dispatch(slot, call, out);
                }
            }
            Event::Message {
                message: Message::ToolCalls(message),
            } => {
                self.close(out);
                let slot = self.push_slot(Slot::Run(Run::new(message.metadata)));
                for call in message.calls {
                    self.dispatch(slot, call, out);
                }
                self.close_run(slot);
            }
            other => {
                self.close(out);
                self.push_slot(Slot::Event(other));
            }
        }
    }

    /// The inner reply failed: nothing more will run. The call being read when it
    /// broke is marked cut off ([`Joiner::break_off`]) and answered as such, as it
    /// is when a non-streaming reply hands it over whole. Every run not answered in
    /// full becomes a plain `tool_calls` message, so that the calls are not lost.
    fn abandon(&mut self, out: &mut Output<Action>) {
        if let Some(open) = &mut self.open {
            open.joiner.break_off();
        }
        self.close(out);
        for slot in &mut self.slots {
            if let Slot::Run(run) = slot
                && run.pending > 0
            {
                let calls = mem::take(&mut run.calls).into_iter().map(|(c, _)| c);
                *slot = Slot::Event(Event::message(Message::ToolCalls(ToolCallsMessage {
                    calls: calls.collect(),
                    metadata: mem::take(&mut run.metadata),
                })));
            }
        }
    }

    /// Takes the result of a job.
    fn resolve(&mut self, id: JobId, result: ToolResult) {
        let Some(run) = run_at(&mut self.slots, self.first, id.slot) else {
            return;
        };
        if let Some((_, outcome @ Outcome::Pending)) = run.calls.get_mut(id.index) {
            *outcome = Outcome::Done(result);
            run.pending -= 1;
        }
    }

    /// Hands out the events that are ready, in order.
    fn release(&mut self, out: &mut Output<Action>) {
        while let Some(event) = self.pop() {
            out.push(Action::Emit(event));
        }
    }

    /// The next event of the layer's reply, if it is ready.
    fn pop(&mut self) -> Option<Event> {
        loop {
            if let Some(event) = self.ready.pop_front() {
                return Some(event);
            }
            if let Slot::Run(run) = self.slots.front()?
                && (run.open || run.pending > 0)
            {
                return None;
            }
            self.first += 1;
            match self.slots.pop_front()? {
                Slot::Event(event) => return Some(event),
                Slot::Run(run) => self.ready.extend(run.into_events()),
            }
        }
    }

    /// Closes the run being read: its last call is complete.
    fn close(&mut self, out: &mut Output<Action>) {
        let Some(open) = self.open.take() else {
            return;
        };
        for call in calls_of(open.joiner.finish())
            .into_iter()
            .skip(open.dispatched)
        {
            self.dispatch(open.slot, call, out);
        }
        self.close_run(open.slot);
    }

    fn close_run(&mut self, slot: u64) {
        if let Some(run) = run_at(&mut self.slots, self.first, slot) {
            run.open = false;
        }
    }

    /// Decides what becomes of `call`: passed through, answered at once, or run.
    fn dispatch(&mut self, slot: u64, call: ToolCall, out: &mut Output<Action>) {
        let Some(run) = run_at(&mut self.slots, self.first, slot) else {
            return;
        };
        let tools = &self.tools;
        let outcome = if call.provider_executed {
            Outcome::Foreign
        } else if self.choice.as_ref().is_some_and(|c| !c.allows(&call.name)) {
            Outcome::Done(answer::not_allowed(&call))
        } else if let Some(fault) = &call.invalid {
            Outcome::Done(answer::invalid(&call, fault, tools))
        } else if let Some(entry) = tools.entry(&call.name) {
            match entry.validate(&call.arguments) {
                Err(problem) => Outcome::Done(answer::bad_arguments(
                    &call.id,
                    &call.name,
                    &problem,
                    Some(&entry.tool.spec().parameters),
                )),
                Ok(()) => {
                    out.push(Action::Run(Box::new(Job {
                        id: JobId {
                            slot,
                            index: run.calls.len(),
                        },
                        tool: entry.tool.clone(),
                        call: call.clone(),
                    })));
                    run.pending += 1;
                    Outcome::Pending
                }
            }
        } else if self
            .foreign
            .iter()
            .any(|name| name.eq_ignore_ascii_case(&call.name))
        {
            Outcome::Foreign
        } else {
            match self.unknown {
                UnknownTools::PassThrough => Outcome::Foreign,
                UnknownTools::Answer => Outcome::Done(answer::unknown_tool(&call, tools)),
            }
        };
        run.calls.push((call, outcome));
    }

    fn push_slot(&mut self, slot: Slot) -> u64 {
        self.slots.push_back(slot);
        self.first + self.slots.len() as u64 - 1
    }
}

impl Machine for Dispatch {
    type In = Input;
    type Out = Action;

    fn push(&mut self, input: Input, out: &mut Output<Action>) -> Result<(), Error> {
        match input {
            Input::Event(event) => self.push_event(event, out),
            Input::Ended => {
                self.ended = true;
                self.close(out);
            }
            Input::Resolved(id, result) => self.resolve(id, result),
        }
        self.release(out);
        Ok(())
    }

    /// Ended normally, everything was answered already; otherwise the inner reply
    /// failed, and the calls not answered are handed out unanswered.
    fn finish(&mut self, out: &mut Output<Action>) -> Result<(), Error> {
        if !self.ended {
            self.abandon(out);
        }
        self.release(out);
        Ok(())
    }
}

/// The run at absolute slot number `slot`, if it is still queued.
fn run_at(slots: &mut VecDeque<Slot>, first: u64, slot: u64) -> Option<&mut Run> {
    let at = usize::try_from(slot.checked_sub(first)?).ok()?;
    match slots.get_mut(at)? {
        Slot::Run(run) => Some(run),
        Slot::Event(_) => None,
    }
}

impl Run {
    fn new(metadata: Metadata) -> Self {
        Run {
            open: true,
            calls: Vec::new(),
            pending: 0,
            metadata,
        }
    }

    /// The answered run as events: the passed-through calls as a `tool_calls`
    /// message, then the executed ones with their results as a `tool_aggregate`.
    fn into_events(self) -> Vec<Event> {
        let mut foreign = Vec::new();
        let (mut calls, mut results) = (Vec::new(), Vec::new());
        for (call, outcome) in self.calls {
            match outcome {
                Outcome::Done(result) => {
                    calls.push(call);
                    results.push(result);
                }
                Outcome::Foreign | Outcome::Pending => foreign.push(call),
            }
        }
        let mut events = Vec::with_capacity(2);
        if !foreign.is_empty() {
            events.push(Event::message(Message::ToolCalls(ToolCallsMessage {
                calls: foreign,
                metadata: self.metadata.clone(),
            })));
        }
        if !calls.is_empty() {
            events.push(Event::message(Message::ToolAggregate(
                ToolAggregateMessage {
                    calls,
                    results,
                    metadata: self.metadata,
                },
            )));
        }
        events
    }
}

/// The calls of a joiner fed only with call deltas.
fn calls_of(messages: Vec<Message>) -> Vec<ToolCall> {
    messages
        .into_iter()
        .flat_map(|message| match message {
            Message::ToolCalls(message) => message.calls,
            _ => Vec::new(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::function::ToolRegistry;

    fn core() -> Dispatch {
        let echo = Tool::dynamic("echo", "", json!({"type": "object"}), |_| async { "" });
        Dispatch::new(
            ToolRegistry::new([echo]).unwrap().tools(),
            [],
            None,
            UnknownTools::Answer,
        )
    }

    /// Pushes one input; returns the jobs and the events handed out.
    fn step(core: &mut Dispatch, input: Input) -> (Vec<Job>, Vec<Event>) {
        let mut out = Output::new();
        core.push(input, &mut out).unwrap();
        split(out)
    }

    fn split(mut out: Output<Action>) -> (Vec<Job>, Vec<Event>) {
        let (mut jobs, mut events) = (Vec::new(), Vec::new());
        for action in out.drain() {
            match action {
                Action::Run(job) => jobs.push(*job),
                Action::Emit(event) => events.push(event),
            }
        }
        (jobs, events)
    }

    #[test]
    fn a_call_becomes_a_job_when_the_next_one_starts_and_results_come_out_in_order() {
        let mut core = core();
        let (_, events) = step(&mut core, Input::Event(Event::text("Hi")));
        assert_eq!(events, vec![Event::text("Hi")]);
        step(&mut core, Input::Event(Event::call_start(0, "a", "echo")));
        let (jobs, _) = step(&mut core, Input::Event(Event::call_arguments(0, "{}")));
        assert!(jobs.is_empty(), "the first call may still grow");
        let (a, _) = step(&mut core, Input::Event(Event::call_start(1, "b", "echo")));
        assert_eq!(a.len(), 1);
        let (b, events) = step(&mut core, Input::Event(Event::text("after")));
        assert_eq!(b.len(), 1, "the run ended: the last call is complete");
        assert_eq!(events, vec![], "text after the run waits for it");

        let resolved = Input::Resolved(b[0].id, ToolResult::text("b", "echo", "B"));
        assert_eq!(step(&mut core, resolved).1, vec![]);
        let resolved = Input::Resolved(a[0].id, ToolResult::text("a", "echo", "A"));
        let (_, events) = step(&mut core, resolved);
        assert_eq!(events.len(), 2);
        let Event::Message { message } = &events[0] else {
            panic!("{events:?}")
        };
        let texts: Vec<String> = message
            .results()
            .iter()
            .map(ToolResult::text_content)
            .collect();
        assert_eq!(texts, ["A", "B"]);
        assert_eq!(events[1], Event::text("after"));
    }

    #[test]
    fn events_held_behind_a_pending_run_are_bounded() {
        let mut core = core();
        let call = Message::tool_calls(vec![ToolCall::new("a", "echo", json!({}))]);
        let (jobs, _) = step(&mut core, Input::Event(Event::message(call)));
        let mut pushed = 0;
        while !core.backlogged() {
            assert_eq!(step(&mut core, Input::Event(Event::text("x"))).1, vec![]);
            pushed += 1;
        }
        assert_eq!(pushed, MAX_HELD - 1);
        let resolved = Input::Resolved(jobs[0].id, ToolResult::text("a", "echo", ""));
        assert_eq!(step(&mut core, resolved).1.len(), MAX_HELD);
        assert!(!core.backlogged());
    }

    #[test]
    fn a_reply_that_fails_hands_its_unanswered_calls_out_as_calls() {
        let mut core = core();
        step(&mut core, Input::Event(Event::call_start(0, "a", "echo")));
        let (jobs, _) = step(&mut core, Input::Event(Event::call_start(1, "b", "echo")));
        assert_eq!(jobs.len(), 1, "the first call runs");
        let mut out = Output::new();
        core.finish(&mut out).unwrap();
        let (jobs, events) = split(out);
        assert!(jobs.is_empty(), "nothing more runs");
        let Event::Message { message } = &events[0] else {
            panic!("{events:?}")
        };
        let ids: Vec<&str> = message.calls().iter().map(|c| c.id.as_str()).collect();
        assert_eq!((ids, message.results().len()), (vec!["a", "b"], 0));
    }
}
