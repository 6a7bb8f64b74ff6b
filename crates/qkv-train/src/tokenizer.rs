//! Character-level and byte-level BPE tokenizers, trained on the training split and saved with
//! every run.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use tokenizers::models::bpe::{BPE, BpeTrainerBuilder};
use tokenizers::normalizers::NormalizerWrapper;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::{DecoderWrapper, PostProcessorWrapper, PreTokenizerWrapper, TokenizerBuilder};

use crate::corpus::DataError;

/// Which tokenizer to train: `char` or `bpe:N` (N = vocabulary size).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TokenizerKind {
    Char,
    Bpe { vocab_size: usize },
}

impl fmt::Display for TokenizerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TokenizerKind::Char => f.write_str("char"),
            TokenizerKind::Bpe { vocab_size } => write!(f, "bpe:{vocab_size}"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown tokenizer '{0}': use char, or bpe:N with a vocabulary size N ≥ 257, e.g. bpe:512")]
pub struct UnknownTokenizer(pub String);

impl FromStr for TokenizerKind {
    type Err = UnknownTokenizer;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || UnknownTokenizer(s.to_string());
        match s.trim() {
            "char" => Ok(TokenizerKind::Char),
            other => {
                let n = other.strip_prefix("bpe:").ok_or_else(bad)?.parse::<usize>().map_err(|_| bad())?;
                if n < 257 {
                    return Err(bad());
                }
                Ok(TokenizerKind::Bpe { vocab_size: n })
            }
        }
    }
}

/// A trained tokenizer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Tokenizer {
    /// One token per distinct character of the training text, in sorted order.
    Char { chars: Vec<char> },
    /// Byte-level BPE: every UTF-8 text encodes, nothing is unknown.
    Bpe { tokenizer: Box<tokenizers::Tokenizer> },
}

impl Tokenizer {
    pub fn train(kind: TokenizerKind, text: &str) -> Result<Self, DataError> {
        match kind {
            TokenizerKind::Char => {
                let mut chars: Vec<char> = text.chars().collect();
                chars.sort_unstable();
                chars.dedup();
                Ok(Tokenizer::Char { chars })
            }
            TokenizerKind::Bpe { vocab_size } => train_bpe(vocab_size, text),
        }
    }

    pub fn kind(&self) -> TokenizerKind {
        match self {
            Tokenizer::Char { .. } => TokenizerKind::Char,
            Tokenizer::Bpe { tokenizer } => TokenizerKind::Bpe { vocab_size: tokenizer.get_vocab_size(true) },
        }
    }

    pub fn vocab_size(&self) -> usize {
        match self {
            Tokenizer::Char { chars } => chars.len(),
            Tokenizer::Bpe { tokenizer } => tokenizer.get_vocab_size(true),
        }
    }

    pub fn encode(&self, text: &str) -> Result<Vec<u32>, DataError> {
        match self {
            Tokenizer::Char { chars } => text
                .chars()
                .map(|c| {
                    chars.binary_search(&c).map(|i| i as u32).map_err(|_| {
                        DataError::Tokenizer(format!(
                            "the character {c:?} is not in this character-level vocabulary (it never \
                             occurs in the training text): remove it, or use a BPE tokenizer"
                        ))
                    })
                })
                .collect(),
            Tokenizer::Bpe { tokenizer } => tokenizer
                .encode(text, false)
                .map(|encoding| encoding.get_ids().to_vec())
                .map_err(|e| DataError::Tokenizer(format!("BPE encoding failed: {e}"))),
        }
    }

    /// Text for token ids; ids outside the vocabulary are skipped.
    pub fn decode(&self, ids: &[u32]) -> String {
        match self {
            Tokenizer::Char { chars } => ids.iter().filter_map(|&i| chars.get(i as usize)).collect(),
            Tokenizer::Bpe { tokenizer } => tokenizer.decode(ids, false).unwrap_or_default(),
        }
    }
}

fn train_bpe(vocab_size: usize, text: &str) -> Result<Tokenizer, DataError> {
    let failed = |e: Box<dyn std::error::Error + Send + Sync>| DataError::Tokenizer(format!("BPE training failed: {e}"));
    // No prefix space, so that decoding gives back exactly the text that was encoded.
    let byte_level = ByteLevel::new(false, true, true);
    let mut trainer = BpeTrainerBuilder::new()
        .vocab_size(vocab_size)
        .min_frequency(2)
        .show_progress(false)
        .initial_alphabet(ByteLevel::alphabet().into_iter().collect())
        .build();
    let mut builder = TokenizerBuilder::<BPE, NormalizerWrapper, PreTokenizerWrapper, PostProcessorWrapper, DecoderWrapper>::new()
        .with_model(BPE::default())
        .with_normalizer(None)
        .with_pre_tokenizer(Some(byte_level.into()))
        .with_post_processor(Some(byte_level.into()))
        .with_decoder(Some(byte_level.into()))
        .build()
        .map_err(failed)?;
    // Lines keep their newline so that the merges learn line structure too.
    builder.train(&mut trainer, text.split_inclusive('\n')).map_err(failed)?;
    Ok(Tokenizer::Bpe { tokenizer: Box::new(builder.into()) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn char_tokenizer_round_trips_and_names_unknown_characters() {
        let t = Tokenizer::train(TokenizerKind::Char, "hello world").unwrap();
        assert_eq!(t.vocab_size(), 8);
        let ids = t.encode("hold").unwrap();
        assert_eq!(t.decode(&ids), "hold");
        let err = t.encode("hz").unwrap_err().to_string();
        assert!(err.contains("'z'"), "{err}");
    }

    #[test]
    fn bpe_learns_merges_and_round_trips_any_text() {
        let text = crate::corpus::SHAKESPEARE[..200_000].to_string();
        let t = Tokenizer::train(TokenizerKind::Bpe { vocab_size: 400 }, &text).unwrap();
        assert_eq!(t.vocab_size(), 400);
        let sample = "To be, or not to be: that is the question.\nÉtude ∑";
        let ids = t.encode(sample).unwrap();
        assert!(ids.len() < sample.len(), "merges shorten the text");
        assert_eq!(t.decode(&ids), sample);
    }

    #[test]
    fn tokenizer_survives_serde() {
        for kind in [TokenizerKind::Char, TokenizerKind::Bpe { vocab_size: 300 }] {
            let t = Tokenizer::train(kind, &crate::corpus::SHAKESPEARE[..50_000]).unwrap();
            let json = serde_json::to_string(&t).unwrap();
            let back: Tokenizer = serde_json::from_str(&json).unwrap();
            assert_eq!(back.encode("Romeo").unwrap(), t.encode("Romeo").unwrap());
        }
    }

    #[test]
    fn kinds_parse_and_bad_ones_explain() {
        assert_eq!("char".parse::<TokenizerKind>().unwrap(), TokenizerKind::Char);
        assert_eq!("bpe:512".parse::<TokenizerKind>().unwrap(), TokenizerKind::Bpe { vocab_size: 512 });
        for bad in ["bpe", "bpe:x", "bpe:10", "word"] {
            assert!(bad.parse::<TokenizerKind>().unwrap_err().to_string().contains("bpe:N"), "{bad}");
        }
    }
}
