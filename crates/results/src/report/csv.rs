//! CSV outputs of the time series (mailbench's own per-interval columns, and Postal's
//! per-minute format `time,messages,data(K),errors,connections,SSL connections`), and the
//! field quoting the other CSV writers share.

use std::fmt::Write as _;

use crate::stats::IntervalPoint;

/// One CSV field: quoted (with quotes doubled) when it holds a comma, quote or line break.
pub fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Per-interval CSV, one row per series point. Relay runs add the delivery side (delivered,
/// backlog, end-to-end p99), the system under test and the `--queue-cmd` value; a cell is
/// empty where an interval has no reading.
pub fn interval_csv(series: &[IntervalPoint]) -> String {
    let relay = series.iter().any(|p| p.relay.backlog.is_some());
    let mut out = String::from(
        "t_s,sent,accepted,rejected,errors,bytes,connections,tls_connections,msgs_per_sec,p50_ms,p99_ms,lag_p99_ms,cpu_pct",
    );
    if relay {
        out.push_str(
            ",delivered,backlog,e2e_p99_ms,sut_cpu_user_pct,sut_cpu_sys_pct,sut_read_kib_s,sut_write_kib_s,sut_rss_kib,sut_procs,queue,device_read_iops,device_write_iops,device_util_pct,load1",
        );
    }
    out.push('\n');
    for p in series {
        let c = &p.counters;
        let _ = write!(
            out,
            "{:.3},{},{},{},{},{},{},{},{:.1},{:.3},{:.3},{:.3},{:.1}",
            p.t_s,
            c.sent,
            c.accepted,
            c.rejected,
            c.errors,
            c.bytes,
            c.connections,
            c.tls_connections,
            p.msgs_per_sec,
            p.p50_ms,
            p.p99_ms,
            p.lag_p99_ms,
            p.cpu_pct
        );
        if relay {
            let cell = |v: Option<String>| v.unwrap_or_default();
            let sut = p.relay.sut.as_ref();
            let cells = [
                cell(p.relay.delivered.map(|v| v.to_string())),
                cell(p.relay.backlog.map(|v| v.to_string())),
                cell(p.e2e_p99_ms.map(|v| format!("{v:.3}"))),
                cell(sut.map(|s| format!("{:.1}", s.cpu_user_pct))),
                cell(sut.map(|s| format!("{:.1}", s.cpu_sys_pct))),
                cell(sut.map(|s| format!("{:.1}", s.read_kib_s))),
                cell(sut.map(|s| format!("{:.1}", s.write_kib_s))),
                cell(sut.map(|s| s.rss_kib.to_string())),
                cell(sut.map(|s| s.procs.to_string())),
                cell(p.relay.queue.map(|v| v.to_string())),
                cell(
                    sut.and_then(|s| s.device_read_iops)
                        .map(|v| format!("{v:.1}")),
                ),
                cell(
                    sut.and_then(|s| s.device_write_iops)
                        .map(|v| format!("{v:.1}")),
                ),
                cell(
                    sut.and_then(|s| s.device_util_pct)
                        .map(|v| format!("{v:.1}")),
                ),
                cell(sut.and_then(|s| s.load1).map(|v| format!("{v:.2}"))),
            ];
            for c in cells {
                out.push(',');
                out.push_str(&c);
            }
        }
        out.push('\n');
    }
    out
}

/// Postal's per-minute CSV. Postal prints, per wall-clock minute (`HH:MM`, local time),
/// messages sent, KiB of data, errors, connections and TLS connections. Each interval
/// counts in the minute its middle falls in; `start_us` is the wall clock of the series'
/// time zero and `label` names a minute (its first second, Unix time).
pub fn postal_csv(series: &[IntervalPoint], start_us: u64, label: fn(u64) -> String) -> String {
    let mut out = String::from("time,messages,data(K),errors,connections,SSL connections\n");
    let mut minute: Option<u64> = None;
    let mut acc = [0u64; 5];
    let flush = |out: &mut String, m: u64, acc: &[u64; 5]| {
        let _ = writeln!(
            out,
            "{},{},{},{},{},{}",
            label(m * 60),
            acc[0],
            acc[1] / 1024,
            acc[2],
            acc[3],
            acc[4]
        );
    };
    for p in series {
        let mid_us = start_us + ((p.t_s - p.dt_s / 2.0).max(0.0) * 1e6) as u64;
        let m = mid_us / 60_000_000;
        if let Some(cur) = minute.filter(|cur| *cur != m) {
            flush(&mut out, cur, &acc);
            acc = [0; 5];
        }
        minute = Some(m);
        let c = &p.counters;
        acc[0] += c.accepted;
        acc[1] += c.bytes;
        acc[2] += c.errors + c.rejected;
        acc[3] += c.connections;
        acc[4] += c.tls_connections;
    }
    if let Some(m) = minute {
        flush(&mut out, m, &acc);
    }
    out
}

/// `HH:MM` of a Unix time in the local time zone, as postal prints it.
pub fn local_hh_mm(unix_s: u64) -> String {
    let t = unix_s as libc::time_t;
    let mut tm = std::mem::MaybeUninit::<libc::tm>::zeroed();
    #[allow(unsafe_code)]
    // SAFETY: localtime_r reads `t` and writes only the struct it is given.
    let filled = unsafe { !libc::localtime_r(&t, tm.as_mut_ptr()).is_null() };
    if !filled {
        return utc_hh_mm(unix_s);
    }
    #[allow(unsafe_code)]
    // SAFETY: localtime_r succeeded, so the struct is initialised.
    let tm = unsafe { tm.assume_init() };
    format!("{:02}:{:02}", tm.tm_hour, tm.tm_min)
}

/// `HH:MM` of a Unix time in UTC.
pub fn utc_hh_mm(unix_s: u64) -> String {
    format!("{:02}:{:02}", (unix_s / 3600) % 24, (unix_s / 60) % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(t: f64, accepted: u64) -> IntervalPoint {
        let mut p = IntervalPoint {
            t_s: t,
            dt_s: 1.0,
            ..Default::default()
        };
        p.counters.accepted = accepted;
        p.counters.bytes = accepted * 2048;
        p
    }

    #[test]
    fn postal_csv_groups_by_wall_clock_minute() {
        // The case: a run from 20:05:46, 90 one-second intervals of 10 messages.
        let start_us = (20 * 3600 + 5 * 60 + 46) * 1_000_000;
        let series: Vec<_> = (1..=90).map(|s| point(s as f64, 10)).collect();
        let csv = postal_csv(&series, start_us, utc_hh_mm);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(
            lines[0],
            "time,messages,data(K),errors,connections,SSL connections"
        );
        // 20:05:46-20:06:00 holds 14 intervals, 20:06 a full 60, 20:07 the last 16.
        assert_eq!(lines[1], "20:05,140,280,0,0,0");
        assert_eq!(lines[2], "20:06,600,1200,0,0,0");
        assert_eq!(lines[3], "20:07,160,320,0,0,0");
        assert_eq!(lines.len(), 4);
    }

    #[test]
    fn relay_rows_carry_delivery_backlog_the_mta_and_the_queue() {
        let mut a = point(1.0, 5);
        a.relay.delivered = Some(3);
        a.relay.backlog = Some(2);
        a.relay.sut = Some(crate::stats::SutPoint {
            cpu_user_pct: 50.0,
            procs: 12,
            device_write_iops: Some(120.0),
            load1: Some(1.5),
            ..Default::default()
        });
        a.relay.queue = Some(4.0);
        let mut b = point(2.0, 0);
        b.relay.delivered = Some(2);
        b.relay.backlog = Some(0);
        let csv = interval_csv(&[a, b]);
        let lines: Vec<&str> = csv.lines().collect();
        assert!(
            lines[0].ends_with(",delivered,backlog,e2e_p99_ms,sut_cpu_user_pct,sut_cpu_sys_pct,sut_read_kib_s,sut_write_kib_s,sut_rss_kib,sut_procs,queue,device_read_iops,device_write_iops,device_util_pct,load1"),
            "{}",
            lines[0]
        );
        assert!(
            lines[1].ends_with(",3,2,,50.0,0.0,0.0,0.0,0,12,4,,120.0,,1.50"),
            "{}",
            lines[1]
        );
        assert!(lines[2].ends_with(",2,0,,,,,,,,,,,,"), "{}", lines[2]);
        let columns = lines[0].split(',').count();
        for l in &lines[1..] {
            assert_eq!(l.split(',').count(), columns, "{l}");
        }
    }

    #[test]
    fn interval_csv_has_a_row_per_point() {
        let csv = interval_csv(&[point(1.0, 5), point(2.0, 7)]);
        assert_eq!(csv.lines().count(), 3);
        assert!(csv.lines().nth(2).expect("row").starts_with("2.000,0,7,"));
        assert!(
            !csv.contains("backlog"),
            "send runs have no relay columns: {csv}"
        );
    }
}
