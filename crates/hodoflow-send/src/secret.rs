//! The secrets read from a file or the environment, never from argv: the client secret
//! (`--client-secret-file` or `HODOFLOW_CLIENT_SECRET`), the Modulify API token
//! (`--token-file` or `MODULIFY_TOKEN`) and the webhook signing secrets
//! (`--signing-secret-file` or the file `HODOFLOW_SIGNING_SECRET_FILE` names).
//!
//! A command-line value would be readable by every user of the machine in the process list and
//! would stay in shell history, so there is no flag that takes a secret itself. The file wins
//! over the environment variable, as an explicit option wins over the environment elsewhere.

use std::path::Path;

use hodoflow_retry::{Secret, SigningSecret};

/// The environment variable that may hold the client secret.
pub(crate) const ENV: &str = "HODOFLOW_CLIENT_SECRET";

/// The environment variable that may hold the Modulify API token.
pub(crate) const MODULIFY_ENV: &str = "MODULIFY_TOKEN";

/// Where one secret comes from, and what messages call it.
struct Source {
    /// What it is, as a message names it: `client secret`.
    what: &'static str,
    /// The option naming its file: `--client-secret-file`.
    option: &'static str,
    /// The environment variable holding it.
    env: &'static str,
}

/// Reads the client secret, and adds it to the redaction set.
///
/// # Errors
///
/// A sentence naming the option or the variable, never the secret nor the file's path (a user
/// may type the secret itself there by mistake), when neither gives a non-empty secret.
pub(crate) fn client_secret(file: Option<&Path>) -> Result<Secret, String> {
    let source = Source {
        what: "client secret",
        option: "--client-secret-file",
        env: ENV,
    };
    read(&source, file)
}

/// Reads the Modulify API token (a static bearer token), and adds it to the redaction set.
///
/// # Errors
///
/// As [`client_secret`]: a sentence naming `--token-file` or `MODULIFY_TOKEN`, never the token
/// nor the file's path.
pub(crate) fn modulify_token(file: Option<&Path>) -> Result<Secret, String> {
    let source = Source {
        what: "Modulify token",
        option: "--token-file",
        env: MODULIFY_ENV,
    };
    read(&source, file)
}

/// The fewest characters of an admin token (`--admin-token-file`).
pub(crate) const ADMIN_TOKEN_MIN: usize = 16;

/// Reads the status page's admin token from `file`, and adds it to the redaction set.
///
/// # Errors
///
/// As [`client_secret`], and when the token is shorter than [`ADMIN_TOKEN_MIN`] characters.
pub(crate) fn admin_token(file: &Path) -> Result<Secret, String> {
    let source = Source {
        what: "admin token",
        option: "--admin-token-file",
        env: "HODOFLOW_ADMIN_TOKEN_FILE",
    };
    let token = read(&source, Some(file))?;
    if token.expose().trim().chars().count() < ADMIN_TOKEN_MIN {
        return Err(format!(
            "the admin token is shorter than {ADMIN_TOKEN_MIN} characters: write a random one \
             into the file (e.g. `openssl rand -hex 32`)"
        ));
    }
    Ok(Secret::new(token.expose().trim().to_owned()))
}

/// Reads the secret `source` describes, from `file` or else its variable.
fn read(source: &Source, file: Option<&Path>) -> Result<Secret, String> {
    let Source { what, option, env } = source;
    let secret = match file {
        Some(path) => {
            if path.as_os_str().is_empty() {
                return Err(format!("{option} needs a file name"));
            }
            let bytes = std::fs::read(path).map_err(|e| {
                format!(
                    "the {what} file could not be read: {} (the path is not shown: \
                     it may be a secret typed in the wrong place)",
                    e.kind()
                )
            })?;
            let text =
                String::from_utf8(bytes).map_err(|_| format!("the {what} file is not UTF-8"))?;
            trim_newline(text)
        }
        None => match std::env::var(env) {
            Ok(text) => text,
            Err(std::env::VarError::NotPresent) => {
                return Err(format!("no {what}: set {env} or pass {option} PATH"));
            }
            Err(std::env::VarError::NotUnicode(_)) => {
                return Err(format!("{env} is not UTF-8"));
            }
        },
    };
    if secret.is_empty() {
        return Err(format!("the {what} is empty"));
    }
    crate::redact::add(&secret);
    Ok(Secret::new(secret))
}

/// Reads the signing secrets in `file`, one a line (blank lines skipped; two or more during a
/// rotation), checks each, and adds each to the redaction set.
///
/// # Errors
///
/// A sentence naming the line, never the secret nor the file's path, when the file cannot be
/// read, holds no secret, or a line is not `whsec_` followed by the base64 of at least 24 bytes.
pub(crate) fn signing_secrets(file: &Path) -> Result<Vec<Secret>, String> {
    if file.as_os_str().is_empty() {
        return Err("--signing-secret-file needs a file name".to_owned());
    }
    let bytes = std::fs::read(file).map_err(|e| {
        format!(
            "the signing secret file could not be read: {} (the path is not shown: \
             it may be a secret typed in the wrong place)",
            e.kind()
        )
    })?;
    let text =
        String::from_utf8(bytes).map_err(|_| "the signing secret file is not UTF-8".to_owned())?;
    let mut secrets = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        // Redacted first, so that no message printed after this can show it.
        crate::redact::add(line);
        if let Some(encoded) = line.strip_prefix("whsec_") {
            crate::redact::add(encoded);
        }
        if let Err(error) = SigningSecret::new(line) {
            let why = error.to_string();
            let why = why.strip_prefix("invalid input: ").unwrap_or(&why);
            return Err(format!(
                "the signing secret on line {} of the signing secret file is refused: {why}",
                number + 1
            ));
        }
        secrets.push(Secret::new(line));
    }
    if secrets.is_empty() {
        return Err("the signing secret file holds no secret: one whsec_ secret a line".to_owned());
    }
    Ok(secrets)
}

/// Drops the line ending an editor or `echo` leaves at the end of a file.
fn trim_newline(mut text: String) -> String {
    let kept = text.trim_end_matches(['\n', '\r']).len();
    text.truncate(kept);
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trailing_newline_is_trimmed_and_nothing_else() {
        assert_eq!(trim_newline("s3cr3t\n".into()), "s3cr3t");
        assert_eq!(trim_newline("s3cr3t\r\n".into()), "s3cr3t");
        assert_eq!(trim_newline(" s3 cr3t ".into()), " s3 cr3t ");
    }

    #[test]
    fn a_file_gives_the_secret_and_errors_never_show_it() {
        let dir = std::env::temp_dir();
        let path = dir.join(format!("hodoflow-send-secret-{}", std::process::id()));
        std::fs::write(&path, "cs_FILE_SECRET\n").unwrap();
        assert_eq!(
            client_secret(Some(&path)).unwrap().expose(),
            "cs_FILE_SECRET"
        );
        std::fs::write(&path, "\n").unwrap();
        let empty = client_secret(Some(&path)).unwrap_err();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(empty, "the client secret is empty");
    }

    #[test]
    fn an_unreadable_file_is_not_named_in_the_error() {
        let path = std::env::temp_dir().join("cs_TYPED_AS_A_PATH_nonexistent");
        let error = client_secret(Some(&path)).unwrap_err();
        assert!(
            error.starts_with("the client secret file could not be read: entity not found"),
            "{error}"
        );
        assert!(!error.contains("cs_TYPED"), "{error}");
        let directory = client_secret(Some(&std::env::temp_dir())).unwrap_err();
        assert!(
            !directory.contains(&*std::env::temp_dir().to_string_lossy()),
            "{directory}"
        );
    }

    #[test]
    fn signing_secrets_are_read_one_a_line_and_refusals_never_show_them() {
        let path =
            std::env::temp_dir().join(format!("hodoflow-send-signing-{}", std::process::id()));
        let read = |contents: &str| {
            std::fs::write(&path, contents).unwrap();
            signing_secrets(&path)
        };
        let old = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";
        let new = "whsec_bmV4dC1zZWNyZXQtZm9yLXRoZS1yb3RhdGlvbi0wMQ==";
        let both = read(&format!("{old}\r\n\n  {new}  \n")).unwrap();
        let exposed: Vec<&str> = both.iter().map(Secret::expose).collect();
        assert_eq!(exposed, [old, new]);
        assert_eq!(
            read("\n \n").unwrap_err(),
            "the signing secret file holds no secret: one whsec_ secret a line"
        );
        for (bad, says) in [
            ("C2FVsBQIhrscChlQIMV+b5sSYspob7oD", "starts with whsec_"),
            (
                "whsec_c2hvcnQtc2VjcmV0",
                "decodes to 12 bytes, fewer than 24",
            ),
            (
                "whsec_C2FVsBQI!!!scChlQIMV+b5sSYspob7oD",
                "followed by base64",
            ),
        ] {
            let error = read(&format!("{old}\n{bad}\n")).unwrap_err();
            assert!(
                error.starts_with("the signing secret on line 2 "),
                "{error}"
            );
            assert!(error.contains(says), "{error}");
            assert!(
                !error.contains(&bad[6..14]) && !error.contains(&old[6..]),
                "{error}"
            );
        }
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn the_modulify_token_is_read_like_the_client_secret_and_named_as_itself() {
        let path = std::env::temp_dir().join(format!("hodoflow-send-token-{}", std::process::id()));
        std::fs::write(&path, "mfy_FILE_TOKEN\n").unwrap();
        assert_eq!(
            modulify_token(Some(&path)).unwrap().expose(),
            "mfy_FILE_TOKEN"
        );
        std::fs::write(&path, "").unwrap();
        let empty = modulify_token(Some(&path)).unwrap_err();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(empty, "the Modulify token is empty");
        let missing = modulify_token(Some(&path)).unwrap_err();
        assert!(
            missing.starts_with("the Modulify token file could not be read: "),
            "{missing}"
        );
        assert_eq!(
            modulify_token(Some(Path::new(""))).unwrap_err(),
            "--token-file needs a file name"
        );
    }
}
