//! The paper catalogue: which studies `qkv experiment` trains for each paper at each scale (the
//! runs, their variants and scales, the parameter-matched MLPs).

use qkv_model::{AttentionVariant, ModelConfig, ParamReport, Preset};
use qkv_train::papers::{PAPER2_SYNTHETIC_HALF_SWEEP, PAPER2_SYNTHETIC_SWEEP, PAPER2_SYNTHETIC_TASKS, SyntheticSweep};
use qkv_train::plan::{ExperimentPlan, ModelOverrides, RunPlan, TrainingOverrides};
use qkv_train::{DataSource, Framing, ImageSource, SyntheticTask, TrainingConfig};

use super::{ExperimentArgs, ExperimentKind, Scale};
use crate::Failure;

/// A model of the synthetic sweep, as paper 2's authors vary theirs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct SweepModel {
    pub(super) n_layer: usize,
    pub(super) n_head: usize,
    pub(super) n_embd: usize,
}

impl SweepModel {
    /// The models of one of the authors' sweeps, widest last: its settings without their list
    /// lengths (the settings run through the lengths innermost, so each model's are adjacent).
    pub(super) fn of(sweep: &SyntheticSweep) -> Vec<SweepModel> {
        let mut models: Vec<SweepModel> =
            sweep.settings().into_iter().map(|s| SweepModel { n_layer: s.n_layer, n_head: s.n_head, n_embd: s.n_embd }).collect();
        models.dedup();
        models
    }
}

/// A sweep study's name, also its folder: "reverse-L64-2x4x64" (layers × heads × width, as the
/// presets write a model).
pub(super) fn study_name(task: SyntheticTask, length: usize, model: SweepModel) -> String {
    format!("{}-L{length}-{}x{}x{}", task.name(), model.n_layer, model.n_head, model.n_embd)
}

/// One comparison: a plan trained once per seed.
pub(super) struct Study {
    pub(super) name: String,
    pub(super) plan: ExperimentPlan,
    /// The study trains this many times the seeds asked for (a headline that needs the power).
    pub(super) seed_multiple: usize,
    /// The seeds the study trains whatever was asked for (`--headline-seeds`: the number a
    /// power calculation asked for).
    pub(super) own_seeds: Option<usize>,
}

impl Study {
    pub(super) fn new(name: impl Into<String>, plan: ExperimentPlan) -> Self {
        Self { name: name.into(), plan, seed_multiple: 1, own_seeds: None }
    }

    /// The seeds this study trains when `seeds` are asked for.
    pub(super) fn seeds(&self, seeds: usize) -> usize {
        self.own_seeds.unwrap_or(seeds * self.seed_multiple)
    }
}

impl Scale {
    fn preset(self) -> Preset {
        match self {
            Scale::Tiny => Preset::Classroom,
            Scale::Laptop => Preset::ShakespeareCharCpu,
            Scale::Gpu => Preset::Gpt2Small,
        }
    }

    /// Heads of paper 2's models: 8 at laptop scale (d_k 16), so that GQA can share key/value
    /// heads 4 to 1 as the paper does; the preset's elsewhere.
    fn paper2_heads(self) -> Option<usize> {
        match self {
            Scale::Laptop => Some(8),
            _ => None,
        }
    }

    /// The lengths paper 1's headline is also trained for, from the headline's own `steps`
    /// ([`BUDGET_MULTIPLES`]); none at gpu scale, where four times GPT-2 small's run is days.
    fn budgets(self, steps: usize) -> Vec<usize> {
        match self {
            Scale::Gpu => Vec::new(),
            _ => {
                let mut budgets: Vec<usize> = BUDGET_MULTIPLES.iter().map(|&(times, over)| (steps * times / over).max(1)).collect();
                budgets.dedup();
                budgets.retain(|&budget| budget != steps);
                budgets
            }
        }
    }

    fn default_steps(self) -> Option<usize> {
        match self {
            Scale::Tiny => Some(300),
            _ => None,
        }
    }
}

/// What `paper2-synthetic` sweeps at a scale, unless told otherwise: tasks × lengths × models.
pub(super) struct SweepDefaults {
    tasks: Vec<SyntheticTask>,
    lengths: Vec<usize>,
    models: Vec<SweepModel>,
}

impl Scale {
    /// Gpu: paper 2's authors' whole sweep (widths 32, 64 and 256, 2 and 4 layers, 2 and 4
    /// heads, lists of 16, 64 and 128). Laptop: the half of it that fits an hour on two cores
    /// (widths 32 and 64, 2 layers, 2 and 4 heads, lists of 16 and 64: measured here, the largest run takes about
    /// 4 s, a run at width 256 or on lists of 128 several times that). Tiny: two tasks on one small
    /// model, for trying the command.
    fn sweep(self) -> SweepDefaults {
        use SyntheticTask::*;
        match self {
            Scale::Tiny => SweepDefaults {
                tasks: vec![Reverse, Swap],
                lengths: vec![8, 16],
                models: SweepModel::of(&SyntheticSweep { widths: &[32], layers: &[2], heads: &[2], lengths: &[8, 16] }),
            },
            Scale::Laptop => SweepDefaults {
                tasks: PAPER2_SYNTHETIC_TASKS.to_vec(),
                lengths: PAPER2_SYNTHETIC_HALF_SWEEP.lengths.to_vec(),
                models: SweepModel::of(&PAPER2_SYNTHETIC_HALF_SWEEP),
            },
            Scale::Gpu => SweepDefaults {
                tasks: PAPER2_SYNTHETIC_TASKS.to_vec(),
                lengths: PAPER2_SYNTHETIC_SWEEP.lengths.to_vec(),
                models: SweepModel::of(&PAPER2_SYNTHETIC_SWEEP),
            },
        }
    }
}

/// Paper2-vision's first study: pixels each patch's token reads beyond its patch, and heads.
const VISION_PATCH_OVERLAP: usize = 1;
const VISION_HEADS: usize = 8;

/// Lists the authors train on, each seen [`SYNTHETIC_EPOCHS`] times in batches of
/// [`SYNTHETIC_BATCH`].
const SYNTHETIC_LISTS: usize = 10_000;
const SYNTHETIC_EPOCHS: usize = 2;
const SYNTHETIC_BATCH: usize = 128;

/// Paper 2's synthetic recipe as its authors' code trains the encoders: Adam (β₂ 0.999, no
/// weight decay) at 10⁻³, warmed up over the first 5% of steps, then a cosine to 0; gradients
/// clipped at a norm of 5; two passes over 10,000 lists in batches of 128 (79 batches a pass,
/// the last one short), so 158 steps unless `steps` says otherwise. Ours draws each batch's
/// lists from the task's 50,000 training lists instead of passing over 10,000 twice.
pub(super) fn paper2_synthetic_training(steps: Option<usize>) -> TrainingOverrides {
    let steps = steps.unwrap_or(SYNTHETIC_LISTS.div_ceil(SYNTHETIC_BATCH) * SYNTHETIC_EPOCHS);
    TrainingOverrides {
        steps: Some(steps),
        batch_size: Some(SYNTHETIC_BATCH),
        lr: Some(1e-3),
        min_lr: Some(0.0),
        weight_decay: Some(0.0),
        beta2: Some(0.999),
        grad_clip: Some(5.0),
        warmup_steps: Some(steps / 20),
        // Every 20 steps (eight evaluations of the 158): when each run learned its task, and
        // its loss curve.
        eval_interval: Some(at_least_once(20, Some(steps))),
        ..Default::default()
    }
}

/// Whether a study trains with [`paper2_synthetic_training`]'s recipe at its own length, the
/// recipe the authors' averages were made with.
pub(super) fn follows_paper2_synthetic_recipe(training: &TrainingOverrides) -> bool {
    *training == paper2_synthetic_training(None)
}

/// A sweep model on lists of `length`, as the authors build it: read whole with attention both
/// ways, learned positions, pre-LN, a 4× MLP, and an output head of its own.
fn paper2_synthetic_model(model: SweepModel, length: usize) -> ModelOverrides {
    ModelOverrides {
        n_layer: Some(model.n_layer),
        n_head: Some(model.n_head),
        n_embd: Some(model.n_embd),
        block_size: Some(length),
        tie_embeddings: Some(false),
        ..Default::default()
    }
}

/// The MLP width that brings `config` (with `variant`) closest to `target` parameters.
pub(super) fn mlp_matching(config: &ModelConfig, variant: AttentionVariant, target: usize) -> usize {
    let params = |hidden: usize| {
        let mut c = config.clone().with_variant(variant);
        c.mlp_hidden = hidden;
        ParamReport::new(&c).total_params
    };
    (1..=config.mlp_hidden * 2).min_by_key(|&h| params(h).abs_diff(target)).expect("a non-empty range")
}

/// The width of the MLP that spends W_Q's parameters: wq-identity's model at standard's count.
fn wide_mlp(config: &ModelConfig) -> usize {
    let standard = ParamReport::new(&config.clone().with_variant(AttentionVariant::Standard)).total_params;
    mlp_matching(config, AttentionVariant::QueryIdentity, standard)
}

/// Paper 1's headline, at twice the seeds of the rest (its changes are a fraction of a percent):
/// W_Q = I against standard at both attention scales, its own halved 1/(2√d_k) and standard's
/// 1/√d_k, and with the freed parameters moved to the MLP at 1/√d_k.
pub(super) fn paper1_headline_runs(preset: Preset) -> Vec<RunPlan> {
    use AttentionVariant::*;
    let config = preset.config();
    let standard_scale = Some(Standard.default_scale(config.head_dim()));
    vec![
        RunPlan::new(Standard).named("standard"),
        RunPlan::new(QueryIdentity).named("wq-identity"),
        RunPlan { scale: standard_scale, ..RunPlan::new(QueryIdentity) }.named(STANDARD_SCALE_RUN),
        RunPlan { scale: standard_scale, mlp_hidden: Some(wide_mlp(&config)), ..RunPlan::new(QueryIdentity) }
            .named(WIDE_STANDARD_SCALE_RUN),
    ]
}

/// The study of [`paper1_headline_runs`].
pub(super) const PAPER1_HEADLINE_STUDY: &str = "headline";

/// Paper 1's ablations of the headline, paired seed by seed with it (same seeds, data and batch
/// shape, so the same batches and every tensor the runs share drawn the same): the freed
/// parameters moved to the MLP at the identity's own scale, as the paper does, and the standard
/// model shrunk to the same count; W_K = I and W_V = I instead of W_Q; and a short weight-decay
/// sweep of standard and W_Q = I, each trying the other's decay and none.
pub(super) fn paper1_runs(preset: Preset) -> Vec<RunPlan> {
    use AttentionVariant::*;
    let config = preset.config();
    let identity = ParamReport::new(&config.clone().with_variant(QueryIdentity)).total_params;
    let narrow = mlp_matching(&config, Standard, identity);
    let decay = |variant: AttentionVariant| TrainingConfig::for_preset(preset).for_variant(variant).weight_decay;
    let swept = |variant: AttentionVariant, other: AttentionVariant| {
        [0.0, decay(other)].map(move |wd| RunPlan { weight_decay: Some(wd), ..RunPlan::new(variant) }.named(format!("{variant} wd={wd}")))
    };
    [
        RunPlan { mlp_hidden: Some(wide_mlp(&config)), ..RunPlan::new(QueryIdentity) }.named("wq-identity-wide-mlp"),
        RunPlan { mlp_hidden: Some(narrow), ..RunPlan::new(Standard) }.named("standard-narrow-mlp"),
        RunPlan::new(KeyIdentity).named("wk-identity"),
        RunPlan::new(ValueIdentity).named("wv-identity"),
    ]
    .into_iter()
    .chain(swept(Standard, QueryIdentity))
    .chain(swept(QueryIdentity, Standard))
    .collect()
}

/// wq-identity at standard's attention scale 1/√d_k instead of its 1/(2√d_k).
pub(super) const STANDARD_SCALE_RUN: &str = "wq-identity at standard scale";

/// wq-identity with the MLP widened to standard's parameter count, at standard's scale 1/√d_k.
pub(super) const WIDE_STANDARD_SCALE_RUN: &str = "wq-identity-wide-mlp at standard scale";

/// Paper 1's other equal-size control: the original made smaller overall, every width scaled
/// down in the same proportions (heads kept, so a narrower d_k; the MLP keeps its ratio), to the
/// width whose count comes closest to wq-identity's. Beside `standard-narrow-mlp`, which takes the
/// same parameters from the MLP alone, it separates "fewer parameters" from "no W_Q".
pub(super) fn paper1_smaller_width(config: &ModelConfig) -> usize {
    use AttentionVariant::*;
    let identity = ParamReport::new(&config.clone().with_variant(QueryIdentity)).total_params;
    let params = |n_embd: usize| {
        let smaller = ModelOverrides { n_embd: Some(n_embd), ..Default::default() }.applied_to(config.clone());
        ParamReport::new(&smaller.with_variant(Standard)).total_params
    };
    (config.n_head..=config.n_embd)
        .step_by(config.n_head)
        .min_by_key(|&n_embd| params(n_embd).abs_diff(identity))
        .expect("a non-empty range")
}

/// The run of the study [`PAPER1_SMALLER_STUDY`] trains: the original at [`paper1_smaller_width`].
pub(super) const SMALLER_RUN: &str = "standard-smaller";

/// The study of the smaller original, paired seed by seed with the headline's (same seeds, data
/// and batch shape, so the same batches); a study of its own, since its model's width differs.
pub(super) const PAPER1_SMALLER_STUDY: &str = "smaller";

/// Each training length of paper 1's budget studies as a multiple of the headline's steps: half,
/// twice and four times.
const BUDGET_MULTIPLES: [(usize, usize); 3] = [(1, 2), (2, 1), (4, 1)];

/// The study that trains the headline's two runs for `steps` steps, also its folder.
pub(super) fn budget_study(steps: usize) -> String {
    format!("budget-{steps}")
}

/// A budget study's run: "wq-identity, 8000 steps" (run names are unique across a report).
pub(super) fn budget_run(name: &str, steps: usize) -> String {
    format!("{name}, {steps} steps")
}

/// The study of [`paper1_scale_runs`], beside the ablations ("text").
pub(super) const PAPER1_SCALE_STUDY: &str = "scale";

/// wk-identity at standard's scale 1/√d_k instead of its 1/(2√d_k).
pub(super) const WK_STANDARD_SCALE_RUN: &str = "wk-identity at standard scale";

/// wv-identity at the identity models' scale 1/(2√d_k) instead of standard's 1/√d_k.
pub(super) const WV_HALVED_SCALE_RUN: &str = "wv-identity at halved scale";

/// W_K = I and W_V = I each at the other attention scale: wk-identity takes wq-identity's halved
/// scale by the same argument, wv-identity keeps standard's, so each ablation's change from
/// standard mixes its projection with its scale until it is also seen at the other one. A study
/// of its own: its runs pair seed by seed with the main study's (same seeds, data and batch
/// shape, so the same batches; every seed is validated on the same batches), and since a study's
/// seeds are trained and kept whole, it is added without training the main study's runs again.
pub(super) fn paper1_scale_runs(preset: Preset) -> Vec<RunPlan> {
    use AttentionVariant::*;
    let d_k = preset.config().head_dim();
    vec![
        RunPlan { scale: Some(Standard.default_scale(d_k)), ..RunPlan::new(KeyIdentity) }.named(WK_STANDARD_SCALE_RUN),
        RunPlan { scale: Some(QueryIdentity.default_scale(d_k)), ..RunPlan::new(ValueIdentity) }.named(WV_HALVED_SCALE_RUN),
    ]
}

/// Paper 2's runs for a model of `n_head` heads. Head sharing is named by its ratio of key/value
/// heads to heads; GQA shares 4 heads' keys and values as the paper's 4 of 16 do, or 2 where
/// that would leave fewer than 2 key/value heads.
pub(super) fn paper2_runs(n_head: usize) -> Vec<RunPlan> {
    use AttentionVariant::*;
    let gqa = if n_head / 4 >= 2 { n_head / 4 } else { (n_head / 2).max(1) };
    let mut runs = paper2_projection_runs();
    runs.extend([
        RunPlan::new(Standard).with_kv_heads(gqa).named(format!("GQA {gqa}/{n_head}")),
        RunPlan::new(Standard).with_kv_heads(1).named(format!("MQA 1/{n_head}")),
        RunPlan::new(SharedKeyValue).with_kv_heads(gqa).named(format!("Q-K=V + GQA {gqa}/{n_head}")),
        RunPlan::new(SharedKeyValue).with_kv_heads(1).named(format!("Q-K=V + MQA 1/{n_head}")),
    ]);
    runs
}

/// The control that separates (Q=K-V)+rel's bias from its sharing: Q-K-V with the same learned
/// bias on i − j. A study of its own, paired seed by seed with the text study's (same seeds, data
/// and batch shape, so the same batches), so that the text study's seeds are not trained again.
pub(super) fn paper2_control_runs() -> Vec<RunPlan> {
    vec![RunPlan::new(AttentionVariant::StandardRel).named("Q-K-V+rel")]
}

/// The study of [`paper2_control_runs`].
pub(super) const PAPER2_CONTROL_STUDY: &str = "control";

/// Paper 2's projection variants, Q-K-V first (the reference every change is paired against),
/// and our pairwise (Q=K-V)+rel beside the paper's (Q=K-V)+: which of the two closes Q=K-V's gap.
pub(super) fn paper2_projection_runs() -> Vec<RunPlan> {
    use AttentionVariant::*;
    vec![
        RunPlan::new(Standard).named("Q-K-V"),
        RunPlan::new(SharedQueryKey).named("Q=K-V"),
        RunPlan::new(SharedQueryKeyAsym).named("(Q=K-V)+"),
        RunPlan::new(SharedQueryKeyRel).named("(Q=K-V)+rel"),
        RunPlan::new(SharedKeyValue).named("Q-K=V"),
        RunPlan::new(SharedAll).named("Q=K=V"),
    ]
}

/// Paper 2's synthetic and vision tables: its six variants ((Q=K=V)+ last), with our
/// (Q=K-V)+rel among them. Head sharing is left to the text study: it saves a cache that an
/// encoder does not keep.
pub(super) fn paper2_table_runs() -> Vec<RunPlan> {
    let mut runs = paper2_projection_runs();
    runs.push(RunPlan::new(AttentionVariant::SharedAllAsym).named("(Q=K=V)+"));
    runs
}

/// Steps the relations take: measured with the release build, standard was at 49.6% validation
/// accuracy after 2,000 steps (chance 25%) and at 100% after 6,000, so 6,000 is where a variant
/// that cannot learn the relation shows it.
const RELATIONS_STEPS: usize = 6000;

/// Where a bright square is from a dim one (`--data relations`): a relation that runs one way,
/// which a symmetric score weighs the same both ways. The preset's recipe for
/// [`RELATIONS_STEPS`] steps, unless the command sets its own.
fn relations_study(base: ExperimentPlan) -> Study {
    let steps = base.training.steps.or(Some(RELATIONS_STEPS));
    Study::new("relations", ExperimentPlan { training: TrainingOverrides { steps, ..base.training.clone() }, ..base })
}

/// Evaluations every `every` steps, or fewer where a run of `steps` would not reach one.
fn at_least_once(every: usize, steps: Option<usize>) -> usize {
    steps.map_or(every, |steps| every.min(steps.max(1)))
}

/// The setting of [`symmetry_probe`]: a list of four digits rotated by one.
const PROBE: (SyntheticTask, usize) = (SyntheticTask::Rotate, 4);

/// The probe's study, also its folder: "rotate-L4".
pub(super) fn probe_name() -> String {
    format!("{}-L{}", PROBE.0.name(), PROBE.1)
}

/// Where a symmetric score is known to fail (the app's third lesson): a list of four digits
/// rotated by one, read whole by an encoder of one layer and one head, so that each place must
/// read its left neighbour around a cycle, which symmetric logits cannot order. The sweep's
/// reverse and swap are involutions (i reads j exactly when j reads i), which a symmetric score
/// serves as well as any; this setting shows which logit term closes the gap where there is one.
/// The classroom recipe, as in the lesson; `base` gives the tokenizer.
fn symmetry_probe(base: ExperimentPlan, steps: Option<usize>) -> ExperimentPlan {
    let (task, length) = PROBE;
    let steps = steps.unwrap_or(300);
    ExperimentPlan {
        data: DataSource::Synthetic { task, length, framing: Framing::Encoder },
        model: ModelOverrides { n_layer: Some(1), n_head: Some(1), ..Default::default() },
        training: TrainingOverrides {
            steps: Some(steps),
            batch_size: Some(32),
            warmup_steps: Some(50),
            eval_interval: Some(at_least_once(50, Some(steps))),
            ..Default::default()
        },
        runs: paper2_table_runs(),
        ..base
    }
}

pub(super) fn studies(args: &ExperimentArgs) -> Result<Vec<Study>, Failure> {
    let steps = args.steps.or(args.scale.default_steps());
    let data = match (&args.data, args.scale) {
        (Some(data), _) => data.clone(),
        (None, _) if args.paper == ExperimentKind::Paper2Vision => DataSource::Images(ImageSource::Digits),
        (None, Scale::Gpu) if args.paper != ExperimentKind::Paper2Synthetic => {
            return Err(
                "--scale gpu trains GPT-2 small on your own data: give --data PATH (a text with --tokenizer bpe:N, or nanoGPT's train.bin)"
                    .into(),
            );
        }
        (None, _) => DataSource::Shakespeare,
    };
    let plan = |preset: Preset, data: DataSource, runs: Vec<RunPlan>| ExperimentPlan {
        preset,
        data,
        tokenizer: args.tokenizer.clone(),
        model: Default::default(),
        training: TrainingOverrides { steps, ..Default::default() },
        runs,
    };
    let preset = args.scale.preset();
    Ok(match args.paper {
        ExperimentKind::Paper1 => vec![
            Study {
                seed_multiple: 2,
                own_seeds: args.headline_seeds,
                ..Study::new(PAPER1_HEADLINE_STUDY, plan(preset, data.clone(), paper1_headline_runs(preset)))
            },
            Study::new("text", plan(preset, data.clone(), paper1_runs(preset))),
            Study::new(PAPER1_SCALE_STUDY, plan(preset, data.clone(), paper1_scale_runs(preset))),
            Study::new(
                PAPER1_SMALLER_STUDY,
                ExperimentPlan {
                    model: ModelOverrides { n_embd: Some(paper1_smaller_width(&preset.config())), ..Default::default() },
                    ..plan(preset, data.clone(), vec![RunPlan::new(AttentionVariant::Standard).named(SMALLER_RUN)])
                },
            ),
        ]
        .into_iter()
        .chain(args.scale.budgets(steps.unwrap_or(TrainingConfig::for_preset(preset).steps)).into_iter().map(|budget| {
            let runs = [(AttentionVariant::Standard, "standard"), (AttentionVariant::QueryIdentity, "wq-identity")]
                .map(|(variant, name)| RunPlan::new(variant).named(budget_run(name, budget)));
            let training = TrainingOverrides { steps: Some(budget), ..Default::default() };
            Study::new(budget_study(budget), ExperimentPlan { training, ..plan(preset, data.clone(), runs.to_vec()) })
        }))
        .collect(),
        ExperimentKind::Paper2Synthetic => {
            let defaults = args.scale.sweep();
            let mut studies = Vec::new();
            for &task in args.tasks.as_ref().unwrap_or(&defaults.tasks) {
                for &length in args.lengths.as_ref().unwrap_or(&defaults.lengths) {
                    if length < 2 {
                        return Err(crate::usage(format!(
                            "--lengths: lists of {length} cannot be reversed or swapped: use lengths of 2 or more"
                        )));
                    }
                    for &model in &defaults.models {
                        let data = DataSource::Synthetic { task, length, framing: Framing::Encoder };
                        let plan = ExperimentPlan {
                            model: paper2_synthetic_model(model, length),
                            training: paper2_synthetic_training(args.steps),
                            ..plan(Preset::Synthetic, data, paper2_table_runs())
                        };
                        studies.push(Study::new(study_name(task, length, model), plan));
                    }
                }
            }
            if args.tasks.is_none() {
                studies.push(Study::new(probe_name(), symmetry_probe(plan(Preset::Classroom, data, vec![]), args.steps)));
            }
            studies
        }
        // Paper 2's vision variants as ViTs on images: the digits, and unless other data are
        // named, the generated relations too.
        ExperimentKind::Paper2Vision => {
            // Each 2×2 patch's token reads the 4×4 window around it, in 8 heads: chosen on the
            // digits' validation images (docs/vision.md), where the preset's disjoint patches fell
            // below a nearest neighbour. The relations keep the preset.
            let model = ModelOverrides { patch_overlap: Some(VISION_PATCH_OVERLAP), n_head: Some(VISION_HEADS), ..Default::default() };
            let digits = ExperimentPlan { model, ..plan(Preset::VisionDigits, data.clone(), paper2_table_runs()) };
            // The ±1-point test reads the digits: they take the seeds its power calculation asks for.
            let mut studies = vec![Study { own_seeds: args.headline_seeds, ..Study::new(data.to_string(), digits) }];
            if args.data.is_none() {
                studies.push(relations_study(plan(Preset::VisionDigits, DataSource::Images(ImageSource::Relations), paper2_table_runs())));
            }
            studies
        }
        // The list tasks at one short length measure nothing (every variant solves them):
        // paper2-synthetic sweeps them over the lengths where the variants part ways.
        ExperimentKind::Paper2 => {
            let model = ModelOverrides { n_head: args.scale.paper2_heads(), ..Default::default() };
            let heads = model.n_head.unwrap_or(preset.config().n_head);
            let text = ExperimentPlan { model: model.clone(), ..plan(preset, data.clone(), paper2_runs(heads)) };
            let control = ExperimentPlan { model, ..plan(preset, data, paper2_control_runs()) };
            vec![Study::new("text", text), Study::new(PAPER2_CONTROL_STUDY, control)]
        }
    })
}
