//! How the app looks on a projector: presentation mode's text sizes, chosen so that at 1280×720
//! (one pixel per point) body text is 20 points and the smallest label 15, and a light
//! high-contrast theme, since projectors wash out dark themes and thin grey text.

use egui::{Color32, FontFamily, FontId, Stroke, Style, TextStyle, Visuals};

use crate::palette::readable;

/// Body text and buttons in presentation mode, in points.
pub const BODY_POINTS: f32 = 20.0;
/// The smallest text presentation mode draws (axis, head and token labels), in points.
pub const LABEL_POINTS: f32 = 15.0;
/// The most tokens the large map shows in presentation mode: 32 rows of a map 512 points tall
/// leave each token label its 15 points.
pub const MAP_WINDOW: usize = 32;

/// What the user chose: presentation mode, and the theme.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Look {
    pub presenting: bool,
    pub high_contrast: bool,
}

impl Look {
    /// `base` (the shell's style) as this look asks.
    pub fn style(self, base: &Style) -> Style {
        let mut style = base.clone();
        if self.presenting {
            let sizes = [
                (TextStyle::Heading, 30.0, FontFamily::Proportional),
                (TextStyle::Body, BODY_POINTS, FontFamily::Proportional),
                (TextStyle::Button, BODY_POINTS, FontFamily::Proportional),
                (TextStyle::Monospace, 18.0, FontFamily::Monospace),
                (TextStyle::Small, LABEL_POINTS, FontFamily::Proportional),
            ];
            for (text_style, size, family) in sizes {
                style.text_styles.insert(text_style, FontId::new(size, family));
            }
            style.spacing.button_padding = egui::vec2(10.0, 4.0);
            style.spacing.interact_size.y = 30.0;
            style.spacing.item_spacing = egui::vec2(10.0, 6.0);
        }
        if self.high_contrast {
            style.visuals = high_contrast();
        }
        readable_text(&mut style.visuals);
        style
    }
}

/// Every text colour of `visuals` in a shade that reads on its panels, at least
/// [`TEXT_CONTRAST`]: egui's dark theme draws weak text at about 2.6:1 and errors in pure red at
/// 4.3:1.
fn readable_text(visuals: &mut Visuals) {
    let panel = visuals.panel_fill;
    visuals.weak_text_color = Some(readable(visuals.weak_text_color(), panel));
    visuals.error_fg_color = readable(visuals.error_fg_color, panel);
    visuals.warn_fg_color = readable(visuals.warn_fg_color, panel);
    visuals.hyperlink_color = readable(visuals.hyperlink_color, panel);
    match visuals.override_text_color {
        Some(text) => visuals.override_text_color = Some(readable(text, panel)),
        None => {
            let text = &mut visuals.widgets.noninteractive.fg_stroke.color;
            *text = readable(*text, panel);
        }
    }
}

/// Black on white with dark outlines: what a washed-out projector still shows.
pub fn high_contrast() -> Visuals {
    let mut visuals = Visuals::light();
    visuals.override_text_color = Some(Color32::BLACK);
    visuals.panel_fill = Color32::WHITE;
    visuals.window_fill = Color32::WHITE;
    // Text fields and the progress bar's track: set off from the panel.
    visuals.extreme_bg_color = Color32::from_gray(238);
    visuals.faint_bg_color = Color32::from_gray(235);
    let outline = Stroke::new(1.5, Color32::BLACK);
    visuals.widgets.noninteractive.bg_stroke = Stroke::new(1.0, Color32::from_gray(90));
    visuals.widgets.inactive.bg_stroke = outline;
    visuals.widgets.inactive.bg_fill = Color32::from_gray(225);
    visuals.widgets.inactive.weak_bg_fill = Color32::from_gray(225);
    visuals.widgets.hovered.bg_stroke = Stroke::new(2.0, Color32::BLACK);
    visuals.widgets.active.bg_stroke = Stroke::new(2.5, Color32::BLACK);
    visuals
}

/// The tokens presentation mode's maps show of a prompt of `time` tokens on a map `side` points
/// square: the last ones (where the model has the most context), as many as leave each row its
/// [`LABEL_POINTS`], and at most [`MAP_WINDOW`].
pub fn map_window(time: usize, side: f32) -> std::ops::Range<usize> {
    let rows = ((side / LABEL_POINTS) as usize).clamp(4, MAP_WINDOW);
    time.saturating_sub(rows)..time
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::palette::{TEXT_CONTRAST, contrast};

    #[test]
    fn presentation_mode_sizes_every_text_style_at_least_to_the_smallest_label() {
        let style = Look { presenting: true, high_contrast: false }.style(&Style::default());
        for (text_style, font) in &style.text_styles {
            assert!(font.size >= LABEL_POINTS, "{text_style:?} is {} points", font.size);
        }
        assert_eq!(style.text_styles[&TextStyle::Body].size, BODY_POINTS);
        let plain = Look::default().style(&Style::default());
        assert_eq!(plain.text_styles, Style::default().text_styles, "outside presentation mode the style is the shell's");
    }

    /// Every colour text is drawn in, against the backgrounds it is drawn on, in each theme the
    /// app shows (egui's dark and light, and the high-contrast light theme), the runs' colours
    /// in the shade [`crate::widgets::coloured`] draws them in.
    #[test]
    fn every_text_colour_reads_at_4_5_to_1_in_every_theme() {
        for (theme, base) in [("dark", Visuals::dark()), ("light", Visuals::light())] {
            for high_contrast in [false, true] {
                let base = Style { visuals: base.clone(), ..Style::default() };
                let visuals = Look { presenting: false, high_contrast }.style(&base).visuals;
                let backgrounds = [("panel", visuals.panel_fill), ("window", visuals.window_fill)];
                let mut texts = vec![
                    ("text", visuals.text_color()),
                    ("weak text", visuals.weak_text_color()),
                    ("error", visuals.error_fg_color),
                    ("warning", visuals.warn_fg_color),
                    ("link", visuals.hyperlink_color),
                ];
                let runs: Vec<Color32> = (0..8).map(|i| readable(crate::palette::colour(i), visuals.panel_fill)).collect();
                texts.extend(runs.iter().map(|&c| ("run colour", c)));
                for (what, colour) in &texts {
                    for (on, background) in backgrounds {
                        let ratio = contrast(*colour, background);
                        assert!(
                            ratio >= TEXT_CONTRAST,
                            "{theme} (high contrast {high_contrast}): {what} {colour:?} on the {on} is {ratio:.2}:1"
                        );
                    }
                }
                // Button labels on buttons, and Train's on its highlight.
                let button = &visuals.widgets.inactive;
                let pairs = [
                    ("button", button.text_color(), button.weak_bg_fill),
                    ("Train", visuals.selection.stroke.color, visuals.selection.bg_fill),
                ];
                for (what, text, background) in pairs {
                    let ratio = contrast(text, background);
                    assert!(ratio >= TEXT_CONTRAST, "{theme} (high contrast {high_contrast}): {what} at {ratio:.2}:1");
                }
            }
        }
    }

    #[test]
    fn the_large_map_shows_the_last_tokens_when_presenting() {
        assert_eq!(map_window(64, 512.0), 32..64);
        assert_eq!(map_window(17, 512.0), 0..17);
        assert_eq!(map_window(64, 282.0), 46..64, "a smaller map, fewer rows of 15 points");
    }
}
