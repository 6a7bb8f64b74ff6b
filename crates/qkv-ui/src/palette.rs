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

/// The attention projections' colours in the cost bars: W_Q, W_K, W_V, a W shared by two or
/// three of them, and W_O. None is a run's colour (a bar segment must not read as a run), and
/// each lies at least [`MIN_DISTANCE`] ΔE from the others and from every run colour, for normal
/// vision and for protan-, deutan- and tritanopia (measured by the test below; the run colours
/// themselves are 11 apart at the least).
pub const W_Q: Color32 = Color32::from_rgb(153, 0, 238);
pub const W_K: Color32 = Color32::from_rgb(68, 51, 170);
pub const W_V: Color32 = Color32::from_rgb(170, 221, 136);
pub const SHARED_W: Color32 = Color32::from_rgb(153, 136, 255);
pub const W_O: Color32 = Color32::from_rgb(119, 51, 17);

/// How far apart (CIE76 ΔE) the projections' colours stay from each other and from the runs'.
pub const MIN_DISTANCE: f32 = 20.0;

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

/// The contrast text needs against its background to be read (WCAG's level AA for body text).
pub const TEXT_CONTRAST: f32 = 4.5;

/// WCAG's relative luminance of an opaque colour, 0 (black) to 1 (white).
pub fn luminance(colour: Color32) -> f32 {
    let linear = |c: u8| {
        let c = c as f32 / 255.0;
        if c <= 0.04045 { c / 12.92 } else { ((c + 0.055) / 1.055).powf(2.4) }
    };
    0.2126 * linear(colour.r()) + 0.7152 * linear(colour.g()) + 0.0722 * linear(colour.b())
}

/// `colour` (premultiplied, maybe translucent) as it shows over the opaque `background`.
pub fn over(colour: Color32, background: Color32) -> Color32 {
    let keep = 1.0 - colour.a() as f32 / 255.0;
    let mix = |c: u8, b: u8| (c as f32 + b as f32 * keep).round().min(255.0) as u8;
    Color32::from_rgb(mix(colour.r(), background.r()), mix(colour.g(), background.g()), mix(colour.b(), background.b()))
}

/// WCAG's contrast ratio of text `colour` over `background`: 1 (none) to 21 (black on white).
pub fn contrast(colour: Color32, background: Color32) -> f32 {
    let (a, b) = (luminance(over(colour, background)), luminance(over(background, Color32::BLACK)));
    (a.max(b) + 0.05) / (a.min(b) + 0.05)
}

/// `colour` as text on `background`: itself where it already reaches [`TEXT_CONTRAST`], else
/// the nearest shade of it that does, darker on a light background and lighter on a dark one (a
/// run's orange reads as dark orange on white, its blue as light blue on black).
pub fn readable(colour: Color32, background: Color32) -> Color32 {
    let colour = over(colour, background);
    let towards = if luminance(background) > 0.18 { Color32::BLACK } else { Color32::WHITE };
    (0..=20)
        .map(|step| lerp(colour, towards, step as f32 / 20.0))
        .find(|&shade| contrast(shade, background) >= TEXT_CONTRAST)
        .unwrap_or(towards)
}

fn lerp(a: Color32, b: Color32, t: f32) -> Color32 {
    let mix = |x: u8, y: u8| (x as f32 + (y as f32 - x as f32) * t).round() as u8;
    Color32::from_rgb(mix(a.r(), b.r()), mix(a.g(), b.g()), mix(a.b(), b.b()))
}

/// A cell a map has no value for (a decoder's later keys): a grey apart from both ends of
/// [`diverging`] and from its white middle.
pub const MASKED: Color32 = Color32::from_rgb(150, 150, 150);

/// Difference −1..1 → blue (negative) through white to red (positive).
pub fn diverging(value: f32) -> Color32 {
    let v = value.clamp(-1.0, 1.0);
    let fade = |strength: f32| (255.0 * (1.0 - strength)) as u8;
    if v >= 0.0 { Color32::from_rgb(255, fade(v), fade(v)) } else { Color32::from_rgb(fade(-v), fade(-v), 255) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// sRGB to CIE L*a*b* (D65).
    fn lab(rgb: [f32; 3]) -> [f32; 3] {
        let [r, g, b] = rgb.map(linear);
        let (x, y, z) = (0.4124 * r + 0.3576 * g + 0.1805 * b, 0.2126 * r + 0.7152 * g + 0.0722 * b, 0.0193 * r + 0.1192 * g + 0.9505 * b);
        let f = |t: f32| if t > 0.008856 { t.cbrt() } else { 7.787 * t + 16.0 / 116.0 };
        let (fx, fy, fz) = (f(x / 0.95047), f(y), f(z / 1.08883));
        [116.0 * fy - 16.0, 500.0 * (fx - fy), 200.0 * (fy - fz)]
    }

    fn linear(c: f32) -> f32 {
        let c = c / 255.0;
        if c <= 0.04045 { c / 12.92 } else { ((c + 0.055) / 1.055).powf(2.4) }
    }

    fn encoded(c: f32) -> f32 {
        255.0 * if c <= 0.003_130_8 { 12.92 * c } else { 1.055 * c.powf(1.0 / 2.4) - 0.055 }
    }

    /// Machado, Oliveira and Fernandes (2009), full severity: how a colour looks without L, M or
    /// S cones, as linear-RGB matrices.
    const VISIONS: [[[f32; 3]; 3]; 4] = [
        [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
        [[0.152_286, 1.052_583, -0.204_868], [0.114_503, 0.786_281, 0.099_216], [-0.003_882, -0.048_116, 1.051_998]],
        [[0.367_322, 0.860_646, -0.227_968], [0.280_085, 0.672_501, 0.047_413], [-0.011_820, 0.042_940, 0.968_881]],
        [[1.255_528, -0.076_749, -0.178_779], [-0.078_411, 0.930_809, 0.147_602], [0.004_733, 0.691_367, 0.303_900]],
    ];

    /// The smallest ΔE between two colours over the four visions.
    fn distance(a: Color32, b: Color32) -> f32 {
        let seen = |c: Color32, m: &[[f32; 3]; 3]| {
            let l = [c.r(), c.g(), c.b()].map(|v| linear(v as f32));
            let mixed = m.map(|row| (row[0] * l[0] + row[1] * l[1] + row[2] * l[2]).clamp(0.0, 1.0));
            lab(mixed.map(encoded))
        };
        VISIONS
            .iter()
            .map(|m| {
                let (p, q) = (seen(a, m), seen(b, m));
                ((p[0] - q[0]).powi(2) + (p[1] - q[1]).powi(2) + (p[2] - q[2]).powi(2)).sqrt()
            })
            .fold(f32::INFINITY, f32::min)
    }

    #[test]
    fn the_projections_colours_stay_apart_from_each_other_and_the_runs_for_colour_blind_eyes_too() {
        let projections = [W_Q, W_K, W_V, SHARED_W, W_O];
        for (i, &a) in projections.iter().enumerate() {
            for &b in projections[i + 1..].iter().chain(&COLOURS) {
                let d = distance(a, b);
                assert!(d >= MIN_DISTANCE, "{a:?} and {b:?} are {d:.1} apart");
            }
        }
        // The measure tells similar colours apart: W_Q's old vermilion and W_O's old orange.
        assert!(distance(Color32::from_rgb(213, 94, 0), Color32::from_rgb(230, 159, 0)) < MIN_DISTANCE);
    }

    #[test]
    fn contrast_is_wcag_s_ratio_and_readable_shades_reach_it_in_the_run_s_own_hue() {
        assert!((contrast(Color32::BLACK, Color32::WHITE) - 21.0).abs() < 1e-3);
        assert!((contrast(Color32::WHITE, Color32::WHITE) - 1.0).abs() < 1e-6);
        // The measurement: the runs' orange as text on white.
        assert!((contrast(colour(1), Color32::WHITE) - 2.25).abs() < 0.05, "{}", contrast(colour(1), Color32::WHITE));
        for background in [Color32::WHITE, Color32::from_gray(27), Color32::BLACK] {
            for c in COLOURS {
                let shade = readable(c, background);
                assert!(contrast(shade, background) >= TEXT_CONTRAST, "{c:?} on {background:?}: {shade:?}");
                // The same hue: the channels keep their order.
                let order = |c: Color32| {
                    let mut channels = [(c.r(), 0), (c.g(), 1), (c.b(), 2)];
                    channels.sort();
                    channels.map(|(_, i)| i)
                };
                if contrast(c, background) < TEXT_CONTRAST && c.r() != c.g() && c.g() != c.b() && c.r() != c.b() {
                    assert_eq!(order(shade)[2], order(c)[2], "{c:?} on {background:?} keeps its strongest channel: {shade:?}");
                }
            }
        }
        assert_eq!(readable(Color32::BLACK, Color32::WHITE), Color32::BLACK, "a colour that reads is kept");
    }

    #[test]
    fn a_new_colour_is_unused_while_there_is_one_and_repeats_after() {
        assert_eq!(first_unused(&[colour(0), colour(2)]), colour(1));
        let all: Vec<Color32> = (0..COLOURS.len()).map(colour).collect();
        assert_eq!(first_unused(&all), colour(0), "nine runs still get a colour");
    }
}
