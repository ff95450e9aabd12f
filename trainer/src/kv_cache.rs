//! The key/value cache of decoding.

use burn::tensor::Tensor;
use burn::tensor::backend::Backend;
use std::ops::Range;

/// Keys and values of the positions a model has read, per layer, in buffers
/// `[batch, kv_heads, capacity, head_dim]` with room to spare: each pass
/// writes its positions in place, where concatenating would copy the whole
/// cache, in every layer, for every sampled token — at batch 256 that copy
/// moves more memory than the attention reading the cache does.
pub struct KvCache<B: Backend> {
    /// Keys and values of each layer; `None` before the first pass.
    layers: Vec<Option<[Tensor<B, 4>; 2]>>,
    /// Positions read so far.
    len: usize,
    /// Positions the buffers are allocated for when they are (re)allocated.
    reserved: usize,
}

impl<B: Backend> KvCache<B> {
    pub(crate) fn new(layers: usize) -> Self {
        Self {
            layers: vec![None; layers],
            len: 0,
            reserved: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Makes room for `positions` in all when the buffers are next
    /// allocated, so that decoding up to there never regrows them (beyond
    /// that, they double).
    pub fn reserve(&mut self, positions: usize) {
        self.reserved = self.reserved.max(positions);
    }

    /// Starts a pass over `n` more positions; returns the first one's index.
    pub(crate) fn advance(&mut self, n: usize) -> usize {
        let start = self.len;
        self.len += n;
        start
    }

    /// Writes `layer`'s keys and values `[batch, kv_heads, n, head_dim]` of
    /// the positions from `start` (as [`Self::advance`] returned it) and
    /// returns those of every position so far, `[batch, kv_heads, start + n,
    /// head_dim]`.
    pub(crate) fn store(
        &mut self,
        layer: usize,
        start: usize,
        keys: Tensor<B, 4>,
        values: Tensor<B, 4>,
    ) -> (Tensor<B, 4>, Tensor<B, 4>) {
        let [batch, heads, n, width] = keys.dims();
        let end = start + n;
        let positions = |range: Range<usize>| [0..batch, 0..heads, range, 0..width];
        let [key_buffer, value_buffer] = match self.layers[layer].take() {
            Some(buffers) if buffers[0].dims()[2] >= end => buffers,
            old => {
                let doubled = old.as_ref().map_or(0, |[buffer, _]| 2 * buffer.dims()[2]);
                let capacity = end.max(doubled).max(self.reserved);
                let device = keys.device();
                let fresh = || Tensor::zeros([batch, heads, capacity, width], &device);
                match old {
                    // What was read so far moves into the larger buffers.
                    Some(old) => old.map(|buffer| {
                        fresh().slice_assign(positions(0..start), buffer.slice(positions(0..start)))
                    }),
                    None => [fresh(), fresh()],
                }
            }
        };
        // Each buffer is this cache's alone here, so backends write the new
        // positions into it rather than into a copy.
        let keys = key_buffer.slice_assign(positions(start..end), keys);
        let values = value_buffer.slice_assign(positions(start..end), values);
        let read = |buffer: &Tensor<B, 4>| buffer.clone().slice(positions(0..end));
        let filled = (read(&keys), read(&values));
        self.layers[layer] = Some([keys, values]);
        filled
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::NdArray;
    use burn::tensor::TensorData;

    fn positions(from: usize, n: usize) -> Tensor<NdArray, 4> {
        let values: Vec<f32> = (from..from + n)
            .flat_map(|at| [at as f32, -(at as f32)])
            .collect();
        Tensor::from_data(TensorData::new(values, [1, 1, n, 2]), &Default::default())
    }

    #[test]
    fn passes_append_in_order_across_regrowth() {
        let mut cache = KvCache::<NdArray>::new(2);
        cache.reserve(4);
        let mut read = 0;
        for n in [3, 1, 1, 2, 5] {
            let start = cache.advance(n);
            assert_eq!(start, read);
            for layer in 0..2 {
                let (keys, values) =
                    cache.store(layer, start, positions(start, n), positions(start, n));
                assert_eq!(keys.into_data(), positions(0, start + n).into_data());
                assert_eq!(values.dims(), [1, 1, start + n, 2]);
            }
            read += n;
        }
        assert_eq!(cache.len(), 12);
    }
}
