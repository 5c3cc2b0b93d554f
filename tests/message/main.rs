//! `lmstack::message`: the joiner folding any delta split into the same
//! messages, and the JSON form of messages, blocks and events as a contract.

#[path = "../common/regressions.rs"]
mod regressions;

mod joiner;
mod json_contract;
