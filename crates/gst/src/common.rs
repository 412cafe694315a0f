//! What both elements share: their connection settings (the SRT-like
//! properties) and how they become a `Preconnection`.

use hollywood_taps::relay::Mode;
use hollywood_taps::uri::HollywoodUri;
use hollywood_taps::{
    Identity, Preconnection, Preference, SecurityParameters, TransportProperties,
};
use std::path::PathBuf;
use std::time::Duration;

/// The default `uri`.
pub const DEFAULT_URI: &str = "hollywood://127.0.0.1:9000";
/// The default `latency` in milliseconds (`hollywood transmit`'s).
pub const DEFAULT_LATENCY_MS: u32 = 120;
/// The default TLS server name.
pub const DEFAULT_SERVER_NAME: &str = "hollywood.invalid";

/// The connection properties of both elements.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `hollywood://…` ([`HollywoodUri`]).
    pub uri: String,
    /// Each message's lifetime (sink) or the receiver's budget (source).
    pub latency: Duration,
    /// TLS: the certificate (PEM or DER) a listener presents and a caller
    /// pins.
    pub certificate: Option<PathBuf>,
    /// TLS: its PKCS#8 key.
    pub key: Option<PathBuf>,
    /// The name the certificate is issued to.
    pub server_name: String,
    /// FEC on the message layer (docs/FEC.md): repair bytes at most this
    /// percentage of the stream's; 0: off. Both ends need the same
    /// setting; it requires QUIC (the `fec` transport property).
    pub fec_percent: u32,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            uri: DEFAULT_URI.into(),
            latency: Duration::from_millis(u64::from(DEFAULT_LATENCY_MS)),
            certificate: None,
            key: None,
            server_name: DEFAULT_SERVER_NAME.into(),
            fec_percent: 0,
        }
    }
}

/// A parsed configuration, ready to connect.
#[derive(Debug, Clone)]
pub struct Target {
    /// The URI.
    pub uri: HollywoodUri,
    /// Caller or listener.
    pub mode: Mode,
    /// Endpoints, properties (media: unordered, per-message reliability),
    /// security, candidates.
    pub preconnection: Preconnection,
}

impl Settings {
    /// Check the settings and build the preconnection.
    pub fn target(&self) -> Result<Target, String> {
        let uri = HollywoodUri::parse(&self.uri)?;
        let security = match (&self.certificate, &self.key) {
            (Some(c), Some(k)) => {
                SecurityParameters::pinned(Identity::from_files(c, k, &self.server_name)?)
            }
            (None, None) => SecurityParameters::Disabled,
            _ => return Err("TLS needs both certificate and key".into()),
        };
        let mut properties = TransportProperties::media();
        if self.fec_percent > 0 {
            properties.fec = Preference::Require;
            properties.fec_overhead_percent = u16::try_from(self.fec_percent).unwrap_or(1000);
        }
        let pre = uri.apply(Preconnection::new(properties, security))?;
        Ok(Target {
            mode: uri.effective_mode(),
            uri,
            preconnection: pre,
        })
    }
}

/// The element's own runtime: the connection's tasks run on it, the
/// streaming thread talks to them through channels.
pub fn runtime(name: &str) -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name(format!("{name}-rt"))
        .enable_all()
        .build()
        .map_err(|e| format!("tokio runtime: {e}"))
}

/// The properties both elements have, in SRT's spirit.
pub fn properties() -> Vec<gst::glib::ParamSpec> {
    use gst::glib;
    use gst::prelude::*;
    vec![
        glib::ParamSpecString::builder("uri")
            .nick("URI")
            .blurb(
                "hollywood://HOST:PORT[?mode=caller|listener&transport=quic|hollywood|kernel], \
                 or a stream on a relay: hollywood://HOST:PORT/STREAM?mode=publish|play[&token=T&user=U]",
            )
            .default_value(Some(DEFAULT_URI))
            .mutable_ready()
            .build(),
        glib::ParamSpecUInt::builder("latency")
            .nick("Latency")
            .blurb(
                "Milliseconds: each buffer's lifetime (sink; keyframes get the group's \
                 duration on top) or the receiver's budget (source: reported as its latency)",
            )
            .minimum(1)
            .maximum(600_000)
            .default_value(DEFAULT_LATENCY_MS)
            .mutable_ready()
            .build(),
        glib::ParamSpecString::builder("certificate")
            .nick("Certificate")
            .blurb("TLS on every candidate: the certificate file (PEM or DER) a listener presents and a caller pins (with key)")
            .mutable_ready()
            .build(),
        glib::ParamSpecString::builder("key")
            .nick("Key")
            .blurb("TLS: the certificate's PKCS#8 private key file")
            .mutable_ready()
            .build(),
        glib::ParamSpecString::builder("server-name")
            .nick("Server name")
            .blurb("TLS: the name the certificate is issued to")
            .default_value(Some(DEFAULT_SERVER_NAME))
            .mutable_ready()
            .build(),
        glib::ParamSpecUInt::builder("fec")
            .nick("FEC")
            .blurb(
                "FEC on the message layer: repair bytes at most this percentage of the \
                 stream's (0: off). Both ends need it; it runs over QUIC only",
            )
            .maximum(1000)
            .default_value(0)
            .mutable_ready()
            .build(),
        glib::ParamSpecBoxed::builder::<gst::Structure>("stats")
            .nick("Statistics")
            .blurb("Counters of the element and its connection")
            .read_only()
            .build(),
    ]
}

impl Settings {
    /// Set a common property; false when `name` is not one.
    pub fn set(&mut self, name: &str, value: &gst::glib::Value) -> Result<bool, String> {
        let path = |v: &gst::glib::Value| {
            v.get::<Option<String>>()
                .ok()
                .flatten()
                .filter(|s| !s.is_empty())
                .map(PathBuf::from)
        };
        match name {
            "uri" => {
                let u: Option<String> = value.get::<Option<String>>().map_err(|e| e.to_string())?;
                let u = u.unwrap_or_else(|| DEFAULT_URI.into());
                HollywoodUri::parse(&u)?;
                self.uri = u;
            }
            "latency" => {
                let ms: u32 = value.get::<u32>().map_err(|e| e.to_string())?;
                self.latency = Duration::from_millis(u64::from(ms));
            }
            "fec" => self.fec_percent = value.get::<u32>().map_err(|e| e.to_string())?,
            "certificate" => self.certificate = path(value),
            "key" => self.key = path(value),
            "server-name" => {
                let s: Option<String> = value.get::<Option<String>>().map_err(|e| e.to_string())?;
                self.server_name = s.unwrap_or_else(|| DEFAULT_SERVER_NAME.into());
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// A common property's value; `None` when `name` is not one.
    pub fn get(&self, name: &str) -> Option<gst::glib::Value> {
        use gst::prelude::*;
        let path = |p: &Option<PathBuf>| p.as_ref().map(|p| p.display().to_string());
        Some(match name {
            "uri" => self.uri.to_value(),
            "latency" => (u32::try_from(self.latency.as_millis()).unwrap_or(u32::MAX)).to_value(),
            "certificate" => path(&self.certificate).to_value(),
            "key" => path(&self.key).to_value(),
            "server-name" => self.server_name.to_value(),
            "fec" => self.fec_percent.to_value(),
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_check_the_uri_and_tls_pair() {
        let s = Settings::default();
        assert_eq!(s.target().unwrap().mode, Mode::Caller);
        let s = Settings {
            uri: "hollywood://:9000".into(),
            ..Settings::default()
        };
        assert_eq!(s.target().unwrap().mode, Mode::Listener);
        let s = Settings {
            uri: "srt://x:1".into(),
            ..Settings::default()
        };
        assert!(s.target().is_err());
        let s = Settings {
            certificate: Some("/nonexistent.pem".into()),
            ..Settings::default()
        };
        assert!(s.target().unwrap_err().contains("both"));
        let s = Settings {
            certificate: Some("/nonexistent.pem".into()),
            key: Some("/nonexistent.key".into()),
            ..Settings::default()
        };
        assert!(s.target().is_err());
    }

    #[test]
    fn fec_requires_the_property_over_quic() {
        let s = Settings::default();
        let p = s.target().unwrap().preconnection;
        assert_eq!(p.properties().fec, Preference::NoPreference);
        let s = Settings {
            fec_percent: 25,
            ..Settings::default()
        };
        let p = s.target().unwrap().preconnection;
        assert_eq!(p.properties().fec, Preference::Require);
        assert_eq!(p.properties().fec_overhead_percent, 25);
    }
}
