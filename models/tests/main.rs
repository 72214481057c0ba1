//! The models' tests on real weights, in one test binary: one model per file in
//! `models/tests/`, each file a module here. They need `DUET_TEST_MODELS` (see each file).

mod piper_real;
mod silero_accuracy;
mod smart_turn_real;
mod smollm_real;
mod whisper_real;
