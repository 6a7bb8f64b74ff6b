//! Work fanned out to threads of its own, each with a compute pool of its share of the cores:
//! the shards of a batch (`Run`) and the runs of an experiment step (`Experiment`) both go out
//! this way, and generation runs on one such thread (`generate`).
//!
//! Why threads and not one rayon `par_iter`: every task runs a whole forward and backward pass
//! whose kernels spread over the pool they are installed in. A task's pool must hold its share
//! of the cores, not the whole machine, or the tasks' kernels would queue behind one another.
//!
//! The engine is async (a step, an evaluation, a generation, a checkpoint await their reads from
//! the device, as the browser requires); the command line and the tests wait on it themselves.
//! [`block_on`] here is the one place the library itself blocks, for the work it sends to threads
//! of its own, where waiting pays (docs/performance.md, "Threads and cores"): on flex every read
//! is ready at once, so a thread that waits loses nothing.

use std::cell::RefCell;

use core_affinity::CoreId;

thread_local! {
    /// The calling thread's pools, of every size (and core) it asked for, kept for its next
    /// fan-outs (building one spawns threads): a step's shards and a generation, say, alternate
    /// sizes.
    static POOLS: RefCell<Vec<Pool>> = const { RefCell::new(Vec::new()) };
}

/// A kept pool, and the core its thread keeps to, if it keeps to one.
struct Pool {
    threads: rayon::ThreadPool,
    core: Option<CoreId>,
}

impl Pool {
    /// A pool of `threads` threads, kept to `core` (best effort: where the system cannot pin a
    /// thread, it runs anywhere); None where no thread can be started.
    fn build(threads: usize, core: Option<CoreId>) -> Option<Self> {
        let pin = move |_| {
            if let Some(core) = core {
                core_affinity::set_for_current(core);
            }
        };
        rayon::ThreadPoolBuilder::new().num_threads(threads).start_handler(pin).build().ok().map(|threads| Self { threads, core })
    }

    fn serves(&self, threads: usize, core: Option<CoreId>) -> bool {
        self.threads.current_num_threads() == threads && self.core == core
    }
}

/// Runs `work(item)` for every item, each on a thread of its own inside a rayon pool of
/// `threads_each` threads (where a pool cannot be built, on the calling thread); the results come
/// back in the items' order.
pub(crate) fn on_threads<T: Send, R: Send>(items: Vec<T>, threads_each: usize, work: impl Fn(T) -> R + Sync) -> Vec<R> {
    let tasks = items.len();
    // Taken out for the call, not borrowed: a caller that is itself a rayon worker may run other
    // work of its pool while it waits, and that work may fan out from this thread too (it then
    // builds pools of its own).
    let mut kept = POOLS.take();
    // Task i takes the first kept pool of its size and core, the same from call to call; a pool
    // that cannot be built (no threads left, or none at all in the browser) leaves its task to the
    // calling thread.
    let pools: Vec<Option<Pool>> = cores_of_each_task(tasks, threads_each)
        .into_iter()
        .map(|core| match kept.iter().position(|pool| pool.serves(threads_each, core)) {
            Some(index) => Some(kept.remove(index)),
            None => Pool::build(threads_each, core),
        })
        .collect();
    let mut results: Vec<Option<R>> = (0..tasks).map(|_| None).collect();
    let threads: Vec<Option<&rayon::ThreadPool>> = pools.iter().map(|pool| pool.as_ref().map(|pool| &pool.threads)).collect();
    hand_out(&threads, items.into_iter().zip(results.iter_mut()).collect(), &work);
    POOLS.set(pools.into_iter().flatten().chain(kept).collect());
    results.into_iter().map(|result| result.expect("every task ran")).collect()
}

/// The core each task's pool keeps to: a core of its own when the tasks are one thread each and
/// as many as the cores the calling thread may run on; none (the scheduler places the thread)
/// otherwise.
///
/// Why: a step wakes its shards' threads, and a woken thread may be queued behind the one still
/// running on a busy core while another core idles: on this project's 2-core machine the second
/// shard started 0.3–0.7 ms after the call, of a 15 ms step. A thread kept to a core of its own
/// starts at once: a lone run trained 4–6% faster (docs/performance.md, "Threads and cores").
/// Tasks that take only part of the machine are left free, so that two processes never crowd onto
/// the same cores.
fn cores_of_each_task(tasks: usize, threads_each: usize) -> Vec<Option<CoreId>> {
    let cores = core_affinity::get_core_ids().unwrap_or_default();
    if threads_each == 1 && cores.len() == tasks { cores.into_iter().map(Some).collect() } else { vec![None; tasks] }
}

/// Runs `work` on a worker of a pool of `threads` threads. A thread outside every pool (the
/// CLI's main thread, the desktop's session thread) that calls flex's parallel kernels hands
/// each op to the pool and sleeps until it is done; a worker shares the op with its spinning
/// neighbours instead. Short ops pay for the hand-over: generating from outside a pool ran
/// 2.1–2.7× slower (docs/performance.md, "Threads and cores").
pub(crate) fn on_a_worker<R: Send>(threads: usize, work: impl Fn() -> R + Sync) -> R {
    on_threads(vec![()], threads, |()| work()).pop().expect("one task, one result")
}

/// Hands task i to pool i and waits for them all. Each pool's scope takes its task and holds the
/// next scope open inside it, so the tasks run side by side on the pools' own threads, which
/// are kept between calls: starting a thread per task cost about 0.2 ms a training step more
/// (docs/performance.md, "Threads and cores"). A panicking task panics here, after the others
/// ended; one without a pool, which runs on the calling thread, before the tasks after it start.
fn hand_out<T: Send, R: Send>(pools: &[Option<&rayon::ThreadPool>], mut tasks: Vec<(T, &mut Option<R>)>, work: &(impl Fn(T) -> R + Sync)) {
    let Some((item, result)) = tasks.pop() else { return };
    match pools.get(tasks.len()).copied().flatten() {
        Some(pool) => pool.in_place_scope(|scope| {
            scope.spawn(move |_| *result = Some(work(item)));
            hand_out(pools, tasks, work);
        }),
        // No pool (the system gave no threads): the task runs on the calling thread, beside the
        // tasks already handed to pools and before the rest. (The browser never gets here: with
        // one thread there is nothing to fan out.)
        None => {
            *result = Some(work(item));
            hand_out(pools, tasks, work);
        }
    }
}

/// Runs `future` to its end on the calling thread. Only for work this module sent to a thread
/// of its own on the CPU, where it pays, measured on this project's 2-core reference machine
/// (docs/performance.md):
/// - the runs of an experiment step, each on a pool of its share of the cores
///   (`Experiment::steps`): two variants for 200 steps took 5.81 s together against
///   3.31 + 2.99 s one after the other ("Several runs at once");
/// - generation on flex, blocking on a pool worker of the caller's cores (`generate`): on two
///   threads, 256 tokens past the context went from 927–1,129 tokens/s to 2,106–3,012
///   ("Threads and cores");
/// - a session's task on the desktop's thread of its own (`SessionTask::run_blocking`): the
///   window's thread never waits on it, and the task has nothing else to do.
pub fn block_on<F: std::future::Future>(future: F) -> F::Output {
    pollster::block_on(future)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_come_back_in_order_from_pools_of_the_asked_size() {
        assert_eq!(on_threads(vec![0, 1, 2], 1, |i| i * 10), [0, 10, 20]);
        assert_eq!(on_threads(vec!['a', 'b'], 2, |_| rayon::current_num_threads()), [2, 2]);
    }

    #[test]
    fn pools_of_each_size_are_kept_when_the_sizes_alternate() {
        let shard_threads = || on_threads(vec![0, 1], 1, |_| std::thread::current().id());
        let first = shard_threads();
        on_a_worker(2, || ());
        assert_eq!(shard_threads(), first, "the one-thread pools were built again");
    }

    /// Tasks of one thread each, as many as the caller's cores, keep to a core each; tasks that
    /// take part of the machine, and pools of several threads, run anywhere the caller may.
    #[test]
    fn tasks_that_take_the_whole_machine_keep_to_a_core_each() {
        let cores = core_affinity::get_core_ids().expect("this system lists its cores");
        // Task i is handed core i, the core its pool should keep to.
        let each = on_threads(cores.clone(), 1, |core| (core, core_affinity::get_core_ids()));
        let fewer = on_threads(vec![(); cores.len().saturating_sub(1).max(1)], 1, |()| core_affinity::get_core_ids());
        let whole = on_a_worker(cores.len(), core_affinity::get_core_ids);
        // Only Linux reports the cores a thread itself may run on (elsewhere: the machine's).
        if cfg!(target_os = "linux") {
            assert!(each.iter().all(|(core, mine)| mine.as_deref() == Some(&[*core][..])), "not kept to a core each: {each:?}");
            if cores.len() > 1 {
                assert!(fewer.iter().all(|mine| mine.as_ref() == Some(&cores)), "tasks on part of the machine were pinned: {fewer:?}");
            }
            assert_eq!(whole, Some(cores), "a pool of every thread runs anywhere");
        }
    }

    #[test]
    fn work_on_a_worker_runs_inside_a_pool_of_the_asked_size() {
        assert_eq!(on_a_worker(3, || (rayon::current_thread_index().is_some(), rayon::current_num_threads())), (true, 3));
    }

    #[test]
    fn each_task_may_hold_its_own_mutable_borrow() {
        let mut counters = [0, 0, 0];
        on_threads(counters.iter_mut().collect(), 1, |c| *c += 1);
        assert_eq!(counters, [1, 1, 1]);
    }

    #[test]
    fn a_panicking_task_panics_the_caller_and_the_pools_serve_the_next_call() {
        let outcome = std::panic::catch_unwind(|| on_threads(vec![0, 1, 2], 1, |i| if i == 1 { panic!("task 1 fails") } else { i }));
        assert!(outcome.is_err());
        assert_eq!(on_threads(vec![3, 4, 5], 1, |i| i + 1), [4, 5, 6]);
    }

    /// A rayon worker waiting for its tasks runs other work of its pool meanwhile (here the
    /// other half of a `join`), which may fan out from the same thread before the first call
    /// returns.
    #[test]
    fn a_worker_may_fan_out_again_while_it_waits() {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
        let slow_double = |i: u64| {
            std::thread::sleep(std::time::Duration::from_millis(50));
            i * 2
        };
        let (a, b) = pool.install(|| rayon::join(|| on_threads(vec![1, 2], 1, slow_double), || on_threads(vec![3, 4], 1, slow_double)));
        assert_eq!((a, b), (vec![2, 4], vec![6, 8]));
    }
}
