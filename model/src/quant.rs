//! GGML tensor types and dequantization to f32, following ggml's reference
//! (`dequantize_row_*` in ggml-quants.c) block by block.

use half::{bf16, f16};

/// A GGML tensor type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GgmlType {
    F32,
    F16,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
    Q2K,
    Q3K,
    Q4K,
    Q5K,
    Q6K,
    Iq4Nl,
    Iq4Xs,
    Bf16,
    /// A type Forge reads in headers but cannot dequantize.
    Other(u32),
}

impl GgmlType {
    pub fn from_id(id: u32) -> Self {
        match id {
            0 => Self::F32,
            1 => Self::F16,
            2 => Self::Q4_0,
            3 => Self::Q4_1,
            6 => Self::Q5_0,
            7 => Self::Q5_1,
            8 => Self::Q8_0,
            10 => Self::Q2K,
            11 => Self::Q3K,
            12 => Self::Q4K,
            13 => Self::Q5K,
            14 => Self::Q6K,
            20 => Self::Iq4Nl,
            23 => Self::Iq4Xs,
            30 => Self::Bf16,
            other => Self::Other(other),
        }
    }

    pub fn id(self) -> u32 {
        match self {
            Self::F32 => 0,
            Self::F16 => 1,
            Self::Q4_0 => 2,
            Self::Q4_1 => 3,
            Self::Q5_0 => 6,
            Self::Q5_1 => 7,
            Self::Q8_0 => 8,
            Self::Q2K => 10,
            Self::Q3K => 11,
            Self::Q4K => 12,
            Self::Q5K => 13,
            Self::Q6K => 14,
            Self::Iq4Nl => 20,
            Self::Iq4Xs => 23,
            Self::Bf16 => 30,
            Self::Other(id) => id,
        }
    }

    /// (elements per block, bytes per block).
    pub fn block(self) -> Option<(usize, usize)> {
        Some(match self {
            Self::F32 => (1, 4),
            Self::F16 | Self::Bf16 => (1, 2),
            Self::Q4_0 => (32, 18),
            Self::Q4_1 => (32, 20),
            Self::Q5_0 => (32, 22),
            Self::Q5_1 => (32, 24),
            Self::Q8_0 => (32, 34),
            Self::Q2K => (256, 84),
            Self::Q3K => (256, 110),
            Self::Q4K => (256, 144),
            Self::Q5K => (256, 176),
            Self::Q6K => (256, 210),
            Self::Iq4Nl => (32, 18),
            Self::Iq4Xs => (256, 136),
            Self::Other(_) => return None,
        })
    }

    /// Bytes of `elements` values; `None` for an unknown type or partial blocks.
    pub fn byte_size(self, elements: u64) -> Option<u64> {
        let (block, bytes) = self.block()?;
        elements
            .is_multiple_of(block as u64)
            .then(|| elements / block as u64 * bytes as u64)
    }
}

impl std::fmt::Display for GgmlType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::F32 => f.write_str("F32"),
            Self::F16 => f.write_str("F16"),
            Self::Q4_0 => f.write_str("Q4_0"),
            Self::Q4_1 => f.write_str("Q4_1"),
            Self::Q5_0 => f.write_str("Q5_0"),
            Self::Q5_1 => f.write_str("Q5_1"),
            Self::Q8_0 => f.write_str("Q8_0"),
            Self::Q2K => f.write_str("Q2_K"),
            Self::Q3K => f.write_str("Q3_K"),
            Self::Q4K => f.write_str("Q4_K"),
            Self::Q5K => f.write_str("Q5_K"),
            Self::Q6K => f.write_str("Q6_K"),
            Self::Iq4Nl => f.write_str("IQ4_NL"),
            Self::Iq4Xs => f.write_str("IQ4_XS"),
            Self::Bf16 => f.write_str("BF16"),
            Self::Other(id) => match unsupported_name(*id) {
                Some(name) => write!(f, "{name} (GGML type {id})"),
                None => write!(f, "GGML type {id}"),
            },
        }
    }
}

/// The names of GGML's types Forge reads no tensor of, as llama.cpp's
/// files list them.
fn unsupported_name(id: u32) -> Option<&'static str> {
    Some(match id {
        9 => "Q8_1",
        15 => "Q8_K",
        16 => "IQ2_XXS",
        17 => "IQ2_XS",
        18 => "IQ3_XXS",
        19 => "IQ1_S",
        21 => "IQ3_S",
        22 => "IQ2_S",
        24 => "I8",
        25 => "I16",
        26 => "I32",
        27 => "I64",
        28 => "F64",
        29 => "IQ1_M",
        34 => "TQ1_0",
        35 => "TQ2_0",
        39 => "MXFP4",
        _ => return None,
    })
}

fn half_at(bytes: &[u8], at: usize) -> f32 {
    f16::from_le_bytes([bytes[at], bytes[at + 1]]).to_f32()
}

/// `elements` values of type `kind` from `bytes`; `None` for an unsupported
/// type or a length that does not match.
pub fn dequantize(kind: GgmlType, bytes: &[u8], elements: usize) -> Option<Vec<f32>> {
    if kind.byte_size(elements as u64)? != bytes.len() as u64 {
        return None;
    }
    let (_, block_bytes) = kind.block()?;
    let mut out = Vec::with_capacity(elements);
    match kind {
        GgmlType::F32 => out.extend(
            bytes
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        ),
        GgmlType::F16 => out.extend(
            bytes
                .chunks_exact(2)
                .map(|b| f16::from_le_bytes([b[0], b[1]]).to_f32()),
        ),
        GgmlType::Bf16 => out.extend(
            bytes
                .chunks_exact(2)
                .map(|b| bf16::from_le_bytes([b[0], b[1]]).to_f32()),
        ),
        GgmlType::Q8_0 => {
            for block in bytes.chunks_exact(block_bytes) {
                let d = half_at(block, 0);
                out.extend(block[2..].iter().map(|q| f32::from(*q as i8) * d));
            }
        }
        GgmlType::Q4_0 | GgmlType::Q4_1 => {
            for block in bytes.chunks_exact(block_bytes) {
                // Low nibbles are values 0..16, high nibbles 16..32.
                let (d, offset, min, qs) = legacy_header(block, kind == GgmlType::Q4_1, 8.0);
                out.extend(qs.iter().map(|q| (f32::from(q & 0x0f) - offset) * d + min));
                out.extend(qs.iter().map(|q| (f32::from(q >> 4) - offset) * d + min));
            }
        }
        GgmlType::Q5_0 | GgmlType::Q5_1 => {
            for block in bytes.chunks_exact(block_bytes) {
                // Each value's fifth bit is bit i of a 32-bit word before
                // the nibbles.
                let (d, offset, min, rest) = legacy_header(block, kind == GgmlType::Q5_1, 16.0);
                let high = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]);
                let qs = &rest[4..];
                let value = |i: usize, nibble: u8| {
                    let q = nibble | (((high >> i) & 1) as u8) << 4;
                    (f32::from(q) - offset) * d + min
                };
                out.extend(qs.iter().enumerate().map(|(i, q)| value(i, q & 0x0f)));
                out.extend(qs.iter().enumerate().map(|(i, q)| value(i + 16, q >> 4)));
            }
        }
        GgmlType::Q2K => {
            for block in bytes.chunks_exact(block_bytes) {
                let (scales, qs) = (&block[..16], &block[16..80]);
                let (d, dmin) = (half_at(block, 80), half_at(block, 82));
                // Sixteen runs of 16 values, each with a 4-bit scale and min;
                // a byte of qs holds one 2-bit value of four runs.
                let mut scales = scales.iter();
                for qs in qs.chunks_exact(32) {
                    for shift in [0, 2, 4, 6] {
                        for run in qs.chunks_exact(16) {
                            let sc = scales.next().expect("sixteen scales");
                            let (scale, min) =
                                (d * f32::from(sc & 0x0f), dmin * f32::from(sc >> 4));
                            out.extend(
                                run.iter()
                                    .map(|q| scale * f32::from((q >> shift) & 3) - min),
                            );
                        }
                    }
                }
            }
        }
        GgmlType::Q3K => {
            for block in bytes.chunks_exact(block_bytes) {
                let (high, qs, packed) = (&block[..32], &block[32..96], &block[96..108]);
                let d = half_at(block, 108);
                // As Q2_K, with signed 6-bit scales and each value's third
                // bit in `high` (bit 4·half + pass; clear subtracts 4).
                let mut scales = scales_k3(packed).into_iter();
                for (half, qs) in qs.chunks_exact(32).enumerate() {
                    for pass in 0..4 {
                        let (shift, bit) = (2 * pass, 1u8 << (4 * half + pass));
                        for (qs, high) in qs.chunks_exact(16).zip(high.chunks_exact(16)) {
                            let scale = d * f32::from(scales.next().expect("sixteen scales"));
                            out.extend(qs.iter().zip(high).map(|(q, h)| {
                                let low = ((q >> shift) & 3) as i8;
                                scale * f32::from(low - if h & bit == 0 { 4 } else { 0 })
                            }));
                        }
                    }
                }
            }
        }
        GgmlType::Q4K => {
            for block in bytes.chunks_exact(block_bytes) {
                let (d, dmin) = (half_at(block, 0), half_at(block, 2));
                let scales = &block[4..16];
                let qs = &block[16..144];
                for (chunk, q) in qs.chunks_exact(32).enumerate() {
                    let (scale_low, min_low) = scale_min_k4(2 * chunk, scales);
                    let (scale_high, min_high) = scale_min_k4(2 * chunk + 1, scales);
                    out.extend(q.iter().map(|q| {
                        d * f32::from(scale_low) * f32::from(q & 0x0f) - dmin * f32::from(min_low)
                    }));
                    out.extend(q.iter().map(|q| {
                        d * f32::from(scale_high) * f32::from(q >> 4) - dmin * f32::from(min_high)
                    }));
                }
            }
        }
        GgmlType::Q5K => {
            for block in bytes.chunks_exact(block_bytes) {
                let (d, dmin) = (half_at(block, 0), half_at(block, 2));
                let (scales, high, qs) = (&block[4..16], &block[16..48], &block[48..176]);
                // As Q4_K, with each value's fifth bit in `high`: bit 2·chunk
                // for the low nibbles' values, the next for the high ones'.
                for (chunk, q) in qs.chunks_exact(32).enumerate() {
                    for (nibble, shift) in [(0, 0u8), (1, 4)] {
                        let (scale, min) = scale_min_k4(2 * chunk + nibble, scales);
                        let (scale, min) = (d * f32::from(scale), dmin * f32::from(min));
                        let bit = 1u8 << (2 * chunk + nibble);
                        out.extend(q.iter().zip(high).map(|(q, h)| {
                            let q = ((q >> shift) & 0x0f) + if h & bit == 0 { 0 } else { 16 };
                            scale * f32::from(q) - min
                        }));
                    }
                }
            }
        }
        GgmlType::Q6K => {
            for block in bytes.chunks_exact(block_bytes) {
                let (ql, qh, scales) = (&block[..128], &block[128..192], &block[192..208]);
                let d = half_at(block, 208);
                for half in 0..2 {
                    let (ql, qh, sc) = (&ql[64 * half..], &qh[32 * half..], &scales[8 * half..]);
                    let mut values = [0f32; 128];
                    for l in 0..32 {
                        let is = l / 16;
                        let q1 = i32::from((ql[l] & 0x0f) | ((qh[l] & 3) << 4)) - 32;
                        let q2 = i32::from((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32;
                        let q3 = i32::from((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                        let q4 = i32::from((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                        let scale = |index: usize| d * f32::from(sc[index] as i8);
                        values[l] = scale(is) * q1 as f32;
                        values[l + 32] = scale(is + 2) * q2 as f32;
                        values[l + 64] = scale(is + 4) * q3 as f32;
                        values[l + 96] = scale(is + 6) * q4 as f32;
                    }
                    out.extend_from_slice(&values);
                }
            }
        }
        GgmlType::Iq4Nl => {
            for block in bytes.chunks_exact(block_bytes) {
                let d = half_at(block, 0);
                extend_iq4(&mut out, d, &block[2..]);
            }
        }
        GgmlType::Iq4Xs => {
            for block in bytes.chunks_exact(block_bytes) {
                let d = half_at(block, 0);
                let high = u16::from_le_bytes([block[2], block[3]]);
                let (low, qs) = (&block[4..8], &block[8..136]);
                // Eight runs of 32 values, each with a 6-bit scale: its low
                // nibble in `low`, its top two bits in `high`.
                for (run, qs) in qs.chunks_exact(16).enumerate() {
                    let scale = ((low[run / 2] >> (4 * (run % 2))) & 0x0f)
                        | ((((high >> (2 * run)) & 3) as u8) << 4);
                    extend_iq4(&mut out, d * f32::from(scale as i8 - 32), qs);
                }
            }
        }
        GgmlType::Other(_) => return None,
    }
    Some(out)
}

/// The scale, the offset taken from each quant, the min added after
/// scaling, and the bytes after them, of a block of the legacy types: a
/// `_0` block is its scale alone, its quants centred on `center` (Q4_0:
/// (q − 8)·d); a `_1` block's scale is followed by a min (Q4_1: q·d + m).
fn legacy_header(block: &[u8], with_min: bool, center: f32) -> (f32, f32, f32, &[u8]) {
    let d = half_at(block, 0);
    match with_min {
        false => (d, center, 0.0, &block[2..]),
        true => (d, 0.0, half_at(block, 2), &block[4..]),
    }
}

/// The sixteen values IQ4 nibbles index: spaced as trained weights are
/// distributed, closer together near zero.
const IQ4_VALUES: [i8; 16] = [
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
];

/// The 32 values of 16 bytes of IQ4 nibbles at `scale`: low nibbles first.
fn extend_iq4(out: &mut Vec<f32>, scale: f32, qs: &[u8]) {
    let value = |nibble: u8| scale * f32::from(IQ4_VALUES[usize::from(nibble)]);
    out.extend(qs.iter().map(|q| value(q & 0x0f)));
    out.extend(qs.iter().map(|q| value(q >> 4)));
}

/// The 6-bit scale and min of sub-block `j` of a Q4_K block.
fn scale_min_k4(j: usize, q: &[u8]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

/// The sixteen 6-bit scales of a Q3_K block, packed into twelve bytes (low
/// nibbles in bytes 0..8, top two bits in bytes 8..12), less their offset 32.
fn scales_k3(packed: &[u8]) -> [i8; 16] {
    let word = |at: usize| {
        u32::from_le_bytes([packed[at], packed[at + 1], packed[at + 2], packed[at + 3]])
    };
    let (low, high, top) = (word(0), word(4), word(8));
    let (nibbles, pairs) = (0x0f0f_0f0f, 0x0303_0303);
    let words = [
        (low & nibbles) | ((top & pairs) << 4),
        (high & nibbles) | (((top >> 2) & pairs) << 4),
        ((low >> 4) & nibbles) | (((top >> 4) & pairs) << 4),
        ((high >> 4) & nibbles) | (((top >> 6) & pairs) << 4),
    ];
    let bytes: Vec<u8> = words.iter().flat_map(|word| word.to_le_bytes()).collect();
    std::array::from_fn(|at| bytes[at] as i8 - 32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(value: f32) -> [u8; 2] {
        f16::from_f32(value).to_le_bytes()
    }

    /// Expected values are worked out by hand from the block layouts.
    #[test]
    fn q8_0_scales_signed_bytes() {
        let mut block = h(0.5).to_vec();
        block.extend((0..32).map(|i| (i as i8 - 16) as u8));
        let values = dequantize(GgmlType::Q8_0, &block, 32).unwrap();
        assert_eq!(values[0], -8.0);
        assert_eq!(values[16], 0.0);
        assert_eq!(values[31], 7.5);
    }

    #[test]
    fn q4_0_and_q4_1_split_low_and_high_nibbles() {
        // Byte i holds low nibble i % 16 and high nibble 15 − i % 16.
        let qs: Vec<u8> = (0..16u8).map(|i| i | ((15 - i) << 4)).collect();
        let mut q4_0 = h(2.0).to_vec();
        q4_0.extend(&qs);
        let values = dequantize(GgmlType::Q4_0, &q4_0, 32).unwrap();
        assert_eq!(values[0], (0.0 - 8.0) * 2.0);
        assert_eq!(values[15], (15.0 - 8.0) * 2.0);
        assert_eq!(values[16], (15.0 - 8.0) * 2.0);
        assert_eq!(values[31], (0.0 - 8.0) * 2.0);
        let mut q4_1 = h(0.5).to_vec();
        q4_1.extend(h(-1.0));
        q4_1.extend(&qs);
        let values = dequantize(GgmlType::Q4_1, &q4_1, 32).unwrap();
        assert_eq!(values[3], 3.0 * 0.5 - 1.0);
        assert_eq!(values[19], 12.0 * 0.5 - 1.0);
    }

    #[test]
    fn q4_k_uses_six_bit_scales_and_mins() {
        let mut block = h(1.0).to_vec();
        block.extend(h(0.5));
        // Sub-blocks 0..4: scale j + 1, min j; sub-blocks 4..8: scale 2, min 1
        // (low nibbles in bytes 8..12, top bits of bytes 0..8 zero).
        let mut scales = [0u8; 12];
        for j in 0..4 {
            scales[j] = (j + 1) as u8;
            scales[j + 4] = j as u8;
            scales[j + 8] = 2 | (1 << 4);
        }
        block.extend(scales);
        block.extend([0x53u8; 128]); // low nibble 3, high nibble 5
        let values = dequantize(GgmlType::Q4K, &block, 256).unwrap();
        assert_eq!(values[0], 1.0 * 1.0 * 3.0 - 0.5 * 0.0); // sub-block 0
        assert_eq!(values[32], 1.0 * 2.0 * 5.0 - 0.5 * 1.0); // sub-block 1
        assert_eq!(values[64 + 32], 1.0 * 4.0 * 5.0 - 0.5 * 3.0); // sub-block 3
        assert_eq!(values[255], 1.0 * 2.0 * 5.0 - 0.5 * 1.0); // sub-block 7
    }

    #[test]
    fn q6_k_combines_low_and_high_bits() {
        let mut block = vec![0x21u8; 128]; // ql: low nibble 1, high nibble 2
        block.extend([0b1110_0100u8; 64]); // qh: 2-bit fields 0, 1, 2, 3
        block.extend((0..16).map(|i| i as u8 + 1)); // scales 1..16
        block.extend(h(0.25));
        let values = dequantize(GgmlType::Q6K, &block, 256).unwrap();
        // First half, l = 0: q1 = (1 | 0 << 4) − 32, scale index 0 → 1.
        assert_eq!(values[0], 0.25 * 1.0 * (1.0 - 32.0));
        // q2 = (1 | 1 << 4) − 32 = −15, scale index 2 → 3.
        assert_eq!(values[32], 0.25 * 3.0 * -15.0);
        // q3 = (2 | 2 << 4) − 32 = 2, scale index 4 → 5.
        assert_eq!(values[64], 0.25 * 5.0 * 2.0);
        // q4 = (2 | 3 << 4) − 32 = 18, scale index 6 → 7.
        assert_eq!(values[96], 0.25 * 7.0 * 18.0);
        // Second half uses scales 8..16: l = 16 → scale index 1 + 8 → 10.
        assert_eq!(values[128 + 16], 0.25 * 10.0 * (1.0 - 32.0));
    }

    #[test]
    fn wrong_lengths_and_types_are_refused() {
        assert!(dequantize(GgmlType::Q8_0, &[0; 33], 32).is_none());
        assert!(dequantize(GgmlType::Other(16), &[0; 66], 256).is_none());
        assert_eq!(GgmlType::from_id(14), GgmlType::Q6K);
        assert_eq!(GgmlType::Q4K.to_string(), "Q4_K");
    }
}
