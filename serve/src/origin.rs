//! Which web pages may use the server. A browser lets any page it shows
//! send requests to a server on this machine (and, through DNS rebinding,
//! read the answers), so a request a browser sends on a page's behalf —
//! one with an `Origin` header — is served only for a page of this machine
//! or one the operator allowed. Agents and trainers send no `Origin` and
//! are not affected.

use axum::http::Uri;
use std::fmt;

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
    let plain = !text.contains(['@', '*', '#'])
        && !matches!(
            (uri.scheme_str(), uri.port_u16()),
            (Some("http"), Some(80)) | (Some("https"), Some(443))
        );
    match uri.host().is_some() && bare && plain && !text.ends_with('/') {
        true => Ok(text.to_owned()),
        false => Err(shape()),
    }
}

/// Whether `origin` is a page served by this machine: its host is
/// `localhost` or a loopback address.
fn is_local(origin: &str) -> bool {
    let Some(uri) = web_uri(origin) else {
        return false;
    };
    match uri.host() {
        Some(host) if host.eq_ignore_ascii_case("localhost") => true,
        Some(host) => host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|address| address.is_loopback()),
        None => false,
    }
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
            "https://app.example.com:443",
            "https://*.example.com",
            "https://user@app.example.com",
        ] {
            let err = parse_origin(wrong).unwrap_err();
            assert!(err.contains("is not an origin"), "{wrong}: {err}");
        }
    }
}
