//! Delayed adds (client-go's delaying queue).
//!
//! Items waiting for their deadline live in a min-heap ordered by
//! `(ready_at, sequence)`. A single Tokio task per queue sleeps until the
//! earliest deadline and then adds every item that is due. Scheduling an item
//! that becomes the new earliest deadline wakes the task through a
//! [`Notify`], so the task never polls. The task only holds a [`Weak`]
//! reference to the queue and exits on shutdown or when the queue is dropped.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::hash::Hash;
use std::pin::pin;
use std::sync::{Arc, Mutex, Weak};

use tokio::sync::Notify;
use tokio::time::Instant;

use super::lock;
use super::queue::Inner;

/// The waiting room of one queue.
pub(crate) struct Delayer<T> {
    state: Mutex<DelayState<T>>,
    /// Wakes the timer task: new earliest deadline, shutdown or drop.
    wake: Arc<Notify>,
}

struct DelayState<T> {
    /// Deadlines by `(ready_at, seq)`; entries whose `seq` is no longer in
    /// `items` are stale (the item was rescheduled earlier) and skipped.
    heap: BinaryHeap<Reverse<(Instant, u64)>>,
    /// Live entries by sequence number.
    items: HashMap<u64, T>,
    /// Current deadline and sequence number of every waiting item.
    ready_at: HashMap<T, (Instant, u64)>,
    next_seq: u64,
    task_started: bool,
    stopped: bool,
}

impl<T> Delayer<T> {
    pub(crate) fn new() -> Self {
        Delayer {
            state: Mutex::new(DelayState {
                heap: BinaryHeap::new(),
                items: HashMap::new(),
                ready_at: HashMap::new(),
                next_seq: 0,
                task_started: false,
                stopped: false,
            }),
            wake: Arc::new(Notify::new()),
        }
    }

    /// Drops every waiting item and makes the timer task exit.
    pub(crate) fn stop(&self) {
        {
            let mut state = lock(&self.state);
            state.stopped = true;
            state.heap.clear();
            state.items.clear();
            state.ready_at.clear();
        }
        self.wake.notify_one();
    }
}

impl<T> Delayer<T>
where
    T: Clone + Eq + Hash + Send + Sync + 'static,
{
    /// Makes `item` ready at `ready_at`, keeping an earlier deadline if the
    /// item is already waiting.
    pub(crate) fn schedule(&self, queue: &Arc<Inner<T>>, item: T, ready_at: Instant) {
        let start_task;
        let earliest;
        {
            let mut state = lock(&self.state);
            if state.stopped {
                return;
            }
            if let Some(&(existing, seq)) = state.ready_at.get(&item) {
                if existing <= ready_at {
                    return;
                }
                // Leaves a stale heap entry behind, skipped when popped.
                state.items.remove(&seq);
            }
            let seq = state.next_seq;
            state.next_seq += 1;
            earliest = state
                .heap
                .peek()
                .is_none_or(|Reverse((first, _))| ready_at < *first);
            state.heap.push(Reverse((ready_at, seq)));
            state.items.insert(seq, item.clone());
            state.ready_at.insert(item, (ready_at, seq));
            start_task = !state.task_started;
            state.task_started = true;
        }
        if start_task {
            tokio::spawn(run(Arc::downgrade(queue), Arc::clone(&self.wake)));
        } else if earliest {
            self.wake.notify_one();
        }
    }

    /// Removes every item due at `now`, in deadline order, and returns them
    /// with the next deadline. `None` if the delayer is stopped.
    fn take_due(&self, now: Instant) -> Option<(Vec<T>, Option<Instant>)> {
        let mut state = lock(&self.state);
        if state.stopped {
            return None;
        }
        let mut due = Vec::new();
        while let Some(&Reverse((at, seq))) = state.heap.peek() {
            if state.items.contains_key(&seq) && at > now {
                return Some((due, Some(at)));
            }
            state.heap.pop();
            if let Some(item) = state.items.remove(&seq) {
                state.ready_at.remove(&item);
                due.push(item);
            }
        }
        Some((due, None))
    }
}

/// The timer task: adds due items, then sleeps until the next deadline or
/// until woken.
async fn run<T>(queue: Weak<Inner<T>>, wake: Arc<Notify>)
where
    T: Clone + Eq + Hash + Send + Sync + 'static,
{
    loop {
        let mut notified = pin!(wake.notified());
        notified.as_mut().enable();
        let next = {
            let Some(queue) = queue.upgrade() else {
                return;
            };
            let Some((due, next)) = queue.delay.take_due(Instant::now()) else {
                return;
            };
            for item in due {
                queue.add(item);
            }
            next
        };
        match next {
            Some(at) => {
                tokio::select! {
                    () = tokio::time::sleep_until(at) => {}
                    () = &mut notified => {}
                }
            }
            None => notified.await,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::WorkQueue;

    /// Lets spawned tasks (the timer task) run without advancing time.
    async fn settle() {
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn add_after_orders_items_by_deadline() {
        let queue = WorkQueue::new();
        queue.add_after("c", Duration::from_millis(300));
        queue.add_after("a", Duration::from_millis(100));
        queue.add_after("b", Duration::from_millis(200));
        queue.add_after("b2", Duration::from_millis(200));
        settle().await;
        assert!(queue.is_empty());

        let start = tokio::time::Instant::now();
        for expected in ["a", "b", "b2", "c"] {
            let item = queue.get().await.expect("item");
            assert_eq!(item, expected);
            queue.done(&item);
        }
        assert_eq!(start.elapsed(), Duration::from_millis(300));
    }

    #[tokio::test(start_paused = true)]
    async fn add_after_is_not_ready_before_its_deadline() {
        let queue = WorkQueue::new();
        queue.add_after(1, Duration::from_secs(10));
        tokio::time::advance(Duration::from_secs(9)).await;
        settle().await;
        assert!(queue.is_empty());
        tokio::time::advance(Duration::from_secs(1)).await;
        settle().await;
        assert_eq!(queue.len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn add_after_keeps_the_earliest_deadline() {
        let queue = WorkQueue::new();
        let start = tokio::time::Instant::now();

        queue.add_after("x", Duration::from_secs(5));
        queue.add_after("x", Duration::from_secs(1)); // earlier: wins
        queue.add_after("x", Duration::from_secs(3)); // later: ignored
        assert_eq!(queue.get().await, Some("x"));
        assert_eq!(start.elapsed(), Duration::from_secs(1));
        queue.done(&"x");

        // The superseded 3s and 5s deadlines must not add it again.
        tokio::time::advance(Duration::from_secs(10)).await;
        settle().await;
        assert!(queue.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn zero_delay_adds_immediately() {
        let queue = WorkQueue::new();
        queue.add_after("now", Duration::ZERO);
        assert_eq!(queue.len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn delayed_item_is_deduplicated_with_queued_item() {
        let queue = WorkQueue::new();
        queue.add("a");
        queue.add_after("a", Duration::from_secs(1));
        tokio::time::advance(Duration::from_secs(2)).await;
        settle().await;
        assert_eq!(queue.len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_drops_delayed_items_and_stops_the_timer() {
        let queue = WorkQueue::new();
        queue.add_after("a", Duration::from_secs(1));
        settle().await;
        queue.shutdown();
        queue.add_after("b", Duration::from_secs(1));
        tokio::time::advance(Duration::from_secs(5)).await;
        settle().await;
        assert!(queue.is_empty());
        assert_eq!(queue.get().await, None);
    }

    #[tokio::test(start_paused = true)]
    async fn dropping_the_queue_ends_the_timer_task() {
        let queue = WorkQueue::new();
        queue.add_after("a", Duration::from_secs(60));
        settle().await;
        let runtime = tokio::runtime::Handle::current().metrics();
        assert_eq!(runtime.num_alive_tasks(), 1, "timer task is running");
        let weak = std::sync::Arc::downgrade(&queue.inner);
        drop(queue);
        assert!(
            weak.upgrade().is_none(),
            "timer task must not keep the queue alive"
        );
        settle().await;
        assert_eq!(runtime.num_alive_tasks(), 0, "timer task has exited");
    }
}
