//! The text side of Moshi's inner monologue: token id → text, read from a SentencePiece
//! model file (`tokenizer_spm_32k_3.model`).
//!
//! Only decoding is needed (the server never tokenizes text for Moshi), so this reads the
//! `pieces` of the protobuf `ModelProto` (field 1: `SentencePiece { piece = 1, score = 2,
//! type = 3 }`) and skips everything else, instead of building the C++ library.

use std::fmt;

/// Piece types of `SentencePiece.Type`.
const TYPE_NORMAL: u64 = 1;
const TYPE_BYTE: u64 = 6;
/// `USER_DEFINED`: printed like normal pieces (SentencePiece's `ModelProto.SentencePiece.Type`).
const TYPE_USER_DEFINED: u64 = 4;
/// Upper bound on pieces, far above any real vocabulary.
const MAX_PIECES: usize = 1 << 20;

/// A malformed tokenizer file.
#[derive(Debug, PartialEq, Eq)]
pub struct SpmError(pub String);

impl fmt::Display for SpmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Piece {
    /// Printable text (`▁` already turned into a space).
    Text(String),
    /// One raw byte (`<0x0A>`).
    Byte(u8),
    /// Control, unknown or unused (or a malformed byte piece): prints nothing.
    Silent,
}

/// Decodes token ids to text.
#[derive(Clone, Debug)]
pub struct TextDecoder {
    pieces: Vec<Piece>,
}

impl TextDecoder {
    /// Parses a SentencePiece model file.
    pub fn parse(bytes: &[u8]) -> Result<Self, SpmError> {
        let mut r = Reader { buf: bytes, pos: 0 };
        let mut pieces = Vec::new();
        while !r.done() {
            let (field, wire) = r.key()?;
            if field == 1 && wire == 2 {
                if pieces.len() >= MAX_PIECES {
                    return Err(SpmError(format!("more than {MAX_PIECES} pieces")));
                }
                pieces.push(parse_piece(r.bytes()?)?);
            } else {
                r.skip(wire)?;
            }
        }
        if pieces.is_empty() {
            return Err(SpmError("no pieces (not a SentencePiece model)".into()));
        }
        Ok(Self { pieces })
    }

    /// Vocabulary size.
    pub fn len(&self) -> usize {
        self.pieces.len()
    }

    /// Always false for a parsed model (kept for clippy's `len_without_is_empty`).
    pub fn is_empty(&self) -> bool {
        self.pieces.is_empty()
    }

    /// Appends the text of one token; bytes are gathered until they form UTF-8.
    pub fn push(&self, id: u32, pending: &mut Vec<u8>, out: &mut String) {
        match self.pieces.get(id as usize) {
            Some(Piece::Text(t)) => {
                flush_bytes(pending, out);
                out.push_str(t);
            }
            Some(Piece::Byte(b)) => {
                pending.push(*b);
                if let Ok(s) = std::str::from_utf8(pending) {
                    out.push_str(s);
                    pending.clear();
                } else if pending.len() >= 4 {
                    flush_bytes(pending, out);
                }
            }
            Some(Piece::Silent) | None => {}
        }
    }
}

fn flush_bytes(pending: &mut Vec<u8>, out: &mut String) {
    if !pending.is_empty() {
        out.push_str(&String::from_utf8_lossy(pending));
        pending.clear();
    }
}

fn parse_piece(buf: &[u8]) -> Result<Piece, SpmError> {
    let mut r = Reader { buf, pos: 0 };
    let mut text = None;
    let mut kind = TYPE_NORMAL;
    while !r.done() {
        let (field, wire) = r.key()?;
        match (field, wire) {
            (1, 2) => {
                let b = r.bytes()?;
                text = Some(
                    std::str::from_utf8(b)
                        .map_err(|_| SpmError("piece is not UTF-8".into()))?
                        .to_string(),
                );
            }
            (3, 0) => kind = r.varint()?,
            _ => r.skip(wire)?,
        }
    }
    let text = text.ok_or_else(|| SpmError("piece without text".into()))?;
    Ok(match kind {
        // User-defined pieces print as SentencePiece prints them.
        TYPE_NORMAL | TYPE_USER_DEFINED => Piece::Text(text.replace('\u{2581}', " ")),
        TYPE_BYTE => byte_piece(&text).map_or(Piece::Silent, Piece::Byte),
        _ => Piece::Silent,
    })
}

fn byte_piece(text: &str) -> Option<u8> {
    let hex = text.strip_prefix("<0x")?.strip_suffix('>')?;
    u8::from_str_radix(hex, 16).ok()
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn done(&self) -> bool {
        self.pos >= self.buf.len()
    }

    fn varint(&mut self) -> Result<u64, SpmError> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = *self
                .buf
                .get(self.pos)
                .ok_or_else(|| SpmError("truncated varint".into()))?;
            self.pos += 1;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(SpmError("varint longer than 10 bytes".into()))
    }

    fn key(&mut self) -> Result<(u64, u64), SpmError> {
        let k = self.varint()?;
        Ok((k >> 3, k & 7))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], SpmError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| SpmError("field runs past the end of the file".into()))?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn bytes(&mut self) -> Result<&'a [u8], SpmError> {
        let n = self.varint()?;
        let n = usize::try_from(n).map_err(|_| SpmError("length overflows".into()))?;
        self.take(n)
    }

    fn skip(&mut self, wire: u64) -> Result<(), SpmError> {
        match wire {
            0 => self.varint().map(|_| ()),
            1 => self.take(8).map(|_| ()),
            2 => self.bytes().map(|_| ()),
            5 => self.take(4).map(|_| ()),
            w => Err(SpmError(format!("unsupported protobuf wire type {w}"))),
        }
    }
}

/// Writes a minimal SentencePiece model with these pieces (all NORMAL except names in
/// angle brackets, which become CONTROL), for generated test models.
pub fn write_model(pieces: &[&str]) -> Vec<u8> {
    fn varint(out: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }
    let mut out = Vec::new();
    for p in pieces {
        let mut body = Vec::new();
        body.push(0x0a);
        varint(&mut body, p.len() as u64);
        body.extend_from_slice(p.as_bytes());
        body.push(0x15); // score, fixed32
        body.extend_from_slice(&0f32.to_le_bytes());
        let kind = if p.starts_with('<') && p.ends_with('>') {
            3
        } else {
            1
        };
        body.push(0x18);
        varint(&mut body, kind);
        out.push(0x0a);
        varint(&mut out, body.len() as u64);
        out.extend_from_slice(&body);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(d: &TextDecoder, ids: &[u32]) -> String {
        let (mut pending, mut out) = (Vec::new(), String::new());
        for &id in ids {
            d.push(id, &mut pending, &mut out);
        }
        out
    }

    #[test]
    fn round_trips_pieces_and_skips_control() {
        let bytes = write_model(&["<unk>", "<s>", "\u{2581}hello", "\u{2581}world", "!"]);
        let d = TextDecoder::parse(&bytes).unwrap();
        assert_eq!(d.len(), 5);
        assert_eq!(decode(&d, &[1, 2, 0, 3, 4, 99]), " hello world!");
    }

    #[test]
    fn byte_pieces_join_into_utf8() {
        let mut bytes = write_model(&["x"]);
        // Two BYTE pieces for "é" (0xC3 0xA9).
        for hex in ["<0xC3>", "<0xA9>"] {
            let mut body = vec![0x0a, hex.len() as u8];
            body.extend_from_slice(hex.as_bytes());
            body.extend_from_slice(&[0x18, 6]);
            bytes.push(0x0a);
            bytes.push(body.len() as u8);
            bytes.extend_from_slice(&body);
        }
        let d = TextDecoder::parse(&bytes).unwrap();
        assert_eq!(decode(&d, &[0, 1, 2]), "xé");
    }

    #[test]
    fn user_defined_pieces_print() {
        let mut bytes = write_model(&["x"]);
        let text = "<user>";
        let mut body = vec![0x0a, text.len() as u8];
        body.extend_from_slice(text.as_bytes());
        body.extend_from_slice(&[0x18, 4]);
        bytes.push(0x0a);
        bytes.push(body.len() as u8);
        bytes.extend_from_slice(&body);
        let d = TextDecoder::parse(&bytes).unwrap();
        assert_eq!(decode(&d, &[0, 1]), "x<user>");
    }

    #[test]
    fn malformed_files_are_errors_not_panics() {
        assert!(TextDecoder::parse(b"").is_err());
        assert!(TextDecoder::parse(&[0x0a, 0xff]).is_err());
        assert!(TextDecoder::parse(&[0x0a, 0x05, 0x0a]).is_err());
        assert!(TextDecoder::parse(&[0x0f]).is_err());
        assert!(TextDecoder::parse(&[0xff; 12]).is_err());
        // Unknown fields are skipped.
        let mut bytes = vec![0x10, 0x01];
        bytes.extend(write_model(&["a"]));
        assert_eq!(TextDecoder::parse(&bytes).unwrap().len(), 1);
    }
}
