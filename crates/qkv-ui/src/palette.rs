//! Run colours: distinct on a projector and for the common colour-vision deficiencies
//! (Okabe–Ito order).

use egui::Color32;

const COLOURS: [Color32; 8] = [
    Color32::from_rgb(0, 114, 178),
    Color32::from_rgb(230, 159, 0),
    Color32::from_rgb(0, 158, 115),
    Color32::from_rgb(204, 121, 167),
    Color32::from_rgb(86, 180, 233),
    Color32::from_rgb(213, 94, 0),
    Color32::from_rgb(240, 228, 66),
    Color32::from_rgb(120, 120, 120),
];

/// The default colour of the `index`-th run.
pub fn colour(index: usize) -> Color32 {
    COLOURS[index % COLOURS.len()]
}

/// The first palette colour not in `used`; when every one is taken, colours repeat in order.
pub fn first_unused(used: &[Color32]) -> Color32 {
    COLOURS.iter().copied().find(|c| !used.contains(c)).unwrap_or_else(|| colour(used.len()))
}

/// Probability 0..1 → a dark-to-bright sequential colour (viridis-like, by hand-picked stops).
pub fn heat(value: f32) -> Color32 {
    const STOPS: [[f32; 3]; 5] = [[68.0, 1.0, 84.0], [59.0, 82.0, 139.0], [33.0, 145.0, 140.0], [94.0, 201.0, 98.0], [253.0, 231.0, 37.0]];
    let v = value.clamp(0.0, 1.0) * (STOPS.len() - 1) as f32;
    let i = (v.floor() as usize).min(STOPS.len() - 2);
    let t = v - i as f32;
    let mix = |c: usize| (STOPS[i][c] + (STOPS[i + 1][c] - STOPS[i][c]) * t) as u8;
    Color32::from_rgb(mix(0), mix(1), mix(2))
}

/// Difference −1..1 → blue (negative) through white to red (positive).
pub fn diverging(value: f32) -> Color32 {
    let v = value.clamp(-1.0, 1.0);
    let fade = |strength: f32| (255.0 * (1.0 - strength)) as u8;
    if v >= 0.0 { Color32::from_rgb(255, fade(v), fade(v)) } else { Color32::from_rgb(fade(-v), fade(-v), 255) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_colour_is_unused_while_there_is_one_and_repeats_after() {
        assert_eq!(first_unused(&[colour(0), colour(2)]), colour(1));
        let all: Vec<Color32> = (0..COLOURS.len()).map(colour).collect();
        assert_eq!(first_unused(&all), colour(0), "nine runs still get a colour");
    }
}
