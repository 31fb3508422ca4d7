//! The OAuth2 client-credentials grant at the token endpoint (`docs/wire-contract.md`,
//! "Endpoints and the token exchange"): the form, the answer read strictly, the token endpoint's
//! `Retry-After`, and errors that never quote the secret or the endpoint's body.

use std::time::Duration;

use http::StatusCode;
use serde_json::Value;
use tokio::time::Instant;

use crate::core::answer_limit::{BodyRead, TOKEN_ANSWER_LIMIT, read_body};
use crate::core::attempt::TransportKind;
use crate::core::endpoint;
use crate::core::error::{Error, Result};
use crate::core::redact::Cleaner;
use crate::core::retry_after::parse_retry_after;
use crate::core::runtime::wall_now;
use crate::vendors::hodoflow::tables::TOKEN_PATH;

use crate::core::auth::secret::{AccessToken, Secret};
use crate::core::auth::{ExchangeFuture, TokenExchanger};
use crate::core::runtime;

/// The shortest access token [`ClientCredentials`] accepts: a shorter one is guessable, and
/// would be redacted out of ordinary words (a token `ok` in every `"outcome":"ok"`).
pub(crate) const MIN_TOKEN_LEN: usize = 8;

/// The OAuth2 client-credentials grant: `POST {base_url}/oauth/token`.
///
/// Redirects are not followed, so the client secret goes to the configured host only.
///
/// # Examples
///
/// ```
/// use hodoflow_retry::auth::ClientCredentials;
///
/// let exchanger = ClientCredentials::new("https://hodoflow.example", "sender-1", "s3cr3t")?
///     .scope("webhooks");
/// assert!(!format!("{exchanger:?}").contains("s3cr3t"));
/// # Ok::<(), hodoflow_retry::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct ClientCredentials {
    http: reqwest::Client,
    token_url: reqwest::Url,
    client_id: String,
    client_secret: Secret,
    scope: Option<String>,
    timeout: Duration,
}

impl ClientCredentials {
    /// The default timeout of one exchange: 15 s.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(15);

    /// An exchanger for the token endpoint under `base_url`.
    ///
    /// # Errors
    ///
    /// An [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) error when `base_url` is
    /// not an `http` or `https` URL with a host, or holds a user name, password, query or
    /// fragment, and a
    /// [`ErrorKind::TokenExchange`](crate::ErrorKind::TokenExchange) error when the HTTP client
    /// cannot be built.
    pub fn new(
        base_url: &str,
        client_id: impl Into<String>,
        client_secret: impl Into<Secret>,
    ) -> Result<Self> {
        let http = crate::core::transport::http_client(false).map_err(|source| {
            Error::token_exchange("the HTTP client could not be built").with_source(source)
        })?;
        Self::with_http_client(base_url, client_id, client_secret, http)
    }

    /// [`new`](Self::new) sending through `http`, without building a client of its own.
    pub(crate) fn with_http_client(
        base_url: &str,
        client_id: impl Into<String>,
        client_secret: impl Into<Secret>,
        http: reqwest::Client,
    ) -> Result<Self> {
        let base = endpoint::base_url(base_url, "the token base URL")?;
        let token_url = format!("{}{TOKEN_PATH}", base.as_str().trim_end_matches('/'));
        let token_url = endpoint::base_url(&token_url, "the token base URL")?;
        Ok(Self {
            http,
            token_url,
            client_id: client_id.into(),
            client_secret: client_secret.into(),
            scope: None,
            timeout: Self::DEFAULT_TIMEOUT,
        })
    }

    /// Exchanges at this URL instead of `{base_url}/oauth/token`, for a token endpoint on
    /// another host.
    ///
    /// Default: `{base_url}/oauth/token`.
    ///
    /// # Errors
    ///
    /// An [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) error when `token_url` is
    /// not an `http` or `https` URL with a host, or holds a user name, password or fragment.
    pub fn token_url(mut self, token_url: &str) -> Result<Self> {
        self.token_url = endpoint::endpoint_url(token_url, "the token URL")?;
        Ok(self)
    }

    /// Asks for these scopes, space-separated (`"api_read api_write webhooks"`).
    ///
    /// Default: none, so the server grants the client's default scopes.
    #[must_use]
    pub fn scope(mut self, scope: impl Into<String>) -> Self {
        self.scope = Some(scope.into());
        self
    }

    /// Sets the timeout of one exchange.
    ///
    /// Default: 15 s.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sends the exchange through this HTTP client, for example one with a custom root
    /// certificate. Configure it not to follow redirects.
    ///
    /// Default: a client of its own that follows no redirects and never retries by itself;
    /// with [`HodoflowBuilder::client_credentials`](crate::hodoflow::HodoflowBuilder::client_credentials),
    /// the client's HTTP client.
    #[must_use]
    pub fn http_client(mut self, http: reqwest::Client) -> Self {
        self.http = http;
        self
    }

    async fn request(&self) -> Result<AccessToken> {
        let mut form = vec![
            ("grant_type", "client_credentials"),
            ("client_id", self.client_id.as_str()),
            ("client_secret", self.client_secret.expose()),
        ];
        if let Some(scope) = &self.scope {
            form.push(("scope", scope.as_str()));
        }
        let unanswered = |source: reqwest::Error| {
            let kind = TransportKind::of(&source);
            Error::token_exchange(format_args!(
                "no answer from the token endpoint ({})",
                kind.as_str()
            ))
            .with_source(source)
        };
        let mut response = self
            .http
            .post(self.token_url.clone())
            .timeout(self.timeout)
            .form(&form)
            .send()
            .await
            .map_err(unanswered)?;
        let status = response.status();
        // A busy token endpoint's `Retry-After` lengthens the exchanges' shared backoff.
        let retry_after = response
            .headers()
            .get(http::header::RETRY_AFTER)
            .and_then(|value| parse_retry_after(value, wall_now()));
        let body = match read_body(&mut response, TOKEN_ANSWER_LIMIT).await {
            BodyRead::Whole(body) => body,
            BodyRead::Failed(source) => return Err(unanswered(source)),
            BodyRead::TooLarge => {
                return Err(Error::token_exchange(format_args!(
                    "the token endpoint answered {} with a body over {TOKEN_ANSWER_LIMIT} bytes",
                    status.as_u16()
                ))
                .with_status(status));
            }
        };
        read_token_answer(status, &body, runtime::now(), &self.client_secret)
            .map_err(|error| error.with_retry_after(retry_after))
    }
}

impl TokenExchanger for ClientCredentials {
    fn exchange(&self) -> ExchangeFuture<'_> {
        Box::pin(self.request())
    }

    /// The client secret.
    fn secrets(&self) -> Vec<Secret> {
        vec![self.client_secret.clone()]
    }
}

/// Reads the token endpoint's answer, received at `now`.
///
/// `200 {"access_token","token_type","expires_in","scope"}` is a token. Anything else is a
/// token-exchange error that quotes at most the OAuth error code, and never `secret`.
pub(crate) fn read_token_answer(
    status: StatusCode,
    body: &[u8],
    now: Instant,
    secret: &Secret,
) -> Result<AccessToken> {
    if status != StatusCode::OK {
        let code = serde_json::from_slice::<Value>(body)
            .ok()
            .and_then(|answer| answer.get("error")?.as_str().map(str::to_owned))
            .filter(|code| is_oauth_error_code(code));
        let what = format!("the token endpoint answered {}", status.as_u16());
        let error = match code {
            // The endpoint's words, cleaned of the secret here and of the client's other
            // secrets where the call ends.
            Some(code) => Error::token_exchange(format_args!("{what} "))
                .quoting(&code, MAX_OAUTH_CODE)
                .cleaned(&Cleaner::new([secret.expose()])),
            None => Error::token_exchange(what),
        };
        return Err(error.with_status(status));
    }

    let unreadable = |why: &str| {
        Error::token_exchange(format_args!("the token answer {why}")).with_status(status)
    };
    let answer: Value = serde_json::from_slice(body).map_err(|_| unreadable("is not JSON"))?;
    let token = answer
        .get("access_token")
        .and_then(Value::as_str)
        .filter(|token| !token.is_empty())
        .ok_or_else(|| unreadable("has no access_token"))?;
    let token_type = answer.get("token_type").and_then(Value::as_str);
    if token_type.is_some_and(|kind| !kind.eq_ignore_ascii_case("bearer")) {
        return Err(unreadable("is not a Bearer token"));
    }
    let expires_at = match answer.get("expires_in") {
        None | Some(Value::Null) => None,
        Some(expires_in) => {
            let seconds = seconds(expires_in).ok_or_else(|| unreadable("has a bad expires_in"))?;
            now.checked_add(Duration::from_secs(seconds))
        }
    };
    check_issued(token)?;
    let token = AccessToken::new(token, expires_at);
    token
        .authorization()
        .map_err(|_| Error::unusable_token("it cannot be sent in a header"))?;
    Ok(token)
}

/// An issued token that cannot work is refused at once, not exchanged again and again: a
/// control character (CR, LF, NUL, ESC …) cannot go in a header, and a token shorter than
/// [`MIN_TOKEN_LEN`] bytes is no secret. The error never shows the token.
fn check_issued(token: &str) -> Result<()> {
    if token.chars().any(char::is_control) {
        return Err(Error::unusable_token("it holds a control character"));
    }
    if token.len() < MIN_TOKEN_LEN {
        return Err(Error::unusable_token(format_args!(
            "it is shorter than {MIN_TOKEN_LEN} bytes"
        )));
    }
    Ok(())
}

/// `expires_in` as whole seconds: a non-negative number, or digits in a string.
fn seconds(value: &Value) -> Option<u64> {
    match value {
        Value::Number(number) => number.as_u64().or_else(|| {
            let seconds = number.as_f64().filter(|seconds| *seconds >= 0.0)?;
            // Truncation is the intent: a fraction of a second is dropped.
            Some(seconds.min(u64::MAX as f64) as u64)
        }),
        Value::String(text) => text.trim().parse().ok(),
        _ => None,
    }
}

/// The longest OAuth error code quoted.
const MAX_OAUTH_CODE: usize = 64;

/// Whether `code` looks like an OAuth error code (`invalid_client`): short, and only the
/// characters RFC 6749 allows, so quoting it cannot leak a body.
fn is_oauth_error_code(code: &str) -> bool {
    (1..=MAX_OAUTH_CODE).contains(&code.len())
        && code
            .bytes()
            .all(|byte| byte.is_ascii_graphic() && byte != b'"' && byte != b'\\')
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, Read, Write};

    use crate::core::error::ErrorKind;

    const SECRET: &str = "s3cr3t-value";

    #[test]
    fn a_token_url_replaces_the_default_and_must_be_http() {
        let credentials = ClientCredentials::new("http://127.0.0.1:8080", "id", SECRET)
            .expect("valid")
            .token_url("https://login.example/oauth2/token")
            .expect("valid token URL");
        assert_eq!(
            credentials.token_url.as_str(),
            "https://login.example/oauth2/token"
        );
        let error = ClientCredentials::new("http://127.0.0.1:8080", "id", SECRET)
            .expect("valid")
            .token_url("file:///etc/passwd")
            .expect_err("not http");
        assert_eq!(error.kind(), ErrorKind::InvalidInput);
    }

    #[test]
    fn refuses_a_base_url_that_is_not_http() {
        for base in ["not a url", "ftp://example.com", ""] {
            let error = ClientCredentials::new(base, "id", SECRET).expect_err("invalid URL");
            assert_eq!(error.kind(), ErrorKind::InvalidInput, "{base}");
        }
        let ok = ClientCredentials::new("http://127.0.0.1:8080/", "id", SECRET).expect("valid");
        assert_eq!(ok.token_url.as_str(), "http://127.0.0.1:8080/oauth/token");
    }

    #[tokio::test(start_paused = true)]
    async fn reads_a_token_answer_with_its_expiry() {
        let now = Instant::now();
        let body =
            br#"{"access_token":"tok-0001","token_type":"Bearer","expires_in":3600,"scope":"webhooks"}"#;
        let token = read_token_answer(StatusCode::OK, body, now, &Secret::new(SECRET))
            .expect("valid answer");
        assert_eq!(token.secret().expose(), "tok-0001");
        assert_eq!(token.expires_at(), Some(now + Duration::from_secs(3600)));

        let no_expiry = br#"{"access_token":"tok-0002","token_type":"bearer"}"#;
        let token = read_token_answer(StatusCode::OK, no_expiry, now, &Secret::new(SECRET))
            .expect("valid answer");
        assert_eq!(token.expires_at(), None);

        let string_expiry = br#"{"access_token":"tok-0003","expires_in":"60"}"#;
        let token = read_token_answer(StatusCode::OK, string_expiry, now, &Secret::new(SECRET))
            .expect("valid answer");
        assert_eq!(token.expires_at(), Some(now + Duration::from_secs(60)));
    }

    #[tokio::test(start_paused = true)]
    async fn a_refused_exchange_quotes_the_oauth_code_but_never_the_secret() {
        let secret = Secret::new(SECRET);
        let now = Instant::now();
        let answer = |status: u16, body: &str| {
            let status = StatusCode::from_u16(status).expect("valid status");
            read_token_answer(status, body.as_bytes(), now, &secret).expect_err("refused")
        };

        let invalid = answer(
            401,
            r#"{"error":"invalid_client","error_description":"secret s3cr3t-value is wrong"}"#,
        );
        assert_eq!(invalid.kind(), ErrorKind::TokenExchange);
        assert_eq!(invalid.status(), Some(StatusCode::UNAUTHORIZED));
        assert_eq!(
            invalid.to_string(),
            "token exchange failed: the token endpoint answered 401 invalid_client"
        );
        assert!(!invalid.is_retryable());

        let echoed = answer(400, r#"{"error":"s3cr3t-value"}"#);
        assert_eq!(
            echoed.to_string(),
            "token exchange failed: the token endpoint answered 400 <redacted>"
        );
        let piece = answer(400, r#"{"error":"code_3cr3t-valu_x"}"#);
        assert_eq!(
            piece.to_string(),
            "token exchange failed: the token endpoint answered 400 code_<redacted>_x",
            "a piece of 8 bytes is a secret too"
        );
        assert!(answer(503, "<html>").is_retryable());
    }

    #[tokio::test(start_paused = true)]
    async fn an_unreadable_token_answer_is_an_exchange_error() {
        let secret = Secret::new(SECRET);
        let now = Instant::now();
        for body in [
            "not json",
            "{}",
            r#"{"access_token":""}"#,
            r#"{"access_token":"t","token_type":"mac"}"#,
            r#"{"access_token":"t","expires_in":-5}"#,
            r#"{"access_token":"t\nu"}"#,
        ] {
            let error = read_token_answer(StatusCode::OK, body.as_bytes(), now, &secret)
                .expect_err("unreadable");
            assert_eq!(error.kind(), ErrorKind::TokenExchange, "{body}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn an_unusable_token_is_refused_at_once_without_showing_it() {
        let secret = Secret::new(SECRET);
        let now = Instant::now();
        for (body, why) in [
            (
                r#"{"access_token":"tok-0001\r\nX-Injected: 1"}"#,
                "control character",
            ),
            (r#"{"access_token":"tok-0001\u0000"}"#, "control character"),
            (
                r#"{"access_token":"\u001b[31mtok-0001"}"#,
                "control character",
            ),
            (r#"{"access_token":"tok\u007f0001"}"#, "control character"),
            (r#"{"access_token":"ok"}"#, "shorter than 8 bytes"),
            (r#"{"access_token":"tok-001"}"#, "shorter than 8 bytes"),
        ] {
            let error = read_token_answer(StatusCode::OK, body.as_bytes(), now, &secret)
                .expect_err("unusable");
            assert_eq!(error.kind(), ErrorKind::TokenExchange, "{body}");
            assert!(!error.is_retryable(), "waiting cannot heal it: {body}");
            assert!(error.to_string().contains("unusable token"), "{error}");
            assert!(error.to_string().contains(why), "{error}");
            assert!(!error.to_string().contains("tok-"), "{error}");
        }
    }

    /// Serves one HTTP request on a std socket; hands back the request text.
    fn serve_once(
        status: &'static str,
        body: &'static str,
    ) -> (String, std::thread::JoinHandle<String>) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("address"));
        let server = std::thread::spawn(move || {
            let (stream, _) = listener.accept().expect("accept");
            let mut reader = BufReader::new(stream);
            let mut head = String::new();
            let mut length = 0;
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).expect("read");
                if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = value.trim().parse().expect("length");
                }
                head.push_str(&line);
                if line == "\r\n" {
                    break;
                }
            }
            let mut request_body = vec![0; length];
            reader.read_exact(&mut request_body).expect("body");
            let answer = format!(
                "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            reader
                .get_mut()
                .write_all(answer.as_bytes())
                .expect("write");
            head + &String::from_utf8_lossy(&request_body)
        });
        (base, server)
    }

    #[tokio::test]
    async fn client_credentials_posts_the_form_and_reads_the_token() {
        let (base, server) = serve_once(
            "200 OK",
            r#"{"access_token":"tok-0009","token_type":"Bearer","expires_in":3600,"scope":"webhooks"}"#,
        );
        let exchanger = ClientCredentials::new(&base, "sender-1", SECRET)
            .expect("valid")
            .scope("webhooks");

        let token = exchanger.exchange().await.expect("token");
        let request = server.join().expect("server thread");

        assert_eq!(token.secret().expose(), "tok-0009");
        assert!(token.expires_at().is_some());
        assert!(
            request.starts_with("POST /oauth/token HTTP/1.1"),
            "{request}"
        );
        assert!(request.contains("application/x-www-form-urlencoded"));
        assert!(request.ends_with(
            "grant_type=client_credentials&client_id=sender-1&client_secret=s3cr3t-value&scope=webhooks"
        ));
    }

    #[tokio::test]
    async fn client_credentials_reports_invalid_client_without_the_secret() {
        let (base, server) = serve_once("401 Unauthorized", r#"{"error":"invalid_client"}"#);
        let exchanger = ClientCredentials::new(&base, "sender-1", SECRET).expect("valid");

        let error = exchanger.exchange().await.expect_err("refused");
        server.join().expect("server thread");

        assert_eq!(error.kind(), ErrorKind::TokenExchange);
        assert!(error.to_string().contains("invalid_client"));
        assert!(!format!("{error} {error:?}").contains(SECRET));
    }

    #[tokio::test]
    async fn client_credentials_reports_an_unreachable_endpoint() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("address"));
        drop(listener);
        let exchanger = ClientCredentials::new(&base, "sender-1", SECRET).expect("valid");

        let error = exchanger.exchange().await.expect_err("unreachable");
        assert_eq!(error.kind(), ErrorKind::TokenExchange);
        assert!(error.is_retryable());
        assert!(!format!("{error:?}").contains(SECRET));
    }
}
