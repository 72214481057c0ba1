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
    let vb = candle_transformers::quantized_var_builder::VarBuilder::from_gguf(&f.0, &Device::Cpu)
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
