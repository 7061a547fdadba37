//! `mailbox imap`: IMAP users' sessions running a mix of commands (imaptest's job).

use crate::cli::args::{ImapArgs, ImapLoginArg};
use crate::cli::plan::load::Defaults;
use crate::cli::plan::{client, load, output, store};
use crate::mailbox::bench::Workload;
use crate::mailbox::plan::{ImapLogin, ImapPlan, Mix};
use crate::units;

/// `mailbox imap`'s defaults: 10,000 commands over 10 sessions (imaptest's clients=10).
pub const IMAP_DEFAULTS: Defaults = Defaults {
    concurrency: "10",
    size: "10k",
    messages: 10_000,
    thresholds: crate::mailbox::IMAP_THRESHOLDS,
};

/// Validates `mailbox imap`'s flags; `env` looks up the launcher's index variables
/// (`--shard auto/N`).
fn imap_plan(a: &ImapArgs, env: impl Fn(&str) -> Option<String>) -> Result<store::Planned, String> {
    let (outputs, progress) = output::plan(&a.run.out, None, &IMAP_DEFAULTS.thresholds)?;
    let (mut load, load_json) = load::shape(&a.shape, &IMAP_DEFAULTS, progress)?;
    if a.pipeline > 1 && load.pacing != crate::load::schedule::Pacing::Closed {
        // The open-loop engine gives a session its next command when the last completes:
        // the flag would be accepted and silently mean 1.
        return Err(format!(
            "--pipeline {} needs a closed loop: with --rate each session sends one command \
             at a time; drop --rate, or drop --pipeline",
            a.pipeline
        ));
    }
    let mut w = store::Where::plan(&a.server, &a.target, &a.lab_fill, &a.run.tls, (143, 993))?;
    let timeouts = client::Timeouts::plan(&a.run.client)?;
    let mix_spec = a.mix.as_str();
    let mix = Mix::parse(mix_spec)?;
    let fetch_range =
        match units::count(&a.fetch_range).map_err(|e| format!("--fetch-range: {e}"))? {
            0 => return Err("--fetch-range must be at least 1".into()),
            n => u32::try_from(n).unwrap_or(u32::MAX),
        };
    let append_size = units::size(&a.append_size).map_err(|e| format!("--append-size: {e}"))?;
    if append_size > 64 << 20 {
        return Err("--append-size must be at most 64m".into());
    }
    if a.mailbox.is_empty() || a.mailbox.contains(['\r', '\n']) {
        return Err("--mailbox must be a mailbox name on one line".into());
    }
    let idle_for = units::duration(&a.idle_for).map_err(|e| format!("--idle-for: {e}"))?;
    let login = match a.login {
        ImapLoginArg::Login => ImapLogin::Login,
        ImapLoginArg::Plain => ImapLogin::Plain,
    };
    let mut config_json = serde_json::json!({
        "protocol": "imap",
        "target": a.target,
        "interval_s": progress.interval.as_secs_f64(),
        "thresholds": a.run.out.threshold,
        "mix": mix_spec,
        "mailbox": a.mailbox,
        "fetch_range": fetch_range,
        "append_size": append_size,
        "idle_for_s": idle_for.as_secs_f64(),
        "check_state": !a.no_state_check,
        "literal_plus": !a.no_literal_plus,
        "random_users": a.random_users,
        "login": login,
    });
    if a.pipeline > 1 {
        config_json["pipeline"] = a.pipeline.into();
    }
    w.describe(&mut config_json, &a.server);
    if let (Some(all), serde_json::Value::Object(mut m)) = (config_json.as_object_mut(), load_json)
    {
        if let Some(n) = m.remove("messages") {
            m.insert("commands".into(), n);
        }
        all.extend(m);
    }
    let mut sessions = w.sessions(a.random_users, &timeouts);
    super::shard::apply(&mut load, &mut config_json, &mut sessions, &a.scale, env)?;
    let plan = ImapPlan {
        load,
        sessions,
        login,
        mix,
        mailbox: a.mailbox.clone(),
        fetch_range,
        append_size,
        idle_for,
        check_state: !a.no_state_check,
        literal_plus: !a.no_literal_plus,
        pipeline: a.pipeline.into(),
        config_json,
    };
    Ok(w.planned(Workload::Imap(plan), &a.run.sut_pid, outputs))
}

/// Runs `mailbox imap`. Errors carry their exit code.
pub(super) async fn imap(a: ImapArgs) -> Result<u8, (u8, String)> {
    super::run(imap_plan(&a, |v| std::env::var(v).ok()), |r| {
        let headline = format!(
            "mailbench mailbox imap: {} command{} against {} in {:.2} s",
            r.counters.sent,
            if r.counters.sent == 1 { "" } else { "s" },
            r.config["target"].as_str().unwrap_or("the lab's Dovecot"),
            r.duration_s
        );
        crate::report::text::summary(r, &headline)
    })
    .await
}
