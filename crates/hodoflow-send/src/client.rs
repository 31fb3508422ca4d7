//! The SDK client the global options describe.
//!
//! The token exchange goes through [`Recording`], which adds every access token issued to this
//! process to the redaction set (`redact.rs`) before the SDK sends it anywhere, so a server that
//! echoes the bearer token it received has it redacted from every value printed. The tool's own
//! words are never searched, so any token will do, even `accepted`. The SDK refuses one shorter
//! than 8 bytes or holding a control character.

use std::sync::Arc;

use hodoflow_retry::{
    Budget, HodoflowClient,
    auth::{ClientCredentials, ExchangeFuture, TokenExchanger},
    hodoflow::HodoflowBuilder,
    webhook::DEFAULT_WEBHOOK_BODY_LIMIT,
};

use crate::base_url::BaseUrl;
use crate::cli::{Cli, Signing};
use crate::limit::TriggerLimitArg;

/// The most bytes of one webhook body: the SDK's default, Hodoflow's documented limit. A batch
/// checks every line against it before sending any.
pub(crate) const WEBHOOK_BODY_LIMIT: usize = DEFAULT_WEBHOOK_BODY_LIMIT;

/// Builds the client: base URL, client credentials (and token URL), the budget, and the signing
/// secrets `signing` names, if any.
///
/// # Errors
///
/// As [`builder`].
pub(crate) fn build(
    cli: &Cli,
    trigger_base: Option<&str>,
    signing: Option<&Signing>,
) -> Result<HodoflowClient, String> {
    builder(cli, trigger_base, signing)?
        .build()
        .map_err(|e| e.to_string())
}

/// Paces the client's deliveries by the one rule of `batch` and `outbox worker`
/// (`pacing.rs`): `--trigger-limit` when given (`off`: no pacing), else the server's
/// `RateLimit-Policy`, else Hodoflow's documented 100 per 60 s.
pub(crate) fn paced(builder: HodoflowBuilder, flag: Option<TriggerLimitArg>) -> HodoflowBuilder {
    match flag {
        Some(TriggerLimitArg(Some(limit))) => builder.trigger_limit(limit),
        Some(TriggerLimitArg(None)) => builder,
        None => builder.pace_triggers(),
    }
}

/// The builder of the client [`build`] makes.
///
/// `trigger_base` is the base URL in front of a trigger URL's route; it serves as the base URL
/// when `--base-url` is not given, and must agree with it when it is.
///
/// # Errors
///
/// A sentence for the user, with no secret in it, when an option is missing or refused.
pub(crate) fn builder(
    cli: &Cli,
    trigger_base: Option<&str>,
    signing: Option<&Signing>,
) -> Result<HodoflowBuilder, String> {
    let given = cli
        .base_url
        .as_deref()
        .map(|text| BaseUrl::parse(text, "--base-url (HODOFLOW_BASE_URL)"))
        .transpose()?;
    let from_trigger = trigger_base
        .map(|text| BaseUrl::parse(text, "the trigger URL's base"))
        .transpose()?;
    let base_url = match (given, from_trigger) {
        (Some(given), Some(from_trigger)) if !given.same_as(&from_trigger) => {
            return Err(format!(
                "the trigger URL is on {from_trigger}, not on --base-url {given}"
            ));
        }
        (Some(given), _) => given,
        (None, Some(from_trigger)) => from_trigger,
        (None, None) => {
            return Err("no base URL: pass --base-url URL or set HODOFLOW_BASE_URL".to_owned());
        }
    };
    let client_id = cli
        .client_id
        .as_deref()
        .filter(|id| !id.trim().is_empty())
        .ok_or("no client ID: pass --client-id ID or set HODOFLOW_CLIENT_ID")?;
    let signing_secrets = match signing.and_then(|s| s.signing_secret_file.as_deref()) {
        Some(file) => crate::secret::signing_secrets(file)?,
        None => Vec::new(),
    };
    let secret = crate::secret::client_secret(cli.client_secret_file.as_deref())?;
    let mut credentials =
        ClientCredentials::new(base_url.as_str(), client_id, secret).map_err(|e| e.to_string())?;
    if let Some(token_url) = &cli.token_url {
        crate::base_url::check_token_url(token_url)?;
        credentials = credentials
            .token_url(token_url.trim())
            .map_err(|e| format!("--token-url: {e}"))?;
    }
    let budget = Budget::new()
        .max_attempts(cli.max_attempts)
        .paced_retries(cli.paced_retries)
        .max_elapsed(cli.max_elapsed)
        .attempt_timeout(cli.attempt_timeout);
    Ok(HodoflowClient::builder(base_url.as_str())
        .exchanger(Arc::new(Recording { inner: credentials }))
        .webhook_body_limit(WEBHOOK_BODY_LIMIT)
        .budget(budget)
        .signing_secrets(signing_secrets))
}

/// Client credentials that add each issued token to the redaction set.
#[derive(Debug)]
struct Recording {
    inner: ClientCredentials,
}

impl TokenExchanger for Recording {
    fn exchange(&self) -> ExchangeFuture<'_> {
        Box::pin(async move {
            let token = self.inner.exchange().await?;
            crate::redact::add(token.secret().expose());
            Ok(token)
        })
    }

    fn secrets(&self) -> Vec<hodoflow_retry::Secret> {
        self.inner.secrets()
    }
}
