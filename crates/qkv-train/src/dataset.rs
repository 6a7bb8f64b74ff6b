//! What a run trains on, tokenised, and the batches cut from it.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::corpus::{DataError, TextCorpus};
use crate::image_split::{ImageShape, ImageSplit};
use crate::images::{ImageData, ImageSource};
use crate::rng::Rng;
use crate::synthetic::{self, Framing, Split, SyntheticData, SyntheticTask};
use crate::tokenizer::{Tokenizer, TokenizerKind};
use crate::tokens::Tokens;

/// Where the data comes from, as the user names it: `shakespeare`, `synthetic:TASK[:L][:encoder]`,
/// images (`digits`, `relations`, `mnist:DIR` and the other sets of [`ImageSource`]) or a file
/// path; or a text the user handed over (an upload), which carries its text with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum DataSource {
    Shakespeare,
    Synthetic {
        task: SyntheticTask,
        length: usize,
        /// Left out of saved setups for the decoder, so that theirs read as before.
        #[serde(default, skip_serializing_if = "Framing::is_decoder")]
        framing: Framing,
    },
    /// A UTF-8 text, or one of nanoGPT's token files when the name ends in `.bin` (the training
    /// split, with `val.bin` beside it; [`crate::tokens`]).
    File(String),
    Upload(Upload),
    /// Images to classify, for a vision transformer.
    Images(ImageSource),
}

/// A text the user handed over as bytes (dropped on the window, picked in the browser), known by
/// its name. The text is not saved with a setup: a restored setup or a shared link keeps the
/// name only, and training on it asks for the text again.
#[derive(Clone, Serialize, Deserialize)]
pub struct Upload {
    pub name: String,
    #[serde(skip)]
    text: Option<Arc<TextCorpus>>,
}

impl Upload {
    /// `bytes` as the text named `name`: refused unless non-empty UTF-8.
    pub fn new(name: &str, bytes: &[u8]) -> Result<Self, DataError> {
        Ok(Self { name: name.to_string(), text: Some(Arc::new(TextCorpus::from_bytes(name, bytes)?)) })
    }

    /// The text, unless only the name was restored.
    pub fn corpus(&self) -> Result<&TextCorpus, DataError> {
        self.text.as_deref().ok_or_else(|| DataError::NotKept { name: self.name.clone() })
    }
}

impl PartialEq for Upload {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name && self.text.as_ref().map(|t| &t.text) == other.text.as_ref().map(|t| &t.text)
    }
}

impl Eq for Upload {}

/// The name and size only: the text may be megabytes.
impl fmt::Debug for Upload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bytes = self.text.as_ref().map(|t| t.text.len());
        f.debug_struct("Upload").field("name", &self.name).field("bytes", &bytes).finish()
    }
}

/// List length when `synthetic:TASK` gives none.
pub const DEFAULT_SYNTHETIC_LENGTH: usize = 16;

impl fmt::Display for DataSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DataSource::Shakespeare => f.write_str("shakespeare"),
            DataSource::Synthetic { task, length, framing: Framing::Decoder } => write!(f, "synthetic:{task}:{length}"),
            DataSource::Synthetic { task, length, framing: Framing::Encoder } => write!(f, "synthetic:{task}:{length}:encoder"),
            DataSource::File(path) => f.write_str(path),
            DataSource::Upload(upload) => f.write_str(&upload.name),
            DataSource::Images(images) => images.fmt(f),
        }
    }
}

/// Why a data source's text names no source.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DataSourceError {
    #[error(transparent)]
    Task(#[from] crate::synthetic::UnknownTask),
    #[error("synthetic list length '{0}' must be a whole number ≥ 2, e.g. synthetic:reverse:16")]
    ListLength(String),
    #[error("'{0}' after the list length is not a framing: leave it out (a decoder) or write encoder, e.g. synthetic:rotate:8:encoder")]
    Framing(String),
    #[error(
        "empty data source: use shakespeare, synthetic:TASK[:L][:encoder], digits, relations, mnist:DIR, fashion-mnist:DIR, cifar10:DIR \
         or a path to a UTF-8 text file"
    )]
    Empty,
}

impl FromStr for DataSource {
    type Err = DataSourceError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "shakespeare" {
            return Ok(DataSource::Shakespeare);
        }
        if s == "digits" {
            return Ok(DataSource::Images(ImageSource::Digits));
        }
        if s == "relations" {
            return Ok(DataSource::Images(ImageSource::Relations));
        }
        if let Some(images) = ImageSource::parse(s) {
            return Ok(DataSource::Images(images));
        }
        if let Some(rest) = s.strip_prefix("synthetic:") {
            let mut parts = rest.split(':');
            let task: SyntheticTask = parts.next().unwrap_or_default().parse()?;
            let length = match parts.next() {
                Some(l) => l.parse::<usize>().ok().filter(|&l| l >= 2).ok_or_else(|| DataSourceError::ListLength(l.to_string()))?,
                None => DEFAULT_SYNTHETIC_LENGTH,
            };
            let framing = match parts.next() {
                None => Framing::Decoder,
                Some("encoder") if parts.next().is_none() => Framing::Encoder,
                Some(other) => return Err(DataSourceError::Framing(other.to_string())),
            };
            return Ok(DataSource::Synthetic { task, length, framing });
        }
        if s.is_empty() {
            return Err(DataSourceError::Empty);
        }
        Ok(DataSource::File(s.to_string()))
    }
}

/// A tokenised text: a corpus split 90/10, or a token file's two splits.
#[derive(Debug, Clone)]
pub struct TextData {
    pub name: String,
    pub tokenizer: Tokenizer,
    pub train: Tokens,
    pub val: Tokens,
}

/// Training data ready for batching.
#[derive(Debug, Clone)]
pub enum Dataset {
    Text(TextData),
    Synthetic(SyntheticData),
    Images(ImageData),
}

/// What a batch's rows hold: tokens [rows, time], or images [rows, values].
#[derive(Debug, Clone, PartialEq)]
pub enum Inputs {
    Tokens(Vec<i64>),
    Pixels(Vec<f32>),
}

impl Inputs {
    /// The tokens, unless these are images.
    pub fn tokens(&self) -> Option<&[i64]> {
        match self {
            Inputs::Tokens(tokens) => Some(tokens),
            Inputs::Pixels(_) => None,
        }
    }

    /// As a model reads them, in `rows` rows: tokens [rows, time], images [rows, values].
    pub fn to_input(&self, rows: usize, device: &burn::tensor::Device) -> qkv_model::Input {
        use burn::tensor::{Tensor, TensorData};
        match self {
            Inputs::Tokens(tokens) => {
                // Grouped by token for a GPU's backward (training on one), where it saves a unit
                // looping over every position: a sort on the host, which holds the batch.
                let grouped = device.is_autodiff() && !qkv_kernels::is_flex(device);
                let groups = grouped.then(|| std::sync::Arc::new(qkv_kernels::TokenGroups::of(tokens)));
                let ids = Tensor::from_data(TensorData::new(tokens.clone(), [rows, tokens.len() / rows.max(1)]), device);
                qkv_model::Input::Tokens(ids, groups)
            }
            Inputs::Pixels(pixels) => {
                qkv_model::Input::Pixels(Tensor::from_data(TensorData::new(pixels.clone(), [rows, pixels.len() / rows.max(1)]), device))
            }
        }
    }

    /// Rows `rows` of inputs that hold `total` rows.
    pub fn rows(&self, rows: std::ops::Range<usize>, total: usize) -> Inputs {
        fn cut<T: Clone>(values: &[T], rows: std::ops::Range<usize>, total: usize) -> Vec<T> {
            let width = values.len() / total.max(1);
            values[rows.start * width..rows.end * width].to_vec()
        }
        match self {
            Inputs::Tokens(tokens) => Inputs::Tokens(cut(tokens, rows, total)),
            Inputs::Pixels(pixels) => Inputs::Pixels(cut(pixels, rows, total)),
        }
    }
}

/// One batch, row-major [rows, time]. `loss_mask` is 1 where the loss counts (the answer of a
/// synthetic example; every image) and absent when every position counts. An image's row has
/// one position, its label.
#[derive(Debug, Clone, PartialEq)]
pub struct Batch {
    pub rows: usize,
    pub time: usize,
    pub inputs: Inputs,
    pub targets: Vec<i64>,
    pub loss_mask: Option<Vec<f32>>,
}

impl Batch {
    /// The first `rows` rows.
    pub fn first_rows(&self, rows: usize) -> Batch {
        let rows = rows.min(self.rows);
        let cells = 0..rows * self.time;
        Batch {
            rows,
            time: self.time,
            inputs: self.inputs.rows(0..rows, self.rows),
            targets: self.targets[cells.clone()].to_vec(),
            loss_mask: self.loss_mask.as_ref().map(|mask| mask[cells].to_vec()),
        }
    }
}

impl Dataset {
    /// Lists read whole by a bidirectional model (a synthetic task's encoder framing).
    pub fn is_encoder(&self) -> bool {
        matches!(self, Dataset::Synthetic(data) if data.framing == Framing::Encoder)
    }

    /// Images to classify, for a vision transformer.
    pub fn images(&self) -> Option<&ImageData> {
        match self {
            Dataset::Images(images) => Some(images),
            _ => None,
        }
    }

    /// Tokenizes a text corpus with a tokenizer trained on its training split.
    pub fn from_text(corpus: &TextCorpus, tokenizer: &TokenizerKind) -> Result<Self, DataError> {
        let (train_text, val_text) = corpus.split();
        let tokenizer = Tokenizer::train(tokenizer, train_text)?;
        let train = tokenizer.encode(train_text)?;
        // A validation character that never occurs in training has no character token: drop it
        // from the validation stream rather than refuse the whole text.
        let val = match tokenizer.encode(val_text) {
            Ok(ids) => ids,
            Err(_) => val_text.chars().filter_map(|c| tokenizer.encode(&c.to_string()).ok()).flatten().collect(),
        };
        Ok(Dataset::Text(TextData { name: corpus.name.clone(), tokenizer, train: train.into(), val: val.into() }))
    }

    /// nanoGPT's token files: `train` and the `val.bin` beside it, read mapped. Without a
    /// tokenizer file (`char`, the default) the ids are the vocabulary; a `tokenizer.json` must
    /// know every id in them. One pass over both files finds the largest id.
    pub fn from_token_files(train: &std::path::Path, tokenizer: &TokenizerKind) -> Result<Self, DataError> {
        let val = train.with_file_name("val.bin");
        let name = train.display().to_string();
        if val == train {
            return Err(DataError::ValidationSplitNamed { name });
        }
        let train = Tokens::map_file(train)?;
        let val = Tokens::map_file(&val).map_err(|error| match error {
            DataError::Io { name, source } => DataError::NoValidationSplit { name, source },
            other => other,
        })?;
        let ids = train.max_id().max(val.max_id()).map_or(0, |id| id as usize + 1);
        let tokenizer = match tokenizer {
            TokenizerKind::Char => Tokenizer::Ids { vocab_size: ids },
            TokenizerKind::File(path) => Tokenizer::load(path)?,
            TokenizerKind::Bpe { .. } => {
                return Err(DataError::IdsAlready { name });
            }
        };
        if tokenizer.vocab_size() < ids {
            return Err(DataError::IdBeyondTokenizer { name, id: ids - 1, known: tokenizer.vocab_size() });
        }
        Ok(Dataset::Text(TextData { name, tokenizer, train, val }))
    }

    /// Loads a data source (the browser has no files to read: there a text is uploaded).
    pub fn load(source: &DataSource, tokenizer: &TokenizerKind, seed: u64) -> Result<Self, DataError> {
        match source {
            DataSource::Shakespeare => Self::from_text(&TextCorpus::shakespeare(), tokenizer),
            DataSource::File(path) if path.ends_with(".bin") => Self::from_token_files(std::path::Path::new(path), tokenizer),
            DataSource::File(path) => Self::from_text(&TextCorpus::from_path(std::path::Path::new(path))?, tokenizer),
            DataSource::Upload(upload) => Self::from_text(upload.corpus()?, tokenizer),
            DataSource::Synthetic { task, length, framing } => {
                Ok(Dataset::Synthetic(SyntheticData { task: *task, length: *length, seed, framing: *framing }))
            }
            DataSource::Images(source) => Ok(Dataset::Images(ImageData::load(source)?)),
        }
    }

    pub fn vocab_size(&self) -> usize {
        match self {
            Dataset::Text(text) => text.tokenizer.vocab_size(),
            Dataset::Synthetic(_) => synthetic::VOCAB_SIZE,
            Dataset::Images(images) => images.classes,
        }
    }

    pub fn tokenizer(&self) -> Option<&Tokenizer> {
        match self {
            Dataset::Text(text) => Some(&text.tokenizer),
            Dataset::Synthetic(_) | Dataset::Images(_) => None,
        }
    }

    /// Tokens per batch row for a model with this context.
    pub fn time(&self, block_size: usize) -> usize {
        match self {
            Dataset::Text(_) => block_size,
            Dataset::Synthetic(data) => data.time(),
            // One label per image.
            Dataset::Images(_) => 1,
        }
    }

    /// Checks that rows of `block_size` tokens can be cut from both splits.
    pub fn check_fits(&self, block_size: usize) -> Result<(), DataError> {
        match self {
            Dataset::Text(text) => {
                for (split, tokens) in [("training", text.train.len()), ("validation", text.val.len())] {
                    if tokens < block_size + 1 {
                        return Err(DataError::TooShort { name: text.name.clone(), split, tokens, needed: block_size + 1 });
                    }
                }
                Ok(())
            }
            Dataset::Synthetic(data) if data.time() > block_size => {
                Err(DataError::ListsTooLong { length: data.length, needed: data.time(), block_size })
            }
            Dataset::Synthetic(_) | Dataset::Images(_) => Ok(()),
        }
    }

    /// Checks that `model` reads this data: images for a vision transformer of their shape,
    /// tokens for a GPT.
    pub fn check_model(&self, model: &qkv_model::ModelConfig) -> Result<(), DataError> {
        match (self, &model.image) {
            (Dataset::Images(images), None) => Err(DataError::ImagesNeedVit { name: images.name() }),
            (Dataset::Images(images), Some(input)) => {
                let reads = ImageShape { height: input.height, width: input.width, channels: input.channels };
                if reads == images.shape {
                    Ok(())
                } else {
                    Err(DataError::ImageShape { name: images.name(), data: images.shape, model: reads })
                }
            }
            (_, Some(_)) => Err(DataError::TokensNeedGpt),
            (_, None) => Ok(()),
        }
    }

    /// A random batch of `rows` rows from the training split; images each moved by up to `shift`
    /// pixels ([`crate::shift`]; the recipe's `shift`, which other data ignore).
    pub fn train_batch(&self, rng: &mut Rng, rows: usize, block_size: usize, shift: usize) -> Batch {
        match self {
            Dataset::Text(text) => text_batch(&text.train, rows, block_size, |n| rng.below(n)),
            Dataset::Synthetic(data) => synthetic_batch(data, Split::Train, rows, |n| rng.below(n)),
            Dataset::Images(images) if shift == 0 => image_batch(&images.train, rows, |n| rng.below(n)),
            Dataset::Images(images) => shifted_image_batch(images, rows, shift, rng),
        }
    }

    /// The fixed validation batches every evaluation uses: the same for every run and every
    /// seed, so that runs of different seeds are scored on the same text and a difference between
    /// seeds is the training's, not the validation sample's.
    pub fn val_batches(&self, count: usize, rows: usize, block_size: usize) -> Vec<Batch> {
        match self {
            Dataset::Text(text) => {
                let mut rng = Rng::new(VALIDATION_SEED);
                (0..count).map(|_| text_batch(&text.val, rows, block_size, |n| rng.below(n))).collect()
            }
            // The whole validation set, in order, so accuracy is measured on all of it.
            Dataset::Synthetic(data) => {
                let mut next = 0;
                (0..Split::Val.examples().div_ceil(rows))
                    .map(|_| {
                        let take = rows.min(Split::Val.examples() - next);
                        synthetic_batch(data, Split::Val, take, |_| {
                            next += 1;
                            next - 1
                        })
                    })
                    .collect()
            }
            Dataset::Images(images) => whole_split(&images.val, rows),
        }
    }

    /// The test split in batches of `rows`, for a study's final figure only; None where the data
    /// have no test split apart from the validation one.
    pub fn test_batches(&self, rows: usize) -> Option<Vec<Batch>> {
        match self {
            Dataset::Images(images) => Some(whole_split(images.test.as_ref()?, rows)),
            Dataset::Text(_) | Dataset::Synthetic(_) => None,
        }
    }
}

/// All of `split`, in order, in batches of `rows`.
fn whole_split(split: &ImageSplit, rows: usize) -> Vec<Batch> {
    (0..split.len())
        .step_by(rows.max(1))
        .map(|start| {
            let mut next = start;
            image_batch(split, rows.min(split.len() - start), |_| {
                next += 1;
                next - 1
            })
        })
        .collect()
}

/// Draws the text validation windows; fixed, and independent of the training seed.
const VALIDATION_SEED: u64 = 0x5_EED0_F7A1;

fn text_batch(tokens: &Tokens, rows: usize, block_size: usize, mut pick: impl FnMut(usize) -> usize) -> Batch {
    let mut inputs = Vec::with_capacity(rows * block_size);
    let mut targets = Vec::with_capacity(rows * block_size);
    for _ in 0..rows {
        let start = pick(tokens.len() - block_size);
        // The targets are the inputs one token on.
        inputs.extend(tokens.iter_from(start).take(block_size).map(i64::from));
        targets.extend(tokens.iter_from(start + 1).take(block_size).map(i64::from));
    }
    Batch { rows, time: block_size, inputs: Inputs::Tokens(inputs), targets, loss_mask: None }
}

/// `rows` images `pick`ed from `split`, their labels the targets; every row counts.
fn image_batch(split: &ImageSplit, rows: usize, mut pick: impl FnMut(usize) -> usize) -> Batch {
    let mut pixels = Vec::with_capacity(rows * split.image(0).len());
    let mut targets = Vec::with_capacity(rows);
    for _ in 0..rows {
        let index = pick(split.len());
        pixels.extend_from_slice(split.image(index));
        targets.push(i64::from(split.label(index)));
    }
    // A mask of ones: the loss is the same, and the run counts the answers it got right.
    Batch { rows, time: 1, inputs: Inputs::Pixels(pixels), targets, loss_mask: Some(vec![1.0; rows]) }
}

/// `rows` training images, each moved by up to `shift` pixels: the image drawn, then its move.
fn shifted_image_batch(images: &ImageData, rows: usize, shift: usize, rng: &mut Rng) -> Batch {
    let mut batch = image_batch(&images.train, rows, |n| rng.below(n));
    if let Inputs::Pixels(pixels) = &mut batch.inputs {
        let mut moved = Vec::with_capacity(pixels.len());
        for image in pixels.chunks(images.shape.values()) {
            let (down, right) = crate::shift::draw_offsets(rng, shift);
            crate::shift::shifted_onto(image, images.shape, down, right, &mut moved);
        }
        *pixels = moved;
    }
    batch
}

fn synthetic_batch(data: &SyntheticData, split: Split, rows: usize, mut pick: impl FnMut(usize) -> usize) -> Batch {
    let time = data.time();
    let answer = data.answer_positions();
    let (mut tokens, mut targets, mut mask) =
        (Vec::with_capacity(rows * time), Vec::with_capacity(rows * time), Vec::with_capacity(rows * time));
    for _ in 0..rows {
        let (inputs, answers) = data.input_and_targets(split, pick(split.examples()));
        tokens.extend(inputs.iter().map(|&t| t as i64));
        targets.extend(answers.iter().map(|&t| t as i64));
        mask.extend((0..time).map(|t| if answer.contains(&t) { 1.0 } else { 0.0 }));
    }
    Batch { rows, time, inputs: Inputs::Tokens(tokens), targets, loss_mask: Some(mask) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(batch: &Batch) -> &[i64] {
        batch.inputs.tokens().expect("a batch of tokens")
    }

    #[test]
    fn an_upload_carries_its_text_and_a_restored_one_asks_for_it_again() {
        let name = "uploaded-by-the-dataset-test.txt";
        assert!(Dataset::load(&DataSource::File(name.into()), &TokenizerKind::Char, 1).is_err(), "no such file");
        let text = "to be or not to be, that is the question\n".repeat(40);
        let source = DataSource::Upload(Upload::new(name, text.as_bytes()).unwrap());
        assert_eq!(source.to_string(), name, "known by its name");
        let Dataset::Text(data) = Dataset::load(&source, &TokenizerKind::Char, 1).unwrap() else { panic!("text data") };
        assert_eq!(data.train.len() + data.val.len(), text.len());

        // A saved setup keeps the name, not the text.
        let restored: DataSource = serde_json::from_str(&serde_json::to_string(&source).unwrap()).unwrap();
        assert!(matches!(&restored, DataSource::Upload(u) if u.name == name));
        let error = Dataset::load(&restored, &TokenizerKind::Char, 1).unwrap_err().to_string();
        assert!(error.contains("drop the file"), "{error}");

        let bad = Upload::new("binary.txt", &[0x66, 0xff, 0x00]).unwrap_err();
        assert!(bad.to_string().contains("not UTF-8"), "{bad}");
        assert!(Upload::new("blank.txt", b" \n ").unwrap_err().to_string().contains("empty"));
    }

    #[test]
    fn sources_parse() {
        assert_eq!("shakespeare".parse::<DataSource>().unwrap(), DataSource::Shakespeare);
        assert_eq!(
            "synthetic:reverse:16".parse::<DataSource>().unwrap(),
            DataSource::Synthetic { task: SyntheticTask::Reverse, length: 16, framing: Framing::Decoder }
        );
        assert_eq!(
            "synthetic:sort".parse::<DataSource>().unwrap(),
            DataSource::Synthetic { task: SyntheticTask::Sort, length: DEFAULT_SYNTHETIC_LENGTH, framing: Framing::Decoder }
        );
        assert_eq!(
            "synthetic:rotate:8:encoder".parse::<DataSource>().unwrap(),
            DataSource::Synthetic { task: SyntheticTask::Rotate, length: 8, framing: Framing::Encoder }
        );
        for source in ["synthetic:rotate:8:encoder", "synthetic:swap:6"] {
            assert_eq!(source.parse::<DataSource>().unwrap().to_string(), source, "printed as it is written");
        }
        assert!("synthetic:rotate:8:decoder".parse::<DataSource>().unwrap_err().to_string().contains("write encoder"));
        assert!("synthetic:turn".parse::<DataSource>().unwrap_err().to_string().contains("copy, reverse"));
        assert!("synthetic:copy:x".parse::<DataSource>().unwrap_err().to_string().contains("≥ 2"));
        assert_eq!("my.txt".parse::<DataSource>().unwrap(), DataSource::File("my.txt".into()));
    }

    #[test]
    fn text_batches_are_shifted_windows_and_reproducible() {
        let corpus = TextCorpus::from_bytes("t", "abcdefghijklmnopqrstuvwxyz".repeat(20).as_bytes()).unwrap();
        let data = Dataset::from_text(&corpus, &TokenizerKind::Char).unwrap();
        let batch = data.train_batch(&mut Rng::new(1), 3, 8, 0);
        assert_eq!(tokens(&batch).len(), 24);
        for r in 0..3 {
            assert_eq!(&tokens(&batch)[r * 8 + 1..r * 8 + 8], &batch.targets[r * 8..r * 8 + 7]);
        }
        assert_eq!(batch, data.train_batch(&mut Rng::new(1), 3, 8, 0));
        assert_eq!(data.val_batches(2, 3, 8), data.val_batches(2, 3, 8));
    }

    /// nanoGPT's layout in a folder of its own: train.bin and val.bin of little-endian uint16 ids.
    fn token_files(name: &str, train: &[u16], val: &[u16]) -> std::path::PathBuf {
        let folder = std::env::temp_dir().join(format!("qkv-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&folder).unwrap();
        let bytes = |ids: &[u16]| ids.iter().flat_map(|id| id.to_le_bytes()).collect::<Vec<u8>>();
        std::fs::write(folder.join("train.bin"), bytes(train)).unwrap();
        std::fs::write(folder.join("val.bin"), bytes(val)).unwrap();
        folder
    }

    #[test]
    fn token_files_train_by_their_ids_or_by_the_tokenizer_that_made_them() {
        let train: Vec<u16> = (0..400).map(|i| (i * 7 % 40) as u16).collect();
        let folder = token_files("token-files", &train, &[1, 2, 3, 4, 5, 6, 7, 8, 9, 41]);
        let path = folder.join("train.bin").display().to_string();
        let source: DataSource = path.parse().unwrap();
        let data = Dataset::load(&source, &TokenizerKind::Char, 1).unwrap();
        assert_eq!(data.vocab_size(), 42, "the largest id of either split, plus one");
        let batch = data.train_batch(&mut Rng::new(3), 2, 8, 0);
        let Dataset::Text(text) = &data else { panic!("token data") };
        let start = (0..train.len()).find(|&s| train[s..s + 8].iter().map(|&t| t as i64).eq(tokens(&batch)[..8].iter().copied()));
        let start = start.expect("each row is a window of the training file");
        assert_eq!(batch.targets[..8], train[start + 1..start + 9].iter().map(|&t| t as i64).collect::<Vec<_>>()[..]);
        // Without a tokenizer, prompts and samples are ids.
        assert_eq!(text.tokenizer.encode("3 41").unwrap(), [3, 41]);
        assert_eq!(text.tokenizer.decode(&[3, 41]), "3 41");
        assert!(text.tokenizer.encode("to be").unwrap_err().to_string().contains("--tokenizer"));
        assert!(Dataset::load(&source, &TokenizerKind::Bpe { vocab_size: 300 }, 1).unwrap_err().to_string().contains("token ids already"));

        // A tokenizer file gives the ids their meaning, and must know every one of them.
        let bpe = Tokenizer::train(&TokenizerKind::Bpe { vocab_size: 300 }, &crate::corpus::shakespeare()[..20_000]).unwrap();
        let Tokenizer::Bpe { tokenizer } = &bpe else { panic!("a BPE") };
        let json = folder.join("tokenizer.json");
        tokenizer.save(&json, false).unwrap();
        let kind: TokenizerKind = json.display().to_string().parse().unwrap();
        let data = Dataset::load(&source, &kind, 1).unwrap();
        assert_eq!(data.vocab_size(), 300);
        let words = data.tokenizer().unwrap().encode("Romeo").unwrap();
        assert_eq!(data.tokenizer().unwrap().decode(&words), "Romeo");
        assert_eq!(data.tokenizer().unwrap().kind(), kind, "a checkpoint's tokenizer names its file again");

        let too_small = token_files("token-files-big-id", &train, &[1, 2, 3, 4, 5, 6, 7, 8, 9, 301]);
        let error = Dataset::load(&DataSource::File(too_small.join("train.bin").display().to_string()), &kind, 1).unwrap_err();
        assert!(error.to_string().contains("token id 301"), "{error}");
        std::fs::remove_file(too_small.join("val.bin")).unwrap();
        let error = Dataset::load(&DataSource::File(too_small.join("train.bin").display().to_string()), &kind, 1).unwrap_err();
        assert!(error.to_string().contains("val.bin beside it"), "{error}");
        let error = Dataset::load(&DataSource::File(folder.join("val.bin").display().to_string()), &kind, 1).unwrap_err();
        assert!(error.to_string().contains("name the training file"), "{error}");
        for folder in [folder, too_small] {
            std::fs::remove_dir_all(folder).unwrap();
        }
    }

    #[test]
    fn short_text_is_refused_with_the_sizes() {
        let corpus = TextCorpus::from_bytes("tiny.txt", b"0123456789abcdefghij").unwrap();
        let data = Dataset::from_text(&corpus, &TokenizerKind::Char).unwrap();
        let err = data.check_fits(8).unwrap_err();
        assert!(matches!(err, DataError::TooShort { split: "validation", needed: 9, .. }), "{err}");
        assert!(err.to_string().contains("tiny.txt"));
    }

    #[test]
    fn synthetic_batches_mask_everything_but_the_answer() {
        let data = Dataset::Synthetic(SyntheticData { task: SyntheticTask::Copy, length: 4, seed: 0, framing: Framing::Decoder });
        let batch = data.train_batch(&mut Rng::new(2), 2, 64, 0);
        assert_eq!(batch.time, 8);
        let mask = batch.loss_mask.clone().unwrap();
        assert_eq!(&mask[..8], &[0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0]);
        // Where the loss counts, the target is the copied digit.
        assert_eq!(&batch.targets[4..8], &tokens(&batch)[0..4]);
        let val = data.val_batches(1, 64, 64);
        assert_eq!(val.iter().map(|b| b.rows).sum::<usize>(), synthetic::VAL_EXAMPLES);
        // Another seed trains on other examples but is validated on the same ones.
        let other = Dataset::Synthetic(SyntheticData { task: SyntheticTask::Copy, length: 4, seed: 1, framing: Framing::Decoder });
        assert_eq!(other.val_batches(1, 64, 64), val);
        assert_ne!(other.train_batch(&mut Rng::new(2), 2, 64, 0).inputs, batch.inputs);
        assert!(data.check_fits(7).is_err());

        // An encoder reads the list alone and is scored at every position.
        let encoder = Dataset::Synthetic(SyntheticData { task: SyntheticTask::Copy, length: 4, seed: 0, framing: Framing::Encoder });
        let batch = encoder.train_batch(&mut Rng::new(2), 2, 64, 0);
        assert_eq!((batch.time, tokens(&batch).len()), (4, 8));
        assert!(batch.loss_mask.as_ref().unwrap().iter().all(|&m| m == 1.0));
        assert_eq!(batch.targets, tokens(&batch), "copy");
        assert!(encoder.check_fits(4).is_ok() && encoder.check_fits(3).is_err());
    }

    /// Shifted training images are the same images, moved: the same labels in the same rows, no
    /// more ink than before, and the validation and test batches never move.
    #[test]
    fn a_shift_moves_the_training_images_only() {
        let digits = Dataset::load(&DataSource::Images(ImageSource::Digits), &TokenizerKind::Char, 1).unwrap();
        let still = digits.train_batch(&mut Rng::new(5), 16, 1, 0);
        let moved = digits.train_batch(&mut Rng::new(5), 16, 1, 1);
        assert_eq!(still.targets, moved.targets, "the same images drawn");
        let ink = |batch: &Batch| -> Vec<f32> {
            let Inputs::Pixels(pixels) = &batch.inputs else { panic!("images") };
            pixels.chunks(64).map(|image| image.iter().sum()).collect()
        };
        assert!(ink(&moved).iter().zip(ink(&still)).all(|(moved, still)| *moved <= still + 1e-4));
        assert_ne!(still.inputs, moved.inputs, "some image moved");
        let test = digits.test_batches(100).unwrap();
        assert_eq!(test.iter().map(|b| b.rows).collect::<Vec<_>>(), [100, 100, 99], "all 299 test images, in order");
        assert_eq!(digits.val_batches(1, 100, 1).iter().map(|b| b.rows).sum::<usize>(), 300);
    }
}
