//! The default demo driven through the UI, rendered with wgpu (lavapipe on a machine without a
//! GPU): press Step, and the loss plot, the parameter panel and the attention grid fill in.
//!
//! Snapshots live in tests/snapshots; `UPDATE_SNAPSHOTS=1` rewrites them after an intended
//! change of the UI. `QKV_SCREENSHOTS=DIR` with `--include-ignored` also renders every classroom
//! lesson into DIR.

#![allow(clippy::unwrap_used, reason = "test helpers: a failed unwrap fails the test, as an assertion would")]

use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use egui::vec2;
use egui_kittest::kittest::Queryable;
use egui_kittest::{Harness, SnapshotOptions};
use qkv_compute::{Backend, ComputeId};
use qkv_model::ParamReport;
use qkv_model::burn::tensor::Device;
use qkv_session::SessionTask;
use qkv_ui::compute_choice::ChosenBy;
use qkv_ui::files::{FileError, FileKind, IncomingFile, KeptInbox, KeptRuns, PathChoice};
use qkv_ui::{Compute, ComputeOffer, Platform, Playground};

type State = Option<Playground>;

/// A desktop-like platform for the tests (the real ones belong to the shells): sessions on
/// threads, the default file handling (folders), and path dialogs that answer at once with
/// `chosen` where a test gives it (none otherwise).
#[derive(Clone, Default)]
struct TestPlatform {
    chosen: Option<ChosenPaths>,
}

/// What the test platform's dialogs answer: a file of each kind, and a folder.
#[derive(Clone)]
struct ChosenPaths {
    text: std::path::PathBuf,
    checkpoint: std::path::PathBuf,
    folder: std::path::PathBuf,
}

impl Platform for TestPlatform {
    fn spawn_session(&self, task: SessionTask) {
        std::thread::spawn(move || task.run_blocking());
    }

    fn default_folder(&self) -> Option<String> {
        Some(std::env::temp_dir().display().to_string())
    }

    fn choose_path(&self, choice: PathChoice) -> Result<Option<std::path::PathBuf>, FileError> {
        let Some(chosen) = &self.chosen else { return Ok(None) };
        Ok(Some(match choice {
            PathChoice::File(FileKind::Text) => chosen.text.clone(),
            PathChoice::File(FileKind::Checkpoint) => chosen.checkpoint.clone(),
            PathChoice::Folder => chosen.folder.clone(),
        }))
    }
}

/// A browser-like platform for the autosave test: it keeps the runs in memory shared by every
/// "visit", as the browser's storage outlives a page.
#[derive(Clone, Default)]
struct KeepingPlatform {
    kept: Rc<RefCell<Option<KeptRuns>>>,
}

impl Platform for KeepingPlatform {
    fn spawn_session(&self, task: SessionTask) {
        std::thread::spawn(move || task.run_blocking());
    }

    fn default_folder(&self) -> Option<String> {
        None
    }

    fn keeps_runs(&self) -> bool {
        true
    }

    fn keep_runs(&self, runs: KeptRuns) {
        *self.kept.borrow_mut() = Some(runs);
    }

    fn kept_runs(&self, inbox: &KeptInbox) {
        if let Some(kept) = self.kept.borrow().clone() {
            inbox.deliver(kept);
        }
    }
}

fn harness() -> Harness<'static, State> {
    harness_of_size(vec2(1500.0, 920.0))
}

fn harness_of_size(size: egui::Vec2) -> Harness<'static, State> {
    harness_on(size, || Box::new(TestPlatform::default()))
}

fn harness_on(size: egui::Vec2, platform: impl Fn() -> Box<dyn Platform> + 'static) -> Harness<'static, State> {
    harness_offering(size, platform, || vec![Compute::cpu()].into())
}

fn harness_offering(
    size: egui::Vec2,
    platform: impl Fn() -> Box<dyn Platform> + 'static,
    offer: impl Fn() -> ComputeOffer + 'static,
) -> Harness<'static, State> {
    Harness::builder().with_size(size).wgpu().build_ui_state(
        move |ui, state: &mut State| {
            let playground = state.get_or_insert_with(|| Playground::new(ui.ctx(), platform(), offer(), None));
            playground.ui(ui);
        },
        None,
    )
}

fn playground<'h>(harness: &'h Harness<'_, State>) -> &'h Playground {
    harness.state().as_ref().expect("built on the first frame")
}

/// Runs frames until `done` holds (the session trains on its own thread), for two minutes at most.
fn run_until(harness: &mut Harness<'_, State>, what: &str, done: impl Fn(&Playground) -> bool) {
    run_until_within(harness, what, Duration::from_secs(120), done);
}

/// Runs frames until `done` holds, for `limit` at most.
fn run_until_within(harness: &mut Harness<'_, State>, what: &str, limit: Duration, done: impl Fn(&Playground) -> bool) {
    let deadline = Instant::now() + limit;
    loop {
        // A frame first: it delivers pending clicks and the session's messages.
        harness.step();
        if done(playground(harness)) {
            break;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        if let Some(error) = &playground(harness).view().error {
            panic!("the session failed while waiting for {what}: {error}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    harness.run_steps(3);
}

/// The frame-time readout and the throughput figures change from run to run.
/// Each mask is as wide as the longest such label gets, so that a figure with more digits (or
/// narrower ones) does not move the mask's edge.
fn mask_timings(harness: &mut Harness<'_, State>) {
    const WIDTH: f32 = 360.0;
    for label in ["frame ", "tokens/s", "images/s"] {
        let rects: Vec<_> = harness.query_all_by_label_contains(label).map(|node| node.rect()).collect();
        for rect in rects {
            harness.mask(egui::Rect::from_min_size(rect.min, egui::vec2(rect.width().max(WIDTH), rect.height())));
        }
    }
}

/// Before anyone presses Train the playground already shows what the setup is about: the
/// lesson's text, the parameter and KV-cache bars and the untrained models' attention maps. And
/// on a projector's 1280×720 every field of the setup fits beside the main area.
#[test]
fn the_first_screen_shows_the_setup_untrained_and_fits_1280_by_720() {
    let mut harness = harness_of_size(vec2(1280.0, 720.0));
    run_until(&mut harness, "the untrained attention maps", |p| p.drawn().attention_maps > 0);
    let app = playground(&harness);
    assert_eq!((app.view().step(), app.view().playing), (0, false), "nothing trained");
    assert_eq!(app.drawn().attention_maps, 2 * 2 * 4, "2 runs × 2 layers × 4 heads, untrained");
    for run in &app.view().runs {
        let total = ParamReport::new(&run.info.spec.model).total_params;
        assert!(harness.query_by_label(&format!("{total} ({:.3} M)", total as f64 / 1e6)).is_some(), "the parameter bars");
        assert!(run.evals.first().is_some_and(|e| e.step == 0), "the untrained loss, the curves' first point");
    }
    let lesson = &qkv_ui::lessons::LESSONS[0];
    assert!(harness.query_by_label_contains(&lesson.explanation[..40]).is_some(), "the default setup is the first lesson's");

    let main_area = harness.get_by_label("Loss").rect().min.x;
    let fields = ["layers", "heads", "width", "context", "steps", "batch", "seed", "learning rate", "weight decay"];
    let per_run = [
        "colour of run 1",
        "name of run 1",
        "variant of run 1",
        "copy",
        "remove",
        "kv heads",
        "attention scale",
        "run weight decay",
        "MLP hidden",
    ];
    for name in fields.into_iter().chain(per_run) {
        let rects: Vec<_> = harness.query_all_by_label(name).map(|node| node.rect()).collect();
        assert!(!rects.is_empty(), "no field {name}");
        for rect in rects {
            assert!(rect.max.x <= main_area, "{name} is cut off: it ends at x = {} but the main area starts at {main_area}", rect.max.x);
        }
    }
    mask_timings(&mut harness);
    harness.snapshot_options("first_screen_1280x720", &SnapshotOptions::new().max_failed_pixels(200));
}

#[test]
fn stepping_the_default_demo_fills_every_panel() {
    let mut harness = harness();
    harness.run_steps(2);
    harness.get_by_label("Step").click();
    run_until(&mut harness, "the first step", |p| p.view().step() >= 1);
    for _ in 0..4 {
        let before = playground(&harness).view().step();
        harness.get_by_label("Step").click();
        run_until(&mut harness, "another step", |p| p.view().step() > before);
    }

    let app = playground(&harness);
    assert_eq!(app.view().step(), 5);
    assert_eq!(app.view().runs.len(), 2, "standard and wq-identity");
    // Five train points and the step-0 evaluation per run.
    assert!(app.drawn().loss_points >= 2 * 6, "loss plot has {} points", app.drawn().loss_points);
    assert_eq!(app.drawn().attention_maps, 2 * 2 * 4, "2 runs × 2 layers × 4 heads");
    // Each run's diagnostics under its maps; wq-identity has no W_Q to compare with W_K.
    let diagnostics = app.view().attention().map(|maps| maps.diagnostics.clone()).unwrap_or_default();
    assert_eq!(diagnostics.len(), 2);
    assert!(diagnostics[0].layers[0].query_key_cosine.is_some() && diagnostics[1].layers[0].query_key_cosine.is_none());
    assert!(diagnostics.iter().all(|d| d.layers.iter().all(|l| !l.effective_ranks.is_empty())), "a narrow model has its ranks");
    let lines = harness.query_all_by_label_contains("cos(W_K,W_V)").count();
    assert_eq!(lines, 2, "one line of diagnostics per run");
    for run in &app.view().runs {
        let total = ParamReport::new(&run.info.spec.model).total_params;
        let label = format!("{total} ({:.3} M)", total as f64 / 1e6);
        assert!(harness.query_by_label(&label).is_some(), "the parameter panel shows {label}");
    }

    mask_timings(&mut harness);
    harness.snapshot_options("default_demo_after_5_steps", &SnapshotOptions::new().max_failed_pixels(200));
}

/// Picking images as the data brings the vision preset along; the playground then trains ViTs
/// and shows held-out digits with each run's answers, where each class token looks, and the
/// held-out accuracy.
#[test]
fn the_images_choice_trains_vits_and_shows_their_answers() {
    let mut harness = harness();
    harness.run_steps(2);
    harness.get_by_role_and_label(egui::accesskit::Role::ComboBox, "data").click();
    harness.run_steps(2);
    harness.get_by_label("images (8×8 digits)").click();
    harness.run_steps(2);
    let setup = &harness.state_mut().as_mut().unwrap().setup_mut().plan;
    assert_eq!((setup.preset.name(), setup.data.to_string()), ("vision-digits", "digits".to_string()));
    harness.get_by_label_contains("Apply setup").click();
    run_until(&mut harness, "the untrained maps", |p| p.view().attention().is_some_and(|maps| maps.images.is_some()));
    harness.get_by_label("Step").click();
    run_until(&mut harness, "the first step", |p| p.view().step() >= 1);
    harness.run_steps(3);

    let app = playground(&harness);
    assert_eq!(app.drawn().attention_maps, 2 * 3 * 4, "2 runs × 3 layers × 4 heads");
    for text in ["Held-out images", "Where the class token looks: last layer, mean over heads", "held-out accuracy"] {
        assert!(harness.query_all_by_label_contains(text).count() >= 1, "{text} is on screen");
    }
    let maps = app.view().attention().unwrap();
    assert_eq!(maps.predictions.len(), 2);
    // The strip names each image's class: the first held-out digit is a 5.
    let first = maps.images.as_ref().unwrap().labels[0];
    assert!(harness.query_all_by_label(&first.to_string()).count() >= 1);
    assert!(harness.query_by_label("attention prompt").is_none(), "the maps read a held-out image, not a prompt");
}

#[test]
fn an_enlarged_head_shows_its_logits_beside_its_probabilities() {
    let mut harness = harness();
    harness.run_steps(2);
    harness.get_by_label("Step").click();
    run_until(&mut harness, "the first step", |p| p.view().step() >= 1 && p.view().attention().is_some());
    harness.state_mut().as_mut().unwrap().select_head((0, 1, 2));
    harness.run_steps(4);
    assert!(harness.query_by_label("its logits, before the softmax").is_some(), "the logits view is beside the map");
    let maps = playground(&harness).view().attention().cloned().expect("maps");
    let largest = maps.logits[0][1][2]
        .iter()
        .enumerate()
        .filter(|(i, _)| i % maps.time() <= i / maps.time())
        .fold(0.0f32, |m, (_, z)| m.max(z.abs()));
    let scale = format!("full colour at ±{largest:.2}; grey: later keys, masked");
    assert!(harness.query_by_label_contains(&scale).is_some(), "the logits' own scale is shown: {scale}");
}

#[test]
fn a_dropped_text_becomes_the_data_and_a_dropped_checkpoint_continues_its_run() {
    let mut harness = harness();
    harness.run_steps(2);
    let text = "the quick brown fox jumps over the lazy dog\n".repeat(200);
    let app = harness.state_mut().as_mut().unwrap();
    app.receive(IncomingFile { name: "fox.txt".into(), bytes: vec![0xc3, 0x28] });
    let notice = app.notice().unwrap();
    assert!(notice.1 && notice.0.contains("not UTF-8"), "{notice:?}");
    app.receive(IncomingFile { name: "fox.txt".into(), bytes: text.into_bytes() });
    assert_eq!(app.setup_mut().plan.data.to_string(), "fox.txt");
    harness.get_by_label("Step").click();
    run_until(&mut harness, "a step on the dropped text", |p| p.view().step() >= 1);
    assert_eq!(playground(&harness).view().data.as_ref().map(ToString::to_string).as_deref(), Some("fox.txt"));
    // The vocabulary is the dropped text's: 28 distinct characters, not Shakespeare's.
    assert_eq!(playground(&harness).view().runs[0].info.spec.model.vocab_size, 28);

    // Export the first run, then hand its checkpoint back as a dropped file.
    harness
        .state_mut()
        .as_mut()
        .unwrap()
        .set_export_folder(std::env::temp_dir().join(format!("qkv-drop-test-{}", std::process::id())).display().to_string());
    let name = playground(&harness).view().runs[0].name().to_string();
    harness.state_mut().as_mut().unwrap().export(qkv_session::RunId(0));
    run_until(&mut harness, "the export", |p| p.notice().is_some_and(|n| n.0.starts_with("saved")));
    let dir = std::path::PathBuf::from(&playground(&harness).export_folder());
    let bytes = std::fs::read(dir.join(format!("{name}.qkv"))).unwrap();
    std::fs::remove_dir_all(&dir).ok();
    harness.state_mut().as_mut().unwrap().receive(IncomingFile { name: format!("{name}.qkv"), bytes });
    run_until(&mut harness, "the imported run", |p| p.view().runs.len() == 1 && p.view().runs[0].steps.len() == 1);
    harness.get_by_label("Step").click();
    run_until(&mut harness, "a step of the imported run", |p| p.view().step() == 2);
}

/// On the desktop the setup's text, the export folder and a checkpoint to continue are named by
/// path: typed, or chosen in the system's dialog, which fills the field in.
#[test]
fn the_desktop_dialogs_fill_in_the_text_the_folder_and_the_checkpoint() {
    let dir = std::env::temp_dir().join(format!("qkv-dialog-test-{}", std::process::id()));
    let chosen = ChosenPaths { text: dir.join("fox.txt"), checkpoint: dir.join("missing.qkv"), folder: dir.join("exports") };
    let (text, folder) = (chosen.text.clone(), chosen.folder.clone());
    let platform = TestPlatform { chosen: Some(chosen) };
    let mut harness = harness_on(vec2(1500.0, 920.0), move || Box::new(platform.clone()));
    harness.run_steps(2);
    harness.state_mut().as_mut().unwrap().setup_mut().plan.data = qkv_train::DataSource::File(String::new());
    harness.run_steps(2);
    harness.get_by_label("browse…").click();
    harness.run_steps(2);
    assert_eq!(playground(&harness).setup().plan.data, qkv_train::DataSource::File(text.display().to_string()));

    harness.get_by_label("Export and import").click();
    harness.run_steps(2);
    harness.get_by_label("choose…").click();
    harness.run_steps(2);
    assert_eq!(playground(&harness).export_folder(), folder.display().to_string());

    // The second "browse…" is the checkpoint's; a path that holds no file says so.
    harness.query_all_by_label("browse…").last().expect("the checkpoint's browse button").click();
    harness.run_steps(2);
    let notice = playground(&harness).notice().expect("a notice");
    assert!(notice.1 && notice.0.contains("missing.qkv"), "{notice:?}");
}

#[test]
fn a_bad_setup_shows_its_error_and_the_app_keeps_running() {
    let mut harness = harness();
    harness.run_steps(2);
    harness.state_mut().as_mut().unwrap().setup_mut().plan.model.n_head = Some(5);
    harness.get_by_label("Step").click();
    let deadline = Instant::now() + Duration::from_secs(60);
    while playground(&harness).view().error.is_none() {
        assert!(Instant::now() < deadline, "no error shown");
        std::thread::sleep(Duration::from_millis(20));
        harness.step();
    }
    harness.run_steps(2);
    let error = playground(&harness).view().error.clone().unwrap();
    assert!(error.contains("n_head"), "{error}");
    assert!(harness.query_by_label_contains("n_head").is_some(), "the error is on screen");

    // Fixing the setup recovers.
    harness.state_mut().as_mut().unwrap().setup_mut().plan.model.n_head = None;
    harness.get_by_label("Step").click();
    run_until(&mut harness, "a step after the fix", |p| p.view().step() >= 1);
}

#[test]
fn eliminating_w_q_in_the_theory_lesson_adds_an_identical_run() {
    let mut harness = harness();
    harness.run_steps(2);
    harness.state_mut().as_mut().unwrap().load_lesson(4);
    for _ in 0..3 {
        let before = playground(&harness).view().step();
        harness.get_by_label("Step").click();
        run_until(&mut harness, "a step", |p| p.view().step() > before);
    }
    harness.get_by_label("Eliminate W_Q from Q-K-V").click();
    run_until(&mut harness, "the conversion", |p| p.view().conversion.is_some());
    let app = playground(&harness);
    let (_, report) = app.view().conversion.as_ref().unwrap();
    assert!(report.exact && report.max_abs_logit_diff < 1e-4, "{report:?}");
    assert_eq!(app.view().runs.len(), 2);
    let converted = &app.view().runs[1];
    assert_eq!(converted.steps.len(), 3, "the converted run's curve continues the original's");
    assert_eq!(converted.info.spec.model.attention.variant, qkv_model::AttentionVariant::QueryIdentity);
    assert!(harness.query_by_label_contains("max |logit difference|").is_some());
    assert_eq!(app.drawn().attention_maps, 2 * 2 * 2, "both runs' maps: 2 layers × 2 heads");
}

/// Runs frames until `done` holds, going on as Space does wherever the lesson paused by itself
/// for discussion.
fn train_until(harness: &mut Harness<'_, State>, what: &str, done: impl Fn(&Playground) -> bool) {
    loop {
        // A whole lesson (the screenshots') is hundreds of steps of several runs.
        run_until_within(harness, what, Duration::from_secs(900), |p| done(p) || p.discussing());
        if done(playground(harness)) {
            return;
        }
        harness.state_mut().as_mut().unwrap().train();
        run_until(harness, "training again after the pause", |p| p.view().playing || p.view().finished || done(p));
    }
}

/// Lesson `index` as a class sees it: trained for `steps` steps, past its pause for
/// discussion; in the theory lesson, W_Q eliminated where the lesson pauses for it, after 100
/// steps ("train a while", as its text says and its test does), and 40 steps more, long enough
/// to see the copy jump and catch up; then paused.
fn teach(harness: &mut Harness<'_, State>, index: usize, steps: usize) {
    let lesson = &qkv_ui::lessons::LESSONS[index];
    harness.state_mut().as_mut().unwrap().load_lesson(index);
    harness.state_mut().as_mut().unwrap().train();
    if lesson.screen == qkv_ui::lessons::Screen::Elimination {
        run_until(harness, "the pause before converting", |p| p.discussing());
        assert!(playground(harness).view().step() >= 100, "the lesson pauses after 100 steps");
        assert!(playground(harness).awaits_elimination(), "with Eliminate W_Q highlighted");
        harness.get_by_label("Eliminate W_Q from Q-K-V").click();
        run_until(harness, "the conversion", |p| p.view().conversion.is_some());
        let converted_at = playground(harness).view().step();
        harness.state_mut().as_mut().unwrap().train();
        train_until(harness, "training after it", |p| p.view().step() >= converted_at + 40 || p.view().finished);
    } else {
        train_until(harness, lesson.title, |p| p.view().step() >= steps || p.view().finished);
    }
    harness.state_mut().as_mut().unwrap().pause();
    run_until(harness, "the pause", |p| !p.view().playing);
}

/// Lesson 3 stops by itself when Q-K-V gets every digit right, says what to ask the room, and
/// Space goes on; it does not stop there twice.
#[test]
fn a_lesson_pauses_by_itself_at_its_moment_to_discuss_and_space_goes_on() {
    let mut harness = harness_of_size(vec2(1280.0, 720.0));
    harness.run_steps(2);
    harness.state_mut().as_mut().unwrap().load_lesson(2);
    harness.state_mut().as_mut().unwrap().train();
    run_until(&mut harness, "the pause for discussion", |p| p.discussing());
    let app = playground(&harness);
    let reference = app.view().reference().unwrap();
    assert_eq!(reference.label(), "Q-K-V");
    assert!(reference.evals.iter().any(|e| e.accuracy == Some(1.0)), "paused when Q-K-V reached 100%");
    let (notice, _) = app.notice().unwrap();
    assert!(notice.starts_with("Paused: Q-K-V now gets every digit right") && notice.ends_with("Space goes on."), "{notice}");
    assert!(!app.awaits_elimination(), "a pause to discuss the maps does not highlight Eliminate W_Q");
    let paused_at = app.view().step();
    harness.key_press(egui::Key::Space);
    // Training goes on, unless the pause landed so late that the lesson's steps were all done.
    run_until(&mut harness, "training on", |p| (p.view().playing && p.view().step() > paused_at) || p.view().finished);
    // Twenty steps more, or to the end where the pause came late (under load the session trains
    // on for a while before the frame that pauses it): no second pause on the way.
    run_until(&mut harness, "twenty steps more", |p| {
        assert!(!p.discussing(), "one pause per lesson");
        p.view().step() >= paused_at + 20 || p.view().finished
    });
    assert!(!playground(&harness).discussing(), "one pause per lesson");
    harness.state_mut().as_mut().unwrap().pause();
    run_until(&mut harness, "the pause", |p| !p.view().playing);
}

/// Renders each classroom lesson after a few steps into $QKV_SCREENSHOTS (for docs/): a tool,
/// not a check, so it runs only when asked for (CONTRIBUTING.md has the command).
#[test]
#[ignore = "a tool: QKV_SCREENSHOTS=DIR renders the lessons there (-- --ignored lesson_screenshots)"]
fn lesson_screenshots() {
    let dir = std::env::var_os("QKV_SCREENSHOTS").expect("QKV_SCREENSHOTS=DIR: the folder to render the lessons into");
    let steps: usize = std::env::var("QKV_SCREENSHOT_STEPS").ok().and_then(|s| s.parse().ok()).unwrap_or(60);
    std::fs::create_dir_all(&dir).unwrap();
    for index in 0..qkv_ui::lessons::LESSONS.len() {
        let mut harness = harness();
        harness.run_steps(2);
        teach(&mut harness, index, steps);
        // Click the first head so that the enlarged view and the difference show too.
        harness.state_mut().as_mut().unwrap().select_head((0, 1, 0));
        harness.run_steps(4);
        let image = harness.render().expect("rendered");
        let path = std::path::Path::new(&dir).join(format!("lesson-{}.png", index + 1));
        image.save(&path).unwrap();
        eprintln!("wrote {}", path.display());
    }
}

#[test]
fn the_setup_survives_a_restart_and_a_damaged_one_is_replaced() {
    let ctx = egui::Context::default();
    let flex = || vec![Compute::cpu()];
    let mut first = Playground::new(&ctx, Box::new(TestPlatform::default()), flex(), None);
    first.load_lesson(2);
    first.setup_mut().plan.training.steps = Some(123);
    let saved = first.saved_setup();
    let second = Playground::new(&ctx, Box::new(TestPlatform::default()), flex(), Some(&saved));
    assert_eq!(second.setup(), first.setup());
    assert!(second.notice().is_none());

    let damaged = Playground::new(&ctx, Box::new(TestPlatform::default()), flex(), Some("{\"plan\": 7"));
    assert_eq!(damaged.setup(), &qkv_ui::setup_panel::Setup::default());
    let (notice, is_error) = damaged.notice().unwrap();
    assert!(is_error && notice.contains("saved setup could not be read"), "{notice}");
}

/// Where the platform keeps runs (the browser), every run is kept as training passes each 50
/// steps, and the next visit offers them back: Continue trains on from there, curves and all.
#[test]
fn runs_kept_by_the_platform_are_offered_on_the_next_visit_and_continue() {
    let storage = KeepingPlatform::default();
    let first_visit = storage.clone();
    let mut harness = harness_on(vec2(1500.0, 920.0), move || Box::new(first_visit.clone()));
    run_until(&mut harness, "the setup loaded", |p| p.view().is_loaded());
    harness.get_by_label("Train").click();
    run_until(&mut harness, "50 steps kept", |_| storage.kept.borrow().as_ref().is_some_and(|k| k.step >= 50));
    let kept = storage.kept.borrow().clone().unwrap();
    let names: Vec<&str> = kept.files.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["standard.qkv", "wq-identity.qkv"]);
    drop(harness);

    let second_visit = storage.clone();
    let mut harness = harness_on(vec2(1500.0, 920.0), move || Box::new(second_visit.clone()));
    run_until(&mut harness, "the kept runs offered", |p| p.kept_offer().is_some());
    assert_eq!(playground(&harness).kept_offer(), Some(kept.step));
    harness.get_by_label_contains("from your last visit are kept at step");
    harness.get_by_label("Continue them").click();
    run_until(&mut harness, "3 steps past the kept ones", |p| p.view().step() >= kept.step + 3);
    let app = playground(&harness);
    assert!(app.kept_offer().is_none(), "the offer is taken");
    for run in &app.view().runs {
        assert!(run.steps.len() >= kept.step + 3, "{}: the curve did not continue ({} steps)", run.name(), run.steps.len());
        assert_eq!(run.steps[0].step, 1, "{}: the curve starts where the first visit's did", run.name());
    }
    harness.get_by_label("Pause").click();
    harness.run_steps(3);
}

/// Two computes (two names for the CPU here, so that the test runs anywhere): the first Train
/// times both, trains on the faster and says so; the curve goes on without a gap wherever the
/// winner was; the next visit starts on the remembered choice and times nothing; a compute the
/// user names is never timed over.
#[test]
fn the_first_train_times_each_compute_and_the_faster_trains_on_and_is_remembered() {
    let two = |remembered: Option<String>, pinned: bool| {
        let computes = ["A (CPU)", "B (CPU)"].map(|adapter| Compute::on(ComputeId::on(Backend::Flex, adapter), Device::flex())).to_vec();
        move || ComputeOffer { computes: computes.clone(), pinned, remembered: remembered.clone() }
    };
    let mut harness = harness_offering(vec2(1500.0, 920.0), || Box::new(TestPlatform::default()), two(None, false));
    run_until(&mut harness, "the setup loaded", |p| p.view().is_loaded());
    harness.get_by_label("Train").click();
    run_until(&mut harness, "the trial started", |p| p.timing().is_some());
    assert_eq!(playground(&harness).timing(), Some("flex: A (CPU)".to_string()), "the compute the playground is on is timed first");
    run_until(&mut harness, "both computes timed", |p| p.timing().is_none());
    let app = playground(&harness);
    let verdict = app.compute_choice().expect("a verdict").clone();
    assert_eq!(verdict.by, ChosenBy::Timing);
    let secs: Vec<f64> = verdict.timed.iter().map(|t| t.secs_per_step.expect("both could be timed")).collect();
    assert_eq!(verdict.timed.len(), 2);
    let fastest = if secs[0] <= secs[1] { "flex: A (CPU)" } else { "flex: B (CPU)" };
    assert_eq!(verdict.chosen.to_string(), fastest, "{verdict:?}");
    assert_eq!(app.compute_label(), fastest);
    let (notice, is_problem) = app.notice().unwrap();
    assert!(!is_problem && notice.starts_with(&format!("Training on {fastest}, the fastest here")), "{notice}");
    // In the notice, and under Throughput where it stays.
    assert_eq!(harness.query_all_by_label_contains("the fastest here").count(), 2);
    // Training goes on where the trial left it, one unbroken curve per run.
    let at = playground(&harness).view().steps_done();
    run_until(&mut harness, "training on after the trial", |p| p.view().steps_done() >= at + 3 && p.view().playing);
    for run in &playground(&harness).view().runs {
        let steps: Vec<usize> = run.steps.iter().map(|s| s.step).collect();
        assert!(steps.iter().copied().eq(1..=steps.len()), "{}: the curve has a gap or a repeat: {steps:?}", run.name());
    }
    harness.get_by_label("Pause").click();
    harness.run_steps(3);
    let saved = playground(&harness).saved_compute_choice();
    drop(harness);

    // The next visit starts on the choice and times nothing.
    let mut harness = harness_offering(vec2(1500.0, 920.0), || Box::new(TestPlatform::default()), two(saved.clone(), false));
    run_until(&mut harness, "the setup loaded", |p| p.view().is_loaded());
    assert_eq!(playground(&harness).compute_label(), fastest);
    harness.get_by_label("Train").click();
    run_until(&mut harness, "a step", |p| p.view().step() >= 1);
    assert!(playground(&harness).timing().is_none(), "a remembered choice is not timed again");
    harness.get_by_label("Pause").click();
    harness.run_steps(3);
    drop(harness);

    // A named compute is used as named, over a remembered choice, and nothing is timed.
    let mut harness = harness_offering(vec2(1500.0, 920.0), || Box::new(TestPlatform::default()), two(saved, true));
    run_until(&mut harness, "the setup loaded", |p| p.view().is_loaded());
    assert_eq!(playground(&harness).compute_label(), "flex: A (CPU)");
    harness.get_by_label("Train").click();
    run_until(&mut harness, "a step", |p| p.view().step() >= 1);
    assert!(playground(&harness).timing().is_none() && playground(&harness).compute_choice().is_none());
    harness.get_by_label("Pause").click();
    harness.run_steps(3);
}

/// A teacher's keys: S steps, Space trains and pauses, R starts over, a number opens a lesson,
/// ? lists the keys. No field has the keyboard when the app opens, and while one has it the
/// keys are typed into it, not obeyed.
#[test]
fn the_keyboard_drives_the_playground_and_leaves_text_fields_alone() {
    let mut harness = harness_of_size(vec2(1280.0, 720.0));
    run_until(&mut harness, "the untrained attention maps", |p| p.drawn().attention_maps > 0);
    assert!(!harness.ctx.egui_wants_keyboard_input(), "no field has the keyboard at the start");

    harness.key_press(egui::Key::S);
    run_until(&mut harness, "a step from S", |p| p.view().step() == 1);
    harness.key_press(egui::Key::Space);
    run_until(&mut harness, "training from Space", |p| p.view().playing);
    harness.key_press(egui::Key::Space);
    run_until(&mut harness, "a pause from Space", |p| !p.view().playing);
    harness.key_press(egui::Key::R);
    run_until(&mut harness, "untrained models again from R", |p| p.view().is_loaded() && p.view().step() == 0);
    harness.key_press(egui::Key::Num3);
    run_until(&mut harness, "lesson 3 from the key 3", |p| p.lesson() == Some(2));
    harness.key_press(egui::Key::P);
    run_until(&mut harness, "presentation mode from P", |p| p.look().presenting);
    let contrast = playground(&harness).look().high_contrast;
    harness.key_press(egui::Key::H);
    run_until(&mut harness, "the other theme from H", |p| p.look().high_contrast != contrast);
    harness.key_press(egui::Key::P);
    run_until(&mut harness, "the playground again from P", |p| !p.look().presenting);

    assert!(harness.query_by_label("train / pause").is_none(), "the keys are listed only when asked");
    harness.key_press_modifiers(egui::Modifiers::SHIFT, egui::Key::Questionmark);
    harness.run_steps(2);
    assert!(harness.query_by_label("train / pause").is_some(), "? lists the keys");

    // Typing a prompt: S is a letter of it, not a step.
    run_until(&mut harness, "lesson 3's maps", |p| p.drawn().attention_maps > 0 && p.view().is_loaded());
    let before = playground(&harness).view().step();
    harness.get_by_label("attention prompt").focus();
    harness.run_steps(2);
    assert!(harness.ctx.egui_wants_keyboard_input(), "the prompt has the keyboard");
    harness.key_press(egui::Key::S);
    harness.key_press(egui::Key::Space);
    harness.run_steps(5);
    let app = playground(&harness);
    assert_eq!((app.view().step(), app.view().playing), (before, false), "keys typed into a field are not commands");
}

/// Every text shape the last frame drew, with the rectangle it is clipped to.
fn for_each_text(harness: &Harness<'_, State>, mut visit: impl FnMut(&egui::epaint::TextShape, egui::Rect)) {
    fn walk(shape: &egui::Shape, clip: egui::Rect, visit: &mut dyn FnMut(&egui::epaint::TextShape, egui::Rect)) {
        match shape {
            egui::Shape::Text(text) => visit(text, clip),
            egui::Shape::Vec(shapes) => shapes.iter().for_each(|shape| walk(shape, clip, visit)),
            _ => {}
        }
    }
    harness.output().shapes.iter().for_each(|clipped| walk(&clipped.shape, clipped.clip_rect, &mut visit));
}

/// Every piece of text the last frame drew: its words, its size in points and where it starts.
fn drawn_text(harness: &Harness<'_, State>) -> Vec<(String, f32, egui::Pos2)> {
    let mut out = Vec::new();
    for_each_text(harness, |text, _| {
        let job = &text.galley.job;
        for section in &job.sections {
            let words = job.text[section.byte_range.start.0..section.byte_range.end.0].trim().to_string();
            if !words.is_empty() {
                out.push((words, section.format.font_id.size, text.pos));
            }
        }
    });
    out
}

/// Each lesson in presentation mode at 1280×720 after a few steps: every text at least the
/// smallest label size, the lesson's point and Train at body size, the map's token labels
/// included (they are sized per map). With $QKV_SCREENSHOTS set, each is saved there (for docs/).
#[test]
fn presentation_mode_is_readable_from_the_back_of_the_room_in_every_lesson() {
    use qkv_ui::lessons::Screen;
    use qkv_ui::presentation::{BODY_POINTS, LABEL_POINTS, Look};
    // The run each maps lesson sets beside Q-K-V: W_Q = I in lesson 1, Q = K in lesson 3.
    const LESSON_CONTRAST: [&str; 5] = ["Q=I", "", "Q=K-V", "", ""];
    let reference = "Q-K-V";
    let steps: usize = std::env::var("QKV_SCREENSHOT_STEPS").ok().and_then(|s| s.parse().ok()).unwrap_or(60);
    let mut contrasts = Vec::new();
    for (index, lesson) in qkv_ui::lessons::LESSONS.iter().enumerate() {
        let mut harness = harness_of_size(vec2(1280.0, 720.0));
        harness.run_steps(2);
        let app = harness.state_mut().as_mut().unwrap();
        app.set_look(Look { presenting: true, high_contrast: true });
        teach(&mut harness, index, steps);
        harness.run_steps(4);

        let text = drawn_text(&harness);
        let small: Vec<_> = text.iter().filter(|(_, size, _)| *size < LABEL_POINTS).collect();
        assert!(small.is_empty(), "{}: text under {LABEL_POINTS} points: {small:?}", lesson.title);
        let screen = egui::Rect::from_min_size(egui::Pos2::ZERO, vec2(1280.0, 720.0));
        let off: Vec<_> = text.iter().filter(|(_, _, at)| !screen.contains(*at)).collect();
        assert!(off.is_empty(), "{}: text off the 1280×720 screen: {off:?}", lesson.title);
        let size_of = |words: &str| text.iter().find(|(w, _, _)| w.starts_with(words)).map(|(_, size, _)| *size);
        assert!(size_of(&lesson.point[..30]).is_some_and(|s| s >= BODY_POINTS), "{}: the point at body size", lesson.title);
        assert!(size_of("Train").is_some_and(|s| s >= BODY_POINTS));
        // What the lesson sets side by side: two runs' maps, or the KV bars and no map.
        let presented = playground(&harness).drawn().presented_maps;
        match lesson.screen {
            Screen::Maps => assert_eq!(presented, [reference, LESSON_CONTRAST[index]], "{}", lesson.title),
            Screen::KvCache => assert!(presented.is_empty(), "{}: no maps beside the KV bars", lesson.title),
            Screen::Elimination => {
                assert_eq!(presented, ["Q-K-V", "Q=I (copy of Q-K-V)"], "{}", lesson.title);
                assert!(
                    text.iter().any(|(w, _, _)| w.starts_with("dotted: W_Q eliminated at step")),
                    "{}: the elimination marked on the chart",
                    lesson.title
                );
            }
        }
        // The rotation worked through once, on the list the maps show: each digit moves one
        // place right, the last comes first.
        if index == 2 {
            let example = text.iter().find_map(|(w, _, _)| w.strip_prefix("For example: ")).expect("a worked example");
            let (list, rotated) = example.split_once(" becomes ").expect("a list and its answer");
            let (list, rotated): (Vec<&str>, Vec<&str>) = (list.split(' ').collect(), rotated.split(' ').collect());
            let tokens = &playground(&harness).view().attention().unwrap().tokens;
            assert_eq!(list, tokens.iter().map(|t| t.trim()).collect::<Vec<_>>(), "the maps' own list");
            assert_eq!(rotated[0], list[list.len() - 1]);
            assert_eq!(rotated[1..], list[..list.len() - 1]);
        }
        assert!(harness.query_by_label_contains("frame ").is_none(), "no frame-time readout");
        assert!(harness.query_by_label("Apply setup").is_none(), "no setup");

        let image = harness.render().expect("rendered");
        // The right half, where the lesson's contrast stands.
        let (width, height) = (image.width(), image.height());
        let right: Vec<u8> = image.enumerate_pixels().filter(|(x, _, _)| *x >= width / 2).flat_map(|(_, _, p)| p.0).collect();
        contrasts.push((lesson.title, right));
        assert_eq!(height, 720);
        if let Some(dir) = std::env::var_os("QKV_SCREENSHOTS") {
            let path = std::path::Path::new(&dir).join(format!("lesson-{}-presentation.png", index + 1));
            image.save(&path).unwrap();
            eprintln!("wrote {}", path.display());
        }
    }
    // Each lesson's main panel is its own: no two lessons show the same picture beside the curves.
    for (i, (title, pixels)) in contrasts.iter().enumerate() {
        for (other, other_pixels) in &contrasts[i + 1..] {
            assert_ne!(pixels, other_pixels, "{title} and {other} show the same right half");
        }
    }
}

/// Figures for slides: the loss chart and the maps as SVG naming every run in its colour and as
/// PNG (the screen's pixels), and one CSV with every run's metrics.
#[test]
fn the_charts_and_maps_export_as_svg_png_and_csv() {
    use qkv_ui::figures::{Export, Figure};
    let dir = std::env::temp_dir().join(format!("qkv-figures-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut harness = harness();
    harness.run_steps(2);
    let app = harness.state_mut().as_mut().unwrap();
    app.set_export_folder(dir.display().to_string());
    app.step();
    run_until(&mut harness, "a step and the maps", |p| p.view().step() >= 1 && p.view().attention().is_some());
    let app = harness.state_mut().as_mut().unwrap();
    for export in [
        Export::Svg(Figure::Loss),
        Export::Png(Figure::Loss),
        Export::Csv,
        Export::Svg(Figure::AttentionMaps),
        Export::Png(Figure::AttentionMaps),
    ] {
        app.export_figure(export);
    }
    harness.run_steps(6);
    assert!(playground(&harness).notice().is_some_and(|(_, problem)| !problem), "{:?}", playground(&harness).notice());

    let read = |name: &str| std::fs::read(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    let names: Vec<String> = playground(&harness).view().runs.iter().map(|r| r.name().to_string()).collect();
    let labels: Vec<String> = playground(&harness).view().runs.iter().map(|r| r.label().to_string()).collect();
    assert_eq!(labels, ["Q-K-V", "Q=I"], "the slides name the runs as the papers do");
    for svg in ["loss-step1.svg", "attention-maps-step1.svg"] {
        let text = String::from_utf8(read(svg)).unwrap();
        assert!(text.starts_with("<svg") && text.trim_end().ends_with("</svg>"), "{svg}");
        for label in &labels {
            assert!(text.contains(&format!(">{label}")), "{svg} names {label}");
        }
        let colour = playground(&harness).view().runs[0].colour;
        assert!(text.contains(&format!("#{:02x}{:02x}{:02x}", colour.r(), colour.g(), colour.b())), "{svg}: the runs' colours");
    }
    for png in ["loss-step1.png", "attention-maps-step1.png"] {
        let bytes = read(png);
        let mut reader = png::Decoder::new(std::io::Cursor::new(bytes)).read_info().unwrap_or_else(|e| panic!("{png}: {e}"));
        let mut pixels = vec![0; reader.output_buffer_size().unwrap()];
        let info = reader.next_frame(&mut pixels).unwrap();
        assert!(info.width > 200 && info.height > 100, "{png}: {}x{}", info.width, info.height);
    }
    let csv = String::from_utf8(read("metrics-step1.csv")).unwrap();
    assert!(csv.starts_with("run,variant,step,"), "{csv}");
    for name in &names {
        assert_eq!(csv.lines().filter(|l| l.starts_with(&format!("{name},"))).count(), 2, "{name}: the untrained point and step 1");
    }
    if std::env::var_os("KEEP").is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Q shows a QR code of the open lesson's short link, so a class opens the same demo.
#[test]
fn q_shows_a_qr_code_of_the_lesson_s_link() {
    let mut harness = harness_of_size(vec2(1280.0, 720.0));
    harness.run_steps(2);
    let app = harness.state_mut().as_mut().unwrap();
    app.set_share_link("https://example.org/qkv-lab/?compute=flex#setup=%7B%7D".into());
    app.load_lesson(1);
    harness.run_steps(2);
    assert_eq!(playground(&harness).drawn().qr_link, None, "hidden until asked for");
    harness.key_press(egui::Key::Q);
    harness.run_steps(2);
    assert_eq!(playground(&harness).drawn().qr_link.as_deref(), Some("https://example.org/qkv-lab/?lesson=2&present"));
    harness.key_press(egui::Key::Q);
    harness.run_steps(2);
    assert_eq!(playground(&harness).drawn().qr_link, None);
}

/// A text the last frame drew that its reader cannot read whole, or a pair that collide.
enum TextProblem {
    /// Cut by the rectangle it is drawn in (a panel, a scroll area, a chart).
    Clipped { words: String, bounds: egui::Rect, clip: egui::Rect },
    /// Partly or wholly off the screen.
    OffScreen { words: String, bounds: egui::Rect },
    /// Drawn over another text.
    Overlapping { words: String, other: String, at: egui::Rect },
}

impl std::fmt::Debug for TextProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let at = |r: &egui::Rect| format!("({:.0}, {:.0})–({:.0}, {:.0})", r.min.x, r.min.y, r.max.x, r.max.y);
        match self {
            TextProblem::Clipped { words, bounds, clip } => write!(f, "{words:?} at {} is cut by {}", at(bounds), at(clip)),
            TextProblem::OffScreen { words, bounds } => write!(f, "{words:?} at {} runs off the screen", at(bounds)),
            TextProblem::Overlapping { words, other, at: overlap } => write!(f, "{words:?} overlaps {other:?} at {}", at(overlap)),
        }
    }
}

/// Every text shape of the last frame that is cut across by its clip rectangle (its left or right
/// end hidden: "encode[r]"), runs off `screen`, or overlaps another, judged by the glyphs' own
/// outlines (rotated labels too), line by line for overlaps. A text cut at the top or bottom is
/// where a panel scrolls down to more, which a long table may; text wholly outside its clip
/// rectangle (scrolled out of view) and text drawn nearly transparent (a chart's fading tick
/// labels) are not seen, so not judged.
fn text_problems(harness: &Harness<'_, State>, screen: egui::Vec2) -> Vec<TextProblem> {
    /// A text seen: its words, its glyphs' outline, the rectangle it is clipped to, and the
    /// outline of each of its lines (a wrapped text's lines leave room beside them that another
    /// text may take, as a label wrapped among buttons does).
    type Seen = (String, egui::Rect, egui::Rect, Vec<egui::Rect>);
    let mut texts: Vec<Seen> = Vec::new();
    for_each_text(harness, |text, clip| {
        let words = text.galley.job.text.trim().to_string();
        let faint = text.opacity_factor < 0.1 || text.galley.job.sections.iter().all(|s| s.format.color.a() < 20);
        let bounds = text.visual_bounding_rect();
        let lines = if text.angle == 0.0 {
            let at = text.pos.to_vec2();
            text.galley.rows.iter().map(|row| row.row.visuals.mesh_bounds.translate(row.pos.to_vec2() + at)).collect()
        } else {
            vec![bounds]
        };
        if !words.is_empty() && !faint {
            texts.push((words, bounds, clip, lines));
        }
    });
    let screen = egui::Rect::from_min_size(egui::Pos2::ZERO, screen);
    let seen: Vec<_> = texts.into_iter().filter(|(_, bounds, clip, _)| bounds.is_positive() && clip.intersects(*bounds)).collect();
    let mut problems = Vec::new();
    for (words, bounds, clip, _) in &seen {
        // A pixel's grace: a glyph such as "(" opening a line reaches a pixel left of where the
        // line starts, in egui's own layout.
        if bounds.min.x < clip.min.x - 1.5 || bounds.max.x > clip.max.x + 1.5 {
            problems.push(TextProblem::Clipped { words: words.clone(), bounds: *bounds, clip: *clip });
        } else if !screen.expand(0.5).contains_rect(bounds.intersect(*clip)) {
            problems.push(TextProblem::OffScreen { words: words.clone(), bounds: *bounds });
        }
    }
    // What shows of each line: a line its scroll area cuts off covers nothing below the area.
    let visible = |lines: &[egui::Rect], clip: &egui::Rect| -> Vec<egui::Rect> { lines.iter().map(|l| l.intersect(*clip)).collect() };
    for (i, (words, _, clip_a, lines_a)) in seen.iter().enumerate() {
        for (other, _, clip_b, lines_b) in &seen[i + 1..] {
            let overlap = visible(lines_a, clip_a)
                .into_iter()
                .flat_map(|a| visible(lines_b, clip_b).into_iter().map(move |b| a.intersect(b)))
                .find(|at| at.width() > 1.0 && at.height() > 1.0);
            if let Some(at) = overlap {
                problems.push(TextProblem::Overlapping { words: words.clone(), other: other.clone(), at });
            }
        }
    }
    problems
}

/// The screens a lesson is shown on: classroom projectors (1024×768), laptops (1280×720,
/// 1366×768), a full-HD screen, and the phone the QR code's link opens.
const SCREENS: [(f32, f32); 5] = [(1024.0, 768.0), (1280.0, 720.0), (1366.0, 768.0), (1920.0, 1080.0), (390.0, 844.0)];

/// Every lesson in both views at every common screen size, at its first evaluation (the verdict
/// shown): no text collides or is cut. Prints every problem before failing.
#[test]
fn every_lesson_fits_every_screen_without_clipped_or_overlapping_text() {
    use qkv_ui::presentation::Look;
    let mut failures = Vec::new();
    for (width, height) in SCREENS {
        for presenting in [true, false] {
            for (index, lesson) in qkv_ui::lessons::LESSONS.iter().enumerate() {
                let mut harness = harness_of_size(vec2(width, height));
                harness.run_steps(2);
                let app = harness.state_mut().as_mut().unwrap();
                app.set_look(Look { presenting, high_contrast: true });
                app.load_lesson(index);
                app.train();
                let evaluated = |p: &Playground| p.view().is_loaded() && p.view().runs.iter().all(|r| r.evals.iter().any(|e| e.step >= 10));
                run_until(&mut harness, "the first evaluation", evaluated);
                harness.state_mut().as_mut().unwrap().pause();
                run_until(&mut harness, "the pause", |p| !p.view().playing);
                // Enough frames for the charts' axes to fit their labels (egui_plot sizes an
                // axis by the labels of the frame before).
                harness.run_steps(8);
                let problems = text_problems(&harness, vec2(width, height));
                let view = if presenting { "presentation" } else { "workbench" };
                // To look at them all: QKV_LAYOUT_SHOTS=DIR saves each screen there.
                if let Some(dir) = std::env::var_os("QKV_LAYOUT_SHOTS") {
                    let path = std::path::Path::new(&dir).join(format!("{width}x{height}-{view}-lesson-{}.png", index + 1));
                    harness.render().expect("rendered").save(&path).unwrap();
                }
                eprintln!("{width}x{height} {view} lesson {}: {} problems", index + 1, problems.len());
                for problem in &problems {
                    eprintln!("    {problem:?}");
                }
                if !problems.is_empty() {
                    failures.push(format!("{width}x{height} {view}, {}: {problems:?}", lesson.title));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// Each lesson in both views, step by step (the Right arrow, then the Next button): the card
/// says the step's sentence and outlines the panel it talks about; "skip steps" hides them.
#[test]
fn a_lesson_goes_step_by_step_outlining_the_panel_each_step_talks_about() {
    use qkv_ui::presentation::Look;
    for presenting in [false, true] {
        for (index, lesson) in qkv_ui::lessons::LESSONS.iter().enumerate() {
            let mut harness = harness_of_size(vec2(1280.0, 720.0));
            harness.run_steps(2);
            let app = harness.state_mut().as_mut().unwrap();
            app.set_look(Look { presenting, high_contrast: false });
            app.load_lesson(index);
            run_until(&mut harness, "the lesson's runs", |p| p.view().is_loaded() && p.drawn().loss_points > 0);
            for (step, card) in lesson.cards.iter().enumerate() {
                if step > 0 {
                    if step % 2 == 1 {
                        harness.key_press(egui::Key::ArrowRight);
                    } else {
                        harness.get_by_label("next").click();
                    }
                }
                harness.run_steps(3);
                let what = format!("{} ({}), step {}", lesson.title, if presenting { "presenting" } else { "workbench" }, step + 1);
                assert_eq!(playground(&harness).card().map(|(i, c)| (i, c.say)), Some((step, card.say)), "{what}");
                assert_eq!(playground(&harness).drawn().outlined, Some(card.panel), "{what}: the outlined panel");
                let counter = format!("step {} of {}", step + 1, lesson.cards.len());
                assert!(harness.query_by_label(&counter).is_some(), "{what}: {counter:?} is shown");
            }
            harness.get_by_label("skip steps").click();
            harness.run_steps(3);
            assert!(playground(&harness).card().is_none() && playground(&harness).drawn().outlined.is_none(), "{}: skipped", lesson.title);
        }
    }
}

/// `hide=` (`--hide` on the desktop) hides the controls it names and leaves the rest; an unknown
/// name is refused with the list of known ones.
#[test]
fn a_link_hides_the_controls_a_class_has_not_met_yet() {
    let mut harness = harness_of_size(vec2(1280.0, 720.0));
    run_until(&mut harness, "the first screen", |p| p.view().is_loaded());
    let shown = ["Experiment setup", "Classroom", "Samples", "compute device", "Export and import", "Theory: eliminate W_Q"];
    for label in shown {
        assert!(harness.query_by_label(label).is_some(), "{label} is shown by default");
    }
    let error = qkv_ui::hidden::Hidden::parse("setup,maps").unwrap_err();
    assert!(error.to_string().contains("\"maps\""), "{error}");
    let hidden = qkv_ui::hidden::Hidden::parse("setup,classroom,tabs,compute,files,theory").unwrap();
    harness.state_mut().as_mut().unwrap().hide(hidden);
    harness.run_steps(3);
    for label in shown {
        assert!(harness.query_by_label(label).is_none(), "{label} is hidden");
    }
    assert!(harness.query_by_label("Train").is_some() && playground(&harness).drawn().loss_points > 0, "training and its chart stay");
}
