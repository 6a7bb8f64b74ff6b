//! The two ends of a session that runs beside a front end ([`channel`]): the front end's
//! [`SessionHandle`], and the [`SessionTask`] that its shell drives where the platform runs work
//! beside the UI, or splits into a [`SessionRelay`] to run the session elsewhere (a Web Worker).

use std::sync::mpsc;
use std::time::Duration;

use web_time::Instant;

use qkv_train::{Problem, RunEvent};

use crate::{Command, Message, Session};

/// What a batch of messages brings, for a front end that paces how often it draws training.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum News {
    /// Training went on: steps, their evaluations and attention maps, an autosave.
    Progress,
    /// Anything else: an experiment loaded, play or pause, a sample, an export, a failure.
    Event,
}

impl News {
    pub fn of(messages: &[Message]) -> News {
        let progress = |message: &Message| {
            matches!(
                message,
                Message::Run(RunEvent::Stepped { .. }) | Message::Evaluated { .. } | Message::Attention(_) | Message::Snapshot { .. }
            )
        };
        if messages.iter().all(progress) { News::Progress } else { News::Event }
    }
}

/// The two ends of a session that runs beside a front end: the front end keeps the
/// [`SessionHandle`] and the shell runs the [`SessionTask`] where its platform runs work beside the
/// UI (a thread of its own on the desktop, a task on the page's event loop in the browser).
/// `notify` is called after every batch of messages with what the batch brings (the app asks for
/// a repaint there), so the UI wakes only when something changed.
pub fn channel(session: Session, notify: impl Fn(News) + Send + 'static) -> (SessionHandle, SessionTask) {
    let (commands, command_rx) = mpsc::channel();
    let (message_tx, messages) = mpsc::channel();
    let task = SessionTask { session, commands: command_rx, messages: message_tx, notify: Box::new(notify), waiting: None };
    (SessionHandle { commands, messages }, task)
}

/// The front end's end of a session: send commands, receive messages.
pub struct SessionHandle {
    commands: mpsc::Sender<Command>,
    messages: mpsc::Receiver<Message>,
}

impl SessionHandle {
    /// False once the session's task has ended (it ends when the handle is dropped, or on a
    /// panic inside the engine that its shell could not catch).
    pub fn send(&self, command: Command) -> bool {
        self.commands.send(command).is_ok()
    }

    pub fn try_recv(&self) -> Option<Message> {
        self.messages.try_recv().ok()
    }

    /// Waits up to `timeout` for the next message (for tests and headless drivers).
    pub fn recv_timeout(&self, timeout: Duration) -> Option<Message> {
        self.messages.recv_timeout(timeout).ok()
    }
}

/// What a [`SessionTask::turn`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Turn {
    /// It handled a command or trained; call again soon.
    Worked,
    /// Nothing to do until a command arrives.
    Idle,
    /// The handle has gone: the task is over.
    Closed,
}

/// The front end's channel as seen from a session that runs where the channel cannot reach (a
/// Web Worker, which shares no memory with the page): the shell forwards each command there and
/// delivers what comes back ([`crate::wire`] turns both into bytes).
pub struct SessionRelay {
    commands: mpsc::Receiver<Command>,
    messages: mpsc::Sender<Message>,
    notify: Box<dyn Fn(News) + Send>,
    /// A command the task had taken off the channel, forwarded first.
    waiting: Option<Command>,
}

/// The front end has gone: the relay (and the session behind it) can end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrontEndGone;

impl SessionRelay {
    /// The front end's next command, if one is waiting.
    pub fn next_command(&mut self) -> Result<Option<Command>, FrontEndGone> {
        if let Some(command) = self.waiting.take() {
            return Ok(Some(command));
        }
        match self.commands.try_recv() {
            Ok(command) => Ok(Some(command)),
            Err(mpsc::TryRecvError::Empty) => Ok(None),
            Err(mpsc::TryRecvError::Disconnected) => Err(FrontEndGone),
        }
    }

    /// Hands `messages` from the session to the front end and wakes it.
    pub fn deliver(&self, messages: Vec<Message>) -> Result<(), FrontEndGone> {
        deliver(&self.messages, &self.notify, messages)
    }
}

/// Sends a batch to the front end, then wakes it once with what the batch brings.
fn deliver(to: &mpsc::Sender<Message>, notify: &dyn Fn(News), batch: Vec<Message>) -> Result<(), FrontEndGone> {
    let news = News::of(&batch);
    for message in batch {
        to.send(message).map_err(|_| FrontEndGone)?;
    }
    notify(news);
    Ok(())
}

/// The session's end of the channel: the shell drives it, in turns, on its platform.
pub struct SessionTask {
    session: Session,
    commands: mpsc::Receiver<Command>,
    messages: mpsc::Sender<Message>,
    notify: Box<dyn Fn(News) + Send>,
    /// A command taken off the channel to look whether one is there, handled next.
    waiting: Option<Command>,
}

impl SessionTask {
    /// Whether the session trains on the CPU (flex), where a shell may move it off the UI's thread.
    pub fn trains_on_cpu(&self) -> bool {
        qkv_kernels::is_flex(&self.session.device)
    }

    /// Splits the task into its session and the front end's channel, for a shell that runs the
    /// session elsewhere and relays between the two; [`SessionTask::from_relay`] puts them back
    /// together (where running elsewhere failed to start).
    pub fn into_relay(self) -> (Session, SessionRelay) {
        let SessionTask { session, commands, messages, notify, waiting } = self;
        (session, SessionRelay { commands, messages, notify, waiting })
    }

    pub fn from_relay(session: Session, relay: SessionRelay) -> Self {
        let SessionRelay { commands, messages, notify, waiting } = relay;
        SessionTask { session, commands, messages, notify, waiting }
    }

    /// One turn: the next command if one is waiting (commands first, so Pause takes effect before
    /// the next step); otherwise, while playing, steps back to back until `budget` has passed
    /// (at least one step) or a command arrives. Sends what happened and notifies the front end.
    pub async fn turn(&mut self, budget: Duration) -> Turn {
        let command = match self.waiting.take().map_or_else(|| self.commands.try_recv(), Ok) {
            Ok(command) => Some(command),
            Err(mpsc::TryRecvError::Empty) => None,
            Err(mpsc::TryRecvError::Disconnected) => return Turn::Closed,
        };
        let batch = match command {
            Some(command) => self.session.handle(command).await,
            None if self.session.is_busy() => {
                let started = Instant::now();
                let mut batch = Vec::new();
                loop {
                    batch.extend(self.session.advance().await);
                    if !self.session.is_busy() || started.elapsed() >= budget || self.command_waiting() {
                        break batch;
                    }
                }
            }
            None => return Turn::Idle,
        };
        self.deliver(batch)
    }

    fn command_waiting(&mut self) -> bool {
        if self.waiting.is_none() {
            self.waiting = self.commands.try_recv().ok();
        }
        self.waiting.is_some()
    }

    fn deliver(&self, batch: Vec<Message>) -> Turn {
        match deliver(&self.messages, &self.notify, batch) {
            Ok(()) => Turn::Worked,
            Err(FrontEndGone) => Turn::Closed,
        }
    }

    /// Blocks until a command arrives: an idle task on a thread of its own. False when the
    /// handle has gone.
    pub fn wait_for_command(&mut self) -> bool {
        if self.waiting.is_none() {
            self.waiting = self.commands.recv().ok();
        }
        self.waiting.is_some()
    }

    /// After a panic inside Burn (a kernel that does not compile, a lost GPU) the session drops
    /// its experiment and says what happened; it takes commands again afterwards.
    pub fn recover(&mut self, panic: &(dyn std::any::Any + Send)) -> Turn {
        self.session.unload();
        let reason = panic
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| panic.downcast_ref::<&str>().copied())
            .unwrap_or("unknown failure");
        let reason = reason.lines().next().unwrap_or(reason);
        let failure =
            format!("training stopped on {}: {reason}; apply the setup again, or switch compute to flex (CPU)", self.session.compute);
        self.deliver(vec![Message::Playing(false), Message::Failed(Problem::new(failure))])
    }

    /// Runs the task to its end on the calling thread, blocking while idle: the desktop gives
    /// it a thread of its own. Survives panics inside the engine ([`SessionTask::recover`]).
    pub fn run_blocking(mut self) {
        loop {
            let turn = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| qkv_train::threads::block_on(self.turn(Duration::ZERO))));
            let next = turn.unwrap_or_else(|panic| self.recover(&*panic));
            match next {
                Turn::Worked => {}
                Turn::Idle if self.wait_for_command() => {}
                Turn::Idle | Turn::Closed => return,
            }
        }
    }
}
