//! Server capabilities, parsed once per connection from the EHLO/LHLO reply.

use super::reply::Reply;

/// What the server advertised in its EHLO/LHLO reply (smtp-proto's `EhloResponse` bits).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Capabilities {
    ext: u32,
    auth: u64,
    /// SIZE limit advertised, 0 when none.
    pub max_size: usize,
}

impl Capabilities {
    /// Parses the capabilities out of a positive EHLO reply. A reply smtp-proto cannot parse
    /// yields no capabilities: the session then speaks plain RFC 5321, which always works.
    pub fn from_reply(reply: &Reply) -> Self {
        // smtp-proto parses the raw multi-line form; rebuild it from the decoded lines.
        let lines: Vec<&str> = reply.text.split('\n').collect();
        let mut raw = Vec::with_capacity(reply.text.len() + lines.len() * 6);
        for (i, line) in lines.iter().enumerate() {
            raw.extend_from_slice(if i + 1 == lines.len() {
                b"250 "
            } else {
                b"250-"
            });
            raw.extend_from_slice(line.as_bytes());
            raw.extend_from_slice(b"\r\n");
        }
        match smtp_proto::EhloResponse::parse(&mut raw.iter()) {
            Ok(r) => Capabilities {
                ext: r.capabilities,
                auth: r.auth_mechanisms,
                max_size: r.size,
            },
            Err(_) => Capabilities::default(),
        }
    }

    /// PIPELINING (RFC 2920).
    pub fn pipelining(&self) -> bool {
        self.ext & smtp_proto::EXT_PIPELINING != 0
    }
    /// STARTTLS (RFC 3207).
    pub fn starttls(&self) -> bool {
        self.ext & smtp_proto::EXT_START_TLS != 0
    }
    /// CHUNKING / BDAT (RFC 3030).
    pub fn chunking(&self) -> bool {
        self.ext & smtp_proto::EXT_CHUNKING != 0
    }
    /// 8BITMIME (RFC 6152).
    pub fn eight_bit_mime(&self) -> bool {
        self.ext & smtp_proto::EXT_8BIT_MIME != 0
    }
    /// SIZE (RFC 1870).
    pub fn size(&self) -> bool {
        self.ext & smtp_proto::EXT_SIZE != 0
    }
    /// AUTH PLAIN offered.
    pub fn auth_plain(&self) -> bool {
        self.auth & smtp_proto::AUTH_PLAIN != 0
    }
    /// AUTH LOGIN offered.
    pub fn auth_login(&self) -> bool {
        self.auth & smtp_proto::AUTH_LOGIN != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postfix_style_ehlo_is_parsed() {
        let reply = Reply::new(
            250,
            "mx.test\nPIPELINING\nSIZE 10240000\nSTARTTLS\nAUTH PLAIN LOGIN\n8BITMIME\nCHUNKING",
        );
        let caps = Capabilities::from_reply(&reply);
        assert!(caps.pipelining() && caps.starttls() && caps.chunking() && caps.eight_bit_mime());
        assert!(caps.auth_plain() && caps.auth_login());
        assert!(caps.size());
        assert_eq!(caps.max_size, 10_240_000);
    }

    #[test]
    fn bare_greeting_has_nothing() {
        let caps = Capabilities::from_reply(&Reply::new(250, "mx.test"));
        assert_eq!(caps, Capabilities::default());
    }
}
