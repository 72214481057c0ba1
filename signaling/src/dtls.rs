//! A DTLS provider that builds its DTLS configuration once per process.
//!
//! The stock provider builds a fresh `dimpl::Config` for every call, and building one
//! validates the crypto backend: key exchanges on X25519, P-256 and P-384 and ECDSA
//! signatures on both curves, ~2 ms of CPU per call, spent while the offer is answered and
//! again by every offerer. The configuration is immutable (and shared behind an `Arc`
//! anyway), so one validated copy per MTU (str0m passes its one MTU) serves every call.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use str0m::crypto::dtls::{
    DtlsCert, DtlsImplError, DtlsInstance, DtlsOutput, DtlsProvider, DtlsVersion, ProtocolVersion,
};
use str0m::crypto::CryptoProvider;

/// Builds a DTLS configuration as the stock provider does: server cookies off (ICE
/// already verified return routability).
fn build_config(mtu: Option<usize>) -> Result<Arc<dimpl::Config>, String> {
    let mut builder = dimpl::Config::builder().use_server_cookie(false);
    if let Some(mtu) = mtu {
        builder = builder.mtu(mtu);
    }
    builder
        .build()
        .map(Arc::new)
        .map_err(|e| format!("dimpl config creation failed: {e}"))
}

/// Distinct MTUs whose configuration is kept (str0m uses one).
const MTUS: usize = 4;

#[derive(Debug)]
struct CachedDtls {
    /// The stock provider (certificates).
    stock: &'static dyn DtlsProvider,
    /// Validated configurations by MTU.
    configs: Mutex<Vec<(Option<usize>, Arc<dimpl::Config>)>>,
}

impl CachedDtls {
    fn config(&self, mtu: Option<usize>) -> Result<Arc<dimpl::Config>, String> {
        if let Some((_, c)) = self
            .configs
            .lock()
            .ok()
            .and_then(|cs| cs.iter().find(|(m, _)| *m == mtu).cloned())
        {
            return Ok(c);
        }
        let config = build_config(mtu)?;
        if let Ok(mut cs) = self.configs.lock() {
            if cs.len() < MTUS {
                cs.push((mtu, config.clone()));
            }
        }
        Ok(config)
    }
}

impl DtlsProvider for CachedDtls {
    fn generate_certificate(&self) -> Option<DtlsCert> {
        self.stock.generate_certificate()
    }

    fn new_dtls(
        &self,
        cert: &DtlsCert,
        now: Instant,
        version: DtlsVersion,
        mtu: Option<usize>,
    ) -> Result<Box<dyn DtlsInstance>, str0m::crypto::CryptoError> {
        let config = self
            .config(mtu)
            .map_err(str0m::crypto::CryptoError::Other)?;
        let cert = cert.clone();
        let dtls = match version {
            DtlsVersion::Dtls12 => dimpl::Dtls::new_12(config, cert, now),
            DtlsVersion::Dtls13 => dimpl::Dtls::new_13(config, cert, now),
            DtlsVersion::Auto => dimpl::Dtls::new_auto(config, cert, now),
            other => {
                return Err(str0m::crypto::CryptoError::Other(format!(
                    "unsupported DTLS version: {other}"
                )))
            }
        };
        Ok(Box::new(Instance(dtls)))
    }
}

struct Instance(dimpl::Dtls);

impl std::fmt::Debug for Instance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Instance").finish_non_exhaustive()
    }
}

impl DtlsInstance for Instance {
    fn set_active(&mut self, active: bool) {
        self.0.set_active(active);
    }
    fn handle_packet(&mut self, packet: &[u8]) -> Result<(), DtlsImplError> {
        self.0.handle_packet(packet)
    }
    fn poll_output<'a>(&mut self, buf: &'a mut [u8]) -> DtlsOutput<'a> {
        self.0.poll_output(buf)
    }
    fn handle_timeout(&mut self, now: Instant) -> Result<(), DtlsImplError> {
        self.0.handle_timeout(now)
    }
    fn send_application_data(&mut self, data: &[u8]) -> Result<usize, DtlsImplError> {
        self.0.send_application_data(data)
    }
    fn is_active(&self) -> bool {
        self.0.is_active()
    }
    fn protocol_version(&self) -> Option<ProtocolVersion> {
        self.0.protocol_version()
    }
    fn is_closing(&self) -> bool {
        self.0.is_closing()
    }
    fn is_closed(&self) -> bool {
        self.0.is_closed()
    }
    fn close(&mut self) -> Result<(), DtlsImplError> {
        self.0.close()
    }
}

/// The process's crypto provider: the stock one, with DTLS configured once. Installed as
/// the process default by [`install`].
pub fn provider() -> CryptoProvider {
    static DTLS: OnceLock<CachedDtls> = OnceLock::new();
    let stock = str0m::crypto::from_feature_flags();
    let dtls = DTLS.get_or_init(|| CachedDtls {
        stock: stock.dtls_provider,
        configs: Mutex::new(Vec::with_capacity(MTUS)),
    });
    CryptoProvider {
        dtls_provider: dtls,
        ..stock
    }
}

/// Installs [`provider`] as the process-wide default (the first install wins), for every
/// `Rtc` built in this process: the server's calls and, in tests and benchmarks, the
/// offerers.
pub fn install() {
    provider().install_process_default();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_configuration_is_built_once_per_mtu_and_shared() {
        let cached = CachedDtls {
            stock: str0m::crypto::from_feature_flags().dtls_provider,
            configs: Mutex::new(Vec::new()),
        };
        // str0m passes its MTU: the first call validates, the rest share that copy.
        let a = cached.config(Some(1150)).expect("config");
        let b = cached.config(Some(1150)).expect("config");
        assert!(Arc::ptr_eq(&a, &b));
        // Another MTU, or none, gets a configuration of its own.
        let c = cached.config(Some(1200)).expect("config");
        assert!(!Arc::ptr_eq(&a, &c));
        assert!(cached.config(None).is_ok());
        // The cache is bounded.
        for mtu in 1300..1310 {
            cached.config(Some(mtu)).expect("config");
        }
        assert_eq!(cached.configs.lock().expect("lock").len(), MTUS);
        // The process provider hands out this provider's certificates.
        assert!(provider().dtls_provider.generate_certificate().is_some());
    }
}
