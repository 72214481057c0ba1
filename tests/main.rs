//! Every integration test of the server, in one test binary: one behaviour per file in
//! `tests/`, each file a module here, with the shared helpers in `tests/common/`.
//!
//! One binary instead of one per file: each would link the whole server (tens of megabytes)
//! again. Run one file's tests with `./scripts/test --test integration <file>::`.

mod common;

mod admission_follows_session;
mod admission_wait;
mod agents_realtime_tools;
mod agents_realtime_webrtc;
mod agents_realtime_ws;
mod agents_realtime_ws_moshi;
mod auth_hardening;
mod browser_demo;
mod browser_demo_moshi;
mod cascade_barge_in;
mod cascade_embedded;
mod cascade_speculative;
mod cascade_speech;
mod cascade_tool_loop;
mod check_config;
mod client_secrets;
mod drain;
mod http_body_deadline;
mod http_endpoints;
mod http_slow_clients;
mod memory_budget_hostile;
mod metrics;
mod openai_python;
mod openai_python_calls;
mod openai_python_chat;
mod openai_python_chat_embedded;
mod openai_python_moshi;
mod openai_python_secrets;
mod openai_python_tools;
mod openai_python_transcription;
mod panic_containment;
mod resume_expired_secret;
mod sip_webhook_signature;
mod speech_noise_onset;
mod speech_transcription_ws;
mod speech_webrtc;
mod transcription_without_slot;
mod usage_and_pool;
mod webrtc_aiortc;
mod webrtc_bad_offers;
mod webrtc_call;
mod webrtc_churn;
mod webrtc_connect_timeout;
mod webrtc_g711_gateway;
mod webrtc_impaired;
mod webrtc_lossless_signals;
mod webrtc_manual_turn;
mod webrtc_moshi_tiny;
mod webrtc_resume;
mod webrtc_resume_refused;
mod webrtc_sideband;
mod webrtc_sideband_ends_with_call;
mod webrtc_sideband_limits;
mod ws_auth;
mod ws_barge_in;
mod ws_errors_keep_session;
mod ws_g711;
mod ws_idle_timeout;
mod ws_items;
mod ws_kyutai_stt_tiny;
mod ws_manual_turn;
mod ws_memory_budget;
mod ws_moshi_tiny;
mod ws_resume;
mod ws_server_vad_turn;
mod ws_text_response;
mod ws_timeouts;
