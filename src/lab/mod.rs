//! Disposable real MTAs for benchmarks. Each lab is started for a run in temporary
//! directories with its own ports, relays everything to a target (the embedded sink),
//! and is stopped and removed on drop, whatever happens. Every MTA is one file behind
//! [`LabServer`] (`postfix`), registered in [`Mta`]; what they share — free ports, the
//! greeting check, queue placement, certificates, checks — is in `host`.

pub mod host;
pub mod postfix;

use std::net::SocketAddr;
use std::path::PathBuf;

/// Where a lab's queue lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum QueueKind {
    /// A RAM disk (tmpfs mount; /dev/shm when mounting is not permitted).
    Tmpfs,
    /// A directory on disk.
    Disk,
}

/// How to build a lab, in terms every MTA has.
#[derive(Debug, Clone)]
pub struct LabOptions {
    /// Instances chained MTA → MTA → ... → relay.
    pub hops: u8,
    /// Queue placement.
    pub queue: QueueKind,
    /// The MTA's own settings, `key=value`, applied to every instance after the lab's.
    pub settings: Vec<(String, String)>,
    /// Where the last instance relays to.
    pub relay: SocketAddr,
    /// Offer STARTTLS on the entry, with a certificate made for the lab. Off unless asked:
    /// a server that loads TLS in every process costs the run (Postfix's first greetings
    /// doubled, 1.6 s to 3 s for 64 sessions).
    pub starttls: bool,
}

/// Why a lab did not start. The kinds matter to callers: a rejected setting is the user's
/// input (exit 1), a taken port is retried on another, the rest are failures (exit 2).
#[derive(Debug)]
pub enum LabError {
    /// The MTA refused one of its settings (the message names it).
    Setting(String),
    /// The port was taken by another server before the MTA bound it.
    PortTaken(String),
    /// Anything else (the MTA missing, not root, a file that cannot be written).
    Failed(String),
}

impl std::fmt::Display for LabError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LabError::Setting(m) | LabError::PortTaken(m) | LabError::Failed(m) => f.write_str(m),
        }
    }
}

/// A running lab MTA, whatever it is: what a relay run and `mailbench lab` need of it.
pub trait LabServer: Send + Sync {
    /// Where to inject.
    fn entry(&self) -> SocketAddr;
    /// Every process of the lab (the system under test, observed from /proc).
    fn pids(&self) -> Vec<u32>;
    /// Deliveries to the relay target, counted from the MTA's own log.
    fn delivered_logged(&self) -> usize;
    /// Messages the MTA still holds, in every instance.
    fn queued(&self) -> usize;
    /// Its log files, first instance first (kept beside the results).
    fn logs(&self) -> Vec<PathBuf>;
    /// Every directory it made (removed when it stops).
    fn dirs(&self) -> Vec<PathBuf>;
    /// Notices for the user (e.g. a tmpfs fallback).
    fn notices(&self) -> &[String];
    /// One line per instance for `mailbench lab`: where it listens, its configuration.
    fn describe(&self) -> Vec<String>;
    /// The certificate its entry offers with STARTTLS, when it does.
    fn certificate(&self) -> Option<PathBuf>;
}

/// The MTAs a lab can run. Adding one is a file implementing [`LabServer`] and a variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mta {
    /// Postfix from Debian's package.
    Postfix,
}

impl Mta {
    /// The name in results and messages.
    pub fn name(self) -> &'static str {
        match self {
            Mta::Postfix => "postfix",
        }
    }

    /// Checks that this lab can run here; the error says how to fix it.
    pub fn check(self) -> Result<(), String> {
        match self {
            Mta::Postfix => postfix::check(),
        }
    }

    /// Starts the lab (blocking: it waits for the MTA to greet).
    pub fn start(self, opts: &LabOptions) -> Result<Box<dyn LabServer>, LabError> {
        match self {
            Mta::Postfix => Ok(Box::new(postfix::Lab::start(opts)?)),
        }
    }
}
