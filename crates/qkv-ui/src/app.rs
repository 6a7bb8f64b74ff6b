//! The playground: the panels around one training session. It sends the session commands and
//! draws its messages; it never computes anything itself.

use egui::{RichText, Ui};
use web_time::Instant;

use qkv_train::session::{self, CheckpointFile, Command, Session, SessionHandle};

use crate::files::{FileKind, Inbox, IncomingFile, KeptInbox, KeptRuns, OutgoingFile, PathChoice};
use crate::platform::Platform;

use crate::attention_panel::{AttentionPanel, AttentionRequest, HeadIndex};
use crate::compute_choice::{Compute, ComputeOffer, Verdict};
use crate::compute_trial::{Arena, Outcome, Trial};
use crate::costs_panel::CostsPanel;
use crate::files_panel::{FilesPanel, FilesRequest};
use crate::lessons::LESSONS;
use crate::loss_panel::LossPanel;
use crate::news::NewsPacing;
use crate::params_panel::ParamsPanel;
use crate::samples_panel::SamplesPanel;
use crate::setup_panel::{Setup, SetupAction, SetupPanel};
use crate::theory_panel::TheoryPanel;
use crate::view::SessionView;

/// Steps between two autosaves of every run, where the platform keeps runs (the browser): a
/// checkpoint of the classroom demo's two runs is about 2.6 MB, written in the background.
const AUTOSAVE_EVERY: usize = 50;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tab {
    Playground,
    Samples,
    AllVariants,
}

/// Frame-to-frame times of the last couple of seconds.
#[derive(Default)]
pub struct FrameTimer {
    last: Option<Instant>,
    recent: std::collections::VecDeque<f64>,
    /// Every frame time since the start, for the smoke test's summary.
    pub all: Vec<f64>,
    /// Seconds each frame spent building the UI (the rest of a frame is rendering, presenting
    /// and waiting).
    pub ui_work: Vec<f64>,
}

impl FrameTimer {
    pub fn tick(&mut self) {
        let now = Instant::now();
        if let Some(last) = self.last.replace(now) {
            let secs = now.duration_since(last).as_secs_f64();
            self.recent.push_back(secs);
            push_bounded(&mut self.all, secs);
            if self.recent.len() > 120 {
                self.recent.pop_front();
            }
        }
    }

    pub fn record_ui_work(&mut self, secs: f64) {
        push_bounded(&mut self.ui_work, secs);
    }

    /// Mean frame time of the recent frames, in seconds.
    pub fn mean(&self) -> Option<f64> {
        (!self.recent.is_empty()).then(|| self.recent.iter().sum::<f64>() / self.recent.len() as f64)
    }
}

/// What the last frame drew (what the UI tests look at).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Drawn {
    pub attention_maps: usize,
    pub loss_points: usize,
}

/// Hours of frames would grow without end: past 100 000 records keep the newer half.
fn push_bounded(records: &mut Vec<f64>, value: f64) {
    if records.len() >= 100_000 {
        records.drain(..50_000);
    }
    records.push(value);
}

/// The app: the setup, the session training it, and the panels that show it. Shells and tests
/// reach it through methods, as a user would through the panels.
pub struct Playground {
    setup: Setup,
    /// The setup the session was last loaded with.
    applied: Option<Setup>,
    session: SessionHandle,
    view: SessionView,
    computes: Vec<Compute>,
    compute: usize,
    /// Why `compute` trains: the remembered or new verdict of a trial, or the user's pick.
    verdict: Option<Verdict>,
    /// The shell was told which compute to use: nothing is timed.
    pinned: bool,
    /// The timing of every compute under way (from the first Train without a verdict).
    trial: Option<Trial>,
    /// When the session's news is drawn.
    news: NewsPacing,
    tab: Tab,
    lesson: Option<usize>,
    setup_panel: SetupPanel,
    loss: LossPanel,
    costs: CostsPanel,
    attention: AttentionPanel,
    samples: SamplesPanel,
    variants: ParamsPanel,
    /// Export and import (the export folder and the checkpoint path on the desktop).
    files: FilesPanel,
    theory: TheoryPanel,
    /// The latest note for the user (saved files, errors of the shell's own work).
    notice: Option<(String, bool)>,
    frames: FrameTimer,
    open_theory: bool,
    /// A link that opens this setup, where the shell has one (the browser's address).
    share_link: Option<String>,
    inbox: Inbox,
    /// Runs the platform kept from an earlier start, offered until continued or dismissed.
    kept: KeptInbox,
    offer: Option<KeptRuns>,
    /// The experiment step of the last snapshot asked for (autosave).
    autosaved_at: usize,
    platform: Box<dyn Platform>,
}

/// A new session on `compute`, its task handed to the platform to run.
fn start_session(platform: &dyn Platform, news: &NewsPacing, compute: &Compute) -> SessionHandle {
    let (handle, task) = session::channel(Session::new(compute.device.clone(), compute.label.clone()), news.waker());
    platform.spawn_session(task);
    handle
}

impl Playground {
    /// `platform` is the shell's (files, the session's task); `offer` lists the devices
    /// offered, the preferred first, and what was chosen among them on an earlier visit. `saved`
    /// is the setup stored by a previous run of the app (JSON); an unreadable one is replaced by
    /// the default.
    pub fn new(ctx: &egui::Context, platform: Box<dyn Platform>, offer: impl Into<ComputeOffer>, saved: Option<&str>) -> Self {
        let ComputeOffer { computes, pinned, remembered } = offer.into();
        assert!(!computes.is_empty(), "the playground needs at least one device");
        let labels: Vec<&str> = computes.iter().map(|c| c.label.as_str()).collect();
        // A remembered verdict holds while the same computes are offered and none is pinned.
        let verdict = remembered.as_deref().and_then(Verdict::parse).filter(|v| !pinned && v.holds_for(&labels));
        let compute = verdict.as_ref().and_then(|v| labels.iter().position(|l| *l == v.chosen)).unwrap_or(0);
        let (setup, notice) = match saved.map(serde_json::from_str::<Setup>) {
            Some(Ok(setup)) => (setup, None),
            Some(Err(e)) => (Setup::default(), Some((format!("the saved setup could not be read ({e}); starting from the default"), true))),
            None => (Setup::default(), None),
        };
        let news = NewsPacing::new(ctx);
        let session = start_session(platform.as_ref(), &news, &computes[compute]);
        let folder = platform.default_folder();
        // A setup that is a lesson's (the default is the first) shows that lesson's text.
        let lesson = LESSONS.iter().position(|lesson| (lesson.plan)() == setup.plan);
        let mut playground = Self {
            setup,
            applied: None,
            session,
            view: SessionView::default(),
            computes,
            compute,
            verdict,
            pinned,
            trial: None,
            news,
            tab: Tab::Playground,
            lesson,
            setup_panel: SetupPanel { paths: folder.is_some() },
            loss: LossPanel::default(),
            costs: CostsPanel::default(),
            attention: AttentionPanel::default(),
            samples: SamplesPanel::default(),
            variants: ParamsPanel::default(),
            files: FilesPanel { paths: folder.is_some(), folder: folder.unwrap_or_default(), import_path: String::new() },
            theory: TheoryPanel,
            notice,
            frames: FrameTimer::default(),
            open_theory: false,
            share_link: None,
            inbox: Inbox::default(),
            kept: KeptInbox::default(),
            offer: None,
            autosaved_at: 0,
            platform,
        };
        playground.platform.kept_runs(&playground.kept);
        // The first screen shows what the setup is about before anyone presses Train: its
        // parameter and KV-cache bars, the untrained models' loss and attention maps. On a GPU this
        // also compiles the kernels the first step needs while the page draws.
        playground.apply_setup();
        if let Some(verdict) = &playground.verdict {
            let summary = verdict.summary();
            playground.tell(summary, false);
        }
        playground
    }

    /// The verdict to keep for the next visit (JSON), once there is one.
    pub fn saved_compute_choice(&self) -> Option<String> {
        self.verdict.as_ref().map(Verdict::to_json)
    }

    /// Why the playground trains on its compute, once timed or picked.
    pub fn compute_choice(&self) -> Option<&Verdict> {
        self.verdict.as_ref()
    }

    /// The compute being timed, while a trial is under way.
    pub fn timing(&self) -> Option<&str> {
        self.trial.as_ref().map(|t| self.computes[t.timing()].label.as_str())
    }

    /// Times every compute on the first Train, where there is a choice nobody has made.
    fn wants_trial(&self) -> bool {
        self.computes.len() > 1 && !self.pinned && self.verdict.is_none() && !self.view.finished
    }

    fn start_trial(&mut self) {
        let others = (0..self.computes.len()).filter(|&i| i != self.compute).collect();
        let plan = &self.setup.plan;
        let runs = plan.runs.len();
        let setup = format!("{runs} run{} of the {} model", if runs == 1 { "" } else { "s" }, plan.preset);
        self.trial = Some(Trial::start(self.compute, others, setup, Instant::now()));
        let first = self.computes[self.compute].label.clone();
        self.tell(format!("Timing each compute on this setup, to train on the fastest: {first} first."), false);
    }

    /// Ends a trial under way without a verdict: the user took over (paused, stepped, changed the
    /// setup or the compute). The contender's session ends with it.
    fn cancel_trial(&mut self) {
        if self.trial.take().is_some() {
            self.pinned = true;
        }
    }

    /// Looks at the trial under way; once every compute is timed, trains on the fastest and
    /// says why.
    fn advance_trial(&mut self) {
        let Some(trial) = &mut self.trial else { return };
        let (platform, news, computes) = (self.platform.as_ref(), &self.news, &self.computes);
        let start = |compute: usize| start_session(platform, news, &computes[compute]);
        let labels: Vec<String> = computes.iter().map(|c| c.label.clone()).collect();
        let colours = self.setup.colours32();
        let arena = Arena {
            start: &start,
            labels: &labels,
            plan: &self.setup.plan,
            attention_every: self.attention.refresh_every,
            colours: &colours,
        };
        let previous = trial.timing();
        match trial.advance(&self.session, &self.view, &arena, Instant::now()) {
            Outcome::Running => {
                let now = trial.timing();
                if now != previous {
                    self.tell(format!("Timing {} on the same setup…", self.computes[now].label), false);
                }
            }
            Outcome::Done { verdict, winner } => {
                self.trial = None;
                if let Some(winner) = winner {
                    let mut view = winner.view;
                    // The attention panel redraws when the version changes.
                    view.attention_version += self.view.attention_version + 1;
                    view.exports.append(&mut self.view.exports);
                    self.view = view;
                    self.session = winner.session;
                    self.compute = winner.compute;
                }
                match verdict {
                    Some(verdict) => {
                        self.tell(verdict.summary(), false);
                        self.verdict = Some(verdict);
                    }
                    None => self.tell("No compute could be timed on this setup; training stays where it was.".into(), true),
                }
                self.send(Command::Play);
            }
        }
    }

    /// The setup to persist.
    pub fn saved_setup(&self) -> String {
        serde_json::to_string(&self.setup).unwrap_or_default()
    }

    /// The shell's measure of the last repaint's cost on the UI thread, which paces how often
    /// training news is drawn.
    pub fn record_repaint(&mut self, secs: f64) {
        self.news.record_repaint(secs);
    }

    pub fn compute_label(&self) -> &str {
        &self.computes[self.compute].label
    }

    /// What the session has reported: the runs, their curves, the attention maps.
    pub fn view(&self) -> &SessionView {
        &self.view
    }

    /// The setup being edited.
    pub fn setup(&self) -> &Setup {
        &self.setup
    }

    /// The setup being edited, for a shell or a test that edits it as the setup panel would.
    pub fn setup_mut(&mut self) -> &mut Setup {
        &mut self.setup
    }

    /// The latest note for the user, and whether it reports a problem.
    pub fn notice(&self) -> Option<(&str, bool)> {
        self.notice.as_ref().map(|(text, is_problem)| (text.as_str(), *is_problem))
    }

    /// Shows `text` in the top bar (a problem in the error colour).
    pub fn tell(&mut self, text: String, is_problem: bool) {
        self.notice = Some((text, is_problem));
    }

    /// The frame times measured so far.
    pub fn frames(&self) -> &FrameTimer {
        &self.frames
    }

    /// A link that opens the applied setup, where the shell has one (the browser's address).
    pub fn set_share_link(&mut self, link: String) {
        self.share_link = Some(link);
    }

    pub fn share_link(&self) -> Option<&str> {
        self.share_link.as_deref()
    }

    /// Where exports are written (desktop).
    pub fn export_folder(&self) -> &str {
        &self.files.folder
    }

    pub fn set_export_folder(&mut self, folder: String) {
        self.files.folder = folder;
    }

    /// Enlarges one head's map, as clicking it does.
    pub fn select_head(&mut self, head: HeadIndex) {
        self.attention.selected = Some(head);
    }

    /// What the last frame drew: attention maps, and points of the loss plot.
    pub fn drawn(&self) -> Drawn {
        Drawn { attention_maps: self.attention.maps_drawn, loss_points: self.loss.points_drawn }
    }

    fn send(&mut self, command: Command) {
        if !self.session.send(command) {
            self.tell("the training session stopped unexpectedly; restarting it".into(), true);
            self.session = start_session(self.platform.as_ref(), &self.news, &self.computes[self.compute]);
            self.applied = None;
        }
    }

    /// Loads the edited setup into the session (training starts from scratch).
    pub fn apply_setup(&mut self) {
        self.cancel_trial();
        self.view = SessionView { exports: std::mem::take(&mut self.view.exports), ..SessionView::default() };
        self.autosaved_at = 0;
        self.send(Command::AttentionEvery(self.attention.refresh_every));
        self.send(Command::Load(self.setup.plan.clone()));
        self.applied = Some(self.setup.clone());
    }

    fn ensure_loaded(&mut self) {
        // A setup already sent is not sent again: its Load may still be on its way.
        if self.applied.as_ref() != Some(&self.setup) {
            self.apply_setup();
        }
    }

    pub fn train(&mut self) {
        // Train while another compute is timed: the user wants this one now.
        self.cancel_trial();
        self.ensure_loaded();
        if self.wants_trial() {
            self.start_trial();
        }
        self.send(Command::Play);
    }

    pub fn pause(&mut self) {
        self.cancel_trial();
        self.send(Command::Pause);
    }

    pub fn step(&mut self) {
        self.cancel_trial();
        self.ensure_loaded();
        self.send(Command::Step);
    }

    /// Saves run `run`'s checkpoint and metrics (into the export folder; the browser downloads).
    pub fn export(&mut self, run: usize) {
        self.send(Command::Export { run });
    }

    pub fn load_lesson(&mut self, index: usize) {
        self.lesson = Some(index);
        let plan = (LESSONS[index].plan)();
        self.open_theory = plan.preset == qkv_model::Preset::Theory;
        self.setup = Setup::from_plan(plan);
        self.apply_setup();
    }

    /// Applies every message the session has sent since the last frame.
    fn apply_messages(&mut self) {
        let colours = self.setup.colours32();
        while let Some(message) = self.session.try_recv() {
            self.view.apply(message, &colours);
        }
        self.advance_trial();
        self.save_exports();
        self.autosave();
    }

    /// Where the platform keeps runs: asks for every run's checkpoint each [`AUTOSAVE_EVERY`]
    /// steps and when training ends, and hands what comes back to the platform.
    fn autosave(&mut self) {
        if let Some(snapshot) = self.view.snapshot.take() {
            self.platform.keep_runs(snapshot);
        }
        let step = self.view.step();
        if self.platform.keeps_runs() && (step >= self.autosaved_at + AUTOSAVE_EVERY || (self.view.finished && step > self.autosaved_at)) {
            self.autosaved_at = step;
            self.send(Command::Snapshot);
        }
    }

    /// The experiment step of the runs kept from an earlier start, while they are offered.
    pub fn kept_offer(&self) -> Option<usize> {
        self.offer.as_ref().map(|kept| kept.step)
    }

    /// Continues the runs kept from an earlier start where they stood, and trains on.
    pub fn continue_kept(&mut self) {
        let Some(kept) = self.offer.take() else { return };
        self.import(kept.files);
        self.autosaved_at = kept.step;
        self.send(Command::Play);
    }

    /// Hands every exported run to the user (a folder on the desktop, downloads in the browser).
    fn save_exports(&mut self) {
        for export in std::mem::take(&mut self.view.exports) {
            let name = &export.name;
            let files = [
                OutgoingFile { name: format!("{name}.qkv"), bytes: export.checkpoint, mime: "application/octet-stream" },
                OutgoingFile { name: format!("{name}-metrics.csv"), bytes: export.metrics_csv.into_bytes(), mime: "text/csv" },
            ];
            match self.platform.save(&self.files.folder, &files) {
                Ok(done) => self.tell(done, false),
                Err(e) => self.tell(e.to_string(), true),
            }
        }
    }

    /// Continues saved runs from their checkpoint files' contents (a run trained on an upload
    /// finds its text in the setup's, when the names match).
    fn import(&mut self, files: Vec<CheckpointFile>) {
        self.cancel_trial();
        self.view = SessionView::default();
        let upload = match &self.setup.plan.data {
            qkv_train::DataSource::Upload(upload) => Some(upload.clone()),
            _ => None,
        };
        self.send(Command::Import { files, upload });
        // The last autosave was of the runs this import replaces.
        self.autosaved_at = 0;
        self.applied = Some(self.setup.clone());
        self.lesson = None;
    }

    fn import_path(&mut self) {
        match IncomingFile::read(std::path::Path::new(self.files.import_path.trim())) {
            Ok(file) => self.import(vec![CheckpointFile { name: file.name, bytes: file.bytes }]),
            Err(e) => self.tell(e.to_string(), true),
        }
    }

    /// A file the user gave the app: a checkpoint continues its run; anything else becomes the
    /// text the setup trains on.
    pub fn receive(&mut self, file: IncomingFile) {
        if file.is_checkpoint() {
            self.import(vec![CheckpointFile { name: file.name, bytes: file.bytes }]);
            return;
        }
        match qkv_train::Upload::new(&file.name, &file.bytes) {
            Ok(upload) => {
                self.setup.plan.data = qkv_train::DataSource::Upload(upload);
                self.lesson = None;
                self.tell(format!("{} is the data now: press Train (or Apply setup) to train on it", file.name), false);
            }
            Err(e) => self.tell(e.to_string(), true),
        }
    }

    fn receive_files(&mut self, ctx: &egui::Context) {
        for file in ctx.input(|i| i.raw.dropped_files.clone()) {
            self.platform.read_dropped(file, &self.inbox);
        }
        for file in self.inbox.take() {
            match file {
                Ok(file) => self.receive(file),
                Err(e) => self.tell(e.to_string(), true),
            }
        }
    }

    /// Opens the platform's file dialog, where it has one.
    fn pick_file(&mut self, kind: FileKind) {
        if !self.platform.pick(kind, &self.inbox) {
            self.tell("type the file's path instead: this app has no file dialog here".into(), true);
        }
    }

    /// Opens the platform's dialog for a path; the path chosen, if any (a failed dialog says
    /// why in the notice).
    fn choose_path(&mut self, choice: PathChoice) -> Option<String> {
        match self.platform.choose_path(choice) {
            Ok(path) => path.map(|p| p.display().to_string()),
            Err(e) => {
                self.tell(e.to_string(), true);
                None
            }
        }
    }

    /// The setup the session was last loaded with (what a shared link should open).
    pub fn applied_setup(&self) -> Option<&Setup> {
        self.applied.as_ref()
    }

    /// The whole app, inside whatever container the shell gives it.
    pub fn ui(&mut self, ui: &mut Ui) {
        let started = Instant::now();
        self.news.drawing_now();
        self.frames.tick();
        self.panels(ui);
        self.frames.record_ui_work(started.elapsed().as_secs_f64());
    }

    fn panels(&mut self, ui: &mut Ui) {
        self.apply_messages();
        if let Some(kept) = self.kept.take().filter(|kept| kept.step > 0 && !kept.files.is_empty()) {
            self.offer = Some(kept);
        }
        self.receive_files(ui.ctx());
        egui::Panel::top("top_bar").show(ui, |ui| self.top_bar(ui));
        egui::Panel::left("setup_side").resizable(true).default_size(430.0).show(ui, |ui| {
            egui::ScrollArea::both().id_salt("setup_scroll").show(ui, |ui| self.side_ui(ui));
        });
        egui::CentralPanel::default().show(ui, |ui| match self.tab {
            Tab::Playground => self.playground_ui(ui),
            Tab::Samples => {
                for run in self.samples.ui(ui, &self.view) {
                    let options = qkv_train::generate::SampleOptions { seed: run as u64 + 1, ..self.samples.options.clone() };
                    self.send(Command::Sample { run, prompt: self.samples.prompt.clone(), options });
                }
            }
            Tab::AllVariants => self.variants.ui(ui),
        });
    }

    fn top_bar(&mut self, ui: &mut Ui) {
        ui.horizontal_wrapped(|ui| {
            ui.heading("QKV Lab");
            ui.separator();
            ui.menu_button("Classroom", |ui| {
                for (i, lesson) in LESSONS.iter().enumerate() {
                    if ui.button(lesson.title).clicked() {
                        self.load_lesson(i);
                        ui.close();
                    }
                }
            });
            ui.separator();
            let playing = self.view.playing;
            if ui.add_enabled(!playing, egui::Button::new("Train")).clicked() {
                self.train();
            }
            if ui.add_enabled(playing, egui::Button::new("Pause")).clicked() {
                self.pause();
            }
            if ui.add_enabled(!playing, egui::Button::new("Step")).clicked() {
                self.step();
            }
            if ui.button("Reset").clicked() {
                self.apply_setup();
            }
            ui.separator();
            let total = self.view.runs.iter().map(|r| r.info.spec.training.steps).max().unwrap_or(0);
            ui.label(format!("step {} / {total}", self.view.step()));
            if total > 0 {
                ui.add(egui::ProgressBar::new(self.view.step() as f32 / total as f32).desired_width(120.0));
            }
            ui.separator();
            ui.selectable_value(&mut self.tab, Tab::Playground, "Playground");
            ui.selectable_value(&mut self.tab, Tab::Samples, "Samples");
            ui.selectable_value(&mut self.tab, Tab::AllVariants, "All variants");
            ui.separator();
            let mut compute = self.compute;
            let mut time_again = false;
            egui::ComboBox::from_id_salt("compute")
                .selected_text(format!("compute: {}", self.computes[compute].label))
                .show_ui(ui, |ui| {
                    for (i, c) in self.computes.iter().enumerate() {
                        ui.selectable_value(&mut compute, i, &c.label);
                    }
                    if self.computes.len() > 1 {
                        time_again = ui.button("time each on the next Train").clicked();
                    }
                })
                .response
                .accessible_name("compute device");
            if let Some(label) = self.timing() {
                ui.label(RichText::new(format!("timing {label}…")).weak());
            }
            if compute != self.compute {
                self.pick_compute(compute);
            }
            if time_again {
                self.time_again();
            }
            if let Some(mean) = self.frames.mean() {
                ui.label(RichText::new(format!("frame {:.1} ms ({:.0} fps)", mean * 1e3, 1.0 / mean)).weak());
            }
        });
        for run in &self.view.runs {
            if let Some(error) = &run.error {
                ui.colored_label(ui.visuals().error_fg_color, format!("{}: {error}", run.name()));
            }
        }
        let mut dismiss = false;
        if let Some(error) = &self.view.error {
            ui.horizontal(|ui| {
                ui.colored_label(ui.visuals().error_fg_color, error);
                dismiss = ui.small_button("dismiss").clicked();
            });
        }
        if dismiss {
            self.view.error = None;
        }
        let mut answer = None;
        if let Some(kept) = &self.offer {
            ui.horizontal(|ui| {
                ui.label(format!("{} runs from your last visit are kept at step {}.", kept.files.len(), kept.step));
                if ui.button("Continue them").clicked() {
                    answer = Some(true);
                }
                if ui.small_button("dismiss").clicked() {
                    answer = Some(false);
                }
            });
        }
        match answer {
            Some(true) => self.continue_kept(),
            Some(false) => self.offer = None,
            None => {}
        }
        if let Some((notice, is_error)) = self.notice.clone() {
            ui.horizontal(|ui| {
                let colour = if is_error { ui.visuals().error_fg_color } else { ui.visuals().weak_text_color() };
                ui.colored_label(colour, notice);
                if ui.small_button("dismiss").clicked() {
                    self.notice = None;
                }
            });
        }
    }

    /// The user's pick from the compute list: training starts over there, and the pick is
    /// remembered over any timing.
    pub fn pick_compute(&mut self, compute: usize) {
        self.cancel_trial();
        self.compute = compute;
        self.verdict = Some(Verdict::picked(self.computes[compute].label.clone(), self.verdict.as_ref()));
        self.session = start_session(self.platform.as_ref(), &self.news, &self.computes[compute]);
        self.apply_setup();
    }

    /// Forgets the verdict: the next Train times every compute again.
    pub fn time_again(&mut self) {
        self.cancel_trial();
        self.verdict = None;
        self.pinned = false;
        self.tell("The next Train times each compute on the setup it trains.".into(), false);
    }

    fn side_ui(&mut self, ui: &mut Ui) {
        if let Some(lesson) = self.lesson.map(|i| &LESSONS[i]) {
            ui.label(RichText::new(lesson.title).heading());
            wrapped(ui, lesson.explanation);
            ui.separator();
        }
        egui::CollapsingHeader::new("Experiment setup").default_open(true).show(ui, |ui| {
            let changed = self.applied.as_ref().is_some_and(|a| a != &self.setup);
            match self.setup_panel.ui(ui, &mut self.setup, changed) {
                SetupAction::None => {}
                SetupAction::Apply => {
                    self.lesson = None;
                    self.apply_setup();
                }
                SetupAction::UploadText => self.pick_file(FileKind::Text),
                SetupAction::BrowseText => {
                    if let Some(path) = self.choose_path(PathChoice::File(FileKind::Text)) {
                        self.setup.plan.data = qkv_train::DataSource::File(path);
                        self.lesson = None;
                    }
                }
            }
        });
        egui::CollapsingHeader::new("Throughput").default_open(true).show(ui, |ui| {
            if self.view.runs.is_empty() {
                ui.label("no runs yet");
            }
            for run in &self.view.runs {
                let rate = run.recent_tokens_per_sec().map_or("–".into(), |r| format!("{r:.0} tokens/s"));
                let val = run.evals.last().map_or("–".into(), |e| format!("{:.4}", e.val_loss));
                let accuracy = run.evals.last().and_then(|e| e.accuracy).map(|a| format!(", accuracy {:.1}%", 100.0 * a));
                ui.colored_label(run.colour, format!("{}: {rate}, val loss {val}{}", run.name(), accuracy.unwrap_or_default()));
            }
            if !self.view.backend.is_empty() {
                ui.label(RichText::new(format!("trained on {}; data: {}", self.view.backend, self.view.data)).weak());
            }
            if let Some(verdict) = &self.verdict {
                wrapped(ui, &verdict.summary());
            }
        });
        // The theory lesson opens its section once; after that the user decides.
        let open = std::mem::take(&mut self.open_theory).then_some(true);
        let convert = egui::CollapsingHeader::new("Theory: eliminate W_Q").open(open).show(ui, |ui| self.theory.ui(ui, &self.view));
        if let Some(run) = convert.body_returned.flatten() {
            self.send(Command::EliminateQuery { run });
        }
        let files = egui::CollapsingHeader::new("Export and import")
            .show(ui, |ui| self.files.ui(ui, &self.view, self.share_link.as_deref()))
            .body_returned
            .unwrap_or(FilesRequest::None);
        match files {
            FilesRequest::None => {}
            FilesRequest::Export(run) => self.export(run),
            FilesRequest::ImportPath => self.import_path(),
            FilesRequest::BrowseCheckpoint => {
                if let Some(path) = self.choose_path(PathChoice::File(FileKind::Checkpoint)) {
                    self.files.import_path = path;
                    self.import_path();
                }
            }
            FilesRequest::ChooseFolder => {
                if let Some(path) = self.choose_path(PathChoice::Folder) {
                    self.files.folder = path;
                }
            }
            FilesRequest::PickCheckpoint => self.pick_file(FileKind::Checkpoint),
            FilesRequest::CopyLink(link) => {
                ui.ctx().copy_text(link);
                self.tell("copied a link that opens this setup".into(), false);
            }
        }
    }

    fn playground_ui(&mut self, ui: &mut Ui) {
        if !self.view.is_loaded() {
            ui.vertical_centered(|ui| {
                ui.add_space(40.0);
                ui.heading("Does a transformer need all three of W_Q, W_K and W_V?");
                ui.label("Preparing the runs of the setup on the left… (or pick a lesson under Classroom)");
            });
            return;
        }
        if self.view.step() == 0 && !self.view.playing {
            ui.label(
                RichText::new("Untrained models: press Train to train every run on the same batches, or Step for one step at a time.")
                    .weak(),
            );
        }
        // Loss and costs side by side on top, the attention maps across the full width below:
        // fixed proportions, so that a projector shows all three at once.
        let width = ui.available_width();
        let top_height = (ui.available_height() * 0.48).max(220.0);
        ui.allocate_ui(egui::vec2(width, top_height), |ui| {
            ui.horizontal_top(|ui| {
                ui.allocate_ui(egui::vec2(width * 0.46, top_height), |ui| {
                    ui.set_min_size(egui::vec2(width * 0.46, top_height));
                    ui.vertical(|ui| {
                        ui.label(RichText::new("Loss").strong());
                        self.loss.ui(ui, &self.view);
                    });
                });
                ui.add_space(12.0);
                ui.allocate_ui(egui::vec2(ui.available_width(), top_height), |ui| {
                    ui.vertical(|ui| {
                        ui.label(RichText::new("Parameters and KV cache").strong());
                        egui::ScrollArea::both()
                            .id_salt("costs_scroll")
                            .max_height(top_height - 24.0)
                            .show(ui, |ui| self.costs.ui(ui, &self.view));
                    });
                });
            });
        });
        ui.separator();
        ui.label(RichText::new("Attention maps").strong());
        match self.attention.ui(ui, &self.view) {
            AttentionRequest::None => {}
            AttentionRequest::Prompt(prompt) => self.send(Command::AttentionPrompt(prompt)),
            AttentionRequest::RefreshEvery(n) => self.send(Command::AttentionEvery(n)),
        }
    }
}

/// A paragraph that wraps at the side panel's width (the panel scrolls sideways for its tables).
pub(crate) fn wrapped(ui: &mut Ui, text: &str) {
    ui.scope(|ui| {
        ui.set_max_width(400.0);
        ui.label(text);
    });
}
