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

use candle::quantized::{gguf_file, GgmlDType};

use crate::ModelError;

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

/// A GGUF value type's size in the file: fixed, or (strings, arrays) its smallest.
fn value_size(ty: u32, wide: bool) -> Option<(u64, bool)> {
    let len = if wide { 8 } else { 4 };
    Some(match ty {
        // u8, i8, bool
        0 | 1 | 7 => (1, true),
        // u16, i16
        2 | 3 => (2, true),
        // u32, i32, f32
        4..=6 => (4, true),
        // u64, i64, f64
        10..=12 => (8, true),
        // string: its length
        8 => (len, false),
        // array: element type and count
        9 => (4 + len, false),
        _ => return None,
    })
}

/// GGUF header state: version and the metadata value budget.
struct Gguf {
    wide: bool,
    values: u64,
}

impl Gguf {
    fn spend(&mut self, n: u64) -> Result<(), String> {
        match self.values.checked_add(n) {
            Some(v) if v <= MAX_METADATA_VALUES => {
                self.values = v;
                Ok(())
            }
            _ => Err(format!(
                "more than {MAX_METADATA_VALUES} metadata values (an array has {n} elements)"
            )),
        }
    }
}

/// Skips one metadata value. Returns the value if candle would take it for an alignment
/// (u8, u16, u32, or i8, i16, i32 when not negative).
fn gguf_value<R: Read + Seek>(
    s: &mut Scan<R>,
    g: &mut Gguf,
    ty: u32,
    depth: u32,
) -> Result<Option<u64>, String> {
    let int = |v: i64| u64::try_from(v).ok();
    Ok(match ty {
        0 => Some(u64::from(s.u8("u8 value")?)),
        1 => int(i64::from(s.u8("i8 value")? as i8)),
        2 => Some(u64::from(s.u16("u16 value")?)),
        3 => int(i64::from(s.u16("i16 value")? as i16)),
        4 => Some(u64::from(s.u32("u32 value")?)),
        5 => int(i64::from(s.u32("i32 value")? as i32)),
        7 => match s.u8("bool value")? {
            0 | 1 => None,
            b => return Err(format!("bool value {b} at offset {}", s.pos - 1)),
        },
        6 | 10..=12 => {
            s.skip(if ty == 6 { 4 } else { 8 }, "number value")?;
            None
        }
        8 => {
            let len = s.count(g.wide, "string length")?;
            s.skip(len, "string value")?;
            None
        }
        9 => {
            gguf_array(s, g, depth)?;
            None
        }
        t => return Err(format!("unknown value type {t} at offset {}", s.pos - 4)),
    })
}

/// Skips an array value: fixed-size numbers in one seek; strings, bools (each checked) and
/// nested arrays (at most `MAX_ARRAY_DEPTH` deep) one by one. Every element spends budget.
fn gguf_array<R: Read + Seek>(s: &mut Scan<R>, g: &mut Gguf, depth: u32) -> Result<(), String> {
    let at = s.pos;
    let elem = s.u32("array element type")?;
    let (size, fixed) = value_size(elem, g.wide)
        .ok_or_else(|| format!("array at offset {at} has unknown element type {elem}"))?;
    let n = s.count(g.wide, "array length")?;
    let bytes = n
        .checked_mul(size)
        .filter(|&b| b <= s.left())
        .ok_or_else(|| {
            format!(
                "array at offset {at} has {n} elements of at least {size} bytes but only {} \
                 bytes are left in the {}-byte file",
                s.left(),
                s.len
            )
        })?;
    if elem == 9 && depth + 1 >= MAX_ARRAY_DEPTH {
        return Err(format!(
            "arrays nested more than {MAX_ARRAY_DEPTH} deep at offset {at}"
        ));
    }
    g.spend(n)?;
    if fixed && elem != 7 {
        s.skip(bytes, "array elements")?;
    } else {
        for _ in 0..n {
            gguf_value(s, g, elem, depth + 1)?;
        }
    }
    Ok(())
}

/// candle's GGML type codes (`GgmlDType::from_u32`, which is private).
fn ggml_dtype(code: u32) -> Option<GgmlDType> {
    Some(match code {
        0 => GgmlDType::F32,
        1 => GgmlDType::F16,
        2 => GgmlDType::Q4_0,
        3 => GgmlDType::Q4_1,
        6 => GgmlDType::Q5_0,
        7 => GgmlDType::Q5_1,
        8 => GgmlDType::Q8_0,
        9 => GgmlDType::Q8_1,
        10 => GgmlDType::Q2K,
        11 => GgmlDType::Q3K,
        12 => GgmlDType::Q4K,
        13 => GgmlDType::Q5K,
        14 => GgmlDType::Q6K,
        15 => GgmlDType::Q8K,
        30 => GgmlDType::BF16,
        _ => return None,
    })
}

/// One tensor's data, relative to the start of the tensor data.
struct Extent {
    name: String,
    offset: u64,
    size: u64,
}

/// Walks a GGUF header the way candle's reader will: the fixed header, the metadata, the
/// tensor infos, then where the tensors' data lies.
fn gguf<R: Read + Seek>(s: &mut Scan<R>) -> Result<(), String> {
    let (wide, tensor_count, kv_count) = gguf_header(s)?;
    let alignment = gguf_metadata(s, wide, kv_count)?;
    let extents = (0..tensor_count)
        .map(|i| gguf_tensor_info(s, wide, i))
        .collect::<Result<Vec<_>, _>>()?;
    gguf_extents(s, extents, alignment)
}

/// Magic, version and counts; returns (wide, tensor count, metadata entry count), the
/// counts refused unless their smallest encoding fits in the file.
fn gguf_header<R: Read + Seek>(s: &mut Scan<R>) -> Result<(bool, u64, u64), String> {
    let magic = s.u32("magic")?;
    if magic != 0x4655_4747 && magic != 0x4747_5546 {
        return Err(format!("magic {magic:#010x} is not GGUF's"));
    }
    let wide = match s.u32("version")? {
        1 => false,
        2 | 3 => true,
        v => return Err(format!("unsupported GGUF version {v}")),
    };
    let len = if wide { 8 } else { 4 };
    let tensor_count = s.count(wide, "tensor count")?;
    let kv_count = s.count(wide, "metadata entry count")?;
    // Smallest entry: key length, value type, a one-byte value.
    fits(s, kv_count, len + 4 + 1, "metadata entries")?;
    // Smallest tensor info: name length, dimension count, type, offset.
    fits(s, tensor_count, len + 4 + 4 + 8, "tensor infos")?;
    if tensor_count > MAX_TENSORS {
        return Err(format!(
            "{tensor_count} tensors (at most {MAX_TENSORS} accepted)"
        ));
    }
    Ok((wide, tensor_count, kv_count))
}

/// Skips the metadata entries; returns the data alignment candle will use.
fn gguf_metadata<R: Read + Seek>(
    s: &mut Scan<R>,
    wide: bool,
    kv_count: u64,
) -> Result<u64, String> {
    let mut g = Gguf { wide, values: 0 };
    g.spend(kv_count)?;
    let mut alignment = gguf_file::DEFAULT_ALIGNMENT;
    for i in 0..kv_count {
        let entry = |e: String| format!("metadata entry {i}: {e}");
        let key_len = s.count(wide, "key length").map_err(entry)?;
        let is_alignment = s.skip_key(key_len, ALIGNMENT_KEY, "key").map_err(entry)?;
        let ty = s.u32("value type").map_err(entry)?;
        let value = gguf_value(s, &mut g, ty, 0).map_err(entry)?;
        if is_alignment {
            // candle's rule: other types (u64 included) leave the default.
            alignment = value.unwrap_or(gguf_file::DEFAULT_ALIGNMENT);
        }
    }
    if alignment == 0 {
        return Err("general.alignment is 0".into());
    }
    Ok(alignment)
}

/// Reads tensor info `i`: its name, dimensions, type and data offset, refusing shapes whose
/// sizes overflow or that candle cannot load.
fn gguf_tensor_info<R: Read + Seek>(s: &mut Scan<R>, wide: bool, i: u64) -> Result<Extent, String> {
    let info = |e: String| format!("tensor info {i}: {e}");
    let name_len = s.count(wide, "tensor name length").map_err(info)?;
    let name = s.name(name_len, "tensor name").map_err(info)?;
    let named = |e: String| format!("tensor {name:?}: {e}");
    let n_dims = s.u32("dimension count").map_err(named)?;
    if n_dims > MAX_DIMS {
        return Err(named(format!(
            "{n_dims} dimensions (at most {MAX_DIMS} accepted)"
        )));
    }
    // The product with zeros counted as one bounds every partial product candle
    // computes (element count, strides) in any order.
    let (mut elems, mut bound) = (1u64, 1u64);
    for _ in 0..n_dims {
        let dim = s.count(wide, "dimension").map_err(named)?;
        bound = bound
            .checked_mul(dim.max(1))
            .filter(|&b| usize::try_from(b).is_ok())
            .ok_or_else(|| named("the dimensions' product overflows".into()))?;
        elems *= dim;
    }
    if elems == 0 {
        // candle reads it into an empty `Vec<u8>` and views that as blocks of the type:
        // the empty buffer is not aligned for them, which aborts (not panics) in builds
        // with debug assertions.
        return Err(named("the tensor has no elements".into()));
    }
    let code = s.u32("tensor type").map_err(named)?;
    let dtype = ggml_dtype(code).ok_or_else(|| named(format!("unknown GGML type {code}")))?;
    let offset = s.u64("data offset").map_err(named)?;
    let block = dtype.block_size() as u64;
    if !elems.is_multiple_of(block) {
        return Err(named(format!(
            "{elems} elements are not a whole number of {dtype:?} blocks of {block}"
        )));
    }
    let size = (elems / block)
        .checked_mul(dtype.type_size() as u64)
        .ok_or_else(|| named("the data size overflows".into()))?;
    Ok(Extent { name, offset, size })
}

/// Checks that every tensor's data lies in the file, after the aligned header end, and
/// that no two tensors share bytes.
fn gguf_extents<R: Read + Seek>(
    s: &Scan<R>,
    mut extents: Vec<Extent>,
    alignment: u64,
) -> Result<(), String> {
    let header_end = s.pos;
    let start = header_end
        .checked_next_multiple_of(alignment)
        .ok_or_else(|| {
            format!("the data start (header end {header_end} aligned to {alignment}) overflows")
        })?;
    for t in &extents {
        let end = start
            .checked_add(t.offset)
            .and_then(|b| b.checked_add(t.size));
        if end.is_none_or(|e| e > s.len) {
            return Err(format!(
                "tensor {:?}: {} bytes at data offset {} (the data starts at {start}) run past \
                 the end of the {}-byte file",
                t.name, t.size, t.offset, s.len
            ));
        }
    }
    // candle loads every tensor: overlapping ones could make it allocate more than the file.
    extents.sort_unstable_by_key(|t| t.offset);
    for w in extents.windows(2) {
        if w[0].offset + w[0].size > w[1].offset {
            return Err(format!(
                "tensors {:?} and {:?} share data bytes",
                w[0].name, w[1].name
            ));
        }
    }
    Ok(())
}

/// Refuses `count` items of at least `size` bytes each unless they fit in what is left.
fn fits<R: Read + Seek>(s: &Scan<R>, count: u64, size: u64, what: &str) -> Result<(), String> {
    match count.checked_mul(size) {
        Some(b) if b <= s.left() => Ok(()),
        _ => Err(format!(
            "{count} {what} of at least {size} bytes each do not fit in the {} bytes left in \
             the {}-byte file",
            s.left(),
            s.len
        )),
    }
}

fn safetensors<R: Read + Seek>(s: &mut Scan<R>) -> Result<(), String> {
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

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use candle::quantized::{gguf_file, GgmlDType, QTensor};
    use candle::{Device, Tensor};

    use super::*;

    fn temp_path(tag: &str) -> PathBuf {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        std::env::temp_dir().join(format!("duet-filecheck-{tag}-{}-{n}", std::process::id()))
    }

    /// A file in the temp dir, removed on drop.
    struct TempFile(PathBuf);

    impl TempFile {
        fn new(tag: &str, bytes: &[u8]) -> Self {
            let p = temp_path(tag);
            std::fs::write(&p, bytes).unwrap();
            Self(p)
        }
    }

    impl Drop for TempFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    /// A temp directory, removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(tag: &str) -> Self {
            let p = temp_path(tag);
            let _ = std::fs::remove_dir_all(&p);
            Self(p)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn gguf_err(bytes: &[u8]) -> String {
        let f = TempFile::new("gguf", bytes);
        let e = check_gguf(&f.0).expect_err("refused").to_string();
        assert!(e.contains(&f.0.display().to_string()), "{e}");
        e
    }

    fn st_err(bytes: &[u8]) -> String {
        let f = TempFile::new("st", bytes);
        let e = check_safetensors(&f.0).expect_err("refused").to_string();
        assert!(e.contains(&f.0.display().to_string()), "{e}");
        e
    }

    /// A hand-made GGUF v3 file.
    #[derive(Default)]
    struct Crafted {
        kvs: Vec<u8>,
        n_kvs: u64,
        infos: Vec<u8>,
        n_tensors: u64,
        data: Vec<u8>,
    }

    fn string(out: &mut Vec<u8>, s: &[u8]) {
        out.extend((s.len() as u64).to_le_bytes());
        out.extend(s);
    }

    impl Crafted {
        /// A metadata entry with raw value bytes.
        fn kv(mut self, key: &str, ty: u32, value: &[u8]) -> Self {
            string(&mut self.kvs, key.as_bytes());
            self.kvs.extend(ty.to_le_bytes());
            self.kvs.extend(value);
            self.n_kvs += 1;
            self
        }

        fn tensor(mut self, name: &str, dims: &[u64], dtype: u32, offset: u64) -> Self {
            string(&mut self.infos, name.as_bytes());
            self.infos.extend((dims.len() as u32).to_le_bytes());
            for d in dims {
                self.infos.extend(d.to_le_bytes());
            }
            self.infos.extend(dtype.to_le_bytes());
            self.infos.extend(offset.to_le_bytes());
            self.n_tensors += 1;
            self
        }

        fn data(mut self, bytes: usize) -> Self {
            self.data.resize(bytes, 0);
            self
        }

        /// The file, its data aligned to 32.
        fn bytes(&self) -> Vec<u8> {
            let mut out = Vec::new();
            out.extend(0x4655_4747u32.to_le_bytes());
            out.extend(3u32.to_le_bytes());
            out.extend(self.n_tensors.to_le_bytes());
            out.extend(self.n_kvs.to_le_bytes());
            out.extend(&self.kvs);
            out.extend(&self.infos);
            out.resize(out.len().next_multiple_of(32), 0);
            out.extend(&self.data);
            out
        }
    }

    fn u64s(vs: &[u64]) -> Vec<u8> {
        vs.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    /// A GGUF file written by candle with every kind of metadata value and two tensors,
    /// the last one's data ending the file (no padding after it).
    fn candle_gguf() -> Vec<u8> {
        use gguf_file::Value as V;
        let q8 = Tensor::arange(0f32, 64., &Device::Cpu)
            .unwrap()
            .reshape((2, 32))
            .unwrap();
        let q8 = QTensor::quantize(&q8, GgmlDType::Q8_0).unwrap();
        let f32 = Tensor::ones((2, 4), candle::DType::F32, &Device::Cpu).unwrap();
        let f32 = QTensor::quantize(&f32, GgmlDType::F32).unwrap();
        let strings = V::Array(vec![V::String("a".into()), V::String("bcd".into())]);
        let nested = V::Array(vec![
            V::Array(vec![V::U8(1), V::U8(2)]),
            V::Array(vec![V::Bool(true)]),
        ]);
        let meta: Vec<(&str, V)> = vec![
            ("general.alignment", V::U32(32)),
            ("u8", V::U8(1)),
            ("i8", V::I8(-1)),
            ("u16", V::U16(1)),
            ("i16", V::I16(-1)),
            ("i32", V::I32(-1)),
            ("u64", V::U64(1)),
            ("i64", V::I64(-1)),
            ("f32", V::F32(0.5)),
            ("f64", V::F64(0.5)),
            ("bool", V::Bool(true)),
            ("string", V::String("hello".into())),
            ("strings", strings),
            ("nested", nested),
            ("empty", V::Array(vec![])),
        ];
        let meta: Vec<(&str, &V)> = meta.iter().map(|(k, v)| (*k, v)).collect();
        let mut c = std::io::Cursor::new(Vec::new());
        gguf_file::write(&mut c, &meta, &[("q8", &q8), ("f32", &f32)]).unwrap();
        c.into_inner()
    }

    #[test]
    fn a_gguf_written_by_candle_passes_and_candle_reads_it() {
        let bytes = candle_gguf();
        let f = TempFile::new("valid-gguf", &bytes);
        check_gguf(&f.0).unwrap();
        let vb =
            candle_transformers::quantized_var_builder::VarBuilder::from_gguf(&f.0, &Device::Cpu)
                .unwrap();
        assert!(vb.contains_key("q8") && vb.contains_key("f32"));
    }

    #[test]
    fn every_truncation_of_a_gguf_is_refused() {
        let bytes = candle_gguf();
        for cut in 0..bytes.len() {
            gguf_err(&bytes[..cut]);
        }
    }

    #[test]
    fn a_gguf_string_length_of_2_pow_60_is_refused() {
        let value = u64s(&[1 << 60]);
        let e = gguf_err(&Crafted::default().kv("name", 8, &value).bytes());
        assert!(
            e.contains("string value needs 1152921504606846976 bytes"),
            "{e}"
        );
        // The same lie in a key.
        let mut bytes = Crafted::default().kv("k", 4, &[0; 4]).bytes();
        bytes[24..32].copy_from_slice(&(1u64 << 60).to_le_bytes());
        let e = gguf_err(&bytes);
        assert!(e.contains("key needs"), "{e}");
        // And in a tensor name.
        let mut bytes = Crafted::default().tensor("t", &[1], 0, 0).data(32).bytes();
        bytes[24..32].copy_from_slice(&(1u64 << 60).to_le_bytes());
        let e = gguf_err(&bytes);
        assert!(e.contains("tensor name needs"), "{e}");
    }

    #[test]
    fn a_gguf_array_of_2_pow_62_elements_is_refused() {
        for elem in [0u32, 7, 8, 9, 10] {
            let mut value = elem.to_le_bytes().to_vec();
            value.extend(u64s(&[1 << 62]));
            let e = gguf_err(&Crafted::default().kv("a", 9, &value).bytes());
            assert!(e.contains("4611686018427387904 elements"), "{e}");
        }
        // 2^62 elements of 8 bytes overflow: refused the same way.
        let mut value = 10u32.to_le_bytes().to_vec();
        value.extend(u64s(&[u64::MAX]));
        gguf_err(&Crafted::default().kv("a", 9, &value).bytes());
    }

    #[test]
    fn gguf_counts_past_the_file_are_refused() {
        let mut bytes = Crafted::default().bytes();
        bytes[8..16].copy_from_slice(&(1u64 << 40).to_le_bytes());
        assert!(gguf_err(&bytes).contains("tensor infos"));
        let mut bytes = Crafted::default().bytes();
        bytes[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(gguf_err(&bytes).contains("metadata entries"));
    }

    #[test]
    fn gguf_tensors_past_the_file_are_refused() {
        // 1024 x 1024 f32 = 4 MiB in a file of a few hundred bytes.
        let e = gguf_err(
            &Crafted::default()
                .tensor("w", &[1024, 1024], 0, 0)
                .data(64)
                .bytes(),
        );
        assert!(e.contains("run past the end"), "{e}");
        // Dimensions whose product overflows u64.
        let e = gguf_err(
            &Crafted::default()
                .tensor("w", &[1 << 32, 1 << 32, 2], 0, 0)
                .bytes(),
        );
        assert!(e.contains("overflows"), "{e}");
        // Zero elements, but the other dimensions overflow candle's strides.
        let e = gguf_err(
            &Crafted::default()
                .tensor("w", &[1 << 40, 1 << 40, 0], 0, 0)
                .bytes(),
        );
        assert!(e.contains("overflows"), "{e}");
        // Zero elements: candle cannot load those.
        let e = gguf_err(&Crafted::default().tensor("w", &[0, 4], 0, 0).bytes());
        assert!(e.contains("no elements"), "{e}");
        // An offset that overflows when added to the data start.
        let e = gguf_err(
            &Crafted::default()
                .tensor("w", &[1], 0, u64::MAX)
                .data(32)
                .bytes(),
        );
        assert!(e.contains("run past the end"), "{e}");
        // Q8_0 blocks: 32 elements in 34 bytes; 3 blocks do not fit in 64 bytes.
        let e = gguf_err(&Crafted::default().tensor("q", &[96], 8, 0).data(64).bytes());
        assert!(e.contains("102 bytes"), "{e}");
        gguf_err(&Crafted::default().tensor("q", &[33], 8, 0).data(64).bytes());
        // Within the file: accepted.
        let f = TempFile::new(
            "fits",
            &Crafted::default().tensor("q", &[64], 8, 0).data(68).bytes(),
        );
        check_gguf(&f.0).unwrap();
    }

    #[test]
    fn malformed_gguf_headers_are_refused() {
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("magic", b"GGML\x03\0\0\0".to_vec()),
            ("version 4", {
                let mut b = Crafted::default().bytes();
                b[4] = 4;
                b
            }),
            (
                "unknown value type 13",
                Crafted::default().kv("k", 13, &[0; 8]).bytes(),
            ),
            ("unknown element type 99", {
                let mut v = 99u32.to_le_bytes().to_vec();
                v.extend(u64s(&[1]));
                Crafted::default().kv("a", 9, &v).bytes()
            }),
            ("bool value 2", Crafted::default().kv("b", 7, &[2]).bytes()),
            ("general.alignment is 0", {
                Crafted::default()
                    .kv("general.alignment", 4, &0u32.to_le_bytes())
                    .bytes()
            }),
            ("general.alignment is 0", {
                // candle drops trailing NULs from keys.
                Crafted::default()
                    .kv("general.alignment\0\0", 4, &0u32.to_le_bytes())
                    .bytes()
            }),
            (
                "unknown GGML type 5",
                Crafted::default().tensor("t", &[1], 5, 0).data(32).bytes(),
            ),
            (
                "100 dimensions",
                Crafted::default()
                    .tensor("t", &[1; 100], 0, 0)
                    .data(32)
                    .bytes(),
            ),
            ("share data bytes", {
                Crafted::default()
                    .tensor("a", &[8], 0, 0)
                    .tensor("b", &[8], 0, 16)
                    .data(64)
                    .bytes()
            }),
            ("nested more than", {
                let mut v = Vec::new();
                for _ in 0..20 {
                    v.extend(9u32.to_le_bytes());
                    v.extend(u64s(&[1]));
                }
                v.extend(0u32.to_le_bytes());
                v.extend(u64s(&[0]));
                Crafted::default().kv("deep", 9, &v).bytes()
            }),
        ];
        for (want, bytes) in cases {
            let e = gguf_err(&bytes);
            assert!(e.contains(want), "{want}: {e}");
        }
        // A huge dimension count is refused before its dimensions are read.
        let mut bytes = Crafted::default().tensor("t", &[1], 0, 0).data(32).bytes();
        let at = 24 + 8 + 1;
        bytes[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(gguf_err(&bytes).contains("4294967295 dimensions"));
    }

    #[test]
    fn a_gguf_alignment_is_applied_as_candle_does() {
        // Alignment 64, tensors 64-aligned: candle and the check agree on the data start.
        let gg = Crafted::default()
            .kv("general.alignment", 4, &64u32.to_le_bytes())
            .tensor("t", &[8], 0, 0);
        let mut bytes = gg.bytes();
        bytes.resize(bytes.len().next_multiple_of(64), 0);
        bytes.extend(1f32.to_le_bytes().repeat(8));
        let f = TempFile::new("align", &bytes);
        check_gguf(&f.0).unwrap();
        let mut file = std::fs::File::open(&f.0).unwrap();
        let c = gguf_file::Content::read(&mut file).unwrap();
        assert_eq!(c.tensor_data_offset as usize, bytes.len() - 32);
        let t = c.tensor(&mut file, "t", &Device::Cpu).unwrap();
        let v: Vec<f32> = t.dequantize(&Device::Cpu).unwrap().to_vec1().unwrap();
        assert_eq!(v, vec![1.0; 8]);
        // candle ignores a u64 alignment (the default 32 applies), and so does the check.
        let gg = Crafted::default()
            .kv("general.alignment", 10, &u64s(&[1 << 40]))
            .tensor("t", &[8], 0, 0)
            .data(32);
        let f = TempFile::new("align64", &gg.bytes());
        check_gguf(&f.0).unwrap();
    }

    #[test]
    fn a_gguf_v1_header_is_read_with_32_bit_lengths() {
        let mut b = Vec::new();
        b.extend(0x4655_4747u32.to_le_bytes());
        b.extend(1u32.to_le_bytes());
        b.extend(1u32.to_le_bytes()); // tensors
        b.extend(1u32.to_le_bytes()); // metadata entries
        b.extend(1u32.to_le_bytes());
        b.extend(b"k");
        b.extend(8u32.to_le_bytes());
        b.extend(2u32.to_le_bytes());
        b.extend(b"hi");
        b.extend(1u32.to_le_bytes());
        b.extend(b"t");
        b.extend(1u32.to_le_bytes()); // dimensions
        b.extend(4u32.to_le_bytes());
        b.extend(0u32.to_le_bytes()); // f32
        b.extend(0u64.to_le_bytes());
        b.resize(b.len().next_multiple_of(32), 0);
        b.extend([0u8; 16]);
        let f = TempFile::new("v1", &b);
        check_gguf(&f.0).unwrap();
        let mut file = std::fs::File::open(&f.0).unwrap();
        let c = gguf_file::Content::read(&mut file).unwrap();
        c.tensor(&mut file, "t", &Device::Cpu).unwrap();
        gguf_err(&b[..b.len() - 1]);
    }

    /// A safetensors file from a header and data.
    fn st(header: &str, data: usize) -> Vec<u8> {
        let mut b = (header.len() as u64).to_le_bytes().to_vec();
        b.extend(header.as_bytes());
        b.resize(b.len() + data, 0);
        b
    }

    #[test]
    fn a_safetensors_file_written_by_candle_passes() {
        let dir = TempDir::new("st-valid");
        std::fs::create_dir_all(&dir.0).unwrap();
        let path = dir.0.join("w.safetensors");
        let a = Tensor::ones((3, 4), candle::DType::F32, &Device::Cpu).unwrap();
        let b = Tensor::zeros((0, 7), candle::DType::BF16, &Device::Cpu).unwrap();
        let tensors: std::collections::HashMap<String, Tensor> =
            [("a".to_string(), a), ("b".to_string(), b)].into();
        candle::safetensors::save(&tensors, &path).unwrap();
        check_safetensors(&path).unwrap();
        // Metadata, escapes, unknown fields, whitespace: what the JSON may hold.
        let header = r#" { "__metadata__" : {"format":"pt","x":"\"\u00e9\ud83d\ude00"},
            "w\u0031" : { "dtype":"U8", "extra": [1, -2.5e3, {"k": null}, true, false],
            "shape" : [ 2 ], "data_offsets" : [ 0 , 2 ] } }  "#;
        let f = TempFile::new("st-meta", &st(header, 2));
        check_safetensors(&f.0).unwrap();
        let loaded = candle::safetensors::load(&f.0, &Device::Cpu).unwrap();
        assert_eq!(loaded["w1"].dims(), &[2]);
    }

    #[test]
    fn safetensors_lengths_past_the_file_are_refused() {
        let ok = st(
            r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#,
            8,
        );
        // Header length larger than the file.
        let mut b = ok.clone();
        b[..8].copy_from_slice(&(ok.len() as u64).to_le_bytes());
        assert!(st_err(&b).contains("more than the"));
        // Larger than the safetensors limit.
        b[..8].copy_from_slice(&(1u64 << 60).to_le_bytes());
        assert!(st_err(&b).contains("limit"));
        // Shorter than the length itself.
        assert!(st_err(&ok[..5]).contains("header length needs 8 bytes"));
        // Data offsets past the end.
        let e = st_err(&st(
            r#"{"a":{"dtype":"F32","shape":[1024],"data_offsets":[0,4096]}}"#,
            8,
        ));
        assert!(e.contains("end past the 8 data bytes"), "{e}");
        // Nine contiguous tensors ending near 2^64: the safetensors crate accepts their
        // offsets and then overflows adding the header length (a panic with overflow checks).
        let size = (1u64 << 61) - 1;
        let mut entries = Vec::new();
        for k in 0..9u64 {
            let (begin, end) = (k * size, if k == 8 { u64::MAX - 2 } else { (k + 1) * size });
            let n = end - begin;
            entries.push(format!(
                r#""t{k}":{{"dtype":"U8","shape":[{n}],"data_offsets":[{begin},{end}]}}"#
            ));
        }
        let e = st_err(&st(&format!("{{{}}}", entries.join(",")), 8));
        assert!(e.contains("end past"), "{e}");
        // Zero elements, but the other dimensions overflow.
        let e = st_err(&st(
            r#"{"a":{"dtype":"F32","shape":[0,4294967296,4294967296],"data_offsets":[0,0]}}"#,
            0,
        ));
        assert!(e.contains("overflows"), "{e}");
        // Every truncation of a valid file is refused.
        for cut in 0..ok.len() {
            st_err(&ok[..cut]);
        }
        let f = TempFile::new("st-ok", &ok);
        check_safetensors(&f.0).unwrap();
    }

    #[test]
    fn malformed_safetensors_headers_are_refused() {
        for header in [
            r#"{"a":{"shape":[1],"data_offsets":[0]}}"#,
            r#"{"a":{"shape":[1],"data_offsets":[4,0]}}"#,
            r#"{"a":{"shape":[-1],"data_offsets":[0,4]}}"#,
            r#"{"a":{"shape":[1.5],"data_offsets":[0,4]}}"#,
            r#"{"a":{"shape":[99999999999999999999],"data_offsets":[0,4]}}"#,
            r#"{"a":{"shape":[01],"data_offsets":[0,4]}}"#,
            r#"{"a":{"shape":[1],"data_offsets":[0,4]"#,
            r#"{"a\q":{}}"#,
            format!(r#"{{"a":{{"x":{}{}}}}}"#, "[".repeat(200), "]".repeat(200)).as_str(),
            "[]",
            "",
        ] {
            st_err(&st(header, 4));
        }
        // serde also reads a struct from an array: `[dtype, shape, data_offsets]`.
        let f = TempFile::new("st-array", &st(r#"{"a":["F32",[2],[0,8]]}"#, 8));
        check_safetensors(&f.0).unwrap();
        candle::safetensors::load(&f.0, &Device::Cpu).unwrap();
        st_err(&st(r#"{"a":["F32",[2],[0,16]]}"#, 8));
        // serde reads `-0` as a float, not a `usize`.
        st_err(&st(
            r#"{"a":{"dtype":"U8","shape":[-0],"data_offsets":[0,0]}}"#,
            0,
        ));
    }

    #[test]
    fn the_tiny_release_files_pass() {
        for q8 in [true, false] {
            let dir = TempDir::new("tiny");
            crate::moshi::tiny::write_tiny_dir(&dir.0, 1, q8).unwrap();
            let files = crate::moshi::ModelFiles::find(&dir.0).unwrap();
            if q8 {
                check_gguf(&files.lm).unwrap();
            } else {
                check_safetensors(&files.lm).unwrap();
            }
            check_safetensors(&files.mimi).unwrap();
        }
    }

    #[test]
    fn the_loader_refuses_lying_files_cleanly() {
        use crate::moshi::{config, MoshiModel, MoshiOptions};
        let opts = MoshiOptions {
            max_slots: 1,
            seed: Some(1),
            ..MoshiOptions::default()
        };
        // Without the check, candle would try to allocate 2^60 bytes for this string and
        // abort the process.
        let dir = TempDir::new("lying-gguf");
        crate::moshi::tiny::write_tiny_dir(&dir.0, 1, true).unwrap();
        let lm = dir.0.join(config::LM_GGUF);
        std::fs::write(
            &lm,
            Crafted::default().kv("s", 8, &u64s(&[1 << 60])).bytes(),
        )
        .unwrap();
        let e = MoshiModel::load(&dir.0, &opts)
            .err()
            .expect("refused")
            .to_string();
        assert!(
            e.contains(&lm.display().to_string()) && e.contains("GGUF"),
            "{e}"
        );

        let dir = TempDir::new("lying-mimi");
        crate::moshi::tiny::write_tiny_dir(&dir.0, 1, false).unwrap();
        let mimi = dir.0.join(config::MIMI_FILE);
        let mut bytes = std::fs::read(&mimi).unwrap();
        let n = bytes.len() as u64;
        bytes[..8].copy_from_slice(&n.to_le_bytes());
        std::fs::write(&mimi, bytes).unwrap();
        let e = MoshiModel::load(&dir.0, &opts)
            .err()
            .expect("refused")
            .to_string();
        assert!(e.contains(&mimi.display().to_string()), "{e}");
        assert!(e.contains("more than the"), "{e}");
    }
}
