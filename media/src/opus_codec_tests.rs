use super::*;
use crate::testutil::{dominant_freq, goertzel_amp, rms, sine};
use crate::OPUS_FRAME;

fn tone_frames(n: usize) -> Vec<Vec<f32>> {
    let s = sine(440.0, OPUS_RATE, 0.5, n * OPUS_FRAME);
    s.chunks(OPUS_FRAME).map(<[f32]>::to_vec).collect()
}

#[test]
fn sine_round_trips_with_frequency_and_level() {
    let mut enc = OpusEncoder::new().unwrap();
    let mut dec = OpusDecoder::new().unwrap();
    let mut out = Vec::new();
    for frame in tone_frames(50) {
        let pkt = enc.encode(&frame).unwrap();
        assert_eq!(dec.decode(&pkt, &mut out).unwrap(), OPUS_FRAME);
    }
    assert_eq!(out.len(), 50 * OPUS_FRAME);
    // Skip 200 ms: codec lookahead and encoder convergence.
    let tail = &out[10 * OPUS_FRAME..];
    let f = dominant_freq(tail, OPUS_RATE, 200.0, 1000.0, 2.0);
    assert!((f - 440.0).abs() <= 6.0, "dominant {f}");
    let amp = goertzel_amp(tail, 440.0, OPUS_RATE);
    let db = 20.0 * (amp / 0.5).log10();
    assert!(db.abs() < 3.0, "level off by {db} dB");
}

#[test]
fn silence_is_a_small_packet() {
    // libopus 1.3.1 picks fullband hybrid at 32 kbps, whose CELT layer
    // keeps steady-state silence at ~21 bytes (SILK-only would be ~8);
    // speech-like frames are ~100 bytes.
    let mut enc = OpusEncoder::new().unwrap();
    for _ in 0..30 {
        let pkt = enc.encode_silence().unwrap();
        assert!(!pkt.is_empty() && pkt.len() <= 24, "{} bytes", pkt.len());
    }
    let tone = enc.encode(&tone_frames(1)[0]).unwrap();
    assert!(tone.len() > 40, "tone packet {} bytes", tone.len());
}

#[test]
fn wrong_frame_size_errors() {
    let mut enc = OpusEncoder::new().unwrap();
    for len in [0, 959, 961, 480, 1920] {
        let err = enc.encode(&vec![0.0; len]).unwrap_err();
        assert_eq!(
            err,
            CodecError::FrameSize {
                expected: 960,
                got: len
            }
        );
        assert_eq!(err.code(), "opus_frame_size");
    }
}

#[test]
fn non_finite_input_is_sanitized() {
    let mut enc = OpusEncoder::new().unwrap();
    let mut dec = OpusDecoder::new().unwrap();
    let mut frame = vec![f32::NAN; OPUS_FRAME];
    frame[1] = f32::INFINITY;
    let pkt = enc.encode(&frame).unwrap();
    let mut out = Vec::new();
    dec.decode(&pkt, &mut out).unwrap();
    assert!(out.iter().all(|v| v.is_finite()));
}

#[test]
fn plc_produces_finite_samples() {
    let mut enc = OpusEncoder::new().unwrap();
    let mut dec = OpusDecoder::new().unwrap();
    let mut out = Vec::new();
    for frame in tone_frames(5) {
        dec.decode(&enc.encode(&frame).unwrap(), &mut out).unwrap();
    }
    out.clear();
    dec.conceal(OPUS_FRAME, &mut out);
    assert_eq!(out.len(), OPUS_FRAME);
    assert!(out.iter().all(|v| v.is_finite()));
    // Odd lengths still append exactly what was asked.
    out.clear();
    dec.conceal(1000, &mut out);
    assert_eq!(out.len(), 1000);
    out.clear();
    dec.conceal(7000, &mut out);
    assert_eq!(out.len(), 7000);
    assert!(out.iter().all(|v| v.is_finite()));
}

#[test]
fn fec_recovers_a_lost_tone_frame() {
    let mut enc = OpusEncoder::new().unwrap();
    let mut dec = OpusDecoder::new().unwrap();
    let pkts: Vec<Vec<u8>> = tone_frames(20)
        .iter()
        .map(|f| enc.encode(f).unwrap())
        .collect();
    let mut out = Vec::new();
    for pkt in &pkts[..12] {
        dec.decode(pkt, &mut out).unwrap();
    }
    // Packet 12 is lost; 13 arrives and carries its FEC.
    let mut fec = Vec::new();
    let n = dec.decode_fec(&pkts[13], OPUS_FRAME, &mut fec).unwrap();
    assert_eq!(n, OPUS_FRAME);
    assert!(rms(&fec) > 0.05, "FEC output rms {}", rms(&fec));
    assert!(dec.decode(&pkts[13], &mut out).unwrap() == OPUS_FRAME);
}

#[test]
fn fec_rejects_bad_arguments() {
    let mut dec = OpusDecoder::new().unwrap();
    let mut out = Vec::new();
    assert_eq!(
        dec.decode_fec(&[], OPUS_FRAME, &mut out),
        Err(CodecError::EmptyPacket)
    );
    for bad in [0, 100, 6000] {
        let err = dec.decode_fec(&[0xF8, 0xFF, 0xFE], bad, &mut out);
        assert!(matches!(err, Err(CodecError::FrameSize { .. })));
    }
    assert!(out.is_empty());
}

#[test]
fn decodes_stereo_packets_to_mono() {
    let mut enc = opus::Encoder::new(OPUS_RATE, Channels::Stereo, Application::Voip).unwrap();
    let mono = sine(440.0, OPUS_RATE, 0.5, 20 * OPUS_FRAME);
    let mut dec = OpusDecoder::new().unwrap();
    let mut out = Vec::new();
    for frame in mono.chunks(OPUS_FRAME) {
        let inter: Vec<f32> = frame.iter().flat_map(|&v| [v, v]).collect();
        let pkt = enc.encode_vec_float(&inter, 4000).unwrap();
        assert_eq!(dec.decode(&pkt, &mut out).unwrap(), OPUS_FRAME);
    }
    let tail = &out[5 * OPUS_FRAME..];
    let f = dominant_freq(tail, OPUS_RATE, 200.0, 1000.0, 2.0);
    assert!((f - 440.0).abs() <= 6.0, "dominant {f}");
}

#[test]
fn garbage_and_empty_packets_error() {
    let mut dec = OpusDecoder::new().unwrap();
    let mut out = Vec::new();
    assert_eq!(dec.decode(&[], &mut out), Err(CodecError::EmptyPacket));
    // Code 3 (arbitrary frame count) with a zero frame count is invalid.
    let err = dec.decode(&[0x03, 0x00], &mut out).unwrap_err();
    assert_eq!(err, CodecError::InvalidPacket);
    assert_eq!(err.code(), "opus_invalid_packet");
    assert!(out.is_empty());
}
