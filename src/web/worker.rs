//! Training on the CPU in a Web Worker, so that the page draws while a step computes (a step of
//! the classroom model takes about a third of a second in the browser, several frames).
//!
//! The page starts a worker from a few lines of JavaScript that load this same wasm module:
//! the page sends its compiled module, so nothing is downloaded or compiled twice. In the worker
//! `main` finds no window and calls [`run_session`]: a flex session that takes commands as bytes
//! ([`qkv_session::wire`]) and posts back what happened. On the page, [`relay`] forwards the front
//! end's channel to the workers and back: a worker per core, each training a share of the runs
//! ([`Fanout`]), since a worker computes on one thread. If no worker starts, the session trains
//! in the page as before; if one crashes, a fresh one takes its place and the user is told.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

use qkv_compute::ComputeId;
use qkv_model::burn::tensor::Device;
use qkv_session::fanout::Fanout;
use qkv_session::wire;
use qkv_session::{Message, Session, SessionRelay, SessionTask, Turn};
use qkv_train::Problem;
use wasm_bindgen::closure::Closure;
use wasm_bindgen::prelude::wasm_bindgen;
use wasm_bindgen::{JsCast, JsValue};

use super::capabilities::training_workers;
use super::turns::{run_in_page, sleep};

/// What the worker posts once its session listens (other strings are the reason it stopped).
const READY: &str = "ready";

/// How long the worker trains before it reads new commands: no page to keep drawing here, but
/// a Pause should still take effect within a moment.
const WORKER_TURN: std::time::Duration = std::time::Duration::from_millis(50);

#[wasm_bindgen]
extern "C" {
    /// The URL of wasm-bindgen's glue module, which the worker imports to load the wasm.
    #[wasm_bindgen(thread_local_v2, js_namespace = ["import", "meta"], js_name = url)]
    static GLUE_URL: String;
}

/// Notes the time since page load as `window[name]`, for the start-up breakdown that the
/// end-to-end test reads.
fn mark_on_page(name: &str) {
    if let Some(window) = web_sys::window() {
        let now = window.performance().map_or(f64::NAN, |p| p.now());
        let _ = js_sys::Reflect::set(&window, &name.into(), &now.into());
    }
}

/// The worker's global scope, when this instance runs in one.
pub fn worker_scope() -> Option<web_sys::DedicatedWorkerGlobalScope> {
    js_sys::global().dyn_into().ok()
}

/// The worker's side: a session on flex, commands in, messages out.
pub fn run_session(scope: web_sys::DedicatedWorkerGlobalScope) {
    // A wasm panic cannot unwind: say why to the page, which replaces this worker.
    std::panic::set_hook(Box::new(|info| {
        if let Some(scope) = worker_scope() {
            let _ = scope.post_message(&format!("training stopped on an internal error ({info})").into());
        }
    }));
    let (handle, mut task) = qkv_session::channel(Session::new(Device::flex(), ComputeId::cpu().in_workers(1)), |_| {});
    let handle = Rc::new(handle);
    let post = |scope: &web_sys::DedicatedWorkerGlobalScope, messages: &[Message]| {
        let posted = match wire::encode_messages(messages) {
            Ok(bytes) => scope.post_message(&js_sys::Uint8Array::from(bytes.as_slice())),
            Err(e) => scope.post_message(&e.to_string().into()),
        };
        if let Err(e) = posted {
            web_sys::console::error_1(&e);
        }
    };
    let on_command = {
        let (handle, scope) = (handle.clone(), scope.clone());
        Closure::<dyn Fn(web_sys::MessageEvent)>::new(move |event: web_sys::MessageEvent| {
            let bytes = js_sys::Uint8Array::new(&event.data()).to_vec();
            match wire::decode_command(&bytes) {
                Ok(command) => {
                    handle.send(command);
                }
                Err(e) => post(&scope, &[Message::Failed(Problem::of(&e))]),
            }
        })
    };
    scope.set_onmessage(Some(on_command.as_ref().unchecked_ref()));
    // The worker lives as long as its page wants it: so does its handler.
    on_command.forget();
    let _ = scope.post_message(&READY.into());
    wasm_bindgen_futures::spawn_local(async move {
        loop {
            let turn = task.turn(WORKER_TURN).await;
            let batch: Vec<Message> = std::iter::from_fn(|| handle.try_recv()).collect();
            if !batch.is_empty() {
                post(&scope, &batch);
            }
            match turn {
                Turn::Worked => sleep(0).await,
                Turn::Idle => sleep(5).await,
                Turn::Closed => return,
            }
        }
    });
}

/// What came from the worker.
enum FromWorker {
    Ready,
    Messages(Vec<u8>),
    /// It stopped (failed to load, or panicked), for this reason.
    Stopped(String),
}

/// A worker running [`run_session`], as the page sees it.
struct TrainingWorker {
    worker: web_sys::Worker,
    inbox: Rc<RefCell<VecDeque<FromWorker>>>,
    _on_message: Closure<dyn Fn(web_sys::MessageEvent)>,
    _on_error: Closure<dyn Fn(web_sys::ErrorEvent)>,
}

impl TrainingWorker {
    fn start() -> Result<Self, JsValue> {
        mark_on_page("qkvWorkerStartedMs");
        // The glue's default export loads the wasm; the page's compiled module arrives as the
        // first message. `main` in there then takes over the worker's messages.
        let bootstrap = format!(
            "import init from {:?};\nself.onmessage = (event) => {{ self.onmessage = null; \
             init({{ module_or_path: event.data }}).catch((e) => self.postMessage('the worker could not load QKV Lab: ' + e)); }};",
            GLUE_URL.with(String::clone)
        );
        let options = web_sys::BlobPropertyBag::new();
        options.set_type("text/javascript");
        let blob = web_sys::Blob::new_with_str_sequence_and_options(&js_sys::Array::of1(&bootstrap.into()), &options)?;
        let url = web_sys::Url::create_object_url_with_blob(&blob)?;
        let options = web_sys::WorkerOptions::new();
        options.set_type(web_sys::WorkerType::Module);
        let worker = web_sys::Worker::new_with_options(&url, &options);
        web_sys::Url::revoke_object_url(&url)?;
        let worker = worker?;
        let inbox = Rc::new(RefCell::new(VecDeque::new()));
        let on_message = {
            let inbox = inbox.clone();
            Closure::<dyn Fn(web_sys::MessageEvent)>::new(move |event: web_sys::MessageEvent| {
                let data = event.data();
                inbox.borrow_mut().push_back(match data.as_string() {
                    Some(text) if text == READY => FromWorker::Ready,
                    Some(reason) => FromWorker::Stopped(reason),
                    None => FromWorker::Messages(js_sys::Uint8Array::new(&data).to_vec()),
                });
            })
        };
        let on_error = {
            let inbox = inbox.clone();
            Closure::<dyn Fn(web_sys::ErrorEvent)>::new(move |event: web_sys::ErrorEvent| {
                inbox.borrow_mut().push_back(FromWorker::Stopped(format!("the worker failed: {}", event.message())));
            })
        };
        worker.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
        worker.set_onerror(Some(on_error.as_ref().unchecked_ref()));
        worker.post_message(&wasm_bindgen::module())?;
        Ok(Self { worker, inbox, _on_message: on_message, _on_error: on_error })
    }

    fn take(&self) -> Option<FromWorker> {
        self.inbox.borrow_mut().pop_front()
    }

    fn send(&self, command: qkv_session::Command) -> Result<(), String> {
        let bytes = wire::encode_command(command).map_err(|e| e.to_string())?;
        self.worker.post_message(&js_sys::Uint8Array::from(bytes.as_slice())).map_err(|e| format!("{e:?}"))
    }
}

impl Drop for TrainingWorker {
    fn drop(&mut self) {
        self.worker.terminate();
    }
}

thread_local! {
    /// The workers started with the page ([`start_early`]), until the first session takes them.
    static STARTED_EARLY: RefCell<Vec<TrainingWorker>> = const { RefCell::new(Vec::new()) };
}

/// Starts `count` training workers; those that do not start are left out (and said so).
fn start_workers(count: usize) -> Vec<TrainingWorker> {
    (0..count)
        .filter_map(|_| {
            TrainingWorker::start()
                .map_err(|e| web_sys::console::warn_1(&format!("QKV Lab: a training worker did not start ({e:?})").into()))
                .ok()
        })
        .collect()
}

/// Starts the training workers as the page starts, for a page that will train on the CPU: they
/// load while eframe sets up the page and its GPU, instead of after (on the 2-core reference
/// machine a worker starts 1.3 s sooner so, and the first step comes about 0.5 s sooner).
pub fn start_early() {
    let workers = start_workers(training_workers());
    STARTED_EARLY.with(|early| *early.borrow_mut() = workers);
}

/// Runs `task`'s session in Web Workers, one per share of the runs ([`Fanout`]), and relays the
/// front end's channel to them; trains in the page instead where no worker starts.
pub fn relay(task: SessionTask) {
    let (session, relay) = task.into_relay();
    let mut workers = STARTED_EARLY.with(|early| std::mem::take(&mut *early.borrow_mut()));
    if workers.is_empty() {
        workers = start_workers(training_workers());
    }
    if workers.is_empty() {
        web_sys::console::warn_1(&"QKV Lab trains in the page: no Web Worker started".into());
        run_in_page(SessionTask::from_relay(session, relay));
    } else {
        wasm_bindgen_futures::spawn_local(relay_to(workers, session, relay));
    }
}

/// The failure the front end hears when a worker refused a command.
fn not_taken(error: &str) -> Message {
    Message::Failed(Problem::new(format!("the training worker did not take the command: {error}")))
}

/// A training worker as the relay tracks it.
struct Member {
    worker: TrainingWorker,
    ready: bool,
    /// Commands for it that came before it listened (one started in a crashed one's place).
    waiting: Vec<qkv_session::Command>,
}

impl Member {
    fn new(worker: TrainingWorker) -> Self {
        Self { worker, ready: false, waiting: Vec::new() }
    }

    /// Sends `command` now, or once the worker listens.
    fn send(&mut self, command: qkv_session::Command) -> Result<(), String> {
        if self.ready {
            return self.worker.send(command);
        }
        self.waiting.push(command);
        Ok(())
    }

    fn listening(&mut self) -> Result<(), String> {
        self.ready = true;
        std::mem::take(&mut self.waiting).into_iter().try_for_each(|command| self.worker.send(command))
    }
}

async fn relay_to(workers: Vec<TrainingWorker>, session: Session, mut relay: SessionRelay) {
    let mut members: Vec<Member> = workers.into_iter().map(Member::new).collect();
    // The page's own session, kept until every worker has listened or stopped: if none
    // listens, training happens here instead.
    let mut fallback = Some(session);
    let mut fanout: Option<Fanout> = None;
    loop {
        let mut index = 0;
        while index < members.len() {
            let Some(event) = members[index].worker.take() else {
                index += 1;
                continue;
            };
            let delivered = match event {
                FromWorker::Ready => match members[index].listening() {
                    Ok(()) => Ok(()),
                    Err(e) => relay.deliver(vec![not_taken(&e)]),
                },
                FromWorker::Messages(bytes) => {
                    let messages = wire::decode_messages(&bytes).unwrap_or_else(|e| vec![Message::Failed(Problem::of(&e))]);
                    // The fan-out's Loaded says in how many workers the runs train.
                    let messages = match &mut fanout {
                        Some(fanout) => fanout.merge(index, messages),
                        None => messages,
                    };
                    if messages.is_empty() { Ok(()) } else { relay.deliver(messages) }
                }
                // Before the relay starts: leave it out.
                FromWorker::Stopped(reason) if fanout.is_none() => {
                    web_sys::console::warn_1(&format!("QKV Lab: a training worker stopped as it started: {reason}").into());
                    members.remove(index);
                    continue;
                }
                // Its runs are lost with it: start a fresh worker in its place, pause the others
                // (the experiment is incomplete now) and say so.
                FromWorker::Stopped(reason) => {
                    let fanout = fanout.as_mut().expect("matched above");
                    let mut messages = fanout.lost(index);
                    let failure = match TrainingWorker::start() {
                        Ok(fresh) => {
                            members[index] = Member::new(fresh);
                            format!("{reason}; apply the setup again to train from the start")
                        }
                        Err(e) => format!("{reason}, and no new worker started ({e:?}): reload the page"),
                    };
                    for (other, command) in fanout.route(qkv_session::Command::Pause).unwrap_or_default() {
                        let _ = members[other].send(command);
                    }
                    messages.push(Message::Failed(Problem::new(failure)));
                    relay.deliver(messages)
                }
            };
            if delivered.is_err() {
                return;
            }
        }
        if fanout.is_none() && members.iter().all(|m| m.ready) {
            match fallback.take() {
                Some(session) if members.is_empty() => {
                    web_sys::console::warn_1(&"QKV Lab trains in the page: no training worker started".into());
                    run_in_page(SessionTask::from_relay(session, relay));
                    return;
                }
                _ => {
                    mark_on_page("qkvWorkerReadyMs");
                    fanout = Some(Fanout::new(members.len()));
                }
            }
        }
        // Commands wait in the channel until the workers listen.
        if let Some(fanout) = &mut fanout {
            loop {
                match relay.next_command() {
                    Ok(Some(command)) => match fanout.route(command) {
                        Ok(routed) => {
                            for (index, command) in routed {
                                if let Err(e) = members[index].send(command) {
                                    let _ = relay.deliver(vec![not_taken(&e)]);
                                }
                            }
                        }
                        Err(error) => {
                            let _ = relay.deliver(vec![Message::Failed(Problem::of(&error))]);
                        }
                    },
                    Ok(None) => break,
                    Err(qkv_session::FrontEndGone) => return,
                }
            }
        }
        sleep(4).await;
    }
}
