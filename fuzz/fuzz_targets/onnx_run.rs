//! ONNX decode, import, compile (opt level 0 or 1, from the input's length) and a run on
//! seeded random inputs, within tight limits and a 1 s deadline.
#![no_main]

mod common;

use smelt_runtime::{Session, SessionOptions};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let limits = common::limits();
    let Ok(proto) = smelt_onnx::decode_model(data, &limits) else {
        return;
    };
    let Ok(imp) = smelt_onnx::import_model(&proto, None, false) else {
        return;
    };
    let options = SessionOptions {
        opt_level: (data.len() % 2) as u8,
        threads: 1,
        limits,
        ..Default::default()
    };
    let Ok(session) = Session::from_model_with(imp.model, &options) else {
        return;
    };
    let control = session.run_control(&Default::default());
    let inputs = {
        let _entered = control.enter();
        smelt_fuzz::inputs::random_inputs(&session.inputs(), data.len() as u64)
    };
    if let Ok(inputs) = inputs {
        let _ = session.run(inputs);
    }
});

libfuzzer_sys::fuzz_mutator!(|data: &mut [u8], size: usize, max_size: usize, seed: u32| {
    common::mutate(data, size, max_size, seed)
});
