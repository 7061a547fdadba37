//! A watched mail store's resources over the whole run, as seed 001's tables list them:
//! memory (the proportional set size, shared pages counted once; RSS summed over all
//! processes, per process, shared), disk requests, paging and network bytes
//! (counted at mailbench's clients: loopback keeps no per-process count); and the line of
//! a store fault (`mailbox populate --fault`), like relay's.

use std::fmt::Write as _;

use crate::stats::Results;

/// The store's whole-run memory, disk requests, paging and network lines, when the store
/// was watched (its per-interval averages and peaks are in the table above them).
pub(super) fn resources(out: &mut String, r: &Results) {
    let Some(sut) = r.extra.get("sut") else {
        return;
    };
    let f = |k: &str| sut[k].as_f64();
    if let (Some(pss), Some(per)) = (f("peak_pss_kib"), f("pss_per_proc_kib")) {
        let _ = writeln!(
            out,
            "  store mem  peak PSS {pss:.0} KiB, {per:.0} KiB per process (each shared page counted once)"
        );
    }
    if let (Some(rss), Some(procs), Some(per), Some(shared)) = (
        f("peak_rss_kib"),
        f("peak_procs"),
        f("rss_per_proc_kib"),
        f("peak_shared_kib"),
    ) {
        let _ = writeln!(
            out,
            "  store mem  peak RSS {rss:.0} KiB, peak {procs:.0} processes, {per:.0} KiB per process, peak shared {shared:.0} KiB"
        );
    }
    if let (Some(rc), Some(wc), Some(faults)) = (
        f("disk_read_calls_per_s"),
        f("disk_write_calls_per_s"),
        f("major_faults_per_s"),
    ) {
        let _ = writeln!(
            out,
            "  store io   {rc:.1} read calls/s, {wc:.1} write calls/s, {faults:.1} major page faults/s"
        );
    }
    if let (Some(i), Some(o), Some(ib), Some(ob)) = (
        f("net_in_bytes_per_s"),
        f("net_out_bytes_per_s"),
        f("net_in_bytes"),
        f("net_out_bytes"),
    ) {
        let _ = writeln!(
            out,
            "  store net  in {i:.0} bytes/s, out {o:.0} bytes/s ({ib:.0} and {ob:.0} bytes, counted at mailbench's clients)"
        );
    }
}

/// The line of a store fault (`mailbox populate --fault`, from `extra.fault`), like relay's:
/// when it fired, how long the store was down, what LazyFS held unsynced at the cut, and
/// what the mailboxes held of the accepted messages afterwards; empty without a fault.
pub fn fault_line(r: &Results) -> String {
    let Some(f) = r.extra.get("fault") else {
        return String::new();
    };
    let label = f["fault"].as_str().unwrap_or("?");
    if f["fired"] != true {
        return format!(
            "  fault      {label}: never fired (the count was not reached: {} accepted)\n",
            f["accepted"]
        );
    }
    let n = |k: &str| f[k].as_u64().unwrap_or(0);
    let s = |k: &str| f[k].as_f64().unwrap_or(0.0);
    let unsynced = f["unsynced_files"].as_u64().map_or(String::new(), |u| {
        format!(", {u} mail files unsynced at the cut")
    });
    let found = n("accepted") - n("lost");
    format!(
        "  fault      {label} at {:.2} s ({} accepted): down {:.2} s{unsynced}; after recovery {found} of {} accepted messages in their mailboxes: lost {}, duplicated {} ({} errors and {} refusals during the fill, {} messages unreadable)\n",
        s("at_s"),
        n("accepted_before"),
        s("down_s"),
        n("accepted"),
        n("lost"),
        n("duplicated"),
        n("errors"),
        n("rejected"),
        n("unreadable"),
    )
}
