//! State checking (imaptest's idea, counted instead of printed): each session keeps a
//! model of its selected mailbox (the sequence-number → UID map that EXISTS, EXPUNGE and
//! FETCH announce), and all sessions share what each message looked like (size, ENVELOPE,
//! BODYSTRUCTURE, body fingerprint) by UID and by Message-ID. A response that contradicts
//! the model or an earlier session is a violation of one of the [`Violation`] kinds. A
//! correct server shows none, under any concurrency.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Mutex;

use super::proto::{Code, Data, Fetch, FlagOp};

/// A kind of state violation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Violation {
    /// A message's UID differs from the one its sequence number had.
    UidChanged,
    /// UIDs do not ascend with sequence numbers, or a new message's UID is not above the
    /// known ones.
    UidNotAscending,
    /// A FETCH for a sequence number no EXISTS announced.
    SeqUnannounced,
    /// EXPUNGE of a sequence number that does not exist.
    ExpungeUnknown,
    /// EXISTS announced fewer messages than there are, without EXPUNGE.
    ExistsShrank,
    /// A STORE's own FETCH shows flags that are not what was stored.
    FlagsNotStored,
    /// A message's size, ENVELOPE, BODYSTRUCTURE, body or Message-ID differs from what an
    /// earlier response said of the same UID or Message-ID.
    MetadataChanged,
    /// A whole body whose length is not the message's RFC822.SIZE.
    SizeMismatch,
    /// `UID SEARCH ALL` disagrees with the UIDs and count the session knows.
    SearchMismatch,
}

impl Violation {
    /// Every kind, in the order results list them.
    pub const ALL: [Violation; 9] = [
        Violation::UidChanged,
        Violation::UidNotAscending,
        Violation::SeqUnannounced,
        Violation::ExpungeUnknown,
        Violation::ExistsShrank,
        Violation::FlagsNotStored,
        Violation::MetadataChanged,
        Violation::SizeMismatch,
        Violation::SearchMismatch,
    ];

    /// The stable name used in results files.
    pub fn name(self) -> &'static str {
        match self {
            Violation::UidChanged => "uid_changed",
            Violation::UidNotAscending => "uid_not_ascending",
            Violation::SeqUnannounced => "seq_unannounced",
            Violation::ExpungeUnknown => "expunge_unknown",
            Violation::ExistsShrank => "exists_shrank",
            Violation::FlagsNotStored => "flags_not_stored",
            Violation::MetadataChanged => "metadata_changed",
            Violation::SizeMismatch => "size_mismatch",
            Violation::SearchMismatch => "search_mismatch",
        }
    }
}

/// What a message looked like; `None` where no response said it yet.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Meta {
    message_id: Option<u64>,
    size: Option<u64>,
    envelope: Option<u64>,
    structure: Option<u64>,
    body: Option<u64>,
}

impl Meta {
    fn of(f: &Fetch) -> Meta {
        Meta {
            message_id: f.message_id,
            size: f.size,
            envelope: f.envelope,
            structure: f.structure,
            body: f.body.as_ref().filter(|b| b.whole).map(|b| b.fingerprint),
        }
    }

    /// Merges `new` into what is known; false when they contradict.
    fn merge(&mut self, new: &Meta) -> bool {
        fn one(old: &mut Option<u64>, new: Option<u64>) -> bool {
            match (*old, new) {
                (Some(a), Some(b)) => a == b,
                (None, b) => {
                    *old = b;
                    true
                }
                (Some(_), None) => true,
            }
        }
        // Every field is merged even after a contradiction, so later ones are learnt.
        [
            one(&mut self.message_id, new.message_id),
            one(&mut self.size, new.size),
            one(&mut self.envelope, new.envelope),
            one(&mut self.structure, new.structure),
            one(&mut self.body, new.body),
        ]
        .iter()
        .all(|ok| *ok)
    }
}

/// Where a message lives: user, mailbox, UIDVALIDITY, UID.
type UidKey = (u32, u32, u32, u32);

/// What all sessions of a run learnt of the messages.
#[derive(Debug, Default)]
pub struct Shared {
    inner: Mutex<Known>,
    /// FETCHes checked: the tests see which ones skipped the look-ups.
    #[cfg(test)]
    checked: std::sync::atomic::AtomicUsize,
}

#[derive(Debug, Default)]
struct Known {
    by_uid: HashMap<UidKey, Meta, Quick>,
    by_message_id: HashMap<u64, Meta, Quick>,
}

/// The maps' hasher: their keys are numbers and fingerprints, already spread, so one
/// multiply per word does (SipHash was a tenth of the client's time per listed message).
type Quick = BuildHasherDefault<QuickHasher>;

/// See [`Quick`].
#[derive(Debug, Default, Clone, Copy)]
struct QuickHasher(u64);

impl Hasher for QuickHasher {
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(u64::from(*b));
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(23) ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }

    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 29)
    }
}

impl Shared {
    /// Checks a FETCH's metadata against what earlier responses said of the same message;
    /// true when nothing contradicted.
    fn check(&self, key: UidKey, f: &Fetch, out: &mut Vec<Violation>) -> bool {
        #[cfg(test)]
        self.checked
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let before = out.len();
        let mut meta = Meta::of(f);
        let whole = f.body.as_ref().filter(|b| b.whole);
        if let (Some(size), Some(body)) = (meta.size, whole)
            && size != body.len
        {
            out.push(Violation::SizeMismatch);
        }
        let Ok(mut known) = self.inner.lock() else {
            return false;
        };
        let entry = known.by_uid.entry(key).or_default();
        if !entry.merge(&meta) {
            out.push(Violation::MetadataChanged);
        }
        // The Message-ID may be known from an earlier FETCH of the same UID.
        meta.message_id = entry.message_id;
        let by_uid = *entry;
        if let Some(id) = meta.message_id {
            let msg = known.by_message_id.entry(id).or_default();
            // A copy has its own UID but the same content: compare content only.
            let content = Meta {
                message_id: None,
                ..by_uid
            };
            if !msg.merge(&content) {
                out.push(Violation::MetadataChanged);
            }
        }
        out.len() == before
    }

    /// Messages known (for memory accounting in tests).
    pub fn len(&self) -> usize {
        self.inner.lock().map_or(0, |k| k.by_uid.len())
    }

    /// True when nothing is known yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Slots of a session's [`Recall`].
const RECALLED: usize = 32;

/// The FETCHes last checked clean against [`Shared`] in one user's mailbox under one
/// UIDVALIDITY, a slot per UID modulo 32: the same response again cannot
/// contradict anything (what `Shared` knows of a message is only ever added to, and all
/// of this one's fields agreed with it), so it skips the lock and the two look-ups, which
/// miss the cache on most FETCHes (a tenth of the client's time on a body-fetch
/// workload). That holds whichever session checked it, so a user's next session takes it
/// over ([`Recalls`]) instead of looking every message up again. Made on the first
/// check: an idle session holds none.
#[derive(Debug, Default)]
pub struct Recall {
    /// The UIDVALIDITY its slots were checked under.
    validity: Option<u32>,
    slots: Vec<(u32, u64)>,
}

impl Recall {
    /// A FETCH's digest: every field `Shared` compares, and the body's length that the
    /// size check reads.
    fn digest(f: &Fetch) -> u64 {
        let m = Meta::of(f);
        let fields = [
            m.message_id,
            m.size,
            m.envelope,
            m.structure,
            m.body,
            f.body.as_ref().map(|b| b.len),
        ];
        fields.iter().fold(0x2545_f491_4f6c_dd1d, |h, v| {
            let v = v.map_or(u64::MAX, |x| x.wrapping_add(1));
            (h.rotate_left(23) ^ v).wrapping_mul(0x9e37_79b9_7f4a_7c15)
        })
    }

    fn recalls(&self, uid: u32, digest: u64) -> bool {
        self.slots.get(uid as usize % RECALLED) == Some(&(uid, digest))
    }

    fn remember(&mut self, uid: u32, digest: u64) {
        if self.slots.is_empty() {
            self.slots = vec![(0, 0); RECALLED];
        }
        self.slots[uid as usize % RECALLED] = (uid, digest);
    }

    /// The mailbox is (again) under UIDVALIDITY `v`: what was checked under another
    /// says nothing of its messages.
    fn validity(&mut self, v: u32) {
        if self.validity != Some(v) {
            self.slots.clear();
            self.validity = Some(v);
        }
    }
}

/// Users a [`Recalls`] keeps a recall for (at most 528 octets each): the first 16,384.
const RECALLED_USERS: usize = 16_384;

/// Each user's [`Recall`] between sessions: a session of the user takes it when it opens
/// and gives it back when it ends.
#[derive(Debug, Default)]
pub struct Recalls(Mutex<Vec<Recall>>);

impl Recalls {
    /// User `user`'s recall (an empty one when none was kept or a session has it).
    pub fn take(&self, user: usize) -> Recall {
        let mut v = self.0.lock().unwrap_or_else(|p| p.into_inner());
        v.get_mut(user).map(std::mem::take).unwrap_or_default()
    }

    /// Keeps `recall` for user `user`'s next session.
    pub fn give(&self, user: usize, recall: Recall) {
        if user >= RECALLED_USERS || recall.slots.is_empty() {
            return;
        }
        let mut v = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if v.len() <= user {
            v.resize_with(user + 1, Recall::default);
        }
        v[user] = recall;
    }
}

/// Largest mailbox whose sequence-number → UID map a session keeps (400 KB): a larger
/// one (or a hostile EXISTS) is counted, not mapped, so a session's memory stays bounded.
pub const MAX_TRACKED: u32 = 100_000;

/// One session's model of its selected mailbox.
#[derive(Debug, Default)]
pub struct Model {
    /// Which user's mailbox (for the shared keys).
    user: u32,
    /// Which mailbox, as a number the driver gives.
    mailbox: u32,
    /// `[UIDVALIDITY]` of the selection.
    validity: Option<u32>,
    /// Messages announced (EXISTS, less EXPUNGEs).
    exists: u32,
    /// UID per sequence number (index seq−1), 0 while unknown; empty when the mailbox is
    /// larger than [`MAX_TRACKED`].
    uids: Vec<u32>,
    /// Highest UID ever seen in this selection.
    max_uid: u32,
    /// This selection's FETCHes last checked clean against what all sessions know.
    recall: Recall,
}

impl Model {
    /// A model for `user`'s mailbox `mailbox`, nothing selected yet.
    pub fn new(user: u32, mailbox: u32) -> Model {
        Model {
            user,
            mailbox,
            ..Model::default()
        }
    }

    /// Messages the server announced.
    pub fn exists(&self) -> u32 {
        self.exists
    }

    /// True while the UID map follows the mailbox (it is not larger than [`MAX_TRACKED`]).
    pub fn mapped(&self) -> bool {
        self.uids.len() == self.exists as usize
    }

    /// Entries in the UID map: at most [`MAX_TRACKED`].
    pub fn tracked(&self) -> usize {
        self.uids.len()
    }

    /// The UID of sequence number `seq`, when known.
    pub fn uid(&self, seq: u32) -> Option<u32> {
        let i = usize::try_from(seq).ok()?.checked_sub(1)?;
        self.uids.get(i).copied().filter(|u| *u != 0)
    }

    /// A new SELECT: forget the old mailbox's map.
    pub fn reset(&mut self) {
        self.validity = None;
        self.exists = 0;
        self.uids.clear();
        self.max_uid = 0;
        self.recall = Recall::default();
    }

    /// Starts from what an earlier session of the same user checked clean (see
    /// [`Recall`]); used only under the UIDVALIDITY it was checked under.
    pub fn resume(&mut self, recall: Recall) {
        self.recall = recall;
    }

    /// What this session checked clean, for the user's next session.
    pub fn take_recall(&mut self) -> Recall {
        std::mem::take(&mut self.recall)
    }

    /// Applies untagged data, checking it; violations go to `out`.
    pub fn apply(&mut self, d: &Data, shared: Option<&Shared>, out: &mut Vec<Violation>) {
        match d {
            Data::Exists(n) => {
                if *n < self.exists {
                    out.push(Violation::ExistsShrank);
                }
                let mapped = self.mapped();
                self.exists = *n;
                if mapped && *n <= MAX_TRACKED {
                    self.uids.resize(*n as usize, 0);
                } else {
                    self.uids = Vec::new();
                }
            }
            Data::Expunge(n) => {
                if *n == 0 || *n > self.exists {
                    out.push(Violation::ExpungeUnknown);
                    return;
                }
                if self.mapped() {
                    self.uids.remove(*n as usize - 1);
                }
                self.exists -= 1;
            }
            Data::Fetch(f) => self.fetched(f, shared, out),
            Data::Status {
                code: Some(Code::UidValidity(v)),
                ..
            } => {
                self.recall.validity(*v);
                self.validity = Some(*v);
            }
            _ => {}
        }
    }

    fn fetched(&mut self, f: &Fetch, shared: Option<&Shared>, out: &mut Vec<Violation>) {
        if f.seq == 0 || f.seq > self.exists {
            out.push(Violation::SeqUnannounced);
            return;
        }
        let Some(uid) = f.uid else { return };
        // A FETCH of UID and a part of a message (imaptest's FETCH2) says nothing the
        // shared check compares: no look-up for it.
        if let (Some(shared), Some(v)) = (shared, self.validity)
            && Meta::of(f) != Meta::default()
        {
            let digest = Recall::digest(f);
            if !self.recall.recalls(uid, digest)
                && shared.check((self.user, self.mailbox, v, uid), f, out)
            {
                self.recall.remember(uid, digest);
            }
        }
        self.max_uid = self.max_uid.max(uid);
        if !self.mapped() {
            return;
        }
        let i = f.seq as usize - 1;
        match self.uids[i] {
            0 => {
                let below = self.uids[..i].iter().rev().find(|u| **u != 0);
                let above = self.uids[i + 1..].iter().find(|u| **u != 0);
                if below.is_some_and(|b| *b >= uid) || above.is_some_and(|a| *a <= uid) {
                    out.push(Violation::UidNotAscending);
                }
                self.uids[i] = uid;
            }
            known if known != uid => {
                out.push(Violation::UidChanged);
                self.uids[i] = uid;
            }
            _ => {}
        }
    }

    /// Checks a STORE's own FETCH: the flag must now be set (added) or clear (removed).
    pub fn stored(&self, f: &Fetch, op: FlagOp, flag: &str, out: &mut Vec<Violation>) {
        if let Some(set) = f.has_flag(flag)
            && set != (op == FlagOp::Add)
        {
            out.push(Violation::FlagsNotStored);
        }
    }

    /// Checks `UID SEARCH ALL`'s answer against the UIDs and count known.
    pub fn searched(&self, found: &[u32], out: &mut Vec<Violation>) {
        let agrees = found.len() == self.exists as usize
            && (!self.mapped() || found.len() == self.uids.len())
            && found
                .iter()
                .zip(&self.uids)
                .all(|(f, known)| *known == 0 || f == known);
        if !agrees {
            out.push(Violation::SearchMismatch);
        }
    }

    /// Checks the UID an APPEND or COPY gave a new message in this mailbox (validity and
    /// UID): it must be above every UID this selection saw.
    pub fn appended(&mut self, validity: u32, uid: u32, out: &mut Vec<Violation>) {
        if self.validity == Some(validity) {
            if uid <= self.max_uid {
                out.push(Violation::UidNotAscending);
            }
            self.max_uid = self.max_uid.max(uid);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::proto::{Cond, Part};
    use super::*;

    fn fetch(seq: u32, uid: u32) -> Data {
        Data::Fetch(Fetch {
            seq,
            uid: Some(uid),
            ..Fetch::default()
        })
    }

    fn selected(uids: &[u32]) -> Model {
        let mut m = Model::new(0, 0);
        let mut v = Vec::new();
        m.apply(
            &Data::Status {
                cond: Cond::Ok,
                code: Some(Code::UidValidity(7)),
                text: String::new(),
            },
            None,
            &mut v,
        );
        m.apply(&Data::Exists(uids.len() as u32), None, &mut v);
        for (i, u) in uids.iter().enumerate() {
            m.apply(&fetch(i as u32 + 1, *u), None, &mut v);
        }
        assert!(v.is_empty(), "a clean selection: {v:?}");
        m
    }

    fn check(m: &mut Model, d: Data) -> Vec<Violation> {
        let mut v = Vec::new();
        m.apply(&d, None, &mut v);
        v
    }

    #[test]
    fn a_consistent_mailbox_has_no_violations() {
        let mut m = selected(&[3, 5, 9]);
        assert!(check(&mut m, Data::Expunge(2)).is_empty());
        assert_eq!((m.uid(1), m.uid(2)), (Some(3), Some(9)));
        assert!(check(&mut m, Data::Exists(3)).is_empty());
        assert!(check(&mut m, fetch(3, 12)).is_empty());
        let mut v = Vec::new();
        m.searched(&[3, 9, 12], &mut v);
        m.appended(7, 13, &mut v);
        assert!(v.is_empty(), "{v:?}");
    }

    #[test]
    fn each_contradiction_is_its_kind() {
        let mut m = selected(&[3, 5, 9]);
        assert_eq!(check(&mut m, fetch(2, 6)), [Violation::UidChanged]);
        assert_eq!(check(&mut m, fetch(4, 10)), [Violation::SeqUnannounced]);
        assert_eq!(check(&mut m, Data::Expunge(4)), [Violation::ExpungeUnknown]);
        assert_eq!(check(&mut m, Data::Exists(2)), [Violation::ExistsShrank]);
        let mut m = Model::new(0, 0);
        check(&mut m, Data::Exists(3));
        check(&mut m, fetch(1, 5));
        assert_eq!(check(&mut m, fetch(3, 4)), [Violation::UidNotAscending]);
        let mut v = Vec::new();
        let m = selected(&[3, 5]);
        m.searched(&[3, 6], &mut v);
        m.searched(&[3], &mut v);
        assert_eq!(v, [Violation::SearchMismatch, Violation::SearchMismatch]);
        let mut m = selected(&[3, 5]);
        let mut v = Vec::new();
        m.appended(7, 5, &mut v);
        m.appended(8, 1, &mut v);
        assert_eq!(
            v,
            [Violation::UidNotAscending],
            "another UIDVALIDITY is not compared"
        );
    }

    #[test]
    fn a_huge_mailbox_is_counted_not_mapped() {
        let mut m = selected(&[3, 5]);
        assert!(check(&mut m, Data::Exists(u32::MAX)).is_empty());
        assert_eq!((m.exists(), m.tracked()), (u32::MAX, 0), "no 16 GB map");
        assert!(check(&mut m, Data::Expunge(7)).is_empty());
        assert!(
            check(&mut m, fetch(9, 1)).is_empty(),
            "unmapped: not compared"
        );
        assert_eq!(m.exists(), u32::MAX - 1);
    }

    #[test]
    fn stored_flags_are_checked() {
        let m = selected(&[1]);
        let f = Fetch {
            seq: 1,
            flags: Some("\\Seen".into()),
            ..Fetch::default()
        };
        let mut v = Vec::new();
        m.stored(&f, FlagOp::Add, "\\seen", &mut v);
        m.stored(&f, FlagOp::Remove, "\\Flagged", &mut v);
        assert!(v.is_empty(), "{v:?}");
        m.stored(&f, FlagOp::Add, "\\Flagged", &mut v);
        m.stored(&f, FlagOp::Remove, "\\Seen", &mut v);
        assert_eq!(v, [Violation::FlagsNotStored; 2]);
    }

    #[test]
    fn metadata_is_compared_across_sessions_by_uid_and_message_id() {
        let shared = Shared::default();
        let meta = |seq, uid, size, id: u64, body: Option<(u64, u64)>| {
            Data::Fetch(Fetch {
                seq,
                uid: Some(uid),
                size: Some(size),
                message_id: (id != 0).then_some(id),
                body: body.map(|(len, fingerprint)| whole_body(len, fingerprint)),
                ..Fetch::default()
            })
        };
        let mut one = selected(&[1, 2]);
        let mut two = selected(&[1, 2]);
        let mut v = Vec::new();
        one.apply(&meta(1, 1, 100, 11, None), Some(&shared), &mut v);
        two.apply(&meta(1, 1, 100, 0, Some((100, 42))), Some(&shared), &mut v);
        // A copy: another UID, the same Message-ID and content.
        two.apply(&meta(2, 2, 100, 11, Some((100, 42))), Some(&shared), &mut v);
        assert!(v.is_empty(), "{v:?}");
        one.apply(&meta(1, 1, 101, 0, None), Some(&shared), &mut v);
        assert_eq!(v, [Violation::MetadataChanged], "size changed for a UID");
        v.clear();
        two.apply(&meta(2, 2, 100, 0, Some((99, 42))), Some(&shared), &mut v);
        assert_eq!(v, [Violation::SizeMismatch]);
        v.clear();
        one.apply(&meta(2, 2, 100, 0, Some((100, 43))), Some(&shared), &mut v);
        assert_eq!(v, [Violation::MetadataChanged], "another body for a UID");
    }

    /// A session skips re-checking a FETCH it checked clean (`Recall`): every other
    /// response must still reach the shared check.
    #[test]
    fn only_a_repeat_of_a_clean_fetch_skips_the_shared_check() {
        let shared = Shared::default();
        let full = Fetch {
            seq: 1,
            uid: Some(1),
            size: Some(100),
            message_id: Some(11),
            envelope: Some(21),
            structure: Some(31),
            body: Some(whole_body(100, 41)),
            ..Fetch::default()
        };
        let mut one = selected(&[1]);
        let mut v = Vec::new();
        one.apply(&Data::Fetch(full.clone()), Some(&shared), &mut v);
        one.apply(&Data::Fetch(full.clone()), Some(&shared), &mut v);
        assert!(v.is_empty(), "a repeat is clean: {v:?}");
        // Each field changed alone is compared, not recalled.
        type Change = (&'static str, fn(&mut Fetch));
        let changes: [Change; 6] = [
            ("size", |f| f.size = Some(101)),
            ("message-id", |f| f.message_id = Some(12)),
            ("envelope", |f| f.envelope = Some(22)),
            ("structure", |f| f.structure = Some(32)),
            ("body", |f| f.body.as_mut().expect("body").fingerprint = 42),
            ("body length", |f| f.body.as_mut().expect("body").len = 99),
        ];
        for (what, change) in changes {
            let mut f = full.clone();
            change(&mut f);
            let mut v = Vec::new();
            one.apply(&Data::Fetch(f), Some(&shared), &mut v);
            assert!(!v.is_empty(), "a changed {what} was not flagged");
        }
        // A contradiction is flagged every time it comes, not once.
        let mut bigger = full.clone();
        bigger.size = Some(101);
        for _ in 0..2 {
            let mut v = Vec::new();
            one.apply(&Data::Fetch(bigger.clone()), Some(&shared), &mut v);
            assert!(v.contains(&Violation::MetadataChanged), "{v:?}");
        }
        // Another UIDVALIDITY is another mailbox: the same FETCH is checked (and learnt).
        assert_eq!(shared.len(), 1);
        let validity = Data::Status {
            cond: Cond::Ok,
            code: Some(Code::UidValidity(8)),
            text: String::new(),
        };
        one.apply(&validity, Some(&shared), &mut v);
        one.apply(&Data::Fetch(full), Some(&shared), &mut v);
        assert_eq!(
            shared.len(),
            2,
            "the FETCH under the new UIDVALIDITY was not checked"
        );
    }

    fn whole(seq: u32, uid: u32) -> Data {
        Data::Fetch(Fetch {
            seq,
            uid: Some(uid),
            size: Some(100),
            body: Some(whole_body(100, 41)),
            ..Fetch::default()
        })
    }

    /// A whole message's content of `len` octets, fingerprinted `fingerprint`.
    fn whole_body(len: u64, fingerprint: u64) -> Part {
        Part {
            whole: true,
            kept: Vec::new(),
            len,
            fingerprint,
        }
    }

    fn checked(shared: &Shared) -> usize {
        shared.checked.load(std::sync::atomic::Ordering::Relaxed)
    }

    #[test]
    fn a_users_next_session_recalls_what_the_last_one_checked_clean() {
        let (shared, recalls) = (Shared::default(), Recalls::default());
        let mut v = Vec::new();
        let mut one = selected(&[1]);
        one.apply(&whole(1, 1), Some(&shared), &mut v);
        assert_eq!(checked(&shared), 1);
        recalls.give(0, one.take_recall());
        // The next session, under the same UIDVALIDITY: the same FETCH is not looked up.
        let mut two = Model::new(0, 0);
        two.resume(recalls.take(0));
        assert!(
            recalls.take(0).slots.is_empty(),
            "a recall taken is the session's alone"
        );
        for d in [validity(7), Data::Exists(1), whole(1, 1)] {
            two.apply(&d, Some(&shared), &mut v);
        }
        assert_eq!(checked(&shared), 1, "the repeat was looked up again");
        // Under another UIDVALIDITY nothing is recalled.
        recalls.give(0, two.take_recall());
        let mut three = Model::new(0, 0);
        three.resume(recalls.take(0));
        for d in [validity(8), Data::Exists(1), whole(1, 1)] {
            three.apply(&d, Some(&shared), &mut v);
        }
        assert_eq!(
            checked(&shared),
            2,
            "a new UIDVALIDITY's FETCH was recalled"
        );
        assert!(v.is_empty(), "{v:?}");
    }

    #[test]
    fn a_fetch_of_a_part_alone_is_not_looked_up() {
        let shared = Shared::default();
        let mut v = Vec::new();
        let mut m = selected(&[1]);
        let part = Data::Fetch(Fetch {
            seq: 1,
            uid: Some(1),
            body: Some(Part {
                whole: false,
                kept: Vec::new(),
                len: 30,
                fingerprint: 5,
            }),
            ..Fetch::default()
        });
        m.apply(&part, Some(&shared), &mut v);
        assert_eq!((checked(&shared), shared.len()), (0, 0));
        // With the size beside it, there is something to compare.
        let Data::Fetch(mut sized) = part else {
            unreachable!("built as a FETCH")
        };
        sized.size = Some(100);
        m.apply(&Data::Fetch(sized), Some(&shared), &mut v);
        assert_eq!((checked(&shared), shared.len()), (1, 1));
        assert!(v.is_empty(), "{v:?}");
    }

    fn validity(v: u32) -> Data {
        Data::Status {
            cond: Cond::Ok,
            code: Some(Code::UidValidity(v)),
            text: String::new(),
        }
    }
}
