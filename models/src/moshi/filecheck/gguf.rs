//! The GGUF header walk: metadata values, tensor infos and their extents in the file.

use std::io::{Read, Seek};

use candle::quantized::{gguf_file, GgmlDType};

use super::{Scan, ALIGNMENT_KEY, MAX_ARRAY_DEPTH, MAX_DIMS, MAX_METADATA_VALUES, MAX_TENSORS};

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
pub(super) fn gguf<R: Read + Seek>(s: &mut Scan<R>) -> Result<(), String> {
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
