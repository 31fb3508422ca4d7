//! `TRIGGER`: a trigger token, or the full trigger URL a workflow shows.
//!
//! The token is a secret (Hodoflow's webhook sender guide): it is wrapped in a [`Secret`] at once
//! and added to the redaction set, and no error message here quotes the argument, the URL or the
//! token.

use std::time::Duration;

use hodoflow_retry::{DeliveryId, Error, HodoflowClient, Secret, webhook::Delivery};

/// Where every trigger route starts.
const ROUTE: &str = "/api/v1/webhooks/";

/// A webhook trigger, taken apart.
#[derive(Debug)]
pub(crate) struct Trigger {
    /// The trigger token.
    pub(crate) token: Secret,
    /// The organization domain of a legacy `/api/v1/webhooks/<org>/<token>` URL.
    pub(crate) legacy_org: Option<String>,
    /// The base URL in front of the route, when a URL was given.
    pub(crate) base_url: Option<String>,
}

impl Trigger {
    /// Reads a token, `{base}/api/v1/webhooks/<token>` or `{base}/api/v1/webhooks/<org>/<token>`.
    ///
    /// # Errors
    ///
    /// A sentence that says what is wrong without repeating the secret.
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        let trigger = Self::read(text)?;
        crate::redact::add(trigger.token.expose());
        Ok(trigger)
    }

    /// The token of `text`, a `--trigger-token` of an outbox: a token or a trigger URL, not a
    /// legacy URL with an organization (a job names its trigger by the token alone).
    ///
    /// # Errors
    ///
    /// A sentence that says what is wrong without repeating the secret.
    pub(crate) fn token_of(text: &str) -> Result<Secret, String> {
        let trigger = Self::parse(text)?;
        if trigger.legacy_org.is_some() {
            return Err(
                "--trigger-token takes a token or a {base}/api/v1/webhooks/<token> \
                 URL, not a legacy URL with an organization"
                    .to_owned(),
            );
        }
        Ok(trigger.token)
    }

    /// `text`, a `TRIGGER` argument, as it may be shown: a trigger URL with its token (the last
    /// segment of its route) replaced by `MARKER`, anything else replaced whole. By position,
    /// never by searching the text for the token.
    pub(crate) fn shown(text: &str) -> String {
        let marker = crate::redact::MARKER;
        match Self::read(text) {
            Ok(Self {
                base_url: Some(base),
                legacy_org,
                ..
            }) => match legacy_org {
                Some(org) => format!("{base}{ROUTE}{org}/{marker}"),
                None => format!("{base}{ROUTE}{marker}"),
            },
            _ => marker.to_owned(),
        }
    }

    /// [`Trigger::parse`], without the redaction set.
    fn read(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let has_scheme = |scheme: &str| {
            text.get(..scheme.len())
                .is_some_and(|start| start.eq_ignore_ascii_case(scheme))
        };
        if !(has_scheme("http://") || has_scheme("https://")) {
            if text.is_empty() || text.contains('/') {
                return Err("TRIGGER must be a trigger token or an http(s) trigger URL \
                     (it is not shown: it is a secret)"
                    .to_owned());
            }
            return Ok(Self {
                token: Secret::new(text),
                legacy_org: None,
                base_url: None,
            });
        }
        if text.contains(['?', '#']) {
            return Err("the trigger URL must not have a query or a fragment".to_owned());
        }
        let parsed = url::Url::parse(text).map_err(|e| {
            format!("the trigger URL is not a URL ({e}; it is not shown: it holds a secret)")
        })?;
        if !parsed.username().is_empty() || parsed.password().is_some() {
            return Err("the trigger URL must not hold a user name or password \
                 (user:password@; it is not shown: it holds a secret)"
                .to_owned());
        }
        let Some(at) = text.find(ROUTE) else {
            return Err(format!(
                "the trigger URL has no {ROUTE} route (it is not shown: it holds a secret)"
            ));
        };
        let base_url = &text[..at];
        let segments: Vec<&str> = text[at + ROUTE.len()..]
            .trim_end_matches('/')
            .split('/')
            .collect();
        let (legacy_org, token) = match segments.as_slice() {
            [token] if !token.is_empty() => (None, *token),
            [org, token] if !org.is_empty() && !token.is_empty() => {
                (Some((*org).to_owned()), *token)
            }
            _ => {
                return Err(format!(
                    "the trigger URL must end in {ROUTE}<token> or {ROUTE}<org>/<token>"
                ));
            }
        };
        Ok(Self {
            token: Secret::new(token),
            legacy_org,
            base_url: Some(base_url.to_owned()),
        })
    }
}

/// Delivers `body` to `trigger` with `id`; an event of a batch may `queue` for its trigger's
/// window first.
pub(crate) async fn deliver(
    client: &HodoflowClient,
    trigger: &Trigger,
    body: Vec<u8>,
    id: &DeliveryId,
    queue: Option<Duration>,
) -> Result<Delivery, Error> {
    let mut delivering = client
        .deliver(trigger.token.clone(), body)
        .delivery_id(id.clone());
    if let Some(queue) = queue {
        delivering = delivering.queue(queue);
    }
    if let Some(org) = &trigger.legacy_org {
        delivering = delivering.legacy_org(org);
    }
    delivering.send().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_token_is_the_token() {
        let trigger = Trigger::parse("trg_abc").unwrap();
        assert_eq!(trigger.token.expose(), "trg_abc");
        assert_eq!(trigger.legacy_org, None);
        assert_eq!(trigger.base_url, None);
    }

    #[test]
    fn a_url_gives_its_base_and_token() {
        let trigger = Trigger::parse("http://127.0.0.1:8080/api/v1/webhooks/trg_abc").unwrap();
        assert_eq!(trigger.token.expose(), "trg_abc");
        assert_eq!(trigger.legacy_org, None);
        assert_eq!(trigger.base_url.as_deref(), Some("http://127.0.0.1:8080"));
    }

    #[test]
    fn a_legacy_url_gives_its_organization() {
        let trigger =
            Trigger::parse("https://h.example/prefix/api/v1/webhooks/acme/trg_abc/").unwrap();
        assert_eq!(trigger.token.expose(), "trg_abc");
        assert_eq!(trigger.legacy_org.as_deref(), Some("acme"));
        assert_eq!(
            trigger.base_url.as_deref(),
            Some("https://h.example/prefix")
        );
    }

    #[test]
    fn refusals_never_quote_the_token() {
        for text in [
            "http://h.example/hooks/trg_SECRET",
            "http://h.example/api/v1/webhooks/a/b/trg_SECRET",
            "http://h.example/api/v1/webhooks/trg_SECRET?x=1",
            "http://h.example/api/v1/webhooks/",
            "http://u:SECRET@h.example/api/v1/webhooks/trg_SECRET",
            "http://SECRET@h.example/api/v1/webhooks/trg_SECRET",
            "http://h.example:SECRET/api/v1/webhooks/trg_SECRET",
            "trg/SECRET",
            "",
        ] {
            let error = Trigger::parse(text).unwrap_err();
            assert!(!error.contains("SECRET"), "{error}");
        }
    }

    #[test]
    fn the_scheme_is_case_insensitive() {
        let trigger = Trigger::parse("HTTPS://h.example/api/v1/webhooks/trg_abc").unwrap();
        assert_eq!(trigger.token.expose(), "trg_abc");
        assert_eq!(trigger.base_url.as_deref(), Some("HTTPS://h.example"));
    }

    #[test]
    fn debug_redacts_the_token() {
        let trigger = Trigger::parse("trg_SECRET").unwrap();
        assert!(!format!("{trigger:?}").contains("SECRET"));
    }
}
