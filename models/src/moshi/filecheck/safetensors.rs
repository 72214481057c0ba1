//! The safetensors header: its length, then just enough JSON to check every tensor's
//! `shape` and `data_offsets`.

use std::io::{Read, Seek};

use super::{Scan, JSON_MAX_DEPTH, SAFETENSORS_MAX_HEADER};

pub(super) fn safetensors<R: Read + Seek>(s: &mut Scan<R>) -> Result<(), String> {
    let n = s.u64("header length")?;
    if n > SAFETENSORS_MAX_HEADER {
        return Err(format!(
            "header length {n} is over the {SAFETENSORS_MAX_HEADER}-byte limit"
        ));
    }
    if n > s.left() {
        return Err(format!(
            "header length {n} is more than the {} bytes after it",
            s.left()
        ));
    }
    let mut header = vec![0u8; n as usize];
    s.read(&mut header, "header")?;
    let data_len = s.left();
    let mut j = Json { b: &header, i: 0 };
    j.header(data_len)
}

/// Just enough JSON to find each safetensors tensor's `shape` and `data_offsets`. Lenient
/// where serde_json is strict (control characters, lone surrogates, trailing bytes): the
/// safetensors crate parses the header again and refuses those itself.
struct Json<'a> {
    b: &'a [u8],
    i: usize,
}

impl Json<'_> {
    fn err(&self, what: &str) -> String {
        format!("header JSON at byte {}: {what}", self.i)
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> Result<(), String> {
        self.ws();
        if self.peek() != Some(c) {
            return Err(self.err(&format!("expected '{}'", c as char)));
        }
        self.i += 1;
        Ok(())
    }

    /// After an item of a list closed by `close`: true if another follows.
    fn more(&mut self, close: u8) -> Result<bool, String> {
        self.ws();
        match self.peek() {
            Some(b',') => {
                self.i += 1;
                Ok(true)
            }
            Some(c) if c == close => {
                self.i += 1;
                Ok(false)
            }
            _ => Err(self.err(&format!("expected ',' or '{}'", close as char))),
        }
    }

    /// Opens an object or array; false if it is empty (and already closed).
    fn open(&mut self, open: u8, close: u8) -> Result<bool, String> {
        self.eat(open)?;
        self.ws();
        if self.peek() == Some(close) {
            self.i += 1;
            return Ok(false);
        }
        Ok(true)
    }

    fn hex4(&mut self) -> Result<u32, String> {
        let digits = self
            .b
            .get(self.i..self.i + 4)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u32::from_str_radix(h, 16).ok())
            .ok_or_else(|| self.err("bad \\u escape"))?;
        self.i += 4;
        Ok(digits)
    }

    /// A string, decoded if `keep` (else only skipped).
    fn string(&mut self, keep: bool) -> Result<String, String> {
        self.eat(b'"')?;
        let mut out = Vec::new();
        loop {
            let c = self.peek().ok_or_else(|| self.err("unterminated string"))?;
            self.i += 1;
            match c {
                b'"' => break,
                b'\\' => {
                    let e = self.peek().ok_or_else(|| self.err("unterminated string"))?;
                    self.i += 1;
                    let ch = match e {
                        b'"' | b'\\' | b'/' => e as char,
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => {
                            let hi = self.hex4()?;
                            let pair = (0xD800..0xDC00).contains(&hi)
                                && self.b.get(self.i..self.i + 2) == Some(b"\\u");
                            let code = if pair {
                                self.i += 2;
                                let lo = self.hex4()?;
                                if (0xDC00..0xE000).contains(&lo) {
                                    0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                                } else {
                                    0xFFFD
                                }
                            } else {
                                hi
                            };
                            char::from_u32(code).unwrap_or('\u{FFFD}')
                        }
                        _ => return Err(self.err("bad escape")),
                    };
                    if keep {
                        let mut utf8 = [0u8; 4];
                        out.extend_from_slice(ch.encode_utf8(&mut utf8).as_bytes());
                    }
                }
                _ if keep => out.push(c),
                _ => {}
            }
        }
        Ok(String::from_utf8_lossy(&out).into_owned())
    }

    /// A JSON number that must be a non-negative integer (serde reads `usize` fields only
    /// from those; it takes even `-0` for a float).
    fn uint(&mut self) -> Result<u64, String> {
        self.ws();
        if self.peek() == Some(b'-') {
            return Err(self.err("negative number"));
        }
        let start = self.i;
        let mut v: Option<u64> = Some(0);
        while let Some(d @ b'0'..=b'9') = self.peek() {
            v = v
                .and_then(|v| v.checked_mul(10))
                .and_then(|v| v.checked_add(u64::from(d - b'0')));
            self.i += 1;
        }
        let digits = self.i - start;
        if digits == 0 || (digits > 1 && self.b[start] == b'0') {
            return Err(self.err("bad number"));
        }
        if matches!(self.peek(), Some(b'.' | b'e' | b'E')) {
            return Err(self.err("expected an integer"));
        }
        v.ok_or_else(|| self.err("number too large"))
    }

    /// A list of non-negative integers, each handed to `f`; returns how many.
    fn uints(&mut self, mut f: impl FnMut(u64) -> Result<(), String>) -> Result<u64, String> {
        let mut n = 0;
        if self.open(b'[', b']')? {
            loop {
                f(self.uint()?)?;
                n += 1;
                if !self.more(b']')? {
                    break;
                }
            }
        }
        Ok(n)
    }

    fn literal(&mut self, word: &[u8]) -> Result<(), String> {
        if self.b.get(self.i..self.i + word.len()) != Some(word) {
            return Err(self.err("unexpected token"));
        }
        self.i += word.len();
        Ok(())
    }

    fn skip_number(&mut self) -> Result<(), String> {
        let start = self.i;
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        let digits = |j: &mut Self| {
            let from = j.i;
            while matches!(j.peek(), Some(b'0'..=b'9')) {
                j.i += 1;
            }
            j.i - from
        };
        if digits(self) == 0 {
            return Err(self.err("bad number"));
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            if digits(self) == 0 {
                return Err(self.err("bad number"));
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.i += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.i += 1;
            }
            if digits(self) == 0 {
                return Err(self.err("bad number"));
            }
        }
        debug_assert!(self.i > start);
        Ok(())
    }

    /// Skips any value; `depth` is the nesting of the containers it would open.
    fn skip_value(&mut self, depth: u32) -> Result<(), String> {
        if depth > JSON_MAX_DEPTH {
            return Err(self.err("nested too deep"));
        }
        self.ws();
        match self.peek() {
            Some(b'{') => {
                if self.open(b'{', b'}')? {
                    loop {
                        self.string(false)?;
                        self.eat(b':')?;
                        self.skip_value(depth + 1)?;
                        if !self.more(b'}')? {
                            break;
                        }
                    }
                }
                Ok(())
            }
            Some(b'[') => {
                if self.open(b'[', b']')? {
                    loop {
                        self.skip_value(depth + 1)?;
                        if !self.more(b']')? {
                            break;
                        }
                    }
                }
                Ok(())
            }
            Some(b'"') => self.string(false).map(drop),
            Some(b't') => self.literal(b"true"),
            Some(b'f') => self.literal(b"false"),
            Some(b'n') => self.literal(b"null"),
            Some(b'-' | b'0'..=b'9') => self.skip_number(),
            _ => Err(self.err("expected a value")),
        }
    }

    /// The top-level object: `__metadata__` and the tensors.
    fn header(&mut self, data_len: u64) -> Result<(), String> {
        if !self.open(b'{', b'}')? {
            return Ok(());
        }
        loop {
            let name = self.string(true)?;
            self.eat(b':')?;
            if name == "__metadata__" {
                self.skip_value(2)?;
            } else {
                self.tensor(data_len)
                    .map_err(|e| format!("tensor {name:?}: {e}"))?;
            }
            if !self.more(b'}')? {
                return Ok(());
            }
        }
    }

    /// One tensor's entry: an object whose fields other than `shape` and `data_offsets` are
    /// skipped, or (serde reads a struct from either) the array `[dtype, shape, offsets]`.
    fn tensor(&mut self, data_len: u64) -> Result<(), String> {
        self.ws();
        if self.peek() == Some(b'[') {
            if self.open(b'[', b']')? {
                for i in 0.. {
                    match i {
                        1 => self.shape()?,
                        2 => self.data_offsets(data_len)?,
                        _ => self.skip_value(3)?,
                    }
                    if !self.more(b']')? {
                        break;
                    }
                }
            }
            return Ok(());
        }
        if !self.open(b'{', b'}')? {
            return Ok(());
        }
        loop {
            let field = self.string(true)?;
            self.eat(b':')?;
            match field.as_str() {
                "shape" => self.shape()?,
                "data_offsets" => self.data_offsets(data_len)?,
                _ => self.skip_value(3)?,
            }
            if !self.more(b'}')? {
                return Ok(());
            }
        }
    }

    /// The dimensions' product, zeros counted as one, must be a `usize`.
    fn shape(&mut self) -> Result<(), String> {
        let mut bound = 1u64;
        self.uints(|d| {
            bound = bound
                .checked_mul(d.max(1))
                .filter(|&b| usize::try_from(b).is_ok())
                .ok_or("the shape's product overflows")?;
            Ok(())
        })
        .map(drop)
    }

    /// `[begin, end]` within the data after the header.
    fn data_offsets(&mut self, data_len: u64) -> Result<(), String> {
        let mut o = [0u64; 2];
        let mut k = 0;
        let n = self.uints(|v| {
            if let Some(slot) = o.get_mut(k) {
                *slot = v;
            }
            k += 1;
            Ok(())
        })?;
        if n != 2 {
            return Err(format!("data_offsets has {n} numbers, not 2"));
        }
        let [begin, end] = o;
        if begin > end {
            return Err(format!("data_offsets [{begin}, {end}] run backwards"));
        }
        if end > data_len {
            return Err(format!(
                "data_offsets [{begin}, {end}] end past the {data_len} data bytes after the \
                 header"
            ));
        }
        Ok(())
    }
}
