//! `qkv experiment paper1|paper2|paper2-synthetic|paper2-vision`: the two papers' comparisons at a chosen scale, several seeds,
//! every run of a seed on identical batches, with a report that records how it was made and
//! says where the result differs from the paper.

mod budget;
mod catalogue;
mod convergence;
mod findings;
mod learning;
mod output;
mod seeds;
pub(crate) mod stats;
mod sweep;
mod synthetic_paper;
mod training;
mod vision;

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use serde::Serialize;

use qkv_train::{DataSource, SyntheticTask, TokenizerKind};

use crate::Failure;
use crate::compute::{Backend, Compute, SpreadArgs};
use crate::interrupt::Interrupts;
use catalogue::{Study, studies};
use findings::{paper1_report, paper2_against_paper, paper2_report};
use output::{loss_plots, report_markdown, results_csv};
use seeds::Outcome;
use training::Trainer;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExperimentKind {
    /// Karbevski & Mijoski: W_Q = I, with and without the parameters moved to the MLP.
    Paper1,
    /// Kayyam et al.: shared projections and KV heads, on text.
    Paper2,
    /// Paper 2's synthetic list tasks swept over the list length, where the variants part ways.
    Paper2Synthetic,
    /// Paper 2's vision domain: ViTs of every variant on images (the embedded 8×8 digits unless
    /// --data says otherwise).
    Paper2Vision,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scale {
    /// The classroom model for 300 steps: minutes on a laptop, for trying the command.
    Tiny,
    /// nanoGPT's CPU Shakespeare recipe (4×4×128, 2000 steps).
    Laptop,
    /// GPT-2 small on your own data (`--data PATH --tokenizer bpe:N`, or nanoGPT's `--data train.bin`) on a wgpu GPU; resumable.
    Gpu,
}

#[derive(Args, Debug)]
pub struct ExperimentArgs {
    pub paper: ExperimentKind,
    #[arg(long, value_enum, default_value = "laptop")]
    pub scale: Scale,
    /// Seeds (different initialisation and batch order) [default: 3, 1 at gpu scale].
    #[arg(long)]
    pub seeds: Option<usize>,
    /// Optimiser steps per run [default: the scale's].
    #[arg(long)]
    pub steps: Option<usize>,
    /// Text data or nanoGPT token files (train.bin) [default: shakespeare; required at gpu scale]; images for
    /// paper2-vision [default: digits].
    #[arg(long)]
    pub data: Option<DataSource>,
    /// char, bpe:N or a Hugging Face tokenizer.json (see `qkv train --help`).
    #[arg(long, default_value = "char")]
    pub tokenizer: TokenizerKind,
    /// [default: flex, wgpu at gpu scale]
    #[arg(long)]
    pub backend: Option<Backend>,
    #[command(flatten)]
    pub spread: SpreadArgs,
    /// Output folder [default: runs/PAPER-SCALE].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Seeds of the study an equivalence test decides, e.g. the number its report's power
    /// calculation asks for: paper1's headline (standard against wq-identity) [default: twice
    /// --seeds], paper2-vision's digits [default: --seeds].
    #[arg(long)]
    pub headline_seeds: Option<usize>,
    /// paper2-synthetic: list lengths to sweep, e.g. 16,64,128 [default: the scale's].
    #[arg(long, value_delimiter = ',')]
    pub lengths: Option<Vec<usize>>,
    /// paper2-synthetic: tasks to sweep, e.g. reverse,swap [default: the scale's].
    #[arg(long, value_delimiter = ',')]
    pub tasks: Option<Vec<SyntheticTask>>,
    /// Seeds trained at once, each with a share of the cores. On a CPU with fewer cores than a
    /// seed has runs (a laptop), 2 or more is a little faster and takes about a third of the
    /// memory, with the same results; where there are more cores than runs, 1 spreads each run
    /// over several.
    #[arg(long, default_value_t = 1)]
    pub jobs: usize,
}

impl ExperimentKind {
    /// The name on the command line (clap's, from the variant's) and in the report.
    fn name(self) -> String {
        self.to_possible_value().map(|value| value.get_name().to_string()).unwrap_or_default()
    }
}

/// What an invocation settles before training: its arguments checked, defaults filled in.
struct Settings {
    seeds: usize,
    compute: Compute,
    scale: String,
    out: PathBuf,
}

impl Settings {
    fn of(args: &ExperimentArgs) -> Result<Self, Failure> {
        let seeds = args.seeds.unwrap_or(if args.scale == Scale::Gpu { 1 } else { 3 });
        if seeds == 0 {
            return Err(crate::usage("--seeds must be at least 1"));
        }
        if args.jobs == 0 {
            return Err(crate::usage("--jobs must be at least 1"));
        }
        if args.headline_seeds == Some(0) {
            return Err(crate::usage("--headline-seeds must be at least 1"));
        }
        if !matches!(args.paper, ExperimentKind::Paper1 | ExperimentKind::Paper2Vision) && args.headline_seeds.is_some() {
            return Err(crate::usage(
                "--headline-seeds sets paper 1's headline study or paper2-vision's digits: use it with `qkv experiment paper1` or `paper2-vision`",
            ));
        }
        if args.paper != ExperimentKind::Paper2Synthetic && (args.lengths.is_some() || args.tasks.is_some()) {
            return Err(crate::usage(
                "--lengths and --tasks choose what paper2-synthetic sweeps: use them with `qkv experiment paper2-synthetic`",
            ));
        }
        let backend = args.backend.unwrap_or(if args.scale == Scale::Gpu { Backend::Wgpu } else { Backend::Flex });
        let compute = args.spread.compute(backend)?;
        let scale = format!("{:?}", args.scale).to_lowercase();
        let out = args.out.clone().unwrap_or_else(|| PathBuf::from(format!("runs/{}-{scale}", args.paper.name())));
        Ok(Self { seeds, compute, scale, out })
    }
}

/// What was trained, for the report.
struct Trained<'a> {
    studies: &'a [Study],
    outcomes: &'a [Outcome],
    /// A line per seed: when, where and by which command it was trained.
    provenance: &'a str,
    /// Seconds this invocation ran, and seconds of training by the runs' own clocks.
    wall_secs: f64,
    training_secs: f64,
}

/// `qkv experiment`: every study's seeds trained (or read back from an earlier invocation), then
/// results.csv, the loss plots and report.md written.
pub fn run(args: &ExperimentArgs, invocation: &str) -> Result<(), Failure> {
    let started = std::time::Instant::now();
    let settings = Settings::of(args)?;
    let studies = studies(args)?;
    let out = &settings.out;
    let interrupts = Interrupts::catch()?;
    let trainer = Trainer { settings: &settings, invocation, jobs: args.jobs, interrupts: &interrupts };
    let mut outcomes = Vec::new();
    let mut provenance = String::new();
    for study in &studies {
        let (study_outcomes, study_provenance) = trainer.seeds(study, study.seeds(settings.seeds))?;
        outcomes.extend(study_outcomes);
        provenance += &study_provenance;
    }
    let trained = Trained {
        studies: &studies,
        outcomes: &outcomes,
        provenance: &provenance,
        wall_secs: started.elapsed().as_secs_f64(),
        // The runs' own clocks, which survive resumes (this invocation may have started midway).
        training_secs: outcomes.iter().map(|o| o.summary.wall_secs).sum(),
    };
    let write = |name: &str, text: &str| {
        std::fs::write(out.join(name), text).map_err(|e| format!("cannot write {}: {e}", out.join(name).display()))
    };
    write("results.csv", &results_csv(&outcomes))?;
    let plotted: Vec<&Study> = match args.paper {
        ExperimentKind::Paper2Synthetic => sweep::plotted(&studies),
        _ => studies.iter().collect(),
    };
    let plots = loss_plots(&plotted, &outcomes, out)?;
    let body = match args.paper {
        ExperimentKind::Paper1 => {
            budget::budget_plot(&outcomes, &studies, out)?;
            paper1_report(&outcomes, &studies) + &budget::budget_section(&outcomes, &studies)
        }
        ExperimentKind::Paper2 => paper2_report(&outcomes, &studies) + &paper2_against_paper(&outcomes),
        ExperimentKind::Paper2Synthetic => {
            synthetic_paper::against_paper(&outcomes, &studies)
                + &sweep::sweep_report(&outcomes, &studies)
                + &sweep::accuracy_plots(&outcomes, &studies, out)?
        }
        ExperimentKind::Paper2Vision => vision::vision_report(&outcomes, &studies) + &vision::vision_against_paper(&outcomes, &studies),
    } + &convergence::convergence_section(&outcomes);
    write("report.md", &report_markdown(args, invocation, &settings, &trained, &body, &plots))?;
    println!("{body}");
    println!("wrote {}/{{report.md, results.csv, loss-*.svg, checkpoints/}}", out.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use qkv_model::{AttentionVariant, ParamReport, Preset};
    use qkv_train::plan::RunPlan;

    use super::catalogue::{STANDARD_SCALE_RUN, WIDE_STANDARD_SCALE_RUN, paper1_headline_runs, paper1_runs, paper1_scale_runs};
    use super::output::utc_date;
    use super::seeds::SeedResult;
    use super::training::in_parallel;
    use super::*;

    #[test]
    fn the_matched_mlp_widths_balance_the_parameter_counts() {
        let headline = paper1_headline_runs(Preset::Gpt2Small);
        let runs = paper1_runs(Preset::Gpt2Small);
        let config = Preset::Gpt2Small.config();
        let params = |run: &RunPlan| {
            let mut c = config.clone().with_variant(run.variant);
            c.mlp_hidden = run.mlp_hidden.unwrap_or(c.mlp_hidden);
            ParamReport::new(&c).total_params
        };
        // The headline: standard, and W_Q = I at its halved scale and at standard's 1/√d_k
        // (GPT-2 small: d_k 64), alone and with the reallocated MLP.
        let names: Vec<&str> = headline.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["standard", "wq-identity", STANDARD_SCALE_RUN, WIDE_STANDARD_SCALE_RUN]);
        assert_eq!((headline[2].scale, headline[3].scale), (Some(1.0 / 8.0), Some(1.0 / 8.0)));
        // GPT-2 small: the reallocated MLP is 3072 + 768/2 wide, as in paper 1.
        assert_eq!((runs[0].mlp_hidden, headline[3].mlp_hidden), (Some(3456), Some(3456)));
        assert_eq!(params(&runs[0]), params(&headline[0]));
        assert_eq!(params(&runs[1]), params(&headline[1]));
        // The ablations: the identity moved to the key or the value.
        assert_eq!((runs[2].variant, runs[3].variant), (AttentionVariant::KeyIdentity, AttentionVariant::ValueIdentity));
        // Each of standard and wq-identity without decay and with the other's.
        let sweep: Vec<(&str, Option<f64>)> = runs[4..].iter().map(|r| (r.name.as_str(), r.weight_decay)).collect();
        assert_eq!(
            sweep,
            [
                ("standard wd=0", Some(0.0)),
                ("standard wd=0.03125", Some(0.03125)),
                ("wq-identity wd=0", Some(0.0)),
                ("wq-identity wd=0.1", Some(0.1))
            ]
        );
        // The identities of W_K and W_V each at the other scale (GPT-2 small: d_k 64).
        let other_scales: Vec<_> = paper1_scale_runs(Preset::Gpt2Small).iter().map(|r| (r.variant, r.scale)).collect();
        assert_eq!(other_scales, [(AttentionVariant::KeyIdentity, Some(1.0 / 8.0)), (AttentionVariant::ValueIdentity, Some(1.0 / 16.0))]);
    }

    #[test]
    fn the_headline_trains_the_seeds_it_is_given_and_the_other_studies_theirs() {
        let paper1 = studies(&ExperimentArgs { headline_seeds: Some(17), ..laptop_args(ExperimentKind::Paper1) }).unwrap();
        let seeds: Vec<(&str, usize)> = paper1.iter().map(|s| (s.name.as_str(), s.seeds(3))).take(4).collect();
        assert_eq!(seeds, [("headline", 17), ("text", 3), ("scale", 3), ("smaller", 3)]);
        assert_eq!(studies(&laptop_args(ExperimentKind::Paper1)).unwrap()[0].seeds(3), 6, "twice --seeds by default");
        let vision = studies(&ExperimentArgs { headline_seeds: Some(11), ..laptop_args(ExperimentKind::Paper2Vision) }).unwrap();
        assert_eq!((vision[0].seeds(10), vision[1].seeds(10)), (11, 10), "the digits' seeds, the relations' --seeds");
        for (paper, seeds, expected) in
            [(ExperimentKind::Paper2, 4, "use it with `qkv experiment paper1`"), (ExperimentKind::Paper1, 0, "at least 1")]
        {
            let args = ExperimentArgs { headline_seeds: Some(seeds), ..laptop_args(paper) };
            let error = Settings::of(&args).err().unwrap().to_string();
            assert!(error.contains(expected), "{error}");
        }
    }

    #[test]
    fn paper1_s_smaller_original_is_the_width_closest_to_wq_identity_s_count() {
        let paper1 = studies(&laptop_args(ExperimentKind::Paper1)).unwrap();
        let smaller = paper1.iter().find(|s| s.name == "smaller").unwrap();
        let specs = smaller.plan.specs(&smaller.plan.dataset().unwrap()).unwrap();
        let (model, standard) = (&specs[0].model, Preset::ShakespeareCharCpu.config());
        // 4×4×128 shrinks to width 124 (d_k 31), the MLP kept at 4×.
        assert_eq!((model.n_layer, model.n_head, model.n_embd, model.mlp_hidden), (4, 4, 124, 496));
        let identity = ParamReport::new(&standard.clone().with_variant(AttentionVariant::QueryIdentity)).total_params;
        let count = |n_embd: usize| {
            let mut config = standard.clone();
            (config.n_embd, config.mlp_hidden) = (n_embd, 4 * n_embd);
            ParamReport::new(&config).total_params.abs_diff(identity)
        };
        assert!(count(124) < count(120) && count(124) < count(128), "the closest width that 4 heads divide");
        assert_eq!(smaller.plan.training, paper1[0].plan.training, "the headline's batches, seed by seed");
    }

    /// `qkv experiment PAPER` at laptop scale with every default.
    fn laptop_args(paper: ExperimentKind) -> ExperimentArgs {
        ExperimentArgs {
            paper,
            scale: Scale::Laptop,
            seeds: None,
            steps: None,
            data: None,
            tokenizer: TokenizerKind::Char,
            backend: None,
            spread: SpreadArgs::default(),
            out: None,
            lengths: None,
            tasks: None,
            headline_seeds: None,
            jobs: 1,
        }
    }

    #[test]
    fn paper2_at_laptop_scale_trains_eight_heads_on_text_with_the_papers_sharing_ratios() {
        let studies = studies(&laptop_args(ExperimentKind::Paper2)).unwrap();
        assert_eq!(studies.len(), 2, "the text study and its control; the list tasks are paper2-synthetic's");
        let control = &studies[1];
        assert_eq!(
            (control.name.as_str(), &control.plan.model, &control.plan.data),
            ("control", &studies[0].plan.model, &DataSource::Shakespeare)
        );
        assert_eq!(
            control.plan.runs.iter().map(|r| (r.name.as_str(), r.variant)).collect::<Vec<_>>(),
            [("Q-K-V+rel", AttentionVariant::StandardRel)]
        );
        let text = &studies[0];
        assert_eq!((text.name.as_str(), &text.plan.data), ("text", &DataSource::Shakespeare));
        assert_eq!(text.plan.model.n_head, Some(8));
        let names: Vec<&str> = text.plan.runs.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(
            names,
            ["Q-K-V", "Q=K-V", "(Q=K-V)+", "(Q=K-V)+rel", "Q-K=V", "Q=K=V", "GQA 2/8", "MQA 1/8", "Q-K=V + GQA 2/8", "Q-K=V + MQA 1/8"]
        );
    }

    #[test]
    fn paper2_vision_trains_the_paper_s_vision_variants_as_vits_on_the_digits() {
        let studies = studies(&laptop_args(ExperimentKind::Paper2Vision)).unwrap();
        assert_eq!(studies.len(), 2, "the digits, then the relations");
        let relations = &studies[1];
        assert_eq!(
            (relations.name.as_str(), relations.plan.data.to_string(), relations.plan.training.steps),
            ("relations", "relations".into(), Some(6000))
        );
        assert_eq!(relations.plan.runs, studies[0].plan.runs);
        let digits = &studies[0];
        assert_eq!((digits.name.as_str(), digits.plan.preset), ("digits", Preset::VisionDigits));
        let names: Vec<&str> = digits.plan.runs.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["Q-K-V", "Q=K-V", "(Q=K-V)+", "(Q=K-V)+rel", "Q-K=V", "Q=K=V", "(Q=K=V)+"]);
        // Each of paper 2's six has its MNIST figure beside it; ours has none.
        let quoted: Vec<&str> = names.iter().copied().filter(|name| qkv_train::papers::paper2_mnist_accuracy(name).is_some()).collect();
        assert_eq!(quoted.len(), 6);
        let specs = digits.plan.specs(&digits.plan.dataset().unwrap()).unwrap();
        assert!(specs.iter().all(|spec| spec.model.is_vision() && spec.training.steps == 2000));
        // The digits' ViT reads overlapping windows; the relations keep disjoint patches.
        let shape = |study: &Study| {
            let model = &study.plan.specs(&study.plan.dataset().unwrap()).unwrap()[0].model;
            (model.image.unwrap().overlap, model.n_head)
        };
        assert_eq!((shape(digits), shape(relations)), ((1, 8), (0, 4)));
    }

    #[test]
    fn the_default_sweep_is_the_half_of_the_authors_sweep_then_the_setting_where_a_symmetric_score_fails() {
        let sweep = studies(&laptop_args(ExperimentKind::Paper2Synthetic)).unwrap();
        // Five tasks × two lengths × four models, then the probe.
        assert_eq!(sweep.len(), 5 * 2 * 4 + 1);
        let names: Vec<&str> = sweep[..8].iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "reverse-L16-2x2x32",
                "reverse-L16-2x4x32",
                "reverse-L16-2x2x64",
                "reverse-L16-2x4x64",
                "reverse-L64-2x2x32",
                "reverse-L64-2x4x32",
                "reverse-L64-2x2x64",
                "reverse-L64-2x4x64"
            ]
        );
        let settings: Vec<_> = sweep.iter().filter_map(sweep::grid_setting).collect();
        assert!(qkv_train::papers::PAPER2_SYNTHETIC_HALF_SWEEP.is(&settings), "the settings the authors' half figures average");
        // The authors' encoders and recipe: 158 steps of 128 lists, Adam without decay, clip 5.
        let plan = &sweep[7].plan;
        assert_eq!(plan.data, DataSource::Synthetic { task: SyntheticTask::Reverse, length: 64, framing: qkv_train::Framing::Encoder });
        let specs = plan.specs(&plan.dataset().unwrap()).unwrap();
        let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["Q-K-V", "Q=K-V", "(Q=K-V)+", "(Q=K-V)+rel", "Q-K=V", "Q=K=V", "(Q=K=V)+"]);
        for spec in &specs {
            let (m, t) = (&spec.model, &spec.training);
            assert!(m.attention.bidirectional && !m.tie_embeddings);
            assert_eq!((m.n_layer, m.n_head, m.n_embd, m.block_size, m.mlp_hidden), (2, 4, 64, 64, 256));
            assert_eq!((t.steps, t.batch_size, t.lr, t.min_lr, t.warmup_steps), (158, 128, 1e-3, 0.0, 7));
            assert_eq!((t.beta2, t.weight_decay, t.grad_clip), (0.999, 0.0, Some(5.0)));
        }
        let probe = &sweep[40].plan;
        assert_eq!(probe.data, DataSource::Synthetic { task: SyntheticTask::Rotate, length: 4, framing: qkv_train::Framing::Encoder });
        assert_eq!((probe.preset, probe.model.n_layer, probe.model.n_head), (Preset::Classroom, Some(1), Some(1)));
        assert_eq!(probe.runs, sweep[0].plan.runs, "the same seven variants");
        let specs = probe.specs(&probe.dataset().unwrap()).unwrap();
        assert!(specs.iter().all(|spec| spec.model.attention.bidirectional && spec.training.steps == 300));
        // Loss curves of the largest model at each task and length, and of the probe.
        let plotted: Vec<&str> = sweep::plotted(&sweep).iter().map(|s| s.name.as_str()).collect();
        assert_eq!(plotted.len(), 5 * 2 + 1);
        assert_eq!(plotted[..2], ["reverse-L16-2x4x64", "reverse-L64-2x4x64"]);
    }

    #[test]
    fn the_synthetic_sweep_takes_the_lengths_and_tasks_it_is_given() {
        let args = ExperimentArgs {
            lengths: Some(vec![16, 128]),
            tasks: Some(vec![SyntheticTask::Swap]),
            steps: Some(40),
            ..laptop_args(ExperimentKind::Paper2Synthetic)
        };
        let sweep = studies(&args).unwrap();
        assert_eq!(sweep.len(), 2 * 4, "no probe when the tasks are chosen");
        assert_eq!(sweep[7].name, "swap-L128-2x4x64");
        assert_eq!(sweep[7].plan.model.block_size, Some(128));
        assert_eq!((sweep[0].plan.training.steps, sweep[0].plan.training.warmup_steps), (Some(40), Some(2)), "5% warm-up");

        let too_short = ExperimentArgs { lengths: Some(vec![1]), ..args };
        let error = studies(&too_short).err().unwrap().to_string();
        assert!(error.contains("lengths of 2 or more"), "{error}");
        let paper1 =
            ExperimentArgs { paper: ExperimentKind::Paper1, scale: Scale::Tiny, lengths: Some(vec![16]), tasks: None, ..too_short };
        let error = run(&paper1, "qkv experiment paper1 --lengths 16").unwrap_err().to_string();
        assert!(error.contains("paper2-synthetic"), "{error}");
    }

    #[test]
    fn parallel_jobs_do_every_index_once_in_order() {
        for jobs in [1, 2, 5] {
            let calls = std::sync::atomic::AtomicUsize::new(0);
            let squares = in_parallel(4, jobs, |i| {
                calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                i * i
            });
            assert_eq!(squares, vec![0, 1, 4, 9], "jobs {jobs}");
            assert_eq!(calls.into_inner(), 4, "jobs {jobs}");
        }
    }

    #[test]
    fn jobs_that_compute_on_pools_of_their_own_still_run_jobs_at_a_time() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let (running, most) = (AtomicUsize::new(0), AtomicUsize::new(0));
        in_parallel(6, 2, |_| {
            // As a seed does: its work on a rayon pool of its own.
            let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
            pool.install(|| {
                most.fetch_max(running.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
                std::thread::sleep(std::time::Duration::from_millis(30));
                running.fetch_sub(1, Ordering::SeqCst);
            });
        });
        let most = most.into_inner();
        assert!((1..=2).contains(&most), "{most} jobs ran at once, not at most 2");
    }

    #[test]
    fn a_finished_seed_is_reported_again_without_its_checkpoints() {
        let out = std::env::temp_dir().join(format!("qkv-experiment-seeds-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&out);
        let args = |steps: usize| ExperimentArgs {
            paper: ExperimentKind::Paper1,
            scale: Scale::Tiny,
            seeds: Some(1),
            steps: Some(steps),
            data: None,
            tokenizer: TokenizerKind::Char,
            backend: Some(Backend::Flex),
            spread: SpreadArgs::default(),
            out: Some(out.clone()),
            lengths: None,
            tasks: None,
            headline_seeds: None,
            jobs: 1,
        };
        run(&args(2), "qkv experiment paper1 --scale tiny --seeds 1 --steps 2").unwrap();
        let results = std::fs::read_to_string(out.join("results.csv")).unwrap();
        // The headline's 4 runs at twice the seed, the 8 ablations, the 2 runs at the other scales,
        // the smaller original and the headline's two runs at three other lengths.
        assert_eq!(results.lines().count(), 1 + 4 * 2 + 8 + 2 + 1 + 3 * 2, "{results}");
        let seed_file = SeedResult::path(&out, "text", qkv_train::TrainingConfig::for_preset(Preset::Classroom).seed);
        assert!(seed_file.exists());

        // The checkpoints are gone (cleaned up, or another machine): the report comes back the same.
        std::fs::remove_dir_all(out.join("checkpoints")).unwrap();
        std::fs::remove_file(out.join("results.csv")).unwrap();
        run(&args(2), "again").unwrap();
        assert_eq!(std::fs::read_to_string(out.join("results.csv")).unwrap(), results);
        assert!(!out.join("checkpoints").exists(), "the finished seed trained again");
        assert!(std::fs::read_to_string(out.join("report.md")).unwrap().contains("wq-identity"));

        // Another plan is not mixed with it, nor a seed whose weights were drawn another way (a
        // file from before the scheme was recorded), and a damaged file is named, not trusted.
        let error = run(&args(3), "other steps").unwrap_err().to_string();
        assert!(error.contains("another plan") && error.contains("seed-"), "{error}");
        let saved = std::fs::read_to_string(&seed_file).unwrap();
        let mut older: serde_json::Value = serde_json::from_str(&saved).unwrap();
        older.as_object_mut().unwrap().remove("initial_weights");
        std::fs::write(&seed_file, older.to_string()).unwrap();
        let error = run(&args(2), "older").unwrap_err().to_string();
        assert!(error.contains("drawn another way (scheme 1, now 2)"), "{error}");
        std::fs::write(&seed_file, "{ not json").unwrap();
        let error = run(&args(2), "damaged").unwrap_err().to_string();
        assert!(error.contains("delete it to train that seed again"), "{error}");
        std::fs::remove_dir_all(&out).unwrap();
    }

    #[test]
    fn dates_are_civil() {
        let date = utc_date();
        let b = date.as_bytes();
        assert!(date.starts_with("20") && date.ends_with(" UTC") && date.len() == 20, "{date}");
        assert!(b[4] == b'-' && b[7] == b'-' && b[10] == b' ' && b[13] == b':', "{date}");
    }
}
