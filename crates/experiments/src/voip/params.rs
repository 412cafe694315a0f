//! One call's parameters, written once: the options of `hollywood sim voip`
//! (clap) and the keys of a `voip` plan (serde) are this struct, with the
//! same defaults and the same units parsing ([`crate::units`]).

use crate::units::{de, parse_duration, parse_loss_model, parse_rate, parse_size};
use hollywood_media::{TransportKind, VoipScenario};
use hollywood_sim::LossModel;
use hollywood_tcp::{CcAlgorithm, Config};
use serde::Deserialize;
use std::time::Duration;

/// The defaults, as a user writes them (the thesis's intercontinental
/// call, §5.1.2).
mod default {
    pub const RATE: &str = "8mbit";
    pub const UPLINK: &str = "1mbit";
    pub const RTT: &str = "70ms";
    pub const PLAYOUT: &str = "30ms";
    pub const LOSS: &str = "0.1%";
    pub const MESSAGES: &str = "3000";
    pub const SIZE: &str = "160";
    pub const INTERVAL: &str = "20ms";
    pub const QUEUE: &str = "96000";
    pub const CC: &str = "cubic";
    pub const RACK: &str = "true";
}

/// The loss when a plan or the command line names none, as written.
pub const DEFAULT_LOSS: &str = default::LOSS;

/// The largest message: one packet.
pub const MAX_SIZE: u64 = 1400;

/// A call's path, messages and engine switches (not the transport, the
/// seed or where results go: a plan sweeps those, the CLI takes them
/// apart).
#[derive(clap::Args, Deserialize, Debug, Clone, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct VoipParams {
    /// Downlink rate, sender → receiver (ADSL: 8mbit).
    #[arg(long, default_value = default::RATE, value_parser = parse_rate)]
    #[serde(default = "d_rate", deserialize_with = "de::rate")]
    pub rate: u64,
    /// Uplink rate, receiver → sender (ADSL: 1mbit; carries the ACKs).
    #[arg(long, default_value = default::UPLINK, value_parser = parse_rate)]
    #[serde(default = "d_uplink", deserialize_with = "de::rate")]
    pub uplink: u64,
    /// Round-trip propagation delay (intracontinental 15ms, intercontinental 70ms).
    #[arg(long, default_value = default::RTT, value_parser = parse_duration)]
    #[serde(default = "d_rtt", deserialize_with = "de::duration")]
    pub rtt: Duration,
    /// Playout delay: how long an on-time message is buffered before it is
    /// played (thesis: 110ms intracontinental, 30ms intercontinental).
    #[arg(long, default_value = default::PLAYOUT, value_parser = parse_duration)]
    #[serde(default = "d_playout", deserialize_with = "de::duration")]
    pub playout: Duration,
    /// Loss on the downlink: a probability (0.1%, 0.001) or a model
    /// (gilbert:P,R[,BAD[,GOOD]]), as for `sim messages`.
    #[arg(long, visible_alias = "loss-model", default_value = default::LOSS, value_parser = parse_loss_model)]
    #[serde(default = "d_loss", deserialize_with = "de::loss")]
    pub loss: LossModel,
    /// Messages (3000 = one minute of audio).
    #[arg(long, default_value = default::MESSAGES)]
    #[serde(default = "d_messages")]
    pub messages: u32,
    /// Payload bytes per message (G.711, 20 ms: 160); at most 1400 (one packet).
    #[arg(long, default_value = default::SIZE, value_parser = parse_size)]
    #[serde(default = "d_size", deserialize_with = "de::size")]
    pub size: u64,
    /// Time between messages (the framing interval).
    #[arg(long, default_value = default::INTERVAL, value_parser = parse_duration)]
    #[serde(default = "d_interval", deserialize_with = "de::duration")]
    pub interval: Duration,
    /// Message lifetime for a TCP Hollywood sender; default RTT/2 + playout
    /// (the time from generation to playout).
    #[arg(long, value_parser = parse_duration)]
    #[serde(default, deserialize_with = "de::opt_duration")]
    pub lifetime: Option<Duration>,
    /// Drop-tail queue per link.
    #[arg(long, default_value = default::QUEUE, value_parser = parse_size)]
    #[serde(default = "d_queue", deserialize_with = "de::size")]
    pub queue: u64,
    /// Congestion control of both TCP engines: newreno, cubic or bbr.
    #[arg(long, default_value = default::CC, value_parser = CcAlgorithm::parse)]
    #[serde(default = "d_cc", deserialize_with = "de::cc")]
    pub cc: CcAlgorithm,
    /// RACK-TLP loss detection (RFC 8985) in the TCP engine; false leaves
    /// three-duplicate-ACK / RFC 6675 recovery, the model of thesis eq. 5.2.
    #[arg(long, default_value = default::RACK, action = clap::ArgAction::Set)]
    #[serde(default = "d_rack")]
    pub rack: bool,
}

impl Default for VoipParams {
    fn default() -> Self {
        VoipParams {
            rate: d_rate(),
            uplink: d_uplink(),
            rtt: d_rtt(),
            playout: d_playout(),
            loss: d_loss(),
            messages: d_messages(),
            size: d_size(),
            interval: d_interval(),
            lifetime: None,
            queue: d_queue(),
            cc: d_cc(),
            rack: d_rack(),
        }
    }
}

impl VoipParams {
    /// The call over `transport` with `seed`, or why these parameters make
    /// none.
    pub fn scenario(&self, transport: TransportKind, seed: u64) -> Result<VoipScenario, String> {
        if self.size == 0 || self.size > MAX_SIZE {
            return Err(format!(
                "size must be between 1 and {MAX_SIZE} bytes (one packet), not {}",
                self.size
            ));
        }
        if self.messages == 0 {
            return Err("messages must be at least 1".into());
        }
        if self.interval.is_zero() {
            return Err("the interval must be positive".into());
        }
        Ok(VoipScenario {
            rate_bps: self.rate,
            uplink_bps: self.uplink,
            rtt: self.rtt,
            playout: self.playout,
            loss: self.loss,
            queue_bytes: self.queue as usize,
            count: self.messages,
            size: self.size as usize,
            interval: self.interval,
            lifetime: self.lifetime,
            transport,
            seed,
            pcap: None,
            base: Config {
                cc: self.cc,
                rack: self.rack,
                ..Config::default()
            },
        })
    }
}

de::text_defaults! {
    d_rate: u64 = parse_rate[default::RATE];
    d_uplink: u64 = parse_rate[default::UPLINK];
    d_rtt: Duration = parse_duration[default::RTT];
    d_playout: Duration = parse_duration[default::PLAYOUT];
    d_loss: LossModel = parse_loss_model[default::LOSS];
    d_messages: u32 = de::number[default::MESSAGES];
    d_size: u64 = parse_size[default::SIZE];
    d_interval: Duration = parse_duration[default::INTERVAL];
    d_queue: u64 = parse_size[default::QUEUE];
    d_cc: CcAlgorithm = CcAlgorithm::parse[default::CC];
    d_rack: bool = de::number[default::RACK];
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        p: VoipParams,
    }

    #[test]
    fn the_cli_and_a_plan_share_defaults_and_units() {
        let cli = Cli::try_parse_from(["x"]).unwrap().p;
        let plan: VoipParams = toml::from_str("").unwrap();
        assert_eq!(cli, plan);
        assert_eq!(cli, VoipParams::default());
        let cli = Cli::try_parse_from(["x", "--rtt", "15ms", "--size", "200", "--rack", "false"])
            .unwrap()
            .p;
        let plan: VoipParams = toml::from_str("rtt = \"15ms\"\nsize = 200\nrack = false").unwrap();
        assert_eq!(cli, plan);
        assert_eq!(plan.rtt, Duration::from_millis(15));
        assert!(toml::from_str::<VoipParams>("rttt = \"15ms\"").is_err());
        let e = toml::from_str::<VoipParams>("rtt = \"15 parsecs\"").unwrap_err();
        assert!(e.to_string().contains("15 parsecs"), "{e}");
    }

    #[test]
    fn a_call_is_checked_before_it_runs() {
        let t = TransportKind::parse("tcp").unwrap();
        let p = VoipParams {
            size: 1401,
            ..VoipParams::default()
        };
        assert!(p.scenario(t, 1).unwrap_err().contains("1400"));
        let p = VoipParams {
            interval: Duration::ZERO,
            ..VoipParams::default()
        };
        assert!(p.scenario(t, 1).is_err());
        let sc = VoipParams::default().scenario(t, 7).unwrap();
        assert_eq!((sc.seed, sc.count, sc.size), (7, 3000, 160));
        let d = Config::default();
        assert_eq!((sc.base.cc, sc.base.rack), (d.cc, d.rack));
    }
}
