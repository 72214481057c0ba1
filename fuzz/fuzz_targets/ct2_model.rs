//! Fuzzes the CTranslate2 reader behind `duet convert-whisper` (`model.bin` of a Whisper
//! directory): any bytes are parsed or refused, never a panic, and every variable of a
//! parsed file reads back as the bytes it claims.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = duet_models::whisper::ct2::Ct2Model::parse(data.to_vec()) {
        for v in &m.variables {
            let bytes = m.data(v);
            let _ = m.floats(v);
            let _ = bytes.len();
        }
    }
});
