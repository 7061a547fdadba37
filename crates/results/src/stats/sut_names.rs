//! The system under test's CPU by process name (`/proc/PID/stat`'s comm: `smtpd`,
//! `cleanup`, `qmgr`, `smtp`; `qmail-send`, `qmail-remote`; `imap`), as `top` shows which
//! of a server's processes is busy (seeds 000, 001 and 004 looked there by hand).
//!
//! Each reading lists the tree's processes with their own CPU and their reaped
//! children's; the names' counts grow by what each process used since the reading before
//! (all of it for one born since, under the name it has now: a forked child that exec'd
//! is counted under what it runs). A process that ended took with it the CPU it used
//! after it was last read; its parent's reaped-children count grew by all of it, so that
//! count's growth, less what the ended children had already been counted, is theirs: it
//! goes to their names (split evenly between them), or, when the parent reaped only
//! children never read (lived and ended between two readings, `qmail-queue` under
//! `qmail-smtpd`), to `reaped by NAME`. What stays unnamed is the CPU of a process that
//! ended without its parent in the tree reaping it (reparented away) after its last
//! reading, and the tick-rounding of the reaped counts.
//!
//! Context switches (`/proc/PID/status`'s `voluntary_ctxt_switches`, a process waiting:
//! on the disk, a lock, a client; `nonvoluntary_ctxt_switches`, a process the scheduler
//! took the CPU from) are counted the same way from each process's own count, but the
//! kernel keeps no reaped children's count a reader of `/proc` can see: the switches of a
//! process after its last reading (all of them for one that lived and ended between two
//! readings) and those of a multi-threaded process's ended threads are not counted.

use std::collections::{BTreeMap, HashMap};

/// One process as a reading found it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProcCpu {
    /// Its id.
    pub pid: u32,
    /// Its parent's id.
    pub ppid: u32,
    /// When it started (`stat`'s starttime, ticks since boot): with `pid`, which process
    /// it is, so that a reused id is a new process.
    pub start: u64,
    /// Its name (`stat`'s comm).
    pub comm: String,
    /// CPU seconds it used itself, user and system.
    pub own_s: f64,
    /// Of `own_s`, system.
    pub own_sys_s: f64,
    /// CPU seconds of its children it reaped, user and system.
    pub kids_s: f64,
    /// Of `kids_s`, system.
    pub kids_sys_s: f64,
    /// Its resident memory, KiB.
    pub rss_kib: u64,
    /// Times it gave up the CPU to wait (`voluntary_ctxt_switches`, its threads summed).
    pub vol_cs: u64,
    /// Times the scheduler took the CPU from it (`nonvoluntary_ctxt_switches`).
    pub invol_cs: u64,
    /// Its threads (`stat`'s num_threads): where its switches are read from.
    pub threads: u64,
}

impl ProcCpu {
    fn key(&self) -> (u32, u64) {
        (self.pid, self.start)
    }
}

/// What the processes of one name used since the first reading (CPU), and hold at this
/// one (memory, count).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct NameCount {
    /// CPU seconds, user and system, since the first reading.
    pub cpu_s: f64,
    /// Of `cpu_s`, system.
    pub sys_s: f64,
    /// Resident memory of its processes now, summed, KiB.
    pub rss_kib: u64,
    /// Its processes now.
    pub procs: u64,
    /// Voluntary context switches since the first reading (those of processes that ended
    /// after their last reading are not counted: see the module's comment).
    pub vol_cs: u64,
    /// Involuntary context switches since the first reading, counted as `vol_cs` is.
    pub invol_cs: u64,
}

/// The counts by name, kept from one reading to the next.
#[derive(Debug, Default)]
pub struct ByName {
    seen: HashMap<(u32, u64), ProcCpu>,
    started: bool,
    totals: BTreeMap<String, NameCount>,
}

impl ByName {
    /// Takes a reading's processes in; the counts by name since the first reading (which
    /// only sets where they start: its names are there with no CPU).
    pub fn update(&mut self, now: Vec<ProcCpu>) -> BTreeMap<String, NameCount> {
        if self.started {
            self.count(&now);
        }
        self.started = true;
        for c in self.totals.values_mut() {
            (c.rss_kib, c.procs) = (0, 0);
        }
        for p in &now {
            let c = self.totals.entry(p.comm.clone()).or_default();
            c.rss_kib += p.rss_kib;
            c.procs += 1;
        }
        self.seen = now.into_iter().map(|p| (p.key(), p)).collect();
        self.totals.clone()
    }

    /// Adds what `now`'s processes used since the last reading.
    fn count(&mut self, now: &[ProcCpu]) {
        let live: std::collections::HashSet<(u32, u64)> = now.iter().map(ProcCpu::key).collect();
        let mut ended: HashMap<u32, Vec<&ProcCpu>> = HashMap::new();
        for p in self.seen.values().filter(|p| !live.contains(&p.key())) {
            ended.entry(p.ppid).or_default().push(p);
        }
        // Switches: what each process's own counts grew by (all of them for one born
        // since); an ended process's last ones are not seen.
        for p in now {
            let before = self.seen.get(&p.key());
            let c = self.totals.entry(p.comm.clone()).or_default();
            c.vol_cs += p.vol_cs.saturating_sub(before.map_or(0, |q| q.vol_cs));
            c.invol_cs += p.invol_cs.saturating_sub(before.map_or(0, |q| q.invol_cs));
        }
        let mut add = |name: &str, cpu: f64, sys: f64| {
            if cpu > 0.0 {
                let c = self.totals.entry(name.to_string()).or_default();
                c.cpu_s += cpu;
                c.sys_s += sys.clamp(0.0, cpu);
            }
        };
        for p in now {
            let before = self.seen.get(&p.key());
            let was = |f: fn(&ProcCpu) -> f64| before.map_or(0.0, f);
            add(
                &p.comm,
                (p.own_s - was(|q| q.own_s)).max(0.0),
                p.own_sys_s - was(|q| q.own_sys_s),
            );
            // Its reaped children's growth, less what those that ended since were counted.
            let gone = ended.remove(&p.pid).unwrap_or_default();
            let counted = |f: fn(&ProcCpu) -> f64| gone.iter().map(|q| f(q)).sum::<f64>();
            let rest = (p.kids_s - was(|q| q.kids_s)) - counted(|q| q.own_s + q.kids_s);
            let rest_sys =
                (p.kids_sys_s - was(|q| q.kids_sys_s)) - counted(|q| q.own_sys_s + q.kids_sys_s);
            if rest <= 0.0 {
                continue;
            }
            if gone.is_empty() {
                add(&format!("reaped by {}", p.comm), rest, rest_sys);
            } else {
                let n = gone.len() as f64;
                for q in &gone {
                    add(&q.comm, rest / n, rest_sys / n);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proc(pid: u32, ppid: u32, comm: &str, own_s: f64, kids_s: f64) -> ProcCpu {
        ProcCpu {
            pid,
            ppid,
            start: pid as u64 * 10,
            comm: comm.into(),
            own_s,
            own_sys_s: own_s / 4.0,
            kids_s,
            kids_sys_s: kids_s / 4.0,
            rss_kib: 1000,
            ..ProcCpu::default()
        }
    }

    #[test]
    fn switches_grow_by_each_processs_own_count_and_an_ended_ones_tail_is_not_seen() {
        let cs = |mut p: ProcCpu, vol: u64, invol: u64| {
            (p.vol_cs, p.invol_cs) = (vol, invol);
            p
        };
        let mut by = ByName::default();
        let first = by.update(vec![
            cs(proc(1, 0, "master", 1.0, 0.0), 100, 10),
            cs(proc(2, 1, "smtpd", 1.0, 0.0), 50, 5),
        ]);
        assert_eq!((first["smtpd"].vol_cs, first["smtpd"].invol_cs), (0, 0));
        // master waited 20 times more; smtpd 2 ended (what it did since is not seen); an
        // smtpd 3 was born and has 7 and 1 already.
        let second = by.update(vec![
            cs(proc(1, 0, "master", 1.0, 1.5), 120, 11),
            cs(proc(3, 1, "smtpd", 0.25, 0.0), 7, 1),
        ]);
        assert_eq!(
            (second["master"].vol_cs, second["master"].invol_cs),
            (20, 1)
        );
        assert_eq!((second["smtpd"].vol_cs, second["smtpd"].invol_cs), (7, 1));
        // A reused id with another start is a new process: all its switches are new.
        let mut again = cs(proc(3, 1, "smtpd", 0.25, 0.0), 4, 2);
        again.start += 1;
        let third = by.update(vec![cs(proc(1, 0, "master", 1.0, 1.75), 120, 11), again]);
        assert_eq!((third["smtpd"].vol_cs, third["smtpd"].invol_cs), (11, 3));
        assert_eq!(third["master"].vol_cs, 20);
    }

    #[test]
    fn names_grow_by_each_processs_cpu_since_the_reading_before() {
        let mut by = ByName::default();
        // The first reading sets where the counts start.
        let first = by.update(vec![
            proc(1, 0, "master", 5.0, 0.0),
            proc(2, 1, "smtpd", 3.0, 0.0),
            proc(3, 1, "smtpd", 1.0, 0.0),
        ]);
        assert_eq!(first["smtpd"].cpu_s, 0.0);
        assert_eq!((first["smtpd"].procs, first["smtpd"].rss_kib), (2, 2000));
        // smtpd 2 used 0.5 s more and ended, its last 0.25 s unseen: master's reaped count
        // grew by its whole 3.75 s, of which 3.5 s were counted already. A cleanup was born.
        let second = by.update(vec![
            proc(1, 0, "master", 5.5, 3.75),
            proc(3, 1, "smtpd", 1.25, 0.0),
            proc(4, 1, "cleanup", 0.75, 0.0),
        ]);
        assert_eq!(second["master"].cpu_s, 0.5);
        assert_eq!(second["cleanup"].cpu_s, 0.75);
        // smtpd: 3's 0.25 s, 2's tail of 0.75 s (0.5 s more, then 0.25 s unseen).
        // (Read at the first reading only, 2's count is what it had then: 3.0 s.)
        assert_eq!(second["smtpd"].cpu_s, 0.25 + 0.75);
        assert_eq!(second["smtpd"].procs, 1);
        assert_eq!(second["cleanup"].sys_s, 0.75 / 4.0);
        // master reaps a child it never had at a reading: 0.5 s.
        let third = by.update(vec![
            proc(1, 0, "master", 5.5, 4.25),
            proc(3, 1, "smtpd", 1.25, 0.0),
            proc(4, 1, "cleanup", 0.75, 0.0),
        ]);
        assert_eq!(third["reaped by master"].cpu_s, 0.5);
        // A reused id with another start is a new process: all its CPU is new.
        let mut again = proc(3, 1, "smtpd", 0.5, 0.0);
        again.start += 1;
        let fourth = by.update(vec![
            proc(1, 0, "master", 5.5, 5.5),
            again,
            proc(4, 1, "cleanup", 0.75, 0.0),
        ]);
        // The old 3 ended (reaped, 1.25 s known, 1.25 s grown: no tail), the new one ran
        // 0.5 s.
        assert_eq!(fourth["smtpd"].cpu_s, 1.0 + 0.5);
        let sum: f64 = fourth.values().map(|c| c.cpu_s).sum();
        // What the tree's total grew by: own and reaped, from 9 s to 12.25 s.
        assert_eq!(sum, (5.5 + 5.5 + 0.5 + 0.75) - (5.0 + 3.0 + 1.0));
    }
}
