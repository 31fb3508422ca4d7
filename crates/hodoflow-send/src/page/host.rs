//! The names the status page answers to: the `Host` check that defeats DNS rebinding.
//!
//! A web page the operator visits can make the browser resolve a name of its own to
//! `127.0.0.1` and read `http://that-name:8089/` as its own origin; the request then carries
//! `Host: that-name:8089`. So every route of the page (`/metrics`, `/ready` and the stylesheet
//! included) answers only a request whose `Host` is one of the page's own names, and refuses
//! any other with `421 Misdirected Request`:
//!
//! - the address the connection came in on (`127.0.0.1:8089`, `[::1]:8089`, or the interface's
//!   address when the page listens on `0.0.0.0`);
//! - `localhost`;
//! - each `--admin-host NAME` (a name a proxy or the operator's browser uses, such as
//!   `status.example` or `status.example:8443`).
//!
//! Names compare case-insensitively, a trailing dot ignored. A port, when the `Host` holds one,
//! must be the port the connection came in on, except for an `--admin-host` given without one
//! (a TLS proxy in front may forward its own port). A request without a `Host` is refused too.

use std::net::{IpAddr, SocketAddr};

/// The names of one page: those given with `--admin-host`, each `(host, port)`, lower-cased.
#[derive(Debug, Clone, Default)]
pub(crate) struct Hosts {
    named: Vec<(String, Option<u16>)>,
}

impl Hosts {
    /// The names given with `--admin-host`.
    ///
    /// # Errors
    ///
    /// A sentence naming a value that is not a host name, an IP address or either with a port.
    pub(crate) fn new(names: &[String]) -> Result<Self, String> {
        let named = names
            .iter()
            .map(|name| {
                split(name)
                    .filter(|(host, _)| is_name(host))
                    .ok_or_else(|| {
                        format!(
                            "--admin-host {:?} is not a host name or address, with an optional \
                             :PORT",
                            crate::sanitize::field(name)
                        )
                    })
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { named })
    }

    /// Whether `host`, a request's `Host` header, names this page, for a connection that came
    /// in on `local`.
    pub(crate) fn allows(&self, host: Option<&str>, local: SocketAddr) -> bool {
        let Some((name, port)) = host.and_then(split) else {
            return false;
        };
        let same_port = port.is_none_or(|port| port == local.port());
        let own = name == "localhost"
            || name
                .trim_start_matches('[')
                .trim_end_matches(']')
                .parse::<IpAddr>()
                .is_ok_and(|ip| same_ip(ip, local.ip()));
        (own && same_port)
            || self.named.iter().any(|(named, named_port)| {
                *named == name
                    && match named_port {
                        Some(named_port) => port == Some(*named_port),
                        None => true,
                    }
            })
    }
}

/// `value`, a `Host` header or a `--admin-host`, as its lower-cased host (a trailing dot
/// dropped; an IPv6 address in its brackets) and its port, if it has one.
fn split(value: &str) -> Option<(String, Option<u16>)> {
    let value = value.trim();
    let (host, port) = if value.starts_with('[') {
        let end = value.find(']')?;
        match &value[end + 1..] {
            "" => (&value[..=end], None),
            rest => (&value[..=end], Some(rest.strip_prefix(':')?)),
        }
    } else {
        match value.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (value, None),
        }
    };
    let port = match port {
        Some(port) => Some(port.parse::<u16>().ok()?),
        None => None,
    };
    let host = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
    (!host.is_empty()).then_some((host, port))
}

/// Whether `host` is a DNS name (letters, digits, `-`, `.`, `_`) or a bracketed IPv6 address.
fn is_name(host: &str) -> bool {
    match host
        .strip_prefix('[')
        .and_then(|rest| rest.strip_suffix(']'))
    {
        Some(v6) => v6.parse::<std::net::Ipv6Addr>().is_ok(),
        None => host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_')),
    }
}

/// Whether `a` and `b` are one address (an IPv4 address and its IPv6-mapped form are).
fn same_ip(a: IpAddr, b: IpAddr) -> bool {
    a.to_canonical() == b.to_canonical()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn local() -> SocketAddr {
        "127.0.0.1:8089".parse().unwrap()
    }

    #[test]
    fn the_address_and_localhost_are_the_page_s_own_names() {
        let hosts = Hosts::default();
        for host in [
            "127.0.0.1:8089",
            "127.0.0.1",
            "localhost:8089",
            "LOCALHOST",
            "localhost.:8089",
        ] {
            assert!(hosts.allows(Some(host), local()), "{host}");
        }
        let v6: SocketAddr = "[::1]:8089".parse().unwrap();
        assert!(hosts.allows(Some("[::1]:8089"), v6));
        assert!(hosts.allows(Some("[::1]"), v6));
    }

    #[test]
    fn any_other_name_port_or_no_host_is_refused() {
        let hosts = Hosts::default();
        for host in [
            "attacker.example",
            "attacker.example:8089",
            "127.0.0.1:9999",
            "localhost:80",
            "127.0.0.2:8089",
            "localhost.attacker.example",
            "",
            ":8089",
            "[::1]:8089",
            "localhost:8089:1",
        ] {
            assert!(!hosts.allows(Some(host), local()), "{host}");
        }
        assert!(!hosts.allows(None, local()));
    }

    #[test]
    fn names_given_are_allowed_with_their_port_or_any() {
        let hosts = Hosts::new(&["Status.Example".into(), "proxy.example:8443".into()]).unwrap();
        assert!(hosts.allows(Some("status.example"), local()));
        assert!(hosts.allows(Some("status.example:443"), local()));
        assert!(hosts.allows(Some("proxy.example:8443"), local()));
        assert!(!hosts.allows(Some("proxy.example"), local()));
        assert!(!hosts.allows(Some("proxy.example:8089"), local()));
        assert!(!hosts.allows(Some("other.example"), local()));
        for bad in ["a b", "x:port", "http://x", "", "[zz]"] {
            assert!(Hosts::new(&[bad.into()]).is_err(), "{bad}");
        }
    }
}
