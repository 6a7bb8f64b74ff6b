//! The session: one experiment at most, driven by [`Command`]s and answered with [`Message`]s.

use burn::tensor::Device;
use web_time::Instant;

use qkv_compute::ComputeId;
use qkv_model::Norm;
use qkv_model::reparam::ReparamCase;

use qkv_train::Problem;
use qkv_train::checkpoint::{self, Checkpoint};
use qkv_train::cpu_copy::model_on_cpu;
use qkv_train::dataset::{DataSource, Upload};
use qkv_train::experiment::{Experiment, RunEvent};
use qkv_train::generate::SampleOptions;
use qkv_train::plan::ExperimentPlan;
use qkv_train::run::Run;
use qkv_train::theory::{TheoryCase, continue_converted, convert_and_measure};

use crate::maps;
use crate::pace::steps_per_read_back;
use crate::samples;
use crate::{AttentionMaps, CheckpointFile, Command, Message, RunId, RunInfo, SessionError, Share};

pub struct Session {
    /// Read by the channel's task (`SessionTask`): where it trains, and what a failure names.
    pub(crate) device: Device,
    pub(crate) compute: ComputeId,
    /// The experiment, its runs named by the ids messages and commands call them.
    experiment: Option<Experiment>,
    /// What the experiment trains on (what its checkpoints name); `None` before the first.
    data: Option<DataSource>,
    playing: bool,
    attention_prompt: String,
    attention_every: usize,
    /// `Some(step)`: the maps of the experiment as loaded at `step` are still to be sent. They
    /// come in a turn of their own after the loading, or after the first step when training
    /// starts at once: in the browser's worker they take longer than the untrained evaluation
    /// and two steps together, and a classroom waits for the first step.
    maps_due: Option<usize>,
    /// Seconds one step of every run took in the last turn of play, read-backs included.
    secs_per_step: Option<f64>,
    /// The runs of a loaded or imported experiment that this session trains.
    share: Share,
}

impl Session {
    /// `compute` is which compute `device` is, as the messages name it.
    pub fn new(device: Device, compute: ComputeId) -> Self {
        Self {
            device,
            compute,
            experiment: None,
            data: None,
            playing: false,
            attention_prompt: String::new(),
            attention_every: 25,
            maps_due: None,
            secs_per_step: None,
            share: Share::ALL,
        }
    }

    /// Forgets the experiment (after a failure left it in an unknown state).
    pub fn unload(&mut self) {
        self.experiment = None;
        self.playing = false;
        self.maps_due = None;
    }

    /// Whether the session has work to do without being asked: steps, or maps that are due.
    pub fn is_busy(&self) -> bool {
        self.maps_due.is_some() || self.is_training()
    }

    fn is_training(&self) -> bool {
        self.playing && self.experiment.as_ref().is_some_and(|e| !e.is_done())
    }

    pub fn experiment(&self) -> Option<&Experiment> {
        self.experiment.as_ref()
    }

    /// Where in the experiment run `id` is.
    fn position(&self, id: RunId) -> Result<usize, SessionError> {
        self.experiment.as_ref().and_then(|e| e.position(id)).ok_or(SessionError::NoSuchRun(id))
    }

    pub async fn handle(&mut self, command: Command) -> Vec<Message> {
        let result = match command {
            Command::Load(plan) => self.load(&plan).await,
            Command::Import { files, upload } => self.import(&files, upload).await,
            Command::Play => {
                self.playing = self.experiment.is_some();
                Ok(vec![Message::Playing(self.playing)])
            }
            Command::Pause => {
                self.playing = false;
                Ok(vec![Message::Playing(false)])
            }
            Command::Step => {
                self.playing = false;
                let mut messages = vec![Message::Playing(false)];
                messages.extend(self.advance_by(1).await);
                Ok(messages)
            }
            Command::AttentionPrompt(prompt) => {
                self.attention_prompt = prompt;
                Ok(vec![self.maps_message().await])
            }
            Command::AttentionEvery(every) => {
                self.attention_every = every;
                Ok(vec![])
            }
            Command::Sample { run, prompt, options } => self.sample(run, &prompt, &options).await,
            Command::Export { run } => self.export(run).await,
            Command::Snapshot => self.snapshot().await,
            Command::EliminateQuery { run, into } => self.eliminate_query(run, into).await,
            Command::Share(share) => {
                self.share = share;
                Ok(vec![Message::Sharing(share)])
            }
        };
        result.unwrap_or_else(|error| vec![Message::Failed(Problem::of(&error))])
    }

    /// Takes over `experiment` (built by the caller: from a plan, or resumed from checkpoints),
    /// trained on `data` (what its checkpoints name), replacing the current
    /// one. Runs that have not trained yet are evaluated: the step-0 point of their curves. The
    /// runs are this session's share of the whole, and take its ids.
    pub async fn start(&mut self, mut experiment: Experiment, data: DataSource) -> Vec<Message> {
        // Which matrix product the linear layers take on a GPU is timed on it, once, before its
        // first step (at once on any other device).
        for run in &experiment.runs {
            qkv_kernels::choose_product(run.device()).await;
        }
        experiment.name_runs((0..experiment.runs.len()).map(|local| self.share.whole_id(local)).collect());
        let runs = experiment.runs.iter().zip(experiment.ids()).map(|(run, &id)| RunInfo::of(id, run)).collect();
        self.experiment = Some(experiment);
        self.data = Some(data.clone());
        self.playing = false;
        self.secs_per_step = None;
        let mut messages = vec![Message::Loaded { runs, data, compute: self.compute.clone() }, Message::Playing(false)];
        let experiment = self.experiment.as_mut().expect("just set");
        for (id, result) in experiment.evaluate_untrained().await {
            messages.push(match result {
                Ok(record) => Message::Evaluated { run: id, record },
                Err(error) => Message::Run(RunEvent::Stopped { run: id, error: Problem::of(&error) }),
            });
        }
        self.maps_due = (self.attention_every > 0).then_some(experiment.step);
        messages
    }

    async fn load(&mut self, plan: &ExperimentPlan) -> Result<Vec<Message>, SessionError> {
        let share = self.share;
        let experiment = plan.experiment_of_runs(&self.device, |specs| share.of_runs(specs))?;
        Ok(self.start(experiment, plan.data.clone()).await)
    }

    async fn import(&mut self, files: &[CheckpointFile], upload: Option<Upload>) -> Result<Vec<Message>, SessionError> {
        let checkpoints = files.iter().map(|file| Checkpoint::from_bytes(&file.name, &file.bytes)).collect::<Result<Vec<_>, _>>()?;
        let Some(first) = checkpoints.first() else { return Err(SessionError::NoCheckpoints) };
        let header = &first.header;
        if let Some(other) = checkpoints.iter().find(|c| c.header.data != header.data) {
            return Err(SessionError::MixedData { first: header.data.clone(), other: other.header.data.clone() });
        }
        let mut source: DataSource = header.data.parse()?;
        if let DataSource::File(path) = &source
            && !std::path::Path::new(path).exists()
        {
            // A text that was uploaded, not read from a path: the front end may hold it.
            match upload.filter(|u| &u.name == path) {
                Some(upload) => source = DataSource::Upload(upload),
                None => return Err(SessionError::DataMissing { checkpoint: files[0].name.clone(), path: path.clone() }),
            }
        }
        // The data as the runs saw it: same source, tokenizer and seed (synthetic examples
        // are generated from it).
        let plan = ExperimentPlan {
            data: source,
            tokenizer: header.tokenizer.as_ref().map_or(qkv_train::TokenizerKind::Char, |t| t.kind()),
            training: qkv_train::plan::TrainingOverrides { seed: Some(header.spec.training.seed), ..Default::default() },
            ..ExperimentPlan::default()
        };
        let dataset = plan.dataset()?;
        let checkpoints = self.share.of_runs(checkpoints);
        let runs = checkpoints.into_iter().map(|c| c.into_run(&dataset, &self.device)).collect::<Result<Vec<Run>, _>>()?;
        let experiment = Experiment::from_runs(dataset, runs)?;
        Ok(self.start(experiment, plan.data).await)
    }

    /// The experiment, taken out of the session (what a command line writes once training ends).
    pub fn into_experiment(self) -> Option<Experiment> {
        self.experiment
    }

    /// One turn of play: a step of every active run, or on a GPU a group of steps read back
    /// together ([`steps_per_read_back`]).
    pub async fn advance(&mut self) -> Vec<Message> {
        let Some(experiment) = self.experiment.as_ref() else { return vec![] };
        if let Some(loaded_at) = self.maps_due
            && (!self.is_training() || experiment.step > loaded_at)
        {
            return vec![self.maps_message().await];
        }
        let steps = steps_per_read_back(experiment, self.secs_per_step, self.attention_every);
        self.advance_by(steps).await
    }

    /// Up to `max_steps` steps of every active run, with the evaluations and attention maps
    /// that fall due.
    async fn advance_by(&mut self, max_steps: usize) -> Vec<Message> {
        let Some(experiment) = self.experiment.as_mut() else { return vec![] };
        if experiment.is_done() {
            return vec![Message::Finished];
        }
        let (first_step, started) = (experiment.step, Instant::now());
        let events = experiment.steps(max_steps).await;
        let (step, done) = (experiment.step, experiment.is_done());
        let mut messages: Vec<Message> = events.into_iter().map(Message::Run).collect();
        self.secs_per_step = Some(started.elapsed().as_secs_f64() / (step - first_step).max(1) as f64);
        if self.attention_every > 0 && (step % self.attention_every == 0 || done) {
            messages.push(self.maps_message().await);
        }
        if done {
            self.playing = false;
            messages.extend([Message::Playing(false), Message::Finished]);
        }
        messages
    }

    /// The attention maps of the models as they stand, as a message (a failed read says why:
    /// the experiment stays loaded either way).
    async fn maps_message(&mut self) -> Message {
        self.maps_due = None;
        self.attention().await.map_or_else(|e| Message::Failed(Problem::of(&e)), Message::Attention)
    }

    async fn attention(&self) -> Result<AttentionMaps, SessionError> {
        let Some(experiment) = &self.experiment else { return Err(SessionError::NothingLoaded) };
        maps::attention_maps(experiment, &self.attention_prompt, experiment.ids()).await
    }

    async fn sample(&self, run: RunId, prompt: &str, options: &SampleOptions) -> Result<Vec<Message>, SessionError> {
        let experiment = self.experiment.as_ref().ok_or(SessionError::NothingLoaded)?;
        let text = samples::sample_text(experiment, self.position(run)?, prompt, options).await?;
        Ok(vec![Message::Sampled { run, text }])
    }

    async fn eliminate_query(&mut self, from: RunId, into: RunId) -> Result<Vec<Message>, SessionError> {
        if self.experiment.is_none() {
            return Err(SessionError::NothingLoaded);
        }
        let index = self.position(from)?;
        if self.experiment.as_ref().is_some_and(|e| e.position(into).is_some()) {
            return Err(SessionError::RunIdTaken(into));
        }
        let experiment = self.experiment.as_mut().expect("checked above");
        let original = &experiment.runs[index];
        let config = &original.spec.model;
        // Exact where the theory allows it: the whole model's W_Q, or else (skips around both
        // attention and MLP) the middle layer's; with LayerNorm, the approximate conversion.
        let case = match ReparamCase::of(config) {
            Ok(exact) => TheoryCase::from(exact),
            Err(_) if config.norm == Norm::LayerNorm => TheoryCase::LayerNorm,
            Err(_) => TheoryCase::Deep,
        };
        // On the CPU copy: the conversion reads every weight, which the browser cannot block on.
        let on_cpu = model_on_cpu(original.model()).await?;
        let (conversion, report) = convert_and_measure(case, original, &on_cpu, experiment.val_batches())?;
        let name = match case.layer(config) {
            Some(layer) => format!("{} (layer {layer}'s W_Q eliminated)", original.spec.name),
            None => format!("{} (W_Q eliminated)", original.spec.name),
        };
        let run = continue_converted(original, conversion, &name, experiment.dataset())?;
        let info = RunInfo::of(into, &run);
        experiment.add_run(run, into)?;
        let mut messages = vec![Message::Converted { from, info: Box::new(info), report: Box::new(report) }];
        // The run has joined whatever the maps do: a failed read of them must not hide it.
        messages.push(match self.attention().await {
            Ok(maps) => Message::Attention(maps),
            Err(e) => Message::Failed(Problem {
                message: format!("the converted run joined, but its attention maps could not be read: {e}"),
                ..Problem::of(&e)
            }),
        });
        Ok(messages)
    }

    /// Every run's checkpoint as it stands, each named after its run.
    async fn snapshot(&self) -> Result<Vec<Message>, SessionError> {
        let experiment = self.experiment.as_ref().ok_or(SessionError::NothingLoaded)?;
        let mut files = Vec::new();
        for run in &experiment.runs {
            let bytes = checkpoint::to_bytes(run, experiment.dataset(), &self.data_name()).await?;
            files.push(CheckpointFile { name: format!("{}.qkv", run.spec.name), bytes });
        }
        Ok(vec![Message::Snapshot { step: experiment.step, ids: experiment.ids().to_vec(), files }])
    }

    /// The data source as checkpoints name it.
    fn data_name(&self) -> String {
        self.data.as_ref().map(ToString::to_string).unwrap_or_default()
    }

    /// The run's metrics and checkpoint.
    async fn export(&self, run: RunId) -> Result<Vec<Message>, SessionError> {
        let experiment = self.experiment.as_ref().ok_or(SessionError::NothingLoaded)?;
        let r = &experiment.runs[self.position(run)?];
        let metrics_csv = qkv_train::csv::metrics_csv(std::slice::from_ref(r));
        let checkpoint = checkpoint::to_bytes(r, experiment.dataset(), &self.data_name()).await?;
        Ok(vec![Message::Exported { run, name: r.spec.name.clone(), checkpoint, metrics_csv }])
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::time::Duration;

    use super::*;
    use crate::{News, Turn, channel};
    use pollster::FutureExt as _;
    use qkv_model::{AttentionVariant, Preset};
    use qkv_train::plan::{ExperimentPlan, RunPlan, TrainingOverrides};
    use qkv_train::run::RunSpec;

    pub(crate) fn tiny_plan() -> ExperimentPlan {
        ExperimentPlan {
            preset: Preset::Classroom,
            data: "synthetic:reverse:6".parse().unwrap(),
            model: qkv_train::plan::ModelOverrides { n_embd: Some(32), block_size: Some(16), ..Default::default() },
            training: TrainingOverrides { steps: Some(4), batch_size: Some(8), ..Default::default() },
            runs: vec![RunPlan::new(AttentionVariant::Standard), RunPlan::new(AttentionVariant::SharedQueryKey)],
            ..ExperimentPlan::default()
        }
    }

    /// A vision experiment's maps read the first held-out image, and come with a strip of
    /// held-out images and every run's answer for each; a sample classifies one.
    #[test]
    fn a_vision_experiment_shows_its_images_and_each_runs_answers() {
        let mut session = Session::new(Device::flex(), ComputeId::cpu());
        let plan = ExperimentPlan {
            preset: Preset::VisionDigits,
            data: "digits".parse().unwrap(),
            training: TrainingOverrides { steps: Some(3), batch_size: Some(8), ..Default::default() },
            runs: vec![RunPlan::new(AttentionVariant::Standard), RunPlan::new(AttentionVariant::SharedQueryKeyRel)],
            ..ExperimentPlan::default()
        };
        session.handle(Command::Load(plan)).block_on();
        let messages = session.handle(Command::AttentionPrompt(String::new())).block_on();
        let Some(Message::Attention(maps)) = messages.iter().find(|m| matches!(m, Message::Attention(_))) else { panic!("{messages:?}") };
        assert_eq!(maps.tokens.len(), 17);
        assert_eq!((maps.tokens[0].as_str(), maps.tokens[16].as_str()), ("class", "r3c3"));
        let images = maps.images.as_ref().expect("held-out images");
        assert_eq!((images.pixels.len(), images.pixels[0].len(), images.patch), (8, 64, 2));
        assert_eq!(maps.predictions.len(), 2, "one row of answers per run");
        assert!(maps.predictions.iter().all(|answers| answers.len() == 8 && answers.iter().all(|&c| c < 10)));
        let sampled =
            session.handle(Command::Sample { run: RunId(0), prompt: String::new(), options: SampleOptions::default() }).block_on();
        let Some(Message::Sampled { text, .. }) = sampled.first() else { panic!("{sampled:?}") };
        assert!(text.starts_with("held-out image ") && text.contains("the model says"), "{text}");
    }

    #[test]
    fn a_batch_is_progress_only_when_every_message_is_training_progress() {
        let snapshot = || Message::Snapshot { step: 50, ids: vec![], files: vec![] };
        assert_eq!(News::of(&[snapshot()]), News::Progress);
        assert_eq!(News::of(&[Message::Playing(true)]), News::Event);
        assert_eq!(News::of(&[snapshot(), Message::Failed(Problem::new("out of memory"))]), News::Event);
    }

    #[test]
    fn the_maps_of_a_loaded_experiment_come_next_turn_or_after_the_first_step() {
        let (handle, mut task) = channel(Session::new(Device::flex(), ComputeId::cpu()), |_| {});
        let mut turn = || pollster::block_on(task.turn(Duration::ZERO));
        let received = || std::iter::from_fn(|| handle.try_recv()).collect::<Vec<_>>();
        let maps_step = |messages: &[Message]| {
            messages.iter().find_map(|m| match m {
                Message::Attention(maps) => Some(maps.step),
                _ => None,
            })
        };
        handle.send(Command::Load(tiny_plan()));
        turn();
        let loaded = received();
        assert_eq!(loaded.iter().filter(|m| matches!(m, Message::Evaluated { .. })).count(), 2);
        assert_eq!(maps_step(&loaded), None, "loading sends the runs and their evaluation first");
        // Idle: the next turn sends the untrained models' maps, once.
        turn();
        assert_eq!(maps_step(&received()), Some(0));
        assert_eq!(turn(), Turn::Idle);

        // Training at once: the first step is sent on its own, the maps (of step 1) next.
        handle.send(Command::Load(tiny_plan()));
        handle.send(Command::Play);
        turn();
        turn();
        assert_eq!(maps_step(&received()), None);
        turn();
        let first = received();
        assert!(first.iter().any(|m| matches!(m, Message::Run(RunEvent::Stepped { .. }))), "{first:?}");
        assert_eq!(maps_step(&first), None, "the first step waits for no maps");
        turn();
        assert_eq!(maps_step(&received()), Some(1));
    }

    #[test]
    fn a_threaded_session_trains_to_the_end_and_reports_every_step() {
        let (handle, task) = channel(Session::new(Device::flex(), ComputeId::cpu()), |_| {});
        std::thread::spawn(move || task.run_blocking());
        handle.send(Command::Load(tiny_plan()));
        handle.send(Command::Play);
        let mut steps = [0usize; 2];
        let mut maps = None;
        loop {
            match handle.recv_timeout(std::time::Duration::from_secs(60)).expect("the session answers") {
                Message::Run(RunEvent::Stepped { run, record, .. }) => {
                    steps[run.0] += 1;
                    assert_eq!(record.step, steps[run.0]);
                }
                Message::Attention(m) => maps = Some(m),
                Message::Finished => break,
                Message::Failed(error) => panic!("{error}"),
                _ => {}
            }
        }
        assert_eq!(steps, [4, 4]);
        let maps = maps.expect("attention maps arrive");
        assert_eq!(maps.step, 4);
        // The whole example (6 digits, SEP, 6 digits); 2 layers of 4 heads per run.
        assert_eq!(maps.time(), 13);
        assert_eq!(maps.tokens[6], "|");
        for run in &maps.runs {
            assert_eq!((run.len(), run[0].len()), (2, 4));
            for map in run.iter().flatten() {
                for query in 0..13 {
                    let row = &map[query * 13..][..13];
                    let sum: f32 = row.iter().sum();
                    assert!((sum - 1.0).abs() < 1e-4, "row {query} sums to {sum}");
                    assert!(row[query + 1..].iter().all(|&p| p == 0.0), "attends to the future");
                }
            }
        }
    }

    #[test]
    fn export_then_import_continues_the_run() {
        let mut session = Session::new(Device::flex(), ComputeId::cpu());
        session.handle(Command::Load(tiny_plan())).block_on();
        session.handle(Command::Step).block_on();
        let exported = session.handle(Command::Export { run: RunId(1) }).block_on();
        let Some(Message::Exported { checkpoint, metrics_csv, name, .. }) = exported.into_iter().next() else { panic!("no export") };
        assert_eq!(name, "shared-qk");
        assert_eq!(metrics_csv.lines().count(), 1 + 1 + 1, "header, step 0 and step 1");
        let file = |name: &str, bytes: Vec<u8>| CheckpointFile { name: name.into(), bytes };
        let messages = session.handle(Command::Import { files: vec![file(&name, checkpoint.clone())], upload: None }).block_on();
        let Some(Message::Loaded { runs, .. }) = messages.first() else { panic!("{messages:?}") };
        assert_eq!(runs.len(), 1);
        assert_eq!(runs[0].steps.len(), 1, "the imported run keeps its curve");
        let next = session.handle(Command::Step).block_on();
        assert!(next.iter().any(|m| matches!(m, Message::Run(RunEvent::Stepped { record, .. }) if record.step == 2)), "{next:?}");

        let mut broken = checkpoint;
        broken.truncate(broken.len() / 2);
        let messages = session.handle(Command::Import { files: vec![file("half.qkv", broken)], upload: None }).block_on();
        assert!(matches!(&messages[..], [Message::Failed(e)] if e.message.contains("truncated")), "{messages:?}");
        // The session still holds the imported run.
        assert_eq!(session.experiment().unwrap().runs.len(), 1);
    }

    #[test]
    fn an_imported_gpt2_trains_shows_its_attention_and_loses_its_w_q() {
        use qkv_train::pytorch::{Layout, from_safetensors, to_safetensors};
        // A GPT-2-shaped model (LayerNorm, biases, tied embeddings) as Hugging Face would hand it over.
        let device = Device::flex();
        let dataset = qkv_train::Dataset::load(&"synthetic:reverse:6".parse().unwrap(), &qkv_train::TokenizerKind::Char, 1).unwrap();
        let mut config = Preset::Classroom.config();
        (config.bias, config.tie_embeddings, config.block_size, config.vocab_size) = (true, true, 16, dataset.vocab_size());
        let model = qkv_model::Gpt::new_seeded(&config, &device, 2).unwrap();
        let bytes = to_safetensors(&model, &config, Layout::HuggingFace).unwrap();
        let (config, model) = from_safetensors(&bytes, "gpt2.safetensors", None, &device).unwrap();
        let mut training = qkv_train::TrainingConfig::for_preset(Preset::Classroom);
        training.batch_size = 4;
        let run =
            Run::starting_from(RunSpec { name: "gpt2".into(), model: config, training }, qkv_model::Model::Gpt(model), &dataset, &device)
                .unwrap();
        let checkpoint = qkv_train::checkpoint::to_bytes(&run, &dataset, "synthetic:reverse:6").block_on().unwrap();

        let mut session = Session::new(Device::flex(), ComputeId::cpu());
        let messages = session
            .handle(Command::Import { files: vec![CheckpointFile { name: "gpt2.qkv".into(), bytes: checkpoint }], upload: None })
            .block_on();
        assert!(matches!(messages.first(), Some(Message::Loaded { .. })), "{messages:?}");
        let stepped = session.handle(Command::Step).block_on();
        assert!(stepped.iter().any(|m| matches!(m, Message::Run(RunEvent::Stepped { record, .. }) if record.step == 1)), "{stepped:?}");
        let maps = session.handle(Command::AttentionPrompt(String::new())).block_on();
        assert!(matches!(maps.first(), Some(Message::Attention(maps)) if maps.runs.len() == 1), "{maps:?}");
        let converted = session.handle(Command::EliminateQuery { run: RunId(0), into: RunId(1) }).block_on();
        let Some(Message::Converted { report, .. }) = converted.first() else { panic!("{converted:?}") };
        assert_eq!(report.case, TheoryCase::LayerNorm, "the approximate conversion, then fine-tuning");
        let next = session.handle(Command::Step).block_on();
        assert_eq!(next.iter().filter(|m| matches!(m, Message::Run(RunEvent::Stepped { .. }))).count(), 2, "{next:?}");
    }

    #[test]
    fn a_snapshot_continues_every_run_where_it_stood() {
        let mut session = Session::new(Device::flex(), ComputeId::cpu());
        session.handle(Command::Load(tiny_plan())).block_on();
        session.handle(Command::Step).block_on();
        session.handle(Command::Step).block_on();
        let messages = session.handle(Command::Snapshot).block_on();
        let [Message::Snapshot { step: 2, files, .. }] = messages.as_slice() else { panic!("{messages:?}") };
        let names: Vec<&str> = files.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["standard.qkv", "shared-qk.qkv"]);
        let uninterrupted = session.handle(Command::Step).block_on();

        let mut resumed = Session::new(Device::flex(), ComputeId::cpu());
        let messages = resumed.handle(Command::Import { files: files.clone(), upload: None }).block_on();
        let Some(Message::Loaded { runs, .. }) = messages.first() else { panic!("{messages:?}") };
        assert!(runs.iter().all(|run| run.steps.len() == 2), "both curves continue");
        let step3 = |messages: &[Message]| -> Vec<f64> {
            messages
                .iter()
                .filter_map(|m| if let Message::Run(RunEvent::Stepped { record, .. }) = m { Some(record.train_loss) } else { None })
                .collect()
        };
        let continued = resumed.handle(Command::Step).block_on();
        assert_eq!(step3(&continued), step3(&uninterrupted), "the next step trains on the same batch from the same weights");

        // Runs of another experiment (other data) do not join.
        let mut other = Session::new(Device::flex(), ComputeId::cpu());
        other.handle(Command::Load(ExperimentPlan { data: "synthetic:copy:6".parse().unwrap(), ..tiny_plan() })).block_on();
        let snapshot = other.handle(Command::Snapshot).block_on();
        let [Message::Snapshot { files: others, .. }] = snapshot.as_slice() else { panic!("no snapshot") };
        let mixed = vec![files[0].clone(), others[0].clone()];
        let messages = resumed.handle(Command::Import { files: mixed, upload: None }).block_on();
        assert!(matches!(&messages[..], [Message::Failed(e)] if e.message.contains("different data")), "{messages:?}");
        assert!(matches!(&resumed.handle(Command::Import { files: vec![], upload: None }).block_on()[..], [Message::Failed(_)]));
    }

    #[test]
    fn eliminating_w_q_adds_a_run_with_the_same_attention_and_fewer_parameters() {
        let mut session = Session::new(Device::flex(), ComputeId::cpu());
        let plan = ExperimentPlan {
            preset: Preset::Theory,
            model: qkv_train::plan::ModelOverrides { mlp_skip: Some(false), block_size: Some(16), ..Default::default() },
            training: TrainingOverrides { steps: Some(20), batch_size: Some(4), ..Default::default() },
            runs: vec![RunPlan::new(AttentionVariant::Standard)],
            ..ExperimentPlan::default()
        };
        session.handle(Command::Load(plan)).block_on();
        (0..5).for_each(|_| drop(session.handle(Command::Step).block_on()));
        let messages = session.handle(Command::EliminateQuery { run: RunId(0), into: RunId(1) }).block_on();
        let Some(Message::Converted { from: RunId(0), info, report }) = messages.first() else { panic!("{messages:?}") };
        assert_eq!(report.case, TheoryCase::NoMlpSkip);
        assert!(report.max_abs_logit_diff < 1e-4, "{report:?}");
        assert!(info.params.total_params < report.params_before);
        assert_eq!(info.steps.len(), 5, "the converted run continues the original's curve");
        let Some(Message::Attention(maps)) = messages.get(1) else { panic!("{messages:?}") };
        let (a, b) = (&maps.runs[0], &maps.runs[1]);
        let largest =
            a.iter().flatten().zip(b.iter().flatten()).flat_map(|(x, y)| x.iter().zip(y)).fold(0f32, |m, (p, q)| m.max((p - q).abs()));
        assert!(largest < 1e-5, "attention maps differ by {largest}");
        // Both go on training on the same batches.
        let next = session.handle(Command::Step).block_on();
        assert_eq!(next.iter().filter(|m| matches!(m, Message::Run(RunEvent::Stepped { .. }))).count(), 2);
        let taken = session.handle(Command::EliminateQuery { run: RunId(0), into: RunId(1) }).block_on();
        assert!(matches!(&taken[..], [Message::Failed(e)] if e.message.contains("run 1 is already there")), "{taken:?}");

        // Skips around both attention and MLP: the middle layer's W_Q goes, exactly.
        let standard_layers = ExperimentPlan { preset: Preset::Theory, ..ExperimentPlan::default() };
        session.handle(Command::Load(standard_layers)).block_on();
        let unused = RunId(session.experiment().unwrap().runs.len());
        let messages = session.handle(Command::EliminateQuery { run: RunId(0), into: unused }).block_on();
        let Some(Message::Converted { info, report, .. }) = messages.first() else { panic!("{messages:?}") };
        assert_eq!(report.case, TheoryCase::Deep);
        assert!(report.max_abs_logit_diff < 1e-4, "{report:?}");
        assert!(info.spec.name.contains("layer 1's W_Q eliminated"), "{}", info.spec.name);

        let identity = ExperimentPlan { runs: vec![RunPlan::new(AttentionVariant::QueryIdentity)], ..ExperimentPlan::default() };
        session.handle(Command::Load(identity)).block_on();
        let refused = session.handle(Command::EliminateQuery { run: RunId(0), into: RunId(1) }).block_on();
        assert!(matches!(&refused[..], [Message::Failed(e)] if e.message.contains("not standard")), "{refused:?}");
    }

    #[test]
    fn a_bad_plan_is_refused_and_the_session_keeps_its_experiment() {
        let mut session = Session::new(Device::flex(), ComputeId::cpu());
        session.handle(Command::Load(tiny_plan())).block_on();
        let mut bad = tiny_plan();
        bad.model.n_head = Some(5);
        let messages = session.handle(Command::Load(bad)).block_on();
        assert!(matches!(&messages[..], [Message::Failed(e)] if e.message.contains("n_head")), "{messages:?}");
        assert_eq!(session.experiment().unwrap().runs.len(), 2);
    }
}
