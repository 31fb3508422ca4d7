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

#[cfg(test)]
mod tests {
    use super::*;

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
