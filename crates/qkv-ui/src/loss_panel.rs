//! Train and validation loss of every run, overlaid in the runs' colours; accuracy for the
//! synthetic tasks.

use egui::{ComboBox, RichText, Slider, Ui};
use egui_plot::{Line, LineStyle, Plot, PlotPoint, PlotPoints, VLine};
use qkv_train::StepRecord;

use crate::figures::{Figure, decimals};
use crate::intent::Intent;
use crate::smoothing::Ema;
use crate::ticks;
use crate::verdict::verdict_ui;
use crate::view::SessionView;
use crate::widgets::export_buttons;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XAxis {
    Steps,
    Tokens,
    Seconds,
}

impl XAxis {
    fn label(self) -> &'static str {
        match self {
            XAxis::Steps => "steps",
            XAxis::Tokens => "tokens",
            XAxis::Seconds => "seconds",
        }
    }

    /// The least distance between two ticks: steps and tokens are whole.
    fn least_step(self) -> f64 {
        match self {
            XAxis::Steps | XAxis::Tokens => 1.0,
            XAxis::Seconds => 0.0,
        }
    }
}

/// Room right of a chart for half its last x tick label ("500"), which is centred on the chart's
/// right edge.
const TICK_OVERHANG: f32 = 16.0;

pub struct LossPanel {
    pub log_y: bool,
    /// Exponential moving average weight of the past, 0 = raw.
    pub smoothing: f64,
    pub x_axis: XAxis,
    /// Points drawn in the last frame (per curve, summed), for tests and the status line.
    pub points_drawn: usize,
    /// Each run's smoothed training curve as last drawn, extended frame by frame.
    train_curves: Vec<TrainCurve>,
    /// Where the charts were drawn in the last frame (what a PNG export crops).
    pub drawn_at: Option<egui::Rect>,
}

impl Default for LossPanel {
    fn default() -> Self {
        Self { log_y: false, smoothing: 0.6, x_axis: XAxis::Steps, points_drawn: 0, train_curves: Vec::new(), drawn_at: None }
    }
}

/// What a drawn training curve depends on besides its steps: when any of it changes, the curve
/// is drawn afresh.
#[derive(Debug, Clone, Copy, PartialEq)]
struct CurveKey {
    smoothing: f64,
    x_axis: XAxis,
    log_y: bool,
    /// The run's first step (its number and loss): another run in the same place starts over.
    first: Option<(usize, u64)>,
}

/// A run's smoothed training curve as plotted. Each frame adds the steps that arrived since the
/// last one; the history is smoothed once, not every frame (a long run has tens of thousands of
/// steps and the chart redraws at the display's rate while training).
struct TrainCurve {
    key: CurveKey,
    ema: Ema,
    points: Vec<PlotPoint>,
}

impl TrainCurve {
    fn new(key: CurveKey) -> Self {
        Self { key, ema: Ema::new(key.smoothing), points: Vec::new() }
    }

    /// The curve of `steps` under `key`, `point` placing a step and its smoothed loss.
    fn update(&mut self, steps: &[StepRecord], key: CurveKey, point: impl Fn(&StepRecord, f64) -> PlotPoint) -> &[PlotPoint] {
        if key != self.key || steps.len() < self.points.len() {
            *self = Self::new(key);
        }
        for step in &steps[self.points.len()..] {
            let smoothed = self.ema.push(step.train_loss);
            self.points.push(point(step, smoothed));
        }
        &self.points
    }
}

impl LossPanel {
    /// The chart's settings above the chart; what the user asked to export.
    pub fn ui(&mut self, ui: &mut Ui, view: &SessionView) -> Option<Intent> {
        let mut export = None;
        ui.horizontal_wrapped(|ui| {
            ui.checkbox(&mut self.log_y, "log y");
            ui.add(Slider::new(&mut self.smoothing, 0.0..=0.99).text("smoothing"));
            ComboBox::from_label("x axis").selected_text(self.x_axis.label()).show_ui(ui, |ui| {
                for axis in [XAxis::Steps, XAxis::Tokens, XAxis::Seconds] {
                    ui.selectable_value(&mut self.x_axis, axis, axis.label());
                }
            });
            export = export_buttons(ui, Figure::Loss, true).map(Intent::ExportFigure);
        });
        self.chart(ui, view);
        export
    }

    /// Every run's training (solid) and validation (dashed) loss in the space there is, and
    /// below it the validation accuracy where the task has one.
    pub fn chart(&mut self, ui: &mut Ui, view: &SessionView) {
        let top = ui.cursor().min;
        legend_ui(ui, view);
        verdict_ui(ui, view);
        let has_accuracy = view.runs.iter().any(|r| r.evals.iter().any(|e| e.accuracy.is_some()));
        let height = if has_accuracy { ui.available_height() * 0.6 } else { ui.available_height() };
        let x_axis = self.x_axis;
        let x_of = move |step: usize, tokens: usize, secs: f64| match x_axis {
            XAxis::Steps => step as f64,
            XAxis::Tokens => tokens as f64,
            XAxis::Seconds => secs,
        };
        let log_y = self.log_y;
        let y = move |loss: f64| if log_y { loss.max(1e-9).log10() } else { loss };
        let mut points = 0;
        let (smoothing, curves) = (self.smoothing, &mut self.train_curves);
        curves.resize_with(view.runs.len(), || TrainCurve::new(CurveKey { smoothing, x_axis, log_y, first: None }));
        let train_curves: Vec<&[PlotPoint]> = view
            .runs
            .iter()
            .zip(curves.iter_mut())
            .map(|(run, curve)| {
                // A copy's curve starts where it was born: before, it is the original's.
                let own = &run.steps[run.steps.partition_point(|s| s.step < run.born_at.unwrap_or(0))..];
                let first = own.first().map(|s| (s.step, s.train_loss.to_bits()));
                let key = CurveKey { smoothing, x_axis, log_y, first };
                curve.update(own, key, |s, loss| PlotPoint::new(x_of(s.step, s.tokens, s.wall_secs), y(loss)))
            })
            .collect();
        let text = ui.visuals().text_color();
        // Untrained models' losses lie within a hair of each other: a range that narrow gets
        // ticks like 4.3596. Half a nat around them gives round ones until training spreads them.
        // The evaluations and each run's last step tell: not every step, every frame.
        let losses = view.runs.iter().flat_map(|r| r.evals.iter().map(|e| e.val_loss).chain(r.steps.last().map(|s| s.train_loss)));
        let (low, high) = losses.filter(|l| l.is_finite()).fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), l| (lo.min(l), hi.max(l)));
        let (pad_low, pad_high) = if low.is_finite() && high - low < 0.5 { (y(low - 0.25), y(high + 0.25)) } else { (f64::NAN, f64::NAN) };
        // By steps the chart spans the whole of training from the start, so that the curves
        // grow into it and its ticks are whole steps (one untrained point alone read "0.000").
        let planned = view.runs.iter().map(|r| r.info.spec.training.steps).max().unwrap_or(0);
        let span = if x_axis == XAxis::Steps { planned as f64 } else { 0.0 };
        // A log axis keeps egui_plot's decades; a linear one gets round ticks.
        let y_spacer: Box<dyn Fn(egui_plot::GridInput) -> Vec<egui_plot::GridMark>> =
            if log_y { egui_plot::log_grid_spacer(10) } else { Box::new(ticks::spacer(0.0, ticks::LABEL_POINTS[1])) };
        // Room for a tick label such as "4.60" and the axis title from the first frame (egui_plot
        // otherwise widens the axis a frame after its labels overflowed it).
        let axis_width = 4.0 * egui::TextStyle::Body.resolve(ui.style()).size;
        Plot::new("loss_plot")
            .width(ui.available_width() - TICK_OVERHANG)
            .y_axis_min_width(axis_width)
            .height(height.max(120.0))
            .include_x(0.0)
            .include_x(span)
            .include_y(pad_low)
            .include_y(pad_high)
            .x_grid_spacer(ticks::spacer(x_axis.least_step(), ticks::LABEL_POINTS[0]))
            .x_axis_formatter(move |mark, _| x_tick(x_axis, mark.value, mark.step_size))
            .x_axis_label(self.x_axis.label())
            .y_grid_spacer(y_spacer)
            .y_axis_label(if log_y { "loss (log10)" } else { "loss" })
            .y_axis_formatter(move |mark, _| {
                if log_y { format!("{:.2}", 10f64.powf(mark.value)) } else { format!("{:.*}", decimals(mark.step_size), mark.value) }
            })
            .show(ui, |plot| {
                for (run, train_points) in view.runs.iter().zip(train_curves) {
                    let born = run.born_at.unwrap_or(0);
                    let val_points: Vec<[f64; 2]> =
                        run.evals.iter().filter(|e| e.step >= born).map(|e| [x_of(e.step, e.tokens, e.wall_secs), y(e.val_loss)]).collect();
                    points += train_points.len() + val_points.len();
                    plot.line(Line::new(run.label(), PlotPoints::Borrowed(train_points)).color(run.colour.gamma_multiply(0.6)).width(1.5));
                    plot.line(
                        Line::new(run.label(), PlotPoints::from(val_points)).color(run.colour).width(2.5).style(LineStyle::dashed_loose()),
                    );
                    // Where the copy was born, marked across the chart and named in the legend.
                    if let Some(at) = run.steps.iter().find(|s| s.step == born).filter(|_| run.born_at.is_some()) {
                        let marker = VLine::new("W_Q eliminated", x_of(at.step, at.tokens, at.wall_secs));
                        plot.vline(marker.color(text).width(2.0).style(LineStyle::dotted_dense()));
                    }
                }
            });
        if has_accuracy {
            let images = view.runs.first().is_some_and(|run| run.info.spec.model.is_vision());
            // No legend of its own: the loss chart's above names the same colours, and a second
            // one covered the first in a short chart.
            Plot::new("accuracy_plot")
                .width(ui.available_width() - TICK_OVERHANG)
                .y_axis_min_width(axis_width)
                .height(ui.available_height().max(100.0))
                .include_x(0.0)
                .include_x(span)
                .x_grid_spacer(ticks::spacer(x_axis.least_step(), ticks::LABEL_POINTS[0]))
                .x_axis_formatter(move |mark, _| x_tick(x_axis, mark.value, mark.step_size))
                .x_axis_label(self.x_axis.label())
                .y_grid_spacer(ticks::spacer(0.0, ticks::LABEL_POINTS[1]))
                // Short: the two charts' titles stand one above the other, each within its chart.
                .y_axis_label(if images { "held-out acc." } else { "accuracy" })
                .include_y(0.0)
                .include_y(1.0)
                .show(ui, |plot| {
                    for run in &view.runs {
                        let acc: Vec<[f64; 2]> =
                            run.evals.iter().filter_map(|e| e.accuracy.map(|a| [x_of(e.step, e.tokens, e.wall_secs), a])).collect();
                        points += acc.len();
                        plot.line(Line::new(run.label(), PlotPoints::from(acc)).color(run.colour));
                    }
                });
        }
        self.points_drawn = points;
        self.drawn_at = Some(egui::Rect::from_min_max(top, egui::pos2(ui.max_rect().right(), ui.min_rect().bottom())));
    }
}

/// An x tick's label: steps and tokens are whole numbers, so only whole ticks are labelled;
/// seconds with as many decimals as the ticks' spacing needs, so that no two read alike.
fn x_tick(x_axis: XAxis, value: f64, spacing: f64) -> String {
    match x_axis {
        // Ticks are computed in floating point: 100 can arrive as 100.00000000000001.
        XAxis::Steps | XAxis::Tokens if (value - value.round()).abs() > 1e-6 * value.abs().max(1.0) => String::new(),
        XAxis::Steps | XAxis::Tokens => format!("{value:.0}"),
        XAxis::Seconds => format!("{value:.*}", (-spacing.log10()).ceil().max(0.0) as usize),
    }
}

/// The charts' legend, above them where it covers no curve and no tick: each run's label in its
/// colour, what solid and dashed mean, and the step where W_Q was eliminated.
fn legend_ui(ui: &mut Ui, view: &SessionView) {
    ui.horizontal_wrapped(|ui| {
        for run in &view.runs {
            // Each label whole: where the row is full it moves to the next line.
            let label =
                egui::Label::new(RichText::new(run.label()).strong().color(crate::palette::readable(run.colour, ui.visuals().panel_fill)));
            ui.add(label.wrap_mode(egui::TextWrapMode::Extend)).on_hover_text(run.name());
        }
        // These wrap within the row: whole, they ran past a phone's width.
        ui.label(RichText::new("solid: training loss, dashed: validation loss").weak());
        if let Some(born) = view.runs.iter().find_map(|run| run.born_at) {
            ui.label(RichText::new(format!("dotted: W_Q eliminated at step {born}")).weak());
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_are_labelled_whole_and_seconds_with_the_decimals_their_spacing_needs() {
        assert_eq!(x_tick(XAxis::Steps, 100.000_000_000_000_01, 100.0), "100");
        assert_eq!(x_tick(XAxis::Steps, 2.5, 0.5), "", "no half steps");
        assert_eq!(x_tick(XAxis::Seconds, 0.25, 0.05), "0.25");
        assert_eq!(x_tick(XAxis::Seconds, 30.0, 10.0), "30");
    }
    use crate::smoothing::smooth;

    fn steps(losses: &[f64]) -> Vec<StepRecord> {
        losses
            .iter()
            .enumerate()
            .map(|(i, &train_loss)| StepRecord {
                step: i + 1,
                train_loss,
                lr: 1e-3,
                grad_norm: 1.0,
                tokens: 64 * (i + 1),
                tokens_per_sec: 64.0,
                wall_secs: i as f64,
            })
            .collect()
    }

    #[test]
    fn a_curve_grows_by_the_new_steps_and_matches_smoothing_it_whole() {
        let losses = [4.0, 3.5, 3.9, 3.1, 2.8, 3.0, 2.5];
        let key = CurveKey { smoothing: 0.6, x_axis: XAxis::Steps, log_y: false, first: Some((1, 4.0f64.to_bits())) };
        let point = |s: &StepRecord, loss: f64| PlotPoint::new(s.step as f64, loss);
        let mut curve = TrainCurve::new(key);
        let all = steps(&losses);
        curve.update(&all[..3], key, point);
        let drawn: Vec<f64> = curve.update(&all, key, point).iter().map(|p| p.y).collect();
        assert_eq!(drawn, smooth(&losses, 0.6), "extended frame by frame, as smoothed in one go");
        // Another smoothing, or a run that starts over, draws afresh.
        let other = CurveKey { smoothing: 0.0, ..key };
        assert_eq!(curve.update(&all, other, point).iter().map(|p| p.y).collect::<Vec<_>>(), losses);
        let restarted = steps(&[5.0, 4.0]);
        assert_eq!(curve.update(&restarted, other, point).len(), 2);
    }
}
