//! The status page's sessions: an admin's, made at login; and the CSRF token of a browser that
//! is not logged in, kept in its own cookie and nowhere here.
//!
//! - **No session for a visit.** Reading a page creates nothing on the server: a browser that
//!   is shown a form (the login form, a retry button) gets a random CSRF token in the cookie
//!   `hodoflow_csrf` and the same token in the form (a double-submit token); a POST is taken
//!   only when both are there and equal. Another site can neither send the cookie
//!   (`SameSite=Strict`) nor read it (`HttpOnly`), and a token it planted (a service on another
//!   port of the same host can set cookies for it) opens nothing: a retry needs an admin
//!   session, a login the admin token. So anonymous traffic cannot fill or churn the table.
//! - **A new session at login.** Logging in with the admin token makes a new session with a new
//!   random ID (the cookie `hodoflow_session`) and a new CSRF token; a session ID the browser
//!   had before is forgotten, never promoted, so a cookie planted before the login (session
//!   fixation) is worth nothing after it. Logging out forgets the session and clears its
//!   cookie: the next visit is anonymous, and the old ID opens nothing.
//! - **Bounded.** At most [`MAX_SESSIONS`] sessions, each for [`LIFETIME`] from its login; only
//!   a login (the admin token) makes one, so only the admin can evict one.
//!
//! IDs and tokens are 256 bits from the thread's cryptographically secure generator, compared
//! in constant time. The admin token itself is never stored in a session, a cookie or a page.
//! Sessions live in this process only: a restart logs everyone out.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rand::Rng as _;

/// The session cookie's name.
pub(crate) const COOKIE: &str = "hodoflow_session";

/// The cookie of an anonymous browser's CSRF token.
pub(crate) const CSRF_COOKIE: &str = "hodoflow_csrf";

/// The most sessions kept; the oldest goes first.
pub(crate) const MAX_SESSIONS: usize = 256;

/// How long a session lasts from its login.
pub(crate) const LIFETIME: Duration = Duration::from_secs(12 * 3600);

/// One admin's session.
#[derive(Debug, Clone)]
pub(crate) struct Session {
    /// The token every form of this session carries.
    pub(crate) csrf: String,
    created: Instant,
}

/// The sessions of one server: the admins logged in.
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

    /// A new admin session, at login: its ID (the cookie's value) and itself. The session
    /// `replaced` names, the browser's before this login, is forgotten.
    pub(crate) fn log_in(&self, replaced: Option<&str>) -> (String, Session) {
        let id = random_hex();
        let session = Session {
            csrf: random_hex(),
            created: Instant::now(),
        };
        let mut known = self.known.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(replaced) = replaced {
            known.remove(replaced);
        }
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

    /// Forgets the session `id`, at logout.
    pub(crate) fn log_out(&self, id: &str) {
        self.known
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id);
    }

    /// How many sessions are kept.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.known.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

/// The `Set-Cookie` value of the session `id`.
pub(crate) fn set_cookie(id: &str) -> String {
    format!("{COOKIE}={id}; Path=/; HttpOnly; SameSite=Strict")
}

/// The `Set-Cookie` value that clears the session cookie.
pub(crate) fn clear_cookie() -> String {
    format!("{COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0")
}

/// The `Set-Cookie` value of an anonymous browser's CSRF token.
pub(crate) fn set_csrf_cookie(token: &str) -> String {
    format!("{CSRF_COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict")
}

/// The CSRF token of an anonymous browser, from its cookie, if it is one this page could have
/// made (64 hex digits).
pub(crate) fn csrf_of(cookies: Option<&str>) -> Option<&str> {
    cookie(cookies?, CSRF_COOKIE)
        .filter(|token| token.len() == 64 && token.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// The value of the cookie `name` in a `Cookie` header.
fn cookie<'a>(header: &'a str, name: &str) -> Option<&'a str> {
    header.split(';').find_map(|pair| {
        let (key, value) = pair.trim().split_once('=')?;
        (key == name).then_some(value)
    })
}

/// 32 random bytes as 64 hex digits.
pub(crate) fn random_hex() -> String {
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
    fn a_session_is_made_at_login_with_a_new_id_and_found_by_its_cookie_only() {
        let sessions = Sessions::default();
        assert!(sessions.find(Some("hodoflow_session=planted")).is_none());
        let (first, session) = sessions.log_in(Some("planted"));
        assert_eq!(first.len(), 64);
        assert_ne!(first, session.csrf);
        let header = format!("other=1; {COOKIE}={first}");
        let (found, _) = sessions.find(Some(&header)).unwrap();
        assert_eq!(found, first);
        assert!(sessions.find(Some(&format!("x{COOKIE}={first}"))).is_none());
        assert!(sessions.find(None).is_none());
        // Logging in again from the same browser: a new ID, the old one forgotten.
        let (second, again) = sessions.log_in(Some(&first));
        assert_ne!(second, first);
        assert_ne!(again.csrf, session.csrf);
        assert!(sessions.find(Some(&header)).is_none());
        sessions.log_out(&second);
        assert!(sessions.find(Some(&format!("{COOKIE}={second}"))).is_none());
        assert_eq!(sessions.len(), 0);
    }

    #[test]
    fn the_table_keeps_at_most_its_bound() {
        let sessions = Sessions::default();
        for _ in 0..MAX_SESSIONS + 5 {
            sessions.log_in(None);
        }
        assert_eq!(sessions.len(), MAX_SESSIONS);
    }

    #[test]
    fn an_anonymous_csrf_token_is_64_hex_digits_or_none() {
        let token = random_hex();
        let header = format!("{CSRF_COOKIE}={token}");
        assert_eq!(csrf_of(Some(&header)), Some(token.as_str()));
        assert!(csrf_of(Some("hodoflow_csrf=short")).is_none());
        assert!(csrf_of(Some(&format!("{CSRF_COOKIE}={}", "z".repeat(64)))).is_none());
    }

    #[test]
    fn comparison_is_exact() {
        assert!(same(b"token", b"token"));
        assert!(!same(b"token", b"tokem"));
        assert!(!same(b"token", b"token2"));
        assert!(!same(b"", b"x"));
    }

    #[test]
    fn the_cookies_are_http_only_and_strict() {
        for cookie in [set_cookie("abc"), set_csrf_cookie("abc"), clear_cookie()] {
            assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"));
        }
        assert!(clear_cookie().contains("Max-Age=0"));
    }
}
