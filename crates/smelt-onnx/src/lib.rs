//! The ONNX frontend: decodes `.onnx` files (protobuf messages written from the ONNX IR
//! spec) and imports them into smelt's IR. This is the only crate that knows ONNX
//! attribute names and opset differences.

pub mod external;
pub mod import;
pub mod proto;
pub mod qdq;
pub mod tensor;

pub use import::{
    decode_model, import_model, load_model, load_model_lenient, load_model_with, Imported,
};
pub use tensor::{decode_map, decode_tensor, decode_type, decode_value_file};
