//! Image sets a user has on disk, in their publishers' formats: MNIST's and Fashion-MNIST's IDX
//! files and CIFAR-10's binary batches. Each set's test files are its held-out split.
//!
//! - IDX (MNIST, Fashion-MNIST): a big-endian header, magic `0x00000803` for images (then the
//!   count, rows, columns) or `0x00000801` for labels (then the count), then one byte a pixel or
//!   a label. The four files keep their published names, unpacked:
//!   `train-images-idx3-ubyte`, `train-labels-idx1-ubyte`, `t10k-images-idx3-ubyte`,
//!   `t10k-labels-idx1-ubyte`.
//! - CIFAR-10: `data_batch_1.bin` … `data_batch_5.bin` and `test_batch.bin`, each image a label
//!   byte then 32 × 32 red bytes, 32 × 32 green, 32 × 32 blue (channel by channel; the model
//!   reads pixel by pixel, so they are interleaved here).

use std::path::Path;
use std::sync::Arc;

use crate::corpus::DataError;
use crate::image_split::{ImageShape, ImageSplit};

const IDX_IMAGES: u32 = 0x0803;
const IDX_LABELS: u32 = 0x0801;
const MNIST_FILES: [(&str, &str); 2] =
    [("train-images-idx3-ubyte", "train-labels-idx1-ubyte"), ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")];
pub(crate) const FASHION_CLASSES: [&str; 10] =
    ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"];
pub(crate) const CIFAR10_CLASSES: [&str; 10] = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"];
const CIFAR_SIDE: usize = 32;
const CIFAR_TRAIN_FILES: [&str; 5] = ["data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin", "data_batch_5.bin"];

/// A labelled set read from disk: its image size and its two splits.
pub(crate) struct ImageFiles {
    pub shape: ImageShape,
    pub train: ImageSplit,
    pub val: ImageSplit,
}

/// The file's bytes; a missing one says what the folder should hold (`expected`).
fn read(path: &Path, expected: &str) -> Result<Vec<u8>, DataError> {
    let name = path.display().to_string();
    std::fs::read(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::Unsupported => DataError::NoFiles { name },
        std::io::ErrorKind::NotFound => DataError::ImageFile { name, what: format!("there is no such file: the folder holds {expected}") },
        _ => DataError::Io { name, source: Arc::new(e) },
    })
}

const MNIST_EXPECTED: &str = "MNIST's (or Fashion-MNIST's) four IDX files under their published names, unpacked (gunzip *.gz)";
const CIFAR_EXPECTED: &str = "CIFAR-10's binary version: data_batch_1.bin to data_batch_5.bin and test_batch.bin";

fn bad(path: &Path, what: String) -> DataError {
    DataError::ImageFile { name: path.display().to_string(), what }
}

/// The big-endian u32 at `at`, or why the file is too short for it.
fn be_u32(bytes: &[u8], at: usize, path: &Path) -> Result<u32, DataError> {
    let word = bytes.get(at..at + 4).ok_or_else(|| bad(path, "it ends inside its header".into()))?;
    Ok(u32::from_be_bytes(word.try_into().expect("four bytes")))
}

/// An IDX file's header words after the magic, and its data.
fn idx(path: &Path, magic: u32, dims: usize) -> Result<(Vec<usize>, Vec<u8>), DataError> {
    let bytes = read(path, MNIST_EXPECTED)?;
    let found = be_u32(&bytes, 0, path)?;
    if found != magic {
        return Err(bad(path, format!("its magic number is {found:#010x}, not the IDX {magic:#010x} of this file's kind")));
    }
    let sizes = (0..dims).map(|d| be_u32(&bytes, 4 + 4 * d, path).map(|s| s as usize)).collect::<Result<Vec<_>, _>>()?;
    let data = bytes[4 + 4 * dims..].to_vec();
    let expected: usize = sizes.iter().product();
    if data.len() != expected {
        return Err(bad(path, format!("its header promises {expected} bytes of data but it holds {}", data.len())));
    }
    Ok((sizes, data))
}

/// One IDX split: its images and labels, the same count of each.
fn idx_split(dir: &Path, (images, labels): (&str, &str)) -> Result<(ImageShape, ImageSplit), DataError> {
    let (images_path, labels_path) = (dir.join(images), dir.join(labels));
    let (sizes, pixels) = idx(&images_path, IDX_IMAGES, 3)?;
    let (counts, labels) = idx(&labels_path, IDX_LABELS, 1)?;
    if sizes[0] == 0 {
        // Nothing to draw a batch from, or to hold out.
        return Err(bad(&images_path, "it holds no images".into()));
    }
    if counts[0] != sizes[0] {
        return Err(bad(&labels_path, format!("it labels {} images but {} holds {}", counts[0], images, sizes[0])));
    }
    if let Some(&label) = labels.iter().find(|&&l| l >= 10) {
        return Err(bad(&labels_path, format!("it holds label {label}, and MNIST's are 0 to 9")));
    }
    let shape = ImageShape { height: sizes[1], width: sizes[2], channels: 1 };
    Ok((shape, ImageSplit::new(pixels.iter().map(|&p| f32::from(p) / 255.0).collect(), labels)))
}

/// MNIST or Fashion-MNIST in `dir`: the training files train, the t10k files are held out.
pub(crate) fn mnist(dir: &Path) -> Result<ImageFiles, DataError> {
    let (shape, train) = idx_split(dir, MNIST_FILES[0])?;
    let (val_shape, val) = idx_split(dir, MNIST_FILES[1])?;
    if val_shape != shape {
        return Err(bad(&dir.join(MNIST_FILES[1].0), format!("its images are {val_shape}, the training images {shape}")));
    }
    Ok(ImageFiles { shape, train, val })
}

/// CIFAR-10's binary batches in `dir`: the five data batches train, the test batch is held out.
pub(crate) fn cifar10(dir: &Path) -> Result<ImageFiles, DataError> {
    let plane = CIFAR_SIDE * CIFAR_SIDE;
    let record = 1 + 3 * plane;
    let split = |files: &[&str]| -> Result<ImageSplit, DataError> {
        let (mut pixels, mut labels) = (Vec::new(), Vec::new());
        for file in files {
            let path = dir.join(file);
            let bytes = read(&path, CIFAR_EXPECTED)?;
            if bytes.is_empty() || !bytes.len().is_multiple_of(record) {
                return Err(bad(&path, format!("{} bytes is not a whole number of CIFAR-10 images of {record} bytes", bytes.len())));
            }
            for image in bytes.chunks(record) {
                if image[0] >= 10 {
                    return Err(bad(&path, format!("it holds label {}, and CIFAR-10's are 0 to 9", image[0])));
                }
                labels.push(image[0]);
                // Red, green and blue planes → each pixel's three values together.
                let planes = &image[1..];
                pixels.extend((0..plane).flat_map(|p| (0..3).map(move |c| f32::from(planes[c * plane + p]) / 255.0)));
            }
        }
        Ok(ImageSplit::new(pixels, labels))
    };
    Ok(ImageFiles {
        shape: ImageShape { height: CIFAR_SIDE, width: CIFAR_SIDE, channels: 3 },
        train: split(&CIFAR_TRAIN_FILES)?,
        val: split(&["test_batch.bin"])?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("qkv-image-files-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn idx_file(magic: u32, sizes: &[u32], data: &[u8]) -> Vec<u8> {
        let mut bytes = magic.to_be_bytes().to_vec();
        sizes.iter().for_each(|s| bytes.extend(s.to_be_bytes()));
        bytes.extend(data);
        bytes
    }

    /// MNIST-shaped files of `count` 2×3 images, image i's pixels all 10·i, label i.
    fn write_mnist(dir: &Path, count: u32) {
        for (images, labels) in MNIST_FILES {
            let pixels: Vec<u8> = (0..count).flat_map(|i| [10 * i as u8; 6]).collect();
            std::fs::write(dir.join(images), idx_file(IDX_IMAGES, &[count, 2, 3], &pixels)).unwrap();
            std::fs::write(dir.join(labels), idx_file(IDX_LABELS, &[count], &(0..count as u8).collect::<Vec<_>>())).unwrap();
        }
    }

    #[test]
    fn idx_files_read_as_images_and_labels() {
        let dir = folder("mnist");
        write_mnist(&dir, 4);
        let set = mnist(&dir).unwrap();
        assert_eq!(set.shape, ImageShape { height: 2, width: 3, channels: 1 });
        assert_eq!((set.train.len(), set.val.len()), (4, 4));
        assert_eq!(set.train.image(3), [30.0 / 255.0; 6]);
        assert_eq!(set.train.label(3), 3);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn damaged_idx_files_say_what_is_wrong() {
        let dir = folder("mnist-damaged");
        let missing = mnist(&dir).err().unwrap().to_string();
        assert!(missing.contains("train-images-idx3-ubyte") && missing.contains("unpacked (gunzip"), "{missing}");
        write_mnist(&dir, 4);
        std::fs::write(dir.join("train-labels-idx1-ubyte"), idx_file(IDX_IMAGES, &[4], &[0, 1, 2, 3])).unwrap();
        let magic = mnist(&dir).err().unwrap().to_string();
        assert!(magic.contains("magic number is 0x00000803"), "{magic}");
        std::fs::write(dir.join("train-labels-idx1-ubyte"), idx_file(IDX_LABELS, &[3], &[0, 1, 2])).unwrap();
        assert!(mnist(&dir).err().unwrap().to_string().contains("labels 3 images but train-images-idx3-ubyte holds 4"));
        std::fs::write(dir.join("train-images-idx3-ubyte"), idx_file(IDX_IMAGES, &[4, 2, 3], &[0; 10])).unwrap();
        assert!(mnist(&dir).err().unwrap().to_string().contains("promises 24 bytes of data but it holds 10"));
        std::fs::write(dir.join("train-images-idx3-ubyte"), idx_file(IDX_IMAGES, &[0, 2, 3], &[])).unwrap();
        assert!(mnist(&dir).err().unwrap().to_string().contains("holds no images"));
        std::fs::write(dir.join("train-images-idx3-ubyte"), [0, 0]).unwrap();
        assert!(mnist(&dir).err().unwrap().to_string().contains("ends inside its header"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn cifar_batches_interleave_their_colour_planes() {
        let dir = folder("cifar");
        let plane = CIFAR_SIDE * CIFAR_SIDE;
        // Image of label l: red 1, green 2, blue 3 everywhere but pixel 5, whose red is 200.
        let image = |label: u8| {
            let mut bytes = vec![label];
            bytes.extend([1u8, 2, 3].iter().flat_map(|&c| vec![c; plane]));
            bytes[1 + 5] = 200;
            bytes
        };
        for (i, file) in CIFAR_TRAIN_FILES.iter().enumerate() {
            std::fs::write(dir.join(file), image(i as u8)).unwrap();
        }
        std::fs::write(dir.join("test_batch.bin"), [image(9), image(8)].concat()).unwrap();
        let set = cifar10(&dir).unwrap();
        assert_eq!((set.shape.values(), set.train.len(), set.val.len()), (3072, 5, 2));
        assert_eq!((set.train.label(4), set.val.label(1)), (4, 8));
        let first = set.val.image(0);
        assert_eq!(first[..3], [1.0 / 255.0, 2.0 / 255.0, 3.0 / 255.0]);
        assert_eq!(first[15..18], [200.0 / 255.0, 2.0 / 255.0, 3.0 / 255.0], "pixel 5, its three values together");

        std::fs::write(dir.join("test_batch.bin"), &image(9)[..100]).unwrap();
        assert!(cifar10(&dir).err().unwrap().to_string().contains("not a whole number of CIFAR-10 images of 3073 bytes"));
        std::fs::write(dir.join("test_batch.bin"), image(12)).unwrap();
        assert!(cifar10(&dir).err().unwrap().to_string().contains("label 12"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
