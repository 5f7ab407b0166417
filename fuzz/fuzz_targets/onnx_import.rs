//! ONNX decode, import and verify: any bytes give a model or an error, never a panic.
#![no_main]

mod common;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Ok(proto) = smelt_onnx::decode_model(data, &common::limits()) else {
        return;
    };
    if let Ok(imp) = smelt_onnx::import_model(&proto, None, true) {
        let _ = smelt_ir::verify::verify(&imp.model.graph);
        let _ = smelt_ir::text::print_graph(&imp.model.graph);
    }
});

libfuzzer_sys::fuzz_mutator!(|data: &mut [u8], size: usize, max_size: usize, seed: u32| {
    common::mutate(data, size, max_size, seed)
});
