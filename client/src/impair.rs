//! Userspace network impairment: a UDP relay between WebRTC callers and the server's media
//! socket that loses and delays packets, independently in each direction, because the
//! machines this runs on have no netem. A random delay of 0..=jitter per packet also reorders
//! packets, as real jitter does.
//!
//! Callers send to a *front* socket (one per upstream media address); every caller source
//! gets its own upstream socket, so the server sees one distinct peer per call and answers
//! it there. One thread runs one `ppoll` over all the sockets and a min-heap of delayed
//! packets; the queue is capped in packets and bytes, the flows in number. Draws come from a
//! seeded generator so that a run can be repeated.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::poll;

/// Packets waiting for their delivery time, at most; more are dropped as overflow.
pub const MAX_QUEUED_PACKETS: usize = 16_384;
/// Bytes waiting for their delivery time, at most.
pub const MAX_QUEUED_BYTES: usize = 16 << 20;
/// Caller flows (upstream sockets) per relay, at most; a flow lives as long as its relay.
pub const MAX_FLOWS: usize = 1024;
/// Datagrams read from one socket per wake-up, so that one busy flow cannot starve others.
const READ_BURST: usize = 64;
/// A delivery later than this past its time counts as late.
pub const LATE: Duration = Duration::from_millis(2);
/// How long the thread sleeps with nothing queued (the handle wakes it for changes).
const IDLE_WAIT: Duration = Duration::from_millis(200);

/// How one direction of the path misbehaves.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Impairment {
    /// Probability (0..=1) that a packet is lost.
    pub loss: f64,
    /// Extra delay drawn uniformly from 0..=jitter per packet (reorders packets).
    pub jitter: Duration,
    /// Fixed one-way delay added to every packet.
    pub delay: Duration,
    /// Seed of the random draws; the two directions use independent streams derived from it.
    pub seed: u64,
}

impl Impairment {
    /// `loss` and `jitter` with no base delay.
    pub fn new(loss: f64, jitter: Duration, seed: u64) -> Self {
        Self {
            loss,
            jitter,
            delay: Duration::ZERO,
            seed,
        }
    }

    /// The same impairment drawing from an independent stream (for the other direction).
    fn reversed(self) -> Self {
        Self {
            seed: self.seed ^ 0xD1B5_4A32_D192_ED03,
            ..self
        }
    }

    /// The longest delay a packet can get.
    pub fn max_delay(&self) -> Duration {
        self.delay + self.jitter
    }
}

/// Counters of one direction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DirectionStats {
    /// Packets delivered.
    pub forwarded: u64,
    /// Packets lost on purpose.
    pub dropped: u64,
    /// Packets dropped because the queue or the flow table was full.
    pub overflow: u64,
    /// Packets delivered more than [`LATE`] after their time: the relay fell behind.
    pub late: u64,
    /// The latest delivery, past its time.
    pub max_late: Duration,
}

/// Counters of both directions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RelayStats {
    /// Caller → server.
    pub to_server: DirectionStats,
    /// Server → caller.
    pub to_client: DirectionStats,
}

#[derive(Default)]
struct Counters {
    forwarded: AtomicU64,
    dropped: AtomicU64,
    overflow: AtomicU64,
    late: AtomicU64,
    max_late_us: AtomicU64,
}

impl Counters {
    fn snapshot(&self) -> DirectionStats {
        DirectionStats {
            forwarded: self.forwarded.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
            overflow: self.overflow.load(Ordering::Relaxed),
            late: self.late.load(Ordering::Relaxed),
            max_late: Duration::from_micros(self.max_late_us.load(Ordering::Relaxed)),
        }
    }
}

#[derive(Default)]
struct Shared {
    stop: AtomicBool,
    to_server: Counters,
    to_client: Counters,
}

/// A running relay; dropping it stops the thread (after delivering what is queued).
pub struct Relay {
    imp: Impairment,
    shared: Arc<Shared>,
    adds: mpsc::Sender<(UdpSocket, SocketAddr)>,
    /// Front address per upstream address.
    fronts: Mutex<HashMap<SocketAddr, SocketAddr>>,
    first: Mutex<Option<SocketAddr>>,
    kick: UdpSocket,
    control: SocketAddr,
    thread: Option<JoinHandle<()>>,
}

impl Relay {
    /// A relay to `upstream` impaired by `imp` both ways; callers send to [`Relay::addr`].
    pub fn start(upstream: SocketAddr, imp: Impairment) -> io::Result<Self> {
        let relay = Self::shared(imp)?;
        relay.front(upstream)?;
        Ok(relay)
    }

    /// A relay with no upstream yet (see [`Relay::front`]): one thread serves many calls.
    pub fn shared(imp: Impairment) -> io::Result<Self> {
        Self::shared_each(imp, imp.reversed())
    }

    /// [`Relay::shared`] with a different impairment each way.
    pub fn shared_each(to_server: Impairment, to_client: Impairment) -> io::Result<Self> {
        let control = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0))?;
        control.set_nonblocking(true)?;
        let control_addr = control.local_addr()?;
        let kick = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0))?;
        let shared = Arc::new(Shared::default());
        let (adds, rx) = mpsc::channel();
        let worker = Worker::new(control, rx, shared.clone(), to_server, to_client);
        let thread = std::thread::Builder::new()
            .name("impair-relay".into())
            .spawn(move || worker.run())?;
        Ok(Self {
            imp: to_server,
            shared,
            adds,
            fronts: Mutex::new(HashMap::new()),
            first: Mutex::new(None),
            kick,
            control: control_addr,
            thread: Some(thread),
        })
    }

    /// The impairment this relay applies (towards the server, when they differ).
    pub fn impairment(&self) -> Impairment {
        self.imp
    }

    /// The address callers send to instead of `upstream` (opened on first use).
    pub fn front(&self, upstream: SocketAddr) -> io::Result<SocketAddr> {
        let mut fronts = self.fronts.lock().map_err(|_| io::ErrorKind::Other)?;
        if let Some(a) = fronts.get(&upstream) {
            return Ok(*a);
        }
        let socket = UdpSocket::bind(SocketAddr::new(upstream.ip(), 0))?;
        socket.set_nonblocking(true)?;
        let addr = socket.local_addr()?;
        self.adds
            .send((socket, upstream))
            .map_err(|_| io::Error::other("relay thread stopped"))?;
        self.wake();
        fronts.insert(upstream, addr);
        if let Ok(mut first) = self.first.lock() {
            first.get_or_insert(addr);
        }
        Ok(addr)
    }

    /// The first front opened (the one for [`Relay::start`]'s upstream); unspecified before.
    pub fn addr(&self) -> SocketAddr {
        self.first
            .lock()
            .ok()
            .and_then(|f| *f)
            .unwrap_or_else(|| SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0))
    }

    /// Packets forwarded and dropped so far, each way.
    pub fn stats(&self) -> RelayStats {
        RelayStats {
            to_server: self.shared.to_server.snapshot(),
            to_client: self.shared.to_client.snapshot(),
        }
    }

    fn wake(&self) {
        let _ = self.kick.send_to(&[0], self.control);
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        self.wake();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// SplitMix64: tiny, seedable and stable across dependency versions.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in 0..=max.
    fn up_to(&mut self, max: u64) -> u64 {
        ((u128::from(self.next()) * (u128::from(max) + 1)) >> 64) as u64
    }
}

/// One direction's impairment and its random stream.
struct Shaper {
    imp: Impairment,
    rng: Rng,
}

impl Shaper {
    fn new(imp: Impairment) -> Self {
        Self {
            imp,
            rng: Rng(imp.seed),
        }
    }

    /// The packet's delay, or `None` when it is lost.
    fn judge(&mut self) -> Option<Duration> {
        let lost = self.imp.loss > 0.0 && self.rng.unit() < self.imp.loss;
        let max = self.imp.jitter.as_micros() as u64;
        let extra = if max == 0 { 0 } else { self.rng.up_to(max) };
        (!lost).then(|| self.imp.delay + Duration::from_micros(extra))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Dir {
    ToServer,
    ToClient,
}

/// Which socket a packet leaves from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Owner {
    Control,
    Front(usize),
    Flow(usize),
}

struct Port {
    front: UdpSocket,
    upstream: SocketAddr,
    flows: HashMap<SocketAddr, usize>,
}

struct Flow {
    socket: UdpSocket,
    client: SocketAddr,
    port: usize,
}

/// A delayed packet; ordered by due time, then arrival (`seq` is unique).
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Pending {
    due: Instant,
    seq: u64,
    from: Owner,
    to: SocketAddr,
    dir: Dir,
    data: Vec<u8>,
}

struct Worker {
    control: UdpSocket,
    adds: mpsc::Receiver<(UdpSocket, SocketAddr)>,
    shared: Arc<Shared>,
    up: Shaper,
    down: Shaper,
    ports: Vec<Port>,
    flows: Vec<Flow>,
    queue: BinaryHeap<Reverse<Pending>>,
    queued_bytes: usize,
    seq: u64,
    fds: Vec<libc::pollfd>,
    owners: Vec<Owner>,
    linger: Duration,
}

impl Worker {
    fn new(
        control: UdpSocket,
        adds: mpsc::Receiver<(UdpSocket, SocketAddr)>,
        shared: Arc<Shared>,
        to_server: Impairment,
        to_client: Impairment,
    ) -> Self {
        Self {
            control,
            adds,
            shared,
            up: Shaper::new(to_server),
            down: Shaper::new(to_client),
            ports: Vec::new(),
            flows: Vec::new(),
            queue: BinaryHeap::new(),
            queued_bytes: 0,
            seq: 0,
            fds: Vec::new(),
            owners: Vec::new(),
            linger: to_server.max_delay().max(to_client.max_delay()) + Duration::from_millis(5),
        }
    }

    fn run(mut self) {
        let mut buf = vec![0u8; 65_536];
        let mut stop_at: Option<Instant> = None;
        loop {
            let now = Instant::now();
            // On stop, keep relaying a little longer: what is in flight (a hangup's DTLS
            // close_notify) still arrives, as it would on a real path.
            if stop_at.is_none() && self.shared.stop.load(Ordering::Acquire) {
                stop_at = Some(now + self.linger);
            }
            if stop_at.is_some_and(|t| now >= t) {
                return;
            }
            self.adopt_ports();
            self.deliver(now);
            let wait = self
                .queue
                .peek()
                .map_or(IDLE_WAIT, |Reverse(p)| p.due.saturating_duration_since(now))
                .min(stop_at.map_or(IDLE_WAIT, |t| t.saturating_duration_since(now)));
            if self.fds.is_empty() {
                self.rebuild_fds();
            }
            if poll::poll(&mut self.fds, wait) > 0 {
                self.read_ready(&mut buf);
            }
        }
    }

    fn adopt_ports(&mut self) {
        while let Ok((front, upstream)) = self.adds.try_recv() {
            self.ports.push(Port {
                front,
                upstream,
                flows: HashMap::new(),
            });
            self.fds.clear();
        }
    }

    /// The pollfd array: control, fronts, flows (rebuilt when a socket is added).
    fn rebuild_fds(&mut self) {
        self.owners = std::iter::once(Owner::Control)
            .chain((0..self.ports.len()).map(Owner::Front))
            .chain((0..self.flows.len()).map(Owner::Flow))
            .collect();
        self.fds = self
            .owners
            .iter()
            .map(|o| poll::pollin(self.socket(*o)))
            .collect();
    }

    fn socket(&self, owner: Owner) -> &UdpSocket {
        match owner {
            Owner::Control => &self.control,
            Owner::Front(i) => &self.ports[i].front,
            Owner::Flow(i) => &self.flows[i].socket,
        }
    }

    fn read_ready(&mut self, buf: &mut [u8]) {
        let ready: Vec<Owner> = self
            .fds
            .iter()
            .zip(&self.owners)
            .filter(|(fd, _)| fd.revents & (libc::POLLIN | libc::POLLERR) != 0)
            .map(|(_, o)| *o)
            .collect();
        for owner in ready {
            for _ in 0..READ_BURST {
                let Ok((n, source)) = self.socket(owner).recv_from(buf) else {
                    break;
                };
                match owner {
                    Owner::Control => {}
                    Owner::Front(port) => self.upward(port, source, &buf[..n]),
                    Owner::Flow(flow) => self.downward(flow, source, &buf[..n]),
                }
            }
        }
    }

    /// A caller's packet on `port`'s front socket, bound for the server.
    fn upward(&mut self, port: usize, client: SocketAddr, data: &[u8]) {
        let Some(flow) = self.flow_for(port, client) else {
            self.shared
                .to_server
                .overflow
                .fetch_add(1, Ordering::Relaxed);
            return;
        };
        let to = self.ports[port].upstream;
        self.route(Dir::ToServer, Owner::Flow(flow), to, data);
    }

    /// The server's packet on `flow`'s upstream socket, bound for its caller.
    fn downward(&mut self, flow: usize, source: SocketAddr, data: &[u8]) {
        let (port, client) = (self.flows[flow].port, self.flows[flow].client);
        if source != self.ports[port].upstream {
            return;
        }
        self.route(Dir::ToClient, Owner::Front(port), client, data);
    }

    /// The flow of `client` on `port`, opening its upstream socket on first sight.
    fn flow_for(&mut self, port: usize, client: SocketAddr) -> Option<usize> {
        if let Some(f) = self.ports[port].flows.get(&client) {
            return Some(*f);
        }
        if self.flows.len() >= MAX_FLOWS {
            return None;
        }
        let ip = self.ports[port].upstream.ip();
        let socket = UdpSocket::bind(SocketAddr::new(ip, 0)).ok()?;
        socket.set_nonblocking(true).ok()?;
        self.flows.push(Flow {
            socket,
            client,
            port,
        });
        let f = self.flows.len() - 1;
        self.ports[port].flows.insert(client, f);
        self.fds.clear();
        Some(f)
    }

    fn counters(&self, dir: Dir) -> &Counters {
        match dir {
            Dir::ToServer => &self.shared.to_server,
            Dir::ToClient => &self.shared.to_client,
        }
    }

    /// Loses, sends at once, or queues one packet.
    fn route(&mut self, dir: Dir, from: Owner, to: SocketAddr, data: &[u8]) {
        let shaper = match dir {
            Dir::ToServer => &mut self.up,
            Dir::ToClient => &mut self.down,
        };
        let Some(delay) = shaper.judge() else {
            self.counters(dir).dropped.fetch_add(1, Ordering::Relaxed);
            return;
        };
        if delay.is_zero() {
            self.send(dir, from, to, data, Duration::ZERO);
            return;
        }
        let full = self.queue.len() >= MAX_QUEUED_PACKETS
            || self.queued_bytes + data.len() > MAX_QUEUED_BYTES;
        if full {
            self.counters(dir).overflow.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.seq += 1;
        self.queued_bytes += data.len();
        self.queue.push(Reverse(Pending {
            due: Instant::now() + delay,
            seq: self.seq,
            from,
            to,
            dir,
            data: data.to_vec(),
        }));
    }

    /// Sends every queued packet that is due.
    fn deliver(&mut self, now: Instant) {
        while self.queue.peek().is_some_and(|Reverse(p)| p.due <= now) {
            let Some(Reverse(p)) = self.queue.pop() else {
                return;
            };
            self.queued_bytes -= p.data.len();
            self.send(p.dir, p.from, p.to, &p.data, now - p.due);
        }
    }

    fn send(&self, dir: Dir, from: Owner, to: SocketAddr, data: &[u8], late: Duration) {
        if self.socket(from).send_to(data, to).is_err() {
            return;
        }
        let c = self.counters(dir);
        c.forwarded.fetch_add(1, Ordering::Relaxed);
        if late > LATE {
            c.late.fetch_add(1, Ordering::Relaxed);
        }
        c.max_late_us
            .fetch_max(late.as_micros() as u64, Ordering::Relaxed);
    }
}

/// The address of the first UDP candidate in an SDP (the server's media socket).
pub fn candidate_addr(sdp: &str) -> Option<SocketAddr> {
    sdp.lines().find_map(|l| udp_candidate(l).map(|(_, a)| a))
}

/// Splits a UDP `a=candidate:` line into its fields and address.
fn udp_candidate(line: &str) -> Option<(Vec<&str>, SocketAddr)> {
    let rest = line.trim_end().strip_prefix("a=candidate:")?;
    let fields: Vec<&str> = rest.split(' ').collect();
    if fields.len() < 6 || !fields[2].eq_ignore_ascii_case("udp") {
        return None;
    }
    let ip: IpAddr = fields[4].parse().ok()?;
    let port: u16 = fields[5].parse().ok()?;
    Some((fields, SocketAddr::new(ip, port)))
}

/// `sdp` with its first UDP candidate pointed at `via` and any other candidate removed, so
/// that the peer reaches the server only through the relay.
pub fn redirect(sdp: &str, via: SocketAddr) -> String {
    let mut out = String::with_capacity(sdp.len());
    let mut done = false;
    for line in sdp.split_inclusive('\n') {
        if !line.starts_with("a=candidate:") {
            out.push_str(line);
            continue;
        }
        let Some((mut fields, _)) = udp_candidate(line).filter(|_| !done) else {
            continue;
        };
        let (ip, port) = (via.ip().to_string(), via.port().to_string());
        fields[4] = &ip;
        fields[5] = &port;
        out.push_str("a=candidate:");
        out.push_str(&fields.join(" "));
        out.push_str(if line.ends_with("\r\n") { "\r\n" } else { "\n" });
        done = true;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEED: u64 = 7;

    fn bind() -> UdpSocket {
        let s = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        s
    }

    /// A server that answers every datagram to its source; returns its address.
    fn echo_server() -> SocketAddr {
        let s = bind();
        let addr = s.local_addr().unwrap();
        std::thread::spawn(move || {
            let mut buf = [0u8; 2048];
            while let Ok((n, from)) = s.recv_from(&mut buf) {
                let _ = s.send_to(&buf[..n], from);
            }
        });
        addr
    }

    /// Receives until a read times out; returns the payloads and their sources.
    fn drain(s: &UdpSocket) -> Vec<(Vec<u8>, SocketAddr)> {
        let mut buf = [0u8; 2048];
        let mut out = Vec::new();
        while let Ok((n, from)) = s.recv_from(&mut buf) {
            out.push((buf[..n].to_vec(), from));
        }
        out
    }

    /// Drains `s` on a thread while the test sends (loopback buffers hold ~256 datagrams).
    fn collect(s: &UdpSocket) -> std::thread::JoinHandle<Vec<(Vec<u8>, SocketAddr)>> {
        let s = s.try_clone().unwrap();
        std::thread::spawn(move || drain(&s))
    }

    fn seq(p: &[u8]) -> u32 {
        u32::from_le_bytes(p[..4].try_into().unwrap())
    }

    /// Sends `n` numbered packets, ~10 per millisecond (loopback buffers never overflow).
    fn send_numbered(s: &UdpSocket, to: SocketAddr, n: u32) {
        for i in 0..n {
            s.send_to(&i.to_le_bytes(), to).unwrap();
            if i % 10 == 9 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }

    #[test]
    fn zero_impairment_is_transparent_and_flows_are_distinct() {
        let server = bind();
        let relay = Relay::start(server.local_addr().unwrap(), Impairment::default()).unwrap();
        let (a, b) = (bind(), bind());
        let got = collect(&server);
        send_numbered(&a, relay.addr(), 300);
        b.send_to(&[9, 9, 9, 9], relay.addr()).unwrap();
        let got = got.join().unwrap();
        assert_eq!(got.len(), 301);
        let from_a: Vec<u32> = got
            .iter()
            .filter(|(p, _)| p != &[9, 9, 9, 9])
            .map(|(p, _)| seq(p))
            .collect();
        assert_eq!(from_a, (0..300).collect::<Vec<_>>(), "in order, none lost");
        let src_a = got[0].1;
        let src_b = got.iter().find(|(p, _)| p == &[9, 9, 9, 9]).unwrap().1;
        assert_ne!(src_a, src_b, "one upstream socket per caller");
        assert_ne!(src_a, a.local_addr().unwrap());
        server.send_to(b"to a", src_a).unwrap();
        server.send_to(b"to b", src_b).unwrap();
        let (pa, fa) = &drain(&a)[0];
        let (pb, fb) = &drain(&b)[0];
        assert_eq!((pa.as_slice(), *fa), (&b"to a"[..], relay.addr()));
        assert_eq!((pb.as_slice(), *fb), (&b"to b"[..], relay.addr()));
        let st = relay.stats();
        assert_eq!((st.to_server.forwarded, st.to_client.forwarded), (301, 2));
        assert_eq!(st.to_server.dropped + st.to_client.dropped, 0);
    }

    #[test]
    fn loss_rate_is_within_tolerance_each_way() {
        let imp = Impairment::new(0.05, Duration::ZERO, SEED);
        let relay = Relay::start(echo_server(), imp).unwrap();
        let client = bind();
        let back = collect(&client);
        send_numbered(&client, relay.addr(), 10_000);
        let back = back.join().unwrap().len() as u64;
        let st = relay.stats();
        // Binomial(10 000, 0.05): σ ≈ 22 packets; ±100 is beyond 4.5 σ.
        assert_eq!(st.to_server.forwarded + st.to_server.dropped, 10_000);
        assert!((400..=600).contains(&st.to_server.dropped), "{st:?}");
        let down = st.to_server.forwarded;
        assert_eq!(st.to_client.forwarded + st.to_client.dropped, down);
        let rate = st.to_client.dropped as f64 / down as f64;
        assert!((0.04..=0.06).contains(&rate), "{st:?}");
        assert_eq!(
            back, st.to_client.forwarded,
            "the client got what was forwarded"
        );
        assert_eq!(st.to_server.overflow + st.to_client.overflow, 0);
    }

    #[test]
    fn delays_stay_within_bounds_and_reorder() {
        let imp = Impairment {
            loss: 0.0,
            jitter: Duration::from_millis(30),
            delay: Duration::from_millis(10),
            seed: SEED,
        };
        let server = bind();
        let relay = Relay::start(server.local_addr().unwrap(), imp).unwrap();
        let client = bind();
        let origin = Instant::now();
        let to = relay.addr();
        let sender = std::thread::spawn(move || {
            for i in 0u32..500 {
                let us = origin.elapsed().as_micros() as u64;
                let mut p = i.to_le_bytes().to_vec();
                p.extend_from_slice(&us.to_le_bytes());
                client.send_to(&p, to).unwrap();
                std::thread::sleep(Duration::from_millis(2));
            }
        });
        let mut buf = [0u8; 64];
        let (mut delays, mut order) = (Vec::new(), Vec::new());
        while let Ok((n, _)) = server.recv_from(&mut buf) {
            let sent = u64::from_le_bytes(buf[4..n].try_into().unwrap());
            delays.push(origin.elapsed().as_micros() as u64 - sent);
            order.push(seq(&buf));
        }
        sender.join().unwrap();
        assert_eq!(delays.len(), 500);
        delays.sort_unstable();
        let (min, max) = (delays[0], delays[499]);
        assert!(min >= 10_000, "never early: {min} µs");
        assert!(max <= 40_000 + 25_000, "bounded: {max} µs");
        assert!(
            delays[50] < 16_000 && delays[450] > 34_000,
            "spread: {delays:?}"
        );
        let reordered = order.windows(2).filter(|w| w[1] < w[0]).count();
        assert!(reordered > 50, "jitter reorders: {reordered} of 500");
    }

    #[test]
    fn seeds_repeat() {
        let draws = |seed| {
            let mut s = Shaper::new(Impairment::new(0.3, Duration::from_millis(5), seed));
            (0..100).map(|_| s.judge()).collect::<Vec<_>>()
        };
        assert_eq!(draws(1), draws(1));
        assert_ne!(draws(1), draws(2));
    }

    #[test]
    fn redirect_points_the_answer_at_the_relay() {
        let sdp = "v=0\r\na=ice-lite\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\n\
                   a=candidate:1 1 udp 2130706431 127.0.0.1 40000 typ host\r\n\
                   a=candidate:2 1 udp 2130706431 127.0.0.1 40001 typ host\r\n\
                   a=end-of-candidates\r\n";
        assert_eq!(
            candidate_addr(sdp),
            Some("127.0.0.1:40000".parse().unwrap())
        );
        let out = redirect(sdp, "127.0.0.2:5000".parse().unwrap());
        assert!(out.contains("a=candidate:1 1 udp 2130706431 127.0.0.2 5000 typ host\r\n"));
        assert!(!out.contains("40001") && out.contains("a=end-of-candidates\r\n"));
        assert_eq!(
            candidate_addr(&out),
            Some("127.0.0.2:5000".parse().unwrap())
        );
    }
}
