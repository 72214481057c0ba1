//! Header checks for weights files, run before candle opens them.
//!
//! candle 0.9.2's GGUF reader (`candle::quantized::gguf_file`) trusts every length it reads:
//! a string length becomes `vec![0u8; len]`, an array length `Vec::with_capacity(len)`, the
//! product of a tensor's dimensions `vec![0u8; size]`. A file that lies about any of them
//! makes the process request an allocation it cannot have, and that aborts
//! (`handle_alloc_error`), which no `catch_unwind` can turn into an error. Deeply nested
//! arrays overflow its recursive reader's stack the same way.
//!
//! [`check_gguf`] walks the same header incrementally through a buffered reader, skipping
//! what it need not keep: every length and element count is checked against the bytes left
//! in the file before anything is read or skipped, and every tensor's extent, computed with
//! checked arithmetic from its dimensions and its type's block size, must lie within the file
//! after the aligned start of the data, apart from the others'. A file that passes is one
//! candle can read without allocating more than the file holds (its metadata values aside,
//! which are capped).
//!
//! The safetensors crate (0.7) validates its header itself, on the memory map, without
//! allocating the data: header length at most 100 MB and within the file, UTF-8 JSON,
//! tensors contiguous from offset 0, each `data_offsets` span equal to its shape times its
//! dtype (checked arithmetic), the last one ending exactly at the end of the file.
//! [`check_safetensors`] repeats the length checks (so a lying length is reported before the
//! file is mapped) and adds the two things it misses: end offsets near 2^64 (it adds the last
//! one to the header length unchecked: an overflow panic in builds with overflow checks) and
//! a zero-element tensor whose other dimensions multiply past `usize` (it accepts those;
//! candle's stride computation then overflows, a panic likewise).

use std::fs::File;
use std::io::{BufReader, Read, Seek};
use std::path::Path;

use crate::ModelError;

mod gguf;
mod safetensors;
#[cfg(test)]
mod tests;

use gguf::gguf;
use safetensors::safetensors;

/// The metadata key that moves the start of a GGUF file's tensor data.
const ALIGNMENT_KEY: &[u8] = b"general.alignment";
/// Dimensions a GGUF tensor may have. GGML itself stops at 4 (`GGML_MAX_DIMS`); candle's
/// writer does not enforce that, so a little headroom.
const MAX_DIMS: u32 = 8;
/// Nesting of GGUF arrays of arrays (candle reads them recursively).
const MAX_ARRAY_DEPTH: u32 = 8;
/// GGUF metadata values in all (entries and array elements). candle keeps each as a
/// `gguf_file::Value` (32 bytes, more than most take in the file), so this bounds the
/// metadata's memory to half a GiB; real files have well under a million.
const MAX_METADATA_VALUES: u64 = 1 << 24;
/// Tensors in a GGUF file (a 7B model has a few hundred).
const MAX_TENSORS: u64 = 1 << 20;
/// The safetensors crate's own limit on the JSON header.
const SAFETENSORS_MAX_HEADER: u64 = 100_000_000;
/// JSON nesting accepted (serde_json, which the safetensors crate parses with, refuses
/// deeper documents).
const JSON_MAX_DEPTH: u32 = 128;

/// Checks the header of a GGUF file (`model.q8.gguf`) before candle reads it: magic and
/// version, the metadata (value types known, lengths and element counts within the file,
/// `general.alignment` not zero), the tensor infos (dimensions at most 8 and their product
/// in range and not zero, a known GGML type, the data within the file after the aligned
/// data start, no two tensors sharing bytes). The error names the file and the problem.
pub fn check_gguf(path: &Path) -> Result<(), ModelError> {
    let mut scan = Scan::open(path)?;
    gguf(&mut scan).map_err(|why| malformed(path, "GGUF", &why))
}

/// Checks the header of a safetensors file before candle maps it: the 8-byte header length
/// (at most 100 MB, within the file), then, in the JSON header, every tensor's
/// `data_offsets` within the data that follows it and its shape's product (zero dimensions
/// counted as one) within `usize`. The error names the file and the problem.
pub fn check_safetensors(path: &Path) -> Result<(), ModelError> {
    let mut scan = Scan::open(path)?;
    safetensors(&mut scan).map_err(|why| malformed(path, "safetensors", &why))
}

fn malformed(path: &Path, format: &str, why: &str) -> ModelError {
    ModelError::Failed(format!(
        "cannot read {}: malformed {format} file: {why}",
        path.display()
    ))
}

/// A buffered reader that knows where it is and how much of the file is left.
struct Scan<R> {
    r: BufReader<R>,
    pos: u64,
    len: u64,
}

impl Scan<File> {
    fn open(path: &Path) -> Result<Self, ModelError> {
        let unreadable =
            |e: std::io::Error| ModelError::Failed(format!("cannot read {}: {e}", path.display()));
        let file = File::open(path).map_err(unreadable)?;
        let len = file.metadata().map_err(unreadable)?.len();
        Ok(Self::new(file, len))
    }
}

impl<R: Read + Seek> Scan<R> {
    fn new(r: R, len: u64) -> Self {
        Self {
            r: BufReader::new(r),
            pos: 0,
            len,
        }
    }

    fn left(&self) -> u64 {
        self.len.saturating_sub(self.pos)
    }

    /// Refuses to go on unless `n` more bytes are in the file.
    fn need(&self, n: u64, what: &str) -> Result<(), String> {
        if n > self.left() {
            return Err(format!(
                "{what} needs {n} bytes at offset {} but only {} are left in the {}-byte file",
                self.pos,
                self.left(),
                self.len
            ));
        }
        Ok(())
    }

    fn read(&mut self, buf: &mut [u8], what: &str) -> Result<(), String> {
        self.need(buf.len() as u64, what)?;
        self.r
            .read_exact(buf)
            .map_err(|e| format!("{what} at offset {}: {e}", self.pos))?;
        self.pos += buf.len() as u64;
        Ok(())
    }

    fn bytes<const N: usize>(&mut self, what: &str) -> Result<[u8; N], String> {
        let mut b = [0u8; N];
        self.read(&mut b, what)?;
        Ok(b)
    }

    fn u8(&mut self, what: &str) -> Result<u8, String> {
        Ok(self.bytes::<1>(what)?[0])
    }

    fn u16(&mut self, what: &str) -> Result<u16, String> {
        Ok(u16::from_le_bytes(self.bytes(what)?))
    }

    fn u32(&mut self, what: &str) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.bytes(what)?))
    }

    fn u64(&mut self, what: &str) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.bytes(what)?))
    }

    /// A length or count: 32 bits in GGUF version 1, 64 bits after.
    fn count(&mut self, wide: bool, what: &str) -> Result<u64, String> {
        if wide {
            self.u64(what)
        } else {
            self.u32(what).map(u64::from)
        }
    }

    /// Moves `n` bytes on without reading them.
    fn skip(&mut self, n: u64, what: &str) -> Result<(), String> {
        self.need(n, what)?;
        let step = i64::try_from(n).map_err(|_| format!("{what}: {n} bytes is too far"))?;
        self.r
            .seek_relative(step)
            .map_err(|e| format!("{what} at offset {}: {e}", self.pos))?;
        self.pos += n;
        Ok(())
    }

    /// Skips a string of `len` bytes and says whether it is `key` (candle drops trailing
    /// NULs, so `key` followed by NULs is `key` too).
    fn skip_key(&mut self, len: u64, key: &[u8], what: &str) -> Result<bool, String> {
        self.need(len, what)?;
        if len < key.len() as u64 {
            self.skip(len, what)?;
            return Ok(false);
        }
        let mut buf = [0u8; 64];
        let head = &mut buf[..key.len()];
        self.read(head, what)?;
        let mut same = head == key;
        let mut rest = len - key.len() as u64;
        while same && rest > 0 {
            let n = rest.min(buf.len() as u64) as usize;
            self.read(&mut buf[..n], what)?;
            same = buf[..n].iter().all(|&b| b == 0);
            rest -= n as u64;
        }
        self.skip(rest, what)?;
        Ok(same)
    }

    /// Reads a string of `len` bytes, keeping at most its first 64 (for messages).
    fn name(&mut self, len: u64, what: &str) -> Result<String, String> {
        self.need(len, what)?;
        let mut buf = [0u8; 64];
        let keep = len.min(buf.len() as u64) as usize;
        self.read(&mut buf[..keep], what)?;
        self.skip(len - keep as u64, what)?;
        let mut name = String::from_utf8_lossy(&buf[..keep]).into_owned();
        if len > keep as u64 {
            name.push('…');
        }
        Ok(name)
    }
}
