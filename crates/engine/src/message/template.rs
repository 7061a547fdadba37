//! Message content, prepared once: generated messages (mail-builder, cut to size at line
//! boundaries) or real messages read from files. Per message only a short prefix (trace
//! header, Message-ID) is formatted; the rest is a shared `Bytes`.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use mail_builder::MessageBuilder;
use mail_builder::headers::address::Address;

use super::trace::BodySum;
use crate::smtp::proto::data::{dot_stuff, needs_no_stuffing, normalize_crlf};

/// A message body ready for the wire in both forms.
#[derive(Debug, Clone)]
pub struct Template {
    /// CRLF-normalised, for BDAT.
    pub raw: Bytes,
    /// Dot-stuffed, for DATA (shares `raw` when nothing needed stuffing).
    pub stuffed: Bytes,
    /// Contains octets above 127.
    pub eight_bit: bool,
    /// Where the body starts in `raw`: after the header section's empty line (the end when
    /// there is none).
    pub body_at: usize,
}

impl Template {
    /// Prepares any message text for sending.
    pub fn from_message(text: &[u8]) -> Template {
        let raw = Bytes::from(normalize_crlf(text));
        let stuffed = if needs_no_stuffing(&raw) {
            raw.clone()
        } else {
            Bytes::from(dot_stuff(&raw))
        };
        let body_at = if raw.starts_with(b"\r\n") {
            2
        } else {
            memchr::memmem::find(&raw, b"\r\n\r\n").map_or(raw.len(), |p| p + 4)
        };
        Template {
            eight_bit: raw.iter().any(|b| *b >= 0x80),
            body_at,
            raw,
            stuffed,
        }
    }
}

/// A message size or an inclusive range of sizes, in octets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct SizeRange {
    /// Smallest size.
    pub min: usize,
    /// Largest size.
    pub max: usize,
}

/// What the generated messages look like.
#[derive(Debug, Clone)]
pub struct GenSpec {
    /// Total message size (headers included, trace prefix excluded).
    pub size: SizeRange,
    /// Size of a base64 attachment to add, 0 for none.
    pub attach: usize,
    /// The From header address.
    pub from: String,
    /// The To header address.
    pub to: String,
}

/// Body line length of generated text: 74 characters and CRLF, about what mail clients
/// wrap at (fewer lines mean less per-line work for the MTA), and short enough that
/// mail-builder keeps the text 7bit (it quotes lines of 76 characters or more).
const LINE: usize = 76;
/// Message-ID placeholder set on the template and cut out again (it is per message).
const MSGID_PLACEHOLDER: &str = "mailbench-template@mailbench.test";

/// One message's body as sent: the shared part in both forms, and a last short line.
#[derive(Debug, Clone)]
pub struct Body {
    /// CRLF-normalised, for BDAT.
    pub raw: Bytes,
    /// Dot-stuffed, for DATA.
    pub stuffed: Bytes,
    /// A last line that makes up the exact size (empty when whole lines fit).
    pub suffix: Bytes,
    /// Contains octets above 127.
    pub eight_bit: bool,
    /// Where the body (after the header section) starts in `raw`; it runs on through
    /// `suffix`.
    pub body_at: usize,
}

impl Body {
    /// The sum of the body as sent, for the trace header.
    pub fn sum(&self) -> BodySum {
        BodySum::of(&[
            self.raw.get(self.body_at..).unwrap_or_default(),
            &self.suffix,
        ])
    }
}

/// The content of a run.
#[derive(Debug, Clone)]
pub enum Content {
    /// One generated message at the largest size; smaller sizes are prefixes of it.
    Generated {
        /// The full-size message.
        msg: Template,
        /// Octets before the first body line.
        header_len: usize,
        /// The size distribution.
        size: SizeRange,
        /// True when the body is MIME multipart (then it is never cut).
        fixed: bool,
        /// `LINE - 1` characters and CRLF; its ends are the short last lines.
        tail: Bytes,
    },
    /// Real messages, used round-robin; their own Message-ID removed (each copy gets the
    /// run's).
    Files(Vec<Template>),
}

impl Content {
    /// Generates the message template.
    pub fn generate(spec: &GenSpec) -> Result<Content, String> {
        if spec.attach > 0 && spec.size.min != spec.size.max {
            return Err("--attach needs a fixed --size, not a range".into());
        }
        let mut rng = fastrand::Rng::with_seed(0x6d61_696c);
        // Generate enough text; the message is cut back to size below.
        let lines = spec.size.max / LINE + 1;
        let mut text = String::with_capacity(lines * LINE);
        for _ in 0..lines {
            for _ in 0..LINE - 2 {
                text.push(rng.alphanumeric());
            }
            text.push_str("\r\n");
        }
        let mut builder = MessageBuilder::new()
            .from(Address::new_address(None::<&str>, spec.from.clone()))
            .to(Address::new_address(None::<&str>, spec.to.clone()))
            .subject("mailbench test message")
            .message_id(MSGID_PLACEHOLDER)
            .date((crate::stats::clock::unix_us() / 1_000_000) as i64)
            .text_body(text);
        if spec.attach > 0 {
            let mut blob = vec![0u8; spec.attach];
            rng.fill(&mut blob);
            builder = builder.attachment("application/octet-stream", "mailbench.bin", blob);
        }
        let built = builder
            .write_to_vec()
            .map_err(|e| format!("cannot build the message template: {e}"))?;
        let built = strip_header_field(&built, "Message-ID");
        let header_len = memchr::memmem::find(&built, b"\r\n\r\n")
            .map(|p| p + 4)
            .ok_or("generated message has no header/body separator")?;
        // Every body line must be exactly LINE long so that sizes can be cut anywhere.
        if spec.attach == 0
            && built[header_len..]
                .chunks(LINE)
                .any(|l| !l.ends_with(b"\r\n") && l.len() == LINE)
        {
            return Err("generated message body is not in fixed-length lines".into());
        }
        let msg = Template::from_message(&built);
        let fixed = spec.attach > 0;
        if !fixed && msg.raw.len() < header_len + LINE {
            return Err("generated message is empty".into());
        }
        let mut tail: Vec<u8> = (0..LINE - 1).map(|_| rng.alphanumeric() as u8).collect();
        tail.extend_from_slice(b"\r\n");
        Ok(Content::Generated {
            msg,
            header_len,
            size: spec.size,
            fixed,
            tail: Bytes::from(tail),
        })
    }

    /// Reads real messages: one file, or every `*.eml` file of a directory.
    pub fn from_path(path: &Path) -> Result<Content, String> {
        let files: Vec<PathBuf> = if path.is_dir() {
            let mut v: Vec<PathBuf> = std::fs::read_dir(path)
                .map_err(|e| format!("cannot read --eml directory {}: {e}", path.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "eml"))
                .collect();
            v.sort();
            v
        } else {
            vec![path.to_path_buf()]
        };
        if files.is_empty() {
            return Err(format!(
                "--eml directory {} holds no *.eml file",
                path.display()
            ));
        }
        let mut templates = Vec::with_capacity(files.len());
        for f in files {
            let text = std::fs::read(&f)
                .map_err(|e| format!("cannot read message file {}: {e}", f.display()))?;
            if text.is_empty() {
                return Err(format!("message file {} is empty", f.display()));
            }
            // The file's own Message-ID would be every copy's: the run's per message
            // replaces it (MTAs log it, and the relay reads its messages back by it).
            templates.push(Template::from_message(&strip_header_field(
                &normalize_crlf(&text),
                "Message-ID",
            )));
        }
        Ok(Content::Files(templates))
    }

    /// The smallest whole message this content can be cut to, given the longest
    /// per-message prefix: a generated message's header section and that prefix; `None`
    /// for content that is not cut to size (real messages, a message with an attachment).
    pub fn smallest(&self, prefix_len: usize) -> Option<usize> {
        match self {
            Content::Generated {
                header_len, fixed, ..
            } if !fixed => Some(header_len + prefix_len),
            _ => None,
        }
    }

    /// The body of message `seq`, whose per-message prefix is `prefix_len` octets long. A
    /// generated message is cut so that prefix and body together are exactly the size
    /// asked for (whole lines, then one shorter line); it cannot be smaller than its
    /// header section.
    pub fn pick(&self, seq: u64, prefix_len: usize, rng: &mut fastrand::Rng) -> Body {
        match self {
            Content::Generated {
                msg,
                header_len,
                size,
                fixed,
                tail,
            } => {
                if *fixed {
                    return Body {
                        raw: msg.raw.clone(),
                        stuffed: msg.stuffed.clone(),
                        suffix: Bytes::new(),
                        eight_bit: msg.eight_bit,
                        body_at: msg.body_at,
                    };
                }
                let want = if size.min == size.max {
                    size.max
                } else {
                    rng.usize(size.min..=size.max)
                };
                let (lines, last) = split_body(want.saturating_sub(prefix_len + header_len));
                let cut = (header_len + lines * LINE).min(msg.raw.len());
                // Generated text never starts a line with '.', so raw == stuffed.
                let b = msg.raw.slice(..cut);
                Body {
                    raw: b.clone(),
                    stuffed: b,
                    suffix: tail.slice(tail.len() - last..),
                    eight_bit: false,
                    body_at: *header_len,
                }
            }
            Content::Files(list) => {
                let t = &list[(seq % list.len() as u64) as usize];
                Body {
                    raw: t.raw.clone(),
                    stuffed: t.stuffed.clone(),
                    suffix: Bytes::new(),
                    eight_bit: t.eight_bit,
                    body_at: t.body_at,
                }
            }
        }
    }
}

/// Splits `n` body octets into whole `LINE`-long lines and a last line of 0 or 2 to
/// `LINE + 1` octets (a line needs at least its CRLF). One octet cannot be a line, so it
/// is left out.
fn split_body(n: usize) -> (usize, usize) {
    match (n / LINE, n % LINE) {
        (0, 1) => (0, 0),
        (k, 1) => (k - 1, LINE + 1),
        (k, r) => (k, r),
    }
}

/// Removes every field `name` (case-insensitive, with its folded continuation lines) from
/// the header section of `msg` (CRLF lines).
fn strip_header_field(msg: &[u8], name: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(msg.len());
    let mut pos = 0;
    let mut dropping = false;
    while pos < msg.len() {
        let end = memchr::memchr(b'\n', &msg[pos..]).map_or(msg.len(), |p| pos + p + 1);
        let line = &msg[pos..end];
        if line == b"\r\n" {
            break;
        }
        let folded = line.first().is_some_and(|b| *b == b' ' || *b == b'\t');
        if !folded {
            dropping = line.len() > name.len()
                && line[..name.len()].eq_ignore_ascii_case(name.as_bytes())
                && line[name.len()] == b':';
        }
        if !dropping {
            out.extend_from_slice(line);
        }
        pos = end;
    }
    out.extend_from_slice(&msg[pos..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(min: usize, max: usize, attach: usize) -> GenSpec {
        GenSpec {
            size: SizeRange { min, max },
            attach,
            from: "a@example.org".into(),
            to: "b@example.com".into(),
        }
    }

    fn whole(b: &Body) -> Vec<u8> {
        [&b.raw[..], &b.suffix[..]].concat()
    }

    #[test]
    fn generated_messages_have_the_headers_and_exactly_the_size() {
        let c = Content::generate(&spec(25 * 1024, 25 * 1024, 0)).expect("generate");
        let b = c.pick(0, 0, &mut fastrand::Rng::with_seed(1));
        assert_eq!(b.raw, b.stuffed);
        assert!(!b.eight_bit);
        let raw = whole(&b);
        let text = String::from_utf8_lossy(&raw);
        for h in ["From: ", "To: ", "Subject: ", "Date: ", "MIME-Version: "] {
            assert!(text.contains(h), "missing {h} in {}", &text[..400]);
        }
        assert!(
            !text.contains("Message-ID"),
            "template must not carry a Message-ID"
        );
        assert_eq!(raw.len(), 25 * 1024);
        assert!(raw.ends_with(b"\r\n"));
        // With a per-message prefix, prefix and body together make the size.
        for prefix in [0, 1, 75, 76, 77, 130, 131] {
            let b = c.pick(0, prefix, &mut fastrand::Rng::with_seed(1));
            let body = whole(&b);
            assert_eq!(prefix + body.len(), 25 * 1024, "prefix {prefix}");
            assert!(body.ends_with(b"\r\n"));
            assert!(body.split(|c| *c == b'\n').all(|l| l.len() <= LINE + 1));
        }
    }

    #[test]
    fn body_octets_split_into_lines_of_at_least_a_crlf() {
        for n in 0..400 {
            let (lines, last) = split_body(n);
            assert!(last == 0 || (2..=LINE + 1).contains(&last), "{n}: {last}");
            let made = lines * LINE + last;
            assert!(made == n || (n == 1 && made == 0), "{n}: {made}");
        }
    }

    #[test]
    fn size_ranges_cut_at_line_boundaries() {
        let c = Content::generate(&spec(1000, 10_000, 0)).expect("generate");
        let mut rng = fastrand::Rng::with_seed(3);
        let mut seen = std::collections::BTreeSet::new();
        for i in 0..50 {
            let raw = whole(&c.pick(i, 0, &mut rng));
            assert!(raw.ends_with(b"\r\n"));
            assert!((1000..=10_000).contains(&raw.len()), "{}", raw.len());
            seen.insert(raw.len());
        }
        assert!(seen.len() > 10, "sizes should vary: {seen:?}");
    }

    #[test]
    fn attachments_are_base64_multipart() {
        let c = Content::generate(&spec(2000, 2000, 97 * 1024)).expect("generate");
        let raw = whole(&c.pick(0, 0, &mut fastrand::Rng::with_seed(1)));
        let text = String::from_utf8_lossy(&raw);
        assert!(text.contains("multipart/mixed"));
        assert!(text.contains("Content-Transfer-Encoding: base64"));
        assert!(raw.len() > 97 * 1024 * 4 / 3);
        assert!(Content::generate(&spec(1, 2, 10)).is_err());
    }

    #[test]
    fn a_files_own_message_id_is_removed_folded_lines_and_all() {
        let dir = std::env::temp_dir().join(format!("mb-eml-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let f = dir.join("a.eml");
        std::fs::write(
            &f,
            "Subject: x\nmessage-id:\n <own@example.org>\nMessage-IDX: kept\nTo: b\n\nMessage-ID: <in the body>\n",
        )
        .expect("write");
        let c = Content::from_path(&f).expect("read");
        let _ = std::fs::remove_dir_all(&dir);
        let Content::Files(t) = c else {
            panic!("files")
        };
        assert_eq!(
            String::from_utf8_lossy(&t[0].raw),
            "Subject: x\r\nMessage-IDX: kept\r\nTo: b\r\n\r\nMessage-ID: <in the body>\r\n"
        );
    }

    #[test]
    fn message_files_are_normalised_and_stuffed() {
        let t = Template::from_message(b"Subject: x\n\n.hidden\nend");
        assert_eq!(&t.raw[..], b"Subject: x\r\n\r\n.hidden\r\nend\r\n");
        assert_eq!(&t.stuffed[..], b"Subject: x\r\n\r\n..hidden\r\nend\r\n");
    }
}
