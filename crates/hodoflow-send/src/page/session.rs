//! The status page's sessions: a random cookie per browser, its CSRF token, and whether it
//! logged in with the admin token.
//!
//! A session is created on the first page a browser reads: the cookie
//! `hodoflow_session=<random>; Path=/; HttpOnly; SameSite=Strict` names it, and every form of
//! the page carries the session's own CSRF token (random, 256 bits, from the thread's
//! cryptographically secure generator). A POST is taken only with a session cookie and the
//! CSRF token of that session, so a page of another site can neither send the cookie
//! (`SameSite=Strict`) nor know the token. Logging in (a form taking the admin token) marks the
//! session as an admin's; the token itself is never stored in the session, the cookie or a
//! page. Sessions live in this process only (a restart logs everyone out), at most
//! [`MAX_SESSIONS`], each for [`LIFETIME`].

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rand::Rng as _;

/// The cookie's name.
pub(crate) const COOKIE: &str = "hodoflow_session";

/// The most sessions kept; the oldest goes first.
const MAX_SESSIONS: usize = 1024;

/// How long a session lasts from its creation.
const LIFETIME: Duration = Duration::from_secs(12 * 3600);

/// One browser's session.
#[derive(Debug, Clone)]
pub(crate) struct Session {
    /// The token every form of this session carries.
    pub(crate) csrf: String,
    /// Whether it logged in with the admin token.
    pub(crate) admin: bool,
    created: Instant,
}

/// The sessions of one server.
#[derive(Debug, Default)]
pub(crate) struct Sessions {
    known: Mutex<HashMap<String, Session>>,
}

impl Sessions {
    /// The session the cookie header names, if it is known and alive.
    pub(crate) fn find(&self, cookies: Option<&str>) -> Option<(String, Session)> {
        let id = cookie(cookies?, COOKIE)?;
        let known = self.known.lock().unwrap_or_else(|p| p.into_inner());
        let session = known.get(id)?;
        (session.created.elapsed() < LIFETIME).then(|| (id.to_owned(), session.clone()))
    }

    /// A new session: its ID (the cookie's value) and itself.
    pub(crate) fn create(&self) -> (String, Session) {
        let id = random_hex();
        let session = Session {
            csrf: random_hex(),
            admin: false,
            created: Instant::now(),
        };
        let mut known = self.known.lock().unwrap_or_else(|p| p.into_inner());
        known.retain(|_, session| session.created.elapsed() < LIFETIME);
        if known.len() >= MAX_SESSIONS
            && let Some(oldest) = known
                .iter()
                .min_by_key(|(_, session)| session.created)
                .map(|(id, _)| id.clone())
        {
            known.remove(&oldest);
        }
        known.insert(id.clone(), session.clone());
        (id, session)
    }

    /// Marks the session `id` as an admin's (or not), with a new CSRF token: a token seen
    /// before logging in is not the one after it.
    pub(crate) fn set_admin(&self, id: &str, admin: bool) {
        let mut known = self.known.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(session) = known.get_mut(id) {
            session.admin = admin;
            session.csrf = random_hex();
        }
    }
}

/// The `Set-Cookie` value of the session `id`.
pub(crate) fn set_cookie(id: &str) -> String {
    format!("{COOKIE}={id}; Path=/; HttpOnly; SameSite=Strict")
}

/// The value of the cookie `name` in a `Cookie` header.
fn cookie<'a>(header: &'a str, name: &str) -> Option<&'a str> {
    header.split(';').find_map(|pair| {
        let (key, value) = pair.trim().split_once('=')?;
        (key == name).then_some(value)
    })
}

/// 32 random bytes as 64 hex digits.
fn random_hex() -> String {
    let bytes: [u8; 32] = rand::rng().random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether `a` and `b` are equal, in a time that does not depend on where they differ.
pub(crate) fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0_u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_is_found_by_its_cookie_only() {
        let sessions = Sessions::default();
        let (id, session) = sessions.create();
        assert_eq!(id.len(), 64);
        assert_ne!(id, session.csrf);
        let header = format!("other=1; {COOKIE}={id}");
        let (found, _) = sessions.find(Some(&header)).unwrap();
        assert_eq!(found, id);
        assert!(sessions.find(Some("hodoflow_session=nope")).is_none());
        assert!(sessions.find(Some(&format!("x{COOKIE}={id}"))).is_none());
        assert!(sessions.find(None).is_none());
        sessions.set_admin(&id, true);
        let (_, after) = sessions.find(Some(&header)).unwrap();
        assert!(after.admin);
        assert_ne!(
            after.csrf, session.csrf,
            "a new CSRF token after logging in"
        );
    }

    #[test]
    fn comparison_is_exact() {
        assert!(same(b"token", b"token"));
        assert!(!same(b"token", b"tokem"));
        assert!(!same(b"token", b"token2"));
        assert!(!same(b"", b"x"));
    }

    #[test]
    fn the_cookie_is_http_only_and_strict() {
        let cookie = set_cookie("abc");
        assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"));
    }
}
