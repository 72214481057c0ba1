//! Reader of CTranslate2 `model.bin` files (binary version 6).
//!
//! Layout, all integers little-endian, every string a `u16` length (the terminating NUL
//! included) followed by its bytes:
//!
//! ```text
//! u32 version, str spec, u32 revision, u32 n,
//! n x { str name, u8 rank, u32 dims[rank], u8 dtype, u32 nbytes, bytes[nbytes] },
//! u32 n_alias, n_alias x { str alias, str target }
//! ```
//!
//! Every count and length is checked against the bytes left before anything is taken, so a
//! damaged file is an error naming the offset, never a huge allocation or a panic.

use std::ops::Range;

/// The only binary version read (the one CTranslate2 4.x writes).
pub const VERSION: u32 = 6;
/// Dimensions a variable may have.
const MAX_RANK: u8 = 8;

/// Element type of a variable (CTranslate2's `DataType` numbering).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dtype {
    /// 0
    F32,
    /// 1
    I8,
    /// 2
    I16,
    /// 3
    I32,
    /// 4
    F16,
    /// 5
    Bf16,
}

impl Dtype {
    fn from_code(code: u8) -> Option<Self> {
        Some(match code {
            0 => Self::F32,
            1 => Self::I8,
            2 => Self::I16,
            3 => Self::I32,
            4 => Self::F16,
            5 => Self::Bf16,
            _ => return None,
        })
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Self::I8 => 1,
            Self::I16 | Self::F16 | Self::Bf16 => 2,
            Self::F32 | Self::I32 => 4,
        }
    }

    /// A floating-point type.
    pub fn is_float(self) -> bool {
        matches!(self, Self::F32 | Self::F16 | Self::Bf16)
    }
}

/// One variable: where its bytes lie in the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Variable {
    /// Name without the NUL (`encoder/conv1/weight`).
    pub name: String,
    /// Dimensions (empty for a scalar).
    pub dims: Vec<usize>,
    /// Element type.
    pub dtype: Dtype,
    /// Byte range of the data in the file ([`Ct2Model::data`] reads it).
    pub data: Range<usize>,
}

/// A parsed `model.bin`, holding the file's bytes.
#[derive(Debug)]
pub struct Ct2Model {
    /// Binary version.
    pub version: u32,
    /// Spec name (`WhisperSpec`).
    pub spec: String,
    /// Spec revision.
    pub revision: u32,
    /// Variables in file order.
    pub variables: Vec<Variable>,
    /// `(alias, target)` pairs.
    pub aliases: Vec<(String, String)>,
    bytes: Vec<u8>,
}

impl Ct2Model {
    /// Parses the whole file.
    pub fn parse(bytes: Vec<u8>) -> Result<Self, String> {
        let mut r = Reader { b: &bytes, pos: 0 };
        let version = r.u32("binary version")?;
        if version != VERSION {
            return Err(format!(
                "binary version {version}; this converter reads version {VERSION} (CTranslate2 \
                 3.x/4.x)"
            ));
        }
        let spec = r.str("spec name")?;
        let revision = r.u32("spec revision")?;
        let n = r.u32("variable count")? as usize;
        // The smallest variable takes 2 + 1 + 1 + 1 + 4 bytes (one-byte name, scalar).
        r.need(n.saturating_mul(9), "the variables")?;
        let mut variables = Vec::with_capacity(n);
        for i in 0..n {
            variables.push(read_variable(&mut r, i)?);
        }
        let n_alias = r.u32("alias count")? as usize;
        r.need(n_alias.saturating_mul(6), "the aliases")?;
        let mut aliases = Vec::with_capacity(n_alias);
        for i in 0..n_alias {
            let alias = r.str(&format!("alias {i}"))?;
            let target = r.str(&format!("target of alias {alias}"))?;
            aliases.push((alias, target));
        }
        if r.pos != bytes.len() {
            return Err(format!(
                "{} unexpected bytes after the aliases at offset {}",
                bytes.len() - r.pos,
                r.pos
            ));
        }
        let mut names: Vec<&str> = variables.iter().map(|v| v.name.as_str()).collect();
        names.sort_unstable();
        if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
            return Err(format!("variable {} appears twice", w[0]));
        }
        Ok(Self {
            version,
            spec,
            revision,
            variables,
            aliases,
            bytes,
        })
    }

    /// The variable called `name`.
    pub fn get(&self, name: &str) -> Option<&Variable> {
        self.variables.iter().find(|v| v.name == name)
    }

    /// A variable's raw bytes.
    pub fn data(&self, v: &Variable) -> &[u8] {
        &self.bytes[v.data.clone()]
    }

    /// A float variable as f32 values.
    pub fn floats(&self, v: &Variable) -> Result<Vec<f32>, String> {
        let b = self.data(v);
        Ok(match v.dtype {
            Dtype::F32 => b
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
            Dtype::F16 => b
                .chunks_exact(2)
                .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32())
                .collect(),
            Dtype::Bf16 => b
                .chunks_exact(2)
                .map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f32())
                .collect(),
            other => {
                return Err(format!(
                    "{} is {other:?}, not floating point (quantized CTranslate2 models are not \
                     supported: convert with --quantization float16 or float32)",
                    v.name
                ))
            }
        })
    }

    /// An integer scalar (int8/16/32).
    pub fn int_scalar(&self, name: &str) -> Result<i64, String> {
        let v = self
            .get(name)
            .ok_or_else(|| format!("missing scalar {name}"))?;
        if !v.dims.is_empty() {
            return Err(format!(
                "{name} has dimensions {:?}, expected a scalar",
                v.dims
            ));
        }
        let b = self.data(v);
        Ok(match v.dtype {
            Dtype::I8 => i64::from(b[0] as i8),
            Dtype::I16 => i64::from(i16::from_le_bytes([b[0], b[1]])),
            Dtype::I32 => i64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            other => return Err(format!("{name} is {other:?}, expected an integer")),
        })
    }
}

/// The `i`th variable's header, its data skipped (its byte range kept).
fn read_variable(r: &mut Reader, i: usize) -> Result<Variable, String> {
    let name = r.str(&format!("variable {i} name"))?;
    let rank = r.u8(&format!("rank of {name}"))?;
    if rank > MAX_RANK {
        return Err(format!("{name} has rank {rank} (at most {MAX_RANK})"));
    }
    let mut dims = Vec::with_capacity(rank as usize);
    for _ in 0..rank {
        dims.push(r.u32(&format!("dimensions of {name}"))? as usize);
    }
    let code = r.u8(&format!("type of {name}"))?;
    let dtype =
        Dtype::from_code(code).ok_or_else(|| format!("{name} has unknown data type {code}"))?;
    let nbytes = r.u32(&format!("size of {name}"))? as usize;
    let want = dims
        .iter()
        .try_fold(dtype.size(), |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| format!("{name}: dimensions {dims:?} overflow"))?;
    if nbytes != want {
        return Err(format!(
            "{name}: {nbytes} data bytes, but dimensions {dims:?} of {dtype:?} take {want}"
        ));
    }
    let start = r.pos;
    r.skip(nbytes, &format!("data of {name}"))?;
    Ok(Variable {
        name,
        dims,
        dtype,
        data: start..r.pos,
    })
}

struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn need(&self, n: usize, what: &str) -> Result<(), String> {
        let left = self.b.len() - self.pos;
        if n > left {
            return Err(format!(
                "{what} needs {n} bytes at offset {} but only {left} are left (file truncated?)",
                self.pos
            ));
        }
        Ok(())
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&[u8], String> {
        self.need(n, what)?;
        let s = &self.b[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn skip(&mut self, n: usize, what: &str) -> Result<(), String> {
        self.take(n, what).map(|_| ())
    }

    fn u8(&mut self, what: &str) -> Result<u8, String> {
        Ok(self.take(1, what)?[0])
    }

    fn u16(&mut self, what: &str) -> Result<u16, String> {
        let b = self.take(2, what)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    fn u32(&mut self, what: &str) -> Result<u32, String> {
        let b = self.take(4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// A NUL-terminated string with a u16 length that counts the NUL.
    fn str(&mut self, what: &str) -> Result<String, String> {
        let at = self.pos;
        let len = self.u16(what)? as usize;
        let b = self.take(len, what)?;
        let Some((&0, text)) = b.split_last() else {
            return Err(format!("{what} at offset {at} is not NUL-terminated"));
        };
        String::from_utf8(text.to_vec()).map_err(|_| format!("{what} at offset {at} is not UTF-8"))
    }
}

/// Writes a CTranslate2 file (the tests build small ones with it).
#[cfg(test)]
pub fn write(
    spec: &str,
    revision: u32,
    variables: &[(&str, &[usize], Dtype, &[u8])],
    aliases: &[(&str, &str)],
) -> Vec<u8> {
    fn s(out: &mut Vec<u8>, text: &str) {
        out.extend_from_slice(&(text.len() as u16 + 1).to_le_bytes());
        out.extend_from_slice(text.as_bytes());
        out.push(0);
    }
    let code = |d: Dtype| match d {
        Dtype::F32 => 0u8,
        Dtype::I8 => 1,
        Dtype::I16 => 2,
        Dtype::I32 => 3,
        Dtype::F16 => 4,
        Dtype::Bf16 => 5,
    };
    let mut out = Vec::new();
    out.extend_from_slice(&VERSION.to_le_bytes());
    s(&mut out, spec);
    out.extend_from_slice(&revision.to_le_bytes());
    out.extend_from_slice(&(variables.len() as u32).to_le_bytes());
    for (name, dims, dtype, data) in variables {
        s(&mut out, name);
        out.push(dims.len() as u8);
        for d in *dims {
            out.extend_from_slice(&(*d as u32).to_le_bytes());
        }
        out.push(code(*dtype));
        out.extend_from_slice(&(data.len() as u32).to_le_bytes());
        out.extend_from_slice(data);
    }
    out.extend_from_slice(&(aliases.len() as u32).to_le_bytes());
    for (a, t) in aliases {
        s(&mut out, a);
        s(&mut out, t);
    }
    out
}
