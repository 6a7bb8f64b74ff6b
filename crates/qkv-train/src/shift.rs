//! Small-shift augmentation for images: a training image moved by a pixel or two, so that a
//! model with few images to learn from cannot learn each pixel's place by heart.

use crate::image_split::ImageShape;
use crate::rng::Rng;

/// `image` (HWC, `shape`) moved `down` rows and `right` columns onto `out`; what the move leaves
/// uncovered is 0, the images' background.
pub fn shifted_onto(image: &[f32], shape: ImageShape, down: isize, right: isize, out: &mut Vec<f32>) {
    let (height, width, channels) = (shape.height as isize, shape.width as isize, shape.channels);
    for y in 0..height {
        for x in 0..width {
            let (from_y, from_x) = (y - down, x - right);
            if (0..height).contains(&from_y) && (0..width).contains(&from_x) {
                let at = (from_y * width + from_x) as usize * channels;
                out.extend_from_slice(&image[at..at + channels]);
            } else {
                out.extend(std::iter::repeat_n(0.0, channels));
            }
        }
    }
}

/// A move of up to `shift` pixels each way, each of its 2·shift + 1 offsets as likely.
pub fn draw_offsets(rng: &mut Rng, shift: usize) -> (isize, isize) {
    let mut offset = || rng.below(2 * shift + 1) as isize - shift as isize;
    (offset(), offset())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHAPE: ImageShape = ImageShape { height: 2, width: 3, channels: 1 };

    #[test]
    fn a_shift_moves_the_pixels_and_fills_with_zero() {
        let image = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let shift = |down, right| {
            let mut out = Vec::new();
            shifted_onto(&image, SHAPE, down, right, &mut out);
            out
        };
        assert_eq!(shift(0, 0), image);
        assert_eq!(shift(0, 1), [0.0, 1.0, 2.0, 0.0, 4.0, 5.0]);
        assert_eq!(shift(1, 0), [0.0, 0.0, 0.0, 1.0, 2.0, 3.0]);
        assert_eq!(shift(-1, -1), [5.0, 6.0, 0.0, 0.0, 0.0, 0.0]);
        let rgb = ImageShape { height: 1, width: 2, channels: 3 };
        let mut out = Vec::new();
        shifted_onto(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], rgb, 0, 1, &mut out);
        assert_eq!(out, [0.0, 0.0, 0.0, 1.0, 2.0, 3.0], "a pixel's channels move together");
    }

    #[test]
    fn every_offset_is_drawn_and_none_beyond_the_shift() {
        let mut rng = Rng::new(7);
        let drawn: Vec<(isize, isize)> = (0..500).map(|_| draw_offsets(&mut rng, 1)).collect();
        for down in -1..=1 {
            for right in -1..=1 {
                assert!(drawn.contains(&(down, right)), "({down}, {right}) drawn");
            }
        }
        assert!(drawn.iter().all(|&(d, r)| d.abs() <= 1 && r.abs() <= 1));
    }
}
