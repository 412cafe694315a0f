//! COBS properties: byte-identical to the `cobs` crate, round trip, and
//! arbitrary input never panics.

use hollywood_msg::cobs::{decode, decode_into, encode, encode_into, max_encoded_len};
use proptest::prelude::*;

/// Bytes with a tunable share of zeros and long non-zero runs (to cross
/// the 254-byte block boundary often).
fn bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..2000),
        prop::collection::vec(prop_oneof![9 => 1u8..=255, 1 => Just(0u8)], 0..2000),
        prop::collection::vec(prop_oneof![1 => 1u8..=255, 1 => Just(0u8)], 0..600),
        (0usize..4, 240usize..800).prop_map(|(z, n)| {
            let mut v = vec![0x5a; n];
            for i in 0..z {
                v.insert((i * 254).min(v.len()), 0);
            }
            v
        }),
        // Zero-free multiples of 254, with an optional zero at either end.
        (1usize..5, 0u8..3).prop_map(|(k, z)| {
            let mut v = vec![0xa5; 254 * k];
            match z {
                1 => v.insert(0, 0),
                2 => v.push(0),
                _ => {}
            }
            v
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn identical_to_cobs_crate(data in bytes()) {
        let ours = encode(&data);
        if !data.is_empty() {
            let mut reference = vec![0u8; max_encoded_len(data.len())];
            let n = cobs::encode(&data, &mut reference);
            prop_assert_eq!(&ours, &reference[..n]);
            // `encode_vec` differs only by cutting the trailing empty block
            // of zero-free inputs whose length is a multiple of 254.
            let v = cobs::encode_vec(&data);
            if !data.contains(&0) && data.len() % 254 == 0 {
                prop_assert_eq!(&ours[..ours.len() - 1], &v[..]);
            } else {
                prop_assert_eq!(&ours, &v);
            }
        }
        prop_assert!(!ours.contains(&0));
        prop_assert!(ours.len() <= max_encoded_len(data.len()));
        prop_assert_eq!(decode(&ours).unwrap(), data.clone());
        prop_assert_eq!(cobs::decode_vec(&ours).unwrap(), data.clone());
        // Slice API, exact-size buffers.
        let mut buf = vec![0u8; max_encoded_len(data.len())];
        let n = encode_into(&data, &mut buf).unwrap();
        prop_assert_eq!(&buf[..n], &ours[..]);
        let mut out = vec![0u8; n];
        let m = decode_into(&buf[..n], &mut out).unwrap();
        prop_assert_eq!(&out[..m], &data[..]);
    }

    #[test]
    fn decode_arbitrary_never_panics(data in prop::collection::vec(any::<u8>(), 0..1200), cap in 0usize..1300) {
        let mut out = vec![0u8; cap];
        let r = decode_into(&data, &mut out);
        if let Ok(n) = r {
            prop_assert!(n <= data.len());
            prop_assert!(!data.contains(&0));
            // Whatever decodes re-encodes to something that decodes the same.
            prop_assert_eq!(decode(&encode(&out[..n])).unwrap(), out[..n].to_vec());
            // And agrees with the reference decoder (which refuses the
            // empty input; ours decodes it to nothing).
            if !data.is_empty() {
                prop_assert_eq!(cobs::decode_vec(&data).ok(), Some(out[..n].to_vec()));
            }
        }
        if !data.contains(&0) && cap >= data.len() {
            // Zero-free input into a big enough buffer fails only on a
            // truncated block, which the reference decoder also refuses.
            if r.is_err() {
                prop_assert!(cobs::decode_vec(&data).is_err());
            }
        }
    }
}
