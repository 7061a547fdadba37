//! `--prometheus ADDR`: the run's figures at `GET /metrics` while the run goes, in the
//! format the scraper asks for: OpenMetrics when its `Accept` names
//! `application/openmetrics-text` (as Prometheus's does), the Prometheus text format 0.0.4
//! otherwise (what `promtool check metrics`, curl and older scrapers read). The figures are a snapshot the run's tick
//! publishes once per interval from the same totals the live line reads, so nothing is
//! added per message and no lock is taken on the hot path. The encoding is
//! prometheus-client's; the responder is a small blocking HTTP loop on its own thread, so
//! it never competes with the run's tasks and can go on serving the final figures (those
//! of the results file) for `--prometheus-hold` after the run: a scraper's last look.
//!
//! Names follow Prometheus conventions: `mailbench_messages_total{result="accepted"}` (the
//! unit of work: messages, sessions or commands), `mailbench_recipients_total{result=…}`,
//! `mailbench_connections_total`, `mailbench_latency_seconds{phase=…}` as a classic
//! histogram (buckets counted exactly from the HDR histogram, so they add across agents),
//! gauges for what is open or in flight, and `mailbench_run_info{run_id=…}`.
//!
//! A relay's figures are the generator's, except that `recipients_total{result="delivered"}`
//! counts what arrived at its embedded sink (the generator's own count is what the MTA
//! accepted); the embedded sink publishes nothing of its own, but refreshes the relay's
//! delivery figures every interval, through the drain.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use hdrhistogram::Histogram;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use crate::stats::Counters;

/// Upper bounds of the latency buckets, in seconds.
const BUCKETS_S: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0, 30.0, 60.0,
];

/// A number that is not a counter: what is open, in flight, waiting, or the last
/// interval's rate.
#[derive(Debug, Clone)]
pub struct Gauge {
    /// Name after `mailbench_`.
    pub name: &'static str,
    /// One line saying what it is.
    pub help: &'static str,
    /// Its value.
    pub value: f64,
}

/// A classic histogram: sum and count in seconds, and the count in each bucket of
/// [`BUCKETS_S`] then +Inf.
#[derive(Debug, Clone)]
struct Buckets {
    sum_s: f64,
    count: u64,
    per_bucket: Vec<(f64, u64)>,
}

impl Buckets {
    fn of(h: &Histogram<u64>) -> Buckets {
        let mut per_bucket = Vec::with_capacity(BUCKETS_S.len() + 1);
        let mut below = 0;
        for le in BUCKETS_S {
            let upto = if h.is_empty() {
                0
            } else {
                h.count_between(0, (le * 1e6) as u64)
            };
            per_bucket.push((*le, upto - below));
            below = upto;
        }
        per_bucket.push((f64::INFINITY, h.len() - below));
        Buckets {
            sum_s: h.mean() * h.len() as f64 / 1e6,
            count: h.len(),
            per_bucket,
        }
    }
}

/// What `/metrics` shows: one run's figures at one moment.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// The run id.
    pub run_id: String,
    /// What a unit of work is (`messages`, `sessions`, `commands`).
    pub unit: &'static str,
    /// The totals so far.
    pub counters: Counters,
    latency: Vec<(String, Buckets)>,
    /// The gauges.
    pub gauges: Vec<Gauge>,
    /// This agent of a split run (`I/N`), a label on every series so that one query sums
    /// the agents (`sum without (shard)`) or splits them (`by (shard)`).
    shard: Option<String>,
}

/// The shard label of this process, once `label_shard` set it.
static SHARD: OnceLock<String> = OnceLock::new();

/// Labels every series this process serves with `shard="I/N"`, and the live view's
/// lines with it.
pub fn label_shard(label: String) {
    let _ = SHARD.set(label);
}

/// This agent's shard (`I/N`), once `label_shard` set it: the live view names it, so
/// that agents' terminals side by side say which is which.
pub fn shard() -> Option<&'static str> {
    SHARD.get().map(String::as_str)
}

impl Snapshot {
    /// A snapshot of `counters` and the named latency histograms.
    pub fn new<'a>(
        run_id: String,
        unit: &'static str,
        counters: Counters,
        latency: impl IntoIterator<Item = (&'a str, &'a Histogram<u64>)>,
        gauges: Vec<Gauge>,
    ) -> Snapshot {
        Snapshot {
            run_id,
            unit,
            counters,
            latency: latency
                .into_iter()
                .filter(|(_, h)| !h.is_empty())
                .map(|(name, h)| (name.to_string(), Buckets::of(h)))
                .collect(),
            gauges,
            shard: SHARD.get().cloned(),
        }
    }

    /// The snapshot in the OpenMetrics text format.
    pub fn encode(self: &Arc<Self>) -> String {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(Scrape(self.clone())));
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &registry);
        out
    }

    /// The snapshot in the Prometheus text format 0.0.4.
    pub fn encode_prometheus(self: &Arc<Self>) -> String {
        to_prometheus_text(&self.encode())
    }
}

/// OpenMetrics text made the Prometheus text format 0.0.4, which has no `info` type, names
/// a counter's family with its `_total` sample name, and has no `# EOF`: an info family
/// becomes the gauge its one sample is (`…_info 1`), a counter's `# HELP`/`# TYPE` take
/// the `_total` name, `# UNIT` and `# EOF` go. The samples themselves are the same lines.
fn to_prometheus_text(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len());
    // A family's `# HELP` waits for its `# TYPE`, which says what the name becomes.
    let mut help: Option<(&str, &str)> = None;
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            help = rest.split_once(' ').or(Some((rest, "")));
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, "untyped"));
            let (name, kind) = match kind {
                "counter" => (format!("{name}_total"), "counter"),
                "info" => (format!("{name}_info"), "gauge"),
                "gaugehistogram" | "stateset" | "unknown" => (name.to_string(), "untyped"),
                _ => (name.to_string(), kind),
            };
            if let Some((_, text)) = help.take() {
                out.push_str(&format!("# HELP {name} {text}\n"));
            }
            out.push_str(&format!("# TYPE {name} {kind}\n"));
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[derive(Debug)]
struct Scrape(Arc<Snapshot>);

/// A counter family: its name, help, label name, and a value per label value.
type LabelledCounter<'a> = (&'a str, &'a str, &'a str, Vec<(&'a str, u64)>);

impl Collector for Scrape {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let s = &self.0;
        let c = &s.counters;
        let shard = s.shard.as_deref();
        enc.encode_descriptor(
            "mailbench_run",
            "The run these figures belong to.",
            None,
            MetricType::Info,
        )?
        .encode_info(&with_shard(vec![("run_id", s.run_id.as_str())], shard))?;
        let unit_name = format!("mailbench_{}", s.unit);
        let labelled: [LabelledCounter; 2] = [
            (
                unit_name.as_str(),
                "Units of work by how they ended (started = sent).",
                "result",
                vec![
                    ("sent", c.sent),
                    ("accepted", c.accepted),
                    ("rejected", c.rejected),
                    ("errors", c.errors),
                    ("aborted", c.aborted),
                ],
            ),
            (
                "mailbench_recipients",
                "Recipients by outcome.",
                "result",
                vec![
                    ("accepted", c.rcpts.accepted),
                    ("refused", c.rcpts.refused),
                    ("delivered", c.rcpts.delivered),
                ],
            ),
        ];
        for (name, help, label, values) in labelled {
            let mut m = enc.encode_descriptor(name, help, None, MetricType::Counter)?;
            for (value_label, v) in values {
                m.encode_family(&with_shard(vec![(label, value_label)], shard))?
                    .encode_counter::<NoLabelSet, u64, u64>(&v, None)?;
            }
        }
        for (name, help, v) in [
            (
                "mailbench_message_bytes",
                "Bytes of accepted messages.",
                c.bytes,
            ),
            (
                "mailbench_connections",
                "Connections opened.",
                c.connections,
            ),
            (
                "mailbench_tls_connections",
                "Connections that used TLS.",
                c.tls_connections,
            ),
            (
                "mailbench_connect_failures",
                "Connections that could not be opened.",
                c.connect_failures,
            ),
            (
                "mailbench_late_starts",
                "Units started later than the schedule allows (open loop).",
                c.late_starts,
            ),
        ] {
            let mut m = enc.encode_descriptor(name, help, None, MetricType::Counter)?;
            match &s.shard {
                Some(shard) => m
                    .encode_family(&[("shard", shard.as_str())])?
                    .encode_counter::<NoLabelSet, u64, u64>(&v, None)?,
                None => m.encode_counter::<NoLabelSet, u64, u64>(&v, None)?,
            }
        }
        if !s.latency.is_empty() {
            let mut m = enc.encode_descriptor(
                "mailbench_latency_seconds",
                "Latency of each phase, from its intended start.",
                None,
                MetricType::Histogram,
            )?;
            for (phase, b) in &s.latency {
                m.encode_family(&with_shard(vec![("phase", phase.as_str())], shard))?
                    .encode_histogram::<NoLabelSet>(b.sum_s, b.count, &b.per_bucket, None)?;
            }
        }
        for g in &s.gauges {
            let name = format!("mailbench_{}", g.name);
            let mut m = enc.encode_descriptor(&name, g.help, None, MetricType::Gauge)?;
            match &s.shard {
                Some(shard) => m
                    .encode_family(&[("shard", shard.as_str())])?
                    .encode_gauge(&g.value)?,
                None => m.encode_gauge(&g.value)?,
            }
        }
        Ok(())
    }
}

/// `labels` and, for an agent of a split run, its shard: every family carries it.
fn with_shard<'a>(
    mut labels: Vec<(&'a str, &'a str)>,
    shard: Option<&'a str>,
) -> Vec<(&'a str, &'a str)> {
    labels.extend(shard.map(|v| ("shard", v)));
    labels
}

/// The exporter of this process, once `serve` started it.
static LATEST: OnceLock<Mutex<Arc<Snapshot>>> = OnceLock::new();

/// What a relay's embedded sink has delivered so far, as (recipients, messages): read at
/// each scrape, so that the exporter needs nothing of the sink's types.
pub type Delivered = Arc<dyn Fn() -> (u64, u64) + Send + Sync>;

/// A relay's embedded sink's deliveries, while a relay runs: what `delivered` counts.
static DELIVERY: Mutex<Option<Delivered>> = Mutex::new(None);

/// Makes `/metrics` count `delivery`'s recipients as the delivered recipients, and its
/// messages and the backlog as the relay's delivery gauges (a relay's embedded sink, at
/// its start; a relay of several rounds follows each round's).
pub fn follow_delivery(delivery: Delivered) {
    if let Ok(mut d) = DELIVERY.lock() {
        *d = Some(delivery);
    }
}

/// The followed delivery's recipients, messages so far.
fn delivered() -> Option<(u64, u64)> {
    let d = DELIVERY.lock().ok()?.clone()?;
    Some(d())
}

/// `s` with the followed delivery's figures: delivered recipients, and the delivered
/// messages and backlog gauges where the relay has them.
fn with_delivery(mut s: Snapshot) -> Snapshot {
    if let Some((recipients, messages)) = delivered() {
        s.counters.rcpts.delivered = recipients;
        for g in &mut s.gauges {
            match g.name {
                "delivered_messages" => g.value = messages as f64,
                "backlog" => g.value = s.counters.accepted as f64 - messages as f64,
                _ => {}
            }
        }
    }
    s
}

/// Refreshes what the next scrape sees with the followed delivery's latest figures: a
/// relay's embedded sink calls it every interval, so they stay current through the drain,
/// after the generator's last interval.
pub fn refresh_delivery() {
    if let Some(latest) = LATEST.get() {
        let current = latest.lock().map(|s| (**s).clone()).unwrap_or_default();
        publish(|| with_delivery(current));
    }
}

/// Listens on `addr` and serves `/metrics` from a thread of its own until the process ends.
pub fn serve(addr: SocketAddr) -> Result<(), String> {
    let listener = TcpListener::bind(addr)
        .map_err(|e| format!("--prometheus {addr}: cannot listen there: {e}; give a free address, e.g. 127.0.0.1:9464"))?;
    let latest = LATEST.get_or_init(|| Mutex::new(Arc::new(Snapshot::default())));
    std::thread::Builder::new()
        .name("mailbench-metrics".into())
        .spawn(move || {
            for stream in listener.incoming().flatten() {
                let snapshot = latest.lock().map(|s| s.clone()).unwrap_or_default();
                answer(stream, &snapshot);
            }
        })
        .map_err(|e| format!("cannot start the metrics thread: {e}"))?;
    Ok(())
}

/// True when `--prometheus` is serving.
pub fn active() -> bool {
    LATEST.get().is_some()
}

/// Makes `snapshot` what the next scrape sees (a no-op without `--prometheus`).
pub fn publish(snapshot: impl FnOnce() -> Snapshot) {
    if let Some(latest) = LATEST.get() {
        let s = Arc::new(with_delivery(snapshot()));
        if let Ok(mut l) = latest.lock() {
            *l = s;
        }
    }
}

/// Publishes a run's figures at the end of an interval: its totals, the latency of each
/// of `steps`, the interval's rate and CPU, and the engine's own `gauges`.
pub fn publish_interval(
    run_id: u64,
    unit: &'static str,
    total: &crate::stats::Recorder,
    steps: crate::stats::Steps,
    p: &crate::stats::IntervalPoint,
    gauges: Vec<Gauge>,
) {
    publish(|| {
        let mut gauges = gauges;
        gauges.push(Gauge {
            name: "rate_per_second",
            help: "Units accepted per second in the last interval.",
            value: p.msgs_per_sec,
        });
        gauges.push(Gauge {
            name: "cpu_percent",
            help: "mailbench's own CPU in the last interval, % of one core.",
            value: p.cpu_pct,
        });
        Snapshot::new(
            format!("{run_id:016x}"),
            unit,
            total.counters.clone(),
            steps.metrics().map(|m| (steps.name(m), total.hist(m))),
            gauges,
        )
    });
}

/// Publishes a finished run's figures as its results file has them (the gauges of the
/// last interval stay), so that a scrape after the run sees the final totals.
pub fn publish_results(r: &crate::stats::Results) {
    let Some(latest) = LATEST.get() else { return };
    let gauges = latest.lock().map(|s| s.gauges.clone()).unwrap_or_default();
    let unit = crate::stats::kind::find(&r.command).map_or("messages", |k| k.held_noun);
    let hists: Vec<(&str, Histogram<u64>)> = r
        .latency
        .iter()
        .map(|(k, h)| (k.as_str(), h.to_hist()))
        .collect();
    let mut counters = r.counters.clone();
    let mut gauges = gauges;
    // A relay's final delivery figures are its results', not the sink's live counts.
    if let crate::stats::summary::Summary::Relay(relay) = &r.summary {
        if let Ok(mut d) = DELIVERY.lock() {
            *d = None;
        }
        counters.rcpts.delivered = relay.delivered;
        for g in &mut gauges {
            match g.name {
                "delivered_messages" => g.value = relay.delivered_messages as f64,
                "backlog" => g.value = counters.accepted as f64 - relay.delivered_messages as f64,
                "in_flight" => g.value = 0.0,
                _ => {}
            }
        }
    }
    publish(|| {
        Snapshot::new(
            r.run_id.clone(),
            unit,
            counters,
            hists.iter().map(|(k, h)| (*k, h)),
            gauges,
        )
    });
}

/// Answers one HTTP request: `GET /metrics` gets the snapshot, anything else 404. A
/// request is read up to 8 KiB and 2 s; a client that sends more or less is dropped.
fn answer(mut stream: TcpStream, snapshot: &Arc<Snapshot>) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let _ = stream.set_write_timeout(Some(Duration::from_secs(2)));
    let mut buf = [0u8; 8192];
    let mut len = 0;
    while len < buf.len() && !buf[..len].windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf[len..]) {
            Ok(0) | Err(_) => return,
            Ok(n) => len += n,
        }
    }
    let head = &buf[..len];
    let (status, kind, body) = if head.starts_with(b"GET /metrics ") {
        if wants_openmetrics(head) {
            (
                "200 OK",
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
                snapshot.encode(),
            )
        } else {
            (
                "200 OK",
                "text/plain; version=0.0.4; charset=utf-8",
                snapshot.encode_prometheus(),
            )
        }
    } else {
        (
            "404 Not Found",
            "text/plain",
            "only GET /metrics is here\n".into(),
        )
    };
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

/// True when the request's `Accept` header names OpenMetrics (with a non-zero `q`), as
/// Prometheus's scraper does; anything else gets the text format 0.0.4.
fn wants_openmetrics(head: &[u8]) -> bool {
    let head = String::from_utf8_lossy(head);
    head.split("\r\n")
        .filter_map(|l| l.split_once(':'))
        .filter(|(name, _)| name.trim().eq_ignore_ascii_case("accept"))
        .flat_map(|(_, value)| value.split(','))
        .any(|range| {
            let mut parts = range.split(';').map(str::trim);
            let media = parts.next().unwrap_or("");
            let q_zero = parts.any(|p| {
                p.strip_prefix("q=")
                    .and_then(|q| q.parse::<f64>().ok())
                    .is_some_and(|q| q == 0.0)
            });
            media.eq_ignore_ascii_case("application/openmetrics-text") && !q_zero
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_encodes_counters_histograms_and_gauges_by_prometheus_names() {
        let mut h = crate::stats::recorder::new_histogram();
        for us in [50, 800, 3_000, 3_000, 2_000_000] {
            h.record(us).expect("in range");
        }
        let counters = Counters {
            sent: 7,
            accepted: 5,
            rejected: 2,
            ..Default::default()
        };
        let s = Arc::new(Snapshot::new(
            "00ff".into(),
            "messages",
            counters,
            [("total", &h)],
            vec![Gauge {
                name: "in_flight",
                help: "Units started and not finished.",
                value: 3.0,
            }],
        ));
        let text = s.encode();
        for line in [
            "mailbench_run_info{run_id=\"00ff\"} 1",
            "mailbench_messages_total{result=\"accepted\"} 5",
            "mailbench_messages_total{result=\"rejected\"} 2",
            "# TYPE mailbench_latency_seconds histogram",
            "mailbench_latency_seconds_count{phase=\"total\"} 5",
            "mailbench_latency_seconds_bucket{le=\"0.0001\",phase=\"total\"} 1",
            "mailbench_latency_seconds_bucket{le=\"0.001\",phase=\"total\"} 2",
            "mailbench_latency_seconds_bucket{le=\"0.005\",phase=\"total\"} 4",
            "mailbench_latency_seconds_bucket{le=\"2.5\",phase=\"total\"} 5",
            "mailbench_latency_seconds_bucket{le=\"+Inf\",phase=\"total\"} 5",
            "mailbench_in_flight 3.0",
            "# EOF",
        ] {
            assert!(text.contains(line), "expected {line:?} in\n{text}");
        }
        let agent = Arc::new(Snapshot {
            shard: Some("2/4".into()),
            ..(*s).clone()
        });
        let text = agent.encode();
        for line in [
            "mailbench_run_info{run_id=\"00ff\",shard=\"2/4\"} 1",
            "mailbench_messages_total{result=\"accepted\",shard=\"2/4\"} 5",
            "mailbench_connections_total{shard=\"2/4\"} 0",
            "mailbench_latency_seconds_count{phase=\"total\",shard=\"2/4\"} 5",
            "mailbench_in_flight{shard=\"2/4\"} 3.0",
        ] {
            assert!(text.contains(line), "expected {line:?} in\n{text}");
        }
    }

    /// Issue 25 item 12: the text format 0.0.4 has no `info` type and names a counter's
    /// family after its `_total` samples; OpenMetrics stays for a scraper that asks.
    #[test]
    fn issue_25_the_text_format_is_prometheus_0_0_4_unless_openmetrics_is_asked_for() {
        let s = Arc::new(Snapshot::new(
            "00ff".into(),
            "messages",
            Counters {
                accepted: 5,
                ..Default::default()
            },
            std::iter::empty(),
            vec![],
        ));
        let text = s.encode_prometheus();
        for line in [
            "# HELP mailbench_run_info The run these figures belong to.",
            "# TYPE mailbench_run_info gauge",
            "mailbench_run_info{run_id=\"00ff\"} 1",
            "# TYPE mailbench_messages_total counter",
            "mailbench_messages_total{result=\"accepted\"} 5",
            "# TYPE mailbench_connections_total counter",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "expected {line:?} in\n{text}"
            );
        }
        assert!(!text.contains("# EOF") && !text.contains(" info"), "{text}");
        let asks = |accept: &str| {
            wants_openmetrics(format!("GET /metrics HTTP/1.1\r\n{accept}\r\n\r\n").as_bytes())
        };
        // Prometheus 2.x's scrape header.
        assert!(asks(
            "Accept: application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
        ));
        assert!(asks("accept: Application/OpenMetrics-Text"));
        assert!(!asks("Accept: text/plain; version=0.0.4"));
        assert!(!asks("Accept: */*"));
        assert!(!asks("Accept: application/openmetrics-text; q=0"));
        assert!(!asks("Host: x"));
    }

    /// Issue 25 item 12: a relay's `delivered` recipients are what arrived at its sink,
    /// not what the MTA accepted; its delivery gauges follow the sink.
    #[test]
    fn issue_25_a_relays_delivered_recipients_are_the_sinks_arrivals() {
        follow_delivery(Arc::new(|| (759, 759)));
        let mut counters = Counters {
            accepted: 785,
            ..Default::default()
        };
        counters.rcpts.accepted = 785;
        counters.rcpts.delivered = 785;
        let gauge = |name| Gauge {
            name,
            help: "",
            value: 0.0,
        };
        let s = with_delivery(Snapshot::new(
            "07".into(),
            "messages",
            counters,
            std::iter::empty(),
            vec![gauge("delivered_messages"), gauge("backlog")],
        ));
        if let Ok(mut d) = DELIVERY.lock() {
            *d = None;
        }
        let text = Arc::new(s).encode();
        for line in [
            "mailbench_recipients_total{result=\"accepted\"} 785",
            "mailbench_recipients_total{result=\"delivered\"} 759",
            "mailbench_delivered_messages 759.0",
            "mailbench_backlog 26.0",
        ] {
            assert!(text.contains(line), "expected {line:?} in\n{text}");
        }
    }
}
