//! Source networks (`--sip-allow`): `10.0.0.0/8`, `2001:db8::/32`, or a bare address; and
//! the RTP port range (`--sip-rtp-ports 40000-40999`).

use std::net::IpAddr;
use std::str::FromStr;

/// An IPv4 or IPv6 network.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

impl Cidr {
    /// Whether `ip` is inside (an IPv4-mapped IPv6 address counts as its IPv4 one).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                prefix_eq(&net.octets(), &ip.octets(), self.prefix)
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                prefix_eq(&net.octets(), &ip.octets(), self.prefix)
            }
            _ => false,
        }
    }
}

/// Whether the first `bits` bits of `a` and `b` are equal.
fn prefix_eq(a: &[u8], b: &[u8], bits: u8) -> bool {
    let (whole, rest) = (usize::from(bits / 8), bits % 8);
    if a[..whole] != b[..whole] {
        return false;
    }
    if rest == 0 {
        return true;
    }
    let mask = 0xffu8 << (8 - rest);
    a[whole] & mask == b[whole] & mask
}

impl FromStr for Cidr {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (addr, prefix) = match s.trim().split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s.trim(), None),
        };
        let addr: IpAddr = addr
            .parse()
            .map_err(|_| format!("{s:?} is not an address or a network (10.0.0.0/8)"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(p) => p
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= max)
                .ok_or_else(|| format!("{s:?}: the prefix length must be 0 to {max}"))?,
        };
        Ok(Self { addr, prefix })
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

impl serde::Serialize for Cidr {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// An inclusive range of UDP ports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortRange {
    /// The first port.
    pub low: u16,
    /// The last port.
    pub high: u16,
}

impl PortRange {
    /// How many ports.
    pub fn len(&self) -> usize {
        usize::from(self.high - self.low) + 1
    }

    /// Never empty (parsing refuses an empty range).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The `i`-th port, wrapping around.
    pub fn nth(&self, i: usize) -> u16 {
        self.low + (i % self.len()) as u16
    }
}

impl FromStr for PortRange {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("{s:?}: give a port range LOW-HIGH, e.g. 40000-40999");
        let (low, high) = s.trim().split_once('-').ok_or_else(bad)?;
        let low: u16 = low.trim().parse().map_err(|_| bad())?;
        let high: u16 = high.trim().parse().map_err(|_| bad())?;
        if low == 0 || high < low {
            return Err(bad());
        }
        Ok(Self { low, high })
    }
}

impl std::fmt::Display for PortRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.low, self.high)
    }
}

impl serde::Serialize for PortRange {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn networks_contain_their_addresses_only() {
        let net: Cidr = "10.1.0.0/16".parse().unwrap();
        assert!(net.contains(ip("10.1.200.3")));
        assert!(!net.contains(ip("10.2.0.1")));
        assert!(net.contains(ip("::ffff:10.1.0.9")), "IPv4-mapped");
        let odd: Cidr = "192.168.1.128/25".parse().unwrap();
        assert!(odd.contains(ip("192.168.1.200")));
        assert!(!odd.contains(ip("192.168.1.100")));
        let one: Cidr = "2001:db8::7".parse().unwrap();
        assert!(one.contains(ip("2001:db8::7")));
        assert!(!one.contains(ip("2001:db8::8")));
        assert!(!one.contains(ip("10.0.0.1")));
        let any: Cidr = "0.0.0.0/0".parse().unwrap();
        assert!(any.contains(ip("203.0.113.1")));
        assert_eq!(odd.to_string(), "192.168.1.128/25");
    }

    #[test]
    fn port_ranges_parse_and_wrap() {
        let r: PortRange = "40000-40002".parse().unwrap();
        assert_eq!(
            (r.len(), r.nth(0), r.nth(2), r.nth(3)),
            (3, 40000, 40002, 40000)
        );
        assert_eq!(r.to_string(), "40000-40002");
        let one: PortRange = "5004-5004".parse().unwrap();
        assert_eq!(one.len(), 1);
        for bad in ["0-10", "10-9", "40000", "a-b", "1-70000", ""] {
            assert!(bad.parse::<PortRange>().is_err(), "{bad}");
        }
    }

    #[test]
    fn bad_networks_are_errors() {
        for bad in ["10.0.0.0/33", "::/129", "example.com", "10.0.0.0/x", ""] {
            assert!(bad.parse::<Cidr>().is_err(), "{bad}");
        }
    }
}
