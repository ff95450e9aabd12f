//! RoPE's rotation frequencies, and Llama 3's scaling of them.
//!
//! Llama 3.1 and 3.2 were trained to read long contexts by stretching RoPE's
//! long wavelengths: a frequency whose wavelength exceeds the original
//! context divided by `low_freq_factor` is divided by `factor`, one whose
//! wavelength is under the context divided by `high_freq_factor` is kept,
//! and the band between is blended. Every position's angles depend on it,
//! so a model run without it computes other logits even for short prompts.
//!
//! Hugging Face configs state the four numbers (`rope_scaling`, `rope_type:
//! "llama3"`); llama.cpp's GGUF files store only their outcome, one divisor
//! per frequency (`rope_freqs.weight`). Forge keeps the numbers — the
//! checkpoints it writes must tell other tools the same model — and reads a
//! GGUF's divisors back into them.

use serde::{Deserialize, Serialize};

/// How a model scales RoPE's frequencies (Hugging Face's `rope_scaling`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "rope_type")]
pub enum RopeScaling {
    #[serde(rename = "llama3")]
    Llama3 {
        factor: f64,
        low_freq_factor: f64,
        high_freq_factor: f64,
        original_max_position_embeddings: usize,
    },
}

/// The divisors `rope_freqs.weight` held are not those of Llama 3's scaling
/// of any numbers.
#[derive(Debug, thiserror::Error)]
#[error("RoPE frequency divisors {0:?} (`rope_freqs.weight`) are not Llama 3's scaling")]
pub struct NotLlama3(pub Vec<f32>);

/// RoPE's unscaled frequencies for heads of width `head_dim`: one per pair
/// of dimensions, `base^(-2i/head_dim)`.
pub fn base_frequencies(base: f64, head_dim: usize) -> Vec<f64> {
    (0..head_dim / 2)
        .map(|i| base.powf(-2.0 * i as f64 / head_dim as f64))
        .collect()
}

impl RopeScaling {
    /// What each of `frequencies` is divided by.
    pub fn divisors(&self, frequencies: &[f64]) -> Vec<f64> {
        let Self::Llama3 {
            factor,
            low_freq_factor: low,
            high_freq_factor: high,
            original_max_position_embeddings: context,
        } = *self;
        frequencies
            .iter()
            .map(|frequency| {
                let wavelength = 2.0 * std::f64::consts::PI / frequency;
                // 1 where the wavelength is kept, 0 where it is stretched.
                let kept = ((context as f64 / wavelength - low) / (high - low)).clamp(0.0, 1.0);
                1.0 / ((1.0 - kept) / factor + kept)
            })
            .collect()
    }

    /// The scaled frequencies.
    pub fn apply(&self, frequencies: &[f64]) -> Vec<f64> {
        frequencies
            .iter()
            .zip(self.divisors(frequencies))
            .map(|(frequency, divisor)| frequency / divisor)
            .collect()
    }

    /// The Llama 3 scaling whose divisors of `frequencies` are `divisors`.
    ///
    /// The divisors fix `factor` (the largest) and, through the blended band,
    /// two ratios of the other three numbers; `low_freq_factor` is taken as
    /// 1, as in every Llama 3 release, which fixes the rest. Two blended
    /// frequencies are needed to read the ratios, and the numbers found must
    /// give back every divisor.
    pub fn fit(frequencies: &[f64], divisors: &[f32]) -> Result<Self, NotLlama3> {
        let refuse = || NotLlama3(divisors.to_vec());
        let factor = divisors.iter().copied().fold(f32::NAN, f32::max) as f64;
        if divisors.len() != frequencies.len() || !factor.is_finite() || factor <= 1.0 {
            return Err(refuse());
        }
        // In the blended band, `kept = context/(high-low) · 1/wavelength -
        // low/(high-low)`: a line through the band's points.
        let band: Vec<(f64, f64)> = frequencies
            .iter()
            .zip(divisors)
            .filter(|(_, divisor)| {
                let divisor = f64::from(**divisor);
                divisor > 1.0 + 1e-4 && divisor < factor * (1.0 - 1e-4)
            })
            .map(|(frequency, divisor)| {
                let kept = (1.0 / f64::from(*divisor) - 1.0 / factor) / (1.0 - 1.0 / factor);
                (frequency / (2.0 * std::f64::consts::PI), kept)
            })
            .collect();
        let (Some(&(x0, y0)), Some(&(x1, y1))) = (band.first(), band.last()) else {
            return Err(refuse());
        };
        if band.len() < 2 || (x1 - x0).abs() < f64::EPSILON * x0.abs() {
            return Err(refuse());
        }
        let slope = (y1 - y0) / (x1 - x0);
        let offset = slope * x0 - y0;
        if !slope.is_finite() || slope <= 0.0 || offset <= 0.0 {
            return Err(refuse());
        }
        let width = 1.0 / offset;
        let scaling = Self::Llama3 {
            factor,
            low_freq_factor: 1.0,
            high_freq_factor: 1.0 + width,
            original_max_position_embeddings: (slope * width).round() as usize,
        };
        let close = scaling
            .divisors(frequencies)
            .iter()
            .zip(divisors)
            .all(|(found, held)| (found - f64::from(*held)).abs() <= 1e-4 * found);
        close.then_some(scaling).ok_or_else(refuse)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Llama 3.2 1B's scaling.
    const LLAMA_3_2: RopeScaling = RopeScaling::Llama3 {
        factor: 32.0,
        low_freq_factor: 1.0,
        high_freq_factor: 4.0,
        original_max_position_embeddings: 8192,
    };

    #[test]
    fn long_wavelengths_are_stretched_and_short_ones_kept() {
        let frequencies = base_frequencies(500_000.0, 64);
        let divisors = LLAMA_3_2.divisors(&frequencies);
        assert_eq!(divisors[0], 1.0, "the shortest wavelength is kept");
        assert_eq!(divisors[31], 32.0, "the longest is stretched by the factor");
        assert!(divisors.windows(2).all(|pair| pair[0] <= pair[1]));
        let blended = divisors.iter().filter(|d| **d > 1.0 && **d < 32.0);
        assert_eq!(blended.count(), 3);
    }

    #[test]
    fn a_ggufs_divisors_give_back_the_numbers() {
        for (base, head_dim, scaling) in [
            (500_000.0, 64, LLAMA_3_2),
            (
                500_000.0,
                128,
                RopeScaling::Llama3 {
                    factor: 8.0,
                    low_freq_factor: 1.0,
                    high_freq_factor: 4.0,
                    original_max_position_embeddings: 8192,
                },
            ),
        ] {
            let frequencies = base_frequencies(base, head_dim);
            let stored: Vec<f32> = scaling
                .divisors(&frequencies)
                .into_iter()
                .map(|d| d as f32)
                .collect();
            let RopeScaling::Llama3 {
                factor,
                low_freq_factor,
                high_freq_factor,
                original_max_position_embeddings,
            } = RopeScaling::fit(&frequencies, &stored).unwrap();
            let RopeScaling::Llama3 {
                factor: f,
                high_freq_factor: h,
                ..
            } = scaling;
            assert_eq!((factor, low_freq_factor), (f, 1.0));
            assert!((high_freq_factor - h).abs() < 1e-3, "{high_freq_factor}");
            assert_eq!(original_max_position_embeddings, 8192);
        }
    }

    #[test]
    fn divisors_of_another_scaling_are_refused() {
        let frequencies = base_frequencies(500_000.0, 64);
        let mut stored: Vec<f32> = LLAMA_3_2
            .divisors(&frequencies)
            .into_iter()
            .map(|d| d as f32)
            .collect();
        stored[10] = 2.0;
        let err = RopeScaling::fit(&frequencies, &stored).unwrap_err();
        assert!(err.to_string().contains("not Llama 3's scaling"), "{err}");
        let unscaled = vec![1.0; frequencies.len()];
        assert!(RopeScaling::fit(&frequencies, &unscaled).is_err());
    }
}
