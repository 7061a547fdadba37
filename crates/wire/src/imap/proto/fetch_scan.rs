//! The fast reader of a FETCH's items, for the shape servers send them in: a metadata
//! FETCH (`UID FLAGS RFC822.SIZE ENVELOPE BODYSTRUCTURE`, about 400 octets a message)
//! is most of what the workload reads, and reading it value by value cost about 16
//! instructions an octet. This reader takes the items before the response's first CR,
//! LF or `{` (so no line end or literal can be among the octets it skips), accepts only
//! what the exact reader (`response::Cursor::fetch`) would read the same way, and says
//! `None` to anything else — a lower-case name, an escape in a string inside a list, a
//! malformed value — for the exact reader to read from the start. So both give the same
//! answer, and every error comes from the exact reader. Message content it hands on
//! instead of refusing: `BODY[] ` as the line's last item is a body FETCH's whole message
//! (`UID n RFC822.SIZE n BODY[] {n}`), which the exact reader takes from the literal on;
//! any other content item (a section, `RFC822.HEADER`, ...) the exact reader reads from
//! its name on. The items before it are not read twice.

use super::fetch::Fetch;
use super::octets::{ATOM_STOPS, fingerprint64, text};

/// What the fast reader made of a FETCH's items.
pub(super) enum Scanned {
    /// All of them, to the closing parenthesis.
    Done(Fetch),
    /// Those before `BODY[] `, which ends the line: the whole message follows as a
    /// literal at this offset of the line (its `{`).
    WholeBody(Fetch, usize),
    /// Those before a content item (a section, `RFC822.HEADER`, ...), which starts at this
    /// offset of the line: the exact reader reads on from it (imaptest's FETCH2 asks for
    /// `UID` and a section; reading the UID twice was a tenth of such a response's cost).
    Rest(Fetch, usize),
}

/// Reads `(item value ...)` of message `seq` from `line`, which starts at the `(` and
/// ends before the response's first CR, LF or `{`.
pub(super) fn fetch(seq: u32, line: &[u8]) -> Option<Scanned> {
    let mut s = Scan { b: line, i: 0 };
    let mut f = Fetch {
        seq,
        ..Fetch::default()
    };
    s.expect(b'(')?;
    loop {
        s.eat(b' ');
        if s.eat(b')') {
            return Some(Scanned::Done(f));
        }
        if line[s.i..] == *b"BODY[] " {
            return Some(Scanned::WholeBody(f, line.len()));
        }
        let item = s.i;
        let name = match s.common_name() {
            Some(name) => name,
            None => {
                let name = s.atom()?;
                if name.is_empty() || name.iter().any(u8::is_ascii_lowercase) {
                    return None;
                }
                if s.peek()? == b'[' {
                    return Some(Scanned::Rest(f, item));
                }
                s.expect(b' ')?;
                name
            }
        };
        match name {
            b"UID" => f.uid = Some(u32::try_from(s.number()?).ok()?),
            b"RFC822.SIZE" => f.size = Some(s.number()?),
            b"FLAGS" => f.flags = Some(s.flags()?),
            b"ENVELOPE" => {
                let start = s.i;
                f.message_id = s.envelope()?;
                f.envelope = Some(fingerprint64(&line[start..s.i]));
            }
            b"BODYSTRUCTURE" | b"BODY" => {
                let start = s.i;
                s.value()?;
                f.structure = Some(fingerprint64(&line[start..s.i]));
            }
            // Message content: the exact reader measures it.
            b"BINARY" | b"RFC822" | b"RFC822.HEADER" | b"RFC822.TEXT" => {
                return Some(Scanned::Rest(f, item));
            }
            _ => s.value()?,
        }
    }
}

/// A position in the line; every method returns `None` where the exact reader could
/// read differently (or fail).
struct Scan<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Scan<'a> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn eat(&mut self, c: u8) -> bool {
        let ok = self.peek() == Some(c);
        self.i += usize::from(ok);
        ok
    }

    fn expect(&mut self, c: u8) -> Option<()> {
        self.eat(c).then_some(())
    }

    /// The name of an item a metadata FETCH has, with the space after it (what
    /// [`Scan::atom`] and the checks after it would find, without reading it octet by
    /// octet).
    fn common_name(&mut self) -> Option<&'static [u8]> {
        let name: &'static [u8] = match self.peek()? {
            b'U' => b"UID ",
            b'F' => b"FLAGS ",
            b'R' => b"RFC822.SIZE ",
            b'E' => b"ENVELOPE ",
            b'B' => b"BODYSTRUCTURE ",
            _ => return None,
        };
        if !self.b[self.i..].starts_with(name) {
            return None;
        }
        self.i += name.len();
        Some(&name[..name.len() - 1])
    }

    /// An atom that ends inside the line (at the line's end it might go on).
    fn atom(&mut self) -> Option<&'a [u8]> {
        let start = self.i;
        let len = self.b[start..]
            .iter()
            .position(|&c| ATOM_STOPS[usize::from(c)])?;
        self.i = start + len;
        Some(&self.b[start..self.i])
    }

    /// Decimal digits as a u64; none or an overflow is the exact reader's error.
    fn number(&mut self) -> Option<u64> {
        let start = self.i;
        let mut n = 0u64;
        while let Some(d) = self.peek().filter(u8::is_ascii_digit) {
            n = n.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
            self.i += 1;
        }
        (self.i > start).then_some(n)
    }

    /// `(flag flag ...)` as one string, converted once (a flag is an atom: it holds no
    /// space, so converting flag by flag and joining with spaces gives the same text).
    fn flags(&mut self) -> Option<String> {
        self.expect(b'(')?;
        let start = self.i;
        loop {
            self.eat(b' ');
            if self.peek()? == b')' {
                let inside = &self.b[start..self.i];
                self.i += 1;
                let inside = inside.strip_prefix(b" ").unwrap_or(inside);
                let inside = inside.strip_suffix(b" ").unwrap_or(inside);
                return Some(text(inside));
            }
            if self.atom()?.is_empty() {
                return None;
            }
        }
    }

    /// ENVELOPE's ten fields in one pass: the Message-ID's (the tenth's) fingerprint.
    fn envelope(&mut self) -> Option<Option<u64>> {
        self.expect(b'(')?;
        for _ in 0..9 {
            self.eat(b' ');
            self.value()?;
        }
        self.eat(b' ');
        let id = match self.peek()? {
            b'"' => {
                let (s, e) = self.quoted()?;
                Some(fingerprint64(&self.b[s + 1..e - 1]))
            }
            _ => {
                let nil = self.b.get(self.i..self.i + 3)?;
                if !nil.eq_ignore_ascii_case(b"NIL") {
                    return None;
                }
                self.i += 3;
                None
            }
        };
        self.eat(b' ');
        self.expect(b')')?;
        Some(id)
    }

    /// A quoted string, a parenthesised list or an atom.
    fn value(&mut self) -> Option<()> {
        match self.peek()? {
            b'"' => self.quoted().map(drop),
            b'(' => self.list(),
            _ => (!self.atom()?.is_empty()).then_some(()),
        }
    }

    /// A quoted string's span, quotes included: eight octets at a time to its end or an
    /// escape (no CR or LF can be inside the line).
    fn quoted(&mut self) -> Option<(usize, usize)> {
        const LO: u64 = u64::from_le_bytes([0x01; 8]);
        const HI: u64 = u64::from_le_bytes([0x80; 8]);
        const QUOTE: u64 = LO * b'"' as u64;
        const ESCAPE: u64 = LO * b'\\' as u64;
        let start = self.i;
        let mut at = start + 1;
        loop {
            let hit = match self.b.get(at..).and_then(<[u8]>::first_chunk::<8>) {
                Some(word) => {
                    let w = u64::from_le_bytes(*word);
                    let (q, e) = (w ^ QUOTE, w ^ ESCAPE);
                    // A zero octet in q or e; the lowest one flagged is always a true one.
                    let found = ((q.wrapping_sub(LO) & !q) | (e.wrapping_sub(LO) & !e)) & HI;
                    if found == 0 {
                        at += 8;
                        continue;
                    }
                    at + found.trailing_zeros() as usize / 8
                }
                None => {
                    at + self
                        .b
                        .get(at..)?
                        .iter()
                        .position(|&c| c == b'"' || c == b'\\')?
                }
            };
            if self.b[hit] == b'"' {
                self.i = hit + 1;
                return Some((start, hit + 1));
            }
            // An escape: the octet after it is content, and must be inside the line.
            at = hit + 2;
            if at > self.b.len() {
                return None;
            }
        }
    }

    /// A parenthesised list, counting parentheses; a string is skipped where a value
    /// starts (after `(` or a space), as the exact reader does. Eight octets at a time:
    /// each word flags its parentheses, quotes and escapes at once, and only those are
    /// looked at (a string with an escape in it is left to the exact reader).
    fn list(&mut self) -> Option<()> {
        let b = self.b;
        let mut depth = 0usize;
        let mut inside = false;
        let mut at = self.i;
        while at < b.len() {
            let w = match b[at..].first_chunk::<8>() {
                Some(word) => u64::from_le_bytes(*word),
                None => {
                    let mut word = [0xff; 8];
                    word[..b.len() - at].copy_from_slice(&b[at..]);
                    u64::from_le_bytes(word)
                }
            };
            // `(` and `)` differ in their lowest bit only; 0xff pads the last word.
            let mut flags = zero((w | ONES) ^ (ONES * u64::from(b')')))
                | zero(w ^ (ONES * u64::from(b'"')))
                | zero(w ^ (ONES * u64::from(b'\\')));
            while flags != 0 {
                let pos = at + flags.trailing_zeros() as usize / 8;
                flags &= flags - 1;
                // A flag may be false (a borrow past a true one): the octet says.
                match (b.get(pos)?, inside) {
                    (b'"', true) => inside = false,
                    (b'"', false) => inside = matches!(b[pos - 1], b' ' | b'('),
                    (b'\\', true) => return None,
                    (b'(', false) => depth += 1,
                    (b')', false) => {
                        depth -= 1;
                        if depth == 0 {
                            self.i = pos + 1;
                            return Some(());
                        }
                    }
                    _ => {}
                }
            }
            at += 8;
        }
        None
    }
}

/// Octet 0x01 in each lane of a word.
const ONES: u64 = u64::from_le_bytes([0x01; 8]);

/// The high bit of each zero octet of `x`, and maybe of an octet above a zero one (a
/// borrow): the lowest bit set is always a true zero.
fn zero(x: u64) -> u64 {
    x.wrapping_sub(ONES) & !x & (ONES << 7)
}
