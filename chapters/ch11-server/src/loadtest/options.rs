//! What a load test is asked for: its options, the address it may talk to, its time limits
//! and the sampling every request asks for.

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

/// The longest a whole load test may run, and one request.
pub const MAX_SECONDS: u64 = 600;
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

/// `loadtest`'s options.
#[derive(Clone, Debug)]
pub struct LoadOptions {
    pub url: Option<String>,
    pub clients: usize,
    pub requests: usize,
    pub prompt: usize,
    pub reply: usize,
    pub cancel_rate: f64,
    pub seed: u64,
    pub json: bool,
}

impl Default for LoadOptions {
    fn default() -> LoadOptions {
        LoadOptions {
            url: None,
            clients: 0,
            requests: 0,
            prompt: 128,
            reply: 128,
            cancel_rate: 0.0,
            seed: 1,
            json: false,
        }
    }
}

impl LoadOptions {
    pub fn check(&self) -> Result<(), String> {
        if !(1..=256).contains(&self.clients) {
            return Err("loadtest needs --clients C, 1 to 256".into());
        }
        if !(1..=100_000).contains(&self.requests) {
            return Err("loadtest needs --requests R, 1 to 100000".into());
        }
        if !(2..=8192).contains(&self.prompt) || !(2..=8192).contains(&self.reply) {
            return Err("--prompt and --reply must be 2 to 8192".into());
        }
        if !(0.0..=1.0).contains(&self.cancel_rate) {
            return Err("--cancel-rate must be 0 to 1".into());
        }
        if let Some(u) = &self.url {
            loopback(u)?;
        }
        Ok(())
    }
}

/// `http://HOST:PORT[/]` → its address, which must be on this machine.
pub fn loopback(url: &str) -> Result<SocketAddr, String> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("--url {url:?}: expected http://HOST:PORT"))?;
    let hostport = rest.trim_end_matches('/');
    let addrs: Vec<SocketAddr> = hostport
        .to_socket_addrs()
        .map_err(|e| format!("--url {url:?}: {e}"))?
        .collect();
    match addrs.iter().find(|a| a.ip().is_loopback()) {
        Some(a) if addrs.iter().all(|a| a.ip().is_loopback()) => Ok(*a),
        _ => Err(format!(
            "--url {url:?}: the load test only talks to this machine (127.0.0.1, localhost, [::1])"
        )),
    }
}

/// The sampling every request of the load asks for (with its own seed).
pub(super) const TEMPERATURE: f32 = 0.8;
pub(super) const TOP_P: f32 = 0.95;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_urls() {
        assert!(loopback("http://127.0.0.1:8080").is_ok());
        assert!(loopback("http://localhost:8080/").is_ok());
        assert!(loopback("http://10.0.0.1:8080").is_err());
        assert!(loopback("https://127.0.0.1:8080").is_err());
    }
}
