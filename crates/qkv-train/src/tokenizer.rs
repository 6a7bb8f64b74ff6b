//! Tokenizers: character-level and byte-level BPE ones trained on the training split, any Hugging
//! Face `tokenizer.json` (GPT-2's, say), or none for data that comes tokenised; saved with every
//! run.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tokenizers::models::bpe::{BPE, BpeTrainerBuilder};
use tokenizers::normalizers::NormalizerWrapper;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::{DecoderWrapper, PostProcessorWrapper, PreTokenizerWrapper, TokenizerBuilder};

use crate::Cause;
use crate::corpus::DataError;

/// Which tokenizer to use: `char` or `bpe:N` (N = vocabulary size), trained on the text; or the
/// path of a Hugging Face `tokenizer.json`, loaded as it is.
///
/// A nanoGPT token file is tokenised already: with `char` (the default) its ids are used as they
/// are ([`Tokenizer::Ids`]); a `tokenizer.json` names what they mean, for prompts and samples.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum TokenizerKind {
    Char,
    Bpe { vocab_size: usize },
    File(String),
}

impl fmt::Display for TokenizerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TokenizerKind::Char => f.write_str("char"),
            TokenizerKind::Bpe { vocab_size } => write!(f, "bpe:{vocab_size}"),
            TokenizerKind::File(path) => f.write_str(path),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown tokenizer '{0}': use char, bpe:N with a vocabulary size N ≥ 257 (e.g. bpe:512), or the \
     path of a Hugging Face tokenizer.json"
)]
pub struct UnknownTokenizer(pub String);

impl FromStr for TokenizerKind {
    type Err = UnknownTokenizer;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || UnknownTokenizer(s.to_string());
        match s.trim() {
            "char" => Ok(TokenizerKind::Char),
            path if path.ends_with(".json") => Ok(TokenizerKind::File(path.to_string())),
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

/// A tokenizer ready to use.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Tokenizer {
    /// One token per distinct character of the training text, in sorted order.
    Char { chars: Vec<char> },
    /// Byte-level BPE: every UTF-8 text encodes, nothing is unknown.
    Bpe { tokenizer: Box<tokenizers::Tokenizer> },
    /// A Hugging Face `tokenizer.json`, as loaded from `path`.
    Loaded { path: String, tokenizer: Box<tokenizers::Tokenizer> },
    /// No tokenizer: the data came as token ids, and prompts and samples are written as ids.
    Ids { vocab_size: usize },
}

impl Tokenizer {
    /// The tokenizer of `kind` for `text`: trained on it, or loaded from its file.
    pub fn train(kind: &TokenizerKind, text: &str) -> Result<Self, DataError> {
        match kind {
            TokenizerKind::Char => {
                let mut chars: Vec<char> = text.chars().collect();
                chars.sort_unstable();
                chars.dedup();
                Ok(Tokenizer::Char { chars })
            }
            TokenizerKind::Bpe { vocab_size } => train_bpe(*vocab_size, text),
            TokenizerKind::File(path) => Self::load(path),
        }
    }

    /// A Hugging Face `tokenizer.json`.
    pub fn load(path: &str) -> Result<Self, DataError> {
        let bytes = std::fs::read(path).map_err(|e| DataError::Io { name: path.to_string(), source: Arc::new(e) })?;
        Self::from_json(path, &bytes)
    }

    /// A Hugging Face `tokenizer.json`'s bytes, read from `path`.
    pub fn from_json(path: &str, bytes: &[u8]) -> Result<Self, DataError> {
        let not_one = |source: Cause| DataError::NotATokenizer { path: path.to_string(), source };
        // JSON first: tokenizers 0.22 panics on some malformed files (a broken "decoder" value
        // reaches an `expect` in its decoder's deserializer; found by fuzz/tokenizer_json)
        // instead of saying so. Once the text is JSON, that path cannot fail.
        serde_json::from_slice::<serde::de::IgnoredAny>(bytes).map_err(|e| not_one(Arc::new(e)))?;
        let tokenizer = tokenizers::Tokenizer::from_bytes(bytes).map_err(|e| not_one(Cause::from(e)))?;
        Ok(Tokenizer::Loaded { path: path.to_string(), tokenizer: Box::new(tokenizer) })
    }

    /// The kind that gives this tokenizer again for the same data.
    pub fn kind(&self) -> TokenizerKind {
        match self {
            Tokenizer::Char { .. } | Tokenizer::Ids { .. } => TokenizerKind::Char,
            Tokenizer::Bpe { tokenizer } => TokenizerKind::Bpe { vocab_size: tokenizer.get_vocab_size(true) },
            Tokenizer::Loaded { path, .. } => TokenizerKind::File(path.clone()),
        }
    }

    pub fn vocab_size(&self) -> usize {
        match self {
            Tokenizer::Char { chars } => chars.len(),
            Tokenizer::Bpe { tokenizer } | Tokenizer::Loaded { tokenizer, .. } => tokenizer.get_vocab_size(true),
            Tokenizer::Ids { vocab_size } => *vocab_size,
        }
    }

    pub fn encode(&self, text: &str) -> Result<Vec<u32>, DataError> {
        match self {
            Tokenizer::Char { chars } => text
                .chars()
                .map(|c| chars.binary_search(&c).map(|i| i as u32).map_err(|_| DataError::UnknownCharacter { character: c }))
                .collect(),
            Tokenizer::Bpe { tokenizer } | Tokenizer::Loaded { tokenizer, .. } => tokenizer
                .encode(text, false)
                .map(|encoding| encoding.get_ids().to_vec())
                .map_err(|e| DataError::Encoding { source: Cause::from(e) }),
            Tokenizer::Ids { vocab_size } => text
                .split_whitespace()
                .map(|word| {
                    word.parse::<u32>()
                        .ok()
                        .filter(|&id| (id as usize) < *vocab_size)
                        .ok_or_else(|| DataError::NotATokenId { word: word.to_string(), vocab_size: *vocab_size })
                })
                .collect(),
        }
    }

    /// What a sample starts from when the user gives no prompt: a new line, or token 0.
    pub fn default_prompt(&self) -> &'static str {
        match self {
            Tokenizer::Ids { .. } => "0",
            _ => "\n",
        }
    }

    /// `prompt` followed by the text of the ids that continue it (ids stay apart by a space).
    pub fn continued(&self, prompt: &str, continuation: &[u32]) -> String {
        match self {
            Tokenizer::Ids { .. } if !continuation.is_empty() => format!("{prompt} {}", self.decode(continuation)),
            _ => format!("{prompt}{}", self.decode(continuation)),
        }
    }

    /// Text for token ids; ids outside the vocabulary are skipped.
    pub fn decode(&self, ids: &[u32]) -> String {
        match self {
            Tokenizer::Char { chars } => ids.iter().filter_map(|&i| chars.get(i as usize)).collect(),
            Tokenizer::Bpe { tokenizer } | Tokenizer::Loaded { tokenizer, .. } => tokenizer.decode(ids, false).unwrap_or_default(),
            Tokenizer::Ids { vocab_size } => {
                ids.iter().filter(|&&id| (id as usize) < *vocab_size).map(|id| id.to_string()).collect::<Vec<_>>().join(" ")
            }
        }
    }
}

fn train_bpe(vocab_size: usize, text: &str) -> Result<Tokenizer, DataError> {
    let failed = |e: Box<dyn std::error::Error + Send + Sync>| DataError::BpeTraining { source: Cause::from(e) };
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
        let t = Tokenizer::train(&TokenizerKind::Char, "hello world").unwrap();
        assert_eq!(t.vocab_size(), 8);
        let ids = t.encode("hold").unwrap();
        assert_eq!(t.decode(&ids), "hold");
        let err = t.encode("hz").unwrap_err().to_string();
        assert!(err.contains("'z'"), "{err}");
    }

    #[test]
    fn bpe_learns_merges_and_round_trips_any_text() {
        let text = crate::corpus::shakespeare()[..200_000].to_string();
        let t = Tokenizer::train(&TokenizerKind::Bpe { vocab_size: 400 }, &text).unwrap();
        assert_eq!(t.vocab_size(), 400);
        let sample = "To be, or not to be: that is the question.\nÉtude ∑";
        let ids = t.encode(sample).unwrap();
        assert!(ids.len() < sample.len(), "merges shorten the text");
        assert_eq!(t.decode(&ids), sample);
    }

    #[test]
    fn tokenizer_survives_serde() {
        for kind in [TokenizerKind::Char, TokenizerKind::Bpe { vocab_size: 300 }] {
            let t = Tokenizer::train(&kind, &crate::corpus::shakespeare()[..50_000]).unwrap();
            let json = serde_json::to_string(&t).unwrap();
            let back: Tokenizer = serde_json::from_str(&json).unwrap();
            assert_eq!(back.encode("Romeo").unwrap(), t.encode("Romeo").unwrap());
        }
    }

    #[test]
    fn kinds_parse_and_bad_ones_explain() {
        assert_eq!("char".parse::<TokenizerKind>().unwrap(), TokenizerKind::Char);
        assert_eq!("bpe:512".parse::<TokenizerKind>().unwrap(), TokenizerKind::Bpe { vocab_size: 512 });
        assert_eq!("gpt2/tokenizer.json".parse::<TokenizerKind>().unwrap(), TokenizerKind::File("gpt2/tokenizer.json".into()));
        assert!(
            Tokenizer::train(&"missing/tokenizer.json".parse().unwrap(), "").unwrap_err().to_string().contains("missing/tokenizer.json")
        );
        for bad in ["bpe", "bpe:x", "bpe:10", "word"] {
            assert!(bad.parse::<TokenizerKind>().unwrap_err().to_string().contains("bpe:N"), "{bad}");
        }
    }

    #[test]
    fn a_malformed_tokenizer_json_is_refused_not_a_panic() {
        // fuzz/tokenizer_json's first crash: a "decoder" value that is not JSON.
        let crash = b"{\"decoder\"\n:\x00\x02\x00\x00\xfa?\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\xe8\x00\xfa\x00\x00\x00\x00\x10";
        let err = Tokenizer::from_json("crash/tokenizer.json", crash).expect_err("refused");
        assert!(err.to_string().contains("crash/tokenizer.json is not a Hugging Face tokenizer file"), "{err}");
    }
}
