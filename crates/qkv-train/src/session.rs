//! A training session driven by messages, for interactive front ends: commands in (load a plan,
//! play, pause, step, sample, export), results out (step records, evaluations, attention maps,
//! samples). The app never touches a tensor; it sends [`Command`]s and draws [`Message`]s.
//!
//! [`spawn`] runs a session beside the UI, so the UI never waits on training: natively on its own
//! thread, in the browser as a task on the page's event loop that yields between steps. Every
//! read-back from the device is awaited, since a browser's GPU cannot be waited on.

use burn::tensor::{Device, Int, Tensor, TensorData};
use serde::{Deserialize, Serialize};

use qkv_model::reparam::ReparamCase;
use qkv_model::{Norm, ParamReport};

use crate::checkpoint::{self, Checkpoint};
use crate::cpu_copy::model_on_cpu;
use crate::dataset::{DataSource, Dataset};
use crate::experiment::{Experiment, RunEvent};
use crate::generate::{SampleOptions, generate_async};
use crate::plan::ExperimentPlan;
use crate::run::{EvalRecord, Run, RunSpec, StepRecord};
use crate::synthetic::{SEP, Split};
use crate::theory::{ReparamReport, TheoryCase, continue_converted, convert_and_measure};

/// Prompt tokens shown in the attention maps of text data: enough to read, few enough to see.
const ATTENTION_PROMPT_TOKENS: usize = 32;

#[derive(Debug, Clone)]
pub enum Command {
    /// Builds a new experiment from the plan, replacing the current one.
    Load(ExperimentPlan),
    /// Continues a saved run (checkpoint file contents) as a one-run experiment.
    Import {
        name: String,
        bytes: Vec<u8>,
    },
    Play,
    Pause,
    /// One step of every run, then pause.
    Step,
    /// The prompt of the attention maps (empty: the default line); maps are sent at once.
    AttentionPrompt(String),
    /// Refresh the attention maps every this many steps while training.
    AttentionEvery(usize),
    Sample {
        run: usize,
        prompt: String,
        options: SampleOptions,
    },
    Export {
        run: usize,
    },
    /// Folds the run's W_Q into its neighbours (paper 1's theory) and adds the converted model
    /// as a new run that continues from here.
    EliminateQuery {
        run: usize,
    },
}

/// What a front end needs to show a run before it has trained.
#[derive(Debug, Clone)]
pub struct RunInfo {
    pub spec: RunSpec,
    pub params: ParamReport,
    /// Metrics the run already had (an imported checkpoint), so curves continue.
    pub steps: Vec<StepRecord>,
    pub evals: Vec<EvalRecord>,
}

/// Every run's attention probabilities on one prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttentionMaps {
    /// The experiment step they were taken at.
    pub step: usize,
    /// One label per prompt token.
    pub tokens: Vec<String>,
    /// Per run: [layer][head] → row-major [query, key] probabilities (T × T).
    pub runs: Vec<Vec<Vec<Vec<f32>>>>,
}

impl RunInfo {
    pub fn of(run: &Run) -> Self {
        Self {
            spec: run.spec.clone(),
            params: ParamReport::new(&run.spec.model),
            steps: run.metrics.steps.clone(),
            evals: run.metrics.evals.clone(),
        }
    }
}

impl AttentionMaps {
    pub fn time(&self) -> usize {
        self.tokens.len()
    }
}

#[derive(Debug, Clone)]
pub enum Message {
    Loaded {
        runs: Vec<RunInfo>,
        data: String,
        backend: String,
    },
    Stepped {
        run: usize,
        record: StepRecord,
        eval: Option<EvalRecord>,
    },
    Evaluated {
        run: usize,
        record: EvalRecord,
    },
    Stopped {
        run: usize,
        error: String,
    },
    Attention(AttentionMaps),
    Sampled {
        run: usize,
        text: String,
    },
    Exported {
        run: usize,
        name: String,
        checkpoint: Vec<u8>,
        metrics_csv: String,
    },
    /// A converted model joined as run `info`; `report` says how exactly it matches `from`.
    /// (Boxed: the message is rare and large, and every message would carry its size.)
    Converted {
        from: usize,
        info: Box<RunInfo>,
        report: Box<ReparamReport>,
    },
    /// Playing or paused, as the session now is.
    Playing(bool),
    /// Every run has finished or stopped.
    Finished,
    /// A command failed; the session carries on as before it.
    Failed(String),
}

pub struct Session {
    device: Device,
    backend: String,
    experiment: Option<Experiment>,
    data: String,
    playing: bool,
    attention_prompt: String,
    attention_every: usize,
}

impl Session {
    /// `backend` names the device for people ("flex (CPU)", "wgpu: NVIDIA …").
    pub fn new(device: Device, backend: impl Into<String>) -> Self {
        Self {
            device,
            backend: backend.into(),
            experiment: None,
            data: String::new(),
            playing: false,
            attention_prompt: String::new(),
            attention_every: 25,
        }
    }

    /// Forgets the experiment (after a failure left it in an unknown state).
    pub fn unload(&mut self) {
        self.experiment = None;
        self.playing = false;
    }

    /// Whether the session wants to take steps without being asked.
    pub fn is_busy(&self) -> bool {
        self.playing && self.experiment.as_ref().is_some_and(|e| !e.is_done())
    }

    pub fn experiment(&self) -> Option<&Experiment> {
        self.experiment.as_ref()
    }

    pub async fn handle(&mut self, command: Command) -> Vec<Message> {
        let result = match command {
            Command::Load(plan) => self.load(&plan).await,
            Command::Import { name, bytes } => self.import(&name, &bytes).await,
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
                messages.extend(self.advance().await);
                Ok(messages)
            }
            Command::AttentionPrompt(prompt) => {
                self.attention_prompt = prompt;
                self.attention().await.map(|maps| vec![Message::Attention(maps)])
            }
            Command::AttentionEvery(every) => {
                self.attention_every = every.max(1);
                Ok(vec![])
            }
            Command::Sample { run, prompt, options } => self.sample(run, &prompt, &options).await,
            Command::Export { run } => self.export(run).await,
            Command::EliminateQuery { run } => self.eliminate_query(run).await,
        };
        result.unwrap_or_else(|error| vec![Message::Failed(error)])
    }

    async fn loaded(&mut self, experiment: Experiment, data: String) -> Result<Vec<Message>, String> {
        let runs = experiment.runs.iter().map(RunInfo::of).collect();
        self.experiment = Some(experiment);
        self.data = data.clone();
        self.playing = false;
        let mut messages = vec![Message::Loaded { runs, data, backend: self.backend.clone() }, Message::Playing(false)];
        // The step-0 point of every curve: what an untrained model scores.
        let experiment = self.experiment.as_mut().expect("just set");
        let fresh: Vec<bool> = experiment.runs.iter().map(|r| r.step == 0).collect();
        for (run, result) in experiment.evaluate_all_async().await.into_iter().enumerate() {
            match result {
                Ok(record) if fresh[run] => messages.push(Message::Evaluated { run, record }),
                Ok(_) => {}
                Err(error) => messages.push(Message::Stopped { run, error: error.to_string() }),
            }
        }
        // The experiment is loaded either way: a failed read of the maps must not hide its runs.
        messages.push(self.attention().await.map_or_else(Message::Failed, Message::Attention));
        Ok(messages)
    }

    async fn load(&mut self, plan: &ExperimentPlan) -> Result<Vec<Message>, String> {
        let experiment = plan.experiment(&self.device).map_err(|e| e.to_string())?;
        self.loaded(experiment, plan.data.to_string()).await
    }

    async fn import(&mut self, name: &str, bytes: &[u8]) -> Result<Vec<Message>, String> {
        let checkpoint = Checkpoint::from_bytes(name, bytes).map_err(|e| e.to_string())?;
        let header = &checkpoint.header;
        let source: DataSource = header.data.parse()?;
        if let DataSource::File(path) = &source
            && !std::path::Path::new(path).exists()
            && crate::corpus::uploaded(path).is_none()
        {
            return Err(format!(
                "{name} was trained on {path}, which is not here: put the file back at that path (in the browser: upload it) to continue training it"
            ));
        }
        // The data as the run saw it: same source, tokenizer and seed (synthetic examples
        // are generated from it).
        let plan = ExperimentPlan {
            data: source,
            tokenizer: header.tokenizer.as_ref().map_or(crate::TokenizerKind::Char, |t| t.kind()),
            training: crate::plan::TrainingOverrides { seed: Some(header.spec.training.seed), ..Default::default() },
            ..ExperimentPlan::default()
        };
        let dataset = plan.dataset().map_err(|e| e.to_string())?;
        let run = checkpoint.into_run(&dataset, &self.device).map_err(|e| e.to_string())?;
        let experiment = Experiment::from_runs(dataset, vec![run]).map_err(|e| e.to_string())?;
        self.loaded(experiment, plan.data.to_string()).await
    }

    /// One step of every active run.
    pub async fn advance(&mut self) -> Vec<Message> {
        let Some(experiment) = self.experiment.as_mut() else { return vec![] };
        if experiment.is_done() {
            return vec![Message::Finished];
        }
        let mut messages: Vec<Message> = experiment.step_async().await.into_iter().map(event_message).collect();
        let step = experiment.step;
        if step % self.attention_every == 0 || experiment.is_done() {
            match self.attention().await {
                Ok(maps) => messages.push(Message::Attention(maps)),
                Err(error) => messages.push(Message::Failed(error)),
            }
        }
        if self.experiment.as_ref().is_some_and(Experiment::is_done) {
            self.playing = false;
            messages.extend([Message::Playing(false), Message::Finished]);
        }
        messages
    }

    /// The prompt tokens of the attention maps and their labels.
    fn attention_tokens(&self, experiment: &Experiment) -> Result<(Vec<u32>, Vec<String>), String> {
        let block_size = experiment.runs.iter().map(|r| r.spec.model.block_size).min().unwrap_or(1);
        match experiment.dataset() {
            Dataset::Synthetic(data) => {
                // One validation example in full: the maps show how the answer reads the input.
                let example = data.example(Split::Val, 0);
                let labels = example.iter().map(|&t| if t == SEP { "|".to_string() } else { t.to_string() }).collect();
                Ok((example, labels))
            }
            Dataset::Text(text) => {
                let tokens = if self.attention_prompt.is_empty() {
                    // The first full line of the validation split.
                    let newline = text.tokenizer.encode("\n").ok().and_then(|t| t.first().copied());
                    let start = newline.and_then(|nl| text.val.iter().position(|&t| t == nl)).map_or(0, |p| p + 1);
                    text.val[start..].iter().copied().take(ATTENTION_PROMPT_TOKENS).collect()
                } else {
                    text.tokenizer.encode(&self.attention_prompt).map_err(|e| e.to_string())?
                };
                if tokens.is_empty() {
                    return Err("the attention prompt is empty: type a few words".into());
                }
                let tokens: Vec<u32> = tokens.into_iter().take(block_size.min(64)).collect();
                let labels = tokens.iter().map(|&t| text.tokenizer.decode(&[t])).collect();
                Ok((tokens, labels))
            }
        }
    }

    async fn attention(&self) -> Result<AttentionMaps, String> {
        let Some(experiment) = &self.experiment else { return Err("load an experiment first".into()) };
        let (tokens, labels) = self.attention_tokens(experiment)?;
        let time = tokens.len();
        let ids: Vec<i64> = tokens.iter().map(|&t| t as i64).collect();
        let mut runs = Vec::new();
        for run in &experiment.runs {
            let model = burn::module::Module::valid(run.model());
            let device = run.device().clone().without_autodiff();
            let input = Tensor::<2, Int>::from_data(TensorData::new(ids.clone(), [1, time]), &device);
            let layers = model.forward_with_attention(input).attention;
            let n_layer = layers.len();
            let n_head = layers.first().map_or(0, |l| l.dims()[1]);
            let values = Tensor::cat(layers.into_iter().map(|l| l.reshape([-1])).collect(), 0)
                .into_data_async()
                .await
                .map_err(|e| format!("reading attention maps: {e:?}"))?
                .try_into_vec_as::<f32>()
                .map_err(|e| format!("reading attention maps: {e:?}"))?;
            let per_map = time * time;
            let maps =
                (0..n_layer).map(|l| (0..n_head).map(|h| values[(l * n_head + h) * per_map..][..per_map].to_vec()).collect()).collect();
            runs.push(maps);
        }
        Ok(AttentionMaps { step: experiment.step, tokens: labels, runs })
    }

    async fn sample(&self, run: usize, prompt: &str, options: &SampleOptions) -> Result<Vec<Message>, String> {
        let experiment = self.experiment.as_ref().ok_or("load an experiment first")?;
        let model = burn::module::Module::valid(experiment.runs.get(run).ok_or("no such run")?.model());
        let text = match experiment.dataset() {
            Dataset::Text(data) => {
                let prompt = if prompt.is_empty() { "\n" } else { prompt };
                let ids = data.tokenizer.encode(prompt).map_err(|e| e.to_string())?;
                let generation = generate_async(&model, &ids, options).await.map_err(|e| e.to_string())?;
                format!("{prompt}{}", data.tokenizer.decode(&generation.tokens))
            }
            Dataset::Synthetic(data) => {
                // Answer a validation list: the model writes y after `x SEP`.
                let example = data.example(Split::Val, options.seed as usize % Split::Val.examples());
                let question = &example[..data.length + 1];
                let options = SampleOptions { max_new_tokens: data.length, temperature: 0.0, ..options.clone() };
                let answer = generate_async(&model, question, &options).await.map_err(|e| e.to_string())?.tokens;
                let digits = |t: &[u32]| t.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(" ");
                let expected = &example[data.length + 1..];
                let right = answer.iter().zip(expected).filter(|(a, b)| a == b).count();
                format!(
                    "input    {}\nanswer   {}\nexpected {}\n{right}/{} digits right",
                    digits(&question[..data.length]),
                    digits(&answer),
                    digits(expected),
                    data.length
                )
            }
        };
        Ok(vec![Message::Sampled { run, text }])
    }

    async fn eliminate_query(&mut self, index: usize) -> Result<Vec<Message>, String> {
        let experiment = self.experiment.as_mut().ok_or("load an experiment first")?;
        let original = experiment.runs.get(index).ok_or("no such run")?;
        let config = &original.spec.model;
        // Exact where the theory allows it; with LayerNorm, the approximate conversion.
        let case = match ReparamCase::of(config) {
            Ok(exact) => TheoryCase::from(exact),
            Err(_) if config.norm == Norm::LayerNorm => TheoryCase::LayerNorm,
            Err(e) => return Err(e.to_string()),
        };
        // On the CPU copy: the conversion reads every weight, which the browser cannot block on.
        let on_cpu = model_on_cpu(original.model()).await.map_err(|e| e.to_string())?;
        let (conversion, report) = convert_and_measure(case, original, on_cpu, experiment.val_batches()).map_err(|e| e.to_string())?;
        let name = format!("{} (W_Q eliminated)", original.spec.name);
        let run = continue_converted(original, conversion, &name, experiment.dataset()).map_err(|e| e.to_string())?;
        let info = RunInfo::of(&run);
        experiment.add_run(run).map_err(|e| e.to_string())?;
        let mut messages = vec![Message::Converted { from: index, info: Box::new(info), report: Box::new(report) }];
        messages.push(Message::Attention(self.attention().await?));
        Ok(messages)
    }

    /// The run's metrics and checkpoint.
    async fn export(&self, run: usize) -> Result<Vec<Message>, String> {
        let experiment = self.experiment.as_ref().ok_or("load an experiment first")?;
        let r = experiment.runs.get(run).ok_or("no such run")?;
        let metrics_csv = crate::csv::metrics_csv(std::slice::from_ref(r));
        let checkpoint = checkpoint::to_bytes_async(r, experiment.dataset(), &self.data).await.map_err(|e| e.to_string())?;
        Ok(vec![Message::Exported { run, name: r.spec.name.clone(), checkpoint, metrics_csv }])
    }
}

fn event_message(event: RunEvent) -> Message {
    match event {
        RunEvent::Stepped { run, record, eval } => Message::Stepped { run, record, eval },
        RunEvent::Stopped { run, error } => Message::Stopped { run, error: error.to_string() },
    }
}

/// A session on its own thread: send commands, receive messages.
#[cfg(not(target_family = "wasm"))]
pub struct SessionHandle {
    commands: std::sync::mpsc::Sender<Command>,
    messages: std::sync::mpsc::Receiver<Message>,
}

#[cfg(not(target_family = "wasm"))]
impl SessionHandle {
    /// False once the session's thread has gone (it only ends when the handle is dropped, or
    /// on a panic inside the engine).
    pub fn send(&self, command: Command) -> bool {
        self.commands.send(command).is_ok()
    }

    pub fn try_recv(&self) -> Option<Message> {
        self.messages.try_recv().ok()
    }

    /// Waits up to `timeout` for the next message (for tests and headless drivers).
    pub fn recv_timeout(&self, timeout: std::time::Duration) -> Option<Message> {
        self.messages.recv_timeout(timeout).ok()
    }
}

/// Starts a session thread. `notify` is called after every batch of messages (the app asks for
/// a repaint there), so the UI wakes only when something changed.
#[cfg(not(target_family = "wasm"))]
pub fn spawn(session: Session, notify: impl Fn() + Send + 'static) -> SessionHandle {
    use std::sync::mpsc::{TryRecvError, channel};
    let (commands, command_rx) = channel::<Command>();
    let (message_tx, messages) = channel::<Message>();
    std::thread::Builder::new()
        .name("qkv-session".into())
        .spawn(move || {
            let mut session = session;
            loop {
                // Commands first, so Pause takes effect before the next step; idle, wait for one.
                let command = if session.is_busy() {
                    match command_rx.try_recv() {
                        Ok(command) => Some(command),
                        Err(TryRecvError::Empty) => None,
                        Err(TryRecvError::Disconnected) => return,
                    }
                } else {
                    match command_rx.recv() {
                        Ok(command) => Some(command),
                        Err(_) => return,
                    }
                };
                // A failing device (a kernel that does not compile, a lost GPU) panics inside
                // Burn; the session survives it, drops the experiment and says what happened.
                let work = std::panic::AssertUnwindSafe(|| {
                    pollster::block_on(async {
                        match command {
                            Some(command) => session.handle(command).await,
                            None => session.advance().await,
                        }
                    })
                });
                let batch = std::panic::catch_unwind(work).unwrap_or_else(|panic| {
                    session.unload();
                    let reason = panic
                        .downcast_ref::<String>()
                        .map(String::as_str)
                        .or_else(|| panic.downcast_ref::<&str>().copied())
                        .unwrap_or("unknown failure");
                    let reason = reason.lines().next().unwrap_or(reason);
                    vec![
                        Message::Playing(false),
                        Message::Failed(format!(
                            "training stopped on {}: {reason}; apply the setup again, or switch compute to flex (CPU)",
                            session.backend
                        )),
                    ]
                });
                for message in batch {
                    if message_tx.send(message).is_err() {
                        return;
                    }
                }
                notify();
            }
        })
        .expect("the OS can start a thread");
    SessionHandle { commands, messages }
}

/// A session on the page's event loop: send commands, receive messages. The browser has one
/// thread, so the session runs as a task that hands the page back after every step.
#[cfg(target_family = "wasm")]
pub struct SessionHandle {
    commands: std::rc::Rc<std::cell::RefCell<std::collections::VecDeque<Command>>>,
    messages: std::rc::Rc<std::cell::RefCell<std::collections::VecDeque<Message>>>,
}

#[cfg(target_family = "wasm")]
impl SessionHandle {
    /// Always true: a panic in the browser ends the whole page, not just the session.
    pub fn send(&self, command: Command) -> bool {
        self.commands.borrow_mut().push_back(command);
        true
    }

    pub fn try_recv(&self) -> Option<Message> {
        self.messages.borrow_mut().pop_front()
    }
}

/// Resolves after `ms` milliseconds on the page's timer queue: the page draws and handles input
/// meanwhile (a resolved promise alone would not let it, microtasks run before rendering).
#[cfg(target_family = "wasm")]
async fn yield_to_page(ms: i32) {
    let promise = js_sys::Promise::new(&mut |resolve, _reject| {
        if let Some(window) = web_sys::window() {
            let _ = window.set_timeout_with_callback_and_timeout_and_arguments_0(&resolve, ms);
        }
    });
    let _ = wasm_bindgen_futures::JsFuture::from(promise).await;
}

/// How long the browser's session task trains before it hands the page back: most of a 60 Hz
/// frame, so that the page still draws every frame.
#[cfg(target_family = "wasm")]
const BROWSER_TURN: std::time::Duration = std::time::Duration::from_millis(12);

/// Starts the session task. `notify` is called after every batch of messages. The task ends
/// when the handle is dropped.
#[cfg(target_family = "wasm")]
pub fn spawn(session: Session, notify: impl Fn() + 'static) -> SessionHandle {
    use std::rc::Rc;
    let handle = SessionHandle { commands: Rc::default(), messages: Rc::default() };
    let (commands, messages) = (Rc::downgrade(&handle.commands), Rc::downgrade(&handle.messages));
    wasm_bindgen_futures::spawn_local(async move {
        let mut session = session;
        loop {
            let Some(inbox) = commands.upgrade() else { return };
            let command = inbox.borrow_mut().pop_front();
            drop(inbox);
            let batch = match command {
                Some(command) => session.handle(command).await,
                None if session.is_busy() => {
                    // Short steps run back to back for up to one turn before the page gets the
                    // thread back: a yield costs a timer tick (4 ms or more) and a frame, more
                    // than a step of a small model takes.
                    let started = web_time::Instant::now();
                    let mut batch = Vec::new();
                    loop {
                        batch.extend(session.advance().await);
                        let command_waiting = commands.upgrade().is_some_and(|inbox| !inbox.borrow().is_empty());
                        if !session.is_busy() || command_waiting || started.elapsed() >= BROWSER_TURN {
                            break batch;
                        }
                    }
                }
                None => {
                    // Idle: look for commands a few times per frame.
                    yield_to_page(5).await;
                    continue;
                }
            };
            let Some(outbox) = messages.upgrade() else { return };
            outbox.borrow_mut().extend(batch);
            drop(outbox);
            notify();
            yield_to_page(0).await;
        }
    });
    handle
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{ExperimentPlan, RunPlan, TrainingOverrides};
    use qkv_model::{AttentionVariant, Preset};

    /// The tests drive a session directly, waiting on each command.
    trait Blocking {
        fn run(&mut self, command: Command) -> Vec<Message>;
    }

    impl Blocking for Session {
        fn run(&mut self, command: Command) -> Vec<Message> {
            pollster::block_on(self.handle(command))
        }
    }

    fn tiny_plan() -> ExperimentPlan {
        ExperimentPlan {
            preset: Preset::Classroom,
            data: "synthetic:reverse:6".parse().unwrap(),
            model: crate::plan::ModelOverrides { n_embd: Some(32), block_size: Some(16), ..Default::default() },
            training: TrainingOverrides { steps: Some(4), batch_size: Some(8), ..Default::default() },
            runs: vec![RunPlan::new(AttentionVariant::Standard), RunPlan::new(AttentionVariant::SharedQueryKey)],
            ..ExperimentPlan::default()
        }
    }

    #[test]
    fn a_threaded_session_trains_to_the_end_and_reports_every_step() {
        let handle = spawn(Session::new(Device::flex(), "flex"), || {});
        handle.send(Command::Load(tiny_plan()));
        handle.send(Command::Play);
        let mut steps = [0usize; 2];
        let mut maps = None;
        loop {
            match handle.recv_timeout(std::time::Duration::from_secs(60)).expect("the session answers") {
                Message::Stepped { run, record, .. } => {
                    steps[run] += 1;
                    assert_eq!(record.step, steps[run]);
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
        let mut session = Session::new(Device::flex(), "flex");
        session.run(Command::Load(tiny_plan()));
        session.run(Command::Step);
        let exported = session.run(Command::Export { run: 1 });
        let Some(Message::Exported { checkpoint, metrics_csv, name, .. }) = exported.into_iter().next() else { panic!("no export") };
        assert_eq!(name, "shared-qk");
        assert_eq!(metrics_csv.lines().count(), 1 + 1 + 1, "header, step 0 and step 1");
        let messages = session.run(Command::Import { name: name.clone(), bytes: checkpoint.clone() });
        let Some(Message::Loaded { runs, .. }) = messages.first() else { panic!("{messages:?}") };
        assert_eq!(runs.len(), 1);
        assert_eq!(runs[0].steps.len(), 1, "the imported run keeps its curve");
        let next = session.run(Command::Step);
        assert!(next.iter().any(|m| matches!(m, Message::Stepped { record, .. } if record.step == 2)), "{next:?}");

        let mut broken = checkpoint;
        broken.truncate(broken.len() / 2);
        let messages = session.run(Command::Import { name: "half.qkv".into(), bytes: broken });
        assert!(matches!(&messages[..], [Message::Failed(e)] if e.contains("truncated")), "{messages:?}");
        // The session still holds the imported run.
        assert_eq!(session.experiment().unwrap().runs.len(), 1);
    }

    #[test]
    fn eliminating_w_q_adds_a_run_with_the_same_attention_and_fewer_parameters() {
        let mut session = Session::new(Device::flex(), "flex");
        let plan = ExperimentPlan {
            preset: Preset::Theory,
            model: crate::plan::ModelOverrides { mlp_skip: Some(false), block_size: Some(16), ..Default::default() },
            training: TrainingOverrides { steps: Some(20), batch_size: Some(4), ..Default::default() },
            runs: vec![RunPlan::new(AttentionVariant::Standard)],
            ..ExperimentPlan::default()
        };
        session.run(Command::Load(plan));
        (0..5).for_each(|_| drop(session.run(Command::Step)));
        let messages = session.run(Command::EliminateQuery { run: 0 });
        let Some(Message::Converted { from: 0, info, report }) = messages.first() else { panic!("{messages:?}") };
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
        let next = session.run(Command::Step);
        assert_eq!(next.iter().filter(|m| matches!(m, Message::Stepped { .. })).count(), 2);

        let standard_layers = ExperimentPlan { preset: Preset::Theory, ..ExperimentPlan::default() };
        session.run(Command::Load(standard_layers));
        let refused = session.run(Command::EliminateQuery { run: 0 });
        assert!(matches!(&refused[..], [Message::Failed(e)] if e.contains("shared_layers")), "{refused:?}");
    }

    #[test]
    fn a_bad_plan_is_refused_and_the_session_keeps_its_experiment() {
        let mut session = Session::new(Device::flex(), "flex");
        session.run(Command::Load(tiny_plan()));
        let mut bad = tiny_plan();
        bad.model.n_head = Some(5);
        let messages = session.run(Command::Load(bad));
        assert!(matches!(&messages[..], [Message::Failed(e)] if e.contains("n_head")), "{messages:?}");
        assert_eq!(session.experiment().unwrap().runs.len(), 2);
    }
}
