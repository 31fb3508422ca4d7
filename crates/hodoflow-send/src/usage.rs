//! A usage error the argument parser catches, reported as the interface promises.
//!
//! clap checks the command line before any command runs: an unknown flag, a missing or
//! conflicting argument, a value its parsers refuse (`--max-elapsed 5x`, `--max-attempts 0`).
//! Its usage message goes to standard error, as with any clap program. With `--json` the
//! interface promises exactly one JSON object on standard output, so such an error is reported
//! there too, like every later refusal: outcome `error`, kind `invalid_input`, `may_have_run`
//! false, exit 2, the message redacted. A rehearsal's error has the `first_*` fields, and so on:
//! the fields a command always reports are added when clap got as far as the command's name.
//!
//! `--json` is a field of the parse that failed, so it is read from the raw arguments: any
//! argument that is exactly `--json`, before the first `--` (after it every argument is a value).
//! clap agrees: no option here takes a value starting with `-`, so `--json` before `--` is
//! always the flag. `--help`, `--version` and `help` are not errors; they print as always, with or
//! without `--json`.

use std::ffi::OsString;

use clap::CommandFactory as _;

use crate::cli::Cli;
use crate::report::{Exit, Failure, Report};

/// Reports `error`, a usage error clap caught in `args` (the program first), and returns the
/// exit code: clap's message on standard error, and with `--json` the report on standard output.
pub(crate) fn refuse(error: &clap::Error, args: &[OsString]) -> u8 {
    // clap's message quotes what was typed, where a secret may have been typed by mistake.
    let rendered = crate::redact::text(&error.render().to_string()).into_owned();
    crate::redact::eprint(rendered.trim_end());
    if json_requested(args) {
        let report = Report::failure(Failure::invalid_input(message(&rendered)));
        let report = match command_name(args) {
            Some(name) => crate::report::with_command_fields(report, &name),
            None => report,
        };
        report.print(true);
        return Exit::Usage.code();
    }
    u8::try_from(error.exit_code()).unwrap_or(Exit::Usage.code())
}

/// Whether `args` ask for `--json`: any argument before the first `--` that is exactly it.
fn json_requested(args: &[OsString]) -> bool {
    args.iter()
        .skip(1)
        .take_while(|arg| *arg != "--")
        .any(|arg| arg == "--json")
}

/// The subcommand named in `args`, as far as a parse that ignores errors finds it: `write`, or
/// `modulify call` for a command of `modulify`.
fn command_name(args: &[OsString]) -> Option<String> {
    let matches = Cli::command()
        .ignore_errors(true)
        .try_get_matches_from(args)
        .ok()?;
    let (name, sub) = matches.subcommand()?;
    match sub.subcommand_name() {
        Some(inner) if name == "modulify" => Some(format!("{name} {inner}")),
        _ => Some(name.to_owned()),
    }
}

/// The report's message from clap's rendered error: its first paragraph, on one line, without
/// the `error: ` clap starts it with.
fn message(rendered: &str) -> String {
    let first = rendered.split("\n\n").next().unwrap_or_default();
    let words: Vec<&str> = first.split_whitespace().collect();
    let text = words.join(" ");
    match text.strip_prefix("error: ") {
        Some(rest) => rest.to_owned(),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser as _;

    fn args(text: &[&str]) -> Vec<OsString> {
        text.iter().map(OsString::from).collect()
    }

    #[test]
    fn json_is_asked_for_by_the_flag_before_a_double_dash_only() {
        for asked in [
            &["s", "--json", "webhook"][..],
            &["s", "webhook", "t", "--bogus", "--json"],
            &["s", "webhook", "--json", "--", "--json"],
        ] {
            assert!(json_requested(&args(asked)), "{asked:?}");
        }
        for not in [
            &["s", "webhook", "t", "--", "--json"][..],
            &["s", "--json=true", "get", "/p"],
            &["s", "--data=--json"],
            &["--json"],
            &["s"],
        ] {
            assert!(!json_requested(&args(not)), "{not:?}");
        }
    }

    #[test]
    fn the_command_is_named_even_when_its_arguments_are_wrong() {
        for (line, name) in [
            (
                &["s", "--json", "rehearse", "t", "--bogus"][..],
                Some("rehearse"),
            ),
            (
                &[
                    "s",
                    "--json",
                    "rehearse",
                    "--delivery-id",
                    "a",
                    "--event-id",
                    "b",
                ],
                Some("rehearse"),
            ),
            (&["s", "--max-elapsed", "5x", "follow"], Some("follow")),
            (&["s", "--json", "write"], Some("write")),
            (
                &["s", "--json", "modulify", "call", "m", "--bogus"],
                Some("modulify call"),
            ),
            (&["s", "modulify", "--token", "t"], Some("modulify")),
            (&["s", "--json"], None),
            (&["s", "--json", "frobnicate"], None),
        ] {
            assert_eq!(command_name(&args(line)).as_deref(), name, "{line:?}");
        }
    }

    #[test]
    fn the_message_is_clap_s_first_paragraph_on_one_line() {
        let error = Cli::try_parse_from(["s", "webhook"]).unwrap_err();
        assert_eq!(
            message(&error.render().to_string()),
            "the following required arguments were not provided: <TRIGGER>"
        );
        let error = Cli::try_parse_from(["s", "get", "/p", "--bogus"]).unwrap_err();
        assert_eq!(
            message(&error.render().to_string()),
            "unexpected argument '--bogus' found"
        );
    }
}
