//! `--data`: the body, sent byte for byte.
//!
//! Like curl: `@FILE` reads a file, `@-` reads standard input, anything else is the body itself.
//! Nothing is re-serialized, so a signature computed over the bytes stays valid, and the server's
//! fingerprint of a retried write matches the first attempt's.

use std::io::Read;
use std::path::Path;

/// Reads the body that `--data` names; no `--data` is an empty body.
///
/// # Errors
///
/// A sentence naming the file (never the body) when it cannot be read.
pub(crate) fn read(data: Option<&str>) -> Result<Vec<u8>, String> {
    match data {
        None => Ok(Vec::new()),
        Some("@-") => {
            let mut body = Vec::new();
            std::io::stdin()
                .lock()
                .read_to_end(&mut body)
                .map_err(|e| format!("cannot read --data from standard input: {e}"))?;
            Ok(body)
        }
        Some(text) => match text.strip_prefix('@') {
            Some(path) => read_file(Path::new(path), "--data"),
            None => Ok(text.as_bytes().to_vec()),
        },
    }
}

/// Reads a whole file, or says which option's file could not be read.
pub(crate) fn read_file(path: &Path, option: &str) -> Result<Vec<u8>, String> {
    if path.as_os_str().is_empty() {
        return Err(format!("{option} @FILE needs a file name"));
    }
    std::fs::read(path).map_err(|e| format!("cannot read {option} file {}: {e}", path.display()))
}

/// The file at `path`, or standard input for `-`, for the file option `option` (`--events`).
///
/// # Errors
///
/// A sentence naming the option when it cannot be read.
pub(crate) fn read_file_or_stdin(path: &Path, option: &str) -> Result<Vec<u8>, String> {
    if path.as_os_str() != "-" {
        return read_file(path, option);
    }
    let mut text = Vec::new();
    std::io::Read::read_to_end(&mut std::io::stdin().lock(), &mut text)
        .map_err(|e| format!("cannot read {option} from standard input: {e}"))?;
    Ok(text)
}

/// Why `error` refused a user's JSON, without quoting it.
///
/// serde_json's own message can quote the input (`invalid type: string "…"`, `unknown field
/// `…``), and that input is a body: never printed (Hodoflow's "Idempotency and retries": never
/// log sensitive bodies). Only a missing field, named by this tool, is kept; the rest is the kind
/// of error and where it is.
pub(crate) fn json_error(error: &serde_json::Error) -> String {
    use serde_json::error::Category;
    let (line, column) = (error.line(), error.column());
    let what = match error.classify() {
        Category::Syntax => "invalid JSON".to_owned(),
        Category::Eof => "the JSON ends early".to_owned(),
        Category::Io => "unreadable JSON".to_owned(),
        Category::Data => {
            let said = error.to_string();
            match said.split_once(" at line ") {
                Some((missing, _)) if missing.starts_with("missing field `") => missing.to_owned(),
                _ => "JSON of the wrong shape".to_owned(),
            }
        }
    };
    format!("{what} at line {line} column {column}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_json_error_names_the_kind_and_place_and_quotes_no_input() {
        let error = |text: &str| {
            json_error(
                &serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(text)
                    .unwrap_err(),
            )
        };
        assert_eq!(
            error(r#""BODY_MARKER""#),
            "JSON of the wrong shape at line 1 column 13"
        );
        assert_eq!(
            error("[1, 2]"),
            "JSON of the wrong shape at line 1 column 0"
        );
        assert_eq!(
            error(r#"{"a": BODY_MARKER}"#),
            "invalid JSON at line 1 column 7"
        );
        assert_eq!(
            error(r#"{"BODY_MARKER": "#),
            "the JSON ends early at line 1 column 16"
        );
        #[derive(Debug, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code, reason = "only its shape is read")]
        struct Event {
            event_id: String,
        }
        let shaped = |text: &str| json_error(&serde_json::from_str::<Event>(text).unwrap_err());
        assert_eq!(shaped("{}"), "missing field `event_id` at line 1 column 2");
        assert!(!shaped(r#"{"BODY_MARKER": 1}"#).contains("BODY_MARKER"));
        assert!(!shaped(r#"{"event_id": "x", "BODY_MARKER": 1}"#).contains("BODY_MARKER"));
        assert!(!shaped(r#"{"event_id": 4111111111111111}"#).contains("4111"));
    }

    #[test]
    fn text_is_the_body_and_no_data_is_empty() {
        assert_eq!(read(Some(r#"{"a": 1}"#)).unwrap(), br#"{"a": 1}"#);
        assert_eq!(read(None).unwrap(), b"");
    }

    #[test]
    fn a_file_is_read_byte_for_byte() {
        let path = std::env::temp_dir().join(format!("hodoflow-send-body-{}", std::process::id()));
        std::fs::write(&path, b"{ \"b\" :2 }\r\n").unwrap();
        let body = read(Some(&format!("@{}", path.display()))).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(body, b"{ \"b\" :2 }\r\n");
    }

    #[test]
    fn a_missing_file_is_named_in_the_error() {
        let error = read(Some("@/nonexistent/hodoflow-send/body.json")).unwrap_err();
        assert!(error.starts_with("cannot read --data file /nonexistent/hodoflow-send/body.json"));
        assert!(read(Some("@")).unwrap_err().contains("needs a file name"));
    }
}
