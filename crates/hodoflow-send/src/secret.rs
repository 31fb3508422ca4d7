//! The secrets read from a file or the environment, never from argv: the client secret
//! (`--client-secret-file` or `HODOFLOW_CLIENT_SECRET`), the Modulify API token
//! (`--token-file` or `MODULIFY_TOKEN`) and the webhook signing secrets
//! (`--signing-secret-file` or the file `HODOFLOW_SIGNING_SECRET_FILE` names).
//!
//! A command-line value would be readable by every user of the machine in the process list and
//! would stay in shell history, so there is no flag that takes a secret itself. The file wins
//! over the environment variable, as an explicit option wins over the environment elsewhere.

use std::path::Path;

use hodoflow_retry::{Secret, webhook::SigningSecret};

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

/// The least strength of an admin token, in bits, by [`strength`]'s estimate.
pub(crate) const ADMIN_TOKEN_MIN_BITS: f64 = 60.0;

/// How to make an admin token, as the errors say it.
const MAKE_ONE: &str = "write a random one into the file, e.g. `openssl rand -hex 32 > FILE`";

/// Reads the status page's admin token from `file`, and adds it to the redaction set.
///
/// # Errors
///
/// As [`client_secret`], and when the token is shorter than [`ADMIN_TOKEN_MIN`] characters or
/// weaker than [`ADMIN_TOKEN_MIN_BITS`] ([`strength`]). The error never quotes the token.
pub(crate) fn admin_token(file: &Path) -> Result<Secret, String> {
    let source = Source {
        what: "admin token",
        option: "--admin-token-file",
        env: "HODOFLOW_ADMIN_TOKEN_FILE",
    };
    let token = read(&source, Some(file))?;
    let token = token.expose().trim();
    if token.chars().count() < ADMIN_TOKEN_MIN {
        return Err(format!(
            "the admin token is shorter than {ADMIN_TOKEN_MIN} characters: {MAKE_ONE}"
        ));
    }
    let bits = strength(token);
    if bits < ADMIN_TOKEN_MIN_BITS {
        return Err(format!(
            "the admin token is too weak to guard the page: about {bits:.0} bits, by an \
             estimate that counts nothing for runs (aaaa, 1234, dcba) and repeated stretches, \
             where {ADMIN_TOKEN_MIN_BITS:.0} are needed: {MAKE_ONE}"
        ));
    }
    Ok(Secret::new(token.to_owned()))
}

/// A conservative estimate of how many bits guessing `token` takes: each character counts the
/// bits of the alphabet of the character classes the token uses (lower case 26, upper case 26,
/// digits 10, other ASCII 33, anything else 100), except a character that continues a run of
/// three (`aaa`, `abc`, `321`) and a stretch of four or more that repeats an earlier one
/// (`passwordpassword`), which count nothing. A random token of 32 hex digits, or of 16
/// letters and digits, passes; `aaaaaaaaaaaaaaaa` (5 bits) and `0123456789abcdef` (21 bits) do
/// not. (16 random hex digits pass unless, once in two thousand, they are all digits.)
pub(crate) fn strength(token: &str) -> f64 {
    let chars: Vec<char> = token.chars().collect();
    let classes = [
        (chars.iter().any(char::is_ascii_lowercase), 26),
        (chars.iter().any(char::is_ascii_uppercase), 26),
        (chars.iter().any(char::is_ascii_digit), 10),
        (
            chars
                .iter()
                .any(|c| c.is_ascii() && !c.is_ascii_alphanumeric()),
            33,
        ),
        (chars.iter().any(|c| !c.is_ascii()), 100),
    ];
    let alphabet: u32 = classes
        .iter()
        .filter(|(used, _)| *used)
        .map(|(_, size)| size)
        .sum();
    let per_char = f64::from(alphabet.max(1)).log2();
    let step = |a: char, b: char| i64::from(u32::from(b)) - i64::from(u32::from(a));
    let mut bits = 0.0;
    let mut at = 0;
    while at < chars.len() {
        let repeated = (0..at)
            .map(|from| {
                chars[from..]
                    .iter()
                    .zip(&chars[at..])
                    .take_while(|(a, b)| a == b)
                    .count()
            })
            .max()
            .unwrap_or(0);
        if repeated >= 4 {
            at += repeated;
            continue;
        }
        let run = at >= 2 && {
            let now = step(chars[at - 1], chars[at]);
            now.abs() <= 1 && now == step(chars[at - 2], chars[at - 1])
        };
        if !run {
            bits += per_char;
        }
        at += 1;
    }
    bits
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
    fn weak_admin_tokens_are_refused_with_a_way_to_make_one_and_random_ones_pass() {
        let path = std::env::temp_dir().join(format!(
            "hodoflow-send-admin-{}-{}",
            std::process::id(),
            rand::random::<u32>()
        ));
        for weak in [
            "aaaaaaaaaaaaaaaa",
            "0123456789abcdef",
            "abababababababab",
            "passwordpassword",
            "Passw0rd!Passw0rd!",
            "zyxwvutsrqponmlkjihgfedcba",
        ] {
            std::fs::write(&path, format!("{weak}\n")).unwrap();
            let error = admin_token(&path).unwrap_err();
            assert!(error.contains("too weak"), "{weak}: {error}");
            assert!(error.contains("openssl rand -hex 32"), "{error}");
            assert!(!error.contains(weak), "{error}");
        }
        std::fs::write(&path, "short-7\n").unwrap();
        assert!(admin_token(&path).unwrap_err().contains("shorter than 16"));
        for good in [
            "admin-token-0123456789abcdef",
            "gate-token-0123456789",
            "correct horse battery staple",
        ] {
            std::fs::write(&path, good).unwrap();
            assert_eq!(admin_token(&path).unwrap().expose(), good);
        }
        std::fs::remove_file(&path).unwrap();
        // Random tokens as `openssl rand -hex 32` (its first 32 digits) or `openssl rand
        // -base64 12` (letters and digits) make them pass, whatever runs they hold by chance.
        let random = |len: usize, alphabet: &[u8]| -> String {
            (0..len)
                .map(|_| char::from(alphabet[rand::random_range(0..alphabet.len())]))
                .collect()
        };
        let hex = b"0123456789abcdef";
        let alnum = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        for _ in 0..2_000 {
            for token in [random(32, hex), random(16, alnum)] {
                assert!(strength(&token) >= ADMIN_TOKEN_MIN_BITS, "{token}");
            }
        }
    }

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
