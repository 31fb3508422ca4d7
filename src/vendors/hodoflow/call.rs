//! Per-call builders: what one operation sends and within which budget.
//!
//! Input is checked in `send()` before anything goes on the wire: a bad path,
//! a header the client owns, an oversize webhook body or a missing delivery
//! ID is an `invalid_input` or `payload_too_large` error with no attempt made.

use std::borrow::Cow;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method};

use crate::core::answer::FinalAnswer;
use crate::core::auth::secret::Secret;
use crate::core::call_options::{CallOptions, per_call_setters};
use crate::core::engine::Policy;
use crate::core::error::{Error, ErrorKind, Result};
use crate::core::key::{DeliveryId, IdempotencyKey};
use crate::core::redact::BodyLen;
use crate::core::request::{FixedRequest, is_path_segment};
use crate::core::shared::Shared;
use crate::core::signing::Signer;
use crate::core::transport::Http;
use crate::vendors::hodoflow::outcome::{Delivery, Response, WebhookOutcome};
use crate::vendors::hodoflow::routes::redact_path;
use crate::vendors::hodoflow::routes::{
    TOKEN_ONLY_ROUTE, check_trigger_token, route_of, trigger_key,
};
use crate::vendors::hodoflow::settings::Settings;
use crate::vendors::hodoflow::tables::{UNSUPPORTED_AUTHENTICATION, WEBHOOK, WEBHOOKS_PREFIX};

/// What a [`Call`] addresses.
pub(crate) enum Operation {
    Write {
        method: Method,
        path: String,
        key: IdempotencyKey,
        body: Bytes,
    },
    Read {
        method: Method,
        path: String,
    },
    GraphQl {
        body: Bytes,
    },
}

impl fmt::Debug for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Operation::Write {
                method,
                path,
                key,
                body,
            } => f
                .debug_struct("Write")
                .field("method", method)
                .field("path", &redact_path(path))
                .field("key", key)
                .field("body", &BodyLen(body.len()))
                .finish(),
            Operation::Read { method, path } => f
                .debug_struct("Read")
                .field("method", method)
                .field("path", &redact_path(path))
                .finish(),
            Operation::GraphQl { body } => f
                .debug_struct("GraphQl")
                .field("body", &BodyLen(body.len()))
                .finish(),
        }
    }
}

/// A write, read or GraphQL call, sent with [`send`](Call::send).
#[derive(Debug)]
#[must_use = "a call does nothing until it is sent"]
pub struct Call<'a> {
    shared: &'a Shared,
    target: Operation,
    options: CallOptions,
}

impl<'a> Call<'a> {
    pub(crate) fn new(shared: &'a Shared, target: Operation) -> Self {
        Self {
            shared,
            target,
            options: CallOptions::of(shared),
        }
    }

    /// Adds headers, sent unchanged on every attempt. `Authorization` and
    /// `Idempotency-Key` are the client's own and refused.
    pub fn headers(mut self, headers: HeaderMap) -> Self {
        self.options.headers.extend(headers);
        self
    }

    per_call_setters!("call");

    /// Sends the call, retrying as the surface's matrix says.
    ///
    /// The request is checked and fixed when `send` is called; nothing is sent until the
    /// future is awaited, and a bad request's error comes from awaiting it.
    ///
    /// Cancellation is safe: dropping the future stops sending; an attempt already on the
    /// wire may still run on the server, so resend the same operation with the same key.
    ///
    /// # Errors
    ///
    /// An [`Error`] whose [`kind`](Error::kind) says why it stopped and whose
    /// [`may_have_run`](Error::may_have_run) says whether the operation may have taken effect.
    pub fn send(self) -> impl Future<Output = Result<Response>> + Send + 'a {
        // Checked and moved into the call's one allocation here, so that the future holds the
        // allocation and not the builder.
        let shared = self.shared;
        let call = self.fixed().map(|(request, policy)| {
            let then = |answered, _| response_of(answered);
            (shared.engine).run_boxed(request, policy, Http(&shared.http), then)
        });
        async move { call?.await }
    }

    /// The call's request and policy, checked. It takes the builder whole, so that the send
    /// future does not hold it while the call is in flight.
    fn fixed(self) -> Result<(FixedRequest, Arc<Policy>)> {
        let base = &self.shared.base;
        let headers = &self.options.headers;
        let request = match self.target {
            Operation::Write {
                method,
                path,
                key,
                body,
            } => FixedRequest::write(base, method, &path, &key, body, headers)?,
            Operation::Read { method, path } => FixedRequest::read(base, method, &path, headers)?,
            Operation::GraphQl { body } => FixedRequest::graphql(base, body)?,
        };
        Ok((request, self.options.policy))
    }
}

/// Runs `request` through the client's engine over HTTP; its final answer as a [`Response`].
pub(crate) async fn send_for_response(
    shared: &Shared,
    request: FixedRequest,
    policy: Arc<Policy>,
) -> Result<Response> {
    let then = |answered, _| response_of(answered);
    (shared.engine)
        .run_boxed(request, policy, Http(&shared.http), then)
        .await
}

/// A call's final answer as a [`Response`].
fn response_of(answered: Result<FinalAnswer>) -> Result<Response> {
    let answered = answered?;
    Ok(Response::new(
        answered.status,
        answered.headers,
        answered.body,
        answered.attempts,
    ))
}

/// A webhook delivery, sent with [`send`](Delivering::send).
#[must_use = "a delivery does nothing until it is sent"]
pub struct Delivering<'a> {
    shared: &'a Shared,
    settings: &'a Settings,
    trigger_token: Secret,
    body: Bytes,
    id: Option<DeliveryId>,
    legacy_org: Option<String>,
    options: CallOptions,
    /// This delivery's own signing secrets; `None`: the client's.
    signing_secrets: Option<Vec<Secret>>,
}

impl fmt::Debug for Delivering<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Delivering")
            .field("trigger_token", &self.trigger_token)
            .field("body", &BodyLen(self.body.len()))
            .field("id", &self.id)
            .field("legacy_org", &self.legacy_org)
            .field("policy", &self.options.policy)
            .field(
                "signing_secrets",
                &self.signing_secrets.as_ref().map(Vec::len),
            )
            .finish_non_exhaustive()
    }
}

impl<'a> Delivering<'a> {
    pub(crate) fn new(
        shared: &'a Shared,
        settings: &'a Settings,
        trigger_token: Secret,
        body: Bytes,
    ) -> Self {
        Self {
            shared,
            settings,
            trigger_token,
            body,
            id: None,
            legacy_org: None,
            options: CallOptions::of(shared),
            signing_secrets: None,
        }
    }

    /// Signs this delivery with `secret` instead of the client's secrets: for a sender that
    /// holds one secret per trigger. Called again, it adds a secret (a rotation), as
    /// [`signing_secrets`](Self::signing_secrets) does. See
    /// [`HodoflowBuilder::signing_secret`](crate::hodoflow::HodoflowBuilder::signing_secret).
    ///
    /// Default: the client's signing secrets, if any.
    pub fn signing_secret(mut self, secret: impl Into<Secret>) -> Self {
        self.signing_secrets
            .get_or_insert_with(Vec::new)
            .push(secret.into());
        self
    }

    /// Signs this delivery with each of `secrets` instead of the client's secrets (every
    /// attempt sends one signature per secret); an empty list sends this delivery unsigned. A
    /// malformed secret is an `invalid_input` error from [`send`](Self::send), before anything
    /// is sent.
    ///
    /// Default: the client's signing secrets, if any.
    pub fn signing_secrets<S: Into<Secret>>(
        mut self,
        secrets: impl IntoIterator<Item = S>,
    ) -> Self {
        self.signing_secrets = Some(secrets.into_iter().map(Into::into).collect());
        self
    }

    /// The stable delivery ID of this event, sent as `Idempotency-Key` (or as the provider
    /// header it came from) on every attempt. Generate it once per logical event, for example
    /// with [`IdempotencyKey::from_operation_id`], and persist it with the job.
    pub fn delivery_id(mut self, id: DeliveryId) -> Self {
        self.id = Some(id);
        self
    }

    /// Adds headers, sent unchanged on every attempt. A relay passes its provider's
    /// delivery header here (`X-GitHub-Delivery`, `X-Shopify-Webhook-Id`,
    /// `X-Twilio-Idempotency-Token`): without an explicit [`delivery_id`](Self::delivery_id),
    /// the first of them in the order of Hodoflow's webhook sender guide is the delivery ID.
    /// `X-Request-Id` never is.
    pub fn headers(mut self, headers: HeaderMap) -> Self {
        self.options.headers.extend(headers);
        self
    }

    /// Sends to the deprecated organization-qualified route
    /// `/api/v1/webhooks/<org_domain>/<token>`, logging a deprecation warning.
    ///
    /// Default: the token-only route `/api/v1/webhooks/<token>`.
    pub fn legacy_org(mut self, org_domain: impl Into<String>) -> Self {
        self.legacy_org = Some(org_domain.into());
        self
    }

    per_call_setters!("delivery");

    /// Waits up to `max` for a slot of the trigger's window (this client's pacing, or the
    /// window an outbox's workers share) before the delivery starts: its budget starts once it
    /// has its slot. For a sender with more events for a trigger than its window takes (a batch,
    /// a backlog), so an event queues, not a call whose budget runs out in the queue. A slot
    /// that does not come free within `max` stops the delivery with `budget_exhausted`, nothing
    /// sent.
    ///
    /// Default: none: a wait for the window is part of the delivery's budget.
    pub fn queue(mut self, max: Duration) -> Self {
        self.options.policy_mut().queue = Some(max);
        self
    }

    /// Delivers the event.
    ///
    /// `202 accepted` and `202 duplicate` are both success: a duplicate means the event was
    /// already accepted and no second run was created.
    ///
    /// The delivery is checked and fixed when `send` is called; nothing is sent until the
    /// future is awaited, and a bad delivery's error comes from awaiting it.
    ///
    /// Cancellation is safe: dropping the future stops sending; an attempt already on the
    /// wire may still start a run, so deliver again with the same delivery ID.
    ///
    /// # Errors
    ///
    /// Before anything is sent: `payload_too_large` over the client's body limit,
    /// `invalid_input` for a malformed trigger token, route or signing secret, or a missing
    /// delivery ID. After: an [`Error`] whose [`may_have_run`](Error::may_have_run) says whether
    /// the delivery may have started a run. A signed delivery the trigger refuses with `422
    /// Unsupported trigger authentication` stops after that one attempt (a retry signed with
    /// the same secrets cannot succeed), and the error names each secret's fingerprint.
    pub fn send(self) -> impl Future<Output = Result<Delivery>> + Send + 'a {
        // Checked and moved into the delivery's one allocation here, so that the future holds
        // the allocation and not the builder.
        let shared = self.shared;
        let call = self.fixed().map(|(request, id, policy)| {
            // The ID is held once, in the allocation, until the answer.
            let then = move |answered, request: FixedRequest| delivered(answered, &request, id);
            (shared.engine).run_boxed(request, policy, Http(&shared.http), then)
        });
        async move { call?.await }
    }

    /// The delivery's request, ID and policy, checked before anything is sent. It takes the
    /// builder whole, so that the send future does not hold it while the delivery is in flight.
    fn fixed(self) -> Result<(FixedRequest, DeliveryId, Arc<Policy>)> {
        let (inner, settings) = (self.shared, self.settings);
        if self.body.len() > settings.webhook_body_limit {
            return Err(Error::new(
                ErrorKind::PayloadTooLarge,
                format!(
                    "payload too large: the body of {} bytes is over the {}-byte webhook limit; nothing was sent",
                    self.body.len(),
                    settings.webhook_body_limit
                ),
            ));
        }
        let token = self.trigger_token.expose();
        check_trigger_token(token)?;
        let id = match self.id {
            Some(id) => id,
            None => DeliveryId::from_headers(&self.options.headers)?.ok_or_else(|| {
                Error::invalid_input(
                    "a delivery needs a stable delivery ID: set delivery_id(..) or pass a provider delivery header",
                )
            })?,
        };
        // The route under the webhook prefix, and the path as it is logged (the token redacted).
        let (route, logged) = match &self.legacy_org {
            Some(org) if is_path_segment(org) => {
                tracing::warn!(
                    org_domain = %org,
                    "the organization-qualified webhook route is deprecated: use the token-only route"
                );
                let route = format!("{org}/{token}");
                let logged = route_of(&[WEBHOOKS_PREFIX, &route].concat());
                (Cow::Owned(route), logged)
            }
            Some(_) => {
                return Err(Error::invalid_input(
                    "the organization domain must be one URL path segment",
                ));
            }
            // A token checked as one path segment: its path is logged as every such path is.
            None => (Cow::Borrowed(token), Cow::Borrowed(TOKEN_ONLY_ROUTE)),
        };
        let signer = match &self.signing_secrets {
            Some(secrets) => Signer::parse(secrets)?,
            None => settings.signer.clone(),
        };
        // Built of the webhook prefix and segments checked above, and keyed by the token, once
        // a route.
        let (url, trigger) = inner
            .routes
            .join(&inner.base, WEBHOOKS_PREFIX, &route, || trigger_key(token));
        let request = FixedRequest::webhook(
            url,
            logged,
            trigger,
            &id,
            self.body,
            &self.options.headers,
            signer,
        )?;
        Ok((request, id, self.options.policy))
    }
}

/// What a delivery's final answer says: its outcome, its ID and its attempts; a refusal of a
/// signed delivery's signature names the secrets' fingerprints.
fn delivered(
    answered: Result<FinalAnswer>,
    request: &FixedRequest,
    id: DeliveryId,
) -> Result<Delivery> {
    let answered = answered.map_err(|error| match &request.signer {
        Some(signer) => refused_signature(error, signer),
        None => error,
    })?;
    let outcome = WebhookOutcome::from_body(&answered.body).cleaned(&answered.cleaner);
    Ok(Delivery::new(outcome, id, answered.attempts))
}

/// The error of a signed delivery, naming the secrets' fingerprints when the trigger refused
/// their signatures (`422 Unsupported trigger authentication`).
fn refused_signature(error: Error, signer: &Signer) -> Error {
    let refused = error.status() == Some(http::StatusCode::UNPROCESSABLE_ENTITY)
        && error.body().is_some_and(|body| {
            WEBHOOK
                .codes(body)
                .iter()
                .any(|code| code == UNSUPPORTED_AUTHENTICATION)
        });
    if !refused {
        return error;
    }
    let secrets = match signer.len() {
        1 => "the signing secret with fingerprint",
        _ => "the signing secrets with fingerprints",
    };
    error.with_note(format!(
        "; the trigger refused the signatures of {secrets} {}",
        signer.fingerprints()
    ))
}
