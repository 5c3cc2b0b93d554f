//! The `--provider` option shared by `lift`, `lower` and `chat`.

use clap::ValueEnum;

/// A provider's wire format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Provider {
    /// OpenAI Chat Completions and compatible servers (vLLM, llama.cpp, Ollama, GLM, Groq).
    Openai,
}
