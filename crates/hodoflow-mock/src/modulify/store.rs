//! Modulify's stores: the accounts of its static tokens, the catalogue, the key store and the
//! workspace. Apart from the routes in `mod.rs`, so the server's state holds them without
//! importing a handler.

use std::collections::HashMap;
use std::fmt;
use std::sync::Mutex;
use std::time::Instant;

use axum::http::HeaderMap;

use super::catalogue::{Catalogue, ToolSeed};
use super::methods::Workspace;
use crate::config::ModulifyTokenSeed;
use crate::gate::bearer_token;
use crate::idempotency::{KeyStore, ScopedKey};

/// The Modulify seeds of a server.
#[derive(Debug, Default)]
pub(crate) struct ModulifySeeds {
    pub tokens: Vec<ModulifyTokenSeed>,
    pub tools: Vec<ToolSeed>,
}

/// A seeded token and the name its keys and budget are filed under.
#[derive(Debug)]
pub(super) struct Account {
    pub id: String,
    pub seed: ModulifyTokenSeed,
}

/// The Modulify side of the server: tokens, catalogue, key store and workspace.
pub(crate) struct Modulify {
    /// Token -> account. The demo token is always there.
    accounts: HashMap<String, Account>,
    pub(super) catalogue: Catalogue,
    pub(super) keys: Mutex<KeyStore>,
    pub(super) workspace: Mutex<Workspace>,
    /// Keys held by a `slow_execution`, and when it ends (for `Retry-After`).
    pub(super) holding: Mutex<HashMap<ScopedKey, Instant>>,
}

/// Counts only: the keys of `accounts` are bearer tokens.
impl fmt::Debug for Modulify {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Modulify")
            .field("accounts", &self.accounts.len())
            .field("catalogue", &self.catalogue)
            .finish_non_exhaustive()
    }
}

impl Modulify {
    pub(crate) fn new(seeds: ModulifySeeds) -> Self {
        let mut accounts = HashMap::new();
        let demo = std::iter::once(ModulifyTokenSeed::demo());
        for (index, seed) in demo.chain(seeds.tokens).enumerate() {
            let id = format!("token{index}");
            accounts.insert(seed.token.clone(), Account { id, seed });
        }
        // The demo token may call every method whatever a seed of it said.
        if let Some(demo) = accounts.get_mut(crate::config::DEMO_MODULIFY_TOKEN) {
            demo.seed.methods = None;
        }
        Self {
            accounts,
            catalogue: Catalogue::new(seeds.tools),
            keys: Mutex::default(),
            workspace: Mutex::default(),
            holding: Mutex::default(),
        }
    }

    /// The account of the request's bearer token.
    pub(super) fn authorize(&self, headers: &HeaderMap) -> Option<&Account> {
        bearer_token(headers).and_then(|token| self.accounts.get(token))
    }
}
