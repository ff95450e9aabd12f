//! SentencePiece BPE (`tokenizer.ggml.model = "llama"`: Llama 2, Mistral,
//! TinyLlama). Spaces are written `▁` and one is put before the text; then,
//! from single characters, the adjacent pair whose joined piece scores
//! highest is merged until none is in the vocabulary, and a character the
//! vocabulary lacks becomes its UTF-8 bytes' `<0xNN>` tokens.
//!
//! The file holds the pieces' scores, not merges: a merge is derived for
//! each way of cutting a piece into two others, ranked by the piece's score,
//! which makes the `tokenizers` crate's BPE take the same steps.

use super::{NORMAL, TokenizerError, UNKNOWN, per_token, vocab};
use crate::gguf::Gguf;
use std::collections::HashMap;
use tokenizers::Tokenizer;
use tokenizers::decoders::byte_fallback::ByteFallback;
use tokenizers::decoders::fuse::Fuse;
use tokenizers::decoders::sequence::Sequence as Decoders;
use tokenizers::decoders::strip::Strip;
use tokenizers::models::bpe::BPE;
use tokenizers::normalizers::prepend::Prepend;
use tokenizers::normalizers::replace::Replace;
use tokenizers::normalizers::utils::Sequence as Normalizers;

/// How SentencePiece writes a space.
const SPACE: &str = "\u{2581}";

/// The tokenizer of a SentencePiece GGUF whose vocabulary is `tokens`, of `types`.
pub(super) fn from_gguf(
    gguf: &Gguf,
    tokens: &[String],
    types: &[u64],
) -> Result<Tokenizer, TokenizerError> {
    const SCORES: &str = "tokenizer.ggml.scores";
    let scores: Vec<f64> = per_token(SCORES, gguf.get_array(SCORES)?, tokens.len())?
        .iter()
        .map(|score| score.as_f64().unwrap_or(0.0))
        .collect();
    // llama.cpp's default: the text is prefixed with a space unless the
    // file says otherwise.
    let space_prefix = unless_false(gguf, "tokenizer.ggml.add_space_prefix");
    // The unknown token is typed so, or named by id.
    let unknown = types.iter().position(|kind| *kind == UNKNOWN).or_else(|| {
        let id = gguf.get_u64("tokenizer.ggml.unknown_token_id").ok()?;
        usize::try_from(id).ok().filter(|&id| id < tokens.len())
    });
    bpe(tokens, &scores, types, unknown, space_prefix)
}

/// Whether the flag `key` is on: on unless the file sets it false.
fn unless_false(gguf: &Gguf, key: &str) -> bool {
    super::flag(gguf, key).unwrap_or(true)
}

/// A BPE over `tokens` whose merges follow `scores`, a character neither
/// they nor the byte pieces hold read as the `unknown` token, the text
/// prefixed with a space if `space_prefix`.
fn bpe(
    tokens: &[String],
    scores: &[f64],
    types: &[u64],
    unknown: Option<usize>,
    space_prefix: bool,
) -> Result<Tokenizer, TokenizerError> {
    let vocab = vocab(tokens);
    let byte_fallback = vocab.contains_key("<0x00>");
    let mut builder = BPE::builder()
        .vocab_and_merges(vocab, merges(tokens, scores, types))
        .byte_fallback(byte_fallback);
    if let Some(unknown) = unknown {
        builder = builder.unk_token(tokens[unknown].clone()).fuse_unk(true);
    }
    let model = builder
        .build()
        .map_err(|err| TokenizerError::Build(err.to_string()))?;
    let mut tokenizer = Tokenizer::new(model);
    let build = |err: tokenizers::Error| TokenizerError::Build(err.to_string());
    let spaces = Replace::new(" ", SPACE).map_err(build)?;
    let mut normalizers = Vec::new();
    if space_prefix {
        normalizers.push(Prepend::new(SPACE.to_owned()).into());
    }
    normalizers.push(spaces.into());
    tokenizer.with_normalizer(Some(Normalizers::new(normalizers)));
    let mut decoders = vec![
        Replace::new(SPACE, " ").map_err(build)?.into(),
        ByteFallback::new().into(),
        Fuse::new().into(),
    ];
    if space_prefix {
        decoders.push(Strip::new(' ', 1, 0).into());
    }
    tokenizer.with_decoder(Some(Decoders::new(decoders)));
    Ok(tokenizer)
}

/// The merges that rebuild each normal piece from two others, the pieces
/// of higher score first and, within a piece, by the halves' ids.
fn merges(tokens: &[String], scores: &[f64], types: &[u64]) -> Vec<(String, String)> {
    let normal: HashMap<&str, usize> = tokens
        .iter()
        .zip(types)
        .enumerate()
        .filter(|(_, (_, kind))| **kind == NORMAL)
        .map(|(id, (token, _))| (token.as_str(), id))
        .collect();
    let mut ranked: Vec<(f64, usize, usize, usize)> = Vec::new();
    for (piece, &id) in &normal {
        for (cut, _) in piece.char_indices().skip(1) {
            let (left, right) = piece.split_at(cut);
            if let (Some(&left), Some(&right)) = (normal.get(left), normal.get(right)) {
                ranked.push((scores[id], id, left, right));
            }
        }
    }
    ranked.sort_by(|a, b| {
        b.0.total_cmp(&a.0)
            .then((a.1, a.2, a.3).cmp(&(b.1, b.2, b.3)))
    });
    ranked
        .into_iter()
        .map(|(_, _, left, right)| (tokens[left].clone(), tokens[right].clone()))
        .collect()
}
