//! ITU-T G.711 companding: μ-law (PCMU) and A-law (PCMA).
//!
//! The per-sample functions follow the classic reference implementation
//! (Sun Microsystems' `g711.c`): 16-bit linear in, 8-bit code out. Decoding
//! returns the midpoint of each quantisation interval. The slice helpers
//! convert between G.711 bytes and Duet's `f32` samples (scale 1/32768).

use crate::pcm::{f32_to_i16, i16_to_f32};

/// μ-law bias added before segment search.
const ULAW_BIAS: i32 = 0x84;
/// Largest magnitude μ-law can represent before the bias is added.
const ULAW_CLIP: i32 = 32635;
/// Upper bounds (13-bit magnitude) of the eight A-law segments.
const ALAW_SEG_END: [i32; 8] = [0x1F, 0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF];

/// Encodes one 16-bit linear sample as a μ-law byte.
pub fn ulaw_encode(s: i16) -> u8 {
    let mut v = i32::from(s);
    let sign: u8 = if v < 0 { 0x80 } else { 0x00 };
    if v < 0 {
        v = -v;
    }
    let v = v.min(ULAW_CLIP) + ULAW_BIAS;
    // Exponent = position of the highest set bit above bit 7 (0..=7).
    let exponent = (31 - (v >> 7).max(1).leading_zeros()) as u8;
    let mantissa = ((v >> (exponent + 3)) & 0x0F) as u8;
    !(sign | (exponent << 4) | mantissa)
}

/// Decodes one μ-law byte to a 16-bit linear sample.
pub fn ulaw_decode(u: u8) -> i16 {
    let u = !u;
    let exponent = (u >> 4) & 0x07;
    let mantissa = i32::from(u & 0x0F);
    let magnitude = (((mantissa << 3) + ULAW_BIAS) << exponent) - ULAW_BIAS;
    // magnitude <= 32124, so the cast cannot truncate.
    if u & 0x80 != 0 {
        -magnitude as i16
    } else {
        magnitude as i16
    }
}

/// Encodes one 16-bit linear sample as an A-law byte (even bits inverted).
pub fn alaw_encode(s: i16) -> u8 {
    let mut v = i32::from(s) >> 3;
    let mask: u8 = if v >= 0 {
        0xD5
    } else {
        v = -v - 1;
        0x55
    };
    let Some(seg) = ALAW_SEG_END.iter().position(|&end| v <= end) else {
        return 0x7F ^ mask;
    };
    let shift = if seg < 2 { 1 } else { seg };
    let code = ((seg as u8) << 4) | ((v >> shift) & 0x0F) as u8;
    code ^ mask
}

/// Decodes one A-law byte to a 16-bit linear sample.
pub fn alaw_decode(a: u8) -> i16 {
    let a = a ^ 0x55;
    let seg = (a & 0x70) >> 4;
    let mut t = i32::from(a & 0x0F) << 4;
    match seg {
        0 => t += 8,
        1 => t += 0x108,
        _ => t = (t + 0x108) << (seg - 1),
    }
    // t <= 32256, so the cast cannot truncate.
    if a & 0x80 != 0 {
        t as i16
    } else {
        -t as i16
    }
}

/// Decodes μ-law bytes to `f32` samples.
pub fn decode_ulaw(bytes: &[u8]) -> Vec<f32> {
    bytes.iter().map(|&b| i16_to_f32(ulaw_decode(b))).collect()
}

/// Decodes A-law bytes to `f32` samples.
pub fn decode_alaw(bytes: &[u8]) -> Vec<f32> {
    bytes.iter().map(|&b| i16_to_f32(alaw_decode(b))).collect()
}

/// Encodes `f32` samples (clamped to full scale) as μ-law bytes.
pub fn encode_ulaw(samples: &[f32]) -> Vec<u8> {
    samples
        .iter()
        .map(|&s| ulaw_encode(f32_to_i16(s)))
        .collect()
}

/// [`encode_ulaw`] (`alaw`: [`encode_alaw`]) into `out`, cleared first: no allocation once
/// `out` has the room.
pub fn encode_g711_into(samples: &[f32], alaw: bool, out: &mut Vec<u8>) {
    out.clear();
    let law = if alaw { alaw_encode } else { ulaw_encode };
    out.extend(samples.iter().map(|&s| law(f32_to_i16(s))));
}

/// [`decode_ulaw`] (`alaw`: [`decode_alaw`]) appended to `out`.
pub fn decode_g711_into(bytes: &[u8], alaw: bool, out: &mut Vec<f32>) {
    let law = if alaw { alaw_decode } else { ulaw_decode };
    out.extend(bytes.iter().map(|&b| i16_to_f32(law(b))));
}

/// Encodes `f32` samples (clamped to full scale) as A-law bytes.
pub fn encode_alaw(samples: &[f32]) -> Vec<u8> {
    samples
        .iter()
        .map(|&s| alaw_encode(f32_to_i16(s)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ulaw_known_values() {
        assert_eq!(ulaw_decode(0xFF), 0);
        assert_eq!(ulaw_decode(0x7F), 0);
        assert_eq!(ulaw_decode(0x00), -32124);
        assert_eq!(ulaw_decode(0x80), 32124);
        assert_eq!(ulaw_decode(0xFE), 8);
        assert_eq!(ulaw_decode(0x7E), -8);
        assert_eq!(ulaw_decode(0xEF), 132); // first code of segment 1
        assert_eq!(ulaw_encode(0), 0xFF);
        assert_eq!(ulaw_encode(i16::MAX), 0x80);
        assert_eq!(ulaw_encode(i16::MIN), 0x00);
        assert_eq!(ulaw_encode(-1), 0x7F);
        assert_eq!(ulaw_encode(8), 0xFE);
    }

    #[test]
    fn alaw_known_values() {
        assert_eq!(alaw_decode(0xD5), 8);
        assert_eq!(alaw_decode(0x55), -8);
        assert_eq!(alaw_decode(0xAA), 32256);
        assert_eq!(alaw_decode(0x2A), -32256);
        assert_eq!(alaw_encode(0), 0xD5);
        assert_eq!(alaw_encode(-1), 0x55);
        assert_eq!(alaw_encode(i16::MAX), 0xAA);
        assert_eq!(alaw_encode(i16::MIN), 0x2A);
    }

    #[test]
    fn every_code_is_a_fixed_point() {
        for b in 0..=255u8 {
            assert_eq!(alaw_encode(alaw_decode(b)), b, "A-law {b:#04x}");
            // 0x7F is μ-law's "negative zero"; it decodes to 0 = 0xFF.
            if b != 0x7F {
                assert_eq!(ulaw_encode(ulaw_decode(b)), b, "μ-law {b:#04x}");
            }
        }
    }

    #[test]
    fn decoding_is_odd_symmetric_and_monotonic() {
        for b in 0..0x80u8 {
            assert_eq!(alaw_decode(b), -alaw_decode(b | 0x80));
            assert_eq!(ulaw_decode(b), -ulaw_decode(b | 0x80));
        }
        let mut prev = i32::MIN;
        for v in (i16::MIN..=i16::MAX).step_by(7) {
            let d = i32::from(ulaw_decode(ulaw_encode(v)));
            assert!(d >= prev, "μ-law not monotonic at {v}");
            prev = d;
        }
    }

    #[test]
    fn round_trip_error_is_within_half_a_step() {
        for v in i16::MIN..=i16::MAX {
            let x = i32::from(v);
            let mag = x.abs().min(32124);
            // μ-law: step is 2^(e+3) and (mag + 132) >= 2^(e+7), so the
            // half-step error is at most (mag + 132) / 32.
            let bound_u = (mag + 132) / 32 + 1;
            let err_u = (i32::from(ulaw_decode(ulaw_encode(v))) - x.clamp(-32124, 32124)).abs();
            assert!(err_u <= bound_u, "μ-law {v}: err {err_u} > {bound_u}");
            // A-law: 16 for the two linear segments, ~1/32 of the value above.
            let bound_a = (x.abs() / 32).max(8) + 1;
            let err_a = (i32::from(alaw_decode(alaw_encode(v))) - x.clamp(-32256, 32256)).abs();
            assert!(err_a <= bound_a, "A-law {v}: err {err_a} > {bound_a}");
        }
    }

    #[test]
    fn slice_helpers_round_trip() {
        let samples: Vec<f32> = (0..400).map(|i| ((i as f32) * 0.05).sin() * 0.8).collect();
        for (enc, dec) in [
            (
                encode_ulaw as fn(&[f32]) -> Vec<u8>,
                decode_ulaw as fn(&[u8]) -> Vec<f32>,
            ),
            (encode_alaw, decode_alaw),
        ] {
            let bytes = enc(&samples);
            assert_eq!(bytes.len(), samples.len());
            let back = dec(&bytes);
            for (a, b) in samples.iter().zip(&back) {
                assert!((a - b).abs() <= a.abs() / 16.0 + 1e-3, "{a} vs {b}");
            }
        }
        assert_eq!(encode_ulaw(&[2.0, -2.0]), vec![0x80, 0x00]);
    }
}
