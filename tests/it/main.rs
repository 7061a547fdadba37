//! Integration tests against real servers, in one test binary.
//!
//! - `arrival`: `mailbox arrival`: every message through Postfix (or LMTP) into Dovecot seen
//!   once over IMAP IDLE, imaplib's counts, a known IMAP delay in end to end
//! - `cli`:  bad input, help, exit codes (no server needed)
//! - `cpu_truth`: issue 40 — the system under test's CPU against a cgroup's count, interval
//!   by interval: a tree whose children exit mid-interval, a qmail lab at saturation; its
//!   memory as the proportional set size `smaps_rollup` gives
//! - `cyrus`: the Cyrus lab store: populate, IMAP and POP3 counts checked with Python's
//!   imaplib and poplib, and `--lab cyrus` runs that leave nothing behind
//! - `deploy`: issue 16 — the Kubernetes example against the bundled schemas
//!   (kubernetes-validate) and the meaning checks the schemas cannot make
//! - `dns`: issue 14 — `mailbench dns` answering dig over UDP, TCP and IPv6 as the zone
//!   spec says, fault shares and delays, bad specs; a lab Postfix resolving 50 domains
//!   through it and a SERVFAIL window deferring mail that arrives once it is lifted
//! - `dns_nsd`: issue 26 — zone files and synthetic zones answered as NSD answers them,
//!   question by question (dig), every difference listed with the RFC that allows it
//! - `durability`: issue 42 — the sink on LazyFS losing at a power cut exactly the messages
//!   LazyFS reports unsynced (none with `--fsync`), on a full loop-mounted ext4 answering
//!   452 and keeping on disk exactly what it acknowledged (Python reads the disk), nothing
//!   left mounted, attached or running, also after a run that died
//! - `relay_faults`: issue 42 phase 2 — `relay --fault crash@N` and `power-loss@N` on the
//!   lab Postfix: every message it accepted delivered after the restart, duplicates as
//!   its own log counts them, nothing left mounted or running; bad `--fault` values
//!   refused in one line
//! - `relay_faults_mtas`: issue 42 — the same faults on the other lab MTAs (Exim, Sendmail): lost 0
//!   and duplicates as each MTA's own log shows, LazyFS dropping none of its message files
//! - `examples`: issue 25 item 20 — every example of every `--help` and of README.md run
//!   for real (fixtures made, a sink where they send, SIGINT after a few seconds, no lab
//!   left behind), each example line fitting the help width, every threshold key a help
//!   shows accepted by its command
//! - `grafana`: issue 31 — deploy/grafana's dashboard importable, its PromQL parsed by
//!   promtool, every series it queries (and only those) in real scrapes of send, sink,
//!   relay, POP3 and IMAP runs
//! - `imap`: `mailbox imap` against `lab dovecot`: counts checked with imaplib, zero state
//!   violations, and a corrupting proxy caught by the state checks
//! - `iotrace`: issue 29 — `relay --trace-io`: a known program's fsyncs, files created,
//!   renamed and unlinked and bytes written counted exactly (strace agreeing), a lab
//!   Postfix's one queue file per message, refusals in one line, tracefs left as found
//! - `install`: issue 31 — scripts/install.sh into a temp prefix: man renders every
//!   command's page, bash and fish complete with the installed scripts, zsh parses its;
//!   `--version` names git's commit, `unknown` without a checkout
//! - `lab_names`: issue 41 — no lab named outside its own file and the registry (a grep)
//! - `layout`: the source tree's rules: import layers, sans-IO protocol cores
//! - `live`: the live view under tmux (figures while running, the summary intact after a
//!   resize), `/metrics` parsed by the Prometheus client's OpenMetrics parser and equal to
//!   the results file at the end
//! - `leftovers`: issue 25 — labs of killed runs cleaned by the next lab run and by
//!   `doctor` (a live lab left alone), two quick Ctrl-Cs never leaving Dovecot running, an
//!   interrupted MTA comparison said and compared over whole rounds, every round's log kept
//! - `mta_lookup`: issue 29 — recipient lookups (hash, a private slapd) delivering exactly,
//!   lookups counted as slapd's access log counts them, an LDAP down window's 451s as
//!   Postfix logged them, logging off counted by the sink, refusals in one line
//! - `mtas`: issue 15 — Exim, OpenSMTPD and Sendmail labs relaying exactly once and
//!   leaving nothing behind, deferrals retried within the run, two MTAs compared over
//!   rotated rounds in one table and one results file, refused settings in one line
//! - `mailbox`: `mailbox pop3` and `populate` against `lab dovecot`, checked with Python's
//!   poplib and imaplib (counts, octets, deletions, folders, refused logins, STLS, cleanup)
//! - `mailbox_shards`: issue 44 — `mailbox pop3` and `imap` split in three against one
//!   `lab dovecot` and merged: counts equal the agents' sums, poplib's, imaplib's and
//!   Dovecot's log; histograms added count by count; bad splits refused in one line
//! - `profile_shards`: issue 44 — `mailbox profile` split in three against one `lab
//!   dovecot` and merged: sums, Dovecot's log, the capacity judged again as one agent with
//!   all the users judges it; a missing agent leaves it unjudged; bad splits refused
//! - `preflight`: `doctor` and a run's preflight under a low `ulimit -n` set in a child
//!   shell (the warning, its fix, the run going on, the line kept in the results)
//! - `recipe_seed001`: docs/recipes/seed-001.md's small-scale commands give its table and
//!   chart
//! - `stores`: issue 30 — one seed asks Dovecot and Cyrus for the same actions (imaplib's
//!   mailboxes alike after), a store held to fewer processes compared to lower capacity
//! - `profile`: `mailbox profile`: a preset's action counts within Poisson's range, its
//!   sends in the Sent folders imaplib reads, a capacity ramp against a Dovecot held to
//!   fewer processes
//! - `scale`: issue 16 — a send split over 2, 3 and 4 agent processes (launcher index
//!   variables, a shared `--start-at` and `--run-id`) merged into the single run's counts
//!   and schedule, two sinks merged, two agents through a lab Postfix, refusals
//! - `slurm`: issue 31 — `srun -n 3` and the array job of deploy/slurm under a private
//!   one-node Slurm (munged, slurmctld, slurmd) merged into one agent's run exactly;
//!   the scripts' refusals
//! - `send`: `mailbench send` against Postfix's smtp-sink (counts, dump contents, open-loop
//!   rate, thresholds, SIGTERM)
//! - `qmail`: issue 29 — the qmail lab relaying exactly once as its own log says, its
//!   remote concurrency as set, compared with Postfix over rotating rounds, refusals, a
//!   killed run's qmail stopped and removed by `doctor`
//! - `queue_states`: issue 29 — the lab MTAs' queue states against `postqueue -j`,
//!   `qshape` and `qmail-qstat` at a quiescent backlog, and in a relay run's results
//! - `recipe_seed004`: issue 29 — docs/recipes/seed-004.md's commands at a small scale,
//!   its table against its results files
//! - `recipes`: issue 31 — each seed's recipe run from its page (docs/recipes/), scaled
//!   down by the page's own substitutions, its tables checked against its results files
//! - `relay`: `mailbench relay --lab postfix` (exact delivery, deferrals, two hops, cleanup;
//!   issue 25: deliveries per interval and the receiver's 451s against Postfix's log, a
//!   fan-out's drain against its `delay=`, deliveries before the 250 behind a delaying proxy)
//! - `report`: `report` pages of every command's results opened in headless Chromium
//!   (drawn, no script errors, the summary exact), `compare` verdicts on known numbers,
//!   `--rounds` kept whole
//! - `relay_round2`: issue 13 — a flush delivering nothing before its release, a warm-up
//!   kept out of the counts, DKIM passing with its key and failing with another (at the
//!   sink and through Postfix), two reply texts of one code, disk IOPS of a disk queue
//! - `relay_path`: `send` → a private Postfix → `sink` (Postfix's smtpd and SMTP client as
//!   real peers)
//! - `relay_saturation`: issue 40 — `--find-max` against a paced sink within 10 % of the
//!   drain Postfix's log shows, bounces and loss as Postfix's and OpenSMTPD's logs count
//!   them (refused notices, delay notices), a run that delivers nothing, an aborted drain
//! - `sink`: `mailbench sink` against swaks, smtp-source and `mailbench send` (counts,
//!   byte-exact storage, STARTTLS/AUTH/BDAT, fault rules, greylisting, hostile input)
//! - `truth`: issue 9's regression tests: a known delay, count or share in, the exact
//!   figure out (latency per phase and in total, loss, refusals, sizes, warnings, exit
//!   codes, output formats, memory over many connections)

mod arrival;
mod cli;
mod cpu_by_process;
mod cpu_truth;
mod cyrus;
mod deploy;
mod dns;
mod dns_nsd;
mod durability;
mod examples;
mod grafana;
mod imap;
mod install;
mod iotrace;
mod lab_dkim;
mod lab_health;
mod lab_names;
mod layout;
mod leftovers;
mod live;
mod mailbox;
mod mailbox_shards;
mod mta_lookup;
mod mtas;
mod preflight;
mod profile;
mod profile_shards;
mod qmail;
mod queue_states;
mod quickstart;
mod recipe_seed001;
mod recipe_seed004;
mod recipes;
mod relay;
mod relay_faults;
mod relay_faults_mtas;
mod relay_figures;
mod relay_path;
mod relay_round2;
mod relay_saturation;
mod report;
mod scale;
mod send;
mod sink;
mod slurm;
mod store_faults;
mod stores;
mod truth;
mod util;
