//! The desktop shell: the window, the command line, and the smoke test.
//!
//! `qkv-lab --train-for SECS [--lesson N]` starts training at once, prints frame-time and
//! training figures after SECS seconds and exits: the smoke test and the frame-time benchmark.

use std::time::Instant;

use eframe::egui;
use qkv_ui::Playground;

use crate::shell::{self, SETUP_KEY};

/// What the command line asked for.
#[derive(Default)]
struct ShellArgs {
    train_for: Option<f64>,
    lesson: Option<usize>,
    /// Prefer this compute ("wgpu" or "flex") over the automatic choice.
    compute: Option<String>,
    /// Window size in points.
    size: Option<[f32; 2]>,
}

impl ShellArgs {
    fn parse() -> Result<Self, String> {
        let mut parsed = ShellArgs::default();
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            let mut value = |name: &str| args.next().ok_or_else(|| format!("{name} needs a value"));
            match arg.as_str() {
                "--train-for" => {
                    let v = value("--train-for")?;
                    parsed.train_for =
                        Some(v.parse().map_err(|_| format!("--train-for takes seconds, e.g. 10 (got '{v}')"))?);
                }
                "--lesson" => {
                    let v = value("--lesson")?;
                    let n: usize = v.parse().map_err(|_| format!("--lesson takes a number from 1 to {}", qkv_ui::lessons::LESSONS.len()))?;
                    if !(1..=qkv_ui::lessons::LESSONS.len()).contains(&n) {
                        return Err(format!("--lesson takes a number from 1 to {}", qkv_ui::lessons::LESSONS.len()));
                    }
                    parsed.lesson = Some(n - 1);
                }
                "--compute" => {
                    let v = value("--compute")?;
                    if v != "wgpu" && v != "flex" {
                        return Err(format!("--compute takes wgpu or flex (got '{v}')"));
                    }
                    parsed.compute = Some(v);
                }
                "--size" => {
                    let v = value("--size")?;
                    let bad = || format!("--size takes WIDTHxHEIGHT in points, e.g. 1280x720 (got '{v}')");
                    let (w, h) = v.split_once('x').ok_or_else(bad)?;
                    let (w, h): (f32, f32) = (w.parse().map_err(|_| bad())?, h.parse().map_err(|_| bad())?);
                    if !(200.0..=10_000.0).contains(&w) || !(200.0..=10_000.0).contains(&h) {
                        return Err(bad());
                    }
                    parsed.size = Some([w, h]);
                }
                "--help" | "-h" => {
                    println!(
                        "qkv-lab [--train-for SECS] [--lesson N] [--compute wgpu|flex] [--size WxH]\n  opens the QKV Lab playground"
                    );
                    std::process::exit(0);
                }
                other => return Err(format!("unknown argument '{other}': try --help")),
            }
        }
        Ok(parsed)
    }
}

struct Shell {
    playground: Playground,
    train_for: Option<f64>,
    started: Instant,
    smoke_started: bool,
}

impl Shell {
    fn smoke(&mut self, ctx: &egui::Context) {
        let Some(limit) = self.train_for else { return };
        if !self.smoke_started {
            self.playground.train();
            self.smoke_started = true;
            self.started = Instant::now();
        }
        ctx.request_repaint();
        if self.started.elapsed().as_secs_f64() < limit {
            return;
        }
        let mut frames = self.playground.frames.all.clone();
        // The first frames build fonts and pipelines; they are not what a user sees while training.
        let skip = frames.len().min(5);
        frames.drain(..skip);
        frames.sort_by(f64::total_cmp);
        let mean = frames.iter().sum::<f64>() / frames.len().max(1) as f64;
        let p95 = frames.get(frames.len() * 95 / 100).copied().unwrap_or(f64::NAN);
        let ui_work = &self.playground.frames.ui_work[skip.min(self.playground.frames.ui_work.len())..];
        let ui_mean = ui_work.iter().sum::<f64>() / ui_work.len().max(1) as f64;
        println!(
            "qkv-lab smoke: {:.1} s, compute {}, {} frames, mean frame {:.1} ms ({:.0} fps), p95 {:.1} ms, building the UI {:.1} ms per frame",
            limit,
            self.playground.compute_label(),
            frames.len(),
            mean * 1e3,
            1.0 / mean,
            p95 * 1e3,
            ui_mean * 1e3
        );
        for run in &self.playground.view.runs {
            println!(
                "qkv-lab smoke: {}: {} steps, train loss {:.4}, {}",
                run.name(),
                run.steps.len(),
                run.steps.last().map_or(f64::NAN, |s| s.train_loss),
                run.recent_tokens_per_sec().map_or("no steps".into(), |r| format!("{r:.0} tokens/s"))
            );
        }
        if let Some(error) = &self.playground.view.error {
            println!("qkv-lab smoke: error: {error}");
        }
        ctx.send_viewport_cmd(egui::ViewportCommand::Close);
        self.train_for = None;
    }
}

impl eframe::App for Shell {
    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        self.playground.ui(ui);
        let ctx = ui.ctx().clone();
        self.smoke(&ctx);
    }

    fn save(&mut self, storage: &mut dyn eframe::Storage) {
        storage.set_string(SETUP_KEY, self.playground.saved_setup());
    }
}

pub fn run() -> eframe::Result {
    let args = match ShellArgs::parse() {
        Ok(args) => args,
        Err(message) => {
            eprintln!("qkv-lab: {message}");
            std::process::exit(2);
        }
    };
    // Training runs on flex's thread pool; one core stays with the window so it keeps drawing.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let _ = rayon::ThreadPoolBuilder::new().num_threads(cores.saturating_sub(1).max(1)).build_global();

    let options = eframe::NativeOptions {
        viewport: egui::ViewportBuilder::default().with_inner_size(args.size.unwrap_or([1500.0, 920.0])).with_title("QKV Lab"),
        renderer: eframe::Renderer::Wgpu,
        wgpu_options: shell::shared_device_options(),
        ..Default::default()
    };
    eframe::run_native(
        "QKV Lab",
        options,
        Box::new(move |cc| {
            let saved = cc.storage.and_then(|s| s.get_string(SETUP_KEY));
            let (mut computes, no_gpu) = shell::computes(cc, shell::SoftwareGpu::Demote);
            if let Some(why) = no_gpu {
                eprintln!("qkv-lab: {why}; training on the CPU");
            }
            if let Some(wanted) = &args.compute {
                match computes.iter().position(|c| c.label.starts_with(wanted.as_str())) {
                    Some(i) => computes.swap(0, i),
                    None => eprintln!("qkv-lab: no {wanted} device here; using {}", computes[0].label),
                }
            }
            let mut playground = Playground::new(&cc.egui_ctx, computes, saved.as_deref());
            if let Some(lesson) = args.lesson {
                playground.load_lesson(lesson);
            }
            Ok(Box::new(Shell {
                playground,
                train_for: args.train_for,
                started: Instant::now(),
                smoke_started: false,
            }))
        }),
    )
}
