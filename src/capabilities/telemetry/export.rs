//! Sending spans: the OTLP/HTTP protobuf exporter behind the SDK's batch span processor (its own
//! thread and a bounded queue, so a run never waits on a collector), and a warning, once, when
//! the collector cannot be reached.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, SdkTracerProvider, SpanData, SpanExporter,
};
use opentelemetry_sdk::Resource;

use crate::base::environment::Redactor;
use crate::setup::config::telemetry::TelemetryConfig;

/// How long one export may take (a collector that does not answer holds no more than this).
const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);
/// Spans waiting to be sent; past this they are dropped, never held in memory without bound.
pub const MAX_QUEUE: usize = 2048;
/// How often waiting spans are sent.
const EVERY: Duration = Duration::from_secs(2);

/// Why tabd could not build its exporter (a sentence for the log; the runs go on without).
#[derive(Debug, thiserror::Error)]
#[error("telemetry: cannot send traces to {endpoint}: {why}")]
pub struct StartError {
    pub endpoint: String,
    pub why: String,
}

/// The tracer provider for `cfg`: spans batched, then sent on the processor's thread.
pub fn provider(cfg: &TelemetryConfig, redactor: Arc<Redactor>) -> Result<SdkTracerProvider, StartError> {
    let shown = crate::base::text::display_url(&cfg.endpoint);
    let headers: HashMap<String, String> = cfg.headers.iter().cloned().collect();
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(cfg.endpoint.clone())
        .with_timeout(EXPORT_TIMEOUT)
        .with_headers(headers)
        .build()
        .map_err(|e| StartError {
            endpoint: shown.clone(),
            why: redactor.apply(&e.to_string()),
        })?;
    let warned = WarnOnce {
        inner: exporter,
        endpoint: shown,
        redactor,
        down: Arc::new(AtomicBool::new(false)),
    };
    let batch = BatchSpanProcessor::builder(warned)
        .with_batch_config(
            BatchConfigBuilder::default()
                .with_max_queue_size(MAX_QUEUE)
                .with_scheduled_delay(EVERY)
                .build(),
        )
        .build();
    let resource = Resource::builder_empty()
        .with_service_name("tabd")
        .with_attribute(opentelemetry::KeyValue::new(
            "service.version",
            env!("CARGO_PKG_VERSION"),
        ))
        .build();
    Ok(SdkTracerProvider::builder()
        .with_span_processor(batch)
        .with_resource(resource)
        .build())
}

/// The exporter, saying once that the collector cannot be reached (and once that it can again):
/// a collector that is down costs a warning, not one per batch.
#[derive(Debug)]
struct WarnOnce<E> {
    inner: E,
    endpoint: String,
    redactor: Arc<Redactor>,
    down: Arc<AtomicBool>,
}

impl<E: SpanExporter> SpanExporter for WarnOnce<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let spans = batch.len();
        let sent = self.inner.export(batch).await;
        match (&sent, turned(&self.down, sent.is_err())) {
            (Err(e), Some(Turn::Down)) => tracing::warn!(
                "telemetry: cannot send traces to {} ({}); {spans} span(s) dropped, runs go on; said once until it answers",
                self.endpoint,
                self.redactor.apply(&e.to_string())
            ),
            (_, Some(Turn::Up)) => tracing::info!("telemetry: {} takes traces again", self.endpoint),
            _ => {}
        }
        sent
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// A change in whether the collector answers: said once each way.
#[derive(Debug, PartialEq, Eq)]
enum Turn {
    Down,
    Up,
}

/// Whether this export's outcome (`failed`) turned the collector down or up since the last one.
fn turned(down: &AtomicBool, failed: bool) -> Option<Turn> {
    let was_down = down.swap(failed, Ordering::SeqCst);
    match (was_down, failed) {
        (false, true) => Some(Turn::Down),
        (true, false) => Some(Turn::Up),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_collector_that_stays_down_is_said_once_and_again_only_after_it_answered() {
        let down = AtomicBool::new(false);
        let said: Vec<Option<Turn>> = [true, true, true, false, false, true, true]
            .into_iter()
            .map(|failed| turned(&down, failed))
            .collect();
        use Turn::{Down, Up};
        assert_eq!(said, [Some(Down), None, None, Some(Up), None, Some(Down), None]);
    }
}
