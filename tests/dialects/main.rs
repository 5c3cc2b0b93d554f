//! The model families' own dialects, one module per family. Each runs the unit
//! classes of the parser's tests on the checks in `harness`: markers split at
//! every byte, two calls in one piece, an unknown tool, malformed and truncated
//! arguments, unicode in and around, text before, between and after, near-miss
//! markers kept exactly, and the same messages streamed as whole.

mod harness;

mod deepseek;
mod glm;
mod granite;
mod harmony;
mod kimi;
mod llama3_json;
mod minimax;
mod mistral;
mod pythonic;
