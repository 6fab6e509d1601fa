//! Filesystem work called from async code: vault walks, hashing, tool calls. On the daemon's
//! multi-thread runtime it runs under `block_in_place`, so the runtime moves its other tasks
//! (the main loop, the watchdog) to another thread while this one works; elsewhere (a
//! current-thread runtime, a plain thread) it just runs.

use tokio::runtime::{Handle, RuntimeFlavor};

pub fn run<T>(work: impl FnOnce() -> T) -> T {
    match Handle::try_current() {
        Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => tokio::task::block_in_place(work),
        _ => work(),
    }
}

/// Maps `items` with `f` on every core (scoped threads, results in order). Worth it only for
/// many independent pieces, such as a thousand role files at start-up; few items run inline.
pub fn par_map<T: Send, U: Send>(items: Vec<T>, f: impl Fn(T) -> U + Sync) -> Vec<U> {
    const WORTH_A_THREAD: usize = 64;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = cores.min(items.len() / WORTH_A_THREAD);
    if threads <= 1 {
        return items.into_iter().map(f).collect();
    }
    let per = items.len().div_ceil(threads);
    let mut chunks: Vec<Vec<T>> = Vec::with_capacity(threads);
    let mut rest = items.into_iter();
    loop {
        let chunk: Vec<T> = rest.by_ref().take(per).collect();
        if chunk.is_empty() {
            break;
        }
        chunks.push(chunk);
    }
    let f = &f;
    std::thread::scope(|s| {
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|chunk| s.spawn(move || chunk.into_iter().map(f).collect::<Vec<U>>()))
            .collect();
        handles
            .into_iter()
            // A panic in `f` is a bug; it surfaces here as it would have inline.
            .flat_map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn par_map_keeps_the_order_of_many_items_and_few() {
        let many: Vec<u32> = (0..1000).collect();
        assert_eq!(
            super::par_map(many.clone(), |x| x * 2),
            many.iter().map(|x| x * 2).collect::<Vec<_>>()
        );
        assert_eq!(super::par_map(vec![1, 2, 3], |x| x + 1), vec![2, 3, 4]);
        assert!(super::par_map(Vec::<u32>::new(), |x| x).is_empty());
    }
}
