//! The server's state: every store, and the sub-state each surface takes from it.
//!
//! One lock per store so no request waits on an unrelated one. Every lock is a
//! `std::sync::Mutex` taken for a few map operations and never held across an `.await`.
//!
//! # Why sub-states
//!
//! A handler takes only the stores it uses, as axum's `State<ApiState>` through [`FromRef`],
//! not the whole server. The stores live apart from the handlers (`stores/`, `gate.rs`,
//! `ledger.rs`, `modulify/store.rs` ...), so this module, the composition, imports no handler,
//! and no handler reaches another's store through it. A store two surfaces share is one `Arc`
//! in both sub-states.

use std::collections::HashMap;
use std::sync::atomic::AtomicU32;
use std::sync::{Arc, Mutex};

use axum::extract::FromRef;

use crate::clock::Clock;
use crate::config::{ClientSeed, Limits, TriggerSeed};
use crate::fault::FaultTable;
use crate::gate::{Gate, TokenStore};
use crate::idempotency::KeyStore;
use crate::ledger::Ledger;
use crate::modulify::store::{Modulify, ModulifySeeds};
use crate::rate::FixedWindows;
use crate::stores::{Deliveries, Resources, Runs};

/// The triggers by token; [`MockServer::put_trigger`](crate::MockServer::put_trigger) changes
/// them while the server runs.
pub(crate) type Triggers = Arc<Mutex<HashMap<String, TriggerSeed>>>;

/// Everything the server holds: what the server itself reads, and each surface's sub-state.
#[derive(Debug)]
pub(crate) struct Shared {
    pub clock: Arc<dyn Clock>,
    pub limits: Arc<Limits>,
    pub triggers: Triggers,
    pub faults: Arc<Mutex<FaultTable>>,
    pub ledger: Arc<Mutex<Ledger>>,
    /// HTTP/2 connections still to refuse with GOAWAY.
    pub go_aways: AtomicU32,
    exchange: ExchangeState,
    api: ApiState,
    runs: RunsState,
    webhooks: WebhookState,
    modulify: ModulifyState,
    control: ControlState,
}

/// `POST /oauth/token`: the seeded clients and the token store it fills.
#[derive(Debug, Clone)]
pub(crate) struct ExchangeState {
    pub clock: Arc<dyn Clock>,
    pub limits: Arc<Limits>,
    pub clients: Arc<HashMap<String, ClientSeed>>,
    pub tokens: Arc<Mutex<TokenStore>>,
    pub ledger: Arc<Mutex<Ledger>>,
}

/// The JSON:API reads and writes, and GraphQL's reads of the same resources.
#[derive(Debug, Clone)]
pub(crate) struct ApiState {
    pub gate: Gate,
    pub clock: Arc<dyn Clock>,
    pub limits: Arc<Limits>,
    pub resources: Arc<Mutex<Resources>>,
    pub keys: Arc<Mutex<KeyStore>>,
    pub ledger: Arc<Mutex<Ledger>>,
}

/// `GET /api/json/v1/workflow_runs/<id>`.
#[derive(Debug, Clone)]
pub(crate) struct RunsState {
    pub gate: Gate,
    pub clock: Arc<dyn Clock>,
    pub limits: Arc<Limits>,
    pub runs: Arc<Mutex<Runs>>,
}

/// Webhook deliveries: the triggers, their windows, the deliveries seen and the runs started.
#[derive(Debug, Clone)]
pub(crate) struct WebhookState {
    pub gate: Gate,
    pub clock: Arc<dyn Clock>,
    pub limits: Arc<Limits>,
    pub triggers: Triggers,
    pub rates: Arc<Mutex<FixedWindows>>,
    pub deliveries: Arc<Mutex<Deliveries>>,
    pub runs: Arc<Mutex<Runs>>,
    pub ledger: Arc<Mutex<Ledger>>,
}

/// Modulify's routes: its own stores, and the budgets and ledger it shares with Hodoflow's.
#[derive(Debug, Clone)]
pub(crate) struct ModulifyState {
    pub clock: Arc<dyn Clock>,
    pub limits: Arc<Limits>,
    pub rates: Arc<Mutex<FixedWindows>>,
    pub ledger: Arc<Mutex<Ledger>>,
    /// Modulify's tokens, catalogue, key store and workspace, each store behind its own lock.
    pub modulify: Arc<Modulify>,
}

/// `/_mock/faults` and `/_mock/ledger`.
#[derive(Debug, Clone)]
pub(crate) struct ControlState {
    pub faults: Arc<Mutex<FaultTable>>,
    pub ledger: Arc<Mutex<Ledger>>,
}

impl Shared {
    pub(crate) fn new(
        clock: Arc<dyn Clock>,
        limits: Limits,
        clients: Vec<ClientSeed>,
        triggers: Vec<TriggerSeed>,
        modulify: ModulifySeeds,
    ) -> Self {
        let limits = Arc::new(limits);
        let clients = clients
            .into_iter()
            .map(|c| (c.client_id.clone(), c))
            .collect();
        let triggers: Triggers = Arc::new(Mutex::new(
            triggers.into_iter().map(|t| (t.token.clone(), t)).collect(),
        ));
        let tokens = Arc::<Mutex<TokenStore>>::default();
        let rates = Arc::<Mutex<FixedWindows>>::default();
        let resources = Arc::<Mutex<Resources>>::default();
        let runs = Arc::<Mutex<Runs>>::default();
        let faults = Arc::<Mutex<FaultTable>>::default();
        let ledger = Arc::new(Mutex::new(Ledger::new(limits.ledger_requests_kept)));
        let gate = Gate {
            clock: clock.clone(),
            limits: limits.clone(),
            tokens: tokens.clone(),
            rates: rates.clone(),
        };
        Self {
            exchange: ExchangeState {
                clock: clock.clone(),
                limits: limits.clone(),
                clients: Arc::new(clients),
                tokens,
                ledger: ledger.clone(),
            },
            api: ApiState {
                gate: gate.clone(),
                clock: clock.clone(),
                limits: limits.clone(),
                resources,
                keys: Arc::default(),
                ledger: ledger.clone(),
            },
            runs: RunsState {
                gate: gate.clone(),
                clock: clock.clone(),
                limits: limits.clone(),
                runs: runs.clone(),
            },
            webhooks: WebhookState {
                gate,
                clock: clock.clone(),
                limits: limits.clone(),
                triggers: triggers.clone(),
                rates: rates.clone(),
                deliveries: Arc::default(),
                runs,
                ledger: ledger.clone(),
            },
            modulify: ModulifyState {
                clock: clock.clone(),
                limits: limits.clone(),
                rates,
                ledger: ledger.clone(),
                modulify: Arc::new(Modulify::new(modulify)),
            },
            control: ControlState {
                faults: faults.clone(),
                ledger: ledger.clone(),
            },
            clock,
            limits,
            triggers,
            faults,
            ledger,
            go_aways: AtomicU32::new(0),
        }
    }
}

impl FromRef<Arc<Shared>> for ExchangeState {
    fn from_ref(shared: &Arc<Shared>) -> Self {
        shared.exchange.clone()
    }
}

impl FromRef<Arc<Shared>> for ApiState {
    fn from_ref(shared: &Arc<Shared>) -> Self {
        shared.api.clone()
    }
}

impl FromRef<Arc<Shared>> for RunsState {
    fn from_ref(shared: &Arc<Shared>) -> Self {
        shared.runs.clone()
    }
}

impl FromRef<Arc<Shared>> for WebhookState {
    fn from_ref(shared: &Arc<Shared>) -> Self {
        shared.webhooks.clone()
    }
}

impl FromRef<Arc<Shared>> for ModulifyState {
    fn from_ref(shared: &Arc<Shared>) -> Self {
        shared.modulify.clone()
    }
}

impl FromRef<Arc<Shared>> for ControlState {
    fn from_ref(shared: &Arc<Shared>) -> Self {
        shared.control.clone()
    }
}
