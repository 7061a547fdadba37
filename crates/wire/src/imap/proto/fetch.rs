//! What a FETCH response says of a message, as the state checks read it: the type both
//! readers build (the exact one in `response` and its fast path `fetch_scan`), in a file
//! of its own so that neither reader imports the other.

/// The items of one FETCH response the state checks read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fetch {
    /// The message sequence number.
    pub seq: u32,
    /// `UID`.
    pub uid: Option<u32>,
    /// `FLAGS`, as the server spelled them, space-separated (one allocation, not one per
    /// flag).
    pub flags: Option<String>,
    /// `RFC822.SIZE`.
    pub size: Option<u64>,
    /// `ENVELOPE`: a fingerprint of the whole structure.
    pub envelope: Option<u64>,
    /// A fingerprint of the Message-ID inside ENVELOPE (its last field), when not NIL: the
    /// state checks key messages by it.
    pub message_id: Option<u64>,
    /// `BODYSTRUCTURE` (or `BODY`): a fingerprint.
    pub structure: Option<u64>,
    /// `BODY[...]`, `BINARY[...]` or `RFC822*` content: its section and size, and a
    /// fingerprint of its ends.
    pub body: Option<Part>,
}

impl Fetch {
    /// Whether FLAGS (when the response had it) holds `flag`, compared as IMAP does,
    /// case-insensitively.
    pub fn has_flag(&self, flag: &str) -> Option<bool> {
        let flags = self.flags.as_deref()?;
        Some(flags.split(' ').any(|f| f.eq_ignore_ascii_case(flag)))
    }
}

/// A body part's content, measured in place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    /// The whole message (`BODY[]`, `BINARY[]`, `RFC822`), not a part of it.
    pub whole: bool,
    /// Octets of content (0 for NIL).
    pub len: u64,
    /// A fingerprint of the content's length and its first and last octets: catches a
    /// changed or truncated body without hashing megabytes per command.
    pub fingerprint: u64,
    /// The content itself when it is header fields asked for by name, of at most
    /// [`KEEP_PART`] octets; empty otherwise — a message or any other part of it is
    /// measured, not kept.
    pub kept: Vec<u8>,
}

/// Largest part kept whole in [`Part::kept`].
pub const KEEP_PART: usize = 1024;
