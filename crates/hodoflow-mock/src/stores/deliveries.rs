//! Accepted webhook deliveries, kept to answer a repeat `202 duplicate` (Hodoflow's webhook sender
//! guide).

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, SystemTime};

/// Accepted delivery identities per organization, forgotten after the retention.
#[derive(Debug, Default)]
pub(crate) struct Deliveries {
    seen: HashMap<(String, String), SystemTime>,
    /// (accepted at, key), in time order.
    accepted: VecDeque<(SystemTime, (String, String))>,
}

impl Deliveries {
    /// Records a delivery; false when the identity was already accepted.
    pub(crate) fn first_time(
        &mut self,
        organization: &str,
        identity: &str,
        now: SystemTime,
        retention: Duration,
    ) -> bool {
        while let Some((at, _)) = self.accepted.front() {
            if *at + retention > now {
                break;
            }
            if let Some((at, key)) = self.accepted.pop_front()
                && self.seen.get(&key) == Some(&at)
            {
                self.seen.remove(&key);
            }
        }
        let key = (organization.to_owned(), identity.to_owned());
        if self.seen.contains_key(&key) {
            return false;
        }
        self.seen.insert(key.clone(), now);
        self.accepted.push_back((now, key));
        true
    }
}
