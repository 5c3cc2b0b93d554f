//! The `--provider` option shared by `lift`, `lower` and `chat`.

use clap::ValueEnum;

/// A provider's wire format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Provider {
    /// OpenAI Chat Completions and compatible servers (vLLM, llama.cpp, Ollama, GLM, Groq).
    Openai,
}

/// Prints a value as one JSON line on stdout.
pub fn print_json_line(value: &impl serde::Serialize) {
    println!(
        "{}",
        serde_json::to_string(value).expect("canonical values serialise")
    );
}
