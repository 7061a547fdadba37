//! The results file: one versioned JSON document per run, shared by every command.
//! See `docs/results-schema.md`. Histograms carry their buckets, so files can be merged.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::collector::IntervalPoint;
use super::hist::HistJson;
use super::metric::Steps;
use super::recorder::{Counters, Recorder};
use super::summary::Summary;

/// Bumped on any incompatible change of the results layout.
pub const SCHEMA_VERSION: u32 = 1;

/// The machine the run happened on.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Environment {
    /// Host name.
    pub hostname: String,
    /// Kernel release.
    pub kernel: String,
    /// CPUs available to the process.
    pub cpus: usize,
    /// mailbench version.
    pub mailbench_version: String,
}

impl Environment {
    /// Reads the current machine's description.
    pub fn current() -> Self {
        let read = |p: &str| {
            std::fs::read_to_string(p)
                .map(|s| s.trim().to_string())
                .unwrap_or_default()
        };
        Environment {
            hostname: read("/proc/sys/kernel/hostname"),
            kernel: read("/proc/sys/kernel/osrelease"),
            cpus: super::cpu::cpu_count(),
            mailbench_version: env!("CARGO_PKG_VERSION").to_string(),
        }
    }
}

/// One row of the error table.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ErrorRow {
    /// Class name (`timeout`, `rejected_5xx`, ...).
    pub class: String,
    /// Phase name.
    pub phase: String,
    /// Reply code, 0 when none.
    pub code: u16,
    /// How many.
    pub count: u64,
    /// The first reason seen (the server's reply, or the connection error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample: Option<String>,
    /// Up to three distinct reasons, the first being `sample`: one code often has
    /// several causes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub samples: Vec<String>,
}

/// What the tool measured about itself.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SelfReport {
    /// User CPU seconds.
    pub cpu_user_s: f64,
    /// System CPU seconds.
    pub cpu_sys_s: f64,
    /// Average CPU in percent of one core.
    pub cpu_avg_pct: f64,
    /// Highest interval CPU in percent of one core.
    pub cpu_peak_pct: f64,
    /// Peak resident memory in KiB.
    pub peak_rss_kib: u64,
    /// Warnings that the tool itself may have limited the result.
    pub warnings: Vec<String>,
}

impl SelfReport {
    /// The report of a run that used `cpu` over `secs`, with its busiest interval at
    /// `cpu_peak_pct`.
    pub fn new(
        cpu: super::cpu::CpuTimes,
        secs: f64,
        cpu_peak_pct: f64,
        warnings: Vec<String>,
    ) -> Self {
        SelfReport {
            cpu_user_s: cpu.user.as_secs_f64(),
            cpu_sys_s: cpu.sys.as_secs_f64(),
            cpu_avg_pct: cpu.total().as_secs_f64() / secs.max(1e-9) * 100.0,
            cpu_peak_pct,
            peak_rss_kib: super::cpu::peak_rss_kib(),
            warnings,
        }
    }
}

/// The outcome of one `--threshold`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ThresholdResult {
    /// The expression as given.
    pub expr: String,
    /// The measured value.
    pub value: f64,
    /// True when the threshold held.
    pub ok: bool,
}

/// The whole results document. Written with `write`, read back with `read`.
#[derive(Debug, Clone, Serialize)]
pub struct Results {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// Which command produced it (`send`, `sink`, `relay`).
    pub command: String,
    /// Random id of the run; also in every trace header.
    pub run_id: String,
    /// Wall-clock start, RFC 3339.
    pub started_at: String,
    /// Wall-clock start in µs since the Unix epoch: time zero of the series (`t_s`).
    pub started_at_us: u64,
    /// Length of the run in seconds.
    pub duration_s: f64,
    /// True when Ctrl-C or SIGTERM cut the run short (what was measured until then is
    /// all here).
    pub interrupted: bool,
    /// The validated configuration.
    pub config: serde_json::Value,
    /// Where it ran.
    pub environment: Environment,
    /// The headline numbers; command-specific, stable keys.
    pub summary: Summary,
    /// All counters.
    pub counters: Counters,
    /// Failures by class, step and code.
    pub errors: Vec<ErrorRow>,
    /// Latency histograms by metric name (only metrics with samples).
    pub latency: BTreeMap<String, HistJson>,
    /// The time series.
    pub series: Vec<IntervalPoint>,
    /// The tool's view of itself.
    #[serde(rename = "self")]
    pub self_report: SelfReport,
    /// Threshold outcomes.
    pub thresholds: Vec<ThresholdResult>,
    /// Command-specific extra sections (loss lists, sweeps, SUT samples...).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, serde_json::Value>,
}

/// A results file as stored, before its summary is read by its command's type.
#[derive(Deserialize)]
struct Stored {
    schema_version: u32,
    command: String,
    run_id: String,
    started_at: String,
    #[serde(default)]
    started_at_us: u64,
    duration_s: f64,
    #[serde(default)]
    interrupted: bool,
    config: serde_json::Value,
    environment: Environment,
    summary: serde_json::Value,
    counters: Counters,
    errors: Vec<ErrorRow>,
    latency: BTreeMap<String, HistJson>,
    series: Vec<IntervalPoint>,
    #[serde(rename = "self")]
    self_report: SelfReport,
    thresholds: Vec<ThresholdResult>,
    #[serde(default)]
    extra: BTreeMap<String, serde_json::Value>,
}

/// What a finished run hands to [`Results::assemble`].
pub struct RunParts {
    /// `send`, `sink`, `relay`.
    pub command: &'static str,
    /// The run id.
    pub run_id: u64,
    /// Wall-clock start, µs since the Unix epoch (time zero of the series).
    pub started_us: u64,
    /// Length in seconds.
    pub duration_s: f64,
    /// The validated configuration.
    pub config: serde_json::Value,
    /// The headline numbers.
    pub summary: Summary,
    /// The names of the protocol's steps (the latency and error tables use them).
    pub steps: Steps,
    /// Everything recorded.
    pub total: Recorder,
    /// The time series.
    pub series: Vec<IntervalPoint>,
    /// The tool's view of itself.
    pub self_report: SelfReport,
}

impl Results {
    /// Drops the system under test's cost (`extra.sut` and each point's readings) when
    /// no process of it was ever seen: a server of one's own that was not named
    /// (`--sut-pid`) was not observed, and not observed is absent, never zero.
    pub fn forget_unobserved_sut(&mut self) {
        let seen = self
            .extra
            .get("sut")
            .is_some_and(|s| s["peak_procs"].as_u64().unwrap_or(0) > 0);
        if seen {
            return;
        }
        self.extra.remove("sut");
        for p in &mut self.series {
            p.relay.sut = None;
        }
    }

    /// The results document of a finished run (thresholds still to be checked).
    pub fn assemble(p: RunParts) -> Results {
        let (latency, errors) = Results::tables(&p.total, p.steps);
        Results {
            schema_version: SCHEMA_VERSION,
            command: p.command.into(),
            run_id: format!("{:016x}", p.run_id),
            started_at: humantime::format_rfc3339_seconds(
                std::time::UNIX_EPOCH + std::time::Duration::from_micros(p.started_us),
            )
            .to_string(),
            started_at_us: p.started_us,
            duration_s: p.duration_s,
            interrupted: false,
            config: p.config,
            environment: Environment::current(),
            summary: p.summary,
            counters: p.total.counters,
            errors,
            latency,
            series: p.series,
            self_report: p.self_report,
            thresholds: Vec::new(),
            extra: BTreeMap::new(),
        }
    }

    /// The latency section and error table of a cumulative recorder, named by `steps`.
    pub fn tables(total: &Recorder, steps: Steps) -> (BTreeMap<String, HistJson>, Vec<ErrorRow>) {
        let latency = steps
            .metrics()
            .filter(|m| !total.hist(*m).is_empty())
            .map(|m| {
                (
                    steps.name(m).to_string(),
                    HistJson::from_hist(total.hist(m)),
                )
            })
            .collect();
        let errors = total
            .errors
            .iter()
            .map(|(k, v)| ErrorRow {
                class: k.class.name().to_string(),
                phase: steps.name(k.step).to_string(),
                code: k.code,
                count: *v,
                sample: total.samples.get(k).and_then(|s| s.texts.first().cloned()),
                samples: total
                    .samples
                    .get(k)
                    .map(|s| s.texts.clone())
                    .unwrap_or_default(),
            })
            .collect();
        (latency, errors)
    }

    /// Reads a results file, checking that its schema is the one this version writes.
    pub fn read(path: &Path) -> Result<Results, String> {
        let named = |why: String| format!("results file {}: {why}", path.display());
        let text =
            std::fs::read_to_string(path).map_err(|e| named(format!("cannot read it: {e}")))?;
        let raw: Stored =
            serde_json::from_str(&text).map_err(|e| named(format!("not a results file: {e}")))?;
        Results::from_stored(raw).map_err(named)
    }

    fn from_stored(raw: Stored) -> Result<Results, String> {
        if raw.schema_version != SCHEMA_VERSION {
            return Err(format!(
                "schema_version {} is not {SCHEMA_VERSION}; read it with the mailbench that wrote it",
                raw.schema_version
            ));
        }
        let summary = super::kind::decode(&raw.command, raw.summary)?;
        Ok(Results {
            schema_version: raw.schema_version,
            command: raw.command,
            run_id: raw.run_id,
            started_at: raw.started_at,
            started_at_us: raw.started_at_us,
            duration_s: raw.duration_s,
            interrupted: raw.interrupted,
            config: raw.config,
            environment: raw.environment,
            summary,
            counters: raw.counters,
            errors: raw.errors,
            latency: raw.latency,
            series: raw.series,
            self_report: raw.self_report,
            thresholds: raw.thresholds,
            extra: raw.extra,
        })
    }

    /// The labelled documents a comparison of several servers keeps in `extra.sides`
    /// (`relay --lab postfix,exim,…`), one per server; empty for an ordinary run.
    pub fn sides(&self) -> Result<Vec<(String, Results)>, String> {
        let Some(list) = self.extra.get("sides").and_then(|v| v.as_array()) else {
            return Ok(Vec::new());
        };
        list.iter()
            .map(|side| {
                let label = side["label"].as_str().unwrap_or("?").to_string();
                let raw: Stored = serde_json::from_value(side["results"].clone())
                    .map_err(|e| format!("side {label}: not a results document: {e}"))?;
                Ok((
                    label.clone(),
                    Results::from_stored(raw).map_err(|e| format!("side {label}: {e}"))?,
                ))
            })
            .collect()
    }

    /// Writes the document, pretty-printed.
    pub fn write(&self, path: &Path) -> Result<(), String> {
        let text = serde_json::to_string_pretty(self)
            .map_err(|e| format!("cannot encode results: {e}"))?;
        std::fs::write(path, text + "\n")
            .map_err(|e| format!("cannot write results to {}: {e}", path.display()))
    }
}
