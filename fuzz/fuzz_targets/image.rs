//! ImageDecoder on any bytes (JPEG, PNG, TIFF, BMP, PNM by their own decoders; WebP and
//! JPEG 2000 through codec crates), in the pixel format the length picks.
#![no_main]

mod common;

use smelt_ir::op::misc::{MiscOp, PixelFormat};
use smelt_ir::{DType, Data, Op, RunControl, Tensor};
use std::sync::Arc;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let pixel_format = [PixelFormat::Rgb, PixelFormat::Bgr, PixelFormat::Grayscale][data.len() % 3];
    let op = Op::Misc(MiscOp::ImageDecoder { pixel_format });
    // The fuzz limits: a declared image past 64 MiB of pixels is refused before decoding.
    let control = Arc::new(RunControl::new(common::limits(), None, None));
    let _entered = control.enter();
    let Ok(t) = Tensor::new(DType::U8, vec![data.len()], Data::U8(data.to_vec().into())) else {
        return;
    };
    if let Ok(out) = smelt_reference::eval_op(&op, &[Some(&t)], 1) {
        let img = &out[0];
        assert_eq!(img.rank(), 3);
        let want = if pixel_format == PixelFormat::Grayscale {
            1
        } else {
            3
        };
        assert_eq!(img.shape()[2], want);
    }
});
