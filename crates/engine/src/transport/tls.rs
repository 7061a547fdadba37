//! TLS on rustls with the `ring` provider, for both sides: the client's configuration (test
//! servers use self-signed certificates, so certificates are accepted without verification
//! unless a CA file is given), the server's (from PEM files, or a certificate made at
//! start), self-signed certificates for servers the tool starts, and the upgrade of a
//! plain [`Stream`] on either side.

use std::io;
use std::path::Path;
use std::sync::Arc;

use tokio_rustls::{TlsAcceptor, TlsConnector};

use super::stream::Stream;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, SignatureScheme};

/// How a client uses TLS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TlsMode {
    /// Plain text.
    None,
    /// An upgrade after the greeting (SMTP's STARTTLS, POP3's STLS, IMAP's STARTTLS).
    Starttls,
    /// TLS from the first byte (SMTPS, POP3S, IMAPS).
    Implicit,
}

/// A client's TLS for a run: the mode, the share of connections that use it, and the
/// configuration they share.
#[derive(Debug, Clone)]
pub struct TlsPlan {
    /// Whether TLS starts after the greeting or from the first byte: the connection's
    /// set-up, and the port, differ.
    pub mode: TlsMode,
    /// Share of connections that use TLS, 0–100.
    pub percent: f64,
    /// The client configuration (when TLS is used).
    pub config: Option<Arc<ClientConfig>>,
}

impl TlsPlan {
    /// Plain text.
    pub const NONE: TlsPlan = TlsPlan {
        mode: TlsMode::None,
        percent: 0.0,
        config: None,
    };

    /// Whether a new connection uses TLS: on `percent` of them, drawn from `rng`.
    pub fn draw(&self, rng: &mut fastrand::Rng) -> bool {
        self.mode != TlsMode::None && rng.f64() * 100.0 < self.percent
    }
}

/// Builds the client configuration shared by all connections of a run.
/// `ca`: verify the server against these roots instead of trusting any certificate.
/// `resume`: allow TLS session resumption (tickets / session ids) between connections.
pub fn client_config(ca: Option<&Path>, resume: bool) -> Result<Arc<ClientConfig>, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS set-up failed: {e}"))?;
    let mut config = match ca {
        Some(path) => {
            let mut roots = rustls::RootCertStore::empty();
            let certs = CertificateDer::pem_file_iter(path)
                .map_err(|e| format!("cannot read --tls-ca {}: {e}", path.display()))?;
            for cert in certs {
                let cert = cert.map_err(|e| {
                    format!(
                        "--tls-ca {} holds an unreadable certificate: {e}",
                        path.display()
                    )
                })?;
                roots.add(cert).map_err(|e| {
                    format!(
                        "--tls-ca {} holds an unusable certificate: {e}",
                        path.display()
                    )
                })?;
            }
            if roots.is_empty() {
                return Err(format!(
                    "--tls-ca {} holds no PEM certificate; give a file with -----BEGIN CERTIFICATE-----",
                    path.display()
                ));
            }
            builder.with_root_certificates(roots).with_no_client_auth()
        }
        None => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAny(provider)))
            .with_no_client_auth(),
    };
    if !resume {
        config.resumption = rustls::client::Resumption::disabled();
    }
    Ok(Arc::new(config))
}

/// The name used for SNI and verification.
pub fn server_name(host: &str) -> ServerName<'static> {
    ServerName::try_from(host.to_string())
        .unwrap_or_else(|_| ServerName::try_from("localhost").expect("static name is valid"))
}

/// Accepts any server certificate (benchmarks against throwaway servers), but still checks
/// the handshake signatures so that the TLS work done is the real work.
#[derive(Debug)]
struct AcceptAny(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AcceptAny {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// Builds the server configuration: from PEM files, or a self-signed certificate made now
/// with rcgen for `hostname`.
pub fn server_config(
    cert_key: Option<(&Path, &Path)>,
    hostname: &str,
) -> Result<Arc<rustls::ServerConfig>, String> {
    use rustls::pki_types::PrivateKeyDer;
    let (certs, key) = match cert_key {
        Some((cert, key)) => {
            let certs = CertificateDer::pem_file_iter(cert)
                .map_err(|e| format!("cannot read --cert {}: {e}", cert.display()))?
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("--cert {} is not a PEM certificate: {e}", cert.display()))?;
            if certs.is_empty() {
                return Err(format!("--cert {} holds no certificate", cert.display()));
            }
            let key = PrivateKeyDer::from_pem_file(key)
                .map_err(|e| format!("--key {} is not a PEM private key: {e}", key.display()))?;
            (certs, key)
        }
        None => {
            let generated = self_signed(&[hostname])?;
            let key = PrivateKeyDer::try_from(generated.signing_key.serialize_der())
                .map_err(|e| format!("cannot use the generated key: {e}"))?;
            (vec![generated.cert.der().clone()], key)
        }
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS set-up failed: {e}"))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| format!("certificate and key do not match or are unusable: {e}"))?;
    Ok(Arc::new(config))
}

/// A self-signed certificate and its key for `names` (host names or IP addresses), for
/// the servers the tool runs or starts.
pub fn self_signed(names: &[&str]) -> Result<rcgen::CertifiedKey<rcgen::KeyPair>, String> {
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    rcgen::generate_simple_self_signed(names)
        .map_err(|e| format!("cannot make a self-signed certificate: {e}"))
}

/// The client side of a TLS upgrade (after STARTTLS, or first thing with implicit TLS).
pub async fn connect(stream: Stream, config: Arc<ClientConfig>, name: &str) -> io::Result<Stream> {
    let connector = TlsConnector::from(config);
    let name = server_name(name);
    match stream {
        Stream::Tcp(s) => connector
            .connect(name, s)
            .await
            .map(|t| Stream::Tls(Box::new(t))),
        Stream::Counted(s) => connector
            .connect(name, s)
            .await
            .map(|t| Stream::Tls(Box::new(t))),
        Stream::Unix(s) => connector
            .connect(name, s)
            .await
            .map(|t| Stream::Tls(Box::new(t))),
        _ => Err(io::Error::other("TLS is already active")),
    }
}

/// The server side of a TLS upgrade.
pub async fn accept(stream: Stream, config: Arc<rustls::ServerConfig>) -> io::Result<Stream> {
    let acceptor = TlsAcceptor::from(config);
    match stream {
        Stream::Tcp(s) => acceptor.accept(s).await.map(|t| Stream::Tls(Box::new(t))),
        Stream::Unix(s) => acceptor.accept(s).await.map(|t| Stream::Tls(Box::new(t))),
        Stream::Counted(s) => acceptor.accept(s).await.map(|t| Stream::Tls(Box::new(t))),
        _ => Err(io::Error::other("TLS is already active")),
    }
}
