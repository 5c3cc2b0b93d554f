//! The retry layer with its clock and jitter injected: the waits are recorded
//! (and not slept), so tests check them exactly.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use lmstack::retry::RetryLayer;

/// The waits the layer asked for, in order.
pub type Waits = Arc<Mutex<Vec<Duration>>>;

/// 100 ms of initial backoff, jitter 0 (so the first backoff is 50 ms), and
/// a sleep that records each wait and returns at once.
pub fn recorded_retries() -> (RetryLayer, Waits) {
    let waits = Waits::default();
    let slept = waits.clone();
    let layer = RetryLayer::new()
        .initial_backoff(Duration::from_millis(100))
        .jitter(|| 0.0)
        .sleep(move |wait| {
            slept.lock().unwrap().push(wait);
            std::future::ready(())
        });
    (layer, waits)
}
