//! Figures out of the app ([`crate::figures`]): an SVG or CSV is written at once; a PNG asks the
//! renderer for the frame and crops the panel from it when the frame arrives.

use std::sync::Arc;

use egui::ColorImage;

use super::Playground;
use crate::figures::{self, Export, Figure, FigureError};
use crate::files::OutgoingFile;

/// The screenshot a PNG export waits for, filled by the renderer's callback.
pub(super) type ScreenshotSlot = Arc<egui::mutex::Mutex<Option<Arc<ColorImage>>>>;

/// What leaves the app besides runs: figures asked for, PNGs waiting for their frame, and the
/// link that opens the setup.
#[derive(Default)]
pub(super) struct Exports {
    /// Figures asked for, exported on the next frame.
    pub(super) wanted: Vec<Export>,
    /// PNG exports waiting for the frame they crop: which figure, where it was drawn.
    pub(super) png_pending: Vec<(Figure, egui::Rect)>,
    pub(super) screenshot: ScreenshotSlot,
    /// A link that opens this setup, where the shell has one (the browser's address).
    pub(super) share_link: Option<String>,
}

impl Playground {
    /// Exports `what` (into the export folder; the browser downloads), on the next frame.
    pub fn export_figure(&mut self, what: Export) {
        self.exports.wanted.push(what);
    }

    /// Writes what was asked for since the last frame, and a PNG whose screenshot has come.
    pub(super) fn export_figures(&mut self, ctx: &egui::Context) {
        let screen = self.exports.screenshot.lock().take();
        if let Some(screen) = screen {
            for (figure, rect) in std::mem::take(&mut self.exports.png_pending) {
                match figures::png(&screen, rect, ctx.pixels_per_point(), figure) {
                    Ok(bytes) => self.save_figure(figure.stem(), "png", "image/png", bytes),
                    Err(e) => self.tell(e.to_string(), true),
                }
            }
        }
        let waiting = !self.exports.png_pending.is_empty();
        for what in std::mem::take(&mut self.exports.wanted) {
            match what {
                Export::Svg(Figure::Loss) => {
                    let svg = figures::loss_svg(&self.view, self.panels.loss.smoothing);
                    self.save_figure("loss", "svg", "image/svg+xml", svg.into_bytes());
                }
                Export::Svg(Figure::AttentionMaps) => match self.view.attention() {
                    Some(maps) => {
                        let svg = figures::maps_svg(maps, &self.view);
                        self.save_figure("attention-maps", "svg", "image/svg+xml", svg.into_bytes());
                    }
                    None => self.tell("no attention maps yet: apply a setup first".into(), true),
                },
                Export::Csv => self.save_figure("metrics", "csv", "text/csv", figures::metrics_csv(&self.view).into_bytes()),
                Export::Png(figure) => {
                    let drawn_at = match figure {
                        Figure::Loss => self.panels.loss.drawn_at,
                        Figure::AttentionMaps => self.panels.attention.drawn_at,
                    };
                    let Some(rect) = drawn_at else {
                        self.tell(FigureError::OffScreen(figure).to_string(), true);
                        continue;
                    };
                    self.exports.png_pending.push((figure, rect));
                }
            }
        }
        // One frame serves every PNG asked for in it.
        if !waiting && !self.exports.png_pending.is_empty() {
            let (slot, waker) = (self.exports.screenshot.clone(), ctx.clone());
            ctx.send_viewport_cmd(egui::ViewportCommand::Screenshot(egui::ScreenshotCallback::new(move |image| {
                *slot.lock() = Some(image);
                waker.request_repaint();
            })));
        }
    }

    /// Hands one exported file to the platform, named after what it is and the step.
    fn save_figure(&mut self, stem: &str, extension: &str, mime: &'static str, bytes: Vec<u8>) {
        let name = format!("{stem}-step{}.{extension}", self.view.step());
        self.save(&[OutgoingFile { name, bytes, mime }]);
    }
}
