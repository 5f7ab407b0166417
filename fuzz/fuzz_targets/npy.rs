//! The .npy reader: any bytes give a tensor or an error, and a tensor round-trips.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(t) = smelt_runtime::npy::decode(data) {
        if let Ok(b) = smelt_runtime::npy::encode(&t) {
            let back = smelt_runtime::npy::decode(&b).expect("an encoded tensor decodes");
            assert_eq!(back.shape(), t.shape());
        }
    }
});
