//! SASL PLAIN (RFC 4616) and LOGIN as SMTP, POP3 and IMAP all carry them: a client's
//! responses encoded, and a server's view of them decoded. Pure functions, no IO, so every
//! protocol core can use them and stay sans-IO.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;

/// The LOGIN server's first challenge, base64 of `Username:`.
pub const LOGIN_USER_PROMPT: &str = "VXNlcm5hbWU6";
/// The LOGIN server's second challenge, base64 of `Password:`.
pub const LOGIN_PASS_PROMPT: &str = "UGFzc3dvcmQ6";

/// A client's PLAIN response: base64 of `NUL user NUL password` (no authorization id).
pub fn plain_response(user: &str, pass: &str) -> String {
    B64.encode(format!("\0{user}\0{pass}"))
}

/// One LOGIN response (the user name, then the password), base64.
pub fn encode(text: &str) -> String {
    B64.encode(text.as_bytes())
}

/// True when `text` is valid base64.
pub fn is_base64(text: &[u8]) -> bool {
    B64.decode(text.trim_ascii()).is_ok()
}

/// Decodes one base64 line (CR and spaces trimmed); invalid input decodes to "".
pub fn decode(line: &[u8]) -> String {
    B64.decode(line.trim_ascii())
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

/// A decoded PLAIN response, `authzid NUL authcid NUL passwd`, as `authcid NUL passwd`: the
/// form a server's handler checks.
pub fn plain_credentials(decoded: &str) -> String {
    let mut parts = decoded.split('\0');
    let _authzid = parts.next();
    let user = parts.next().unwrap_or_default();
    let pass = parts.next().unwrap_or_default();
    format!("{user}\0{pass}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_and_login_round_trip() {
        // RFC 4616 §4's example shape, without an authorization identity.
        assert_eq!(plain_response("u", "p"), "AHUAcA==");
        assert_eq!(plain_credentials(&decode(b"AHUAcA==\r\n")), "u\0p");
        assert_eq!(decode(LOGIN_USER_PROMPT.as_bytes()), "Username:");
        assert_eq!(decode(LOGIN_PASS_PROMPT.as_bytes()), "Password:");
        assert_eq!(
            decode(encode("alice@example.test").as_bytes()),
            "alice@example.test"
        );
        assert!(!is_base64(b"not base64!"));
        assert_eq!(decode(b"not base64!"), "");
    }
}
