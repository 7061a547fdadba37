//! `mailbox pop3`: POP3 users' sessions (rabid's job) against a lab store or one's own.

use crate::cli::args::{Pop3Args, Pop3LoginArg};
use crate::cli::plan::load::Defaults;
use crate::cli::plan::{client, load, output, store};
use crate::lab::Store;
use crate::mailbox::bench::Workload;
use crate::mailbox::plan::{Pop3Login, Pop3Plan};
use crate::units;

/// `mailbox pop3`'s defaults: 1,000 sessions over 16 connections.
pub const POP3_DEFAULTS: Defaults = Defaults {
    concurrency: "16",
    size: "25k",
    messages: 1000,
    thresholds: crate::mailbox::POP3_THRESHOLDS,
};

/// Validates `mailbox pop3`'s flags; `env` looks up the launcher's index variables
/// (`--shard auto/N`).
fn pop3_plan(a: &Pop3Args, env: impl Fn(&str) -> Option<String>) -> Result<store::Planned, String> {
    let (outputs, progress) = output::plan(&a.run.out, None, &POP3_DEFAULTS.thresholds)?;
    if a.shape.per_conn.trim() != "0" {
        return Err(
            "--per-conn: a POP3 session holds its mailbox until QUIT, so every session has its own connection"
                .into(),
        );
    }
    let (mut load, load_json) = load::shape(&a.shape, &POP3_DEFAULTS, progress)?;
    let mut w = store::Where::plan(&a.server, &a.target, &a.lab_fill, &a.run.tls, (110, 995))?;
    let timeouts = client::Timeouts::plan(&a.run.client)?;
    let share = |flag: &str, v: &str| {
        units::percent(v)
            .map(|p| p / 100.0)
            .map_err(|e| format!("{flag}: {e}"))
    };
    let download = share("--download", &a.download)?;
    let delete = share("--delete", &a.delete)?;
    let max_download = match &a.max_download {
        Some(v) => match units::count(v).map_err(|e| format!("--max-download: {e}"))? {
            0 => {
                return Err("--max-download must be at least 1 (use --download 0 for none)".into());
            }
            n => Some(u32::try_from(n).unwrap_or(u32::MAX)),
        },
        None => None,
    };
    let login = match a.login {
        Pop3LoginArg::User => Pop3Login::User,
        Pop3LoginArg::Plain => Pop3Login::Plain,
        Pop3LoginArg::Apop => Pop3Login::Apop,
    };
    let mut config_json = serde_json::json!({
        "protocol": "pop3",
        "target": a.target,
        "lab": a.server.lab.first().copied().map(Store::name),
        "interval_s": progress.interval.as_secs_f64(),
        "thresholds": a.run.out.threshold,
        "download": download,
        "delete": delete,
        "top": a.top,
        "max_download": max_download,
        "random_users": a.random_users,
        "list": a.list,
        "uidl": a.uidl,
        "login": login,
        "pipelining": !a.no_pipelining,
    });
    w.describe(&mut config_json, &a.server);
    if let (Some(all), serde_json::Value::Object(mut m)) = (config_json.as_object_mut(), load_json)
    {
        m.remove("per_conn");
        if let Some(n) = m.remove("messages") {
            m.insert("sessions".into(), n);
        }
        all.extend(m);
    }
    let mut sessions = w.sessions(a.random_users, &timeouts);
    super::shard::apply(&mut load, &mut config_json, &mut sessions, &a.scale, env)?;
    let plan = Pop3Plan {
        load,
        sessions,
        login,
        download,
        delete,
        pipelining: !a.no_pipelining,
        list: a.list,
        uidl: a.uidl,
        top_lines: a.top,
        max_download,
        config_json,
    };
    Ok(w.planned(Workload::Pop3(plan), &a.run.sut_pid, outputs))
}

/// Runs `mailbox pop3`. Errors carry their exit code.
pub(super) async fn pop3(a: Pop3Args) -> Result<u8, (u8, String)> {
    super::run(pop3_plan(&a, |v| std::env::var(v).ok()), |r| {
        let headline = format!(
            "mailbench mailbox pop3: {} sessions against {} in {:.2} s",
            r.counters.sent,
            r.config["target"].as_str().unwrap_or("the lab's Dovecot"),
            r.duration_s
        );
        crate::report::text::summary(r, &headline)
    })
    .await
}
