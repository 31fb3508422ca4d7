//! Hodoflow's paths fit for a log line.
//!
//! A webhook URL holds its trigger token, a secret (Hodoflow's webhook sender guide: "redact URL
//! path tokens"), and a query string may hold anything. So requests and adapters log routes only
//! through [`route_of`] and [`redact_path`].

use std::borrow::Cow;

use crate::core::error::{Error, Result};
use crate::core::limit::RouteKey;
use crate::core::redact::REDACTED;
use crate::core::request::is_path_segment;
use crate::vendors::hodoflow::tables::WEBHOOKS_PREFIX;
#[cfg(feature = "middleware")]
use {
    crate::vendors::Surface,
    crate::vendors::hodoflow::tables::{GRAPHQL_PATH, JSON_API_PREFIX},
    http::Method,
};

/// The route key of the webhook trigger with `token`: a trigger is a route with a window of its
/// own, and scopes name it `trigger <hash>`.
pub(crate) fn trigger_key(token: &str) -> RouteKey {
    RouteKey::named("trigger", token)
}

/// An `invalid_input` error unless the trigger token is one URL path segment. The message never
/// quotes it: it is a secret.
pub(crate) fn check_trigger_token(token: &str) -> Result<()> {
    if is_path_segment(token) {
        return Ok(());
    }
    Err(Error::invalid_input(
        "the trigger token must be one non-empty URL path segment (it is not shown: it is a secret)",
    ))
}

/// The Hodoflow surface of `method` on `path`, as an adapter meets a request it did not build;
/// `None` when the path is none of Hodoflow's (`/api/json/`, `/api/v1/webhooks/`,
/// `/api/graphql`).
#[cfg(feature = "middleware")]
pub(crate) fn surface_of(method: &Method, path: &str) -> Option<Surface> {
    let claimed = path.contains(JSON_API_PREFIX)
        || path.contains(WEBHOOKS_PREFIX)
        || path.ends_with(GRAPHQL_PATH);
    if !claimed {
        return None;
    }
    let safe = [Method::GET, Method::HEAD, Method::OPTIONS, Method::TRACE].contains(method);
    Some(if safe {
        Surface::Read
    } else if *method == Method::POST && path.contains(WEBHOOKS_PREFIX) {
        Surface::Webhook
    } else if *method == Method::POST && path.ends_with(GRAPHQL_PATH) {
        Surface::GraphQl
    } else {
        Surface::JsonApiWrite
    })
}

/// The token-only webhook route as it is logged, its token redacted.
pub(crate) const TOKEN_ONLY_ROUTE: &str = "/api/v1/webhooks/<redacted>";

/// The path as it may be logged: no query, trigger token redacted.
pub(crate) fn route_of(path: &str) -> Cow<'static, str> {
    // The common webhook route needs no work: the whole token goes.
    if let Some(token) = path.strip_prefix(WEBHOOKS_PREFIX)
        && !token.is_empty()
        && !token.bytes().any(|b| matches!(b, b'/' | b'?' | b'#'))
    {
        return Cow::Borrowed(TOKEN_ONLY_ROUTE);
    }
    Cow::Owned(redact_path(
        path.split(['?', '#']).next().unwrap_or_default(),
    ))
}

/// `path` with its webhook trigger token replaced by `<redacted>` and its query and fragment left
/// out.
///
/// `/api/v1/webhooks/<token>` becomes `/api/v1/webhooks/<redacted>`; the legacy
/// `/api/v1/webhooks/<org>/<token>` keeps the organization domain. Anything else after a
/// `webhooks` segment is redacted whole, so an unexpected shape never leaks a token.
pub(crate) fn redact_path(path: &str) -> String {
    let end = path.find(['?', '#']).unwrap_or(path.len());
    let path = &path[..end];
    let segments: Vec<&str> = path.split('/').collect();
    let Some(at) = segments
        .iter()
        .position(|segment| segment.eq_ignore_ascii_case("webhooks"))
    else {
        return path.to_owned();
    };
    let (route, rest) = segments.split_at(at + 1);
    let mut redacted = route.join("/");
    match rest {
        [] => {}
        [org, token] if !org.is_empty() && !token.is_empty() => {
            redacted.push('/');
            redacted.push_str(org);
            redacted.push('/');
            redacted.push_str(REDACTED);
        }
        _ => {
            redacted.push('/');
            redacted.push_str(REDACTED);
        }
    }
    redacted
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_the_trigger_token() {
        assert_eq!(
            redact_path("/api/v1/webhooks/tr1gg3r-t0k3n"),
            "/api/v1/webhooks/<redacted>"
        );
    }

    #[test]
    fn redacts_the_token_of_the_legacy_path_but_keeps_the_organization() {
        assert_eq!(
            redact_path("/api/v1/webhooks/acme.example/tr1gg3r-t0k3n"),
            "/api/v1/webhooks/acme.example/<redacted>"
        );
    }

    #[test]
    fn leaves_the_query_and_fragment_out() {
        assert_eq!(
            redact_path("/api/json/v1/articles?filter[email]=a@b.example#x"),
            "/api/json/v1/articles"
        );
        assert_eq!(
            redact_path("/api/v1/webhooks/tr1gg3r?sig=abc"),
            "/api/v1/webhooks/<redacted>"
        );
    }

    #[test]
    fn redacts_unexpected_shapes_whole() {
        for path in [
            "/api/v1/webhooks/tr1gg3r/",
            "/api/v1/webhooks/a/b/tr1gg3r",
            "/api/v1/webhooks//tr1gg3r",
            "/API/V1/WEBHOOKS/tr1gg3r",
            "/prefix/api/v1/webhooks/tr1gg3r",
        ] {
            let redacted = redact_path(path);
            assert!(!redacted.contains("tr1gg3r"), "{path} -> {redacted}");
            assert!(redacted.ends_with("<redacted>"), "{path} -> {redacted}");
        }
    }

    #[test]
    fn keeps_paths_without_a_token() {
        assert_eq!(
            redact_path("/api/json/v1/workflow_runs/550e8400"),
            "/api/json/v1/workflow_runs/550e8400"
        );
        assert_eq!(redact_path("/api/v1/webhooks"), "/api/v1/webhooks");
        assert_eq!(redact_path(""), "");
    }
}
