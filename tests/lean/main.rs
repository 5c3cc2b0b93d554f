//! What a service depending on `lmstack` with its default features compiles:
//! none of the command line's crates (clap, toml, tracing-subscriber, image,
//! mimalloc) and none of the gateway's or MCP's (axum, rmcp). Checked on the
//! real dependency tree: a crate of its own, outside this workspace, that
//! depends on this one by path, resolved offline against this workspace's
//! `Cargo.lock` by `cargo tree`.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

/// Crates that only the command line, the gateway (feature `server`) or MCP
/// (feature `mcp`) need.
const NOT_BY_DEFAULT: [&str; 7] = [
    "clap",
    "toml",
    "tracing-subscriber",
    "image",
    "mimalloc",
    "axum",
    "rmcp",
];

/// The names of the crates a new crate depending on `dependency` (a line of
/// `[dependencies]`) compiles: normal and build dependencies, not dev ones.
fn compiled_crates(dependency: &str) -> BTreeSet<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let probe = tempfile::tempdir().unwrap();
    // An empty `[workspace]`: the probe is a workspace of its own, wherever
    // the temporary directory is.
    std::fs::write(
        probe.path().join("Cargo.toml"),
        format!(
            "[package]\nname = \"probe\"\nversion = \"0.0.0\"\nedition = \"2024\"\n\n\
             [dependencies]\n{dependency}\n\n[workspace]\n"
        ),
    )
    .unwrap();
    std::fs::create_dir(probe.path().join("src")).unwrap();
    std::fs::write(probe.path().join("src/lib.rs"), "").unwrap();
    // This workspace's versions, and no registry access.
    std::fs::copy(root.join("Cargo.lock"), probe.path().join("Cargo.lock")).unwrap();
    let output = Command::new(env!("CARGO"))
        .args(["tree", "--offline", "-e", "normal,build"])
        .args(["--prefix", "none", "--format", "{p}"])
        .current_dir(probe.path())
        .output()
        .expect("cargo runs");
    assert!(
        output.status.success(),
        "cargo tree: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_default_features_pull_no_command_line_server_or_mcp_crate() {
    let root = env!("CARGO_MANIFEST_DIR").replace('\\', "/");
    let crates = compiled_crates(&format!("lmstack = {{ path = \"{root}\" }}"));
    // The tree is the real one: the library and its HTTP client are in it.
    for expected in ["lmstack", "reqwest", "tokio"] {
        assert!(crates.contains(expected), "{expected} missing: {crates:?}");
    }
    let pulled: Vec<_> = NOT_BY_DEFAULT
        .iter()
        .filter(|name| crates.contains(**name))
        .collect();
    assert!(pulled.is_empty(), "the default features pull {pulled:?}");
}

#[test]
fn the_server_and_mcp_features_pull_their_crates() {
    let root = env!("CARGO_MANIFEST_DIR").replace('\\', "/");
    let crates = compiled_crates(&format!(
        "lmstack = {{ path = \"{root}\", features = [\"server\", \"mcp\"] }}"
    ));
    for expected in ["axum", "rmcp"] {
        assert!(crates.contains(expected), "{expected} missing: {crates:?}");
    }
}
