//! Where to connect: `host[:port]`, `[v6]:port` or `unix:/path`, resolved once at start-up.

use std::fmt;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;

/// A resolved place to open a connection to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A TCP endpoint; `host` is kept for TLS server names and for display.
    Tcp {
        /// The resolved address.
        addr: SocketAddr,
        /// The host as the user wrote it.
        host: String,
    },
    /// A unix-domain stream socket.
    Unix(PathBuf),
}

impl Target {
    /// The name to present in TLS SNI and to verify a certificate against.
    pub fn server_name(&self) -> &str {
        match self {
            Target::Tcp { host, .. } => host,
            Target::Unix(_) => "localhost",
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Tcp { addr, .. } => write!(f, "{addr}"),
            Target::Unix(p) => write!(f, "unix:{}", p.display()),
        }
    }
}

/// Parses one target; `default_port` applies when none is given. Host names are resolved
/// here (once), so a typo fails before the run starts.
pub fn parse_target(spec: &str, default_port: u16) -> Result<Target, String> {
    let spec = spec.trim();
    if let Some(path) = spec.strip_prefix("unix:") {
        if path.is_empty() {
            return Err(format!(
                "target {spec:?} has no socket path; write unix:/path/to/socket"
            ));
        }
        return Ok(Target::Unix(PathBuf::from(path)));
    }
    if spec.is_empty() {
        return Err("empty target; write host[:port], [v6addr]:port or unix:/path".into());
    }
    let (host, port) = split_host_port(spec, default_port)?;
    let addr = (host.as_str(), port)
        .to_socket_addrs()
        .map_err(|e| {
            format!(
                "cannot resolve target {spec:?}: {e}; check the host name, or give an IP address"
            )
        })?
        .next()
        .ok_or_else(|| format!("target {spec:?} resolves to no address"))?;
    Ok(Target::Tcp { addr, host })
}

/// Parses a TCP address given to `flag` (a relay target, a sink, a bounce target);
/// a unix socket is refused with one line naming the flag.
pub fn parse_tcp(spec: &str, default_port: u16, flag: &str) -> Result<SocketAddr, String> {
    match parse_target(spec, default_port).map_err(|e| format!("{flag}: {e}"))? {
        Target::Tcp { addr, .. } => Ok(addr),
        Target::Unix(_) => Err(format!("{flag} must be a TCP address, not a unix socket")),
    }
}

/// Parses a comma-separated list of IP addresses given to `flag`; the error names the bad
/// one and says what the list is for (`what`).
pub fn parse_ips(list: &str, flag: &str, what: &str) -> Result<Vec<std::net::IpAddr>, String> {
    list.split(',')
        .map(|s| {
            s.trim().parse().map_err(|_| {
                format!("{flag} {s:?} is not an IP address; give a comma-separated list of {what}")
            })
        })
        .collect()
}

/// Parses a comma-separated list of targets (used round-robin).
pub fn parse_targets(list: &str, default_port: u16) -> Result<Vec<Target>, String> {
    list.split(',')
        .map(|t| parse_target(t, default_port))
        .collect()
}

fn split_host_port(spec: &str, default_port: u16) -> Result<(String, u16), String> {
    let bad_port = |p: &str| {
        format!("target {spec:?} has an invalid port {p:?}; use a number from 1 to 65535")
    };
    if let Some(rest) = spec.strip_prefix('[') {
        let (host, after) = rest
            .split_once(']')
            .ok_or_else(|| format!("target {spec:?} lacks the closing ']' of an IPv6 address"))?;
        let port = match after.strip_prefix(':') {
            Some(p) => p
                .parse::<u16>()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| bad_port(p))?,
            None if after.is_empty() => default_port,
            None => return Err(format!("target {spec:?}: expected ':port' after ']'")),
        };
        return Ok((host.to_string(), port));
    }
    match spec.rsplit_once(':') {
        Some((host, _)) if host.contains(':') => Err(format!(
            "target {spec:?} looks like a bare IPv6 address; write it as [{spec}]:port"
        )),
        Some((host, p)) => {
            let port = p
                .parse::<u16>()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| bad_port(p))?;
            Ok((host.to_string(), port))
        }
        None => Ok((spec.to_string(), default_port)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_are_parsed() {
        let t = parse_target("127.0.0.1:2525", 25).expect("v4");
        assert_eq!(t.to_string(), "127.0.0.1:2525");
        let t = parse_target("127.0.0.1", 25).expect("default port");
        assert_eq!(t.to_string(), "127.0.0.1:25");
        let t = parse_target("[::1]:2526", 25).expect("v6");
        assert_eq!(t.to_string(), "[::1]:2526");
        assert_eq!(
            parse_target("unix:/tmp/s", 25).expect("unix"),
            Target::Unix("/tmp/s".into())
        );
        assert_eq!(
            parse_targets("127.0.0.1:1,127.0.0.2:2", 25)
                .expect("list")
                .len(),
            2
        );
    }

    #[test]
    fn bad_forms_say_what_to_write() {
        for bad in ["127.0.0.1:0", "127.0.0.1:x", "::1", "[::1", "unix:", ""] {
            let err = parse_target(bad, 25).expect_err(bad);
            assert!(!err.is_empty(), "{bad}");
        }
    }
}
