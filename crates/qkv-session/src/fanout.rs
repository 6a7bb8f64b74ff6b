//! One front end's session spread over several sessions, each training a share of the runs.
//!
//! The browser's CPU fallback trains in Web Workers, and a worker has one thread: one worker
//! trains its runs one after another on one core. With a worker per share of the runs
//! ([`Share`]), the runs train at the same time on as many cores as the machine has, as they do
//! natively. The front end still talks to one session: [`Fanout`] says which session gets which
//! command and merges what they answer into what one session would have said. Each share draws
//! the same batches from the same seed, so a run trains exactly as it would beside the others;
//! only the shares no longer wait for each other between steps.
//!
//! Every session names its runs by their [`RunId`] in the whole, so a run's commands and
//! messages pass through as they are: the fan-out only keeps which session trains which run.

use std::collections::BTreeMap;

use qkv_compute::ComputeId;
use qkv_train::Problem;
use qkv_train::dataset::DataSource;

use crate::{AttentionMaps, CheckpointFile, Command, Message, RunId, RunInfo, SessionError, Share};

/// Where the commands of one front end go, and how the answers come back together.
pub struct Fanout {
    /// The sessions there are.
    sessions: usize,
    /// The sessions the experiment is spread over: its runs or the sessions, the fewer.
    active: usize,
    /// The session that trains each run.
    owners: BTreeMap<RunId, usize>,
    /// Per session: loads and imports it has been sent and not yet begun (each begins with the
    /// session's answer to its [`Command::Share`]).
    loads_due: Vec<usize>,
    /// Per session: whether its next Loaded or failure answers the latest load.
    answer_next: Vec<bool>,
    /// The answers to the latest load, while some are still due.
    loading: Option<Loading>,
    /// Per session: its latest attention maps, merged once every active session has sent some.
    maps: Vec<Option<AttentionMaps>>,
    /// Per session: its part of the snapshot being taken.
    snapshot: Option<Vec<Option<SnapshotPart>>>,
    playing: Vec<bool>,
    finished: Vec<bool>,
    /// Whether the front end was last told that training plays.
    said_playing: bool,
    /// The last failure passed on, and which sessions have said it: a command sent to every
    /// session that fails in each says so once.
    failure: Option<(Problem, Vec<bool>)>,
}

/// A session's checkpoints, at its experiment step, by run.
struct SnapshotPart {
    step: usize,
    files: Vec<(RunId, CheckpointFile)>,
}

/// A load's answers, one per active session.
struct Loading {
    answers: Vec<Option<Result<Loaded, Problem>>>,
    /// What a session said after its answer, held until the merged answer has gone out.
    held: Vec<Vec<Message>>,
}

struct Loaded {
    runs: Vec<RunInfo>,
    data: DataSource,
    compute: ComputeId,
}

impl Fanout {
    /// A fan-out over `sessions` sessions (at least one).
    pub fn new(sessions: usize) -> Self {
        let sessions = sessions.max(1);
        Self {
            sessions,
            active: 1,
            owners: BTreeMap::new(),
            loads_due: vec![0; sessions],
            answer_next: vec![false; sessions],
            loading: None,
            maps: vec![None; sessions],
            snapshot: None,
            playing: vec![false; sessions],
            finished: vec![false; sessions],
            said_playing: false,
            failure: None,
        }
    }

    /// The front end's `command` as each session should get it: (session, command) pairs, in
    /// the order to send them; or, for a run that no session trains, the failure to answer with.
    pub fn route(&mut self, command: Command) -> Result<Vec<(usize, Command)>, SessionError> {
        Ok(match command {
            Command::Load(plan) => self.load(plan.runs.len(), &Command::Load(plan)),
            Command::Import { files, upload } => self.load(files.len(), &Command::Import { files, upload }),
            Command::Sample { run, .. } | Command::Export { run } | Command::EliminateQuery { run, .. } => {
                let owner = self.owners.get(&run).ok_or(SessionError::NoSuchRun(run))?;
                vec![(*owner, command)]
            }
            Command::Snapshot => {
                self.snapshot = Some((0..self.active).map(|_| None).collect());
                self.to_active(&Command::Snapshot)
            }
            // The fan-out assigns the shares itself.
            Command::Share(_) => Vec::new(),
            command @ (Command::Play | Command::Pause | Command::Step | Command::AttentionPrompt(_) | Command::AttentionEvery(_)) => {
                self.to_active(&command)
            }
        })
    }

    fn to_active(&self, command: &Command) -> Vec<(usize, Command)> {
        (0..self.active).map(|session| (session, command.clone())).collect()
    }

    /// A load of `runs` runs: each active session is told its share, then gets the command;
    /// sessions left out are paused, so that an earlier experiment does not train on there.
    fn load(&mut self, runs: usize, command: &Command) -> Vec<(usize, Command)> {
        let before = self.active;
        self.active = runs.clamp(1, self.sessions);
        self.loading = Some(Loading { answers: (0..self.active).map(|_| None).collect(), held: vec![Vec::new(); self.active] });
        // Answers to earlier loads are stale from now on.
        self.answer_next.iter_mut().for_each(|next| *next = false);
        let mut routed = Vec::new();
        for session in 0..self.active {
            self.loads_due[session] += 1;
            routed.push((session, Command::Share(Share { index: session, of: self.active })));
            routed.push((session, command.clone()));
        }
        routed.extend((self.active..before).map(|session| (session, Command::Pause)));
        routed
    }

    /// Session `session` has gone (its worker crashed) and a fresh one, with nothing loaded,
    /// takes its place: its runs are forgotten, and a load waiting on it fails.
    pub fn lost(&mut self, session: usize) -> Vec<Message> {
        let mut out = Vec::new();
        if session >= self.sessions {
            return out;
        }
        self.loads_due[session] = 0;
        self.answer_next[session] = false;
        self.owners.retain(|_, owner| *owner != session);
        self.maps[session] = None;
        self.snapshot = None;
        self.pass_on(session, Message::Playing(false), &mut out);
        if let Some(loading) = &mut self.loading
            && session < loading.answers.len()
            && loading.answers[session].is_none()
        {
            loading.answers[session] = Some(Err(Problem::new("a training worker stopped")));
            self.finish_loading(&mut out);
        }
        out
    }

    /// What session `session` said, as the front end should hear it.
    pub fn merge(&mut self, session: usize, messages: Vec<Message>) -> Vec<Message> {
        let mut merged = Vec::new();
        for message in messages {
            self.take(session, message, &mut merged);
        }
        merged
    }

    fn take(&mut self, session: usize, message: Message, out: &mut Vec<Message>) {
        if session >= self.sessions {
            return;
        }
        if let Message::Sharing(_) = message {
            // A load begins: unless a later one replaces it, its answer comes next.
            self.loads_due[session] = self.loads_due[session].saturating_sub(1);
            self.answer_next[session] = self.loads_due[session] == 0;
            return;
        }
        if session >= self.active {
            return; // left out of the experiment
        }
        // A load's answer: Loaded, or the failure that stopped it.
        if matches!(message, Message::Loaded { .. } | Message::Failed(_)) && std::mem::take(&mut self.answer_next[session]) {
            if let Some(loading) = &mut self.loading {
                loading.answers[session] = Some(match message {
                    Message::Loaded { runs, data, compute } => Ok(Loaded { runs, data, compute }),
                    Message::Failed(error) => Err(error),
                    _ => unreachable!("matched above"),
                });
                self.finish_loading(out);
            }
            return;
        }
        if let Some(loading) = &mut self.loading
            && loading.answers[session].is_some()
        {
            loading.held[session].push(message);
            return;
        }
        self.pass_on(session, message, out);
    }

    /// Once every active session has answered the load: their runs as one experiment, or the
    /// failure (every share validates the whole setup, so they fail alike).
    fn finish_loading(&mut self, out: &mut Vec<Message>) {
        let Some(loading) = &self.loading else { return };
        if loading.answers.iter().any(Option::is_none) {
            return;
        }
        let Loading { answers, held } = self.loading.take().expect("checked above");
        let answers: Vec<Result<Loaded, Problem>> = answers.into_iter().map(|a| a.expect("every session answered")).collect();
        if let Some(error) = answers.iter().find_map(|a| a.as_ref().err()) {
            if answers.iter().any(Result::is_ok) {
                // Some shares loaded and some did not: nothing consistent is left to show.
                self.owners.clear();
                out.push(Message::Failed(error.clone().and("apply the setup again")));
            } else {
                self.failure = None;
                out.push(Message::Failed(error.clone()));
            }
            return;
        }
        let mut whole: Vec<RunInfo> = Vec::new();
        let mut answers = answers.into_iter().map(|a| a.expect("no failure"));
        let first = answers.next().expect("at least one session");
        // Every share loaded the same data on the same kind of compute; the runs are shared by
        // as many sessions as hold some.
        let (data, compute) = (first.data.clone(), first.compute.clone());
        self.owners.clear();
        let mut holding = 0;
        for (session, loaded) in std::iter::once(first).chain(answers).enumerate() {
            holding += usize::from(!loaded.runs.is_empty());
            self.owners.extend(loaded.runs.iter().map(|info| (info.id, session)));
            whole.extend(loaded.runs);
        }
        let compute = if holding > 1 { compute.in_workers(holding) } else { compute };
        whole.sort_by_key(|info| info.id);
        self.maps = vec![None; self.sessions];
        self.finished = vec![false; self.sessions];
        out.push(Message::Loaded { runs: whole, data, compute });
        for (session, messages) in held.into_iter().enumerate() {
            for message in messages {
                self.take(session, message, out);
            }
        }
    }

    /// A message about the experiment as loaded: a run's own messages as they are, and what
    /// every session says (maps, snapshots, playing, finished) said once for all of them.
    fn pass_on(&mut self, session: usize, message: Message, out: &mut Vec<Message>) {
        match message {
            Message::Run(_) => {
                self.finished[session] = false;
                out.push(message);
            }
            Message::Converted { ref info, .. } => {
                self.owners.insert(info.id, session);
                self.finished[session] = false;
                out.push(message);
            }
            Message::Evaluated { .. } | Message::Sampled { .. } | Message::Exported { .. } => out.push(message),
            Message::Attention(maps) => {
                self.maps[session] = Some(maps);
                out.extend(self.merged_maps().map(Message::Attention));
            }
            Message::Snapshot { step, ids, files } => {
                let Some(snapshot) = &mut self.snapshot else { return };
                snapshot[session] = Some(SnapshotPart { step, files: ids.into_iter().zip(files).collect() });
                if snapshot.iter().all(Option::is_some) {
                    let parts = self.snapshot.take().expect("checked above");
                    out.extend(self.merged_snapshot(parts));
                }
            }
            Message::Playing(playing) => {
                self.playing[session] = playing;
                let any = self.playing[..self.active].iter().any(|&p| p);
                if any != self.said_playing {
                    self.said_playing = any;
                    out.push(Message::Playing(any));
                }
            }
            Message::Finished => {
                self.finished[session] = true;
                if self.finished[..self.active].iter().all(|&f| f) {
                    out.push(Message::Finished);
                }
            }
            Message::Failed(error) => {
                if let Some((said, by)) = &mut self.failure
                    && *said == error
                    && !by[session]
                {
                    by[session] = true;
                    return;
                }
                let mut by = vec![false; self.sessions];
                by[session] = true;
                self.failure = Some((error.clone(), by));
                out.push(Message::Failed(error));
            }
            // A replaced load's answer, and the answer to a share, taken before.
            Message::Loaded { .. } | Message::Sharing(_) => {}
        }
    }

    /// Whether `ids` are every run of the whole, each once.
    fn are_every_run(&self, ids: &[RunId]) -> bool {
        ids.len() == self.owners.len() && ids.iter().zip(self.owners.keys()).all(|(a, b)| a == b)
    }

    /// Every active session's latest maps as one set, in the order of the runs' ids, once all
    /// are of the same prompt and of every run (after a new prompt or a new run, until every
    /// session has answered, there is none); the step is the furthest any share has reached.
    fn merged_maps(&self) -> Option<AttentionMaps> {
        let parts: Vec<&AttentionMaps> = self.maps[..self.active].iter().map(Option::as_ref).collect::<Option<_>>()?;
        if parts.iter().any(|part| part.tokens != parts[0].tokens) {
            return None;
        }
        let mut runs: Vec<_> = parts
            .iter()
            .flat_map(|part| {
                (part.ids.iter().zip(&part.runs).zip(&part.logits).zip(&part.diagnostics).enumerate())
                    .map(move |(i, (((&id, maps), logits), diagnosis))| (id, maps, logits, diagnosis, part.predictions.get(i)))
            })
            .collect();
        runs.sort_by_key(|(id, ..)| *id);
        let ids: Vec<RunId> = runs.iter().map(|(id, ..)| *id).collect();
        if !self.are_every_run(&ids) {
            return None;
        }
        let (mut maps, mut logits, mut diagnostics, mut predictions) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for (_, run_maps, run_logits, diagnosis, predicted) in runs {
            maps.push(run_maps.clone());
            logits.push(run_logits.clone());
            diagnostics.push(diagnosis.clone());
            predictions.extend(predicted.cloned());
        }
        Some(AttentionMaps {
            step: parts.iter().map(|p| p.step).max().unwrap_or(0),
            tokens: parts[0].tokens.clone(),
            ids,
            runs: maps,
            logits,
            diagnostics,
            images: parts[0].images.clone(),
            predictions,
        })
    }

    /// The sessions' checkpoints as one snapshot, in the order of the runs' ids, at the step of
    /// the share that is furthest behind.
    fn merged_snapshot(&self, parts: Vec<Option<SnapshotPart>>) -> Option<Message> {
        let parts: Vec<SnapshotPart> = parts.into_iter().collect::<Option<_>>()?;
        let step = parts.iter().map(|part| part.step).min()?;
        let mut files: Vec<(RunId, CheckpointFile)> = parts.into_iter().flat_map(|part| part.files).collect();
        files.sort_by_key(|(id, _)| *id);
        let (ids, files): (Vec<RunId>, Vec<CheckpointFile>) = files.into_iter().unzip();
        self.are_every_run(&ids).then_some(Message::Snapshot { step, ids, files })
    }
}

#[cfg(test)]
mod tests {
    use burn::tensor::Device;
    use pollster::FutureExt as _;
    use qkv_model::AttentionVariant;

    use super::*;
    use crate::Session;
    use crate::session::tests::tiny_plan;
    use qkv_train::RunEvent;
    use qkv_train::plan::{ExperimentPlan, RunPlan};

    fn sessions(count: usize) -> Vec<Session> {
        (0..count).map(|_| Session::new(Device::flex(), ComputeId::cpu())).collect()
    }

    /// `command` through `fanout` to `sessions`, each answering at once, as the front end hears it.
    fn send(fanout: &mut Fanout, sessions: &mut [Session], command: Command) -> Vec<Message> {
        let routed = match fanout.route(command) {
            Ok(routed) => routed,
            Err(error) => return vec![Message::Failed(Problem::of(&error))],
        };
        let mut heard = Vec::new();
        for (index, command) in routed {
            let answer = sessions[index].handle(command).block_on();
            heard.extend(fanout.merge(index, answer));
        }
        heard
    }

    /// Plays every session to its end, a turn of each in turn, and what the front end hears.
    fn play_to_end(fanout: &mut Fanout, sessions: &mut [Session]) -> Vec<Message> {
        let mut heard = send(fanout, sessions, Command::Play);
        while sessions.iter().any(Session::is_busy) {
            for (index, session) in sessions.iter_mut().enumerate() {
                if session.is_busy() {
                    let answer = pollster::block_on(session.advance());
                    heard.extend(fanout.merge(index, answer));
                }
            }
        }
        heard
    }

    /// Each run's step losses, by run.
    fn losses(heard: &[Message], runs: usize) -> Vec<Vec<f64>> {
        let mut losses = vec![Vec::new(); runs];
        for message in heard {
            if let Message::Run(RunEvent::Stepped { run, record, .. }) = message {
                losses[run.0].push(record.train_loss);
            }
        }
        losses
    }

    fn three_runs() -> ExperimentPlan {
        let mut plan = tiny_plan();
        plan.runs.push(RunPlan::new(AttentionVariant::Standard));
        plan
    }

    #[test]
    fn runs_spread_over_sessions_train_as_in_one_and_are_heard_as_one_experiment() {
        let mut alone = Fanout::new(1);
        let mut one = sessions(1);
        let mut heard_alone = send(&mut alone, &mut one, Command::Load(three_runs()));
        heard_alone.extend(play_to_end(&mut alone, &mut one));

        let mut fanout = Fanout::new(2);
        let mut two = sessions(2);
        let mut heard = send(&mut fanout, &mut two, Command::Load(three_runs()));
        let [Message::Loaded { runs, compute, .. }, ..] = heard.as_slice() else { panic!("{heard:?}") };
        // The merged answer says where the whole trains: on the CPU, in both sessions.
        assert_eq!((compute.clone(), compute.to_string()), (ComputeId::cpu().in_workers(2), "flex (CPU, in 2 Web Workers)".into()));
        let names: Vec<&str> = runs.iter().map(|r| r.spec.name.as_str()).collect();
        let [Message::Loaded { runs: runs_alone, compute: alone_compute, .. }, ..] = heard_alone.as_slice() else {
            panic!("{heard_alone:?}")
        };
        assert_eq!(alone_compute, &ComputeId::cpu(), "one session holding every run names its compute as it is");
        let names_alone: Vec<&str> = runs_alone.iter().map(|r| r.spec.name.as_str()).collect();
        assert_eq!(names, names_alone, "the runs keep their order and their names in the whole");
        assert_eq!(names[0], "standard");
        assert_eq!(names[2], "standard-2");
        assert_eq!(two[0].experiment().unwrap().runs.len(), 2, "runs 0 and 2");
        assert_eq!(two[1].experiment().unwrap().runs.len(), 1, "run 1");
        heard.extend(play_to_end(&mut fanout, &mut two));

        // Each run trains on the same batches from the same seed: the same losses, to float
        // noise (a run alone in its session splits its products over threads differently).
        let (spread, whole) = (losses(&heard, 3), losses(&heard_alone, 3));
        assert!(spread.iter().all(|l| l.len() == 4));
        for (a, b) in spread.iter().flatten().zip(whole.iter().flatten()) {
            assert!((a - b).abs() < 1e-5, "{spread:?} against {whole:?}");
        }
        let maps = |heard: &[Message]| heard.iter().find_map(|m| if let Message::Attention(maps) = m { Some(maps.clone()) } else { None });
        let (maps, maps_alone) = (maps(&heard).expect("maps"), maps(&heard_alone).expect("maps"));
        assert_eq!(maps.step, maps_alone.step);
        // Equal to float noise (products split over threads differently add up differently).
        let flat = |maps: &AttentionMaps, run: usize| maps.runs[run].iter().flatten().flatten().copied().collect::<Vec<f32>>();
        for run in 0..3 {
            let (spread, together) = (flat(&maps, run), flat(&maps_alone, run));
            assert_eq!(spread.len(), together.len());
            let worst = spread.iter().zip(&together).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
            assert!(worst < 1e-5, "run {run}'s maps, at their place in the whole: off by {worst}");
        }
        let finished = heard.iter().filter(|m| matches!(m, Message::Finished)).count();
        assert_eq!(finished, 1, "finished once, when both sessions are");
        assert!(matches!(heard.last(), Some(Message::Finished)));
        let playing: Vec<bool> = heard.iter().filter_map(|m| if let Message::Playing(p) = m { Some(*p) } else { None }).collect();
        assert_eq!(playing, [true, false], "playing, then not, each said once");
    }

    #[test]
    fn a_run_s_commands_reach_its_session_and_a_snapshot_continues_every_run() {
        let mut fanout = Fanout::new(2);
        let mut two = sessions(2);
        send(&mut fanout, &mut two, Command::Load(three_runs()));
        send(&mut fanout, &mut two, Command::Step);
        let exported = send(&mut fanout, &mut two, Command::Export { run: RunId(2) });
        assert!(matches!(&exported[..], [Message::Exported { run: RunId(2), name, .. }] if name == "standard-2"), "{exported:?}");
        let missing = send(&mut fanout, &mut two, Command::Export { run: RunId(5) });
        assert!(matches!(&missing[..], [Message::Failed(e)] if e.message.contains("no run 5")), "{missing:?}");

        let snapshot = send(&mut fanout, &mut two, Command::Snapshot);
        let [Message::Snapshot { step: 1, files, .. }] = snapshot.as_slice() else { panic!("{snapshot:?}") };
        let names: Vec<&str> = files.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["standard.qkv", "shared-qk.qkv", "standard-2.qkv"]);

        // Continued over three sessions: one run each, each where it stood.
        let mut wider = Fanout::new(3);
        let mut three = sessions(3);
        let resumed = send(&mut wider, &mut three, Command::Import { files: files.clone(), upload: None });
        let [Message::Loaded { runs, .. }, ..] = resumed.as_slice() else { panic!("{resumed:?}") };
        assert_eq!(runs.iter().map(|r| r.spec.name.as_str()).collect::<Vec<_>>(), ["standard", "shared-qk", "standard-2"]);
        assert!(runs.iter().all(|r| r.steps.len() == 1));
        assert!(three.iter().all(|s| s.experiment().unwrap().runs.len() == 1));
    }

    #[test]
    fn converted_runs_join_the_whole_under_the_ids_the_front_end_gave_them() {
        let plan = ExperimentPlan {
            preset: qkv_model::Preset::Theory,
            model: qkv_train::plan::ModelOverrides { mlp_skip: Some(false), block_size: Some(16), ..Default::default() },
            training: qkv_train::plan::TrainingOverrides { steps: Some(20), batch_size: Some(4), ..Default::default() },
            runs: vec![RunPlan::new(AttentionVariant::Standard), RunPlan::new(AttentionVariant::Standard)],
            ..ExperimentPlan::default()
        };
        let mut fanout = Fanout::new(2);
        let mut two = sessions(2);
        send(&mut fanout, &mut two, Command::Load(plan));
        // The loaded experiment's maps, which each session sends in a turn of its own.
        for (index, session) in two.iter_mut().enumerate() {
            let answer = pollster::block_on(session.advance());
            fanout.merge(index, answer);
        }
        send(&mut fanout, &mut two, Command::Step);
        let heard = send(&mut fanout, &mut two, Command::EliminateQuery { run: RunId(1), into: RunId(2) });
        assert!(
            matches!(&heard[0], Message::Converted { from: RunId(1), info, .. } if info.spec.name.starts_with("standard-2")),
            "{heard:?}"
        );
        assert!(matches!(&heard[1], Message::Attention(maps) if maps.runs.len() == 3), "the maps of all three runs");
        let stepped: Vec<usize> = send(&mut fanout, &mut two, Command::Step)
            .iter()
            .filter_map(|m| if let Message::Run(RunEvent::Stepped { run, .. }) = m { Some(run.0) } else { None })
            .collect();
        assert_eq!(stepped, [0, 1, 2], "the converted run, trained by session 1, is run 2 as the front end named it");
        let exported = send(&mut fanout, &mut two, Command::Export { run: RunId(2) });
        assert!(
            matches!(&exported[..], [Message::Exported { run: RunId(2), name, .. }] if name.contains("W_Q eliminated")),
            "{exported:?}"
        );

        // A second one, in the other session: each keeps the id it was given.
        let heard = send(&mut fanout, &mut two, Command::EliminateQuery { run: RunId(0), into: RunId(3) });
        assert!(matches!(&heard[0], Message::Converted { from: RunId(0), info, .. } if info.id == RunId(3)), "{heard:?}");
        let mut stepped: Vec<usize> = send(&mut fanout, &mut two, Command::Step)
            .iter()
            .filter_map(|m| if let Message::Run(RunEvent::Stepped { run, .. }) = m { Some(run.0) } else { None })
            .collect();
        stepped.sort();
        assert_eq!(stepped, [0, 1, 2, 3]);
        let snapshot = send(&mut fanout, &mut two, Command::Snapshot);
        let [Message::Snapshot { ids, files, .. }] = snapshot.as_slice() else { panic!("{snapshot:?}") };
        assert_eq!(ids, &[RunId(0), RunId(1), RunId(2), RunId(3)]);
        assert!(files[2].name.starts_with("standard-2 ") && files[3].name.starts_with("standard "), "{files:?}");
    }

    #[test]
    fn maps_of_a_new_prompt_come_once_every_session_has_them() {
        let mut fanout = Fanout::new(2);
        let mut two = sessions(2);
        let mut plan = tiny_plan();
        plan.data = qkv_train::dataset::DataSource::Shakespeare;
        send(&mut fanout, &mut two, Command::Load(plan));
        // The loaded experiment's maps, of the default prompt: every session's, merged.
        let first: Vec<Message> = (0..2).flat_map(|index| fanout.merge(index, pollster::block_on(two[index].advance()))).collect();
        assert!(matches!(&first[..], [Message::Attention(maps)] if maps.runs.len() == 2 && maps.tokens.len() == 16), "{first:?}");
        let prompt = Command::AttentionPrompt("To be".into());
        let routed = fanout.route(prompt).unwrap();
        let heard: Vec<Vec<Message>> =
            routed.into_iter().map(|(index, command)| fanout.merge(index, two[index].handle(command).block_on())).collect();
        assert!(heard[0].is_empty(), "session 1 has no maps of this prompt yet: {:?}", heard[0]);
        let [Message::Attention(maps)] = heard[1].as_slice() else { panic!("{:?}", heard[1]) };
        assert_eq!(maps.tokens.len(), 5);
        assert_eq!(maps.runs.len(), 2);
    }

    #[test]
    fn a_lost_session_forgets_its_runs_and_fails_a_load_that_waits_on_it() {
        let mut fanout = Fanout::new(2);
        let mut two = sessions(2);
        send(&mut fanout, &mut two, Command::Load(three_runs()));
        assert_eq!(send(&mut fanout, &mut two, Command::Play).iter().filter(|m| matches!(m, Message::Playing(true))).count(), 1);
        assert!(fanout.lost(1).is_empty(), "the other session still plays");
        two[1] = Session::new(Device::flex(), ComputeId::cpu());
        let paused = send(&mut fanout, &mut two, Command::Pause);
        assert!(matches!(&paused[..], [Message::Playing(false)]), "{paused:?}");
        let lost_run = send(&mut fanout, &mut two, Command::Export { run: RunId(1) });
        assert!(matches!(&lost_run[..], [Message::Failed(_)]), "{lost_run:?}");

        // A load that the lost session never answers fails instead of waiting for ever.
        for (index, command) in fanout.route(Command::Load(three_runs())).unwrap() {
            if index == 0 {
                let answer = two[0].handle(command).block_on();
                assert!(fanout.merge(0, answer).is_empty(), "held until every session answers");
            }
        }
        let heard = fanout.lost(1);
        assert!(matches!(&heard[..], [Message::Failed(e)] if e.message.contains("apply the setup again")), "{heard:?}");
    }

    #[test]
    fn a_bad_setup_fails_once_and_a_smaller_one_pauses_the_sessions_it_leaves_out() {
        let mut fanout = Fanout::new(2);
        let mut two = sessions(2);
        send(&mut fanout, &mut two, Command::Load(three_runs()));
        let mut bad = three_runs();
        bad.model.n_head = Some(5); // 32 channels do not split into 5 heads
        let heard = send(&mut fanout, &mut two, Command::Load(bad));
        assert!(matches!(&heard[..], [Message::Failed(_)]), "one failure for the whole setup: {heard:?}");
        assert_eq!(two[0].experiment().unwrap().runs.len(), 2, "the experiment before it stays");

        send(&mut fanout, &mut two, Command::Play);
        let mut one_run = tiny_plan();
        one_run.runs.truncate(1);
        let routed = fanout.route(Command::Load(one_run)).unwrap();
        assert!(routed.iter().all(|(session, c)| *session == 0 || matches!(c, Command::Pause)), "{routed:?}");
        assert!(routed.iter().any(|(session, c)| *session == 1 && matches!(c, Command::Pause)));
    }
}
