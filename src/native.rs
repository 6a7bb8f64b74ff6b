//! The desktop shell: the window, the command line, and the smoke test.
//!
//! `qkv-lab --train-for SECS [--lesson N]` starts training at once, prints frame-time and
//! training figures after SECS seconds (or when training ends, with how long it took) and exits:
//! the smoke test, the frame-time benchmark, and how long a lesson runs.

use std::path::PathBuf;
use std::time::Instant;

use eframe::egui;
use qkv_compute::{Backend, Compute};
use qkv_session::SessionTask;
use qkv_ui::files::{FileError, PathChoice};
use qkv_ui::hidden::Hidden;
use qkv_ui::{ComputeOffer, Platform, Playground};

use crate::shell::{self, COMPUTE_KEY, SETUP_KEY};

/// What the command line asked for.
#[derive(clap::Parser)]
#[command(name = "qkv-lab", about = "Opens the QKV Lab playground")]
struct ShellArgs {
    /// Start training at once, print frame-time and training figures after SECS seconds, or
    /// when training ends, and exit (the smoke test, the frame-time benchmark, how long a lesson
    /// runs: its pauses are passed as a teacher would).
    #[arg(long, value_name = "SECS", value_parser = seconds)]
    train_for: Option<f64>,
    /// Open lesson N (counted from 1).
    #[arg(long, value_name = "N", value_parser = shell::lesson_index)]
    lesson: Option<usize>,
    /// Train on this compute (else the app times each on the first Train and remembers the
    /// fastest).
    #[arg(long, value_enum)]
    compute: Option<Backend>,
    /// The window's size in points (else 1500x920, or less where the screen is smaller).
    #[arg(long, value_name = "WIDTHxHEIGHT", value_parser = window_size)]
    size: Option<[f32; 2]>,
    /// Open in presentation mode (key P): large text, the setup hidden.
    #[arg(long)]
    presentation: bool,
    /// Hide controls not yet introduced: a comma-separated list of setup, compute, tabs,
    /// classroom, files, theory, steps.
    #[arg(long, value_name = "LIST", value_parser = hidden)]
    hide: Option<Hidden>,
}

/// A `--hide` list, checked before the window opens.
fn hidden(text: &str) -> Result<Hidden, String> {
    Hidden::parse(text).map_err(|e| e.to_string())
}

/// The window's size when the command line gives none.
const DEFAULT_SIZE: [f32; 2] = [1500.0, 920.0];

/// The window's size shrunk to fit a monitor of `monitor` points, less room for the desktop's
/// bars and the window's frame; `None` where it fits already.
fn fitted(window: egui::Vec2, monitor: egui::Vec2) -> Option<egui::Vec2> {
    let room = monitor - egui::vec2(40.0, 80.0);
    let fits = window.x <= room.x && window.y <= room.y;
    (!fits && room.x >= 200.0 && room.y >= 200.0).then(|| window.min(room))
}

fn seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(secs) if secs.is_finite() && secs > 0.0 => Ok(secs),
        _ => Err("takes seconds above zero, e.g. 10".into()),
    }
}

fn window_size(text: &str) -> Result<[f32; 2], String> {
    let bad = || "takes WIDTHxHEIGHT in points between 200 and 10000, e.g. 1280x720".to_string();
    let (w, h) = text.split_once('x').ok_or_else(bad)?;
    let (w, h): (f32, f32) = (w.parse().map_err(|_| bad())?, h.parse().map_err(|_| bad())?);
    let fits = |v: f32| (200.0..=10_000.0).contains(&v);
    if fits(w) && fits(h) { Ok([w, h]) } else { Err(bad()) }
}

/// The desktop: sessions on threads of their own, files named by path in folders (the
/// platform's default file handling), chosen in the system's dialogs or typed.
struct Desktop;

impl Platform for Desktop {
    fn spawn_session(&self, task: SessionTask) {
        std::thread::Builder::new().name("qkv-session".into()).spawn(move || task.run_blocking()).expect("the OS can start a thread");
    }

    fn default_folder(&self) -> Option<String> {
        let folder = std::env::current_dir().map_or_else(|_| "qkv-lab-exports".into(), |d| d.join("qkv-lab-exports"));
        Some(folder.display().to_string())
    }

    /// The system's dialog (a desktop portal on Linux), modal: the window waits while it is
    /// open, training does not.
    fn choose_path(&self, choice: PathChoice) -> Result<Option<PathBuf>, FileError> {
        let mut dialog = rfd::FileDialog::new();
        if let Ok(here) = std::env::current_dir() {
            dialog = dialog.set_directory(here);
        }
        Ok(match choice {
            PathChoice::File(kind) => dialog.add_filter(kind.description(), kind.extensions()).pick_file(),
            PathChoice::Folder => dialog.pick_folder(),
        })
    }
}

struct Shell {
    playground: Playground,
    train_for: Option<f64>,
    started: Instant,
    smoke_started: bool,
    /// The window still has its default size, which may not fit the screen: checked once the
    /// monitor's size is known (winit tells it only after the window opens).
    fit_to_screen: bool,
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
        // At a lesson's pause it goes on as the teacher would, so that a lesson runs whole.
        if self.playground.discussing() {
            self.playground.go_on();
        }
        let ended = self.playground.view().finished;
        if self.started.elapsed().as_secs_f64() < limit && !ended {
            return;
        }
        if ended {
            println!(
                "qkv-lab smoke: training ended at step {} after {:.1} s",
                self.playground.view().step(),
                self.started.elapsed().as_secs_f64()
            );
        }
        let mut frames = self.playground.frames().all.clone();
        // The first frames build fonts and pipelines; they are not what a user sees while training.
        let skip = frames.len().min(5);
        frames.drain(..skip);
        frames.sort_by(f64::total_cmp);
        let mean = frames.iter().sum::<f64>() / frames.len().max(1) as f64;
        let p95 = frames.get(frames.len() * 95 / 100).copied().unwrap_or(f64::NAN);
        let ui_work = &self.playground.frames().ui_work[skip.min(self.playground.frames().ui_work.len())..];
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
        match (self.playground.timing(), self.playground.compute_choice()) {
            (Some(label), _) => println!("qkv-lab smoke: compute choice: still timing {label}"),
            (None, Some(verdict)) => println!("qkv-lab smoke: compute choice: {}", verdict.summary()),
            (None, None) => println!("qkv-lab smoke: compute choice: none made"),
        }
        for run in &self.playground.view().runs {
            println!(
                "qkv-lab smoke: {}: {} steps, train loss {:.4}, {}",
                run.name(),
                run.steps.len(),
                run.steps.last().map_or(f64::NAN, |s| s.train_loss),
                run.recent_tokens_per_sec().map_or("no steps".into(), |r| format!("{r:.0} tokens/s"))
            );
        }
        if let Some(error) = &self.playground.view().error {
            println!("qkv-lab smoke: error: {error}");
        }
        ctx.send_viewport_cmd(egui::ViewportCommand::Close);
        self.train_for = None;
    }
}

impl eframe::App for Shell {
    fn ui(&mut self, ui: &mut egui::Ui, frame: &mut eframe::Frame) {
        if let Some(secs) = frame.info().cpu_usage {
            self.playground.record_repaint(f64::from(secs));
        }
        self.playground.ui(ui);
        let ctx = ui.ctx().clone();
        if self.fit_to_screen {
            let (window, monitor) = ctx.input(|i| (i.viewport().inner_rect.map(|r| r.size()), i.viewport().monitor_size));
            if let (Some(window), Some(monitor)) = (window, monitor) {
                self.fit_to_screen = false;
                if let Some(size) = fitted(window, monitor) {
                    ctx.send_viewport_cmd(egui::ViewportCommand::InnerSize(size));
                }
            }
        }
        self.smoke(&ctx);
    }

    fn save(&mut self, storage: &mut dyn eframe::Storage) {
        storage.set_string(SETUP_KEY, self.playground.saved_setup());
        if let Some(choice) = self.playground.saved_compute_choice() {
            storage.set_string(COMPUTE_KEY, choice);
        }
    }
}

pub fn run() -> eframe::Result {
    // A bad argument exits with clap's message and status 2; --help prints the options.
    let args = <ShellArgs as clap::Parser>::parse();
    // `QKV_PRODUCT` pins the matrix product as an option would; a value this build has no product
    // for stops here as a bad option does, rather than leave the product timed while the user
    // believes it pinned.
    if let Err(unknown) = qkv_kernels::product_from_env() {
        eprintln!("error: {unknown}");
        std::process::exit(2);
    }
    // Training runs on flex's thread pool; one core stays with the window so it keeps drawing.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let _ = rayon::ThreadPoolBuilder::new().num_threads(cores.saturating_sub(1).max(1)).build_global();

    let options = eframe::NativeOptions {
        viewport: egui::ViewportBuilder::default().with_inner_size(args.size.unwrap_or(DEFAULT_SIZE)).with_title("QKV Lab"),
        renderer: eframe::Renderer::Wgpu,
        wgpu_options: shell::shared_device_options(),
        ..Default::default()
    };
    eframe::run_native(
        "QKV Lab",
        options,
        Box::new(move |cc| {
            let saved = cc.storage.and_then(|s| s.get_string(SETUP_KEY));
            let remembered = cc.storage.and_then(|s| s.get_string(COMPUTE_KEY));
            let (mut computes, no_gpu) = shell::computes(cc, shell::SoftwareGpu::Demote);
            if let Some(why) = no_gpu {
                eprintln!("qkv-lab: {why}; training on the CPU");
            }
            // A build with a native GPU backend is made for that GPU: offered first (the window
            // keeps drawing with wgpu).
            computes.splice(0..0, pollster::block_on(Compute::native_gpus()));
            if let Some(wanted) = args.compute {
                match computes.iter().position(|c| c.backend() == wanted) {
                    Some(i) => computes.swap(0, i),
                    None if !wanted.is_built() => eprintln!(
                        "qkv-lab: this build has no {wanted} backend (build it with `cargo run --release --features {wanted}`); \
                         using {}",
                        computes[0].id
                    ),
                    None => eprintln!("qkv-lab: no {wanted} device here; using {}", computes[0].id),
                }
            }
            let offer = ComputeOffer { computes, pinned: args.compute.is_some(), remembered };
            let mut playground = Playground::new(&cc.egui_ctx, Box::new(Desktop), offer, saved.as_deref());
            if let Some(lesson) = args.lesson {
                playground.load_lesson(lesson);
            }
            if args.presentation {
                playground.set_look(qkv_ui::presentation::Look { presenting: true, ..playground.look() });
            }
            if let Some(hidden) = args.hide {
                playground.hide(hidden);
            }
            let fit_to_screen = args.size.is_none();
            Ok(Box::new(Shell { playground, train_for: args.train_for, started: Instant::now(), smoke_started: false, fit_to_screen }))
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn parse(args: &[&str]) -> Result<ShellArgs, String> {
        ShellArgs::try_parse_from(std::iter::once("qkv-lab").chain(args.iter().copied())).map_err(|e| e.to_string())
    }

    #[test]
    fn the_options_parse_into_what_the_shell_uses() {
        let args = parse(&[
            "--train-for",
            "8",
            "--lesson",
            "3",
            "--compute",
            "flex",
            "--size",
            "1280x720",
            "--presentation",
            "--hide",
            "setup,tabs",
        ])
        .unwrap();
        assert!(args.presentation);
        assert_eq!(args.hide, Some(Hidden::parse("setup,tabs").unwrap()));
        assert_eq!(args.train_for, Some(8.0));
        assert_eq!(args.lesson, Some(2), "lessons are counted from 1 on the command line");
        assert_eq!(args.compute, Some(Backend::Flex));
        assert_eq!(args.size, Some([1280.0, 720.0]));
        let none = parse(&[]).unwrap();
        assert!(none.train_for.is_none() && none.lesson.is_none() && none.compute.is_none() && none.size.is_none());
    }

    #[test]
    fn the_default_window_shrinks_to_a_smaller_screen_and_no_further() {
        let window = egui::vec2(1500.0, 920.0);
        assert_eq!(fitted(window, egui::vec2(1280.0, 720.0)), Some(egui::vec2(1240.0, 640.0)), "a projector");
        assert_eq!(fitted(window, egui::vec2(1366.0, 1024.0)), Some(egui::vec2(1326.0, 920.0)), "only as far as needed");
        assert_eq!(fitted(window, egui::vec2(1920.0, 1080.0)), None, "it fits");
        assert_eq!(fitted(window, egui::vec2(100.0, 100.0)), None, "a monitor size that cannot be right");
    }

    #[test]
    fn bad_values_say_what_they_take() {
        let lessons = qkv_ui::lessons::LESSONS.len();
        for (args, expected) in [
            (vec!["--train-for", "soon"], "seconds above zero".to_string()),
            (vec!["--lesson", "0"], format!("from 1 to {lessons}")),
            (vec!["--lesson", &(lessons + 1).to_string()], format!("from 1 to {lessons}")),
            (vec!["--compute", "tpu"], "wgpu".to_string()),
            (vec!["--size", "12x9000"], "WIDTHxHEIGHT".to_string()),
            (vec!["--hide", "setup,maps"], "setup, compute, tabs".to_string()),
            (vec!["--frobnicate"], "--frobnicate".to_string()),
        ] {
            let error = parse(&args).err().unwrap_or_default();
            assert!(error.contains(&expected), "{args:?}: {error}");
        }
    }
}
