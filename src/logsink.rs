//! Where log lines go: a bounded buffer that a background thread writes out
//! in batches.
//!
//! Logging a line only appends it to the buffer under a short lock: no
//! system call and, most of the time, no thread to wake. The writer thread
//! wakes for the first line after a quiet spell and writes it at once; then
//! it lets lines gather for [`LINGER`] (or until [`HIGH_WATER`] bytes wait)
//! before the next write. Under steady load that is a few writes a second
//! instead of one write, and one wake-up, per line. When the buffer is full
//! because the output is slow or nobody reads it, new lines are dropped and
//! counted ([`LogSink::dropped_lines`]); nothing ever waits for the output.
//!
//! Why not tracing-appender's non-blocking writer: it hands every line to
//! its thread through a channel, waking the thread and writing once per
//! line. At its best (lossy, a 4,096-line channel) and measured side by
//! side with this sink in one run, release builds, three rounds
//! (docs/performance.md, "Maintained crates in place of our own"), it cost
//! more CPU a request: +6.9 µs (+34 %) on the allowed review and +3.0 µs
//! (+10 %) on the denied one at concurrency 1, +2.4 µs (+16 %) on the
//! allowed one at concurrency 8, the same on the denied one at 8.

use std::io::{self, Write};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;

/// How long the writer lets lines gather after a write.
pub const LINGER: Duration = Duration::from_millis(50);
/// Waiting bytes that end the gathering early.
pub const HIGH_WATER: usize = 32 * 1024;
/// Waiting bytes past which new lines are dropped (about 800 decision
/// lines). Two buffers of this size exist, the one filling and the one
/// being written, and their pages are only touched as lines fill them.
pub const CAPACITY: usize = 256 * 1024;
/// How long dropping the guard waits for the last lines to be written.
const CLOSE_WAIT: Duration = Duration::from_secs(1);

/// How the sink buffers: [`LogSink::start`] uses the constants above; the
/// tests, smaller ones.
#[derive(Debug, Clone, Copy)]
struct Limits {
    capacity: usize,
    high_water: usize,
    linger: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            capacity: CAPACITY,
            high_water: HIGH_WATER,
            linger: LINGER,
        }
    }
}

#[derive(Default)]
struct State {
    pending: Vec<u8>,
    lines: u64,
    /// The writer waits for a first line: the next line wakes it.
    idle: bool,
    /// The writer lets lines gather: passing high water wakes it.
    gathering: bool,
    closing: bool,
    done: bool,
}

struct Channel {
    state: Mutex<State>,
    wake: Condvar,
    finished: Condvar,
    dropped: Counter,
    limits: Limits,
}

impl Channel {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Nothing panics while holding the lock; if it ever did, the
        // buffer is still a valid Vec and logging should go on.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn push(&self, line: &[u8]) {
        let mut state = self.lock();
        if state.pending.len() + line.len() > self.limits.capacity {
            drop(state);
            self.dropped.inc();
            return;
        }
        state.pending.extend_from_slice(line);
        state.lines += 1;
        let wake = state.idle || (state.gathering && state.pending.len() >= self.limits.high_water);
        if wake {
            state.idle = false;
            state.gathering = false;
        }
        drop(state);
        if wake {
            self.wake.notify_one();
        }
    }

    fn run(&self, mut out: impl Write) {
        let mut batch = Vec::with_capacity(self.limits.capacity);
        let mut state = self.lock();
        loop {
            while state.pending.is_empty() && !state.closing {
                state.idle = true;
                state = self
                    .wake
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            state.idle = false;
            if state.pending.is_empty() {
                break;
            }
            std::mem::swap(&mut batch, &mut state.pending);
            let lines = std::mem::take(&mut state.lines);
            drop(state);
            if out.write_all(&batch).and_then(|()| out.flush()).is_err() {
                self.dropped.inc_by(lines);
            }
            batch.clear();
            state = self.lock();
            if !state.closing {
                state.gathering = true;
                let high_water = self.limits.high_water;
                state = self
                    .wake
                    .wait_timeout_while(state, self.limits.linger, |s| {
                        s.pending.len() < high_water && !s.closing
                    })
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
                state.gathering = false;
            }
        }
        state.done = true;
        drop(state);
        self.finished.notify_all();
    }
}

/// The writing end that logging holds; cheap to clone.
#[derive(Clone)]
pub struct LogSink {
    shared: Arc<Channel>,
}

/// Keeps the writer thread; dropping it writes what is waiting, for at most
/// a second (an output nobody reads must not hold the process).
#[must_use = "dropping the guard closes the sink"]
pub struct SinkGuard {
    shared: Arc<Channel>,
}

impl LogSink {
    /// Starts a sink writing to `out` with [`CAPACITY`], [`HIGH_WATER`] and [`LINGER`].
    pub fn start<W: Write + Send + 'static>(out: W) -> io::Result<(Self, SinkGuard)> {
        Self::start_with(out, Limits::default())
    }

    /// Starts a sink writing to `out`; `Err` when the thread cannot start.
    fn start_with<W: Write + Send + 'static>(
        out: W,
        limits: Limits,
    ) -> io::Result<(Self, SinkGuard)> {
        let shared = Arc::new(Channel {
            state: Mutex::new(State {
                pending: Vec::with_capacity(limits.capacity),
                ..State::default()
            }),
            wake: Condvar::new(),
            finished: Condvar::new(),
            dropped: Counter::default(),
            limits,
        });
        let writer = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("log-writer".into())
            .spawn(move || writer.run(out))?;
        let guard = SinkGuard {
            shared: Arc::clone(&shared),
        };
        Ok((Self { shared }, guard))
    }

    /// The lines dropped so far (the buffer was full, or the output
    /// failed), as a counter the metrics registry can hold itself.
    pub fn dropped_lines(&self) -> Counter {
        self.shared.dropped.clone()
    }
}

impl Drop for SinkGuard {
    fn drop(&mut self) {
        self.shared.lock().closing = true;
        self.shared.wake.notify_all();
        let state = self.shared.lock();
        let _ = self
            .shared
            .finished
            .wait_timeout_while(state, CLOSE_WAIT, |s| !s.done);
    }
}

/// One `write` is one line: tracing's formatter writes each event whole.
impl Write for &LogSink {
    fn write(&mut self, line: &[u8]) -> io::Result<usize> {
        self.shared.push(line);
        Ok(line.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogSink {
    type Writer = &'a LogSink;

    fn make_writer(&'a self) -> Self::Writer {
        self
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Instant;

    use super::*;

    /// Records every write; each write first waits for a permit when gated.
    #[derive(Clone, Default)]
    struct Recorder {
        writes: Arc<Mutex<Vec<Vec<u8>>>>,
        gate: Option<Arc<Mutex<mpsc::Receiver<()>>>>,
    }

    impl Write for Recorder {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            if let Some(gate) = &self.gate {
                let _ = gate.lock().expect("gate").recv();
            }
            self.writes.lock().expect("writes").push(buf.to_vec());
            Ok(buf.len())
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl Recorder {
        fn gated() -> (Self, mpsc::Sender<()>) {
            let (permit, gate) = mpsc::channel();
            let recorder = Self {
                gate: Some(Arc::new(Mutex::new(gate))),
                ..Self::default()
            };
            (recorder, permit)
        }

        fn writes(&self) -> Vec<Vec<u8>> {
            self.writes.lock().expect("writes").clone()
        }

        fn wait_for_writes(&self, n: usize) {
            let start = Instant::now();
            while self.writes().len() < n {
                assert!(start.elapsed() < Duration::from_secs(5), "{n} writes");
                std::thread::sleep(Duration::from_millis(2));
            }
        }
    }

    fn limits(capacity: usize, high_water: usize, linger_secs: u64) -> Limits {
        Limits {
            capacity,
            high_water,
            linger: Duration::from_secs(linger_secs),
        }
    }

    fn log(sink: &LogSink, line: &str) {
        let mut writer = sink;
        writer.write_all(line.as_bytes()).expect("never fails");
    }

    /// Waits until the writer thread is inside a write (it took the buffer).
    fn wait_until_taken(sink: &LogSink) {
        let start = Instant::now();
        while sink.shared.lock().lines != 0 {
            assert!(start.elapsed() < Duration::from_secs(5));
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    #[test]
    fn the_first_line_goes_out_at_once_and_later_ones_in_one_batch() {
        let recorder = Recorder::default();
        let (sink, guard) =
            LogSink::start_with(recorder.clone(), limits(1 << 20, 1 << 20, 60)).expect("thread");
        log(&sink, "first\n");
        recorder.wait_for_writes(1);
        let later: Vec<String> = (0..100).map(|i| format!("line {i}\n")).collect();
        for line in &later {
            log(&sink, line);
        }
        drop(guard);
        let writes = recorder.writes();
        assert_eq!(
            writes.len(),
            2,
            "one write for the first line, one for the rest"
        );
        assert_eq!(writes[0], b"first\n");
        assert_eq!(String::from_utf8_lossy(&writes[1]), later.concat());
        assert_eq!(sink.dropped_lines().get(), 0);
    }

    #[test]
    fn passing_high_water_writes_without_waiting_for_the_linger() {
        let recorder = Recorder::default();
        let (sink, _guard) =
            LogSink::start_with(recorder.clone(), limits(1 << 20, 1000, 600)).expect("thread");
        log(&sink, "first\n");
        recorder.wait_for_writes(1);
        for _ in 0..11 {
            log(&sink, &format!("{}\n", "x".repeat(99)));
        }
        recorder.wait_for_writes(2);
        assert!(recorder.writes()[1].len() >= 1000);
    }

    #[test]
    fn a_full_buffer_drops_and_counts_new_lines() {
        let (recorder, permit) = Recorder::gated();
        let (sink, guard) =
            LogSink::start_with(recorder.clone(), limits(1000, 1000, 600)).expect("thread");
        log(&sink, "first\n");
        wait_until_taken(&sink);
        let line = format!("{}\n", "y".repeat(99));
        for _ in 0..25 {
            log(&sink, &line);
        }
        assert_eq!(
            sink.dropped_lines().get(),
            15,
            "10 lines of 100 bytes fit in 1000"
        );
        log(&sink, &"z".repeat(2000));
        assert_eq!(
            sink.dropped_lines().get(),
            16,
            "a line longer than the buffer"
        );
        for _ in 0..2 {
            permit.send(()).expect("writer");
        }
        drop(guard);
        let writes = recorder.writes();
        assert_eq!(writes[0], b"first\n");
        assert_eq!(writes[1], line.repeat(10).into_bytes());
    }

    #[test]
    fn closing_gives_up_on_an_output_that_never_drains() {
        let (recorder, _permit) = Recorder::gated();
        let (sink, guard) = LogSink::start_with(recorder, limits(1000, 1000, 600)).expect("thread");
        log(&sink, "stuck\n");
        wait_until_taken(&sink);
        let start = Instant::now();
        drop(guard);
        assert!(
            start.elapsed() < Duration::from_secs(3),
            "{:?}",
            start.elapsed()
        );
    }

    #[test]
    fn failed_writes_count_their_lines_as_dropped() {
        struct Broken;
        impl Write for Broken {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                Err(io::Error::from(io::ErrorKind::BrokenPipe))
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let (sink, guard) = LogSink::start_with(Broken, limits(1000, 1000, 600)).expect("thread");
        log(&sink, "a\n");
        log(&sink, "b\n");
        log(&sink, "c\n");
        drop(guard);
        assert_eq!(sink.dropped_lines().get(), 3);
    }
}
