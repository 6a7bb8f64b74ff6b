//! Classroom presets: a question, a few sentences of context, and the runs that answer it.

use qkv_train::lesson_plans::LESSON_PLANS;
use qkv_train::plan::ExperimentPlan;

use crate::view::SessionView;

/// What a lesson's presentation screen sets side by side beside its curves: its contrast.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Screen {
    /// The reference run's map and another run's, of the head where they differ most, and the
    /// parameter bars.
    Maps,
    /// The KV-cache bars, large; no maps.
    KvCache,
    /// The original run and the copy born from it by "Eliminate W_Q": their maps, the parameter
    /// bars, and the step of the elimination marked on the chart.
    Elimination,
}

/// The part of the screen a lesson's step talks about, which the step outlines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Panel {
    /// The loss (and accuracy) chart and the verdict under its title.
    Loss,
    /// The parameter and KV-cache bars.
    Costs,
    /// The attention maps.
    Maps,
    /// The theory lesson's "Eliminate W_Q".
    Theory,
}

/// One short step of a lesson: a sentence for the room and the panel it is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Card {
    pub say: &'static str,
    pub panel: Panel,
}

/// When a lesson pauses by itself for the class to discuss what the screen shows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Moment {
    /// The reference run's validation accuracy reaches this share.
    ReferenceAccuracy(f64),
    /// Every run has trained this many steps.
    Step(usize),
}

impl Moment {
    /// Has training reached the moment? (Any evaluation counts: a frame may bring several, and
    /// the last of them may have dipped again.)
    pub fn reached(self, view: &SessionView) -> bool {
        match self {
            Moment::ReferenceAccuracy(share) => {
                view.reference().is_some_and(|run| run.evals.iter().any(|eval| eval.accuracy.is_some_and(|accuracy| accuracy >= share)))
            }
            Moment::Step(step) => view.is_loaded() && view.steps_done() >= step,
        }
    }
}

/// A pause for discussion: when, and what the screen says then (Space goes on).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pause {
    pub when: Moment,
    pub say: &'static str,
}

pub struct Lesson {
    pub title: &'static str,
    /// What the class will see, in two or three lines (presentation mode shows only this).
    pub point: &'static str,
    pub screen: Screen,
    /// Where the lesson stops by itself for the class to discuss, once per run of it.
    pub pause: Option<Pause>,
    /// The lesson in three to five steps, one panel each, in the order a teacher shows them.
    pub cards: &'static [Card],
    pub explanation: &'static str,
    /// What it trains: qkv-train's `LESSON_PLANS`, which `qkv compare --lesson N` runs too.
    pub plan: fn() -> ExperimentPlan,
}

pub const LESSONS: [Lesson; 5] = [
    Lesson {
        title: "Does attention need W_Q?",
        point: "Without W_Q each head's query is its slice of the input (Q=I): a d×d matrix fewer per layer. Watch the two loss curves: Q=I's validation loss ends within 6% of Q-K-V's.",
        screen: Screen::Maps,
        pause: None,
        cards: &[
            Card {
                say: "Two models learn from the same batches of Shakespeare: Q-K-V, standard attention, and Q=I, which has no W_Q. Press Train.",
                panel: Panel::Loss,
            },
            Card { say: "The parameter bars: Q=I's have no W_Q segment, a d×d matrix fewer in every layer.", panel: Panel::Costs },
            Card {
                say: "Ask the room: will the model without W_Q learn worse? Watch the dashed validation curves, and the verdict under the chart's title.",
                panel: Panel::Loss,
            },
            Card {
                say: "The maps: each row is a token, reading the tokens before it. Q=I's heads still learn where to look.",
                panel: Panel::Maps,
            },
        ],
        explanation: "Paper 1 removes the query weight: each head's query is simply its slice of the layer's \
            input (W_Q = I, written Q=I). The model loses a d×d matrix per layer. Train Q=I beside the standard \
            Q-K-V on Shakespeare and watch whether the curves separate: in this tiny model Q=I's validation loss \
            ends within 6% of Q-K-V's; paper 1 finds a GPT-2 small without W_Q on par with the original in \
            validation loss.",
        plan: LESSON_PLANS[0],
    },
    Lesson {
        title: "Share K and V, halve the cache",
        point: "With Q-K=V a generating model caches one tensor per token instead of two: the KV bars halve. The loss notices a little: Q-K=V's validation loss ends about 5% above Q-K-V's, Q=K=V's about 9%.",
        screen: Screen::KvCache,
        pause: None,
        cards: &[
            Card {
                say: "The KV bars: what a generating model keeps per token. Q-K=V and Q=K=V keep one tensor instead of two.",
                panel: Panel::Costs,
            },
            Card { say: "Press Train: the three models learn from the same batches.", panel: Panel::Loss },
            Card {
                say: "Ask the room: what does half the cache cost? The verdict under the chart's title gives each run's validation loss against Q-K-V's.",
                panel: Panel::Loss,
            },
        ],
        explanation: "When keys and values come from one projection (Q-K=V) a generating model caches one \
            tensor per token instead of two: the KV bars below halve. Q=K=V goes further and shares the query \
            too, which saves parameters but no more cache. Does the loss notice? A little, in this tiny model: \
            after 500 steps Q-K=V's validation loss ends 3-6% above Q-K-V's and Q=K=V's 7-10% above. Paper 2's \
            300M-parameter models order them the same way: +1.9% and +13.9% in validation loss (perplexity 5.27 \
            and 6.41 against Q-K-V's 5.11).",
        plan: LESSON_PLANS[1],
    },
    Lesson {
        title: "Symmetric attention",
        point: "With Q=K-V, token i scores j exactly as j scores i. One head must rotate a list of four digits, each place reading its left neighbour around a cycle: Q-K-V learns it within 50 steps, Q=K-V stalls near 55% accuracy.",
        screen: Screen::Maps,
        pause: Some(Pause {
            when: Moment::ReferenceAccuracy(1.0),
            say: "Paused: Q-K-V now gets every digit right, and its map shows each place reading its left neighbour. \
                  Why can Q=K-V's map not do the same? Space goes on.",
        }),
        cards: &[
            Card {
                say: "The task: a list of four digits comes back rotated by one, each place taking its left neighbour's digit, the first place the last's.",
                panel: Panel::Maps,
            },
            Card { say: "Press Train and watch the accuracy: the lesson pauses when Q-K-V gets every digit right.", panel: Panel::Loss },
            Card {
                say: "Q-K-V's map: each row reads its left neighbour. Q=K-V's is symmetric: i scores j as j scores i, so it cannot prefer the left neighbour to the right one.",
                panel: Panel::Maps,
            },
            Card {
                say: "(Q=K-V)+rel adds a learned bias for each distance: watch its accuracy climb where Q=K-V's stalls.",
                panel: Panel::Loss,
            },
        ],
        explanation: "With Q = K the score of token i for j equals that of j for i. Here a model of one layer with one \
            head reads a list of four digits at once (an encoder: attention both ways) and writes it rotated by one: \
            each place reads its left neighbour, and the first reads the last, around a cycle. With Q = K, place i \
            can score j above itself only if j's query is longer than its own, and lengths cannot grow all the way \
            around a cycle. Q-K-V gets every digit within 50 steps; Q=K-V stalls near 55% accuracy. (Q=K-V)+rel adds a learned bias for each distance i − j, a \
            term of the pair that can prefer the left neighbour to the right one: it gets every digit by step 200. \
            The paper's (Q=K-V)+ adds a bias on each key's position instead: a length by another name, no help \
            around a cycle (add it as a run to see it stall with Q=K-V). With four heads, Q=K-V learns the \
            rotation too: pairs of heads can share the work.",
        plan: LESSON_PLANS[2],
    },
    Lesson {
        title: "Fewer KV heads",
        point: "GQA-2 and MQA let query heads share key/value heads: the KV bars shrink by the group size, and their validation loss ends within 2% of Q-K-V's. Q-K=V + MQA halves the cache again, at a clear cost.",
        screen: Screen::KvCache,
        pause: None,
        cards: &[
            Card {
                say: "The KV bars: GQA-2 lets two query heads share each key/value head, MQA all four share one. Q-K=V + MQA halves MQA's cache again.",
                panel: Panel::Costs,
            },
            Card { say: "Press Train: the four models learn from the same batches.", panel: Panel::Loss },
            Card {
                say: "Ask the room: which cut of the cache costs loss? The verdict under the chart's title gives each against Q-K-V.",
                panel: Panel::Loss,
            },
        ],
        explanation: "Grouped-query attention lets several query heads read one key/value head (GQA-2: two \
            key/value heads for four query heads), or all of them read one (MQA): the cache shrinks by the group \
            size. Sharing K and V on top of MQA (Q-K=V + MQA) shrinks it again by half. Here GQA-2 and MQA end \
            within 2% of Q-K-V's validation loss, above or below it: in a model this small the seed decides \
            which. Q-K=V + MQA costs clearly more.",
        plan: LESSON_PLANS[3],
    },
    Lesson {
        title: "Is W_Q needed? Watch it vanish",
        point: "Train a while, then press Eliminate W_Q: a copy with Q=I joins, computing the same outputs. Yet its loss jumps on its first step, and takes a few dozen steps to catch up.",
        screen: Screen::Elimination,
        // Past the warm-up, as the lesson's test converts: "train a while".
        pause: Some(Pause {
            when: Moment::Step(100),
            say: "Paused after 100 steps: press Eliminate W_Q, then Space, and watch the copy's first steps.",
        }),
        cards: &[
            Card { say: "One standard model, with W_Q. Press Train: the lesson pauses after 100 steps.", panel: Panel::Loss },
            Card { say: "Press Eliminate W_Q: a copy without W_Q joins, computing the same outputs.", panel: Panel::Theory },
            Card { say: "The copy's parameter bar is shorter: W_Q was folded into the layer's input.", panel: Panel::Costs },
            Card {
                say: "Press Space: both train on the same batches. Ask the room why the copy's loss jumps, though it computes the same function.",
                panel: Panel::Loss,
            },
        ],
        explanation: "Paper 1's theory: attention sees its input X only through XW_Q, XW_K and XW_V, so any \
            invertible Θ can move into the layer's input. Train this small model (no LayerNorm, no skip around \
            the MLP) for a while, then press 'Eliminate W_Q' below: a copy without W_Q joins with the same logits \
            and attention maps and a shorter parameter bar. Then keep training both on the same batches: the copy \
            computes the same function, yet its loss jumps on its first step and takes a few dozen steps to catch \
            up (how far it jumps depends on the seed: with a worse-conditioned W_Q the copy can wander for longer). \
            Same function, different optimisation: the copy starts with a fresh Adam state, whose first steps \
            move every weight by about the learning rate whatever its gradient, and Adam is not invariant to the \
            change of basis, which is ill-conditioned here (see 'condition of W_Q'). One reason paper 1 trains \
            with W_Q = I from the start rather than converting.",
        plan: LESSON_PLANS[4],
    },
];

#[cfg(test)]
mod tests {
    use super::*;
    use pollster::FutureExt as _;
    use qkv_model::CacheDType;
    use qkv_model::accounting::kv_cache_bytes_per_token;
    use qkv_model::burn::module::Module;
    use qkv_model::burn::tensor::Device;
    use qkv_train::run::Run;
    use qkv_train::theory::{TheoryCase, continue_converted, convert_and_measure};
    use qkv_train::{Dataset, Experiment, RunEvent};

    use crate::verdict::{Measure, Verdict, verdict};
    use crate::view::{RunView, SessionView, run_label};
    use qkv_model::ParamReport;
    use qkv_session::{RunId, RunInfo};

    #[test]
    fn every_lesson_is_three_to_five_short_steps() {
        for lesson in &LESSONS {
            assert!((3..=5).contains(&lesson.cards.len()), "{}: {} steps", lesson.title, lesson.cards.len());
            for card in lesson.cards {
                // Two lines at presentation size: a step is said, not read.
                assert!(card.say.len() <= 170, "{}: {:?} is {} characters", lesson.title, card.say, card.say.len());
            }
        }
    }

    #[test]
    fn every_lesson_builds_valid_runs_that_evaluate_often() {
        for lesson in &LESSONS {
            let plan = (lesson.plan)();
            let dataset = plan.dataset().unwrap();
            let specs = plan.specs(&dataset).unwrap_or_else(|e| panic!("{}: {e}", lesson.title));
            assert!(!specs.is_empty(), "{}", lesson.title);
            assert!(specs.iter().all(|s| s.training.eval_interval <= 10), "{}", lesson.title);
            if let Dataset::Synthetic(data) = &dataset {
                assert!(data.time() <= specs[0].model.block_size);
            }
        }
    }

    /// The lesson's default setup trained for its default steps on the CPU, as a class sees it.
    fn trained(lesson: &Lesson) -> Experiment {
        let plan = (lesson.plan)();
        let dataset = plan.dataset().unwrap();
        let specs = plan.specs(&dataset).unwrap();
        let mut experiment = Experiment::new(dataset, specs, &Device::flex()).unwrap();
        experiment.evaluate_untrained().block_on();
        while !experiment.is_done() {
            let stopped: Vec<RunEvent> =
                experiment.step().block_on().into_iter().filter(|e| matches!(e, RunEvent::Stopped { .. })).collect();
            assert!(stopped.is_empty(), "{}: {stopped:?}", lesson.title);
        }
        experiment
    }

    /// How far above its exponential moving average (α = 0.1) any training-loss point lies: the
    /// jumps a class would see.
    fn largest_jump(run: &Run) -> f64 {
        let mut average: Option<f64> = None;
        let mut largest = 0.0f64;
        for step in &run.metrics.steps {
            if let Some(average) = average {
                largest = largest.max(step.train_loss - average);
            }
            average = Some(average.map_or(step.train_loss, |a| 0.9 * a + 0.1 * step.train_loss));
        }
        largest
    }

    /// The verdict the screen shows at the end of `experiment`: every run against the reference.
    fn verdict_of(experiment: &Experiment) -> Verdict {
        let runs = experiment
            .runs
            .iter()
            .enumerate()
            .map(|(i, run)| {
                let info = RunInfo {
                    id: RunId(i),
                    spec: run.spec.clone(),
                    params: ParamReport::new(&run.spec.model),
                    steps: run.metrics.steps.clone(),
                    evals: run.metrics.evals.clone(),
                };
                RunView::new(info, crate::palette::colour(i))
            })
            .collect();
        verdict(&SessionView { runs, ..SessionView::default() }).expect("a reference run")
    }

    /// The verdict's change for the run labelled `label`.
    fn change_of(verdict: &Verdict, label: &str) -> f64 {
        verdict.lines.iter().find(|line| line.run == label).unwrap_or_else(|| panic!("no verdict line for {label}")).change
    }

    /// What a student reads for every run of every lesson is the papers' notation (README's table).
    #[test]
    fn every_lesson_labels_its_runs_in_the_papers_notation() {
        let notation = ["Q-K-V", "Q=I", "Q-K=V", "Q=K-V", "Q=K=V", "(Q=K-V)+rel", "GQA-2", "MQA", "Q-K=V + MQA"];
        for lesson in &LESSONS {
            let plan = (lesson.plan)();
            for spec in plan.specs(&plan.dataset().unwrap()).unwrap() {
                let label = run_label(&spec.name, &spec.model);
                assert!(notation.contains(&label.as_str()), "{}: {} is labelled {label}", lesson.title, spec.name);
            }
        }
    }

    /// A run's KV cache per token, as the cost panel's bars show it.
    fn cache(run: &Run) -> usize {
        kv_cache_bytes_per_token(&run.spec.model, CacheDType::F32)
    }

    /// `run`'s last validation loss relative to `reference`'s: 0.05 is 5% higher.
    fn final_gap(run: &Run, reference: &Run) -> f64 {
        let last = |r: &Run| r.metrics.evals.last().expect("evaluated").val_loss;
        last(run) / last(reference) - 1.0
    }

    #[test]
    fn lesson_1_trains_without_jumps_and_ends_as_its_text_says() {
        let lesson = &LESSONS[0];
        assert!(lesson.point.contains("Q=I's validation loss ends within 6% of Q-K-V's"));
        let experiment = trained(lesson);
        let [standard, identity] = &experiment.runs[..] else { panic!("two runs") };
        for run in [standard, identity] {
            let jump = largest_jump(run);
            assert!(jump <= 0.15, "{}: a point {jump:.3} nats above its moving average", run.spec.name);
            assert!(run.metrics.evals.len() > 50, "validation every 10 steps");
        }
        let verdict = verdict_of(&experiment);
        assert_eq!((verdict.measure, verdict.reference.as_str()), (Measure::ValidationLoss, "Q-K-V"));
        let gap = change_of(&verdict, "Q=I");
        assert_eq!(gap, final_gap(identity, standard), "the verdict sets the last evaluations side by side");
        assert!(gap.abs() < 0.06, "Q=I ends {:.1}% from Q-K-V", 100.0 * gap);
    }

    #[test]
    fn lesson_2_halves_the_cache_and_costs_the_loss_its_text_states() {
        let lesson = &LESSONS[1];
        assert!(lesson.point.contains("Q-K=V's validation loss ends about 5% above Q-K-V's, Q=K=V's about 9%"));
        assert!(lesson.explanation.contains("Q-K=V's validation loss ends 3-6% above Q-K-V's and Q=K=V's 7-10% above"));
        // The paper's figures as docs/papers.md has them, in the lesson's measure: as the
        // verdict's paper line shows them.
        let paper = |name: &str| qkv_train::papers::paper2_ppl(name).unwrap();
        let in_loss = |name: &str| Measure::ValidationLoss.format(qkv_train::papers::paper2_loss_change(name).unwrap().1);
        let quoted = format!(
            "{} and {} in validation loss (perplexity {} and {} against Q-K-V's {})",
            in_loss("Q-K=V"),
            in_loss("Q=K=V"),
            paper("Q-K=V"),
            paper("Q=K=V"),
            qkv_train::papers::PAPER2_STANDARD_PPL
        );
        assert!(lesson.explanation.contains(&quoted), "{quoted}");
        let experiment = trained(lesson);
        let [standard, shared_kv, shared_all] = &experiment.runs[..] else { panic!("three runs") };
        // As the cost panel's bars show it: one cached tensor per token instead of two.
        assert_eq!(cache(shared_kv) * 2, cache(standard), "K=V halves the cache");
        assert_eq!(cache(shared_all), cache(shared_kv), "sharing the query too saves no more cache");
        for run in [standard, shared_kv, shared_all] {
            let jump = largest_jump(run);
            assert!(jump <= 0.15, "{}: a point {jump:.3} nats above its moving average", run.spec.name);
        }
        let verdict = verdict_of(&experiment);
        assert_eq!((verdict.measure, verdict.reference.as_str()), (Measure::ValidationLoss, "Q-K-V"));
        for (label, paper) in [("Q-K=V", "Q-K=V"), ("Q=K=V", "Q=K=V")] {
            let line = verdict.lines.iter().find(|line| line.run == label).unwrap();
            assert_eq!(line.paper.as_ref().map(|p| p.0.clone()), Some(format!("paper 2: {}", in_loss(paper))));
        }
        let (kv, all) = (change_of(&verdict, "Q-K=V"), change_of(&verdict, "Q=K=V"));
        assert_eq!((kv, all), (final_gap(shared_kv, standard), final_gap(shared_all, standard)));
        assert!((0.03..=0.06).contains(&kv), "Q-K=V ends {:.1}% above standard", 100.0 * kv);
        assert!((0.07..=0.10).contains(&all), "Q=K=V ends {:.1}% above standard", 100.0 * all);
    }

    /// Accuracy (in points) of every evaluation of `run`, by step.
    fn accuracy_at(run: &Run, step: usize) -> f64 {
        let eval = run.metrics.evals.iter().find(|e| e.step == step).expect("evaluated at that step");
        100.0 * eval.accuracy.expect("a synthetic task's accuracy")
    }

    #[test]
    fn lesson_3_shows_a_symmetric_head_stalling_where_an_asymmetric_one_learns() {
        let lesson = &LESSONS[2];
        assert!(lesson.point.contains("Q-K-V learns it within 50 steps, Q=K-V stalls near 55% accuracy"));
        assert!(lesson.explanation.contains("it gets every digit by step 200"));
        let experiment = trained(lesson);
        let [symmetric, asymmetric, pairwise] = &experiment.runs[..] else { panic!("three runs") };
        assert!(experiment.runs.iter().all(|run| run.spec.model.attention.bidirectional), "an encoder");
        assert!(accuracy_at(asymmetric, 50) >= 99.0, "Q-K-V within 50 steps: {}", accuracy_at(asymmetric, 50));
        let end = experiment.step;
        let stalled = accuracy_at(symmetric, end);
        assert!((50.0..=60.0).contains(&stalled), "Q=K-V stalls near 55%: {stalled}");
        // At least 20 points behind each asymmetric run.
        for ahead in [asymmetric, pairwise] {
            assert!(accuracy_at(ahead, end) - stalled >= 20.0, "Q=K-V against {}", ahead.spec.name);
        }
        // The screen's verdict says the same, in accuracy points against Q-K-V.
        let verdict = verdict_of(&experiment);
        assert_eq!((verdict.measure, verdict.reference.as_str()), (Measure::Accuracy, "Q-K-V"));
        assert!(change_of(&verdict, "Q=K-V") <= -0.2, "{}", change_of(&verdict, "Q=K-V"));
        assert!(accuracy_at(pairwise, 200) >= 99.0, "(Q=K-V)+rel by step 200: {}", accuracy_at(pairwise, 200));
        // What the softmax sees (docs/diagnostics.md): Q=K-V's logits are symmetric by
        // construction; (Q=K-V)+rel's learned term in i - j is what broke the symmetry.
        let symmetry = |run: &Run| run.diagnose(experiment.val_batches()).block_on().unwrap().mean_symmetry().unwrap();
        let (stalled, learned) = (symmetry(symmetric), symmetry(pairwise));
        assert!((stalled - 1.0).abs() < 1e-6, "Q=K-V: {stalled}");
        assert!(learned < 0.9, "(Q=K-V)+rel: {learned}");
    }

    #[test]
    fn lesson_4_shrinks_the_cache_as_its_text_says_at_the_losses_it_states() {
        let lesson = &LESSONS[3];
        assert!(lesson.explanation.contains("shrinks by the group size") && lesson.explanation.contains("again by half"));
        assert!(lesson.point.contains("their validation loss ends within 2% of Q-K-V's"));
        assert!(lesson.explanation.contains("GQA-2 and MQA end within 2% of Q-K-V's validation loss"));
        let experiment = trained(lesson);
        let [mha, gqa, mqa, shared_mqa] = &experiment.runs[..] else { panic!("four runs") };
        // As the cost panel's bars show it.
        let heads = mha.spec.model.n_head;
        assert_eq!(cache(gqa) * heads / 2, cache(mha), "GQA-2: shrunk by its group size");
        assert_eq!(cache(mqa) * heads, cache(mha), "MQA: shrunk by the number of heads");
        assert_eq!(cache(shared_mqa) * 2, cache(mqa), "K=V halves MQA's again");
        let verdict = verdict_of(&experiment);
        assert_eq!((verdict.measure, verdict.reference.as_str()), (Measure::ValidationLoss, "Q-K-V"));
        for label in ["GQA-2", "MQA"] {
            let gap = change_of(&verdict, label);
            assert!(gap.abs() < 0.02, "{label} ends {:.1}% from Q-K-V", 100.0 * gap);
        }
        let (shared, alone) = (change_of(&verdict, "Q-K=V + MQA"), change_of(&verdict, "MQA"));
        assert_eq!(alone, final_gap(mqa, mha));
        assert!(shared > alone + 0.02, "K=V on MQA costs clearly more: {shared:.3} against {alone:.3}");
    }

    /// Lesson 5's claim, on the lesson's own model and data: the copy without W_Q starts with the
    /// original's loss, jumps on its first step, and catches up within a few dozen steps.
    #[test]
    fn the_copy_without_w_q_jumps_on_its_first_step_and_catches_up() {
        let lesson = &LESSONS[4];
        assert!(lesson.explanation.contains("its loss jumps on its first step and takes a few dozen steps to catch up"));
        let plan = (lesson.plan)();
        let dataset = plan.dataset().unwrap();
        let specs = plan.specs(&dataset).unwrap();
        let mut experiment = Experiment::new(dataset, specs, &Device::flex()).unwrap();
        // "Train for a while": past the warm-up, as a class would before pressing the button.
        for _ in 0..100 {
            experiment.step().block_on();
        }
        let original = &experiment.runs[0];
        let (conversion, report) =
            convert_and_measure(TheoryCase::NoMlpSkip, original, &original.model().valid(), experiment.val_batches()).unwrap();
        assert!(report.exact && report.max_abs_logit_diff < 1e-4, "{report:?}");
        let copy = continue_converted(original, conversion, "copy", experiment.dataset()).unwrap();
        experiment.add_run(copy, qkv_train::RunId(experiment.runs.len())).unwrap();
        let gaps: Vec<f64> = (0..40)
            .map(|_| {
                let losses: Vec<f64> = experiment
                    .step()
                    .block_on()
                    .into_iter()
                    .filter_map(|event| match event {
                        RunEvent::Stepped { record, .. } => Some(record.train_loss),
                        _ => None,
                    })
                    .collect();
                losses[1] - losses[0]
            })
            .collect();
        // The first loss is computed before either updates: the same function, the same loss.
        assert!(gaps[0].abs() < 1e-3, "{gaps:?}");
        assert!(gaps[1] > 0.3, "the jump after the copy's first update: {gaps:?}");
        let late = gaps[30..].iter().sum::<f64>() / 10.0;
        assert!(late.abs() < 0.1, "caught up within 40 steps: {gaps:?}");
    }
}
