//! Byte-level BPE (`tokenizer.ggml.model = "gpt2"`): each byte of the text
//! is a character of the vocabulary's alphabet, words are cut by the model
//! family's regex (`tokenizer.ggml.pre`), and the file's merges apply in
//! their order within each word.

use super::{TokenizerError, vocab};
use crate::gguf::Gguf;
use tokenizers::SplitDelimiterBehavior;
use tokenizers::Tokenizer;
use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::models::bpe::BPE;
use tokenizers::normalizers::unicode::NFC;
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};

/// The tokenizer of a byte-level GGUF whose vocabulary is `tokens`.
pub(super) fn from_gguf(gguf: &Gguf, tokens: &[String]) -> Result<Tokenizer, TokenizerError> {
    let merges = gguf
        .get_array("tokenizer.ggml.merges")?
        .iter()
        .enumerate()
        .map(|(index, merge)| {
            let merge = merge.as_str().unwrap_or_default();
            merge
                .split_once(' ')
                .map(|(left, right)| (left.to_owned(), right.to_owned()))
                .ok_or_else(|| TokenizerError::Merge {
                    index,
                    merge: merge.to_owned(),
                })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let split = WordSplit::from_gguf_name(gguf.get_str("tokenizer.ggml.pre").ok())?;
    bpe(tokens, merges, split)
}

/// A tokenizer over `tokens` with no merges: one token per byte.
pub(super) fn characters(tokens: &[String]) -> Tokenizer {
    bpe(tokens, Vec::new(), WordSplit::Smollm).expect("a vocabulary without merges is well formed")
}

/// How a model family cuts text into words before the BPE merges
/// (llama.cpp's `tokenizer.ggml.pre`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WordSplit {
    /// GPT-2's regex.
    Gpt2,
    /// SmolLM: single digits, then GPT-2's regex.
    Smollm,
    /// Qwen2: its own regex (single digits, case-insensitive contractions),
    /// after NFC normalisation.
    Qwen2,
    /// Llama 3 (`llama-bpe`): Qwen2's regex with numbers cut into runs of up
    /// to three digits, and no normalisation.
    Llama3,
}

/// The regex of Qwen2's `tokenizer.json`.
const QWEN2_REGEX: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// The regex of Llama 3's `tokenizer.json`.
const LLAMA3_REGEX: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

impl WordSplit {
    /// The split a GGUF names. A file that names none (llama.cpp then
    /// guesses, warning that quality degrades) or another family's is
    /// refused: splitting differently from the model's training gives
    /// different ids for the same text.
    fn from_gguf_name(name: Option<&str>) -> Result<Self, TokenizerError> {
        match name {
            Some("gpt-2") => Ok(Self::Gpt2),
            Some("smollm") => Ok(Self::Smollm),
            Some("qwen2") => Ok(Self::Qwen2),
            Some("llama-bpe") => Ok(Self::Llama3),
            Some(other) => Err(TokenizerError::Pretokenizer(other.to_owned())),
            None => Err(TokenizerError::NoPretokenizer),
        }
    }

    /// Whether a word found whole in the vocabulary is taken as it is,
    /// before any merge: Llama 3's tokenizer does so (`ignore_merges` in its
    /// `tokenizer.json`, and in llama.cpp), and its merges do not always
    /// reach such a word.
    fn takes_whole_words(self) -> bool {
        self == Self::Llama3
    }

    /// Sets `tokenizer`'s normaliser and pre-tokenizer for this split.
    fn install(self, tokenizer: &mut Tokenizer) -> Result<(), TokenizerError> {
        let gpt2 = || ByteLevel::new(false, true, true);
        let regex = |pattern: &str| {
            Split::new(
                SplitPattern::Regex(pattern.to_owned()),
                SplitDelimiterBehavior::Isolated,
                false,
            )
            .map_err(|err| TokenizerError::Build(err.to_string()))
        };
        // After a family's own regex, the bytes are mapped to characters alone.
        let bytes = || -> PreTokenizerWrapper { ByteLevel::new(false, false, false).into() };
        let steps: Vec<PreTokenizerWrapper> = match self {
            Self::Gpt2 => vec![gpt2().into()],
            Self::Smollm => vec![Digits::new(true).into(), gpt2().into()],
            Self::Qwen2 => {
                tokenizer.with_normalizer(Some(NFC));
                vec![regex(QWEN2_REGEX)?.into(), bytes()]
            }
            Self::Llama3 => vec![regex(LLAMA3_REGEX)?.into(), bytes()],
        };
        tokenizer.with_pre_tokenizer(Some(Sequence::new(steps)));
        Ok(())
    }
}

/// A byte-level BPE over `tokens` and `merges`, words cut as `split` says.
fn bpe(
    tokens: &[String],
    merges: Vec<(String, String)>,
    split: WordSplit,
) -> Result<Tokenizer, TokenizerError> {
    let vocab = vocab(tokens);
    let bpe = BPE::builder()
        .vocab_and_merges(vocab, merges)
        .ignore_merges(split.takes_whole_words())
        .build()
        .map_err(|err| TokenizerError::Build(err.to_string()))?;
    let mut tokenizer = Tokenizer::new(bpe);
    split.install(&mut tokenizer)?;
    tokenizer.with_decoder(Some(ByteLevelDecoder::default()));
    Ok(tokenizer)
}

/// GPT-2's byte-to-character map: printable bytes map to themselves, the
/// rest to code points from 256 on.
pub(super) fn byte_chars() -> Vec<char> {
    let printable =
        |b: u32| (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b);
    let mut extra = 0;
    (0..256u32)
        .map(|b| {
            if printable(b) {
                char::from_u32(b).expect("a byte is a code point")
            } else {
                extra += 1;
                char::from_u32(255 + extra).expect("below the surrogates")
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The words `split` cuts `text` into, as plain text.
    fn words(split: WordSplit, text: &str) -> Vec<String> {
        use tokenizers::{OffsetReferential, OffsetType, PreTokenizedString, PreTokenizer};
        let mut tokenizer = Tokenizer::new(BPE::default());
        split.install(&mut tokenizer).unwrap();
        let mut words = PreTokenizedString::from(text);
        tokenizer
            .get_pre_tokenizer()
            .unwrap()
            .pre_tokenize(&mut words)
            .unwrap();
        let bytes: std::collections::HashMap<char, u8> =
            byte_chars().into_iter().zip(0..=255).collect();
        words
            .get_splits(OffsetReferential::Original, OffsetType::Byte)
            .into_iter()
            .map(|(word, ..)| {
                String::from_utf8(word.chars().map(|ch| bytes[&ch]).collect()).unwrap()
            })
            .collect()
    }

    #[test]
    fn each_family_cuts_words_as_its_own_tokenizer_does() {
        let text = "I'm 12345 apples!\n\n  ok DON'T";
        let cases = [
            (
                WordSplit::Gpt2,
                &[
                    "I", "'m", " 12345", " apples", "!", "\n\n ", " ok", " DON", "'", "T",
                ][..],
            ),
            (
                WordSplit::Smollm,
                &[
                    "I", "'m", " ", "1", "2", "3", "4", "5", " apples", "!", "\n\n ", " ok",
                    " DON", "'", "T",
                ],
            ),
            (
                WordSplit::Qwen2,
                &[
                    "I", "'m", " ", "1", "2", "3", "4", "5", " apples", "!\n\n", " ", " ok",
                    " DON", "'T",
                ],
            ),
            (
                WordSplit::Llama3,
                &[
                    "I", "'m", " ", "123", "45", " apples", "!\n\n", " ", " ok", " DON", "'T",
                ],
            ),
        ];
        for (split, expected) in cases {
            assert_eq!(words(split, text), expected, "{split:?}");
        }
        for name in [Some("default"), Some("tekken"), None] {
            let err = WordSplit::from_gguf_name(name).unwrap_err();
            assert!(err.to_string().contains("pre-tokenizer"), "{err}");
        }
    }

    #[test]
    fn llama3_takes_a_word_its_vocabulary_holds_whole() {
        let mut tokens: Vec<String> = byte_chars().into_iter().map(String::from).collect();
        tokens.extend(["bc".into(), "abc".into()]);
        let merges = vec![("b".to_owned(), "c".to_owned())];
        let encode = |split| {
            let tokenizer = bpe(&tokens, merges.clone(), split).unwrap();
            super::super::ids(&tokenizer, "abc").unwrap()
        };
        assert_eq!(encode(WordSplit::Llama3), [257], "`abc` whole");
        assert_eq!(encode(WordSplit::Gpt2), [u32::from(b'a'), 256], "`a`, `bc`");
    }
}
