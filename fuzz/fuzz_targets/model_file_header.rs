//! Fuzzes the header checks run on a Moshi directory's weights files
//! (`duet_models::moshi::filecheck`): any bytes, written to `model.q8.gguf` and to
//! `model.safetensors`, are accepted or refused, never a panic or an abort. A file that passes
//! goes on to the production loader (`MoshiModel::load`, on the CPU), which may refuse it but
//! must not panic or abort either: what the checks accept, candle can read.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use duet_models::moshi::{config, filecheck, tiny, MoshiModel, MoshiOptions};
use libfuzzer_sys::fuzz_target;

/// Two tiny model directories (q8 and bf16 layouts) whose LM file each input replaces.
struct Dirs {
    q8: PathBuf,
    bf16: PathBuf,
}

fn dirs() -> &'static Dirs {
    static DIRS: OnceLock<Dirs> = OnceLock::new();
    DIRS.get_or_init(|| {
        let base = std::env::temp_dir().join(format!("duet-fuzz-model-{}", std::process::id()));
        let d = Dirs {
            q8: base.join("q8"),
            bf16: base.join("bf16"),
        };
        tiny::write_tiny_dir(&d.q8, 1, true).expect("tiny q8 directory");
        tiny::write_tiny_dir(&d.bf16, 1, false).expect("tiny bf16 directory");
        d
    })
}

fn opts() -> MoshiOptions {
    MoshiOptions {
        max_slots: 1,
        seed: Some(1),
        ..MoshiOptions::default()
    }
}

fuzz_target!(|data: &[u8]| {
    let d = dirs();
    let gguf = d.q8.join(config::LM_GGUF);
    std::fs::write(&gguf, data).expect("write the GGUF file");
    if filecheck::check_gguf(&gguf).is_ok() {
        let _ = MoshiModel::load(&d.q8, &opts());
    }
    let st = d.bf16.join(config::LM_SAFETENSORS);
    std::fs::write(&st, data).expect("write the safetensors file");
    if filecheck::check_safetensors(&st).is_ok() {
        let _ = MoshiModel::load(&d.bf16, &opts());
    }
});
