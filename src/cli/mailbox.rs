//! `mailbox`'s flags → validated plans: which store (a lab, or a server and its users
//! file), how its mailboxes are filled, and what each POP3 session does. The workloads
//! themselves are `crate::mailbox`.

use std::path::Path;
use std::sync::Arc;

use super::args::{
    ArrivalArgs, ArrivalMtaArg, FillArgs, ImapArgs, ImapLoginArg, MailboxCommand,
    MailboxServerArgs, MessageArgs, Pop3Args, Pop3LoginArg, PopulateArgs, ProfileArgs, ShapeArgs,
    TlsArgs, ViaArg,
};
use super::finish::deliver;
use super::lab::{store_flags_given, store_options};
use super::output;
use super::send::{Defaults, load_plan, message_plan, tls_plan};
use super::{EXIT_FAILED, EXIT_USAGE};
use crate::lab::{Store, StoreUser};
use crate::mailbox::arrival::{ArrivalPlan, Path as ArrivalPath};
use crate::mailbox::bench::{Fill, MailboxError, StoreSetup, Workload};
use crate::mailbox::plan::{DEFAULT_MIX, ImapLogin, ImapPlan, Mix, Pop3Login, Pop3Plan, Sessions};
use crate::mailbox::profile::scenario::Scenario;
use crate::mailbox::profile::{Population, ProfilePlan};
use crate::pop3::steps::STEPS;
use crate::report::threshold::Threshold;
use crate::send::SendPlan;
use crate::send::plan::{Auth, ClientPlan};
use crate::shutdown::Shutdown;
use crate::transport::target::{Target, parse_target};
use crate::transport::tls::{TlsMode, TlsPlan};
use crate::units;

/// `mailbox pop3`'s defaults: 1,000 sessions over 16 connections.
pub const POP3_DEFAULTS: Defaults = Defaults {
    concurrency: "16",
    size: "25k",
    messages: 1000,
    thresholds: crate::mailbox::POP3_THRESHOLDS,
};

/// The exit code of a mailbox error.
pub fn exit(e: MailboxError) -> (u8, String) {
    match e {
        MailboxError::Usage(e) => (EXIT_USAGE, e),
        MailboxError::Failed(e) => (EXIT_FAILED, e),
    }
}

/// Runs a `mailbox` workload. Errors carry their exit code.
pub async fn mailbox(c: MailboxCommand) -> Result<u8, (u8, String)> {
    match c {
        MailboxCommand::Populate(a) => populate(*a).await,
        MailboxCommand::Pop3(a) => pop3(*a).await,
        MailboxCommand::Imap(a) => imap(*a).await,
        MailboxCommand::Profile(a) => profile(*a).await,
        MailboxCommand::Arrival(a) => arrival(*a).await,
    }
}

/// Cleans what killed runs left once the flags are checked, when a lab store will start.
fn sweep_before(setup: &Option<StoreSetup>) {
    if setup.is_some() {
        super::lab::clean_leftovers("mailbox");
    }
}

/// The lab store the flags ask for, or none (then no store flag may be given).
fn store_setup(a: &MailboxServerArgs, starttls: bool) -> Result<Option<StoreSetup>, String> {
    match a.lab {
        Some(store) => Ok(Some(StoreSetup {
            store,
            options: store_options(store, &a.store, starttls)?,
        })),
        None if store_flags_given(&a.store) => Err(format!(
            "--users, --user-template, --password-template, --mail-format, --storage and \
             --store-conf shape a lab store: give --lab {}, or drop them and list the \
             server's users in --users-file",
            Store::names()
        )),
        None => Ok(None),
    }
}

/// The users of a server of one's own, from a Postal user list; each needs its password.
fn users_file(path: &Path) -> Result<Vec<StoreUser>, String> {
    crate::message::users::read(path, "address password", store_users)
}

/// Parses a mailbox user list: `address password` per line (Postal's format without the
/// sink's d/r/g/b flags, which mean nothing to a store); blank lines and lines starting
/// with '#' are skipped. Errors carry the 1-based line number.
fn store_users(text: &str) -> Result<Vec<StoreUser>, (usize, String)> {
    let mut users = Vec::new();
    for entry in crate::message::users::entries(text) {
        let (line, address, mut parts) = entry?;
        let Some(password) = parts.next() else {
            return Err((
                line,
                format!("{address} has no password; write 'address password' per line"),
            ));
        };
        if let Some(extra) = parts.next() {
            return Err((
                line,
                format!("{extra:?} after the password; write 'address password' per line"),
            ));
        }
        users.push(StoreUser {
            address: address.to_string(),
            password: password.to_string(),
        });
    }
    Ok(users)
}

/// How mailboxes are filled with `per_user` messages each: a quiet LMTP `send` plan,
/// aimed at the store when it is known.
pub fn fill(a: &FillArgs, per_user: u64) -> Result<Fill, String> {
    let folders = units::count(&a.folders).map_err(|e| format!("--folders: {e}"))?;
    if folders == 0 || folders > 100 {
        return Err("--folders must be between 1 and 100".into());
    }
    let concurrency = units::count(&a.fill_concurrency)?;
    if concurrency == 0 {
        return Err("--fill-concurrency must be at least 1".into());
    }
    let shape = ShapeArgs {
        concurrency: Some(concurrency.to_string()),
        rate: None,
        arrivals: super::args::ArrivalsArg::Constant,
        ramp: None,
        ramp_from: "1/s".into(),
        messages: None,
        duration: None,
        per_conn: "0".into(),
        grace: "5s".into(),
        max_errors: None,
    };
    let defaults = Defaults {
        concurrency: "8",
        size: "25k",
        messages: 1,
        thresholds: crate::send::THRESHOLDS,
    };
    let progress = crate::run::Progress {
        interval: std::time::Duration::from_secs(1),
        quiet: true,
    };
    let (load, load_json) = load_plan(&shape, &defaults, progress)?;
    let message = MessageArgs {
        from: "filler@mailbench.test".into(),
        to: "user@store.test".into(),
        senders: None,
        recipients: None,
        rcpts: "1".into(),
        size: a.eml.is_none().then(|| a.fill_size.clone()),
        body: None,
        eml: a.eml.clone(),
        attach: None,
    };
    let (message, message_json) =
        message_plan(&message, &defaults).map_err(|e| e.replace("--size", "--fill-size"))?;
    let client = ClientPlan {
        targets: Vec::new(),
        lmtp: true,
        source_ips: Vec::new(),
        connect_timeout: std::time::Duration::from_secs(10),
        command_timeout: std::time::Duration::from_secs(60),
        tls: TlsPlan::NONE,
        auth: Auth::None,
        pipelining: true,
        chunking: false,
        helo: "mailbench.test".into(),
    };
    let mut config_json = serde_json::json!({"protocol": "lmtp", "folders": folders});
    for part in [load_json, message_json] {
        if let (Some(all), serde_json::Value::Object(m)) = (config_json.as_object_mut(), part) {
            all.extend(m);
        }
    }
    Ok(Fill {
        send: SendPlan {
            load,
            client,
            message,
            accept_log: None,
            data_end_log: None,
            warmup: None,
            config_json,
        },
        per_user,
        folders: folders as u32,
    })
}

async fn populate(a: PopulateArgs) -> Result<u8, (u8, String)> {
    let usage = |e: String| (EXIT_USAGE, e);
    let setup = store_setup(&a.server, false).map_err(usage)?;
    let per_user = units::count(&a.per_user).map_err(|e| usage(format!("--per-user: {e}")))?;
    if per_user == 0 {
        return Err(usage("--per-user must be at least 1".into()));
    }
    if a.via == ViaArg::Imap || a.imap.is_some() {
        return populate_imap(&a, setup, per_user).await;
    }
    if a.flags.is_some() {
        return Err(usage(
            "--flags are set over IMAP: give --via imap (LMTP delivers without flags)".into(),
        ));
    }
    let (outputs, progress) =
        output::plan(&a.out, None, &crate::send::THRESHOLDS).map_err(usage)?;
    let mut fill = fill(&a.filling, per_user).map_err(usage)?;
    fill.send.load.progress = progress;
    fill.send.config_json["interval_s"] = progress.interval.as_secs_f64().into();
    fill.send.config_json["thresholds"] = a.out.threshold.clone().into();
    fill.send.config_json["per_user"] = per_user.into();
    sweep_before(&setup);
    let shutdown = Shutdown::install();
    let results = match (setup, &a.lmtp, &a.server.users_file) {
        (Some(setup), _, _) => crate::mailbox::bench::populate(setup, fill, shutdown)
            .await
            .map_err(exit)?,
        (None, Some(lmtp), Some(file)) => {
            let target = parse_target(lmtp, 24).map_err(usage)?;
            let users = users_file(file).map_err(usage)?;
            crate::mailbox::populate::aim(&mut fill.send, target, &users, per_user, fill.folders);
            fill.send.config_json["target"] = lmtp.clone().into();
            let mut r = crate::send::run(fill.send, shutdown).await.map_err(usage)?;
            r.command = "populate".into();
            r
        }
        _ => {
            return Err(usage(format!(
                "give --lab {}, or --lmtp ADDR and --users-file FILE",
                Store::names()
            )));
        }
    };
    deliver(results, &outputs, |r| {
        let headline = format!(
            "mailbench mailbox populate: {} messages over LMTP in {:.2} s",
            r.counters.sent, r.duration_s
        );
        crate::report::text::render(r, crate::smtp::steps::STEPS, &headline)
    })
}

/// Where a mailbox workload runs, as every workload's flags say it: a lab store (filled
/// first) or a server of one's own with its users, and TLS.
struct Where {
    setup: Option<StoreSetup>,
    target: Option<Target>,
    users: Vec<StoreUser>,
    fill: Option<Fill>,
    tls: TlsPlan,
}

impl Where {
    /// `ports` are the protocol's plain and implicit-TLS defaults.
    fn plan(
        server: &MailboxServerArgs,
        target: &Option<String>,
        fill_arg: &Option<String>,
        filling: &FillArgs,
        tls: &TlsArgs,
        ports: (u16, u16),
    ) -> Result<Where, String> {
        let tls = tls_plan(tls)?;
        // The lab offers STARTTLS and implicit TLS together when asked for TLS.
        let setup = store_setup(server, tls.mode != TlsMode::None)?;
        let (target, users) = match (target, &server.users_file) {
            (Some(t), Some(f)) => {
                let port = if tls.mode == TlsMode::Implicit {
                    ports.1
                } else {
                    ports.0
                };
                (Some(parse_target(t, port)?), users_file(f)?)
            }
            _ => (None, Vec::new()),
        };
        let fill = lab_fill(fill_arg, filling, setup.is_some())?;
        Ok(Where {
            setup,
            target,
            users,
            fill,
            tls,
        })
    }

    /// The sessions' part of a plan (the lab fills in its server and users later).
    fn sessions(&mut self, random_users: bool, t: &Timeouts) -> Sessions {
        Sessions {
            target: self.target.take(),
            users: Arc::new(std::mem::take(&mut self.users)),
            random_users,
            tls: self.tls.clone(),
            connect_timeout: t.connect,
            command_timeout: t.command,
        }
    }

    /// Adds the store, its fill and TLS to a results file's configuration.
    fn describe(&self, config: &mut serde_json::Value, server: &MailboxServerArgs) {
        config["lab"] = server.lab.map(Store::name).into();
        config["tls"] = serde_json::to_value(self.tls.mode).unwrap_or_default();
        config["tls_percent"] = self.tls.percent.into();
        config["store"] = self
            .setup
            .as_ref()
            .map(|s| {
                serde_json::json!({
                    "users": s.options.users,
                    "mail_format": s.options.mail_format,
                    "storage": s.options.placement,
                    "doveconf": server.store.store_conf,
                })
            })
            .into();
        config["fill"] = self
            .fill
            .as_ref()
            .map(|f| {
                serde_json::json!({
                    "per_user": f.per_user,
                    "folders": f.folders,
                    "size": f.send.config_json["size"],
                })
            })
            .into();
    }
}

/// How a lab store is filled before a workload: `--fill N` messages per user (10 when not
/// given, none with 0); `--fill` without a lab is refused.
fn lab_fill(n: &Option<String>, filling: &FillArgs, lab: bool) -> Result<Option<Fill>, String> {
    match (n, lab) {
        (Some(n), true) => match units::count(n).map_err(|e| format!("--fill: {e}"))? {
            0 => Ok(None),
            n => Ok(Some(fill(filling, n)?)),
        },
        (None, true) => Ok(Some(fill(filling, 10)?)),
        (Some(_), false) => Err(format!(
            "--fill fills a lab store: give --lab {}, or fill your own with `mailbox populate --lmtp`",
            Store::names()
        )),
        (None, false) => Ok(None),
    }
}

/// A mailbox client's connect and response limits.
struct Timeouts {
    connect: std::time::Duration,
    command: std::time::Duration,
}

impl Timeouts {
    fn plan(connect: &str, command: &str) -> Result<Timeouts, String> {
        let t = Timeouts {
            connect: units::duration(connect)?,
            command: units::duration(command)?,
        };
        if t.connect.is_zero() || t.command.is_zero() {
            return Err("--connect-timeout and --timeout must be above zero".into());
        }
        Ok(t)
    }
}

/// Validates `mailbox pop3`'s flags.
fn pop3_plan(
    a: &Pop3Args,
) -> Result<
    (
        Pop3Plan,
        Option<StoreSetup>,
        Option<Fill>,
        output::OutputPlan,
    ),
    String,
> {
    let (outputs, progress) = output::plan(&a.out, None, &POP3_DEFAULTS.thresholds)?;
    if a.shape.per_conn.trim() != "0" {
        return Err(
            "--per-conn: a POP3 session holds its mailbox until QUIT, so every session has its own connection"
                .into(),
        );
    }
    let (load, load_json) = load_plan(&a.shape, &POP3_DEFAULTS, progress)?;
    let mut w = Where::plan(
        &a.server,
        &a.target,
        &a.fill,
        &a.filling,
        &a.tls,
        (110, 995),
    )?;
    let timeouts = Timeouts::plan(&a.connect_timeout, &a.timeout)?;
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
        "lab": a.server.lab.map(Store::name),
        "interval_s": progress.interval.as_secs_f64(),
        "thresholds": a.out.threshold,
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
    let plan = Pop3Plan {
        load,
        sessions: w.sessions(a.random_users, &timeouts),
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
    Ok((plan, w.setup, w.fill, outputs))
}

async fn pop3(a: Pop3Args) -> Result<u8, (u8, String)> {
    let (plan, setup, fill, outputs) = pop3_plan(&a).map_err(|e| (EXIT_USAGE, e))?;
    sweep_before(&setup);
    let shutdown = Shutdown::install();
    let work = Workload::Pop3(plan);
    let results = crate::mailbox::bench::workload(work, setup, fill, a.sut_pid.clone(), shutdown)
        .await
        .map_err(exit)?;
    deliver(results, &outputs, |r| {
        let headline = format!(
            "mailbench mailbox pop3: {} sessions against {} in {:.2} s",
            r.counters.sent,
            r.config["target"].as_str().unwrap_or("the lab's Dovecot"),
            r.duration_s
        );
        crate::report::text::render_pop3(r, STEPS, &headline)
    })
}

/// `mailbox imap`'s defaults: 10,000 commands over 10 sessions (imaptest's clients=10).
pub const IMAP_DEFAULTS: Defaults = Defaults {
    concurrency: "10",
    size: "10k",
    messages: 10_000,
    thresholds: crate::mailbox::IMAP_THRESHOLDS,
};

/// Validates `mailbox imap`'s flags.
fn imap_plan(
    a: &ImapArgs,
) -> Result<
    (
        ImapPlan,
        Option<StoreSetup>,
        Option<Fill>,
        output::OutputPlan,
    ),
    String,
> {
    let (outputs, progress) = output::plan(&a.out, None, &IMAP_DEFAULTS.thresholds)?;
    let (load, load_json) = load_plan(&a.shape, &IMAP_DEFAULTS, progress)?;
    let mut w = Where::plan(
        &a.server,
        &a.target,
        &a.fill,
        &a.filling,
        &a.tls,
        (143, 993),
    )?;
    let timeouts = Timeouts::plan(&a.connect_timeout, &a.timeout)?;
    let mix_spec = a.mix.as_deref().unwrap_or(DEFAULT_MIX);
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
        "thresholds": a.out.threshold,
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
    let plan = ImapPlan {
        load,
        sessions: w.sessions(a.random_users, &timeouts),
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
    Ok((plan, w.setup, w.fill, outputs))
}

async fn imap(a: ImapArgs) -> Result<u8, (u8, String)> {
    let (plan, setup, fill, outputs) = imap_plan(&a).map_err(|e| (EXIT_USAGE, e))?;
    sweep_before(&setup);
    let shutdown = Shutdown::install();
    let work = Workload::Imap(plan);
    let results = crate::mailbox::bench::workload(work, setup, fill, a.sut_pid.clone(), shutdown)
        .await
        .map_err(exit)?;
    deliver(results, &outputs, |r| {
        let headline = format!(
            "mailbench mailbox imap: {} commands against {} in {:.2} s",
            r.counters.sent,
            r.config["target"].as_str().unwrap_or("the lab's Dovecot"),
            r.duration_s
        );
        crate::report::text::render_imap(r, crate::imap::steps::STEPS, &headline)
    })
}

/// Parses `START:STEP/PERIOD` (`--ramp-users 100:50/30s`).
fn ramp_users(spec: &str, max: u64) -> Result<Population, String> {
    let bad = || {
        format!(
            "--ramp-users {spec:?}: expected START:STEP/PERIOD, e.g. 100:50/30s (100 users, 50 more every 30 s)"
        )
    };
    let (start, rest) = spec.split_once(':').ok_or_else(bad)?;
    let (step, period) = rest.split_once('/').ok_or_else(bad)?;
    let start = units::count(start).map_err(|_| bad())?;
    let step = units::count(step).map_err(|_| bad())?;
    let period = units::duration(period).map_err(|_| bad())?;
    if start == 0 || step == 0 || period.is_zero() {
        return Err(format!(
            "--ramp-users {spec:?}: START, STEP and PERIOD must be above zero"
        ));
    }
    if start > max {
        return Err(format!(
            "--ramp-users starts at {start} users, above --max-users {max} (at most one virtual user per mailbox)"
        ));
    }
    Ok(Population::Ramp {
        start,
        step,
        period,
        max,
    })
}

/// Validates `mailbox profile`'s flags.
fn profile_plan(
    a: &ProfileArgs,
) -> Result<
    (
        ProfilePlan,
        Option<StoreSetup>,
        Option<Fill>,
        output::OutputPlan,
    ),
    String,
> {
    let (outputs, progress) = output::plan(&a.out, None, &crate::mailbox::profile::THRESHOLDS)?;
    let scenario = Scenario::load(&a.scenario)?;
    let setup = store_setup(&a.server, false)?;
    let lab = setup.is_some();
    let fill = lab_fill(&a.fill, &a.filling, lab)?;
    let users = match &a.server.users_file {
        Some(f) => users_file(f)?,
        None => Vec::new(),
    };
    if !lab && a.imap.is_none() && a.pop3.is_none() {
        return Err(format!(
            "give --lab {}, or the store's --imap (and --pop3, --lmtp as the scenario needs) with --users-file",
            Store::names()
        ));
    }
    let target = |flag: &str, v: &Option<String>, port: u16| {
        v.as_deref()
            .map(|t| parse_target(t, port).map_err(|e| format!("--{flag}: {e}")))
            .transpose()
    };
    // Each virtual user needs a mailbox of its own: two on one would take each other's
    // messages and POP3 lock, failures that say nothing of the server's capacity.
    let mailboxes = match &setup {
        Some(s) => u64::from(s.options.users),
        None => users.len() as u64,
    };
    let too_many = |flag: &str, n: u64| {
        format!(
            "{flag} {n} is more than the {mailboxes} mailboxes{}: each virtual user needs its own (two on one mailbox take each other's messages); {}",
            if lab {
                " (--users)"
            } else {
                " of --users-file"
            },
            if lab {
                format!("give --users {n} or more")
            } else {
                format!("list {n} users or more in --users-file")
            }
        )
    };
    let max = match &a.max_users {
        Some(m) => {
            let m = units::count(m).map_err(|e| format!("--max-users: {e}"))?;
            if m > mailboxes && mailboxes > 0 {
                return Err(too_many("--max-users", m));
            }
            m
        }
        None => mailboxes,
    };
    let population = match &a.ramp_users {
        Some(spec) => ramp_users(spec, max)?,
        None => {
            let run_for = units::duration(a.duration.as_deref().unwrap_or("60s"))?;
            if run_for.is_zero() {
                return Err("--duration must be above zero".into());
            }
            let users = match &a.virtual_users {
                Some(v) => units::count(v).map_err(|e| format!("--virtual-users: {e}"))?,
                None => mailboxes,
            };
            if users == 0 {
                return Err("--virtual-users must be at least 1".into());
            }
            if users > mailboxes && mailboxes > 0 {
                return Err(too_many("--virtual-users", users));
            }
            Population::Fixed { users, run_for }
        }
    };
    // With a ramp, -z (when given) ends the whole run, cutting the step it falls in.
    let run_limit = match (&a.ramp_users, &a.duration) {
        (Some(_), Some(z)) => {
            let z = units::duration(z)?;
            if z.is_zero() {
                return Err("--duration must be above zero".into());
            }
            Some(z)
        }
        _ => None,
    };
    let time_scale: f64 = a
        .time_scale
        .parse()
        .ok()
        .filter(|x: &f64| x.is_finite() && *x > 0.0 && *x <= 1e6)
        .ok_or_else(|| {
            format!(
                "--time-scale {:?}: give a number above 0, e.g. 60",
                a.time_scale
            )
        })?;
    let rules = a
        .capacity_rule
        .iter()
        .map(|r| {
            Threshold::parse(r, &crate::mailbox::profile::THRESHOLDS)
                .map_err(|e| e.replace("--threshold", "--capacity-rule"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    if let Some(m) = a.mta.filter(|m| *m != crate::lab::Mta::Postfix) {
        return Err(format!(
            "--mta {}: only the Postfix lab delivers into the store (over LMTP); use --mta postfix",
            m.name()
        ));
    }
    let timeouts = Timeouts::plan(&a.connect_timeout, &a.timeout)?;
    let mut config_json = serde_json::json!({
        "protocol": "imap",
        "scenario": scenario.name,
        "time_scale": time_scale,
        "population": match population {
            Population::Fixed { users, run_for } => serde_json::json!({"users": users, "duration_s": run_for.as_secs_f64()}),
            Population::Ramp { start, step, period, max } => serde_json::json!({"ramp_start": start, "ramp_step": step, "step_s": period.as_secs_f64(), "max_users": max}),
        },
        "capacity_rules": a.capacity_rule,
        "run_limit_s": run_limit.map(|d| d.as_secs_f64()),
        "send_via": if a.mta.is_some() { "lab postfix" } else if a.smtp.is_some() { "smtp" } else { "lmtp" },
        "thresholds": a.out.threshold,
        "interval_s": progress.interval.as_secs_f64(),
    });
    let w = Where {
        setup,
        target: None,
        users: Vec::new(),
        fill,
        tls: TlsPlan::NONE,
    };
    w.describe(&mut config_json, &a.server);
    if !lab {
        // Ask for exactly the servers the scenario's users talk to (after the flags' own
        // checks, which name a flag).
        let needs = scenario.needs(a.smtp.is_some());
        for (flag, needed, given) in [
            ("imap", needs.imap, a.imap.is_some()),
            ("pop3", needs.pop3, a.pop3.is_some()),
            ("lmtp", needs.lmtp, a.lmtp.is_some()),
        ] {
            if needed && !given {
                return Err(format!(
                    "--scenario {}: its users need a {flag} server; give --{flag} HOST:PORT",
                    scenario.name
                ));
            }
        }
    }
    let plan = ProfilePlan {
        scenario,
        population,
        time_scale,
        rules,
        imap: target("imap", &a.imap, 143)?,
        pop3: target("pop3", &a.pop3, 110)?,
        lmtp: target("lmtp", &a.lmtp, 24)?,
        smtp: target("smtp", &a.smtp, 25)?,
        lab_mta: a.mta.is_some(),
        users: Arc::new(users),
        connect: crate::mailbox::profile::user::connect_options(timeouts.connect, timeouts.command),
        quiet: progress.quiet,
        interval: progress.interval,
        run_limit,
        config_json,
    };
    Ok((plan, w.setup, w.fill, outputs))
}

async fn profile(a: ProfileArgs) -> Result<u8, (u8, String)> {
    let (plan, setup, fill, outputs) = profile_plan(&a).map_err(|e| (EXIT_USAGE, e))?;
    sweep_before(&setup);
    let shutdown = Shutdown::install();
    let work = Workload::Profile(Box::new(plan));
    let results = crate::mailbox::bench::workload(work, setup, fill, a.sut_pid.clone(), shutdown)
        .await
        .map_err(exit)?;
    deliver(results, &outputs, |r| {
        let headline = format!(
            "mailbench mailbox profile: scenario {} against {} in {:.2} s",
            r.config["scenario"].as_str().unwrap_or("?"),
            r.config["lab"]
                .as_str()
                .and_then(Store::named)
                .map_or("your store".into(), |s| format!("the lab's {}", s.title())),
            r.duration_s
        );
        crate::report::text::render_profile(r, crate::mailbox::profile::STEPS, &headline)
    })
}

/// `mailbox arrival`'s defaults: 1,000 messages of 10 KiB over 4 connections.
pub const ARRIVAL_DEFAULTS: Defaults = Defaults {
    concurrency: "4",
    size: "10k",
    messages: 1000,
    thresholds: crate::relay::THRESHOLDS,
};

/// Validates `mailbox arrival`'s flags.
fn arrival_plan(
    a: &ArrivalArgs,
) -> Result<(ArrivalPlan, Option<StoreSetup>, output::OutputPlan), String> {
    let (outputs, progress) = output::plan(&a.out, None, &ARRIVAL_DEFAULTS.thresholds)?;
    let setup = store_setup(&a.server, false)?;
    let lab = setup.is_some();
    if !lab && (a.smtp.is_none() || a.imap.is_none()) {
        return Err(format!(
            "give --lab {}, or --smtp (an MTA that delivers into the store), --imap and --users-file",
            Store::names()
        ));
    }
    let users = match &a.server.users_file {
        Some(f) => users_file(f)?,
        None => Vec::new(),
    };
    let store_users = match &setup {
        Some(s) => s.options.users as usize,
        None => users.len(),
    };
    let watchers = match &a.watchers {
        Some(n) => units::count(n).map_err(|e| format!("--watchers: {e}"))? as usize,
        None => store_users.min(100),
    };
    if watchers == 0 || watchers > store_users {
        return Err(format!(
            "--watchers must be between 1 and the number of users ({store_users})"
        ));
    }
    let (load, load_json) = load_plan(&a.shape, &ARRIVAL_DEFAULTS, progress)?;
    let message = MessageArgs {
        from: "sender@mailbench.test".into(),
        to: "user@store.test".into(),
        senders: None,
        recipients: None,
        rcpts: "1".into(),
        size: Some(a.size.clone()),
        body: None,
        eml: None,
        attach: None,
    };
    let (message, message_json) = message_plan(&message, &ARRIVAL_DEFAULTS)?;
    let drain_timeout = units::duration(&a.drain_timeout)?;
    let path = match (lab, a.mta) {
        (true, ArrivalMtaArg::Postfix) => ArrivalPath::Postfix,
        (true, ArrivalMtaArg::Lmtp) => ArrivalPath::Lmtp,
        (false, _) => ArrivalPath::Smtp,
    };
    let postconf = super::lab::settings("--postconf", &a.postconf, "default_process_limit=100")?;
    let target = |flag: &str, v: &Option<String>, port: u16| {
        v.as_deref()
            .map(|t| parse_target(t, port).map_err(|e| format!("--{flag}: {e}")))
            .transpose()
    };
    let client = ClientPlan {
        targets: Vec::new(),
        lmtp: false,
        source_ips: Vec::new(),
        connect_timeout: std::time::Duration::from_secs(10),
        command_timeout: std::time::Duration::from_secs(60),
        tls: TlsPlan::NONE,
        auth: Auth::None,
        pipelining: true,
        chunking: false,
        helo: "mailbench.test".into(),
    };
    let mut config_json = serde_json::json!({
        "protocol": "smtp",
        "path": path,
        "target": a.smtp,
        "imap": a.imap,
        "lab": a.server.lab.map(Store::name),
        "watchers": watchers,
        "drain_timeout_s": drain_timeout.as_secs_f64(),
        "interval_s": progress.interval.as_secs_f64(),
        "thresholds": a.out.threshold,
    });
    for part in [load_json, message_json] {
        if let (Some(all), serde_json::Value::Object(m)) = (config_json.as_object_mut(), part) {
            all.extend(m);
        }
    }
    let plan = ArrivalPlan {
        send: SendPlan {
            load,
            client,
            message,
            accept_log: None,
            data_end_log: None,
            warmup: None,
            config_json: config_json.clone(),
        },
        path,
        postconf,
        smtp: target("smtp", &a.smtp, 25)?,
        imap: target("imap", &a.imap, 143)?,
        users,
        watchers,
        drain_timeout,
        sut_pids: a.sut_pid.clone(),
    };
    Ok((plan, setup, outputs))
}

async fn arrival(a: ArrivalArgs) -> Result<u8, (u8, String)> {
    let (plan, setup, outputs) = arrival_plan(&a).map_err(|e| (EXIT_USAGE, e))?;
    sweep_before(&setup);
    let shutdown = Shutdown::install();
    let results = crate::mailbox::arrival::run(plan, setup, shutdown)
        .await
        .map_err(exit)?;
    deliver(results, &outputs, |r| {
        let headline = format!(
            "mailbench mailbox arrival: {} messages over SMTP, each timed until IMAP shows it ({} watched mailboxes)",
            r.counters.sent, r.config["watchers"]
        );
        crate::report::text::render_relay(r, crate::smtp::steps::STEPS, &headline)
    })
}

/// `populate --via imap`: APPEND with flags, into the lab or a store of one's own.
async fn populate_imap(
    a: &PopulateArgs,
    setup: Option<StoreSetup>,
    per_user: u64,
) -> Result<u8, (u8, String)> {
    let usage = |e: String| (EXIT_USAGE, e);
    if a.filling.eml.is_some() {
        return Err(usage(
            "--eml fills over LMTP only; drop --via imap, or use generated messages".into(),
        ));
    }
    let (outputs, _) =
        output::plan(&a.out, None, &crate::mailbox::IMAP_THRESHOLDS).map_err(usage)?;
    let flags = match &a.flags {
        Some(spec) => crate::mailbox::append::parse_flags(spec).map_err(usage)?,
        None => Vec::new(),
    };
    let folders = units::count(&a.filling.folders).map_err(|e| usage(format!("--folders: {e}")))?;
    if folders == 0 || folders > 100 {
        return Err(usage("--folders must be between 1 and 100".into()));
    }
    let size =
        units::size_range(&a.filling.fill_size).map_err(|e| usage(format!("--fill-size: {e}")))?;
    let concurrency = units::count(&a.filling.fill_concurrency)
        .map_err(|e| usage(format!("--fill-concurrency: {e}")))?;
    if concurrency == 0 {
        return Err(usage("--fill-concurrency must be at least 1".into()));
    }
    let (imap, users) = match (&setup, &a.imap, &a.server.users_file) {
        (Some(_), _, _) => (None, Vec::new()),
        (None, Some(t), Some(f)) => (
            Some(parse_target(t, 143).map_err(|e| usage(format!("--imap: {e}")))?),
            users_file(f).map_err(usage)?,
        ),
        _ => {
            return Err(usage(format!(
                "give --lab {}, or --imap HOST:PORT and --users-file FILE",
                Store::names()
            )));
        }
    };
    let plan = crate::mailbox::append::AppendPlan {
        imap,
        users,
        per_user,
        folders: folders as u32,
        size,
        flags: flags.clone(),
        concurrency: concurrency as usize,
        connect: crate::mailbox::profile::user::connect_options(
            std::time::Duration::from_secs(10),
            std::time::Duration::from_secs(60),
        ),
        config_json: serde_json::json!({
            "protocol": "imap",
            "via": "append",
            "per_user": per_user,
            "folders": folders,
            "size": a.filling.fill_size,
            "flags": flags.iter().map(|(f, s)| serde_json::json!({"flag": f, "share": s})).collect::<Vec<_>>(),
            "fill_concurrency": concurrency,
            "lab": a.server.lab.map(Store::name),
            "thresholds": a.out.threshold,
        }),
    };
    sweep_before(&setup);
    let shutdown = Shutdown::install();
    let results = crate::mailbox::bench::append(plan, setup, shutdown)
        .await
        .map_err(exit)?;
    deliver(results, &outputs, |r| {
        let headline = format!(
            "mailbench mailbox populate: {} messages over IMAP APPEND in {:.2} s",
            r.counters.sent, r.duration_s
        );
        crate::report::text::render_imap(r, crate::imap::steps::STEPS, &headline)
    })
}

#[cfg(test)]
mod tests {
    use super::store_users;

    /// Issue 25 item 20: a mailbox user list is `address password`; its errors do not
    /// offer the sink's d/r/g/b flags, which mean nothing to a store.
    #[test]
    fn store_user_lists_are_address_and_password() {
        let users = store_users("# users\nu1@s.test secret1\n\nu2@s.test p2\n").expect("parse");
        assert_eq!(users.len(), 2);
        assert_eq!(
            (users[1].address.as_str(), users[1].password.as_str()),
            ("u2@s.test", "p2")
        );
        for (text, line, said) in [
            (
                "u1@s.test\n",
                1,
                "u1@s.test has no password; write 'address password' per line",
            ),
            (
                "u1@s.test p dr\n",
                1,
                "\"dr\" after the password; write 'address password' per line",
            ),
            (
                "\nnot-an-address p\n",
                2,
                "\"not-an-address\" is not a mail address",
            ),
        ] {
            let (l, why) = store_users(text).expect_err(text);
            assert_eq!(l, line, "{text:?}");
            assert!(
                why.contains(said),
                "{text:?}: expected {said:?}, got {why:?}"
            );
            assert!(!why.contains("flags"), "{text:?}: {why}");
        }
    }
}
