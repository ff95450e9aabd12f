//! Which web pages may use the server. A browser lets any page it shows
//! send requests to a server on this machine (and, through DNS rebinding,
//! read the answers), so a request a browser sends on a page's behalf —
//! one with an `Origin` header — is served only for a page of this machine
//! or one the operator allowed. Agents and trainers send no `Origin` and
//! are not affected. A page that rebinds its own name to this machine may
//! read the GET routes without sending an `Origin`, but not without naming
//! its own site in `Host`: a server listening on loopback answers only to
//! this machine's names and those the operator allowed.

use axum::http::Uri;
use axum::http::uri::Authority;
use std::fmt;
use std::net::IpAddr;

/// The origins allowed besides this machine's own (`http://localhost:3000`,
/// `http://127.0.0.1`, `http://[::1]:8080`…, which always are).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum AllowedOrigins {
    /// Only this machine's pages.
    #[default]
    Local,
    /// These origins too, each `scheme://host[:port]` as a browser sends it.
    Listed(Vec<String>),
    /// Every page, anywhere (`--allow-origin '*'`).
    Any,
}

impl AllowedOrigins {
    /// The allowance of `--allow-origin` values: `*`, or origins
    /// (checked with [`parse_origin`]).
    pub fn from_flags(origins: Vec<String>) -> Self {
        match origins.iter().any(|origin| origin == "*") {
            true => Self::Any,
            false if origins.is_empty() => Self::Local,
            false => Self::Listed(origins),
        }
    }

    /// Whether a request sent with `Origin: origin` may be served.
    pub fn allows(&self, origin: &str) -> bool {
        match self {
            Self::Any => true,
            _ if is_local(origin) => true,
            Self::Listed(listed) => listed
                .iter()
                .any(|allowed| allowed.eq_ignore_ascii_case(origin)),
            Self::Local => false,
        }
    }
}

impl fmt::Display for AllowedOrigins {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Local => f.write_str("this machine's pages"),
            Self::Listed(listed) => write!(f, "this machine's pages and {}", listed.join(", ")),
            Self::Any => f.write_str("every page"),
        }
    }
}

/// The names a request may address the server by (its `Host`, past the
/// port).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum AllowedHosts {
    /// Only this machine's: `localhost` and loopback addresses.
    #[default]
    Local,
    /// These names too (`--allow-host`, as for a proxy in front).
    Listed(Vec<String>),
    /// Any name: a server listening beyond loopback is addressed by names
    /// no list foresees.
    Any,
}

impl AllowedHosts {
    /// The allowance of a server listening on `address` given the
    /// `--allow-host` values `names` (checked with [`parse_host`]): on
    /// loopback, this machine's names and `names`; beyond it, `names`
    /// where there are any, else any name. `*` allows any name.
    pub fn from_flags(address: IpAddr, names: Vec<String>) -> Self {
        match names.iter().any(|name| name == "*") {
            true => Self::Any,
            false if !names.is_empty() => Self::Listed(names),
            false if address.is_loopback() => Self::Local,
            false => Self::Any,
        }
    }

    /// Whether a request sent with `Host: host` may be served.
    pub fn allows(&self, host: &str) -> bool {
        // A `Host` names no user: `evil@localhost` is no name of this machine.
        let authority = host
            .parse::<Authority>()
            .ok()
            .filter(|_| !host.contains('@'));
        let Some(authority) = authority else {
            return matches!(self, Self::Any);
        };
        // `localhost.` is `localhost`, fully qualified.
        let name = authority
            .host()
            .strip_suffix('.')
            .unwrap_or(authority.host());
        match self {
            Self::Any => true,
            _ if is_local_name(name) => true,
            Self::Listed(listed) => listed.iter().any(|allowed| {
                allowed.eq_ignore_ascii_case(name)
                    || allowed.eq_ignore_ascii_case(trim_brackets(name))
            }),
            Self::Local => false,
        }
    }
}

impl fmt::Display for AllowedHosts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Local => f.write_str("this machine's names"),
            Self::Listed(listed) => write!(f, "this machine's names and {}", listed.join(", ")),
            Self::Any => f.write_str("any name"),
        }
    }
}

/// `text` as a name for `--allow-host`: `*`, or a host name or IP address
/// with no scheme, port or path, as `Host` gives it before its port.
pub fn parse_host(text: &str) -> Result<String, String> {
    let bare = text
        .parse::<Authority>()
        .is_ok_and(|authority| authority.port().is_none() && !text.contains(['@', '*']));
    match text == "*" || (bare && !text.is_empty()) {
        true => Ok(text.to_owned()),
        false => Err(format!(
            "`{text}` is not a host name: write `*` or a name or address alone, as \
             `forge.example.com` (no scheme, port or path)"
        )),
    }
}

/// `text` as an origin a browser sends: `http` or `https`, a host, an
/// optional port, and nothing else (no path, no trailing `/`).
pub fn parse_origin(text: &str) -> Result<String, String> {
    if text == "*" {
        return Ok(text.to_owned());
    }
    let shape = || {
        format!(
            "`{text}` is not an origin: write `*` or scheme://host[:port], as `https://app.example.com`"
        )
    };
    let uri = web_uri(text).ok_or_else(shape)?;
    let bare = uri.path() == "/" && uri.query().is_none();
    // As a browser sends it: no credentials or wildcard, no default port.
    let plain = !text.contains(['@', '*', '#']);
    if !(uri.host().is_some() && bare && plain && !text.ends_with('/')) {
        return Err(shape());
    }
    match (uri.scheme_str(), uri.port_u16(), uri.host()) {
        (Some(scheme @ "http"), Some(80), Some(host))
        | (Some(scheme @ "https"), Some(443), Some(host)) => Err(format!(
            "`{text}` names its scheme's default port, which browsers leave out of an origin: \
             write `{scheme}://{host}`"
        )),
        _ => Ok(text.to_owned()),
    }
}

/// Whether `origin` is a page served by this machine: its host is
/// `localhost` or a loopback address.
fn is_local(origin: &str) -> bool {
    web_uri(origin)
        .as_ref()
        .and_then(Uri::host)
        .is_some_and(is_local_name)
}

/// Whether `host` (a URI's host, an IPv6 address in brackets) names this
/// machine: `localhost` or a loopback address.
fn is_local_name(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || trim_brackets(host)
            .parse::<IpAddr>()
            .is_ok_and(|address| address.to_canonical().is_loopback())
}

fn trim_brackets(host: &str) -> &str {
    host.trim_start_matches('[').trim_end_matches(']')
}

/// `text` as a URI of the web (`http` or `https`).
fn web_uri(text: &str) -> Option<Uri> {
    let uri: Uri = text.parse().ok()?;
    matches!(uri.scheme_str(), Some("http" | "https")).then_some(uri)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_machines_pages_are_always_allowed() {
        for origin in [
            "http://localhost:3000",
            "http://LOCALHOST",
            "https://127.0.0.1:8443",
            "http://127.1.2.3",
            "http://[::1]:8080",
        ] {
            assert!(AllowedOrigins::Local.allows(origin), "{origin}");
        }
    }

    #[test]
    fn other_pages_need_allowing() {
        let local = AllowedOrigins::Local;
        for origin in [
            "http://evil.example",
            "http://localhost.evil.example",
            "http://127.0.0.1.evil.example",
            "null",
            "file://",
            "http://192.168.1.5:8000",
        ] {
            assert!(!local.allows(origin), "{origin}");
        }
        let listed = AllowedOrigins::from_flags(vec!["https://app.example.com".to_owned()]);
        assert!(listed.allows("https://app.example.com"));
        assert!(listed.allows("https://APP.example.com"));
        assert!(
            !listed.allows("http://app.example.com"),
            "another scheme is another origin"
        );
        assert!(
            !listed.allows("https://app.example.com:8443"),
            "another port is another origin"
        );
        let any = AllowedOrigins::from_flags(vec!["http://a.example".to_owned(), "*".to_owned()]);
        assert!(any.allows("null") && any.allows("http://evil.example"));
    }

    #[test]
    fn a_server_on_loopback_answers_to_this_machines_names_and_those_allowed() {
        let loopback = IpAddr::from([127, 0, 0, 1]);
        let local = AllowedHosts::from_flags(loopback, Vec::new());
        for host in [
            "localhost:8000",
            "LOCALHOST",
            "localhost.:8000",
            "127.0.0.1:8000",
            "[::1]:8000",
            "[::ffff:127.0.0.1]",
            "127.9.9.9",
        ] {
            assert!(local.allows(host), "{host}");
        }
        for host in [
            "evil.example",
            "evil.example:8000",
            "localhost.evil.example",
            "evil@localhost",
            "",
            "a b",
        ] {
            assert!(!local.allows(host), "{host}");
        }
        let listed =
            AllowedHosts::from_flags(loopback, vec!["forge.example.com".into(), "[::2]".into()]);
        assert!(listed.allows("Forge.Example.com:443") && listed.allows("localhost"));
        assert!(listed.allows("[::2]:80"));
        assert!(!listed.allows("evil.example"));
        // Beyond loopback, names are not foreseen unless listed.
        let everywhere = IpAddr::from([0, 0, 0, 0]);
        assert_eq!(
            AllowedHosts::from_flags(everywhere, Vec::new()),
            AllowedHosts::Any
        );
        assert!(
            !AllowedHosts::from_flags(everywhere, vec!["a.example".into()]).allows("b.example")
        );
        assert_eq!(
            AllowedHosts::from_flags(loopback, vec!["*".into()]),
            AllowedHosts::Any
        );
    }

    #[test]
    fn only_host_names_are_accepted_as_flags() {
        for host in ["*", "forge.example.com", "10.0.0.2", "[::2]", "proxy"] {
            assert_eq!(parse_host(host).as_deref(), Ok(host));
        }
        for wrong in [
            "",
            "https://forge.example.com",
            "forge.example.com:8000",
            "a/b",
            "u@h",
            "*.example.com",
        ] {
            let err = parse_host(wrong).unwrap_err();
            assert!(err.contains("is not a host name"), "{wrong}: {err}");
        }
    }

    #[test]
    fn only_origins_are_accepted_as_flags() {
        for origin in ["*", "https://app.example.com", "http://10.0.0.2:8080"] {
            assert_eq!(parse_origin(origin).as_deref(), Ok(origin));
        }
        for wrong in [
            "app.example.com",
            "https://app.example.com/",
            "https://app.example.com/ui",
            "ftp://x.example",
            "",
            "https://*.example.com",
            "https://user@app.example.com",
        ] {
            let err = parse_origin(wrong).unwrap_err();
            assert!(err.contains("is not an origin"), "{wrong}: {err}");
        }
        let err = parse_origin("https://app.example.com:443").unwrap_err();
        assert!(err.contains("write `https://app.example.com`"), "{err}");
    }
}
