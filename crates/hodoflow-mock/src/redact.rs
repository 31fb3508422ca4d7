//! Trigger tokens are secrets: paths are redacted before they are logged or recorded.

const WEBHOOKS: &str = "/api/v1/webhooks/";

/// The path with the trigger token of a webhook route replaced by `<redacted>`.
///
/// `/api/v1/webhooks/<token>` and `/api/v1/webhooks/<org>/<token>` keep
/// everything but the token; other paths are returned as they are.
pub fn redact_path(path: &str) -> String {
    let Some(rest) = path.strip_prefix(WEBHOOKS) else {
        return path.to_owned();
    };
    match rest.split_once('/') {
        Some((org, _token)) => format!("{WEBHOOKS}{org}/<redacted>"),
        None => format!("{WEBHOOKS}<redacted>"),
    }
}

#[cfg(test)]
mod tests {
    use super::redact_path;

    #[test]
    fn redacts_the_token_of_both_webhook_routes() {
        assert_eq!(
            redact_path("/api/v1/webhooks/trg_secret"),
            "/api/v1/webhooks/<redacted>"
        );
        assert_eq!(
            redact_path("/api/v1/webhooks/acme/trg_secret"),
            "/api/v1/webhooks/acme/<redacted>"
        );
        assert_eq!(
            redact_path("/api/json/v1/projects/1"),
            "/api/json/v1/projects/1"
        );
    }
}
