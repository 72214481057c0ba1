//! DTMF digits from RFC 4733 `telephone-event` RTP payloads, as phone trunks send them.
//!
//! Rules learned from what actually arrives (see the SIP research notes):
//! - one key press is one RTP timestamp: every packet of the event, its updates with a
//!   growing duration and its end packet repeated three times (with the same sequence
//!   number), carries the timestamp where the event began;
//! - the marker bit is not required (providers omit it), nor a start packet (it may be
//!   lost: the first packet seen of a new timestamp reports the digit);
//! - events may come from a second SSRC on the same port (a trunk's own DTMF source);
//! - a repeated digit is a new timestamp, never deduplicated by its code or duration.
//!
//! Sans-IO: the caller hands over the payloads of the negotiated telephone-event payload
//! type with their SSRC and timestamp.

/// One `telephone-event` payload (RFC 4733 §2.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TelephoneEvent {
    /// The event code (0–15 are the DTMF keys).
    pub event: u8,
    /// The E bit: the last packets of the event.
    pub end: bool,
    /// Power level, in −dBm0 (0–63).
    pub volume: u8,
    /// Duration so far, in RTP timestamp units.
    pub duration: u16,
}

impl TelephoneEvent {
    /// Parses a payload: 4 bytes (more are ignored: RFC 4733 allows several events in one
    /// packet only for redundancy, which repeats earlier ones).
    pub fn parse(payload: &[u8]) -> Option<Self> {
        let [event, flags, d0, d1, ..] = *payload else {
            return None;
        };
        Some(Self {
            event,
            end: flags & 0x80 != 0,
            volume: flags & 0x3f,
            duration: u16::from_be_bytes([d0, d1]),
        })
    }

    /// The payload of this event.
    pub fn to_bytes(self) -> [u8; 4] {
        let d = self.duration.to_be_bytes();
        [
            self.event,
            (u8::from(self.end) << 7) | (self.volume & 0x3f),
            d[0],
            d[1],
        ]
    }
}

/// The key of a DTMF event code: `0`–`9`, `*`, `#`, `A`–`D` (none for other events).
pub fn digit(event: u8) -> Option<char> {
    b"0123456789*#ABCD"
        .get(usize::from(event))
        .map(|&b| char::from(b))
}

/// How many recent key presses are remembered (late duplicates of older ones are rare).
const REMEMBERED: usize = 8;

/// Turns telephone-event packets into key presses. See the module docs.
#[derive(Debug, Default)]
pub struct DtmfDetector {
    /// (SSRC, RTP timestamp) of recent key presses, newest last.
    seen: Vec<(u32, u32)>,
}

impl DtmfDetector {
    /// A detector that has seen nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// One telephone-event packet: the key it starts, if it is the first packet seen of a
    /// key press; `None` for the rest of a press, non-DTMF events and malformed payloads.
    pub fn push(&mut self, ssrc: u32, timestamp: u32, payload: &[u8]) -> Option<char> {
        let ev = TelephoneEvent::parse(payload)?;
        let key = digit(ev.event)?;
        if self.seen.contains(&(ssrc, timestamp)) {
            return None;
        }
        if self.seen.len() == REMEMBERED {
            self.seen.remove(0);
        }
        self.seen.push((ssrc, timestamp));
        Some(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(event: u8, end: bool, duration: u16) -> [u8; 4] {
        TelephoneEvent {
            event,
            end,
            volume: 10,
            duration,
        }
        .to_bytes()
    }

    #[test]
    fn payloads_parse_as_rfc_4733_lays_them_out() {
        // RFC 4733 §2.3: event, E|R|volume, duration (big-endian).
        let p = TelephoneEvent::parse(&[0x01, 0x8a, 0x03, 0x20]).unwrap();
        assert_eq!(
            p,
            TelephoneEvent {
                event: 1,
                end: true,
                volume: 10,
                duration: 800
            }
        );
        assert_eq!(p.to_bytes(), [0x01, 0x8a, 0x03, 0x20]);
        assert_eq!(TelephoneEvent::parse(&[1, 2, 3]), None);
        let keys: String = (0..16).filter_map(digit).collect();
        assert_eq!(keys, "0123456789*#ABCD");
        assert_eq!(digit(16), None); // not a DTMF key (e.g. a fax tone)
    }

    #[test]
    fn one_key_press_is_one_digit_whatever_its_packets() {
        // As sipp's dtmf_2833_1.pcap sends it: 7 updates and the end packet three times,
        // all at timestamp 13280, no marker bit.
        let mut d = DtmfDetector::new();
        let mut keys = String::new();
        for i in 0..7u16 {
            keys.extend(d.push(0x1234, 13280, &ev(1, false, 160 * (i + 1))));
        }
        for _ in 0..3 {
            keys.extend(d.push(0x1234, 13280, &ev(1, true, 1280)));
        }
        assert_eq!(keys, "1");
    }

    #[test]
    fn a_lost_start_still_reports_the_key_and_repeats_are_new_presses() {
        let mut d = DtmfDetector::new();
        let mut keys = String::new();
        // Only the end packets of the first press arrive.
        keys.extend(d.push(7, 1000, &ev(2, true, 800)));
        keys.extend(d.push(7, 1000, &ev(2, true, 800)));
        // The same key again is a new timestamp: a second press.
        keys.extend(d.push(7, 3000, &ev(2, false, 160)));
        keys.extend(d.push(7, 3000, &ev(2, true, 800)));
        // `#` from a second SSRC on the same port.
        keys.extend(d.push(99, 5000, &ev(11, false, 160)));
        // A non-DTMF event and a malformed payload are ignored.
        keys.extend(d.push(7, 6000, &ev(40, false, 160)));
        keys.extend(d.push(7, 7000, &[1, 2]));
        assert_eq!(keys, "22#");
    }

    #[test]
    fn a_late_duplicate_of_an_older_press_is_not_a_new_one() {
        let mut d = DtmfDetector::new();
        let mut keys = String::new();
        for (ts, key) in [(100, 1), (200, 2), (300, 3)] {
            keys.extend(d.push(1, ts, &ev(key, false, 160)));
        }
        keys.extend(d.push(1, 100, &ev(1, true, 800))); // reordered end of the first
        assert_eq!(keys, "123");
    }
}
