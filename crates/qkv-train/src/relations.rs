//! A procedural image task whose label is a relation between two parts of the image: an 8×8
//! image holds a bright 2×2 square and a dim one on the grid of 2×2 patches, in different rows
//! and columns, over faint noise; the class says where the bright square is from the dim one
//! (left or right, above or below).
//!
//! Why: a class that depends on which part is where from which asks the attention to tell "a
//! from b" from "b from a". A symmetric score (Q=K: i scores j as j scores i) weighs the pair the
//! same both ways, so this is where it may fall behind, as the list tasks that run one way do.
//! Generated in code, the same on every platform (offline and in the browser).

use crate::image_split::{ImageShape, ImageSplit};
use crate::rng::Rng;

/// Image side in pixels, and the squares' side (a ViT of 2×2 patches sees each in one patch).
const SIDE: usize = 8;
const SQUARE: usize = 2;
/// Images per split: the training images are few enough to generate at once and many enough
/// that a small ViT does not learn them by heart.
const TRAIN_IMAGES: usize = 4800;
const HELD_OUT_IMAGES: usize = 1000;
/// Draws the images, whatever the training seed: every seed sees the same set, in its own order.
const TRAIN_SEED: u64 = 0x5E1A_7105;
const HELD_OUT_SEED: u64 = 0x5E1A_7106;
const BRIGHT: f32 = 1.0;
const DIM: f32 = 0.5;
/// Noise on every pixel, uniform in [0, NOISE).
const NOISE: f64 = 0.15;

pub(crate) const CLASSES: [&str; 4] = ["left, above", "left, below", "right, above", "right, below"];

pub(crate) fn shape() -> ImageShape {
    ImageShape { height: SIDE, width: SIDE, channels: 1 }
}

/// Image `index` of the stream `seed`: its pixels and its class (2 · right + below, where the
/// bright square is from the dim one).
fn image(seed: u64, index: usize) -> (Vec<f32>, u8) {
    let mut rng = Rng::for_item(seed, 0, index as u64);
    let cells = SIDE / SQUARE;
    let bright = (rng.below(cells), rng.below(cells));
    // Another row and another column: left or right, above or below, is always decided.
    let dim = ((bright.0 + 1 + rng.below(cells - 1)) % cells, (bright.1 + 1 + rng.below(cells - 1)) % cells);
    let mut pixels: Vec<f32> = (0..SIDE * SIDE).map(|_| (rng.unit() * NOISE) as f32).collect();
    for ((row, column), value) in [(bright, BRIGHT), (dim, DIM)] {
        for y in row * SQUARE..(row + 1) * SQUARE {
            for x in column * SQUARE..(column + 1) * SQUARE {
                pixels[y * SIDE + x] = value;
            }
        }
    }
    let (below, right) = (bright.0 > dim.0, bright.1 > dim.1);
    (pixels, 2 * u8::from(right) + u8::from(below))
}

fn split(seed: u64, count: usize) -> ImageSplit {
    let (pixels, labels): (Vec<Vec<f32>>, Vec<u8>) = (0..count).map(|i| image(seed, i)).unzip();
    ImageSplit::new(pixels.concat(), labels)
}

/// The training and held-out images.
pub(crate) fn splits() -> (ImageSplit, ImageSplit) {
    (split(TRAIN_SEED, TRAIN_IMAGES), split(HELD_OUT_SEED, HELD_OUT_IMAGES))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where the square of `value` is: (row, column) of its top-left pixel.
    fn square(pixels: &[f32], value: f32) -> (usize, usize) {
        let at = pixels.iter().position(|&p| p == value).expect("the square is drawn");
        (at / SIDE, at % SIDE)
    }

    #[test]
    fn the_class_says_where_the_bright_square_is_from_the_dim_one() {
        let (train, held_out) = splits();
        assert_eq!((train.len(), held_out.len()), (TRAIN_IMAGES, HELD_OUT_IMAGES));
        for i in 0..200 {
            let (pixels, label) = (train.image(i), train.label(i));
            let (bright, dim) = (square(pixels, BRIGHT), square(pixels, DIM));
            assert!(bright.0 != dim.0 && bright.1 != dim.1, "image {i}: the squares share a row or a column");
            assert_eq!(label, 2 * u8::from(bright.1 > dim.1) + u8::from(bright.0 > dim.0), "image {i}");
            assert!(pixels.iter().all(|&p| p == BRIGHT || p == DIM || (0.0..NOISE as f32).contains(&p)));
        }
        // Every class about as often as the others, and the same images every time.
        for class in 0..4 {
            let count = (0..train.len()).filter(|&i| train.label(i) == class).count();
            assert!((1000..1400).contains(&count), "class {class}: {count}");
        }
        assert_eq!(splits().0.image(7), train.image(7));
        assert_ne!(train.image(0), held_out.image(0), "the held-out images are others");
    }
}
