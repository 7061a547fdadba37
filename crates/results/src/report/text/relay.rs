//! A relay's summary (`relay`, `mailbox arrival`): injection, delivery, drain, the MTA's
//! cost, a capacity search's steps, then the injection's detail.

use std::fmt::Write as _;

use super::generator::render;
use super::parts::*;
use crate::stats::summary::Summary;
use crate::stats::{Results, Steps};

/// Seed 003's "+s to flush" (the time the MTA took to deliver what it still held when
/// injection ended) and the bytes it moved, where the run has them. A last arrival before
/// the end of injection is said so, with how long before: "+0.00 s" read as a flush that
/// took no time.
fn after_injection(out: &mut String, s: &crate::stats::summary::RelaySummary) {
    if let Some(end) = s.drain_end_after_injection_s {
        let last = match (
            s.last_arrival_before_injection_end_s,
            s.last_arrival_after_injection_s,
        ) {
            (Some(b), _) => {
                format!("last arrival {b:.2} s before the end of injection (nothing left to flush)")
            }
            (None, Some(t)) => format!("last arrival +{t:.2} s"),
            (None, None) => "no arrival".to_string(),
        };
        let _ = writeln!(
            out,
            "  to flush   {last}, drain ended +{end:.2} s after the end of injection"
        );
    }
    if let Some(to) = s.net_to_mta_bytes {
        let from = s
            .net_from_mta_bytes
            .map_or(String::new(), |b| format!(", MTA to sink {b}"));
        let _ = writeln!(out, "  network    bytes generator to MTA {to}{from}");
    }
}

/// The hops `--link` shaped (`config.relay.links`), one line: a run's latencies and
/// drain include them.
fn links(out: &mut String, r: &Results) {
    let Some(links) = r.config["relay"]["links"].as_array() else {
        return;
    };
    let shown: Vec<String> = links
        .iter()
        .map(|l| {
            let ms = |k: &str| l[k].as_f64().unwrap_or(0.0);
            let mut parts = Vec::new();
            if ms("delay") > 0.0 {
                let jitter = match ms("jitter") {
                    j if j > 0.0 => format!(" ± {j} ms"),
                    _ => String::new(),
                };
                parts.push(format!("{} ms{jitter} delay", ms("delay")));
            }
            if let Some(rate) = l["rate_bytes_s"].as_u64() {
                parts.push(format!("{rate} bytes/s per connection"));
            }
            let hop = match l["hop"].as_str() {
                Some("mta") => "mailbench to MTA",
                Some("mta-mta") => "MTA to MTA",
                _ => "MTA to sink",
            };
            format!("{hop}: {}", parts.join(", "))
        })
        .collect();
    let _ = writeln!(out, "  link       {} each way (--link)", shown.join("; "));
}

/// Renders the summary of a relay run; `steps` name the injection's latency rows.
pub fn render_relay(r: &Results, steps: Steps, headline: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{headline}");
    let _ = writeln!(out);
    let Summary::Relay(s) = &r.summary else {
        return out;
    };
    let i = &s.injection;
    // A capacity search or a sweep ran many steps; the figures down to its table are the
    // last step's alone, which a reader would otherwise take for the whole run's.
    let steps_of = |key: &str| r.extra.get(key).and_then(|v| v.as_array()).map(Vec::len);
    if let Some(n) = steps_of("find_max") {
        let _ = writeln!(
            out,
            "  (the figures down to the table are the last of the search's {n} steps; the table has them all)"
        );
    } else if let Some(n) = steps_of("sweep") {
        let _ = writeln!(
            out,
            "  (the figures down to the table are the last of the sweep's {n} levels; the table has them all)"
        );
    }
    let _ = writeln!(
        out,
        "  injected   sent {}  accepted {}  rejected {}  errors {}   {:.0} msg/min accepted",
        i.sent, i.accepted, i.rejected, i.errors, s.inject_mpm
    );
    let unit = if s.drain_per_recipient {
        "recipients"
    } else {
        "messages"
    };
    let from = if s.release_at_s.is_some() {
        "release"
    } else {
        "first injection"
    };
    let drain = match (s.drain_mpm, s.drain_s) {
        (Some(mpm), Some(d)) => format!(
            "drain {mpm:.0} {unit}/min (last arrival {d:.2} s after the {from}){}",
            s.delivery_per_sec.map_or(String::new(), |r| format!(
                ", delivering at {r:.1}/s (the pace between the first and last 5 % of arrivals)"
            ))
        ),
        _ => "no message arrived".to_string(),
    };
    let _ = writeln!(
        out,
        "  delivered  {} of {} recipients ({} messages{})  bounced {}  {}  duplicates {}{}   {drain}",
        s.delivered,
        s.expected_recipients,
        s.delivered_messages,
        if s.damaged > 0 {
            format!(
                ": {} intact, {} damaged, cut or altered",
                s.delivered_messages.saturating_sub(s.damaged),
                s.damaged
            )
        } else {
            String::new()
        },
        s.bounced,
        if s.drain_aborted {
            format!(
                "undelivered {} (the drain was aborted: not lost)",
                s.undelivered
            )
        } else {
            format!("lost {}", s.lost)
        },
        s.duplicates,
        match (s.drained, s.drain_aborted) {
            (true, _) => "",
            (false, true) => "  DRAIN ABORTED",
            (false, false) => "  NOT DRAINED",
        },
    );
    if let (Some(held), Some(at)) = (s.flush_held, s.release_at_s) {
        let _ = writeln!(
            out,
            "  flush      {held} messages held during injection, released {at:.2} s after the first injection; the drain counts from there"
        );
    }
    fault_line(&mut out, s);
    after_injection(&mut out, s);
    links(&mut out, r);
    let _ = writeln!(
        out,
        "  end to end {}   max backlog {}{}",
        match (s.e2e_p50_ms, s.e2e_p99_ms) {
            (Some(p50), Some(p99)) =>
                format!("p50 {p50:.3} ms  p99 {p99:.3} ms (from the end of each message's data)"),
            _ => "none: no message arrived".to_string(),
        },
        s.max_backlog,
        if s.drain_per_recipient {
            " recipients (messages arrived in several copies: drain and backlog count recipients)"
        } else {
            ""
        }
    );
    if s.delivered_before_accept > 0 {
        let _ = writeln!(
            out,
            "  before 250 {} of {} messages reached the receiver before the MTA's 250 reached the client (by up to {:.3} ms)",
            s.delivered_before_accept,
            s.delivered_messages,
            s.before_accept_max_ms.unwrap_or(0.0)
        );
    }
    if let (Some(p50), Some(p99)) = (s.e2e_recipient_p50_ms, s.e2e_recipient_p99_ms) {
        let _ = writeln!(
            out,
            "  per rcpt   end to end p50 {p50:.3} ms  p99 {p99:.3} ms (messages arrived in several copies: each recipient timed by its own)"
        );
    }
    let _ = writeln!(
        out,
        "  other mail bounces (null sender) {}  delay notices {}  untraced {}  cut off before their 250 but delivered {}",
        s.bounces, s.delay_notices, s.untraced, s.aborted_delivered
    );
    if let Some(n) = s.receiver_rejected {
        receiver(&mut out, n, &r.extra["sink"]["faults"]);
    }
    // The sink's tarpit refuses nothing, so it has no count above: named when set, lest
    // the MTA's slow deliveries look like its own.
    if let Some(t) = r.config["relay"]["sink_tarpit_s"]
        .as_f64()
        .filter(|t| *t > 0.0)
    {
        let _ = writeln!(
            out,
            "  receiver   tarpit {t} s before every reply (--sink-tarpit): the MTA's deliveries wait for it"
        );
    }
    if let Some(sent) = s.maillog_sent {
        let _ = writeln!(
            out,
            "  MTA log    delivered {sent}{}{}  still queued {}",
            log_beside_sink(sent, s),
            s.maillog_bounced
                .map_or(String::new(), |b| format!("  bounced {b}")),
            opt(s.queued_left)
        );
    }
    super::queues::line(&mut out, s);
    if let (Some(n), Some(per)) = (s.lookups, s.lookups_per_msg) {
        let _ = writeln!(
            out,
            "  lookups    {n} ({per:.2} per message)  searches cut (directory down) {}  latency p50 {} ms  p99 {} ms",
            opt(s.lookups_failed),
            s.lookup_p50_ms.map_or("-".into(), |v| format!("{v:.2}")),
            s.lookup_p99_ms.map_or("-".into(), |v| format!("{v:.2}"))
        );
    }
    let source = r.extra.get("delivered_source").and_then(|v| v.as_str());
    if let (Some(src), None) = (source, s.maillog_sent) {
        let _ = writeln!(out, "  MTA log    off: delivered counted by the {src}");
    }
    io_per_message(&mut out, r);
    sut_cost(&mut out, r, "MTA");
    if let Some(rows) = r.extra.get("find_max").and_then(|v| v.as_array()) {
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "  {:>10} {:>10} {:>11} {:>10} {:>11} {:>6}  verdict",
            "rate/s", "injected/s", "delivered/s", "e2e p99", "max backlog", "lost"
        );
        for row in rows {
            let f = |k: &str| row[k].as_f64().unwrap_or(0.0);
            let _ = writeln!(
                out,
                "  {:>10.1} {:>10} {:>11} {:>10} {:>11} {:>6}  {}",
                f("rate_per_sec"),
                cell(&row["inject_per_sec"], 1),
                cell(&row["delivery_per_sec"], 1),
                cell(&row["e2e_p99_ms"], 1),
                f("max_backlog") as i64,
                f("lost") as u64,
                row["why"].as_str().unwrap_or("")
            );
        }
        let _ = match s.max_sustainable_per_sec {
            Some(best) if best > 0.0 => writeln!(
                out,
                "  maximum sustainable rate: {best:.1} msg/s ({:.0} msg/min): injected and delivered at the rate offered, the backlog not growing",
                best * 60.0
            ),
            _ => writeln!(
                out,
                "  maximum sustainable rate: none — no step was injected and delivered at its rate, down to 1/s"
            ),
        };
    }
    if let Some(rows) = r.extra.get("sweep").and_then(|v| v.as_array()) {
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "  {:>8} {:>11} {:>10} {:>11} {:>10} {:>10} {:>11} {:>6}  verdict",
            "sessions",
            "inject MPM",
            "drain MPM",
            "delivered/s",
            "e2e p50",
            "e2e p99",
            "max backlog",
            "lost"
        );
        for row in rows {
            let f = |k: &str| row[k].as_f64().unwrap_or(0.0);
            let _ = writeln!(
                out,
                "  {:>8} {:>11.0} {:>10} {:>11} {:>10} {:>10} {:>11} {:>6}  {}",
                f("concurrency") as u64,
                f("inject_mpm"),
                cell(&row["drain_mpm"], 0),
                cell(&row["delivery_per_sec"], 1),
                cell(&row["e2e_p50_ms"], 1),
                cell(&row["e2e_p99_ms"], 1),
                f("max_backlog") as i64,
                f("lost") as u64,
                row["why"].as_str().unwrap_or("")
            );
        }
        super::parts::settles(&mut out, rows, "level", |row| {
            let s = &row["settle"];
            format!(
                "{}: {} s, {} accepted",
                row["concurrency"],
                cell(&s["duration_s"], 1),
                s["accepted"]
            )
        });
        let _ = writeln!(out, "  (the detail below is the last level's)");
    }
    let _ = writeln!(out);
    out.push_str(&render(r, steps, "  injection detail:").replacen(
        "  injection detail:\n\n",
        "",
        1,
    ));
    out
}

/// Why the MTA log's `sent` deliveries differ from the delivered line's count, where they
/// do: a newcomer read "MTA log delivered 117" against "delivered 100 of 100" as a
/// miscount. The log counts every delivery the MTA made: also those of messages whose
/// transaction a fault cut before its 250 reached the client (the client counts them as
/// errors, not accepted; the sink's count of them is `aborted_delivered`), and the second
/// copies of messages it delivered twice (the sink's `duplicates`: a newcomer's Sendmail
/// power cut read "39 more … transactions cut" where 32 were duplicates).
fn log_beside_sink(sent: u64, s: &crate::stats::summary::RelaySummary) -> String {
    let of_accepted = s.delivered;
    if sent > of_accepted {
        let more = sent - of_accepted;
        let (cut, dup) = (s.aborted_delivered, s.duplicates);
        // Sendmail delivers before its 250 and logs after: a kill between the two leaves
        // deliveries the sink got and the log never shows (power-loss@100: log 303, the
        // sink 300 + 7 cut).
        let sink_total = of_accepted + cut + dup;
        let unlogged = match sink_total.checked_sub(sent) {
            Some(k) if k > 0 => {
                format!(", and {k} of the sink's {sink_total} deliveries have no line in the log")
            }
            _ => String::new(),
        };
        let mut got = Vec::new();
        if cut > 0 {
            got.push(format!(
                "{cut} from transactions cut before their 250 reached the client, after the MTA had queued them"
            ));
        }
        if dup > 0 {
            got.push(format!(
                "{dup} second copies of accepted messages (duplicates)"
            ));
        }
        let why = if got.is_empty() {
            "transactions cut before their 250 reached the client, after the MTA had queued them, or mail not of this run".to_string()
        } else {
            format!("the sink got {}{unlogged}", got.join(", and "))
        };
        format!(" ({more} more than the {of_accepted} accepted ones delivered: {why})")
    } else if sent < of_accepted {
        format!(
            " ({} fewer than the {of_accepted} the receiver counted)",
            of_accepted - sent
        )
    } else {
        String::new()
    }
}

/// `--trace-io`'s line: what the MTA's processes asked of the kernel per delivered
/// message, the figures that explain a disk queue's rate (nothing without the flag).
fn io_per_message(out: &mut String, r: &Results) {
    let Summary::Relay(s) = &r.summary else {
        return;
    };
    let (Some(fsyncs), Some(created), Some(renames), Some(unlinks), Some(bytes), Some(cs)) = (
        s.fsyncs_per_msg,
        s.files_created_per_msg,
        s.renames_per_msg,
        s.unlinks_per_msg,
        s.bytes_written_per_msg,
        s.ctx_switches_per_msg,
    ) else {
        return;
    };
    let lost = r
        .extra
        .get("iotrace")
        .and_then(|io| io["lost"].as_u64())
        .unwrap_or(0);
    let _ = writeln!(
        out,
        "  MTA I/O    per message: fsyncs {fsyncs:.2}  files created {created:.2}  renamed {renames:.2}  unlinked {unlinks:.2}  written {:.1} KiB  context switches {cs:.1}{}",
        bytes / 1024.0,
        if lost > 0 {
            format!("  ({lost} kernel events lost: the counts are low)")
        } else {
            String::new()
        }
    );
}

/// A step row's figure with `decimals`, or `-` where there is none (nothing arrived).
fn cell(v: &serde_json::Value, decimals: usize) -> String {
    v.as_f64()
        .map_or_else(|| "-".to_string(), |x| format!("{x:.decimals$}"))
}

/// The sink's fault kinds that hold a reply and refuse nothing: a `delay=` rule's and a
/// `pace=RATE` rule's. Every other kind is a negative reply (or none at all).
const HELD: [&str; 2] = ["delay", "paced"];

/// The receiver's lines: its `n` negative replies with the sink rules that gave them, and
/// apart from them the replies its delay and pace rules held (`faults`: the sink's count
/// per kind). A held reply is counted per reply the sink sent, so a message the MTA
/// sent again (after a crash, or in duplicate) counts once per copy: a crash run with a
/// pace showed `paced 337` of 295 deliveries, among the negative replies.
fn receiver(out: &mut String, n: u64, faults: &serde_json::Value) {
    let fired = |held: bool| {
        faults
            .as_object()
            .map(|m| {
                m.iter()
                    .filter(|(k, v)| {
                        v.as_u64().unwrap_or(0) > 0 && HELD.contains(&k.as_str()) == held
                    })
                    .map(|(k, v)| format!("{k} {v}"))
                    .collect::<Vec<_>>()
                    .join("  ")
            })
            .unwrap_or_default()
    };
    let (refused, held) = (fired(false), fired(true));
    let _ = writeln!(
        out,
        "  receiver   negative replies {n}{}: each a delivery the MTA had to try again or bounce",
        if refused.is_empty() {
            String::new()
        } else {
            format!(" (sink rules fired: {refused})")
        }
    );
    if !held.is_empty() {
        let _ = writeln!(
            out,
            "  receiver   replies held, none refused: {held} (sink rules' replies that waited: one per reply sent, every copy or retry of a message counted again)"
        );
    }
}

/// `--fault`'s line: when the MTA was killed, how long it was down, what it lost, damaged
/// and duplicated, and how soon it delivered again.
fn fault_line(out: &mut String, s: &crate::stats::summary::RelaySummary) {
    let Some(fault) = &s.fault else {
        return;
    };
    let (Some(at), Some(before), Some(down)) =
        (s.fault_at_s, s.fault_accepted_before, s.fault_down_s)
    else {
        let _ = writeln!(
            out,
            "  fault      {fault}: never fired (the count was not reached)"
        );
        return;
    };
    if let Some(refused) = s.fault_refused_4xx {
        let after = match (s.restart_first_delivery_s, s.restart_last_delivery_s) {
            (Some(a), Some(b)) => {
                format!("first delivery {a:.2} s after the space was freed, last {b:.2} s")
            }
            _ => "nothing delivered after the space was freed".into(),
        };
        let _ = writeln!(
            out,
            "  fault      {fault} at {at:.2} s ({before} accepted): disk full for {down:.2} s, {refused} replies 4xx (see errors); {after}; lost {}, damaged {} (arrived cut or altered), duplicated {} messages",
            s.lost,
            s.damaged,
            s.fault_duplicated_messages.unwrap_or(0)
        );
        return;
    }
    let after = match (s.restart_first_delivery_s, s.restart_last_delivery_s) {
        (Some(a), Some(b)) => format!("first delivery {a:.2} s after the restart, last {b:.2} s"),
        _ => "nothing delivered after the restart".into(),
    };
    let unsynced = s.fault_unsynced_files.map_or(String::new(), |n| {
        format!(", {n} queue files unsynced at the cut")
    });
    // Closed loop makes up what the outage cut; open loop keeps its schedule, and what
    // failed meanwhile is its cost (a newcomer's open-loop crash: 176 of 300 failed, and
    // the line said nothing of it).
    let made_up = match s.fault_made_up {
        Some(n) if n > 0 => format!(
            "; {n} messages cut or refused while it was down (in errors) replaced by as many new ones after the restart"
        ),
        None if s.injection.errors > 0 => format!(
            "; {} sends failed in all (see errors), none replaced: the open loop kept its schedule",
            s.injection.errors
        ),
        _ => String::new(),
    };
    let _ = writeln!(
        out,
        "  fault      {fault} at {at:.2} s ({before} accepted): down {down:.2} s{unsynced}{made_up}; {after}; lost {}, damaged {} (arrived cut or altered), duplicated {} messages",
        s.lost,
        s.damaged,
        s.fault_duplicated_messages.unwrap_or(0)
    );
}
