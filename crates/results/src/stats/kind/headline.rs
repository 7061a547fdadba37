//! What a report puts first for each kind of run: the few figures that answer "what did
//! this run find", in plain words with units, and the words its charts use for the unit
//! rate and the watched device. Kept beside the kinds so that a new kind brings its
//! headline with it instead of the report matching command names.
//!
//! Figures read the results document as JSON (`summary`, `extra`, `config`), so that one
//! figure may come from any part of it, or be worked out from several (the MTA's CPU per
//! message); a figure a run has no value for is left out.

use serde_json::Value;

/// One figure of a headline.
#[derive(Debug, Clone, Copy)]
pub struct Figure {
    /// Stable id: the page marks the figure with it, so that a reader or a test finds it.
    pub id: &'static str,
    /// What it is, in plain words.
    pub label: &'static str,
    /// Its unit ("" for a count or a name).
    pub unit: &'static str,
    /// Its value, from the results document (`{summary, extra, config}`).
    pub value: fn(&Value) -> Option<Value>,
}

/// A kind's headline and the words its charts use.
#[derive(Debug, Clone, Copy)]
pub struct Headline {
    /// The figures, most telling first.
    pub figures: &'static [Figure],
    /// The legend of the throughput chart's rate of units done (`accepted/s` would be
    /// wrong for sessions or commands).
    pub throughput: &'static str,
    /// What the server's watched device holds, as the device charts name it.
    pub device: &'static str,
    /// What the server under test is, as its resource charts and table name it.
    pub server: &'static str,
}

/// The value at JSON pointer `path` of the document, when it is a value at all.
pub fn at(doc: &Value, path: &str) -> Option<Value> {
    doc.pointer(path).filter(|v| !v.is_null()).cloned()
}

/// The MTA's (or store's) CPU time per unit in ms: user plus system CPU of the server over
/// the count at `per`, rounded to µs.
fn cpu_ms_per(doc: &Value, per: &str) -> Option<Value> {
    let sut = doc.pointer("/extra/sut")?;
    let cpu_s = sut["cpu_user_s"].as_f64()? + sut["cpu_sys_s"].as_f64()?;
    let n = doc.pointer(per)?.as_f64().filter(|n| *n > 0.0)?;
    Some(Value::from((cpu_s * 1e6 / n).round() / 1e3))
}

/// How many times the DNS fault rules fired, in all (a server without rules: none).
fn faults_fired(doc: &Value) -> Option<Value> {
    let faults = doc.pointer("/extra/dns/faults")?.as_array()?;
    Some(
        faults
            .iter()
            .map(|f| f["fired"].as_u64().unwrap_or(0))
            .sum::<u64>()
            .into(),
    )
}

/// `relay` and `mailbox arrival`: how fast the MTA delivered, whether everything arrived
/// once, how long a message took, and what the MTA cost.
pub const RELAY: Headline = Headline {
    figures: &[
        Figure {
            id: "drain_mpm",
            label: "drain rate",
            unit: "msg/min",
            value: |d| at(d, "/summary/drain_mpm"),
        },
        Figure {
            id: "delivered",
            label: "delivered",
            unit: "recipients",
            value: |d| at(d, "/summary/delivered"),
        },
        Figure {
            id: "lost",
            label: "lost",
            unit: "",
            value: |d| at(d, "/summary/lost"),
        },
        Figure {
            id: "damaged",
            label: "damaged (arrived cut or altered)",
            unit: "",
            value: |d| at(d, "/summary/damaged"),
        },
        Figure {
            id: "duplicates",
            label: "duplicates",
            unit: "",
            value: |d| at(d, "/summary/duplicates"),
        },
        Figure {
            id: "e2e_p50_ms",
            label: "end to end p50",
            unit: "ms",
            value: |d| at(d, "/summary/e2e_p50_ms"),
        },
        Figure {
            id: "e2e_p99_ms",
            label: "end to end p99",
            unit: "ms",
            value: |d| at(d, "/summary/e2e_p99_ms"),
        },
        Figure {
            id: "mta",
            label: "MTA",
            unit: "",
            value: |d| at(d, "/config/relay/lab"),
        },
        Figure {
            id: "mta_cpu_ms_per_message",
            label: "MTA CPU per message",
            unit: "ms",
            value: |d| cpu_ms_per(d, "/summary/delivered_messages"),
        },
    ],
    throughput: "accepted/s",
    device: "Queue device",
    server: "MTA",
};

/// `send` and `mailbox populate`: the rate reached, what failed, the slow end, and what
/// the schedule could not even start.
pub const SEND: Headline = Headline {
    figures: &[
        Figure {
            id: "msgs_per_sec",
            label: "rate",
            unit: "msg/s",
            value: |d| at(d, "/summary/msgs_per_sec"),
        },
        Figure {
            id: "accepted",
            label: "accepted",
            unit: "messages",
            value: |d| at(d, "/summary/accepted"),
        },
        Figure {
            id: "errors",
            label: "errors",
            unit: "",
            value: |d| at(d, "/summary/errors"),
        },
        Figure {
            id: "p99_ms",
            label: "p99 total",
            unit: "ms",
            value: |d| at(d, "/summary/p99_ms"),
        },
        Figure {
            id: "unstarted",
            label: "unstarted",
            unit: "messages",
            value: |d| at(d, "/summary/unstarted"),
        },
    ],
    throughput: "accepted/s",
    device: "Queue device",
    server: "Server",
};

/// `sink`: what arrived, how fast, and whether any of it came twice or never.
pub const SINK: Headline = Headline {
    figures: &[
        Figure {
            id: "msgs_per_sec",
            label: "rate",
            unit: "msg/s",
            value: |d| at(d, "/summary/msgs_per_sec"),
        },
        Figure {
            id: "messages",
            label: "received",
            unit: "messages",
            value: |d| at(d, "/summary/messages"),
        },
        Figure {
            id: "rejected",
            label: "rejected",
            unit: "",
            value: |d| at(d, "/summary/rejected"),
        },
        Figure {
            id: "duplicates",
            label: "duplicates",
            unit: "",
            value: |d| at(d, "/summary/duplicates"),
        },
    ],
    throughput: "accepted/s",
    device: "Queue device",
    server: "Server",
};

/// `mailbox pop3`: sessions per second, their slow end, and what went wrong.
pub const POP3: Headline = Headline {
    figures: &[
        Figure {
            id: "sessions_per_sec",
            label: "sessions",
            unit: "per second",
            value: |d| at(d, "/summary/sessions_per_sec"),
        },
        Figure {
            id: "p99_ms",
            label: "session p99",
            unit: "ms",
            value: |d| at(d, "/summary/p99_ms"),
        },
        Figure {
            id: "errors",
            label: "errors",
            unit: "",
            value: |d| at(d, "/summary/errors"),
        },
        Figure {
            id: "store_cpu_ms_per_session",
            label: "store CPU per session",
            unit: "ms",
            value: |d| cpu_ms_per(d, "/summary/completed"),
        },
    ],
    throughput: "sessions/s",
    device: "Store device",
    server: "Store",
};

/// `mailbox imap`: commands per second, their slow end, and the state checks broken.
pub const IMAP: Headline = Headline {
    figures: &[
        Figure {
            id: "commands_per_sec",
            label: "commands",
            unit: "per second",
            value: |d| at(d, "/summary/commands_per_sec"),
        },
        Figure {
            id: "p99_ms",
            label: "command p99",
            unit: "ms",
            value: |d| at(d, "/summary/p99_ms"),
        },
        Figure {
            id: "violations",
            label: "state violations",
            unit: "",
            value: |d| at(d, "/summary/violations"),
        },
        Figure {
            id: "errors",
            label: "errors",
            unit: "",
            value: |d| at(d, "/summary/errors"),
        },
        Figure {
            id: "store_cpu_ms_per_command",
            label: "store CPU per command",
            unit: "ms",
            value: |d| cpu_ms_per(d, "/summary/completed"),
        },
    ],
    throughput: "commands/s",
    device: "Store device",
    server: "Store",
};

/// A profile's capacity in users; "at least N" when its ramp never broke (the text
/// summary's words: the store may carry more than its last step).
fn capacity(doc: &Value) -> Option<Value> {
    let users = at(doc, "/extra/capacity/capacity_users")?;
    match doc.pointer("/extra/capacity/capacity_at_least") {
        Some(Value::Bool(true)) => Some(Value::from(format!("at least {users}"))),
        _ => Some(users),
    }
}

/// A mailbox profile: how many users the store carried, and the step that broke it.
pub const PROFILE: Headline = Headline {
    figures: &[
        Figure {
            id: "capacity_users",
            label: "capacity",
            unit: "users",
            value: capacity,
        },
        Figure {
            id: "broke_at_users",
            label: "broke at",
            unit: "users",
            value: |d| at(d, "/extra/capacity/broke_at_users"),
        },
        Figure {
            id: "actions_per_min",
            label: "actions",
            unit: "per minute",
            value: |d| at(d, "/summary/actions_per_min"),
        },
        Figure {
            id: "p99_ms",
            label: "action p99",
            unit: "ms",
            value: |d| at(d, "/summary/p99_ms"),
        },
        Figure {
            id: "errors",
            label: "failed actions",
            unit: "",
            value: |d| at(d, "/summary/errors"),
        },
    ],
    throughput: "actions done/s",
    device: "Store device",
    server: "Store",
};

/// `dns`: questions answered per second, their slow end, and how often the faults fired.
pub const DNS: Headline = Headline {
    figures: &[
        Figure {
            id: "queries_per_sec",
            label: "questions",
            unit: "per second",
            value: |d| at(d, "/summary/queries_per_sec"),
        },
        Figure {
            id: "p99_ms",
            label: "answer p99",
            unit: "ms",
            value: |d| at(d, "/summary/p99_ms"),
        },
        Figure {
            id: "faults_fired",
            label: "faults fired",
            unit: "",
            value: faults_fired,
        },
        Figure {
            id: "dropped",
            label: "dropped",
            unit: "questions",
            value: |d| at(d, "/summary/dropped"),
        },
    ],
    throughput: "answered/s",
    device: "Device",
    server: "Server",
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_read_their_place_and_work_out_the_rest() {
        let doc = serde_json::json!({
            "summary": {"drain_mpm": 1234.5, "delivered_messages": 400, "lost": 0, "damaged": 2},
            "extra": {"sut": {"cpu_user_s": 1.0, "cpu_sys_s": 0.5},
                      "dns": {"faults": [{"fired": 3}, {"fired": 4}]}},
            "config": {"relay": {"lab": null}},
        });
        let get = |h: &Headline, id: &str| {
            let f = h.figures.iter().find(|f| f.id == id).expect("figure");
            (f.value)(&doc)
        };
        assert_eq!(get(&RELAY, "drain_mpm"), Some(1234.5.into()));
        assert_eq!(get(&RELAY, "lost"), Some(0.into()));
        assert_eq!(get(&RELAY, "damaged"), Some(2.into()));
        assert_eq!(get(&RELAY, "mta"), None, "a relay without a lab MTA");
        assert_eq!(get(&RELAY, "mta_cpu_ms_per_message"), Some(3.75.into()));
        assert_eq!(get(&DNS, "faults_fired"), Some(7.into()));
    }

    #[test]
    fn every_kind_has_a_headline_with_unique_ids() {
        for k in super::super::KINDS {
            let ids: Vec<&str> = k.headline.figures.iter().map(|f| f.id).collect();
            assert!(!ids.is_empty(), "{}", k.name);
            for (i, id) in ids.iter().enumerate() {
                assert!(!ids[i + 1..].contains(id), "{}: {id} twice", k.name);
            }
        }
    }
}
