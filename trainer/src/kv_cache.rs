//! The key/value cache of decoding.

use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor, TensorData};
use std::ops::Range;

/// What one sequence has read: its ids, and per layer their keys and values
/// `[1, kv_heads, ids, head_dim]`. Kept from one turn of a conversation to
/// the next, it spares the next turn's prompt pass every position the two
/// prompts share — in a multi-turn episode, all but the newest messages.
/// The keys and values are those of the model (weights and precision) that
/// read the ids: a prefix is only ever continued by that model.
#[derive(Clone)]
pub struct Prefix<B: Backend> {
    ids: Vec<u32>,
    layers: Vec<[Tensor<B, 4>; 2]>,
}

impl<B: Backend> Default for Prefix<B> {
    fn default() -> Self {
        Self {
            ids: Vec::new(),
            layers: Vec::new(),
        }
    }
}

impl<B: Backend> Prefix<B> {
    /// The ids read.
    pub fn ids(&self) -> &[u32] {
        &self.ids
    }

    /// How many leading ids of `prompt` this prefix has read.
    pub fn shared_with(&self, prompt: &[u32]) -> usize {
        shared_len(&self.ids, prompt)
    }

    /// What this prefix read of its first `n` ids (all of it when it read fewer).
    pub fn truncated(&self, n: usize) -> Self {
        if n >= self.ids.len() {
            return self.clone();
        }
        let layers = self
            .layers
            .iter()
            .map(|parts| {
                parts.clone().map(|part| {
                    let [_, heads, _, width] = part.dims();
                    part.slice([0..1, 0..heads, 0..n, 0..width])
                })
            })
            .collect();
        Self {
            ids: self.ids[..n].to_vec(),
            layers,
        }
    }
}

/// The first prompts of the latest conversations, read, for new ones that
/// begin alike: the tasks of an environment share their system prompt (its
/// tool schemas run to a thousand tokens and more), the trials of a task
/// their whole first prompt. A batch reads each prompt its rows share once
/// ([`crate::Llama::continue_batch`]); the pool carries what was read over
/// to the batches after it — to the next episode, when episodes are played
/// one at a time as on the CPU. Like a [`Prefix`], it holds one model's
/// keys and values.
pub struct PrefixPool<B: Backend> {
    /// Least recently used first; none holds the ids of another entirely.
    prefixes: Vec<Prefix<B>>,
    capacity: usize,
}

impl<B: Backend> PrefixPool<B> {
    /// A pool of at most `capacity` prefixes (none when it is 0).
    pub fn new(capacity: usize) -> Self {
        Self {
            prefixes: Vec::new(),
            capacity,
        }
    }

    /// Holds at most `capacity` prefixes from now on, dropping the least
    /// recently used beyond that.
    pub fn set_capacity(&mut self, capacity: usize) {
        self.capacity = capacity;
        let excess = self.prefixes.len().saturating_sub(capacity);
        self.prefixes.drain(..excess);
    }

    /// The pooled prefix that has read the most leading ids of `prompt` (the
    /// latest used of equals), or an empty one when none has read any.
    pub fn longest(&mut self, prompt: &[u32]) -> Prefix<B> {
        let best = self
            .prefixes
            .iter()
            .enumerate()
            .map(|(at, prefix)| (prefix.shared_with(prompt), at))
            .max();
        match best {
            Some((shared, at)) if shared > 0 => {
                let prefix = self.prefixes.remove(at);
                self.prefixes.push(prefix.clone());
                prefix
            }
            _ => Prefix::default(),
        }
    }

    /// Pools `prefix`, unless a pooled one has read all its ids (which is
    /// used anew instead); pooled prefixes whose ids it has all read go.
    pub fn keep(&mut self, prefix: Prefix<B>) {
        if prefix.ids.is_empty() || self.capacity == 0 {
            return;
        }
        let covers = |a: &Prefix<B>, b: &Prefix<B>| a.shared_with(&b.ids) == b.ids.len();
        if let Some(at) = self
            .prefixes
            .iter()
            .position(|pooled| covers(pooled, &prefix))
        {
            let pooled = self.prefixes.remove(at);
            self.prefixes.push(pooled);
            return;
        }
        self.prefixes.retain(|pooled| !covers(&prefix, pooled));
        self.prefixes.push(prefix);
        self.set_capacity(self.capacity);
    }
}

/// How many leading ids `a` and `b` share.
pub(crate) fn shared_len(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(a, b)| a == b).count()
}

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

    /// A cache of `start` positions for a batch whose row r holds the first
    /// `reused[r]` positions of `prefixes[r]` right-aligned at `start` (its
    /// columns before them are left padding, which no real position
    /// attends to), with room for `reserve` positions in all.
    pub(crate) fn with_prefixes(
        layers: usize,
        prefixes: &[Prefix<B>],
        reused: &[usize],
        start: usize,
        reserve: usize,
    ) -> Self {
        let mut cache = Self::new(layers);
        cache.reserve(reserve);
        let Some(model) = reused
            .iter()
            .position(|&reused| reused > 0)
            .map(|row| &prefixes[row])
        else {
            return cache;
        };
        let rows = prefixes.len();
        cache.len = start;
        let capacity = start.max(cache.reserved);
        for (layer, slot) in cache.layers.iter_mut().enumerate() {
            let [_, heads, _, width] = model.layers[layer][0].dims();
            let device = model.layers[layer][0].device();
            *slot = Some([0, 1].map(|part| {
                let mut buffer = Tensor::zeros([rows, heads, capacity, width], &device);
                for (row, (prefix, &reused)) in prefixes.iter().zip(reused).enumerate() {
                    if reused > 0 {
                        let read = prefix.layers[layer][part].clone().slice([
                            0..1,
                            0..heads,
                            0..reused,
                            0..width,
                        ]);
                        buffer = buffer.slice_assign(
                            [row..row + 1, 0..heads, start - reused..start, 0..width],
                            read,
                        );
                    }
                }
                buffer
            }));
        }
        cache
    }

    /// What `row` has read at `columns`: the positions of `ids`.
    pub(crate) fn prefix(&self, row: usize, columns: Range<usize>, ids: Vec<u32>) -> Prefix<B> {
        assert_eq!(columns.len(), ids.len(), "an id per column");
        assert!(columns.end <= self.len, "columns past what was read");
        if ids.is_empty() {
            return Prefix::default();
        }
        let device = self.layers[0].as_ref().expect("a layer read")[0].device();
        let at: Vec<i64> = columns.map(|column| column as i64).collect();
        let at = Tensor::<B, 1, Int>::from_data(TensorData::new(at, [ids.len()]), &device);
        let layers = self
            .layers
            .iter()
            .map(|buffers| {
                let buffers = buffers.as_ref().expect("every layer has been read");
                // Gathered into buffers of their own: a GPU backend's slice
                // may be a view that would keep the whole batch's cache alive.
                buffers.clone().map(|buffer| {
                    let [_, heads, _, width] = buffer.dims();
                    buffer
                        .slice([row..row + 1, 0..heads, 0..self.len, 0..width])
                        .select(2, at.clone())
                })
            })
            .collect();
        Prefix { ids, layers }
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

    fn read(ids: &[u32]) -> Prefix<NdArray> {
        Prefix {
            ids: ids.to_vec(),
            layers: vec![[positions(0, ids.len()), positions(0, ids.len())]],
        }
    }

    fn pooled(pool: &PrefixPool<NdArray>) -> Vec<Vec<u32>> {
        pool.prefixes
            .iter()
            .map(|prefix| prefix.ids.clone())
            .collect()
    }

    #[test]
    fn a_truncated_prefix_keeps_its_first_positions() {
        let prefix = read(&[4, 5, 6, 7]);
        let head = prefix.truncated(2);
        assert_eq!(head.ids(), [4, 5]);
        assert_eq!(
            head.layers[0][1].clone().into_data(),
            positions(0, 2).into_data()
        );
        assert_eq!(prefix.truncated(9).ids(), prefix.ids());
    }

    #[test]
    fn the_pool_serves_the_longest_shared_prefix_and_keeps_the_latest() {
        let mut pool = PrefixPool::new(2);
        assert!(pool.longest(&[1, 2]).ids().is_empty(), "an empty pool");
        pool.keep(read(&[1, 2, 3, 4]));
        pool.keep(read(&[1, 2, 9]));
        assert_eq!(pool.longest(&[1, 2, 3, 8]).ids(), [1, 2, 3, 4]);
        assert_eq!(pool.longest(&[1, 2, 9, 9]).ids(), [1, 2, 9]);
        assert!(pool.longest(&[7, 1, 2]).ids().is_empty(), "nothing shared");
        // Serving made [1, 2, 9] the latest used: a third prefix evicts the other.
        pool.keep(read(&[5, 6]));
        assert_eq!(pooled(&pool), [vec![1, 2, 9], vec![5, 6]]);
        // Equal shares go to the latest used.
        pool.keep(read(&[1, 2, 8]));
        pool.keep(read(&[1, 2, 7]));
        assert_eq!(pool.longest(&[1, 2]).ids(), [1, 2, 7]);
        assert_eq!(pool.longest(&[1, 2, 8]).ids(), [1, 2, 8]);
        assert_eq!(pool.longest(&[1, 2]).ids(), [1, 2, 8]);
    }

    #[test]
    fn the_pool_holds_no_prefix_another_contains() {
        let mut pool = PrefixPool::new(3);
        pool.keep(read(&[1, 2]));
        pool.keep(read(&[3]));
        // A longer read of the same ids replaces the shorter one…
        pool.keep(read(&[1, 2, 3]));
        assert_eq!(pooled(&pool), [vec![3], vec![1, 2, 3]]);
        // …and one already contained only counts as a use.
        pool.keep(read(&[3]));
        pool.keep(read(&[1, 2]));
        assert_eq!(pooled(&pool), [vec![3], vec![1, 2, 3]]);
        pool.set_capacity(1);
        assert_eq!(pooled(&pool), [vec![1, 2, 3]]);
        let mut none = PrefixPool::new(0);
        none.keep(read(&[1]));
        assert!(pooled(&none).is_empty());
    }
}
