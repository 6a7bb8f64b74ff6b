//! Figures for slides: the loss chart and the attention maps as SVG, drawn here from the data the
//! panels show with the same colours and names; either as PNG, the screen's own pixels cropped
//! to the panel; and every run's metrics as one CSV (the format `qkv train` writes).

use std::fmt::Write as _;

use egui::{Color32, ColorImage, Rect};
use qkv_session::AttentionMaps;

use crate::palette;
use crate::smoothing::smooth;
use crate::ticks::ticks;
use crate::view::SessionView;

/// What can be exported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Figure {
    Loss,
    AttentionMaps,
}

impl Figure {
    /// The file name, without its extension.
    pub fn stem(self) -> &'static str {
        match self {
            Figure::Loss => "loss",
            Figure::AttentionMaps => "attention-maps",
        }
    }
}

/// What the user asked to export.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Export {
    Svg(Figure),
    Png(Figure),
    /// Every run's metrics.
    Csv,
}

/// Why a PNG could not be made.
#[derive(Debug, thiserror::Error)]
pub enum FigureError {
    #[error("the {0:?} panel is not on screen: show it, then export again")]
    OffScreen(Figure),
    #[error("encoding the PNG")]
    Png(#[from] png::EncodingError),
}

/// A colour as SVG writes it (`#rrggbb`).
fn svg_colour(colour: Color32) -> String {
    format!("#{:02x}{:02x}{:02x}", colour.r(), colour.g(), colour.b())
}

/// Text made safe inside an SVG element or attribute.
fn escaped(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// Decimals enough to tell apart tick labels `step` apart, at least two (at step 0 the losses
/// of a few runs span a hundredth: two decimals printed "4.34" at every tick).
pub fn decimals(step: f64) -> usize {
    if step > 0.0 { ((-step.log10()).ceil().max(0.0) as usize).clamp(2, 6) } else { 2 }
}

/// The loss chart as on screen: per run the training loss smoothed with `smoothing` (solid,
/// faded) and the validation loss (dashed), by step, each run in its colour and named in the
/// legend.
pub fn loss_svg(view: &SessionView, smoothing: f64) -> String {
    const WIDTH: f64 = 960.0;
    const HEIGHT: f64 = 540.0;
    let (left, right, top, bottom) = (70.0, 220.0, 40.0, 50.0);
    // Per run: its (step, loss) points, training then validation.
    type Curve = Vec<(f64, f64)>;
    let curves: Vec<(Curve, Curve)> = view
        .runs
        .iter()
        .map(|run| {
            let losses: Vec<f64> = run.steps.iter().map(|s| s.train_loss).collect();
            let train = run.steps.iter().zip(smooth(&losses, smoothing)).map(|(s, loss)| (s.step as f64, loss)).collect();
            let val = run.evals.iter().map(|e| (e.step as f64, e.val_loss)).collect();
            (train, val)
        })
        .collect();
    let points = || curves.iter().flat_map(|(train, val)| train.iter().chain(val)).filter(|p| p.1.is_finite());
    let max_x = points().map(|p| p.0).fold(1.0, f64::max);
    let (low, high) = points().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), p| (lo.min(p.1), hi.max(p.1)));
    let (low, high) = if low.is_finite() && high > low {
        (low, high)
    } else if low.is_finite() {
        (low - 0.5, low + 0.5)
    } else {
        (0.0, 1.0)
    };
    let plot_w = WIDTH - left - right;
    let plot_h = HEIGHT - top - bottom;
    let x = |v: f64| left + v / max_x * plot_w;
    let y = |v: f64| top + (high - v) / (high - low) * plot_h;

    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="14">"#
    );
    let _ = writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ =
        writeln!(svg, r#"<text x="{left}" y="24" font-size="16">loss: solid training (smoothed {smoothing:.2}), dashed validation</text>"#);
    let _ = writeln!(svg, r##"<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#444"/>"##);
    let y_ticks = ticks(low, high, 0.0);
    let y_decimals = decimals(y_ticks.get(1).zip(y_ticks.first()).map_or(0.1, |(b, a)| b - a));
    for tick in &y_ticks {
        let py = y(*tick);
        let _ = writeln!(svg, r##"<line x1="{left}" x2="{}" y1="{py:.1}" y2="{py:.1}" stroke="#ddd"/>"##, left + plot_w);
        let _ = writeln!(svg, r#"<text x="{}" y="{:.1}" text-anchor="end">{tick:.y_decimals$}</text>"#, left - 6.0, py + 5.0);
    }
    for tick in ticks(0.0, max_x, 1.0) {
        let px = x(tick);
        let _ = writeln!(svg, r#"<text x="{px:.1}" y="{}" text-anchor="middle">{tick:.0}</text>"#, top + plot_h + 20.0);
    }
    let _ = writeln!(svg, r#"<text x="{}" y="{}" text-anchor="middle">steps</text>"#, left + plot_w / 2.0, HEIGHT - 8.0);
    let path = |points: &[(f64, f64)]| {
        points.iter().filter(|p| p.1.is_finite()).map(|&(px, py)| format!("{:.1},{:.1}", x(px), y(py))).collect::<Vec<_>>().join(" ")
    };
    for (run, (train, val)) in view.runs.iter().zip(&curves) {
        let colour = svg_colour(run.colour);
        let name = escaped(run.label());
        let _ = writeln!(
            svg,
            r#"<polyline fill="none" stroke="{colour}" stroke-opacity="0.6" stroke-width="1.5" points="{}"><title>{name} training</title></polyline>"#,
            path(train)
        );
        let _ = writeln!(
            svg,
            r#"<polyline fill="none" stroke="{colour}" stroke-width="2.5" stroke-dasharray="7 5" points="{}"><title>{name} validation</title></polyline>"#,
            path(val)
        );
    }
    for (i, run) in view.runs.iter().enumerate() {
        let ly = top + 10.0 + i as f64 * 24.0;
        let lx = WIDTH - right + 16.0;
        let _ = writeln!(
            svg,
            r#"<line x1="{lx}" x2="{}" y1="{ly}" y2="{ly}" stroke="{}" stroke-width="3"/>"#,
            lx + 24.0,
            svg_colour(run.colour)
        );
        let _ = writeln!(svg, r#"<text x="{}" y="{}">{}</text>"#, lx + 32.0, ly + 5.0, escaped(run.label()));
    }
    svg.push_str("</svg>\n");
    svg
}

/// Every run's attention maps as on screen: a layer × head grid per run, under its name in its
/// colour, each map's cells in the panel's colours, with the prompt's tokens written out.
pub fn maps_svg(maps: &AttentionMaps, view: &SessionView) -> String {
    const CELL: f64 = 4.0;
    const GAP: f64 = 10.0;
    let time = maps.time();
    let side = time as f64 * CELL;
    let layers = maps.runs.first().map_or(0, Vec::len);
    let heads = maps.runs.first().and_then(|r| r.first()).map_or(0, Vec::len);
    let block = heads as f64 * (side + GAP) + 3.0 * GAP;
    let width = (maps.runs.len() as f64 * block).max(400.0);
    let height = 70.0 + layers as f64 * (side + GAP) + 30.0;
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="13">"#
    );
    let _ = writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let prompt: Vec<String> = maps.tokens.iter().map(|t| escaped(&t.replace('\n', "\\n"))).collect();
    let _ = writeln!(
        svg,
        r#"<text x="10" y="20">attention at step {}, rows are queries, columns keys; prompt: {}</text>"#,
        maps.step,
        prompt.join(" ")
    );
    for (r, run_maps) in maps.runs.iter().enumerate() {
        let x0 = 10.0 + r as f64 * block;
        let (name, colour) = view.runs.get(r).map_or(("?".to_string(), Color32::GRAY), |run| (escaped(run.label()), run.colour));
        let _ = writeln!(svg, r#"<text x="{x0}" y="48" fill="{}" font-weight="bold">{name}</text>"#, svg_colour(colour));
        for (l, layer) in run_maps.iter().enumerate() {
            for (h, map) in layer.iter().enumerate() {
                let (mx, my) = (x0 + h as f64 * (side + GAP), 60.0 + l as f64 * (side + GAP));
                let _ = writeln!(svg, r#"<g transform="translate({mx},{my})"><title>{name}: layer {l}, head {h}</title>"#);
                for (i, p) in map.iter().enumerate() {
                    let (q, k) = (i / time, i % time);
                    let _ = write!(
                        svg,
                        r#"<rect x="{}" y="{}" width="{CELL}" height="{CELL}" fill="{}"/>"#,
                        k as f64 * CELL,
                        q as f64 * CELL,
                        svg_colour(palette::heat(*p))
                    );
                }
                svg.push_str("</g>\n");
            }
        }
    }
    svg.push_str("</svg>\n");
    svg
}

/// Every run's metrics, one row per step, in the format `qkv train` writes.
pub fn metrics_csv(view: &SessionView) -> String {
    qkv_train::csv::metrics_table(view.runs.iter().map(|run| (&run.info.spec, &run.steps[..], &run.evals[..])))
}

/// The part of a screenshot taken at `pixels_per_point` that `rect` (in points) covers, as PNG.
pub fn png(screen: &ColorImage, rect: Rect, pixels_per_point: f32, figure: Figure) -> Result<Vec<u8>, FigureError> {
    let [width, height] = screen.size;
    let to_pixels = |v: f32, limit: usize| ((v * pixels_per_point).round().max(0.0) as usize).min(limit);
    let (x0, x1) = (to_pixels(rect.left(), width), to_pixels(rect.right(), width));
    let (y0, y1) = (to_pixels(rect.top(), height), to_pixels(rect.bottom(), height));
    if x1 <= x0 || y1 <= y0 {
        return Err(FigureError::OffScreen(figure));
    }
    let mut rgba = Vec::with_capacity((x1 - x0) * (y1 - y0) * 4);
    for row in y0..y1 {
        for pixel in &screen.pixels[row * width + x0..row * width + x1] {
            rgba.extend_from_slice(&pixel.to_srgba_unmultiplied());
        }
    }
    let mut bytes = Vec::new();
    let mut encoder = png::Encoder::new(&mut bytes, (x1 - x0) as u32, (y1 - y0) as u32);
    encoder.set_color(png::ColorType::Rgba);
    encoder.set_depth(png::BitDepth::Eight);
    encoder.write_header()?.write_image_data(&rgba)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tick_labels_have_the_decimals_their_spacing_needs() {
        assert_eq!(decimals(0.5), 2);
        assert_eq!(decimals(0.001), 3);
        assert_eq!(decimals(0.0002), 4);
        assert_eq!(decimals(0.0), 2);
    }

    #[test]
    fn a_crop_of_the_screen_is_a_png_of_that_size() {
        let mut screen = ColorImage::filled([20, 10], Color32::WHITE);
        screen.pixels[3 * 20 + 5] = Color32::RED;
        let bytes = png(&screen, Rect::from_min_max(egui::pos2(2.0, 1.0), egui::pos2(8.0, 4.0)), 1.0, Figure::Loss).unwrap();
        let decoder = png::Decoder::new(std::io::Cursor::new(bytes));
        let mut reader = decoder.read_info().unwrap();
        let mut pixels = vec![0; reader.output_buffer_size().unwrap()];
        let info = reader.next_frame(&mut pixels).unwrap();
        assert_eq!((info.width, info.height), (6, 3));
        assert_eq!(&pixels[(2 * 6 + 3) * 4..][..4], &[255, 0, 0, 255], "the red pixel, where the crop puts it");
        let off = png(&screen, Rect::from_min_max(egui::pos2(30.0, 1.0), egui::pos2(40.0, 4.0)), 1.0, Figure::Loss);
        assert!(matches!(off, Err(FigureError::OffScreen(Figure::Loss))));
    }
}
