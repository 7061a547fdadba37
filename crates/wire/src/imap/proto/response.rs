//! IMAP responses (RFC 9051 §7) as the workload needs them: a tagged completion, a
//! continuation request, or untagged data. Untagged data the state checks use (EXISTS,
//! EXPUNGE, FETCH items, SEARCH, response codes) is parsed into numbers; what they compare
//! across sessions (ENVELOPE, BODYSTRUCTURE, message bodies) is reduced to a fingerprint,
//! so a body is read once, in place, and never copied.

pub use super::fetch::{Fetch, KEEP_PART, Part};
use super::fetch_scan::{self, Scanned};
use super::frame::Frame;
use super::octets::{ATOM_STOPS, fingerprint64, stops, text};

/// A tagged completion's or a status response's condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cond {
    /// OK.
    Ok,
    /// NO: the command failed.
    No,
    /// BAD: the command was not understood.
    Bad,
    /// BYE: the server is closing the connection.
    Bye,
    /// PREAUTH: a greeting that is already logged in.
    Preauth,
}

/// Space-separated words (a CAPABILITY list), kept as the one string they came in: a
/// greeting and a login each carry some forty, and a `String` apiece made the list the
/// largest cost of a session's set-up.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Words(String);

impl Words {
    /// The words, in order.
    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.0.split(' ').filter(|w| !w.is_empty())
    }

    /// True when `word` is one of them; IMAP compares capabilities case-insensitively.
    pub fn has(&self, word: &str) -> bool {
        self.iter().any(|w| w.eq_ignore_ascii_case(word))
    }

    /// The words as they came, one space apart.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Words {
    /// As the list of words (what the parser's recorded answers hold).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<const N: usize> PartialEq<[&str; N]> for Words {
    fn eq(&self, other: &[&str; N]) -> bool {
        self.iter().eq(other.iter().copied())
    }
}

/// A response code in brackets (RFC 9051 §7.1) that the workload reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Code {
    /// `[UIDVALIDITY n]`.
    UidValidity(u32),
    /// `[UIDNEXT n]`.
    UidNext(u32),
    /// `[APPENDUID validity uid]` (RFC 4315).
    AppendUid(u32, u32),
    /// `[CAPABILITY ...]`.
    Capability(Words),
    /// `[EXPUNGEISSUED]` (RFC 5530): the command named messages that another session
    /// expunged, and what it said of them is not theirs (Dovecot answers a body FETCH of
    /// one with `RFC822.SIZE 0 BODY[] NIL`).
    ExpungeIssued,
    /// `[TRYCREATE]`: the target mailbox of a COPY, MOVE or APPEND does not exist (and a
    /// CREATE may help), as opposed to any other refusal.
    TryCreate,
    /// Any other code.
    Other,
}

/// Untagged data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Data {
    /// `* OK|NO|BAD|BYE|PREAUTH [code] text` (the greeting is one).
    Status {
        /// The condition.
        cond: Cond,
        /// Its response code.
        code: Option<Code>,
        /// The human-readable text.
        text: String,
    },
    /// `* CAPABILITY ...`.
    Capability(Words),
    /// `* n EXISTS`.
    Exists(u32),
    /// `* n EXPUNGE`.
    Expunge(u32),
    /// `* n FETCH (...)`.
    Fetch(Fetch),
    /// `* SEARCH n ...`.
    Search(Vec<u32>),
    /// Anything else (`LIST`, `STATUS`, `FLAGS`, `RECENT`, ...): counted, not read.
    Other,
}

/// One response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    /// `tag OK|NO|BAD [code] text`: the command with this tag is done. `tag` is the
    /// number of a tag the client made (`a<n>`), `None` for any other.
    Tagged {
        /// The command's tag number.
        tag: Option<u32>,
        /// OK, NO or BAD.
        cond: Cond,
        /// Its response code.
        code: Option<Code>,
        /// The human-readable text of a NO or BAD (what the error says); empty after OK,
        /// where nothing reads it and it cost an allocation per command.
        text: String,
    },
    /// `+ ...`: the server waits for a literal or the rest of a command.
    Continuation,
    /// `* ...`.
    Untagged(Data),
}

/// A response that breaks RFC 9051's grammar where the workload reads it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed IMAP response: {0}")]
pub struct ParseError(pub &'static str);

/// Parses one framed response (`frame` says where its literals are).
pub fn parse(buf: &[u8], frame: &Frame) -> Result<Response, ParseError> {
    let mut p = Cursor {
        buf: &buf[..frame.len],
        pos: 0,
        literals: &frame.literals,
    };
    if p.eat(b"+") {
        return Ok(Response::Continuation);
    }
    if p.eat(b"* ") {
        return p.untagged().map(Response::Untagged);
    }
    let tag = p.atom();
    if tag.is_empty() || !p.eat(b" ") {
        return Err(ParseError(
            "a line that is neither tagged, untagged nor '+'",
        ));
    }
    let tag = tag
        .strip_prefix(b"a")
        .and_then(|n| std::str::from_utf8(n).ok())
        .and_then(|n| n.parse().ok());
    let cond = match p.cond() {
        Some(c @ (Cond::Ok | Cond::No | Cond::Bad)) => c,
        _ => return Err(ParseError("a tagged response without OK, NO or BAD")),
    };
    let code = p.code();
    let text = if cond == Cond::Ok {
        String::new()
    } else {
        text(p.rest())
    };
    Ok(Response::Tagged {
        tag,
        cond,
        code,
        text,
    })
}

/// A reader over one framed response.
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
    literals: &'a [(usize, usize)],
}

impl<'a> Cursor<'a> {
    fn peek(&self) -> Option<u8> {
        self.buf.get(self.pos).copied()
    }

    /// What is left to read.
    fn tail(&self) -> &'a [u8] {
        self.buf.get(self.pos..).unwrap_or(&[])
    }

    /// Eats one octet that has no case.
    fn eat_byte(&mut self, b: u8) -> bool {
        let ok = self.peek() == Some(b);
        self.pos += usize::from(ok);
        ok
    }

    fn eat(&mut self, s: &[u8]) -> bool {
        let ok = self
            .tail()
            .get(..s.len())
            .is_some_and(|b| b.eq_ignore_ascii_case(s));
        if ok {
            self.pos += s.len();
        }
        ok
    }

    fn need(&mut self, s: &'static [u8], what: &'static str) -> Result<(), ParseError> {
        if self.eat(s) {
            Ok(())
        } else {
            Err(ParseError(what))
        }
    }

    /// Octets up to a space, parenthesis, bracket or line end.
    fn atom(&mut self) -> &'a [u8] {
        let start = self.pos.min(self.buf.len());
        let len = self.buf[start..]
            .iter()
            .position(|&b| ATOM_STOPS[usize::from(b)])
            .unwrap_or(self.buf.len() - start);
        self.pos = start + len;
        &self.buf[start..self.pos]
    }

    /// Decimal digits (all of them are eaten, even past an overflow).
    fn number(&mut self) -> Result<u64, ParseError> {
        let start = self.pos;
        let mut n: Option<u64> = Some(0);
        while let Some(b) = self.peek().filter(u8::is_ascii_digit) {
            n = n
                .and_then(|n| n.checked_mul(10))
                .and_then(|n| n.checked_add(u64::from(b - b'0')));
            self.pos += 1;
        }
        n.filter(|_| self.pos > start)
            .ok_or(ParseError("a number expected"))
    }

    fn number32(&mut self) -> Result<u32, ParseError> {
        u32::try_from(self.number()?).map_err(|_| ParseError("a number above 2^32"))
    }

    fn cond(&mut self) -> Option<Cond> {
        let c = match upper(self.atom()).as_slice() {
            b"OK" => Cond::Ok,
            b"NO" => Cond::No,
            b"BAD" => Cond::Bad,
            b"BYE" => Cond::Bye,
            b"PREAUTH" => Cond::Preauth,
            _ => return None,
        };
        Some(c)
    }

    /// The rest of the line, without its CRLF.
    fn rest(&mut self) -> &'a [u8] {
        let start = self.pos.min(self.buf.len());
        let end = memchr::memchr(b'\n', self.tail()).map_or(self.buf.len(), |i| start + i);
        self.pos = end;
        let line = &self.buf[start..end];
        line.strip_suffix(b"\r").unwrap_or(line)
    }

    /// `[code] text` after a condition.
    fn code_and_text(&mut self) -> (Option<Code>, String) {
        let code = self.code();
        (code, text(self.rest()))
    }

    /// The response code in brackets, if any, leaving the cursor at the text.
    fn code(&mut self) -> Option<Code> {
        self.eat(b" ");
        if self.eat(b"[") {
            let name = upper(self.atom());
            let code = match name.as_slice() {
                b"UIDVALIDITY" if self.eat(b" ") => self.number32().ok().map(Code::UidValidity),
                b"UIDNEXT" if self.eat(b" ") => self.number32().ok().map(Code::UidNext),
                b"APPENDUID" if self.eat(b" ") => {
                    let v = self.number32().ok();
                    let u = if self.eat(b" ") {
                        self.number32().ok()
                    } else {
                        None
                    };
                    v.zip(u).map(|(v, u)| Code::AppendUid(v, u))
                }
                b"CAPABILITY" => Some(Code::Capability(self.words_until(b']'))),
                b"EXPUNGEISSUED" => Some(Code::ExpungeIssued),
                b"TRYCREATE" => Some(Code::TryCreate),
                _ => None,
            };
            // Skip whatever is left of the code.
            while let Some(b) = self.peek() {
                self.pos += 1;
                if b == b']' {
                    break;
                }
            }
            self.eat(b" ");
            Some(code.unwrap_or(Code::Other))
        } else {
            None
        }
    }

    /// Space-separated words up to `stop` or the line end.
    fn words_until(&mut self, stop: u8) -> Words {
        // The shape servers send (atoms between single spaces) is taken in one piece: word
        // by word, a capability list cost as much as a dozen FETCHes.
        let start = self.pos.min(self.buf.len());
        let rest = &self.buf[start..];
        let end = rest
            .iter()
            .position(|&b| b == stop || b == b'\r' || b == b'\n')
            .unwrap_or(rest.len());
        let mut words = &rest[..end];
        while let [b' ', tail @ ..] = words {
            words = tail;
        }
        while let [head @ .., b' '] = words {
            words = head;
        }
        let plain = words
            .iter()
            .all(|&b| b == b' ' || !ATOM_STOPS[usize::from(b)])
            && !words.windows(2).any(|w| w == b"  ");
        if plain && let Ok(words) = std::str::from_utf8(words) {
            self.pos = start + end;
            return Words(words.to_owned());
        }
        let mut out = String::new();
        loop {
            self.eat(b" ");
            match self.peek() {
                Some(b) if b == stop || b == b'\r' || b == b'\n' => break,
                None => break,
                _ => {}
            }
            let w = self.atom();
            if w.is_empty() {
                // A bracket inside a capability: skip it rather than loop.
                self.pos += 1;
                continue;
            }
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(&String::from_utf8_lossy(w));
        }
        Words(out)
    }

    fn untagged(&mut self) -> Result<Data, ParseError> {
        if self.peek().is_some_and(|b| b.is_ascii_digit()) {
            let n = self.number32()?;
            self.need(b" ", "a space after the number")?;
            let what = upper(self.atom());
            return match what.as_slice() {
                b"EXISTS" => Ok(Data::Exists(n)),
                b"EXPUNGE" => Ok(Data::Expunge(n)),
                b"FETCH" => {
                    self.need(b" ", "a space after FETCH")?;
                    self.fetch(n).map(Data::Fetch)
                }
                _ => Ok(Data::Other),
            };
        }
        let start = self.pos;
        if let Some(cond) = self.cond() {
            let (code, text) = self.code_and_text();
            return Ok(Data::Status { cond, code, text });
        }
        self.pos = start;
        let what = upper(self.atom());
        match what.as_slice() {
            b"CAPABILITY" => Ok(Data::Capability(self.words_until(b'\r'))),
            b"SEARCH" => {
                let mut found = Vec::new();
                while self.eat(b" ") {
                    if self.peek() == Some(b'(') {
                        // A MODSEQ clause (RFC 7162).
                        break;
                    }
                    found.push(self.number32()?);
                }
                Ok(Data::Search(found))
            }
            _ => Ok(Data::Other),
        }
    }

    /// `(item value item value ...)` of `* n FETCH`: by [`fetch_scan`] when it can, else
    /// (a literal, a section, anything unusual or malformed) item by item.
    fn fetch(&mut self, seq: u32) -> Result<Fetch, ParseError> {
        let rest = self.tail();
        let line = memchr::memchr3(b'\r', b'\n', b'{', rest).map_or(rest, |end| &rest[..end]);
        match fetch_scan::fetch(seq, line) {
            Some(Scanned::Done(f)) => return Ok(f),
            Some(Scanned::WholeBody(mut f, at)) => {
                self.pos += at;
                f.body = Some(self.body(true, false)?);
                return self.fetch_items(f);
            }
            Some(Scanned::Rest(f, at)) => {
                self.pos += at;
                return self.fetch_items(f);
            }
            None => {}
        }
        self.need(b"(", "FETCH items in parentheses")?;
        self.fetch_items(Fetch {
            seq,
            ..Fetch::default()
        })
    }

    /// The FETCH items after `(` (or after one the fast reader read) to the closing `)`,
    /// into `f`.
    fn fetch_items(&mut self, mut f: Fetch) -> Result<Fetch, ParseError> {
        loop {
            self.eat_byte(b' ');
            if self.eat_byte(b')') {
                return Ok(f);
            }
            let key_start = self.pos;
            let name = upper(self.atom());
            if name.as_slice().is_empty() {
                return Err(ParseError("a FETCH item name expected"));
            }
            let sectioned = self.peek() == Some(b'[');
            if sectioned {
                self.section()?;
            }
            let key = &self.buf[key_start..self.pos];
            if !self.eat_byte(b' ') {
                return Err(ParseError("a space after a FETCH item name"));
            }
            match name.as_slice() {
                b"UID" => f.uid = Some(self.number32()?),
                b"RFC822.SIZE" => f.size = Some(self.number()?),
                b"FLAGS" => f.flags = Some(self.flags()?),
                b"ENVELOPE" => {
                    let (span, id) = self.envelope()?;
                    f.envelope = Some(fingerprint64(span));
                    f.message_id = id;
                }
                b"BODYSTRUCTURE" | b"BODY" if !sectioned => {
                    let (s, e) = self.value()?;
                    f.structure = Some(fingerprint64(&self.buf[s..e]));
                }
                b"BODY" | b"BINARY" | b"RFC822" | b"RFC822.HEADER" | b"RFC822.TEXT" => {
                    // A partial fetch (`<origin>`) or a part is not the whole message.
                    let whole = key.eq_ignore_ascii_case(b"RFC822") || key.ends_with(b"[]");
                    // Header fields asked for by name are read (a trace header); any
                    // other part, like a whole message, is only measured.
                    let fields = key
                        .windows(b"HEADER.FIELDS".len())
                        .any(|w| w.eq_ignore_ascii_case(b"HEADER.FIELDS"));
                    f.body = Some(self.body(whole, fields)?);
                }
                _ => {
                    self.value()?;
                }
            }
        }
    }

    /// A body item's content (a string or NIL), measured in place; `whole` when it is the
    /// whole message; copied out when `keep` and at most [`KEEP_PART`] octets.
    fn body(&mut self, whole: bool, keep: bool) -> Result<Part, ParseError> {
        let content = self.nstring()?.unwrap_or(&[]);
        let kept = match keep && content.len() <= KEEP_PART {
            true => content.to_vec(),
            false => Vec::new(),
        };
        Ok(Part {
            whole,
            len: content.len() as u64,
            fingerprint: fingerprint(content),
            kept,
        })
    }

    /// `[section]<origin>` after BODY or BINARY: brackets may hold spaces and lists.
    fn section(&mut self) -> Result<(), ParseError> {
        let mut depth = 0;
        while let Some(b) = self.peek() {
            self.pos += 1;
            match b {
                b'[' => depth += 1,
                b']' => {
                    depth -= 1;
                    if depth == 0 {
                        if self.eat(b"<") {
                            self.number()?;
                            self.need(b">", "a '>' after a partial origin")?;
                        }
                        return Ok(());
                    }
                }
                b'\r' | b'\n' => break,
                _ => {}
            }
        }
        Err(ParseError("an unterminated section"))
    }

    /// The flags as they came, one space between each: the list's inside without the
    /// space it may start or end with, converted once (a flag is an atom, so no flag
    /// holds a space and converting them one by one would give the same text).
    fn flags(&mut self) -> Result<String, ParseError> {
        self.need(b"(", "FLAGS in parentheses")?;
        let start = self.pos;
        loop {
            self.eat_byte(b' ');
            if self.peek() == Some(b')') {
                let inside = &self.buf[start..self.pos];
                self.pos += 1;
                let inside = inside.strip_prefix(b" ").unwrap_or(inside);
                let inside = inside.strip_suffix(b" ").unwrap_or(inside);
                return Ok(text(inside));
            }
            if self.atom().is_empty() {
                return Err(ParseError("a flag expected"));
            }
        }
    }

    /// ENVELOPE's list: its whole span and its Message-ID's fingerprint (the tenth field).
    fn envelope(&mut self) -> Result<(&'a [u8], Option<u64>), ParseError> {
        let start = self.pos;
        self.need(b"(", "ENVELOPE in parentheses")?;
        let mut id = None;
        for i in 0..10 {
            self.eat_byte(b' ');
            if i == 9 {
                id = self.nstring()?.map(fingerprint64);
            } else {
                self.value()?;
            }
        }
        self.eat_byte(b' ');
        self.need(b")", "ENVELOPE with ten fields")?;
        Ok((&self.buf[start..self.pos], id))
    }

    /// NIL, a quoted string (its content, still escaped) or a literal's octets.
    fn nstring(&mut self) -> Result<Option<&'a [u8]>, ParseError> {
        match self.peek() {
            Some(b'"') => {
                let (s, e) = self.quoted()?;
                Ok(Some(&self.buf[s + 1..e - 1]))
            }
            Some(b'{') => {
                let (s, e) = self.literal()?;
                Ok(Some(&self.buf[s..e]))
            }
            _ if self.eat(b"NIL") => Ok(None),
            _ => Err(ParseError("a string or NIL expected")),
        }
    }

    /// The span of a quoted string, quotes included.
    /// (ENVELOPE is mostly quoted strings: most of their octets cost one table look-up.)
    fn quoted(&mut self) -> Result<(usize, usize), ParseError> {
        let start = self.pos;
        let buf = self.buf;
        let mut at = start + 1;
        while let Some(&b) = buf.get(at) {
            at += 1;
            if !QUOTED_STOPS[usize::from(b)] {
                continue;
            }
            match b {
                b'\\' => at = (at + 1).min(buf.len()),
                b'"' => {
                    self.pos = at;
                    return Ok((start, at));
                }
                _ => break,
            }
        }
        self.pos = at;
        Err(ParseError("an unterminated quoted string"))
    }

    /// `{n}\r\n` and its n octets: the octets' span, which the framer found.
    fn literal(&mut self) -> Result<(usize, usize), ParseError> {
        let nl = memchr::memchr(b'\n', self.tail())
            .ok_or(ParseError("a literal without its line end"))?;
        let after = self.pos + nl + 1;
        let (s, e) = *self
            .literals
            .iter()
            .find(|(s, _)| *s == after)
            .ok_or(ParseError("a '{' that does not announce a literal"))?;
        self.pos = e;
        Ok((s, e))
    }

    /// Skips any value: number, atom, NIL, string, literal or parenthesised list;
    /// returns its span.
    fn value(&mut self) -> Result<(usize, usize), ParseError> {
        let start = self.pos;
        match self.peek() {
            Some(b'"') => {
                self.quoted()?;
            }
            Some(b'{') => {
                self.literal()?;
            }
            Some(b'(') => self.list()?,
            _ => {
                if self.atom().is_empty() {
                    // A bracketed part of an atom (`BODY[...]` inside a list).
                    if self.peek() == Some(b'[') {
                        self.section()?;
                    } else {
                        return Err(ParseError("a value expected"));
                    }
                }
            }
        }
        Ok((start, self.pos))
    }

    /// Skips a parenthesised list (ENVELOPE, BODYSTRUCTURE, their address and part lists)
    /// in one pass over its octets, counting parentheses: these lists are only
    /// fingerprinted, and walking them value by value (an atom, a space, a nested call
    /// each) was the largest user-space cost of a FETCH of message metadata. Most octets
    /// cost one table look-up; a string or literal is found where a value starts, so a
    /// parenthesis inside one does not count and a literal's octets are jumped over.
    fn list(&mut self) -> Result<(), ParseError> {
        let buf = self.buf;
        let mut depth = 0usize;
        let mut at = self.pos;
        while let Some(&b) = buf.get(at) {
            if !LIST_STOPS[usize::from(b)] {
                at += 1;
                continue;
            }
            // Where a value starts: after `(` or a space.
            let starts = at > 0 && matches!(buf[at - 1], b' ' | b'(');
            match b {
                b'(' => depth += 1,
                b')' => {
                    depth -= 1;
                    if depth == 0 {
                        self.pos = at + 1;
                        return Ok(());
                    }
                }
                b'"' | b'{' if starts => {
                    self.pos = at;
                    if b == b'"' {
                        self.quoted()?;
                    } else {
                        self.literal()?;
                    }
                    at = self.pos;
                    continue;
                }
                b'\r' | b'\n' => break,
                // A quote or brace inside an atom is one of its octets.
                _ => {}
            }
            at += 1;
        }
        self.pos = at;
        Err(ParseError("an unterminated list"))
    }
}

/// The octets [`Cursor::list`] stops at: parentheses, a string's or literal's start, a
/// line end.
const LIST_STOPS: [bool; 256] = stops(b"()\"{\r\n");

/// The octets [`Cursor::quoted`] stops at: its end, an escape, a line end.
const QUOTED_STOPS: [bool; 256] = stops(b"\"\\\r\n");

/// An atom upper-cased on the stack: the keywords compared against are short, so a
/// longer atom matches none and nothing is allocated per item. Servers send keywords in
/// upper case, so most atoms are compared as they came, without a copy.
enum Upper<'a> {
    /// Already upper case (or a sentinel that matches no keyword).
    Same(&'a [u8]),
    /// A copy raised to upper case, and its length.
    Raised([u8; 24], usize),
}

impl Upper<'_> {
    fn as_slice(&self) -> &[u8] {
        match self {
            Upper::Same(w) => w,
            Upper::Raised(buf, len) => &buf[..*len],
        }
    }
}

fn upper(word: &[u8]) -> Upper<'_> {
    if word.len() > 24 {
        // Too long for any keyword: make it match none.
        return Upper::Same(b"#");
    }
    if !word.iter().any(u8::is_ascii_lowercase) {
        return Upper::Same(word);
    }
    let mut buf = [0; 24];
    for (d, s) in buf.iter_mut().zip(word) {
        *d = s.to_ascii_uppercase();
    }
    Upper::Raised(buf, word.len())
}

/// A body's fingerprint: its length and its first and last 256 octets.
fn fingerprint(content: &[u8]) -> u64 {
    const ENDS: usize = 256;
    let head = &content[..content.len().min(ENDS)];
    let tail = &content[content.len().saturating_sub(ENDS)..];
    fingerprint64(head) ^ fingerprint64(tail).rotate_left(17) ^ content.len() as u64
}

#[cfg(test)]
mod tests {
    use super::super::frame::Framer;
    use super::*;

    fn one(input: &[u8]) -> Response {
        let frame = Framer::default()
            .next(input)
            .expect("framed")
            .expect("complete");
        assert_eq!(frame.len, input.len(), "one response");
        parse(input, &frame).unwrap_or_else(|e| panic!("{e}: {:?}", String::from_utf8_lossy(input)))
    }

    #[test]
    fn tagged_completions_carry_their_tag_number_and_code() {
        assert_eq!(
            one(b"a17 NO [TRYCREATE] Mailbox doesn't exist\r\n"),
            Response::Tagged {
                tag: Some(17),
                cond: Cond::No,
                code: Some(Code::TryCreate),
                text: "Mailbox doesn't exist".into(),
            }
        );
        assert_eq!(
            one(b"a3 OK [APPENDUID 1700000000 42] Append completed.\r\n"),
            Response::Tagged {
                tag: Some(3),
                cond: Cond::Ok,
                code: Some(Code::AppendUid(1_700_000_000, 42)),
                text: String::new(),
            }
        );
        // Dovecot's answer to a FETCH of a message another session expunged.
        assert_eq!(
            one(b"a5 OK [EXPUNGEISSUED] Some messages were already expunged.\r\n"),
            Response::Tagged {
                tag: Some(5),
                cond: Cond::Ok,
                code: Some(Code::ExpungeIssued),
                text: String::new(),
            }
        );
        let Response::Tagged { tag, .. } = one(b"x1 BAD what\r\n") else {
            panic!("tagged")
        };
        assert_eq!(tag, None, "a tag the client never made");
    }

    #[test]
    fn the_greeting_and_capabilities_are_read() {
        let Response::Untagged(Data::Status { cond, code, .. }) =
            one(b"* OK [CAPABILITY IMAP4rev1 SASL-IR LITERAL+ AUTH=PLAIN] Dovecot ready.\r\n")
        else {
            panic!("greeting")
        };
        assert_eq!(cond, Cond::Ok);
        let Some(Code::Capability(caps)) = code else {
            panic!("capabilities in the greeting")
        };
        assert_eq!(caps, ["IMAP4rev1", "SASL-IR", "LITERAL+", "AUTH=PLAIN"]);
        assert_eq!(
            one(b"* CAPABILITY IMAP4rev1 IDLE MOVE\r\n"),
            Response::Untagged(Data::Capability(Words("IMAP4rev1 IDLE MOVE".into())))
        );
    }

    #[test]
    fn counts_and_searches_are_numbers() {
        assert_eq!(
            one(b"* 23 EXISTS\r\n"),
            Response::Untagged(Data::Exists(23))
        );
        assert_eq!(
            one(b"* 4 EXPUNGE\r\n"),
            Response::Untagged(Data::Expunge(4))
        );
        assert_eq!(
            one(b"* SEARCH 2 3 10\r\n"),
            Response::Untagged(Data::Search(vec![2, 3, 10]))
        );
        assert_eq!(
            one(b"* SEARCH\r\n"),
            Response::Untagged(Data::Search(vec![]))
        );
        assert_eq!(
            one(b"* OK [UIDVALIDITY 1763950000] UIDs valid\r\n"),
            Response::Untagged(Data::Status {
                cond: Cond::Ok,
                code: Some(Code::UidValidity(1_763_950_000)),
                text: "UIDs valid".into()
            })
        );
        assert_eq!(
            one(b"* LIST (\\HasNoChildren) \".\" INBOX\r\n"),
            Response::Untagged(Data::Other)
        );
        assert_eq!(one(b"+ idling\r\n"), Response::Continuation);
    }

    #[test]
    fn fetch_items_are_read_and_bodies_measured_in_place() {
        let body = "Message-ID: <m1@x>\r\n\r\nhello\r\n";
        let input = format!(
            "* 2 FETCH (UID 9 FLAGS (\\Seen $Junk) RFC822.SIZE {} INTERNALDATE \"24-Nov-2026 01:02:03 +0000\" BODY[] {{{}}}\r\n{body})\r\n",
            body.len(),
            body.len()
        );
        let Response::Untagged(Data::Fetch(f)) = one(input.as_bytes()) else {
            panic!("fetch")
        };
        assert_eq!(f.seq, 2);
        assert_eq!(f.uid, Some(9));
        assert_eq!(f.flags.as_deref(), Some("\\Seen $Junk"));
        assert_eq!(
            (f.has_flag("\\seen"), f.has_flag("\\Flagged")),
            (Some(true), Some(false))
        );
        assert_eq!(f.size, Some(body.len() as u64));
        let part = f.body.expect("a body part");
        assert!(part.whole, "BODY[] is the whole message");
        assert_eq!(part.len, body.len() as u64);
        assert_eq!(part.fingerprint, fingerprint(body.as_bytes()));
    }

    #[test]
    fn envelope_and_structure_are_fingerprinted_with_the_message_id() {
        let input = b"* 1 FETCH (UID 1 ENVELOPE (\"Tue, 24 Nov 2026 01:02:03 +0000\" {5}\r\nhi(x) ((\"A\" NIL \"a\" \"b.example\")) NIL NIL ((NIL NIL \"u1\" \"example.test\")) NIL NIL NIL \"<abc.1@mailbench>\") BODYSTRUCTURE (\"text\" \"plain\" (\"charset\" \"us-ascii\") NIL NIL \"7bit\" 2000 25 NIL NIL NIL NIL) BODY[HEADER.FIELDS (FROM TO)]<0> \"x\")\r\n";
        let Response::Untagged(Data::Fetch(f)) = one(input) else {
            panic!("fetch")
        };
        assert_eq!(f.message_id, Some(fingerprint64(b"<abc.1@mailbench>")));
        assert!(f.envelope.is_some() && f.structure.is_some());
        assert_eq!(
            f.body.map(|b| (b.whole, b.len, b.kept)),
            Some((false, 1, b"x".to_vec())),
            "a header part is not the whole message"
        );
    }

    #[test]
    fn a_list_ends_at_its_own_parenthesis_not_one_in_a_string_or_literal() {
        let structure = b"(\"text\" \"pl)ain\" (\"name\" {3}\r\n)(\" \"a\\\"(b\" NIL) NIL \"7bit\" 20 1 NIL NIL NIL NIL)";
        let mut input = b"* 1 FETCH (BODYSTRUCTURE ".to_vec();
        input.extend_from_slice(structure);
        input.extend_from_slice(b" UID 9)\r\n");
        let Response::Untagged(Data::Fetch(f)) = one(&input) else {
            panic!("fetch")
        };
        assert_eq!(f.structure, Some(fingerprint64(structure)));
        assert_eq!(f.uid, Some(9), "the item after the list is read");
        for bad in [
            &b"* 1 FETCH (BODYSTRUCTURE (\"text\" (NIL) UID 9)\r\n"[..],
            b"* 1 FETCH (BODYSTRUCTURE (\"te)xt\"\r\n",
        ] {
            let frame = Framer::default().next(bad).unwrap().unwrap();
            assert!(parse(bad, &frame).is_err(), "an unterminated list");
        }
    }

    #[test]
    fn broken_responses_are_errors_not_panics() {
        for bad in [
            &b"* 1 FETCH UID 3\r\n"[..],
            b"* 1 FETCH (UID x)\r\n",
            b"* 1 FETCH (FLAGS (\\Seen)\r\n",
            b"* 1 FETCH (ENVELOPE (NIL))\r\n",
            b"* 1 FETCH (BODY[ \"x\")\r\n",
            b"* 1 FETCH (BODY[] \"unterminated)\r\n",
            b"* 99999999999 EXISTS\r\n",
            b"a1 MAYBE\r\n",
            b"\r\n",
        ] {
            let frame = Framer::default().next(bad).unwrap().unwrap();
            assert!(
                parse(bad, &frame).is_err(),
                "accepted {:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
