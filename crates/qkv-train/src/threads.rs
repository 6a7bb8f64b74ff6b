//! Work fanned out to threads of its own, each with a compute pool of its share of the cores:
//! the shards of a batch (`Run`) and the runs of an experiment step (`Experiment`) both go out
//! this way.
//!
//! Why threads and not one rayon `par_iter`: every task runs a whole forward and backward pass
//! whose kernels spread over the pool they are installed in. A task's pool must hold its share
//! of the cores, not the whole machine, or the tasks' kernels would queue behind one another.

use std::cell::RefCell;

thread_local! {
    /// The calling thread's pools, kept for its next fan-out (building one spawns threads).
    static POOLS: RefCell<Vec<rayon::ThreadPool>> = const { RefCell::new(Vec::new()) };
}

/// Runs `work(item)` for every item, each on a thread of its own inside a rayon pool of
/// `threads_each` threads; the results come back in the items' order.
pub(crate) fn on_threads<T: Send, R: Send>(items: Vec<T>, threads_each: usize, work: impl Fn(T) -> R + Sync) -> Vec<R> {
    let tasks = items.len();
    POOLS.with_borrow_mut(|pools| {
        if pools.len() < tasks || pools.iter().any(|p| p.current_num_threads() != threads_each) {
            // A pool that cannot be built (no threads left) leaves its task on the global pool.
            *pools = (0..tasks).filter_map(|_| rayon::ThreadPoolBuilder::new().num_threads(threads_each).build().ok()).collect();
        }
        let pools = &pools[..];
        let work = &work;
        std::thread::scope(|scope| {
            let handles: Vec<_> = items
                .into_iter()
                .enumerate()
                .map(|(i, item)| {
                    scope.spawn(move || match pools.get(i) {
                        Some(pool) => pool.install(|| work(item)),
                        None => work(item),
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().expect("a task on its own thread panicked")).collect()
        })
    })
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
    fn each_task_may_hold_its_own_mutable_borrow() {
        let mut counters = [0, 0, 0];
        on_threads(counters.iter_mut().collect(), 1, |c| *c += 1);
        assert_eq!(counters, [1, 1, 1]);
    }
}
