//! Fuzz the COBS codec (hollywood-msg): decoding arbitrary bytes never
//! panics; what decodes re-encodes to something that decodes the same;
//! every input round-trips through encode → decode with no zero byte in
//! the encoding.
#![no_main]

use hollywood_msg::cobs::{decode, decode_into, encode, max_encoded_len};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(v) = decode(data) {
        assert!(v.len() <= data.len());
        assert_eq!(decode(&encode(&v)).unwrap(), v);
    }
    // A too-small output buffer is an error, not a panic.
    let mut small = vec![0u8; data.len() / 2];
    let _ = decode_into(data, &mut small);
    let e = encode(data);
    assert!(e.len() <= max_encoded_len(data.len()));
    assert!(!e.contains(&0));
    assert_eq!(decode(&e).unwrap(), data);
});
