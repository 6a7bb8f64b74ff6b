//! How many steps a turn of play launches before it reads the losses back.

use qkv_train::experiment::Experiment;

/// On a GPU, while playing, steps are launched in groups that last about this long and read
/// back once per group: short steps then keep the GPU's queue full instead of draining it for
/// every loss, and the curves still move several times a second.
const READ_BACK_EVERY_SECS: f64 = 0.1;

/// The most steps launched before one read-back.
const MAX_STEPS_PER_READ_BACK: usize = 16;

/// How many steps the next turn of play launches before reading back. On the CPU a read-back
/// is a copy and costs nothing, so every step is read (and each shows at once); on a GPU, as
/// many as fill [`READ_BACK_EVERY_SECS`] at the pace of the last turn, ending where the
/// attention maps are due.
pub(crate) fn steps_per_read_back(experiment: &Experiment, secs_per_step: Option<f64>, attention_every: usize) -> usize {
    if experiment.runs.iter().all(|run| qkv_kernels::is_flex(run.device())) {
        return 1;
    }
    gpu_steps_per_read_back(secs_per_step, experiment.step, attention_every)
}

/// [`steps_per_read_back`] on a GPU, after `step` steps (one before the pace is known).
fn gpu_steps_per_read_back(secs_per_step: Option<f64>, step: usize, attention_every: usize) -> usize {
    let by_time = secs_per_step.map_or(1, |secs| (READ_BACK_EVERY_SECS / secs.max(1e-6)) as usize);
    let by_time = by_time.clamp(1, MAX_STEPS_PER_READ_BACK);
    match attention_every {
        0 => by_time,
        every => by_time.min(every - step % every),
    }
}

#[cfg(test)]
mod tests {
    use burn::tensor::Device;

    use super::*;
    use crate::session::tests::tiny_plan;

    #[test]
    fn a_gpu_reads_back_after_a_tenth_of_a_second_of_steps_and_before_the_attention_maps() {
        // Pace unknown: one step, to learn it.
        assert_eq!(gpu_steps_per_read_back(None, 0, 25), 1);
        // 20 ms a step: five to a read-back; 1 ms: capped; slower than the target: one.
        assert_eq!(gpu_steps_per_read_back(Some(0.02), 0, 0), 5);
        assert_eq!(gpu_steps_per_read_back(Some(0.001), 0, 0), MAX_STEPS_PER_READ_BACK);
        assert_eq!(gpu_steps_per_read_back(Some(0.5), 0, 25), 1);
        // The group ends at the step whose attention maps are shown (step 25 after step 22).
        assert_eq!(gpu_steps_per_read_back(Some(0.001), 22, 25), 3);
        assert_eq!(gpu_steps_per_read_back(Some(0.001), 25, 25), MAX_STEPS_PER_READ_BACK);
        // On the CPU a read-back is a copy: every step is read, whatever the pace.
        let experiment = tiny_plan().experiment(&Device::flex()).unwrap();
        assert_eq!(steps_per_read_back(&experiment, Some(0.001), 0), 1);
    }
}
