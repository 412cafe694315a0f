//! Quantities as people write them on a command line.
//!
//! - rates: `10mbit`, `10Mbps`, `1.5gbit`, `500kbit`, `64000` (bit/s),
//!   `1MB/s`-style byte rates are rejected to avoid ambiguity;
//! - durations: `50ms`, `1s`, `1.5s`, `200us`, `10ns`, `2m`;
//! - fractions: `1%`, `0.5%`, or a plain probability `0.01`;
//! - sizes: `20MB` (10^6), `20MiB` (2^20), `1GB`, `512KiB`, `1500B`, `1500`.
//!
//! Every parser returns a message that names the bad input and the accepted
//! forms.

use std::time::Duration;

fn split_number(s: &str) -> Result<(f64, String), String> {
    let s = s.trim();
    let idx = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(idx);
    let num: String = num.chars().filter(|&c| c != '_').collect();
    if num.is_empty() {
        return Err(format!("'{s}' does not start with a number"));
    }
    let v: f64 = num
        .parse()
        .map_err(|_| format!("'{num}' is not a number"))?;
    if !v.is_finite() {
        return Err(format!("'{s}' is not a finite number"));
    }
    Ok((v, unit.trim().to_string()))
}

/// Parse a link rate into bits per second.
pub fn parse_rate(s: &str) -> Result<u64, String> {
    let (v, unit) = split_number(s)?;
    let mult = match unit.to_ascii_lowercase().as_str() {
        "" | "bit" | "bps" | "b/s" | "bit/s" => 1e0,
        "k" | "kbit" | "kbps" | "kb/s" | "kbit/s" => 1e3,
        "m" | "mbit" | "mbps" | "mb/s" | "mbit/s" => 1e6,
        "g" | "gbit" | "gbps" | "gb/s" | "gbit/s" => 1e9,
        _ => {
            return Err(format!(
                "bad rate '{s}': use a number of bit/s with a unit such as 64kbit, 10mbit, 1gbit"
            ))
        }
    };
    let bps = v * mult;
    if !(1.0..=1e12).contains(&bps) {
        return Err(format!("rate '{s}' is out of range (1 bit/s .. 1 Tbit/s)"));
    }
    Ok(bps.round() as u64)
}

/// Parse a duration.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let (v, unit) = split_number(s)?;
    let secs = match unit.to_ascii_lowercase().as_str() {
        "ns" => v * 1e-9,
        "us" | "µs" => v * 1e-6,
        "ms" => v * 1e-3,
        "s" | "sec" => v,
        "m" | "min" => v * 60.0,
        "" => {
            return Err(format!(
                "duration '{s}' needs a unit: ns, us, ms, s or min (e.g. 50ms)"
            ))
        }
        _ => return Err(format!("bad duration '{s}': use e.g. 200us, 50ms, 1.5s")),
    };
    if secs > 1e7 {
        return Err(format!("duration '{s}' is too long"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Parse a loss or probability: `1%` or `0.01`. Must lie in [0, 1].
pub fn parse_fraction(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let v = if let Some(p) = t.strip_suffix('%') {
        let (v, unit) = split_number(p)?;
        if !unit.is_empty() {
            return Err(format!("bad percentage '{s}'"));
        }
        v / 100.0
    } else {
        let (v, unit) = split_number(t)?;
        if !unit.is_empty() {
            return Err(format!("bad probability '{s}': use e.g. 1% or 0.01"));
        }
        v
    };
    if !(0.0..=1.0).contains(&v) {
        return Err(format!("'{s}' is not between 0% and 100%"));
    }
    Ok(v)
}

/// Parse a size in bytes (SI and IEC units).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let (v, unit) = split_number(s)?;
    let mult: f64 = match unit.as_str() {
        "" | "B" | "b" => 1.0,
        "k" | "K" | "kB" | "KB" => 1e3,
        "M" | "MB" => 1e6,
        "G" | "GB" => 1e9,
        "T" | "TB" => 1e12,
        "KiB" | "Ki" => 1024.0,
        "MiB" | "Mi" => 1048576.0,
        "GiB" | "Gi" => 1073741824.0,
        _ => {
            return Err(format!(
                "bad size '{s}': use bytes with B, kB, MB, GB (10^3) or KiB, MiB, GiB (2^10)"
            ))
        }
    };
    let b = v * mult;
    if b > 1e13 {
        return Err(format!("size '{s}' is too large"));
    }
    Ok(b.round() as u64)
}

/// One cross-traffic flow: `bulk` (a greedy TCP transfer), `cbr:RATE`
/// (UDP at a constant rate) or `onoff:RATE[:ON:OFF]` (UDP at RATE during
/// exponential on periods of mean ON, silent for exponential off periods of
/// mean OFF; default 500ms:500ms).
pub fn parse_cross(s: &str) -> Result<hollywood_media::CrossTraffic, String> {
    use hollywood_media::CrossTraffic;
    use hollywood_sim::DatagramPattern;
    let v: Vec<&str> = s.trim().split(':').collect();
    let bad = || format!("bad cross traffic '{s}': use bulk, cbr:RATE or onoff:RATE[:ON:OFF]");
    let rate = |r: &str| -> Result<u64, String> {
        match parse_rate(r)? {
            0 => Err(format!("cross traffic '{s}': the rate must be positive")),
            r => Ok(r),
        }
    };
    match v.as_slice() {
        ["bulk"] => Ok(CrossTraffic::Bulk),
        ["cbr", r] => Ok(CrossTraffic::Udp(DatagramPattern::Cbr {
            rate_bps: rate(r)?,
        })),
        ["onoff", r, rest @ ..] => {
            let (on, off) = match rest {
                [] => ("500ms", "500ms"),
                [on, off] => (*on, *off),
                _ => return Err(bad()),
            };
            let (mean_on, mean_off) = (parse_duration(on)?, parse_duration(off)?);
            if mean_on.is_zero() {
                return Err(format!(
                    "cross traffic '{s}': the on period must be positive"
                ));
            }
            Ok(CrossTraffic::Udp(DatagramPattern::OnOff {
                rate_bps: rate(r)?,
                mean_on,
                mean_off,
            }))
        }
        _ => Err(bad()),
    }
}

/// A loss model: `bernoulli:P` (same as a plain `P`) or
/// `gilbert:P,R[,BAD[,GOOD]]` — Gilbert-Elliott with P = probability of
/// going from the good to the bad state per packet, R = from bad to good,
/// BAD = loss probability in the bad state (default 100%), GOOD = in the
/// good state (default 0%). Each value is a fraction or a percentage.
pub fn parse_loss_model(s: &str) -> Result<hollywood_sim::LossModel, String> {
    use hollywood_sim::{GilbertElliott, LossModel};
    let t = s.trim();
    if let Some(rest) = t.strip_prefix("gilbert:") {
        let v: Vec<&str> = rest.split(',').collect();
        if v.len() < 2 || v.len() > 4 {
            return Err(format!(
                "bad loss model '{s}': use gilbert:P,R[,BAD[,GOOD]] e.g. gilbert:1%,30%"
            ));
        }
        let p = parse_fraction(v[0])?;
        let r = parse_fraction(v[1])?;
        let bad = v
            .get(2)
            .map(|x| parse_fraction(x))
            .transpose()?
            .unwrap_or(1.0);
        let good = v
            .get(3)
            .map(|x| parse_fraction(x))
            .transpose()?
            .unwrap_or(0.0);
        if r == 0.0 && p > 0.0 {
            return Err(format!(
                "bad loss model '{s}': R = 0 never leaves the bad state"
            ));
        }
        return Ok(LossModel::GilbertElliott(GilbertElliott {
            p,
            r,
            loss_good: good,
            loss_bad: bad,
        }));
    }
    let p = parse_fraction(t.strip_prefix("bernoulli:").unwrap_or(t))?;
    Ok(if p > 0.0 {
        LossModel::Bernoulli(p)
    } else {
        LossModel::None
    })
}

/// Who names the parameters in an error: the command line (`--size`) or a
/// plan (`size`). The parameter structs shared by a command and a plan
/// adapter (`VideoParams`, `DashParams`) take it where an error names a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spelling {
    /// A `hollywood` command: options.
    Cli,
    /// A plan: keys.
    Plan,
}

impl Spelling {
    pub(crate) fn prefix(self) -> &'static str {
        match self {
            Spelling::Cli => "--",
            Spelling::Plan => "",
        }
    }
}

/// The same parsers for a plan's keys (serde `deserialize_with`): a
/// quantity is text with a unit (`"8mbit"`), or a bare integer where the
/// unit is implied (bytes, bit/s).
pub(crate) mod de {
    use serde::{Deserialize, Deserializer};
    use std::time::Duration;

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Text {
        Str(String),
        Int(u64),
    }

    impl Text {
        fn text(self) -> String {
            match self {
                Text::Str(s) => s,
                Text::Int(n) => n.to_string(),
            }
        }
    }

    /// A default written as text (what a user types), parsed as the
    /// command line parses it; a bad constant is a bug, so it panics.
    pub fn parsed<T>(text: &str, parse: fn(&str) -> Result<T, String>) -> T {
        parse(text).unwrap_or_else(|e| panic!("default {text}: {e}"))
    }

    /// A plain number, for [`parsed`].
    pub fn number<T: std::str::FromStr>(text: &str) -> Result<T, String>
    where
        T::Err: std::fmt::Display,
    {
        text.parse().map_err(|e| format!("{e}"))
    }

    /// Serde `default = "…"` functions for defaults written as text, one
    /// line each: `d_rate: u64 = parse_rate(default::RATE);`.
    macro_rules! text_defaults {
        ($($name:ident: $t:ty = $parse:path [$text:expr];)*) => {
            $(fn $name() -> $t {
                $crate::units::de::parsed($text, $parse)
            })*
        };
    }
    pub(crate) use text_defaults;

    /// One value through `parse`.
    pub fn with<'de, D: Deserializer<'de>, T>(
        d: D,
        parse: fn(&str) -> Result<T, String>,
    ) -> Result<T, D::Error> {
        let t = Text::deserialize(d)?.text();
        parse(&t).map_err(serde::de::Error::custom)
    }
    pub fn rate<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        with(d, super::parse_rate)
    }
    pub fn size<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        with(d, super::parse_size)
    }
    pub fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        with(d, super::parse_duration)
    }
    pub fn fraction<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        with(d, super::parse_fraction)
    }
    pub fn opt_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        with(d, super::parse_duration).map(Some)
    }
    pub fn loss<'de, D: Deserializer<'de>>(d: D) -> Result<hollywood_sim::LossModel, D::Error> {
        with(d, super::parse_loss_model)
    }
    pub fn cc<'de, D: Deserializer<'de>>(d: D) -> Result<hollywood_tcp::CcAlgorithm, D::Error> {
        with(d, hollywood_tcp::CcAlgorithm::parse)
    }
    /// A list of cross-traffic flows, each as [`super::parse_cross`] reads it.
    pub fn cross<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Vec<hollywood_media::CrossTraffic>, D::Error> {
        Vec::<String>::deserialize(d)?
            .iter()
            .map(|c| super::parse_cross(c).map_err(serde::de::Error::custom))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cross_traffic_is_parsed() {
        use hollywood_media::CrossTraffic;
        use hollywood_sim::DatagramPattern;
        use std::time::Duration;
        assert_eq!(parse_cross("bulk"), Ok(CrossTraffic::Bulk));
        assert_eq!(
            parse_cross("cbr:5mbit"),
            Ok(CrossTraffic::Udp(DatagramPattern::Cbr {
                rate_bps: 5_000_000
            }))
        );
        assert_eq!(
            parse_cross("onoff:10mbit:200ms:1s"),
            Ok(CrossTraffic::Udp(DatagramPattern::OnOff {
                rate_bps: 10_000_000,
                mean_on: Duration::from_millis(200),
                mean_off: Duration::from_secs(1),
            }))
        );
        assert!(matches!(
            parse_cross("onoff:1mbit"),
            Ok(CrossTraffic::Udp(DatagramPattern::OnOff { .. }))
        ));
        for bad in [
            "",
            "ftp",
            "cbr",
            "cbr:0",
            "onoff:1mbit:1s",
            "onoff:1mbit:0s:1s",
            "cbr:fast",
        ] {
            assert!(parse_cross(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn rates() {
        assert_eq!(parse_rate("10mbit"), Ok(10_000_000));
        assert_eq!(parse_rate("10Mbps"), Ok(10_000_000));
        assert_eq!(parse_rate("1.5gbit"), Ok(1_500_000_000));
        assert_eq!(parse_rate("64000"), Ok(64_000));
        assert!(parse_rate("fast").is_err());
        assert!(parse_rate("10furlongs").is_err());
        assert!(parse_rate("0mbit").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("50ms"), Ok(Duration::from_millis(50)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("200us"), Ok(Duration::from_micros(200)));
        assert!(parse_duration("50").is_err());
        assert!(parse_duration("-5ms").is_err());
    }

    #[test]
    fn fractions() {
        assert_eq!(parse_fraction("1%"), Ok(0.01));
        assert_eq!(parse_fraction("0.1%"), Ok(0.001));
        assert_eq!(parse_fraction("0.05"), Ok(0.05));
        assert!(parse_fraction("150%").is_err());
        assert!(parse_fraction("2").is_err());
        assert!(parse_fraction("x%").is_err());
    }

    #[test]
    fn loss_models() {
        use hollywood_sim::LossModel;
        assert_eq!(parse_loss_model("1%"), Ok(LossModel::Bernoulli(0.01)));
        assert_eq!(parse_loss_model("0"), Ok(LossModel::None));
        let LossModel::GilbertElliott(g) = parse_loss_model("gilbert:1%,25%").unwrap() else {
            panic!()
        };
        assert_eq!((g.p, g.r, g.loss_bad, g.loss_good), (0.01, 0.25, 1.0, 0.0));
        assert!(parse_loss_model("gilbert:1%").is_err());
        assert!(parse_loss_model("gilbert:1%,0%").is_err());
        assert!(parse_loss_model("pareto:3").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("20MB"), Ok(20_000_000));
        assert_eq!(parse_size("1MiB"), Ok(1 << 20));
        assert_eq!(parse_size("1GB"), Ok(1_000_000_000));
        assert_eq!(parse_size("1500"), Ok(1500));
        assert!(parse_size("20 parsecs").is_err());
    }
}
