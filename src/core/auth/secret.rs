//! Secrets that never print: [`Secret`] and [`AccessToken`] show `<redacted>` in `Debug` and
//! `Display`.

use std::fmt;
use std::sync::Arc;

use http::HeaderValue;
use tokio::time::Instant;

use crate::core::error::{Error, Result};
use crate::core::runtime;
use std::time::Duration;

/// A secret string, such as a client secret or a bearer token.
///
/// `Debug` and `Display` print `<redacted>`; only [`Secret::expose`] gives the value.
///
/// # Examples
///
/// ```
/// use hodoflow_retry::Secret;
///
/// let secret = Secret::new("s3cr3t");
/// assert_eq!(format!("{secret} {secret:?}"), "<redacted> <redacted>");
/// assert_eq!(secret.expose(), "s3cr3t");
/// ```
#[derive(Clone)]
pub struct Secret(Arc<str>);

impl Secret {
    /// Wraps a secret value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(Arc::from(value.into()))
    }

    /// The secret value. Never log it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl From<String> for Secret {
    fn from(value: String) -> Self {
        Self::new(value)
    }
}

impl From<&str> for Secret {
    /// One allocation: the text is copied once, into the shared value.
    fn from(value: &str) -> Self {
        Self(Arc::from(value))
    }
}

/// A bearer token and when it expires. `Debug` prints the token as `<redacted>`.
#[derive(Debug, Clone)]
pub struct AccessToken {
    secret: Secret,
    expires_at: Option<Instant>,
}

impl AccessToken {
    /// A token that expires at `expires_at`, or that is only replaced after a 401 when `None`.
    pub fn new(secret: impl Into<Secret>, expires_at: Option<Instant>) -> Self {
        Self {
            secret: secret.into(),
            expires_at,
        }
    }

    /// A token that expires `lifetime` from now, as an `expires_in` answer says.
    pub fn expiring_in(secret: impl Into<Secret>, lifetime: Duration) -> Self {
        Self::new(secret, runtime::now().checked_add(lifetime))
    }

    /// The token. Never log it.
    pub fn secret(&self) -> &Secret {
        &self.secret
    }

    /// When the token expires, if known.
    pub fn expires_at(&self) -> Option<Instant> {
        self.expires_at
    }

    /// The `Authorization: Bearer …` value, marked sensitive.
    ///
    /// An [`ErrorKind::TokenExchange`](crate::ErrorKind::TokenExchange) error when the token
    /// cannot be sent in a header.
    pub(crate) fn authorization(&self) -> Result<HeaderValue> {
        let mut value = HeaderValue::from_str(&format!("Bearer {}", self.secret.expose()))
            .map_err(|_| Error::token_exchange("the token cannot be sent in a header"))?;
        value.set_sensitive(true);
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::error::ErrorKind;

    const SECRET: &str = "s3cr3t-value";

    #[test]
    fn secrets_and_tokens_print_redacted() {
        let secret = Secret::new(SECRET);
        let token = AccessToken::new(SECRET, None);
        for shown in [
            format!("{secret}"),
            format!("{secret:?}"),
            format!("{token:?}"),
        ] {
            assert!(!shown.contains(SECRET), "{shown}");
        }
        assert!(format!("{token:?}").contains("<redacted>"));
    }

    #[test]
    fn authorization_is_a_sensitive_bearer_value() {
        let value = AccessToken::new("abc", None)
            .authorization()
            .expect("valid token");
        assert_eq!(value, "Bearer abc");
        assert!(value.is_sensitive());
        let refused = AccessToken::new("a\nb", None).authorization();
        assert_eq!(
            refused.expect_err("invalid").kind(),
            ErrorKind::TokenExchange
        );
    }
}
