//! On-time delivery: the headline figure of every message experiment.
//!
//! A message is **on time** when it reaches the receiving application no
//! later than its generation time plus its lifetime (its deadline), **late**
//! when it arrives after that, and **never arrived** otherwise. The
//! **oracle** is what a transport would deliver on time that loses only the
//! packets the network dropped and adds no delay beyond the path's: a
//! message counts for the oracle unless the network (its loss model or a
//! scripted drop — not a queue the sender filled itself) dropped a packet
//! carrying the message's first transmission, and provided the path's
//! propagation delay plus the message's serialization at the bottleneck
//! fits in its lifetime. A message the transport never put on the wire
//! (dropped before sending) counts for the oracle, since the network never
//! had the chance to drop it.
//!
//! The oracle does not retransmit, so a retransmitting transport can beat
//! it when lifetimes exceed the time to repair a loss (about one RTT plus
//! the one-way delay).

use hollywood_tcp::Instant;
use std::fmt;
use std::time::Duration;

/// What happened to one message, against its deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Timeliness {
    /// Arrived no later than generation + lifetime.
    OnTime,
    /// Arrived after it.
    Late,
    /// Never delivered.
    NeverArrived,
}

impl Timeliness {
    /// Classify a message generated at `generated`, delivered at `arrival`
    /// (if at all), with `lifetime` (`None`: any arrival is on time).
    pub fn of(generated: Instant, arrival: Option<Instant>, lifetime: Option<Duration>) -> Self {
        match (arrival, lifetime) {
            (None, _) => Timeliness::NeverArrived,
            (Some(_), None) => Timeliness::OnTime,
            (Some(a), Some(l)) if a <= generated + l => Timeliness::OnTime,
            (Some(_), Some(_)) => Timeliness::Late,
        }
    }

    /// Name for CSV and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Timeliness::OnTime => "on_time",
            Timeliness::Late => "late",
            Timeliness::NeverArrived => "never_arrived",
        }
    }
}

/// On-time counts of one run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OnTime {
    /// Messages generated.
    pub messages: u64,
    /// Delivered by their deadline.
    pub on_time: u64,
    /// Delivered after it.
    pub late: u64,
    /// Never delivered.
    pub never_arrived: u64,
    /// What the oracle (see the module doc) delivers on time.
    pub oracle_on_time: u64,
}

impl OnTime {
    /// Count one message.
    pub fn add(&mut self, t: Timeliness, oracle_on_time: bool) {
        self.messages += 1;
        match t {
            Timeliness::OnTime => self.on_time += 1,
            Timeliness::Late => self.late += 1,
            Timeliness::NeverArrived => self.never_arrived += 1,
        }
        self.oracle_on_time += oracle_on_time as u64;
    }

    /// Count every generated message of a run: `generated` and `arrival`
    /// per message id, `oracle(id)` whether the oracle delivers it in time.
    pub fn of_run(
        generated: &[Option<Instant>],
        arrival: &[Option<Instant>],
        lifetime: Option<Duration>,
        oracle: impl Fn(usize) -> bool,
    ) -> OnTime {
        let mut o = OnTime::default();
        for (id, (g, a)) in generated.iter().zip(arrival).enumerate() {
            if let Some(g) = *g {
                o.add(Timeliness::of(g, *a, lifetime), oracle(id));
            }
        }
        o
    }

    /// `on_time / oracle_on_time` (1.0 when the oracle delivers nothing).
    pub fn of_oracle(&self) -> f64 {
        if self.oracle_on_time == 0 {
            1.0
        } else {
            self.on_time as f64 / self.oracle_on_time as f64
        }
    }

    /// `on_time / messages`.
    pub fn fraction(&self) -> f64 {
        if self.messages == 0 {
            0.0
        } else {
            self.on_time as f64 / self.messages as f64
        }
    }
}

/// The headline: `on time: N of M (oracle K)`.
impl fmt::Display for OnTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "on time: {} of {} (oracle {}); late {}, never arrived {}",
            self.on_time, self.messages, self.oracle_on_time, self.late, self.never_arrived
        )
    }
}

/// Whether the oracle delivers a message of `wire_bytes` (frame plus
/// IP/TCP headers) in time: propagation `one_way` plus serialization at
/// `rate_bps` (0 = unlimited) within `lifetime`.
pub fn oracle_in_time(
    one_way: Duration,
    rate_bps: u64,
    wire_bytes: usize,
    lifetime: Option<Duration>,
) -> bool {
    let Some(l) = lifetime else { return true };
    let ser = (wire_bytes as u64 * 8)
        .saturating_mul(1_000_000_000)
        .checked_div(rate_bps)
        .map_or(Duration::ZERO, Duration::from_nanos);
    one_way + ser <= l
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification_and_counts() {
        let g = Instant::from_nanos(1_000_000_000);
        let l = Some(Duration::from_millis(100));
        let ms = |n| g + Duration::from_millis(n);
        assert_eq!(Timeliness::of(g, Some(ms(100)), l), Timeliness::OnTime);
        assert_eq!(Timeliness::of(g, Some(ms(101)), l), Timeliness::Late);
        assert_eq!(Timeliness::of(g, None, l), Timeliness::NeverArrived);
        assert_eq!(Timeliness::of(g, Some(ms(9999)), None), Timeliness::OnTime);
        let mut o = OnTime::default();
        o.add(Timeliness::OnTime, true);
        o.add(Timeliness::Late, true);
        o.add(Timeliness::NeverArrived, false);
        assert_eq!(
            o.to_string(),
            "on time: 1 of 3 (oracle 2); late 1, never arrived 1"
        );
        assert_eq!(o.of_oracle(), 0.5);
    }

    #[test]
    fn oracle_needs_propagation_and_serialization_within_the_lifetime() {
        let l = Some(Duration::from_millis(50));
        // 45 ms one way + 1500 B at 1 Mb/s (12 ms) > 50 ms.
        assert!(!oracle_in_time(
            Duration::from_millis(45),
            1_000_000,
            1500,
            l
        ));
        assert!(oracle_in_time(
            Duration::from_millis(45),
            8_000_000,
            1500,
            l
        ));
        assert!(oracle_in_time(Duration::from_millis(45), 0, 1500, l));
        assert!(oracle_in_time(Duration::from_secs(9), 1, 1500, None));
    }
}
