//! The `--provider` option shared by `lift`, `lower` and `chat`.

use clap::ValueEnum;

/// A provider's wire format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Provider {
    /// OpenAI Chat Completions and compatible servers (vLLM, llama.cpp, Ollama, GLM, Groq).
    Openai,
}

/// Prints a value as one JSON line on stdout. When stdout is closed (`| head`)
/// the program ends quietly, as command-line filters do.
pub fn print_json_line(value: &impl serde::Serialize) {
    use std::io::Write;
    let line = serde_json::to_string(value).expect("canonical values serialise");
    if let Err(error) = writeln!(std::io::stdout().lock(), "{line}") {
        if error.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("error: writing stdout: {error}");
        std::process::exit(1);
    }
}
