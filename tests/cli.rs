//! The `lmstack` command line.

use std::process::Command;

fn lmstack(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_lmstack"))
        .args(args)
        .output()
        .expect("the lmstack binary runs")
}

#[test]
fn help_lists_the_six_subcommands() {
    let output = lmstack(&["--help"]);
    assert!(output.status.success());
    let help = String::from_utf8(output.stdout).unwrap();
    for subcommand in ["demo", "parse", "render", "lift", "lower", "chat"] {
        assert!(
            help.lines()
                .any(|line| line.trim_start().starts_with(subcommand)),
            "`{subcommand}` missing from:\n{help}"
        );
    }
}

#[test]
fn every_subcommand_has_help() {
    for subcommand in ["demo", "parse", "render", "lift", "lower", "chat"] {
        let output = lmstack(&[subcommand, "--help"]);
        assert!(output.status.success(), "{subcommand} --help failed");
        let help = String::from_utf8(output.stdout).unwrap();
        assert!(help.contains("Usage: lmstack"), "{help}");
    }
}

#[test]
fn an_unknown_subcommand_is_a_usage_error() {
    let output = lmstack(&["frobnicate"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("unrecognized subcommand"));
}
