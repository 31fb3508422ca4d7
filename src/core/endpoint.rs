//! Which URLs the client sends to.
//!
//! A base URL names a server and, optionally, a path prefix: `https://hodoflow.example` or
//! `http://127.0.0.1:8080/prefix`. It is checked once, when the client is built, so that no
//! request can go somewhere its caller did not mean:
//! - `http` or `https` with a host: nothing else carries a bearer token;
//! - no userinfo (`user:password@`): reqwest would send it as `Authorization: Basic` beside the
//!   bearer token, and error messages would echo the password;
//! - no query or fragment: every path is appended to the base, so `?a=b` in the base would move
//!   the route into the query and send each call to the wrong place.
//!
//! Hosts are compared as URLs define them: the parser lower-cases them, so `LOCALHOST` and
//! `localhost` are one host. No message here quotes the URL: it may hold a secret.

use crate::core::error::{Error, Result};

/// `text` as a base URL, or an `invalid_input` error naming `what` (such as "the base URL").
pub(crate) fn base_url(text: &str, what: &str) -> Result<reqwest::Url> {
    let url = endpoint_url(text, what)?;
    if url.query().is_some() || url.fragment().is_some() {
        return Err(Error::invalid_input(format_args!(
            "{what} must not have a query or a fragment: paths are appended to it"
        )));
    }
    Ok(url)
}

/// `text` as the URL of one endpoint (such as a token endpoint): like a base URL, but a query
/// is allowed. No fragment: it is never sent, so it can only be a mistake.
pub(crate) fn endpoint_url(text: &str, what: &str) -> Result<reqwest::Url> {
    let url = reqwest::Url::parse(text.trim()).map_err(|source| {
        Error::invalid_input(format_args!(
            "{what} is not a URL ({source}; it is not shown: it may hold a secret)"
        ))
    })?;
    if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
        return Err(Error::invalid_input(format_args!(
            "{what} must be an http(s) URL with a host"
        )));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(Error::invalid_input(format_args!(
            "{what} must not hold a user name or password (it is not shown); credentials go in client_credentials(..) or an exchanger"
        )));
    }
    if url.fragment().is_some() {
        return Err(Error::invalid_input(format_args!(
            "{what} must not have a fragment"
        )));
    }
    Ok(url)
}

/// `text` as it may be shown: any userinfo in front of the host replaced by `<redacted>`, for
/// `Debug` of a URL that was never checked.
pub(crate) fn shown(text: &str) -> std::borrow::Cow<'_, str> {
    let Some(scheme_end) = text.find("://").map(|at| at + 3) else {
        return text.into();
    };
    let authority_end = text[scheme_end..]
        .find(['/', '?', '#'])
        .map_or(text.len(), |at| scheme_end + at);
    match text[scheme_end..authority_end].rfind('@') {
        Some(at) => format!(
            "{}{}{}",
            &text[..scheme_end],
            crate::core::redact::REDACTED,
            &text[scheme_end + at..]
        )
        .into(),
        None => text.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::error::ErrorKind;

    fn refused(text: &str) -> String {
        let error = base_url(text, "the base URL").expect_err(text);
        assert_eq!(error.kind(), ErrorKind::InvalidInput);
        error.to_string()
    }

    #[test]
    fn takes_http_and_https_with_a_host_and_an_optional_prefix() {
        for text in [
            "http://127.0.0.1:8080",
            "https://hodoflow.example/",
            "http://[::1]:9/prefix/",
            " https://hodoflow.example ",
        ] {
            assert!(base_url(text, "the base URL").is_ok(), "{text}");
        }
    }

    #[test]
    fn refuses_userinfo_without_echoing_it() {
        for text in [
            "http://user:hunter2@127.0.0.1:8080",
            "http://hunter2@127.0.0.1:8080",
            "https://:hunter2@hodoflow.example",
        ] {
            let message = refused(text);
            assert!(message.contains("user name or password"), "{message}");
            assert!(!message.contains("hunter2"), "{message}");
        }
    }

    #[test]
    fn refuses_a_query_or_fragment_in_a_base_but_a_query_in_an_endpoint() {
        assert!(refused("http://127.0.0.1:8080/?tenant=a").contains("query"));
        assert!(refused("http://127.0.0.1:8080/#top").contains("fragment"));
        assert!(endpoint_url("http://127.0.0.1:8080/token?tenant=a", "the token URL").is_ok());
        assert!(endpoint_url("http://127.0.0.1:8080/token#x", "the token URL").is_err());
    }

    #[test]
    fn refuses_other_schemes_and_hostless_urls_without_quoting_them() {
        for text in [
            "ftp://127.0.0.1/",
            "file:///etc/passwd",
            "mailto:a@b",
            "hodoflow.example",
            "",
        ] {
            let message = refused(text);
            assert!(
                !message.contains("passwd") && !message.contains("a@b"),
                "{message}"
            );
        }
    }

    #[test]
    fn shows_a_url_without_its_userinfo() {
        assert_eq!(
            shown("http://u:hunter2@127.0.0.1:8/x@y?q=a@b"),
            "http://<redacted>@127.0.0.1:8/x@y?q=a@b"
        );
        assert_eq!(shown("https://h.example/a"), "https://h.example/a");
        assert_eq!(shown("not a url @ all"), "not a url @ all");
    }

    #[test]
    fn hosts_are_lower_cased_as_urls_define_them() {
        let upper = base_url("HTTP://LOCALHOST:8080", "the base URL").unwrap();
        let lower = base_url("http://localhost:8080", "the base URL").unwrap();
        assert_eq!(upper, lower);
        assert_eq!(upper.host_str(), Some("localhost"));
    }
}
