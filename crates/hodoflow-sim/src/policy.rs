//! The policies compared, side by side on the same seeded arrivals.

use std::sync::Arc;

use serde::Serialize;

use crate::peers::{
    BackonDefault, GrpcA6, JsLoop, Osdi22Client, Peer, PeerSender, ReqwestBuiltin,
    ReqwestRetryDefault,
};
use crate::recorder::Recorder;
use crate::scenario::Scenario;
use crate::sdk::SdkSender;
use crate::server::{Clock, Server};
use crate::workload::Deliver;

/// A client's retry policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Policy {
    /// The SDK's `HodoflowClient` with its defaults (the real engine).
    Sdk,
    /// The SDK with `RetryBudget::disabled()` (the real engine).
    SdkNoBudget,
    /// The SDK's defaults but a 3 s attempt timeout, the OSDI'22 client's (the real engine).
    SdkTimeout3s,
    /// The SDK with `RetryBudget::disabled()` and a 3 s attempt timeout (the real engine).
    SdkNoBudgetTimeout3s,
    /// The OSDI'22 artifact's client: 3 s timeout, 4 immediate resends.
    Osdi22,
    /// The JavaScript loop of Modulify's "Idempotency and retries".
    JsLoop,
    /// `reqwest-retry` 0.9's documented default policy.
    ReqwestRetry,
    /// reqwest 0.13's built-in retry with its `TpsBudget`.
    ReqwestBuiltin,
    /// backon's `ExponentialBuilder::default()`.
    Backon,
    /// gRPC retries with retry throttling (gRFC A6).
    Grpc,
}

impl Policy {
    /// Every policy, the SDK's first.
    pub const ALL: [Policy; 10] = [
        Policy::Sdk,
        Policy::SdkNoBudget,
        Policy::SdkTimeout3s,
        Policy::SdkNoBudgetTimeout3s,
        Policy::Osdi22,
        Policy::JsLoop,
        Policy::ReqwestRetry,
        Policy::ReqwestBuiltin,
        Policy::Backon,
        Policy::Grpc,
    ];

    /// The policy's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Sdk => "sdk",
            Policy::SdkNoBudget => "sdk-no-budget",
            Policy::SdkTimeout3s => "sdk-timeout-3s",
            Policy::SdkNoBudgetTimeout3s => "sdk-no-budget-timeout-3s",
            Policy::Osdi22 => "osdi22",
            Policy::JsLoop => "js-loop",
            Policy::ReqwestRetry => "reqwest-retry",
            Policy::ReqwestBuiltin => "reqwest-builtin",
            Policy::Backon => "backon",
            Policy::Grpc => "grpc",
        }
    }

    /// The policy named `name`.
    pub fn from_name(name: &str) -> Option<Policy> {
        Self::ALL.into_iter().find(|policy| policy.name() == name)
    }

    /// Whether it runs the SDK's own engine.
    pub fn is_sdk(self) -> bool {
        matches!(
            self,
            Policy::Sdk | Policy::SdkNoBudget | Policy::SdkTimeout3s | Policy::SdkNoBudgetTimeout3s
        )
    }

    /// Sender `index` of `scenario` under this policy.
    pub(crate) fn sender(
        self,
        index: usize,
        scenario: &Scenario,
        server: &Server,
        recorder: &Recorder,
        clock: Clock,
    ) -> Arc<dyn Deliver> {
        let seed = crate::rng::Rng::derive(scenario.seed, 0x5e4d_0000 + index as u64).next_u64();
        let peer: Arc<dyn Peer> = match self {
            Policy::Sdk
            | Policy::SdkNoBudget
            | Policy::SdkTimeout3s
            | Policy::SdkNoBudgetTimeout3s => {
                let budget = matches!(self, Policy::Sdk | Policy::SdkTimeout3s);
                let timeout = matches!(self, Policy::SdkTimeout3s | Policy::SdkNoBudgetTimeout3s)
                    .then_some(scenario.client_timeout);
                return Arc::new(SdkSender::new(
                    budget,
                    timeout,
                    server.clone(),
                    recorder.clone(),
                    clock,
                    seed,
                ));
            }
            Policy::Osdi22 => Arc::new(Osdi22Client),
            Policy::JsLoop => Arc::new(JsLoop),
            Policy::ReqwestRetry => Arc::new(ReqwestRetryDefault),
            Policy::ReqwestBuiltin => Arc::new(ReqwestBuiltin::default()),
            Policy::Backon => Arc::new(BackonDefault),
            Policy::Grpc => Arc::new(GrpcA6::default()),
        };
        Arc::new(PeerSender::new(
            peer,
            server.clone(),
            recorder.clone(),
            clock,
            seed,
            scenario.client_timeout,
        ))
    }
}
