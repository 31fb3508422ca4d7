//! The server's state, one lock per store so no request waits on an unrelated one.
//!
//! Every lock is a `std::sync::Mutex` taken for a few map operations and never
//! held across an `.await`.

use std::collections::HashMap;
use std::sync::atomic::AtomicU32;
use std::sync::{Arc, Mutex};

use crate::auth::TokenStore;
use crate::clock::Clock;
use crate::config::{ClientSeed, Limits, ModulifyTokenSeed, TriggerSeed};
use crate::fault::FaultTable;
use crate::idempotency::KeyStore;
use crate::jsonapi::Resources;
use crate::ledger::{ExchangeRecord, Ledger};
use crate::modulify::{Modulify, ToolSeed};
use crate::rate::FixedWindows;
use crate::runs::Runs;
use crate::webhook::Deliveries;

#[derive(Debug)]
pub(crate) struct Shared {
    pub clock: Arc<dyn Clock>,
    pub limits: Limits,
    pub clients: HashMap<String, ClientSeed>,
    pub triggers: Mutex<HashMap<String, TriggerSeed>>,
    pub tokens: Mutex<TokenStore>,
    pub keys: Mutex<KeyStore>,
    pub resources: Mutex<Resources>,
    pub deliveries: Mutex<Deliveries>,
    pub runs: Mutex<Runs>,
    pub rates: Mutex<FixedWindows>,
    pub faults: Mutex<FaultTable>,
    pub ledger: Mutex<Ledger>,
    /// HTTP/2 connections still to refuse with GOAWAY.
    pub go_aways: AtomicU32,
    /// Modulify's tokens, catalogue, key store and workspace, each store behind its own lock.
    pub modulify: Modulify,
}

/// The Modulify seeds of a server.
#[derive(Debug, Default)]
pub(crate) struct ModulifySeeds {
    pub tokens: Vec<ModulifyTokenSeed>,
    pub tools: Vec<ToolSeed>,
}

impl Shared {
    pub(crate) fn new(
        clock: Arc<dyn Clock>,
        limits: Limits,
        clients: Vec<ClientSeed>,
        triggers: Vec<TriggerSeed>,
        modulify: ModulifySeeds,
    ) -> Self {
        let keep = limits.ledger_requests_kept;
        Self {
            clock,
            limits,
            clients: clients
                .into_iter()
                .map(|c| (c.client_id.clone(), c))
                .collect(),
            triggers: Mutex::new(triggers.into_iter().map(|t| (t.token.clone(), t)).collect()),
            tokens: Mutex::default(),
            keys: Mutex::default(),
            resources: Mutex::default(),
            deliveries: Mutex::default(),
            runs: Mutex::default(),
            rates: Mutex::default(),
            faults: Mutex::default(),
            ledger: Mutex::new(Ledger::new(keep)),
            go_aways: AtomicU32::new(0),
            modulify: Modulify::new(modulify.tokens, modulify.tools),
        }
    }

    pub(crate) fn record_exchange(&self, client_id: &str, granted: bool) {
        let record = ExchangeRecord {
            client_id: client_id.to_owned(),
            granted,
            at: self.clock.now(),
        };
        crate::lock(&self.ledger).exchanged(record);
    }
}
