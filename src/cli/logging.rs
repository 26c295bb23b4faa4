//! Logging: where log lines go and how they are written.

use clap::ValueEnum;
use prometheus_client::metrics::counter::Counter;

/// Logging's flags, of every command.
#[derive(Debug, Clone, clap::Args)]
pub struct LoggingArgs {
    /// Log level or filter (e.g. info, debug, pipelinerollout_webhook=debug); RUST_LOG also works.
    #[arg(long, global = true, env = "LOG_LEVEL", default_value = "info")]
    log_level: String,
    /// Log format.
    #[arg(long, global = true, env = "LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Keeps the log writer's background thread; dropping it writes what is
/// waiting. Hold it until the program ends.
#[must_use = "dropping the guard stops the log writer"]
pub struct LoggingGuard {
    _sink: Option<crate::logsink::SinkGuard>,
    dropped_lines: Counter,
}

impl LoggingGuard {
    /// The log sink's count of dropped lines, for the metrics to export
    /// (zero for good when lines go straight to stderr).
    pub(crate) fn dropped_lines(&self) -> Counter {
        self.dropped_lines.clone()
    }
}

impl std::fmt::Debug for LoggingGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LoggingGuard")
    }
}

/// Sets up logging to stderr through [`crate::logsink`]: a request never
/// waits for stderr, lines are written in batches, and when stderr does not
/// keep up lines are dropped and counted
/// (`pipelinerollout_webhook_log_lines_dropped_total`). Should the writer
/// thread fail to start, lines are written to stderr directly.
pub fn init_logging(logging: &LoggingArgs) -> LoggingGuard {
    use tracing_subscriber::fmt::writer::BoxMakeWriter;
    let filter = std::env::var("RUST_LOG").unwrap_or_else(|_| logging.log_level.clone());
    let filter = tracing_subscriber::EnvFilter::try_new(&filter)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // Boxed, so that both writers fit one builder: one small allocation a
    // line, against about 19 k instructions to format a decision line.
    let (writer, guard, dropped_lines) = match crate::logsink::LogSink::start(std::io::stderr()) {
        Ok((sink, guard)) => {
            let dropped_lines = sink.dropped_lines();
            (BoxMakeWriter::new(sink), Some(guard), dropped_lines)
        }
        Err(_) => (
            BoxMakeWriter::new(std::io::stderr),
            None,
            Counter::default(),
        ),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        // Plain text, on a terminal too: the build leaves out
        // tracing-subscriber's colours (see Cargo.toml).
        .with_ansi(false)
        .with_writer(writer);
    match logging.log_format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().flatten_event(true).init(),
    }
    if guard.is_none() {
        tracing::warn!("the log writer thread did not start: logging straight to stderr");
    }
    LoggingGuard {
        _sink: guard,
        dropped_lines,
    }
}
