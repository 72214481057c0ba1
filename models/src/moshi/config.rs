//! What a Moshi model directory holds, its presets, and the optional `duet-moshi.toml`.

use std::path::{Path, PathBuf};

use moshi::lm;
use moshi::mimi;

use super::sampler::Sampling;
use crate::ModelError;

/// The LM weights in Kyutai's candle bf16 release.
pub const LM_SAFETENSORS: &str = "model.safetensors";
/// The LM weights in Kyutai's candle q8 release.
pub const LM_GGUF: &str = "model.q8.gguf";
/// The Mimi codec weights.
pub const MIMI_FILE: &str = "tokenizer-e351c8d8-checkpoint125.safetensors";
/// The SentencePiece text tokenizer.
pub const TEXT_TOKENIZER: &str = "tokenizer_spm_32k_3.model";
/// Optional configuration overriding the preset (generated tiny models carry one).
pub const CONFIG_FILE: &str = "duet-moshi.toml";

/// Kyutai's released Moshi voices; both share one architecture.
pub const PRESETS: &[&str] = &["moshiko", "moshika"];

/// Turn-taking and sampling settings (the `[generation]` table).
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Generation {
    /// Codebooks the model generates (its own voice).
    pub generated_audio_codebooks: usize,
    /// Codebooks of the user's audio fed back in.
    pub input_audio_codebooks: usize,
    /// Steps by which acoustic codebooks trail the semantic one.
    pub acoustic_delay: usize,
    /// The text "nothing said" token.
    pub text_pad_token: u32,
    /// The text end-of-padding token.
    pub text_eop_token: u32,
    /// Text token fed at the first step.
    pub text_start_token: u32,
    /// Text stream sampling.
    pub text: Sampling,
    /// Audio stream sampling.
    pub audio: Sampling,
    /// Silence (no words, quiet audio) after which the model is considered listening.
    #[serde(default = "default_listen_after_ms")]
    pub listen_after_ms: u32,
    /// Output level (dBFS) above which a frame counts as speech even without words.
    #[serde(default = "default_voice_dbfs")]
    pub voice_dbfs: f32,
}

fn default_listen_after_ms() -> u32 {
    640
}

fn default_voice_dbfs() -> f32 {
    -35.0
}

impl Generation {
    /// Kyutai's defaults for Moshiko/Moshika.
    pub fn v0_1() -> Self {
        Self {
            generated_audio_codebooks: 8,
            input_audio_codebooks: 8,
            acoustic_delay: 2,
            text_pad_token: 3,
            text_eop_token: 0,
            text_start_token: 32000,
            text: Sampling {
                temperature: 0.7,
                top_k: 25,
            },
            audio: Sampling {
                temperature: 0.8,
                top_k: 250,
            },
            listen_after_ms: default_listen_after_ms(),
            voice_dbfs: default_voice_dbfs(),
        }
    }
}

/// Overrides of Mimi's architecture (the `[mimi]` table); unset fields keep Kyutai's.
#[derive(Clone, Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MimiOverrides {
    dimension: Option<usize>,
    n_filters: Option<usize>,
    transformer_layers: Option<usize>,
    transformer_heads: Option<usize>,
    transformer_ff: Option<usize>,
    transformer_context: Option<usize>,
    codebooks: Option<usize>,
    bins: Option<usize>,
    quantizer_dim: Option<usize>,
}

impl MimiOverrides {
    /// Sets the overridden fields of `mc` (`dimension` is the SEANet's and the transformer's).
    pub(crate) fn apply(&self, mc: &mut mimi::Config) {
        if let Some(d) = self.dimension {
            mc.seanet.dimension = d;
            mc.transformer.d_model = d;
        }
        set(&mut mc.seanet.n_filters, self.n_filters);
        set(&mut mc.transformer.num_layers, self.transformer_layers);
        set(&mut mc.transformer.num_heads, self.transformer_heads);
        set(&mut mc.transformer.dim_feedforward, self.transformer_ff);
        set(&mut mc.transformer.context, self.transformer_context);
        set(&mut mc.quantizer_n_q, self.codebooks);
        set(&mut mc.quantizer_bins, self.bins);
        set(&mut mc.quantizer_dim, self.quantizer_dim);
    }
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    lm: Option<lm::Config>,
    #[serde(default)]
    mimi: MimiOverrides,
    generation: Option<Generation>,
    /// Shortens the temporal transformer's KV context (steps of 80 ms) to save memory.
    context: Option<usize>,
}

/// A complete Moshi architecture.
#[derive(Clone, Debug)]
pub struct MoshiConfig {
    /// The language model (temporal + depth transformer).
    pub lm: lm::Config,
    /// The audio codec.
    pub mimi: mimi::Config,
    /// Stream layout and sampling.
    pub generation: Generation,
}

impl MoshiConfig {
    /// Moshiko / Moshika (7B temporal transformer, 8+8 codebooks).
    pub fn preset(name: &str) -> Result<Self, ModelError> {
        if !PRESETS.contains(&name) {
            return Err(ModelError::Failed(format!(
                "unknown Moshi preset {name:?}; available: {}",
                PRESETS.join(", ")
            )));
        }
        Ok(Self {
            lm: lm::Config::v0_1_streaming(8),
            mimi: mimi::Config::v0_1(Some(8)),
            generation: Generation::v0_1(),
        })
    }

    /// Parses a `duet-moshi.toml` on top of `base`.
    pub fn from_toml(text: &str, base: Self) -> Result<Self, ModelError> {
        let file: FileConfig = parse_file(text, CONFIG_FILE)?;
        let mut cfg = base;
        if let Some(g) = file.generation {
            cfg.generation = g;
        }
        apply_shared(
            &mut cfg.lm,
            &mut cfg.mimi,
            file.lm,
            file.context,
            &file.mimi,
        );
        cfg.validate()?;
        Ok(cfg)
    }

    /// Checks that the parts fit together.
    pub fn validate(&self) -> Result<(), ModelError> {
        let g = &self.generation;
        let bad = inconsistent("Moshi");
        let Some(dep) = &self.lm.depformer else {
            return bad("lm.depformer is required (the depth transformer makes the audio)".into());
        };
        if dep.num_slices != g.generated_audio_codebooks {
            return bad(format!(
                "depformer.num_slices {} != generation.generated_audio_codebooks {}",
                dep.num_slices, g.generated_audio_codebooks
            ));
        }
        let total = g.generated_audio_codebooks + g.input_audio_codebooks;
        if self.lm.audio_codebooks != total {
            return bad(format!(
                "lm.audio_codebooks {} != generated + input codebooks {total}",
                self.lm.audio_codebooks
            ));
        }
        self.check_codebooks().or_else(&bad)?;
        check_audio_vocab(&self.lm, &self.mimi).or_else(&bad)?;
        self.check_text_tokens().or_else(&bad)?;
        check_transformers(&[
            ("lm", &self.lm.transformer, 2),
            ("lm.depformer", &dep.transformer, dep.num_slices),
            ("mimi", &self.mimi.transformer, 2),
        ])
        .or_else(&bad)?;
        check_mimi_rate(&self.mimi).or_else(bad)
    }

    /// The codebooks generated and read, against what Mimi has.
    fn check_codebooks(&self) -> Result<(), String> {
        let g = &self.generation;
        if g.generated_audio_codebooks == 0 || g.input_audio_codebooks == 0 {
            return Err("a duplex model needs generated and input codebooks".into());
        }
        let needed = g.generated_audio_codebooks.max(g.input_audio_codebooks);
        if self.mimi.quantizer_n_q < needed.max(2) {
            return Err(format!(
                "mimi has {} codebooks, the LM needs {needed}",
                self.mimi.quantizer_n_q
            ));
        }
        Ok(())
    }

    /// The text tokens and vocabularies, and the acoustic delay.
    fn check_text_tokens(&self) -> Result<(), String> {
        let g = &self.generation;
        if g.text_start_token as usize >= self.lm.text_in_vocab_size {
            return Err(format!(
                "text_start_token {} outside text_in_vocab_size {}",
                g.text_start_token, self.lm.text_in_vocab_size
            ));
        }
        for (name, t) in [("pad", g.text_pad_token), ("eop", g.text_eop_token)] {
            if t as usize >= self.lm.text_out_vocab_size {
                return Err(format!("text_{name}_token {t} outside the text vocabulary"));
            }
        }
        if self.lm.text_out_vocab_size > self.lm.text_in_vocab_size {
            // A sampled text token is fed back through the input embedding.
            return Err(format!(
                "text_out_vocab_size {} > text_in_vocab_size {}",
                self.lm.text_out_vocab_size, self.lm.text_in_vocab_size
            ));
        }
        if g.acoustic_delay > MAX_ACOUSTIC_DELAY {
            return Err(format!(
                "acoustic_delay {} over {MAX_ACOUSTIC_DELAY} steps",
                g.acoustic_delay
            ));
        }
        Ok(())
    }
}

/// The longest acoustic delay accepted, in 80 ms steps (Moshi's is 2); each session keeps a
/// ring of `delay + 2` token rows and the warm-up runs `delay + 2` steps.
pub const MAX_ACOUSTIC_DELAY: usize = 16;
/// The longest attention context accepted, in steps (87 minutes at 12.5 Hz; Moshi's is 3000).
/// The KV cache is allocated for it up front, per slot.
pub const MAX_CONTEXT: usize = 1 << 16;

/// A config file's text as `T`; a parse error names `file`.
pub(crate) fn parse_file<T: serde::de::DeserializeOwned>(
    text: &str,
    file: &str,
) -> Result<T, ModelError> {
    toml::from_str(text).map_err(|e| ModelError::Failed(format!("{file}: {e}")))
}

/// Applies the overrides both Kyutai config files share: a whole `[lm]` table, then the
/// LM's KV `context`, and the `[mimi]` table.
pub(crate) fn apply_shared(
    lm: &mut lm::Config,
    mimi: &mut mimi::Config,
    file_lm: Option<lm::Config>,
    context: Option<usize>,
    overrides: &MimiOverrides,
) {
    if let Some(l) = file_lm {
        *lm = l;
    }
    if let Some(c) = context {
        lm.transformer.context = c;
    }
    overrides.apply(mimi);
}

/// The error of a config whose parts do not fit together, for `model`'s `validate`.
pub(crate) fn inconsistent(model: &str) -> impl Fn(String) -> Result<(), ModelError> + '_ {
    move |m| {
        Err(ModelError::Failed(format!(
            "inconsistent {model} config: {m}"
        )))
    }
}

/// Mimi's codes, plus the padding token, must be the LM's audio vocabulary.
pub(crate) fn check_audio_vocab(lm: &lm::Config, mimi: &mimi::Config) -> Result<(), String> {
    if mimi.quantizer_bins + 1 != lm.audio_vocab_size {
        return Err(format!(
            "mimi bins {} + 1 (padding) != lm.audio_vocab_size {}",
            mimi.quantizer_bins, lm.audio_vocab_size
        ));
    }
    Ok(())
}

/// [`check_transformer`] on each `(name, transformer, min_context)`; an error is prefixed
/// with the name.
pub(crate) fn check_transformers(
    ts: &[(&str, &moshi::transformer::Config, usize)],
) -> Result<(), String> {
    for &(name, t, min_context) in ts {
        check_transformer(t, min_context).map_err(|m| format!("{name}: {m}"))?;
    }
    Ok(())
}

/// Mimi's rates, which the 1920-sample frames assume.
pub(crate) fn check_mimi_rate(mimi: &mimi::Config) -> Result<(), String> {
    if mimi.sample_rate != 24_000.0 || mimi.frame_rate != 12.5 {
        return Err("Mimi must run at 24 kHz / 12.5 Hz (1920-sample frames)".into());
    }
    Ok(())
}

/// The shape rules upstream's constructors assume (they divide by these), with a context of
/// `min_context` steps (at least 1) to [`MAX_CONTEXT`].
fn check_transformer(t: &moshi::transformer::Config, min_context: usize) -> Result<(), String> {
    if t.num_heads == 0 || t.kv_repeat == 0 {
        return Err(format!(
            "num_heads {} and kv_repeat {} must be at least 1",
            t.num_heads, t.kv_repeat
        ));
    }
    if t.d_model == 0 || !t.d_model.is_multiple_of(t.num_heads) {
        return Err(format!(
            "d_model {} must be a positive multiple of num_heads {}",
            t.d_model, t.num_heads
        ));
    }
    if !t.num_heads.is_multiple_of(t.kv_repeat) {
        return Err(format!(
            "num_heads {} must be a multiple of kv_repeat {}",
            t.num_heads, t.kv_repeat
        ));
    }
    if !(min_context.max(1)..=MAX_CONTEXT).contains(&t.context) {
        return Err(format!(
            "context {} outside {}..={MAX_CONTEXT}",
            t.context,
            min_context.max(1)
        ));
    }
    Ok(())
}

fn set(field: &mut usize, v: Option<usize>) {
    if let Some(v) = v {
        *field = v;
    }
}

/// The files found in a model directory.
#[derive(Clone, Debug)]
pub struct ModelFiles {
    /// LM weights (`model.safetensors`, else `model.q8.gguf`).
    pub lm: PathBuf,
    /// Mimi weights.
    pub mimi: PathBuf,
    /// Text tokenizer.
    pub tokenizer: PathBuf,
    /// `duet-moshi.toml` when present.
    pub config: Option<PathBuf>,
}

impl ModelFiles {
    /// Finds every file, or says exactly which are missing and what is expected.
    pub fn find(dir: &Path) -> Result<Self, ModelError> {
        let expected = format!(
            "expected in {}: {LM_SAFETENSORS} (bf16) or {LM_GGUF} (q8), {MIMI_FILE}, \
             {TEXT_TOKENIZER}, and optionally {CONFIG_FILE}",
            dir.display()
        );
        find_release(
            dir,
            &Release {
                model: "Moshi",
                lm: &[LM_SAFETENSORS, LM_GGUF],
                mimi: MIMI_FILE,
                tokenizer: TEXT_TOKENIZER,
                config: CONFIG_FILE,
                tiny: "run `duet moshi-tiny --out DIR` for a tiny random test model",
            },
            &expected,
        )
    }

    /// The architecture: the preset, overridden by `duet-moshi.toml` when present.
    pub fn config(&self, preset: &str) -> Result<MoshiConfig, ModelError> {
        let base = MoshiConfig::preset(preset)?;
        match &self.config {
            None => Ok(base),
            Some(p) => MoshiConfig::from_toml(&read_config(p)?, base),
        }
    }
}

/// The file names of a Kyutai release, for [`find_release`].
pub(crate) struct Release<'a> {
    /// The model, as error messages name it.
    pub model: &'a str,
    /// The LM weights' accepted names, the first present taken.
    pub lm: &'a [&'a str],
    pub mimi: &'a str,
    pub tokenizer: &'a str,
    pub config: &'a str,
    /// How to get a tiny test model instead ("or ..." follows fetching the release).
    pub tiny: &'a str,
}

/// Finds a release's files in `dir`, or says exactly which are missing; `expected` lists
/// what the directory should hold.
pub(crate) fn find_release(
    dir: &Path,
    r: &Release,
    expected: &str,
) -> Result<ModelFiles, ModelError> {
    if !dir.is_dir() {
        return Err(ModelError::Failed(format!(
            "{} model directory {} does not exist; {expected}",
            r.model,
            dir.display()
        )));
    }
    let at = |f: &str| Some(dir.join(f)).filter(|p| p.is_file());
    let lm = r.lm.iter().find_map(|f| at(f));
    let mimi = at(r.mimi);
    let tokenizer = at(r.tokenizer);
    let mut missing = Vec::new();
    if lm.is_none() {
        missing.push(r.lm.join(" or "));
    }
    if mimi.is_none() {
        missing.push(r.mimi.to_string());
    }
    if tokenizer.is_none() {
        missing.push(r.tokenizer.to_string());
    }
    match (lm, mimi, tokenizer) {
        (Some(lm), Some(mimi), Some(tokenizer)) => Ok(ModelFiles {
            lm,
            mimi,
            tokenizer,
            config: at(r.config),
        }),
        _ => Err(ModelError::Failed(format!(
            "{} model directory is incomplete: missing {}; {expected}. Duet never \
             downloads weights: fetch Kyutai's candle release yourself, or {}",
            r.model,
            missing.join(", "),
            r.tiny
        ))),
    }
}

/// The text of a directory's config file.
pub(crate) fn read_config(p: &Path) -> Result<String, ModelError> {
    std::fs::read_to_string(p).map_err(|e| ModelError::Failed(format!("{}: {e}", p.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_are_consistent() {
        for p in PRESETS {
            MoshiConfig::preset(p).unwrap().validate().unwrap();
        }
        let e = MoshiConfig::preset("moshix").unwrap_err().to_string();
        assert!(e.contains("moshiko, moshika"), "{e}");
    }

    #[test]
    fn missing_files_are_named() {
        let dir = std::env::temp_dir().join(format!("duet-moshi-empty-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(MIMI_FILE), b"x").unwrap();
        let e = ModelFiles::find(&dir).unwrap_err().to_string();
        assert!(
            e.contains("missing model.safetensors or model.q8.gguf, tokenizer_spm_32k_3.model"),
            "{e}"
        );
        assert!(!e.contains(&format!("missing {MIMI_FILE}")), "{e}");
        assert!(e.contains("never downloads"), "{e}");
        let e = ModelFiles::find(&dir.join("nope")).unwrap_err().to_string();
        assert!(e.contains("does not exist"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn bad_toml_is_a_clear_error() {
        let base = || MoshiConfig::preset("moshiko").unwrap();
        let e = MoshiConfig::from_toml("nonsense = 1", base())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("duet-moshi.toml") && e.contains("nonsense"),
            "{e}"
        );
        let e = MoshiConfig::from_toml("[mimi]\nbins = 7", base())
            .unwrap_err()
            .to_string();
        assert!(e.contains("audio_vocab_size"), "{e}");
        let c = MoshiConfig::from_toml("context = 750", base()).unwrap();
        assert_eq!(c.lm.transformer.context, 750);
    }
}
