//! The identity of one operation: a write's Idempotency-Key, a delivery's delivery ID.
//!
//! `write`, `webhook` and `rehearse` follow one rule. An ID given (`--key`, `--delivery-id`) is
//! sent as it is; `--event-id` derives one, the same in every run; without either, a random one
//! ([`IdempotencyKey::random`]) is generated once, sent on every attempt of this process, and
//! announced on standard error before the first attempt, with the command that sends the same
//! operation again under it. An empty or blank ID is refused: `--event-id ""` would map every
//! such call onto one key.
//!
//! Why generate rather than refuse: the retries inside one run are safe with any ID that stays
//! the same on every attempt, and that is what a first-time user needs. What a random ID cannot
//! give is safety across runs (after exit 3, or a crash), since the next run would draw another;
//! the announcement hands that part to the user, and it comes before anything is sent, so it is
//! there even when the process is killed mid-delivery. A script that retries should pass
//! `--event-id`, which needs no bookkeeping.
//!
//! The resend command is this process's own command line, each argument shell-quoted, with the
//! ID option added before any `--`. No secret is in it, and no other word is touched: the
//! trigger (found by its position as clap reads the line) shows as [`MARKER`], or a trigger URL
//! with [`MARKER`] for its token, to be put back by hand; the value of `--client-secret-file` or
//! `--token-file` shows as [`MARKER`]; every other argument is shown as typed. No body is in it
//! either: a body given inline (`--data TEXT`) shows as `--data @FILE`, with a note to put the same
//! bytes in FILE or on standard input (`--data @-`); `--data @FILE` and `--data @-` are kept as
//! given. Options read from the environment are not repeated: the command is for the same
//! environment.

use std::borrow::Cow;
use std::ffi::OsString;

use clap::CommandFactory as _;
use hodoflow_retry::{DeliveryId, IdempotencyKey};

use crate::redact::MARKER;

/// The options naming a secret's file (the client secret's, the Modulify token's), whose value
/// is never shown.
const SECRET_FILES: [&str; 2] = ["--client-secret-file", "--token-file"];

/// The option that gives the body.
const BODY_OPTION: &str = "--data";

/// What stands for a body given inline in the resend command (`--data @FILE`): the body is
/// never printed.
const BODY_FILE: &str = "FILE";

/// What an identity is the key of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Operation {
    /// A webhook delivery (`webhook`, `rehearse`): its delivery ID.
    Delivery,
    /// A JSON:API write: its Idempotency-Key.
    Write,
}

impl Operation {
    /// The option that gives the ID.
    fn option(self) -> &'static str {
        match self {
            Self::Delivery => "--delivery-id",
            Self::Write => "--key",
        }
    }

    /// What the ID is called.
    fn name(self) -> &'static str {
        match self {
            Self::Delivery => "delivery ID",
            Self::Write => "Idempotency-Key",
        }
    }
}

/// The key an operation sends, and whether it was generated here.
#[derive(Debug)]
pub(crate) struct Identity {
    /// The key or delivery ID, the same on every attempt.
    pub(crate) key: IdempotencyKey,
    /// What it is the key of.
    operation: Operation,
    /// Whether it was generated here, and so must be announced.
    generated: bool,
}

impl Identity {
    /// The identity of `operation`: the ID given with its option, else the one derived from
    /// `event_id`, else a generated one.
    ///
    /// # Errors
    ///
    /// A sentence naming the option when an ID is blank or not a valid key.
    pub(crate) fn resolve(
        operation: Operation,
        given: Option<&str>,
        event_id: Option<&str>,
    ) -> Result<Self, String> {
        let option = operation.option();
        let (key, generated) = match (given, event_id) {
            (Some(id), _) => {
                let key = IdempotencyKey::new(operation_id(option, id)?)
                    .map_err(|e| format!("{option}: {e}"))?;
                (key, false)
            }
            (None, Some(event)) => {
                let event = operation_id("--event-id", event)?;
                (IdempotencyKey::from_operation_id(event), false)
            }
            (None, None) => (IdempotencyKey::random(), true),
        };
        Ok(Self {
            key,
            operation,
            generated,
        })
    }

    /// What to print on standard error before the first attempt, when the ID was generated:
    /// the ID, and the command line `args` (the program first) with the ID added, which sends
    /// the operation again under it. `stdin_body` says the body came from standard input.
    pub(crate) fn announcement(&self, args: &[OsString], stdin_body: bool) -> Option<String> {
        if !self.generated {
            return None;
        }
        let (option, what, key) = (
            self.operation.option(),
            self.operation.name(),
            self.key.as_str(),
        );
        let args: Vec<String> = args
            .iter()
            .map(|arg| arg.to_string_lossy().into_owned())
            .collect();
        // The trigger of `webhook` and `rehearse` is their first positional argument.
        let trigger = match self.operation {
            Operation::Delivery => first_positional(&args),
            Operation::Write => None,
        };
        let (command, inline_body) = resend_command(&args, option, key, trigger);
        let body = if inline_body {
            // The body itself is never printed (Hodoflow's "Idempotency and retries": never log
            // sensitive bodies).
            format!(
                " with {BODY_FILE} holding the same body byte for byte (or --data @- and the \
                 same body on standard input)"
            )
        } else if stdin_body {
            " with the same body on standard input".to_owned()
        } else {
            String::new()
        };
        Some(format!(
            "no {option} or --event-id: generated the {what} {key}, the same on every attempt; \
             to send it again under the same ID, run{body}:\n  {command}"
        ))
    }
}

/// The delivery ID derived from a business event ID, the same for `--event-id` and `batch`.
pub(crate) fn event_delivery_id(event_id: &str) -> DeliveryId {
    DeliveryId::new(IdempotencyKey::from_operation_id(event_id))
}

/// `value`, unless it is empty or only whitespace.
///
/// # Errors
///
/// A sentence naming `option`.
fn operation_id<'a>(option: &str, value: &'a str) -> Result<&'a str, String> {
    if value.trim().is_empty() {
        return Err(format!(
            "{option} is empty or blank: an operation needs an ID of its own, or every such \
             call would share one key"
        ));
    }
    Ok(value)
}

/// `args` (the program first) with `option key` added before any `--`, each argument
/// shell-quoted, the trigger at `secret` shown without its token (`Trigger::shown`), the value
/// of each of [`SECRET_FILES`] replaced by [`MARKER`], and a body given inline (`--data TEXT`,
/// `--data=TEXT`) replaced by `@`[`BODY_FILE`]; and whether one was. `@FILE` and `@-` name the body
/// without being it, and are kept.
fn resend_command(
    args: &[String],
    option: &str,
    key: &str,
    secret: Option<usize>,
) -> (String, bool) {
    let end = args
        .iter()
        .skip(1)
        .position(|arg| arg == "--")
        .map_or(args.len(), |at| at + 1);
    let mut words: Vec<Cow<'_, str>> = Vec::with_capacity(args.len() + 2);
    let mut hide_next = false;
    let mut body_next = false;
    let mut inline_body = false;
    let placeholder = format!("@{BODY_FILE}");
    for (index, arg) in args.iter().enumerate() {
        if index == end {
            words.extend([Cow::Borrowed(option), Cow::Borrowed(key)]);
        }
        if Some(index) == secret {
            words.push(Cow::Owned(crate::trigger::Trigger::shown(arg)));
            continue;
        }
        let body = if index >= end {
            None
        } else if std::mem::take(&mut body_next) {
            Some(arg.as_str())
        } else {
            arg.strip_prefix(BODY_OPTION)
                .and_then(|rest| rest.strip_prefix('='))
        };
        if body.is_some_and(|body| !body.starts_with('@')) {
            inline_body = true;
            words.push(if arg.starts_with(BODY_OPTION) {
                Cow::Owned(format!("{BODY_OPTION}={placeholder}"))
            } else {
                Cow::Owned(placeholder.clone())
            });
        } else if index < end && arg == BODY_OPTION {
            body_next = true;
            words.push(Cow::Borrowed(arg));
        } else if index < end && std::mem::take(&mut hide_next) {
            words.push(Cow::Borrowed(MARKER));
        } else if index < end && SECRET_FILES.contains(&arg.as_str()) {
            hide_next = true;
            words.push(Cow::Borrowed(arg));
        } else if let Some(option) = SECRET_FILES
            .iter()
            .find(|option| index < end && arg.starts_with(&format!("{option}=")))
        {
            words.push(Cow::Owned(format!("{option}={MARKER}")));
        } else {
            words.push(Cow::Borrowed(arg));
        }
    }
    if end == args.len() {
        words.extend([Cow::Borrowed(option), Cow::Borrowed(key)]);
    }
    let command = words
        .iter()
        .map(|word| shell_word(word))
        .collect::<Vec<_>>()
        .join(" ");
    (command, inline_body)
}

/// The index in `args` (the program first) of the first positional argument of the command
/// they run (`TRIGGER` of `webhook`), read as clap reads them: an option that takes a value
/// takes the next argument unless written `--name=value`, a command's name leads to its
/// subcommands, and after `--` every argument is positional.
fn first_positional(args: &[String]) -> Option<usize> {
    let mut root = crate::cli::Cli::command();
    root.build();
    let mut command = &root;
    let mut in_subcommand = false;
    let mut options_end = false;
    let mut index = 1;
    while let Some(arg) = args.get(index) {
        index += 1;
        if options_end || !arg.starts_with('-') || arg == "-" {
            match command.find_subcommand(arg) {
                Some(sub) if !options_end => {
                    command = sub;
                    in_subcommand = true;
                }
                _ => return in_subcommand.then_some(index - 1),
            }
        } else if arg == "--" {
            options_end = true;
        } else if let Some(long) = arg.strip_prefix("--")
            && !long.contains('=')
            && command
                .get_arguments()
                .any(|known| known.get_long() == Some(long) && known.get_action().takes_values())
        {
            index += 1;
        }
    }
    None
}

/// `word` as one POSIX shell word: as it is when it holds only characters no shell treats
/// specially, otherwise in single quotes (a `'` inside as `'\''`).
fn shell_word(word: &str) -> Cow<'_, str> {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_-+=:,./@%".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        return Cow::Borrowed(word);
    }
    Cow::Owned(format!("'{}'", word.replace('\'', r"'\''")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(text: &[&str]) -> Vec<String> {
        text.iter().map(|s| (*s).to_owned()).collect()
    }

    fn os(text: &[&str]) -> Vec<OsString> {
        text.iter().map(OsString::from).collect()
    }

    #[test]
    fn an_id_given_or_derived_is_kept_and_none_is_generated_once() {
        let given = Identity::resolve(Operation::Delivery, Some("evt-1"), None).unwrap();
        assert_eq!((given.key.as_str(), given.generated), ("evt-1", false));
        let derived = Identity::resolve(Operation::Delivery, None, Some("order-1")).unwrap();
        assert_eq!(
            derived.key.as_str(),
            event_delivery_id("order-1").key().as_str()
        );
        assert!(
            derived
                .announcement(&os(&["s", "webhook", "t"]), false)
                .is_none()
        );

        let generated = Identity::resolve(Operation::Write, None, None).unwrap();
        let other = Identity::resolve(Operation::Write, None, None).unwrap();
        assert!(generated.generated);
        assert_ne!(generated.key.as_str(), other.key.as_str());
        let said = generated
            .announcement(
                &os(&["hodoflow-send", "write", "POST", "/p", "--data", "@-"]),
                true,
            )
            .unwrap();
        let key = generated.key.as_str();
        assert_eq!(
            said,
            format!(
                "no --key or --event-id: generated the Idempotency-Key {key}, the same on every \
                 attempt; to send it again under the same ID, run with the same body on standard \
                 input:\n  hodoflow-send write POST /p --data @- --key {key}"
            )
        );
        let delivery = Identity::resolve(Operation::Delivery, None, None).unwrap();
        let said = delivery
            .announcement(&os(&["s", "webhook", "t"]), false)
            .unwrap();
        let ends = format!(
            ", run:\n  s webhook '<redacted>' --delivery-id {}",
            delivery.key.as_str()
        );
        assert!(
            said.starts_with("no --delivery-id or --event-id: generated the delivery ID ")
                && said.ends_with(&ends),
            "{said}"
        );
    }

    #[test]
    fn blank_or_invalid_ids_are_refused_naming_the_option() {
        for blank in ["", " ", "\t\n "] {
            let error = operation_id("--event-id", blank).unwrap_err();
            assert!(error.starts_with("--event-id is empty or blank"), "{error}");
            let error = Identity::resolve(Operation::Delivery, Some(blank), None).unwrap_err();
            assert!(
                error.starts_with("--delivery-id is empty or blank"),
                "{error}"
            );
        }
        assert_eq!(operation_id("--key", " order-1 "), Ok(" order-1 "));
        let error = Identity::resolve(Operation::Write, Some("has space"), None).unwrap_err();
        assert!(error.starts_with("--key: "), "{error}");
    }

    #[test]
    fn the_resend_command_adds_the_id_before_a_double_dash_and_quotes_what_a_shell_would_split() {
        let (command, _) = resend_command(
            &args(&[
                "./hodoflow-send",
                "--json",
                "webhook",
                "--event-id",
                "{\"a\": 'b'}",
                "--",
                "-t",
            ]),
            "--delivery-id",
            "k-1",
            None,
        );
        assert_eq!(
            command,
            r#"./hodoflow-send --json webhook --event-id '{"a": '\''b'\''}' --delivery-id k-1 -- -t"#
        );
        // Only the first `--` ends the options; a later one is an argument like any other.
        assert_eq!(
            resend_command(&args(&["s", "--", "a", "--"]), "--key", "k", None),
            ("s --key k -- a --".to_owned(), false)
        );
    }

    #[test]
    fn the_resend_command_shows_no_inline_body_and_keeps_a_body_file_or_stdin() {
        let resend = |text: &[&str]| resend_command(&args(text), "--delivery-id", "k", None);
        assert_eq!(
            resend(&["s", "webhook", "t", "--data", "{\"card\": \"4111 1111\"}"]),
            ("s webhook t --data @FILE --delivery-id k".to_owned(), true)
        );
        assert_eq!(
            resend(&["s", "webhook", "t", "--data=BODY_MARKER", "--", "-x"]),
            (
                "s webhook t --data=@FILE --delivery-id k -- -x".to_owned(),
                true
            )
        );
        assert_eq!(
            resend(&["s", "webhook", "t", "--data", ""]),
            ("s webhook t --data @FILE --delivery-id k".to_owned(), true)
        );
        for given in [
            &["--data", "@body.json"][..],
            &["--data", "@-"],
            &["--data=@b.json"],
        ] {
            let mut text = vec!["s", "webhook", "t"];
            text.extend_from_slice(given);
            let (command, inline) = resend(&text);
            assert!(!inline, "{command}");
            assert!(command.contains(&given.join(" ")), "{command}");
        }
        // After `--`, `--data` is a positional argument, not the option.
        assert_eq!(
            resend(&["s", "webhook", "--", "--data", "x"]),
            ("s webhook --delivery-id k -- --data x".to_owned(), false)
        );
        let delivery = Identity::resolve(Operation::Delivery, None, None).unwrap();
        let said = delivery
            .announcement(&os(&["s", "webhook", "t", "--data", "BODY_MARKER"]), false)
            .unwrap();
        assert!(!said.contains("BODY_MARKER"), "{said}");
        assert!(
            said.contains(
                "run with FILE holding the same body byte for byte (or --data @- and the same \
                 body on standard input):\n  s webhook '<redacted>' --data @FILE --delivery-id "
            ),
            "{said}"
        );
    }

    #[test]
    fn the_resend_command_shows_no_secret_file_and_no_trigger_by_position() {
        let line = args(&[
            "s",
            "--client-secret-file",
            "/run/cs_typed_here",
            "--client-secret-file=/run/cs_typed_again",
            "webhook",
            "--data",
            "@webhook.json",
            "http://127.0.0.1:1/api/v1/webhooks/trg_ID_TEST_it's_secret",
        ]);
        let (command, _) = resend_command(&line, "--delivery-id", "k", first_positional(&line));
        assert_eq!(
            command,
            "s --client-secret-file '<redacted>' '--client-secret-file=<redacted>' webhook \
             --data @webhook.json 'http://127.0.0.1:1/api/v1/webhooks/<redacted>' --delivery-id k"
        );
        let (command, _) = resend_command(
            &args(&[
                "s",
                "modulify",
                "--token-file",
                "/run/mfy_typed_here",
                "--token-file=/run/mfy_typed_again",
                "call",
                "send_message",
            ]),
            "--key",
            "k",
            None,
        );
        assert_eq!(
            command,
            "s modulify --token-file '<redacted>' '--token-file=<redacted>' call send_message \
             --key k"
        );
    }

    #[test]
    fn a_trigger_that_is_one_of_the_tools_words_hides_nothing_else() {
        // A trigger token equal to the command's name, an option's value, or a word of the
        // announcement: only the trigger's own position is redacted.
        for trigger in ["webhook", "@webhook.json", "delivery", "--data"] {
            let line = args(&[
                "hodoflow-send",
                "--max-elapsed",
                "webhook",
                "webhook",
                "--data=@webhook.json",
                "--",
                trigger,
            ]);
            let at = first_positional(&line);
            assert_eq!(at, Some(6), "{trigger}");
            let (command, _) = resend_command(&line, "--delivery-id", "k", at);
            assert_eq!(
                command,
                "hodoflow-send --max-elapsed webhook webhook --data=@webhook.json --delivery-id \
                 k -- '<redacted>'"
            );
        }
        let line = args(&[
            "s",
            "--json",
            "rehearse",
            "--event-id",
            "e",
            "trg_x",
            "--data",
            "{}",
        ]);
        assert_eq!(first_positional(&line), Some(5));
        assert_eq!(first_positional(&args(&["s", "--json"])), None);
    }
}
