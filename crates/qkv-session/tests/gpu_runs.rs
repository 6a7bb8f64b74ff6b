//! Runs training on a GPU: their steps launched in groups and read back once, their checkpoints
//! saved and W_Q eliminated through a copy on the CPU whose every read is awaited (the browser's
//! case, where WebGPU cannot be read synchronously). Here the GPU is wgpu (Mesa's lavapipe on a
//! machine without one).

use burn::module::Module;
use burn::tensor::{Device, DeviceKind};
use pollster::FutureExt as _;
use qkv_compute::{Backend, ComputeId};
use qkv_kernels::Product;
use qkv_model::{AttentionVariant, Model, Preset};
use qkv_session::{Command, Message, RunId, Session};
use qkv_train::checkpoint::{self, Checkpoint};
use qkv_train::cpu_copy::model_on_cpu;
use qkv_train::experiment::RunEvent;
use qkv_train::plan::{ModelOverrides, TrainingOverrides};
use qkv_train::rng::Rng;
use qkv_train::{ExperimentPlan, RunPlan};

/// wgpu registers its device once per process; the tests share it.
fn wgpu_device() -> Device {
    static GPU: std::sync::OnceLock<Device> = std::sync::OnceLock::new();
    GPU.get_or_init(|| {
        Device::wgpu_options().init().unwrap_or_else(|err| {
            panic!("no wgpu adapter ({err}); on a machine without a GPU install Mesa's lavapipe: apt-get install mesa-vulkan-drivers")
        })
    })
    .clone()
}

/// Every weight of `model`, in the module's order.
fn weights(model: &Model) -> Vec<f32> {
    let read = pollster::block_on(qkv_train::cpu_copy::read_weights(model)).expect("weights read back");
    read.into_iter().flat_map(|(_, data)| data.iter::<f32>().collect::<Vec<_>>()).collect()
}

fn plan(preset: Preset, variant: AttentionVariant) -> ExperimentPlan {
    ExperimentPlan {
        preset,
        model: ModelOverrides { n_embd: Some(32), block_size: Some(16), mlp_skip: Some(false), ..Default::default() },
        training: TrainingOverrides { steps: Some(20), batch_size: Some(4), ..Default::default() },
        runs: vec![RunPlan::new(variant)],
        ..ExperimentPlan::default()
    }
}

fn handle(session: &mut Session, command: Command) -> Vec<Message> {
    pollster::block_on(session.handle(command))
}

#[test]
fn a_checkpoint_saved_on_wgpu_continues_on_the_cpu() {
    let gpu = wgpu_device();
    let mut session = Session::new(gpu.clone(), ComputeId::first(Backend::Wgpu));
    handle(&mut session, Command::Load(plan(Preset::Classroom, AttentionVariant::SharedKeyValue)));
    (0..3).for_each(|_| drop(handle(&mut session, Command::Step)));

    let trained = &session.experiment().unwrap().runs[0];
    let copy = pollster::block_on(model_on_cpu(trained.model())).unwrap();
    assert_eq!(copy.devices(), vec![Device::flex()]);
    assert_eq!(weights(&copy), weights(&trained.model().valid()), "the CPU copy holds the GPU's weights");

    let exported = handle(&mut session, Command::Export { run: RunId(0) });
    let Some(Message::Exported { checkpoint: bytes, .. }) = exported.first() else { panic!("{exported:?}") };
    let dataset = session.experiment().unwrap().dataset();
    let mut on_cpu = Checkpoint::from_bytes("run.qkv", bytes).unwrap().into_run(dataset, &Device::flex()).unwrap();
    let mut on_gpu = Checkpoint::from_bytes("run.qkv", bytes).unwrap().into_run(dataset, &gpu).unwrap();
    assert_eq!(on_cpu.step, 3);
    // The next steps on the CPU follow the GPU's: the weights and the AdamW moments came across.
    let mut rng = Rng::new(5);
    for _ in 0..2 {
        let batch = dataset.train_batch(&mut rng, 4, 16, 0);
        let a = on_gpu.train_step(std::slice::from_ref(&batch)).block_on().unwrap().train_loss;
        let b = on_cpu.train_step(std::slice::from_ref(&batch)).block_on().unwrap().train_loss;
        assert!((a - b).abs() < 1e-3, "after loading, GPU loss {a} and CPU loss {b} differ");
    }
    let again = checkpoint::to_bytes(&on_cpu, dataset, "again").block_on().unwrap();
    assert_eq!(Checkpoint::from_bytes("again.qkv", &again).unwrap().header.step, 5);
}

/// A plan too wide for a GPU's launch grid (a batch over 65,535: tiled attention gives the batch
/// one axis) is refused as it loads, with what to lower, before a model is allocated; the session
/// then loads and trains the next plan as if nothing had happened (the app keeps running).
#[test]
fn a_batch_too_wide_for_the_grid_is_refused_and_the_session_goes_on() {
    let mut session = Session::new(wgpu_device(), ComputeId::first(Backend::Wgpu));
    let mut wide = plan(Preset::Classroom, AttentionVariant::Standard);
    (wide.training.batch_size, wide.model.block_size) = (Some(70_000), Some(2));
    let loaded = handle(&mut session, Command::Load(wide));
    let refusal = loaded.iter().find_map(|message| match message {
        Message::Failed(problem) => Some(problem.message.as_str()),
        _ => None,
    });
    assert!(refusal.is_some_and(|why| why.ends_with("more than a GPU takes (65535): lower the batch")), "{loaded:?}");
    handle(&mut session, Command::Load(plan(Preset::Classroom, AttentionVariant::Standard)));
    let stepped = handle(&mut session, Command::Step);
    assert!(!stepped.iter().any(|message| matches!(message, Message::Failed(_))), "{stepped:?}");
    assert_eq!(session.experiment().expect("the next plan loaded").runs[0].step, 1);
}

#[test]
fn w_q_is_eliminated_from_a_run_on_wgpu_and_both_train_on() {
    let mut session = Session::new(wgpu_device(), ComputeId::first(Backend::Wgpu));
    handle(&mut session, Command::Load(plan(Preset::Theory, AttentionVariant::Standard)));
    (0..3).for_each(|_| drop(handle(&mut session, Command::Step)));
    let messages = handle(&mut session, Command::EliminateQuery { run: RunId(0), into: RunId(1) });
    let Some(Message::Converted { report, info, .. }) = messages.first() else { panic!("{messages:?}") };
    assert!(report.max_abs_logit_diff < 1e-4, "{report:?}");
    assert!(info.params.total_params < report.params_before);
    let next = handle(&mut session, Command::Step);
    let stepped = next.iter().filter(|m| matches!(m, Message::Run(RunEvent::Stepped { .. }))).count();
    assert_eq!(stepped, 2, "{next:?}");
}

#[test]
fn steps_read_back_in_groups_train_as_steps_read_one_by_one() {
    let gpu = wgpu_device();
    let experiment = || plan(Preset::Classroom, AttentionVariant::Standard).experiment(&gpu).unwrap();
    let (mut grouped, mut stepped) = (experiment(), experiment());
    let mut group_sizes = Vec::new();
    while !grouped.is_done() {
        let events = pollster::block_on(grouped.steps(3));
        assert!(events.iter().all(|e| matches!(e, RunEvent::Stepped { .. })), "{events:?}");
        group_sizes.push(events.len());
    }
    (0..20).for_each(|_| drop(stepped.step().block_on()));
    assert_eq!(group_sizes, [3, 3, 3, 3, 3, 3, 2], "groups of three, the last ending at the run's last step");
    let losses = |e: &qkv_train::Experiment| e.runs[0].metrics.steps.iter().map(|s| s.train_loss).collect::<Vec<_>>();
    let (a, b) = (losses(&grouped), losses(&stepped));
    assert_eq!(a.len(), 20);
    for (a, b) in a.iter().zip(&b) {
        assert!((a - b).abs() < 1e-5, "grouped {a}, step by step {b}");
    }
}

/// Data parallel: a run whose batches are split across two devices (here two wgpu devices on
/// the same adapter, each with its own queue and memory) takes the steps it takes on one.
#[test]
fn a_run_spread_over_two_devices_trains_as_on_one() {
    let losses = |others: &[Device]| {
        let mut experiment = plan(Preset::Classroom, AttentionVariant::Standard).experiment(&wgpu_device()).unwrap();
        experiment.spread_over(others);
        (0..20).for_each(|_| drop(experiment.step().block_on()));
        experiment.runs[0].metrics.steps.iter().map(|s| s.train_loss).collect::<Vec<_>>()
    };
    let second = Device::wgpu(DeviceKind::Cpu);
    assert_ne!(second, wgpu_device(), "two devices");
    let (one, two) = (losses(&[]), losses(&[second]));
    assert_eq!((one.len(), two.len()), (20, 20));
    for (a, b) in one.iter().zip(&two) {
        assert!((a - b).abs() < 1e-4, "one device {one:?}, two {two:?}");
    }
    assert!(one[19] < one[0] - 0.2, "the run learns: {one:?}");
}

/// The CubeCL kernels (attention, layer norm, GELU, cross-entropy, AdamW) train as flex's fused
/// kernels do, which match Burn's composed ops to float precision (qkv-kernels' tests): 20 steps
/// of the same runs on wgpu and on the CPU, for the standard model, one whose heads share keys
/// and values (GQA), one with the learned attention bias, and two that share a projection (K = V
/// with GQA, Q = K = V: one packed product on wgpu, their gradients added in place), with Burn's
/// matrix product and with ours.
#[test]
fn runs_on_wgpu_train_as_on_the_cpu() {
    let losses = |device: &Device, variant: AttentionVariant, kv_heads: Option<usize>| {
        let mut plan = plan(Preset::Classroom, variant);
        plan.runs[0].kv_heads = kv_heads;
        let mut experiment = plan.experiment(device).unwrap();
        (0..20).for_each(|_| drop(experiment.step().block_on()));
        experiment.runs[0].metrics.steps.iter().map(|s| s.train_loss).collect::<Vec<_>>()
    };
    // With either matrix product (which one wgpu gets is timed; here each is set in turn).
    let cases = [
        (AttentionVariant::Standard, None, Product::Burn),
        (AttentionVariant::Standard, Some(2), Product::Burn),
        (AttentionVariant::SharedQueryKeyAsym, None, Product::Burn),
        (AttentionVariant::SharedKeyValue, Some(2), Product::Burn),
        (AttentionVariant::SharedAll, None, Product::Burn),
        (AttentionVariant::Standard, None, Product::Blocked),
    ];
    for (variant, kv_heads, product) in cases {
        qkv_kernels::use_product(&wgpu_device(), product);
        let (gpu, cpu) = (losses(&wgpu_device(), variant, kv_heads), losses(&Device::flex(), variant, kv_heads));
        assert_eq!((gpu.len(), cpu.len()), (20, 20));
        for (a, b) in gpu.iter().zip(&cpu) {
            assert!((a - b).abs() < 1e-4 * b.abs(), "{variant:?}, kv heads {kv_heads:?}, {product}: wgpu {gpu:?}, cpu {cpu:?}");
        }
        assert!(gpu[19] < gpu[0] - 0.2, "the run learns: {gpu:?}");
    }
}
