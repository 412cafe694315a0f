#![no_main]
//! Peer bytes into the QUIC/UDP record parsers (hollywood-transport): as a
//! datagram, and as a stream cut at the positions the input chooses.

use hollywood_transport::record::{self, StreamParser};
use hollywood_transport::MAX_MESSAGE;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&cut, rest)) = data.split_first() else {
        return;
    };
    if let Ok((h, p)) = record::parse_datagram(rest) {
        assert_eq!(h.len, p.len());
    }
    let step = usize::from(cut).max(1);
    let mut parser = StreamParser::new();
    let mut out = Vec::new();
    for chunk in rest.chunks(step) {
        let _ = parser.push(chunk, &mut out);
        assert!(parser.buffered() <= MAX_MESSAGE + 32);
    }
    let _ = parser.finish();
    // Records never claim more payload than the input held (varints may
    // be non-minimal, so only sizes are compared).
    let payload: usize = out.iter().map(|(h, p)| {
        assert_eq!(h.len, p.len());
        p.len()
    }).sum();
    assert!(payload <= rest.len());
});
