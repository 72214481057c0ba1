//! Server-sent events, as an OpenAI-compatible server streams `/chat/completions`
//! ([`crate::chat`]): bytes in, each event's `data` out. Sans-IO; the caller feeds what the
//! socket gave.

/// The longest event this decoder holds (bytes); a longer one is an error, not memory.
pub const MAX_EVENT: usize = 1 << 20;

/// Splits a byte stream into SSE events and returns their `data` fields (joined by `\n`
/// where an event has several). Comments, `event:`, `id:` and `retry:` lines are skipped.
#[derive(Debug, Default)]
pub struct SseDecoder {
    line: Vec<u8>,
    data: String,
    has_data: bool,
}

/// An event over [`MAX_EVENT`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventTooLong;

impl std::fmt::Display for EventTooLong {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "a server-sent event is longer than {MAX_EVENT} bytes")
    }
}

impl std::error::Error for EventTooLong {}

impl SseDecoder {
    /// A decoder at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds bytes; pushes the `data` of every event they complete onto `out`.
    pub fn push(&mut self, bytes: &[u8], out: &mut Vec<String>) -> Result<(), EventTooLong> {
        for &b in bytes {
            if b != b'\n' {
                if self.line.len() + self.data.len() >= MAX_EVENT {
                    return Err(EventTooLong);
                }
                self.line.push(b);
                continue;
            }
            if self.line.last() == Some(&b'\r') {
                self.line.pop();
            }
            let line = std::mem::take(&mut self.line);
            self.on_line(&line, out);
        }
        Ok(())
    }

    fn on_line(&mut self, line: &[u8], out: &mut Vec<String>) {
        if line.is_empty() {
            if std::mem::take(&mut self.has_data) {
                out.push(std::mem::take(&mut self.data));
            }
            return;
        }
        let text = String::from_utf8_lossy(line);
        let (field, value) = match text.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (text.as_ref(), ""),
        };
        if field == "data" {
            if self.has_data {
                self.data.push('\n');
            }
            self.data.push_str(value);
            self.has_data = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(chunks: &[&[u8]]) -> Vec<String> {
        let mut d = SseDecoder::new();
        let mut out = Vec::new();
        for c in chunks {
            d.push(c, &mut out).unwrap();
        }
        out
    }

    #[test]
    fn events_split_anywhere_come_out_whole() {
        let stream = b": keep-alive\r\n\r\ndata: {\"a\":1}\r\n\r\nevent: x\ndata: [DONE]\n\n";
        let whole = decode(&[stream]);
        assert_eq!(whole, [r#"{"a":1}"#, "[DONE]"]);
        for cut in 0..stream.len() {
            assert_eq!(
                decode(&[&stream[..cut], &stream[cut..]]),
                whole,
                "cut at {cut}"
            );
        }
        let bytewise: Vec<&[u8]> = stream.chunks(1).collect();
        assert_eq!(decode(&bytewise), whole);
    }

    #[test]
    fn multi_line_data_is_joined_and_a_long_event_refused() {
        assert_eq!(decode(&[b"data: a\ndata:b\n\n"]), ["a\nb"]);
        let mut d = SseDecoder::new();
        let long = vec![b'x'; MAX_EVENT + 1];
        assert_eq!(d.push(&long, &mut Vec::new()), Err(EventTooLong));
    }
}
