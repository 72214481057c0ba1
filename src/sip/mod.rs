//! Phone calls straight in over SIP, in the shapes of OpenAI's SIP connector: a trunk's
//! INVITE is answered `100 Trying` and `180 Ringing` (repeated every minute), becomes a
//! pending call `rtc_…` announced to the app by a signed `realtime.call.incoming` webhook,
//! and waits for `POST /v1/realtime/calls/{id}/accept` (the session configuration: the call
//! gets `200 OK` and a session) or `/reject` (the caller gets the status); `/refer` transfers
//! it, `/hangup` ends it, and the sideband `GET /v1/realtime?call_id=` sees and steers it.
//!
//! - [`stack`]: the SIP transport, transactions and dialogs (the `rsipstack` crate, used
//!   nowhere else), routing each INVITE to its call task.
//! - [`call`]: one call's life, from ringing to BYE, and its session: a task that moves
//!   messages to and from `duet_signaling::sip_call`, where the call's SIP decisions are.
//! - [`media`]: the call's RTP leg on its own UDP port, paced on the 20 ms grid.
//! - [`webhook`]: the signed webhook, retried with backoff.
//! - [`limits`]: the INVITE rate per source, SIP TCP connections, calls ringing.

mod call;
pub mod limits;
pub mod media;
mod stack;
pub mod webhook;

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use crate::cidr::{Cidr, PortRange};
use tokio::sync::mpsc;

/// What `--sip-*` configures.
#[derive(Clone)]
pub struct SipSettings {
    /// Where SIP is answered (UDP and TCP).
    pub listen: SocketAddr,
    /// The address in Contact headers and SDP.
    pub public: IpAddr,
    /// The app's webhook.
    pub webhook: webhook::Webhook,
    /// How long the app has to decide.
    pub decision: Duration,
    /// Allowed sources (empty: any).
    pub allow: Vec<Cidr>,
    /// RTP silence that ends a call.
    pub rtp_timeout: Duration,
    /// The RTP legs' ports (`None`: ephemeral ones).
    pub rtp_ports: Option<PortRange>,
    /// Where the next search of `rtp_ports` starts (so ports rotate).
    pub next_port: Arc<std::sync::atomic::AtomicUsize>,
    /// New INVITEs a second from one source (`--sip-invite-rate`).
    pub invite_rate: u32,
    /// Calls ringing at once (`--sip-max-ringing`).
    pub max_ringing: usize,
    /// SIP TCP connections in all, and from one source (`--sip-max-tcp`,
    /// `--sip-max-tcp-per-ip`).
    pub max_tcp: (usize, usize),
}

impl SipSettings {
    /// The settings of the SIP flags, or `None` without `--sip-listen`.
    pub fn from_args(args: &crate::config::SipArgs) -> anyhow::Result<Option<Self>> {
        let Some(listen) = args.sip_listen else {
            return Ok(None);
        };
        let public = match (args.sip_public_addr, listen.ip()) {
            (Some(ip), _) => ip,
            (None, ip) if ip.is_unspecified() => anyhow::bail!(
                "--sip-listen {listen} is a wildcard: set --sip-public-addr to the address trunks reach"
            ),
            (None, ip) => ip,
        };
        let url = args.sip_webhook_url.as_deref().ok_or_else(|| {
            anyhow::anyhow!(
                "--sip-listen needs --sip-webhook-url: where incoming calls are announced"
            )
        })?;
        let secret = args.sip_webhook_secret.as_deref().ok_or_else(|| {
            anyhow::anyhow!("--sip-listen needs --sip-webhook-secret (whsec_…): the app checks each webhook with it")
        })?;
        let secret = duet_signaling::webhook::WebhookSecret::parse(secret)
            .map_err(|e| anyhow::anyhow!("--sip-webhook-secret: {e}"))?;
        Ok(Some(Self {
            listen,
            public,
            webhook: webhook::Webhook::new(url, secret)?,
            decision: Duration::from_secs(args.sip_decision_secs),
            allow: args.sip_allow.clone(),
            rtp_timeout: Duration::from_secs(args.sip_rtp_timeout_secs),
            rtp_ports: args.sip_rtp_ports,
            next_port: Arc::default(),
            invite_rate: args.sip_invite_rate,
            max_ringing: args.sip_max_ringing,
            max_tcp: (args.sip_max_tcp, args.sip_max_tcp_per_ip),
        }))
    }

    /// A UDP socket for a call's RTP on `ip`: the next free port of `--sip-rtp-ports`, or
    /// an ephemeral one.
    pub async fn rtp_socket(&self, ip: IpAddr) -> std::io::Result<tokio::net::UdpSocket> {
        let Some(range) = self.rtp_ports else {
            return tokio::net::UdpSocket::bind((ip, 0)).await;
        };
        use std::sync::atomic::Ordering::Relaxed;
        let start = self.next_port.fetch_add(1, Relaxed);
        for i in 0..range.len() {
            if let Ok(socket) = tokio::net::UdpSocket::bind((ip, range.nth(start + i))).await {
                self.next_port.store(start + i + 1, Relaxed);
                return Ok(socket);
            }
        }
        Err(std::io::Error::new(
            std::io::ErrorKind::AddrInUse,
            format!("every port of --sip-rtp-ports {range} is in use"),
        ))
    }

    /// Whether `ip` may send SIP.
    pub fn allows(&self, ip: IpAddr) -> bool {
        self.allow.is_empty() || self.allow.iter().any(|net| net.contains(ip))
    }
}

pub use crate::calls::PhoneControl as Control;

/// SIP calls by id, pending or live, with the credential that owns each once accepted.
#[derive(Default)]
pub struct SipCalls {
    calls: Mutex<HashMap<String, Entry>>,
    /// Those ringing (capped by `--sip-max-ringing` and `--max-calls`).
    ringing: limits::Ringing,
}

struct Entry {
    control: mpsc::Sender<Control>,
    /// Set on accept: only this credential (or the server key) reaches the call then.
    owner: Option<Option<String>>,
}

impl SipCalls {
    fn insert(&self, id: &str, control: mpsc::Sender<Control>) {
        if let Ok(mut m) = self.calls.lock() {
            m.insert(
                id.to_string(),
                Entry {
                    control,
                    owner: None,
                },
            );
        }
    }

    fn set_owner(&self, id: &str, owner: Option<String>) {
        if let Ok(mut m) = self.calls.lock() {
            if let Some(e) = m.get_mut(id) {
                e.owner = Some(owner);
            }
        }
    }

    fn remove(&self, id: &str) {
        if let Ok(mut m) = self.calls.lock() {
            m.remove(id);
        }
    }

    /// The call `id`'s control, if `reaches` says its owner is reachable (a pending call
    /// has none yet: any credential of the server's may decide it).
    pub fn control(
        &self,
        id: &str,
        reaches: impl Fn(Option<&str>) -> bool,
    ) -> Option<mpsc::Sender<Control>> {
        let m = self.calls.lock().ok()?;
        let e = m.get(id)?;
        match &e.owner {
            Some(owner) if !reaches(owner.as_deref()) => None,
            _ => Some(e.control.clone()),
        }
    }

    /// Accepted calls (live).
    pub fn live(&self) -> usize {
        self.calls
            .lock()
            .map_or(0, |m| m.values().filter(|e| e.owner.is_some()).count())
    }

    /// A place for one more ringing call while fewer than `cap` ring.
    fn take_ring(&self, cap: usize) -> Option<limits::RingSlot> {
        self.ringing.take(cap)
    }

    /// Calls ringing.
    pub fn ringing(&self) -> usize {
        self.ringing.held()
    }

    /// Calls pending or live.
    pub fn len(&self) -> usize {
        self.calls.lock().map_or(0, |m| m.len())
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The running SIP side.
pub struct Sip {
    /// Where it answers.
    pub local: SocketAddr,
    /// Its calls.
    pub calls: Arc<SipCalls>,
    stop: stack::Stop,
}

impl Sip {
    /// Starts answering SIP on `settings.listen`, its calls' sessions opened by `host`,
    /// its calls kept in `calls` (which the HTTP API reads).
    pub async fn start(
        settings: SipSettings,
        host: Arc<dyn crate::calls::PhoneHost>,
        calls: Arc<SipCalls>,
    ) -> anyhow::Result<Self> {
        let (local, stop) = stack::start(settings, host, calls.clone()).await?;
        tracing::info!(%local, "SIP listening (UDP and TCP)");
        Ok(Self { local, calls, stop })
    }
}

impl Drop for Sip {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}
