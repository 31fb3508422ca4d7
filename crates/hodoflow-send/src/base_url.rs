//! The URLs of the command line: `--base-url`, a trigger URL's base, and `--token-url`.
//!
//! Checked here, before any client is built, with this tool's own messages: `http` or `https`
//! only; no userinfo, since `user:password@` would send `Authorization: Basic` beside the bearer
//! token and put a password where messages show URLs; and no query or fragment in a base URL,
//! since paths are appended to it and a `?…` would send every request to the wrong place. Two
//! base URLs are the same when scheme, host (case-insensitively, as URLs define hosts), port and
//! path prefix are. No message here quotes the text it refuses; [`shown`] prints a checked URL.

use url::Url;

/// A base URL that passed the rules, and the text it was given as.
#[derive(Debug, Clone)]
pub(crate) struct BaseUrl {
    url: Url,
    text: String,
}

impl BaseUrl {
    /// Checks a base URL; `what` names it in the refusal (`--base-url`).
    ///
    /// # Errors
    ///
    /// A sentence naming `what` and the rule it breaks, without the URL.
    pub(crate) fn parse(text: &str, what: &str) -> Result<Self, String> {
        let text = text.trim();
        let url = http_url(text, what)?;
        if url.query().is_some() || url.fragment().is_some() || text.contains(['?', '#']) {
            return Err(format!(
                "{what} must not have a query (?…) or a fragment (#…): paths are appended to it"
            ));
        }
        Ok(Self {
            url,
            text: text.to_owned(),
        })
    }

    /// The text to hand to the SDK, as given.
    pub(crate) fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether both name the same server and path prefix: scheme, host (case-insensitively),
    /// port (the scheme's default when absent) and path, trailing slashes aside.
    pub(crate) fn same_as(&self, other: &Self) -> bool {
        let (a, b) = (&self.url, &other.url);
        a.scheme() == b.scheme()
            && a.host_str()
                .zip(b.host_str())
                .is_some_and(|(a, b)| a.eq_ignore_ascii_case(b))
            && a.port_or_known_default() == b.port_or_known_default()
            && a.path().trim_end_matches('/') == b.path().trim_end_matches('/')
    }
}

impl std::fmt::Display for BaseUrl {
    /// The checked URL, which has no userinfo, query or fragment to hide.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&shown(&self.url))
    }
}

/// Checks `--token-url`: an `http` or `https` URL with a host and no userinfo.
///
/// # Errors
///
/// A sentence naming the option and the rule it breaks, without the URL.
pub(crate) fn check_token_url(text: &str) -> Result<(), String> {
    http_url(text.trim(), "--token-url").map(drop)
}

/// `url` without userinfo, query or fragment: what a message may show.
pub(crate) fn shown(url: &Url) -> String {
    let mut url = url.clone();
    let _ = url.set_username("");
    let _ = url.set_password(None);
    url.set_query(None);
    url.set_fragment(None);
    url.as_str().trim_end_matches('/').to_owned()
}

/// Parses an `http` or `https` URL with a host and no userinfo.
fn http_url(text: &str, what: &str) -> Result<Url, String> {
    let url = Url::parse(text)
        .map_err(|e| format!("{what} is not a URL ({e}); expected http(s)://host[:port][/path]"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!("{what} must be an http or https URL"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(format!(
            "{what} must not hold a user name or password (user:password@; it is not shown): \
             the credentials are --client-id and the client secret"
        ));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(format!("{what} has no host"));
    }
    Ok(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base(text: &str) -> Result<BaseUrl, String> {
        BaseUrl::parse(text, "--base-url")
    }

    #[test]
    fn hosts_compare_case_insensitively_and_default_ports_and_slashes_do_not_matter() {
        let same = [
            ("http://LOCALHOST:1", "http://localhost:1"),
            ("http://localhost:1/", "http://localhost:1"),
            ("https://H.example:443/prefix/", "https://h.example/prefix"),
            ("HTTP://h.example", "http://h.example:80"),
        ];
        for (a, b) in same {
            assert!(base(a).unwrap().same_as(&base(b).unwrap()), "{a} {b}");
        }
        let different = [
            ("http://localhost:1", "http://localhost:2"),
            ("http://localhost:1", "https://localhost:1"),
            ("http://h.example/a", "http://h.example/b"),
            ("http://h.example/A", "http://h.example/a"),
            ("http://h.example", "http://g.example"),
        ];
        for (a, b) in different {
            assert!(!base(a).unwrap().same_as(&base(b).unwrap()), "{a} {b}");
        }
    }

    #[test]
    fn refusals_name_the_rule_and_never_quote_the_url() {
        for (text, says) in [
            ("http://user:pa55word@h.example", "user name or password"),
            ("http://pa55word@h.example", "user name or password"),
            ("http://h.example/?pa55word=1", "query"),
            ("http://h.example/#pa55word", "fragment"),
            ("http://h.example/?", "query"),
            ("ftp://h.example/pa55word", "http or https"),
            ("file:///pa55word", "http or https"),
            ("pa55word", "not a URL"),
            ("", "not a URL"),
        ] {
            let error = base(text).unwrap_err();
            assert!(error.contains(says), "{text}: {error}");
            assert!(!error.contains("pa55word"), "{text}: {error}");
        }
        assert!(check_token_url("http://u:pa55word@h.example/oauth/token").is_err());
        assert!(check_token_url("http://h.example/oauth/token").is_ok());
    }

    #[test]
    fn a_url_is_shown_without_userinfo_query_or_fragment() {
        let url = Url::parse("http://u:pa55word@h.example:8/p/?q=1#f").unwrap();
        assert_eq!(shown(&url), "http://h.example:8/p");
        assert_eq!(
            base("http://H.example/").unwrap().to_string(),
            "http://h.example"
        );
    }
}
