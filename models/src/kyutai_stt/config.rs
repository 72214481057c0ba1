//! What a Kyutai STT directory holds, its preset, and the optional `duet-stt.toml`.

use std::path::{Path, PathBuf};

use moshi::lm;
use moshi::mimi;

use crate::moshi::config::{
    apply_shared, check_audio_vocab, check_mimi_rate, check_transformers, find_release,
    inconsistent, parse_file, read_config, MimiOverrides, ModelFiles, Release,
};
use crate::ModelError;

/// The LM weights of Kyutai's candle release (`kyutai/stt-1b-en_fr-candle`, bf16).
pub const LM_FILE: &str = "model.safetensors";
/// The Mimi codec weights (all 32 codebooks).
pub const MIMI_FILE: &str = "mimi-pytorch-e351c8d8@125.safetensors";
/// The SentencePiece text tokenizer (8000 pieces).
pub const TEXT_TOKENIZER: &str = "tokenizer_en_fr_audio_8000.model";
/// Optional configuration overriding the preset (generated tiny models carry one).
pub const CONFIG_FILE: &str = "duet-stt.toml";

/// Released architectures.
pub const PRESETS: &[&str] = &["stt-1b-en_fr"];

/// Text token that means "no new word here" (upstream's `moshi::asr` hard-codes it).
pub const TEXT_PAD: u32 = 3;
/// Text token that marks the end of a pause before a word (also hard-coded upstream).
pub const TEXT_EOP: u32 = 0;

/// The longest text delay accepted, in 80 ms steps (stt-1b: 6; stt-2.6b: 31).
pub const MAX_DELAY: usize = 64;
/// The most silence frames an utterance's end may feed.
pub const MAX_FLUSH: usize = 128;
/// The longest attention context accepted, in steps (the KV cache is allocated up front):
/// Moshi's limit.
pub use crate::moshi::config::MAX_CONTEXT;

/// How the text stream is read (the `[asr]` table).
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AsrSettings {
    /// Steps (80 ms each) by which the text trails the audio; tokens of the first
    /// `delay_tokens` steps of an utterance are ignored, as upstream's
    /// `asr_delay_in_tokens`. stt-1b-en_fr: 6 (0.48 s; its 0.5 s audio delay × 12.5 Hz).
    pub delay_tokens: usize,
    /// Text sampling temperature; 0 (Kyutai's setting) is greedy.
    #[serde(default)]
    pub temperature: f32,
    /// Silence frames fed after an utterance's last audio so that its delayed words come
    /// out; `None`: `delay_tokens + 2` (one step because audio codes reach the LM a step
    /// late, one for the word's closing pad).
    #[serde(default)]
    pub flush_frames: Option<usize>,
    /// The extra head whose class 0 is the end-of-turn probability (Kyutai's `stt-rs
    /// --vad` reads head 2, the 2 s horizon of 0.5, 1, 2 and 3 s).
    #[serde(default = "default_end_of_turn_head")]
    pub end_of_turn_head: usize,
}

fn default_end_of_turn_head() -> usize {
    2
}

impl AsrSettings {
    /// stt-1b-en_fr's settings (moshi-server's `config-stt-en_fr-hf.toml`).
    pub fn stt_1b() -> Self {
        Self {
            delay_tokens: 6,
            temperature: 0.0,
            flush_frames: None,
            end_of_turn_head: default_end_of_turn_head(),
        }
    }

    /// Silence frames fed at an utterance's end.
    pub fn flush_frames(&self) -> usize {
        self.flush_frames.unwrap_or(self.delay_tokens + 2)
    }
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    lm: Option<lm::Config>,
    #[serde(default)]
    mimi: MimiOverrides,
    asr: Option<AsrSettings>,
    /// Shortens the LM's KV context (steps of 80 ms) to save memory.
    context: Option<usize>,
}

/// A complete Kyutai STT architecture.
#[derive(Clone, Debug)]
pub struct SttConfig {
    /// The language model (temporal transformer, text head, extra heads; no depformer).
    pub lm: lm::Config,
    /// The audio codec (only its encoder runs).
    pub mimi: mimi::Config,
    /// How the text stream is read.
    pub asr: AsrSettings,
}

impl SttConfig {
    /// A released architecture by name.
    pub fn preset(name: &str) -> Result<Self, ModelError> {
        match name {
            "stt-1b-en_fr" => Ok(Self::stt_1b_en_fr()),
            _ => Err(ModelError::Failed(format!(
                "unknown Kyutai STT preset {name:?}; available: {}",
                PRESETS.join(", ")
            ))),
        }
    }

    /// `kyutai/stt-1b-en_fr-candle`: 16 layers of d_model 2048, 32 audio codebooks, 8000
    /// text tokens, context 750 steps (60 s), four extra heads of 6 classes.
    pub fn stt_1b_en_fr() -> Self {
        let mut lm = lm::Config::asr_v0_1_1b();
        lm.text_in_vocab_size = 8001;
        lm.text_out_vocab_size = 8000;
        lm.audio_codebooks = 32;
        lm.extra_heads = Some(lm::ExtraHeadsConfig {
            num_heads: 4,
            dim: 6,
        });
        Self {
            lm,
            mimi: mimi::Config::v0_1(Some(32)),
            asr: AsrSettings::stt_1b(),
        }
    }

    /// Parses a `duet-stt.toml` on top of `base`.
    pub fn from_toml(text: &str, base: Self) -> Result<Self, ModelError> {
        let file: FileConfig = parse_file(text, CONFIG_FILE)?;
        let mut cfg = base;
        if let Some(a) = file.asr {
            cfg.asr = a;
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

    /// Checks that the parts fit together (and everything upstream's constructors divide
    /// by or index with).
    pub fn validate(&self) -> Result<(), ModelError> {
        let bad = inconsistent("Kyutai STT");
        let lm = &self.lm;
        if lm.depformer.is_some() {
            return bad(
                "lm.depformer must be absent (a speech-to-text model makes no audio)".into(),
            );
        }
        if lm.conditioners.is_some() {
            return bad("lm.conditioners are not supported (stt-1b-en_fr has none)".into());
        }
        if lm.audio_codebooks == 0 || lm.audio_codebooks > self.mimi.quantizer_n_q {
            return bad(format!(
                "lm.audio_codebooks {} must be between 1 and mimi's {} codebooks",
                lm.audio_codebooks, self.mimi.quantizer_n_q
            ));
        }
        if self.mimi.quantizer_n_q < 2 {
            return bad("mimi needs at least 2 codebooks (one semantic, one acoustic)".into());
        }
        check_audio_vocab(lm, &self.mimi).or_else(&bad)?;
        self.check_text_and_asr().or_else(&bad)?;
        check_transformers(&[
            ("lm", &lm.transformer, 2),
            ("mimi", &self.mimi.transformer, 2),
        ])
        .or_else(&bad)?;
        if !lm.transformer.causal {
            return bad("lm.transformer must be causal (it streams)".into());
        }
        check_mimi_rate(&self.mimi).or_else(bad)
    }

    /// The text vocabulary's special tokens, the extra heads and the `asr` section.
    fn check_text_and_asr(&self) -> Result<(), String> {
        let (lm, a) = (&self.lm, &self.asr);
        if lm.text_out_vocab_size + 1 != lm.text_in_vocab_size {
            // The start token is the last input id, and sampled tokens are fed back.
            return Err(format!(
                "text_in_vocab_size {} must be text_out_vocab_size {} + 1",
                lm.text_in_vocab_size, lm.text_out_vocab_size
            ));
        }
        if [TEXT_PAD, TEXT_EOP]
            .iter()
            .any(|&t| t as usize >= lm.text_out_vocab_size)
        {
            return Err(format!(
                "text_out_vocab_size {} leaves no room for the pad ({TEXT_PAD}) and \
                 end-of-pause ({TEXT_EOP}) tokens",
                lm.text_out_vocab_size
            ));
        }
        if let Some(h) = &lm.extra_heads {
            if h.dim == 0 {
                return Err("extra_heads.dim must be at least 1".into());
            }
        }
        if a.delay_tokens > MAX_DELAY {
            return Err(format!(
                "asr.delay_tokens {} over {MAX_DELAY} steps",
                a.delay_tokens
            ));
        }
        if a.flush_frames() > MAX_FLUSH {
            return Err(format!(
                "asr.flush_frames {} over {MAX_FLUSH}",
                a.flush_frames()
            ));
        }
        if !(a.temperature.is_finite() && a.temperature >= 0.0) {
            return Err(format!(
                "asr.temperature {} must be 0 or more",
                a.temperature
            ));
        }
        Ok(())
    }

    /// The end-of-turn head's index when the model has it.
    pub fn end_of_turn_head(&self) -> Option<usize> {
        let heads = self.lm.extra_heads.as_ref().map_or(0, |h| h.num_heads);
        (self.asr.end_of_turn_head < heads).then_some(self.asr.end_of_turn_head)
    }
}

/// The files found in a model directory.
#[derive(Clone, Debug)]
pub struct SttFiles {
    /// LM weights.
    pub lm: PathBuf,
    /// Mimi weights.
    pub mimi: PathBuf,
    /// Text tokenizer.
    pub tokenizer: PathBuf,
    /// `duet-stt.toml` when present.
    pub config: Option<PathBuf>,
}

impl From<SttFiles> for ModelFiles {
    fn from(f: SttFiles) -> Self {
        Self {
            lm: f.lm,
            mimi: f.mimi,
            tokenizer: f.tokenizer,
            config: f.config,
        }
    }
}

impl SttFiles {
    /// Finds every file, or says exactly which are missing and what is expected.
    pub fn find(dir: &Path) -> Result<Self, ModelError> {
        let expected = format!(
            "expected in {}: {LM_FILE}, {MIMI_FILE}, {TEXT_TOKENIZER} (Kyutai's \
             stt-1b-en_fr-candle release), and optionally {CONFIG_FILE}",
            dir.display()
        );
        let ModelFiles {
            lm,
            mimi,
            tokenizer,
            config,
        } = find_release(
            dir,
            &Release {
                model: "Kyutai STT",
                lm: &[LM_FILE],
                mimi: MIMI_FILE,
                tokenizer: TEXT_TOKENIZER,
                config: CONFIG_FILE,
                tiny: "write a tiny random test model with `kyutai_stt::tiny::write_tiny_dir`",
            },
            &expected,
        )?;
        Ok(Self {
            lm,
            mimi,
            tokenizer,
            config,
        })
    }

    /// The architecture: the preset, overridden by `duet-stt.toml` when present.
    pub fn config(&self, preset: &str) -> Result<SttConfig, ModelError> {
        let base = SttConfig::preset(preset)?;
        match &self.config {
            None => {
                base.validate()?;
                Ok(base)
            }
            Some(p) => SttConfig::from_toml(&read_config(p)?, base),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_preset_is_consistent() {
        for p in PRESETS {
            let c = SttConfig::preset(p).unwrap();
            c.validate().unwrap();
            assert_eq!(c.end_of_turn_head(), Some(2));
            assert_eq!(c.asr.flush_frames(), 8);
        }
        let e = SttConfig::preset("stt-9b").unwrap_err().to_string();
        assert!(e.contains("stt-1b-en_fr"), "{e}");
    }

    #[test]
    fn missing_files_are_named() {
        let dir = std::env::temp_dir().join(format!("duet-stt-empty-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(MIMI_FILE), b"x").unwrap();
        let e = SttFiles::find(&dir).unwrap_err().to_string();
        assert!(
            e.contains("missing model.safetensors, tokenizer_en_fr_audio_8000.model;"),
            "{e}"
        );
        assert!(!e.contains(&format!("missing {MIMI_FILE}")), "{e}");
        assert!(e.contains("never downloads"), "{e}");
        let e = SttFiles::find(&dir.join("nope")).unwrap_err().to_string();
        assert!(e.contains("does not exist") && e.contains(MIMI_FILE), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn bad_toml_is_a_clear_error() {
        let base = || SttConfig::preset("stt-1b-en_fr").unwrap();
        let e = SttConfig::from_toml("nonsense = 1", base())
            .unwrap_err()
            .to_string();
        assert!(e.contains("duet-stt.toml") && e.contains("nonsense"), "{e}");
        let e = SttConfig::from_toml("[mimi]\nbins = 7", base())
            .unwrap_err()
            .to_string();
        assert!(e.contains("audio_vocab_size"), "{e}");
        let e = SttConfig::from_toml("[mimi]\ncodebooks = 8", base())
            .unwrap_err()
            .to_string();
        assert!(e.contains("audio_codebooks 32"), "{e}");
        let e = SttConfig::from_toml("[asr]\ndelay_tokens = 6\nflush_frames = 1000", base())
            .unwrap_err()
            .to_string();
        assert!(e.contains("flush_frames"), "{e}");
        let c = SttConfig::from_toml("context = 375", base()).unwrap();
        assert_eq!(c.lm.transformer.context, 375);
        let c =
            SttConfig::from_toml("[asr]\ndelay_tokens = 6\nend_of_turn_head = 9", base()).unwrap();
        assert_eq!(
            c.end_of_turn_head(),
            None,
            "no such head: no end-of-turn estimate"
        );
    }
}
