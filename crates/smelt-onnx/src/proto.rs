//! Hand-written ONNX protobuf message definitions (prost derive).
//!
//! Field numbers and types follow the ONNX IR specification. Enum-typed
//! fields are stored as plain `i32` values; the named codes live in the
//! constant modules next to each message (for example
//! [`tensor_proto::data_type`]) and in the helper enums [`DataType`] and
//! [`AttributeType`].
//!
//! ONNX uses proto2 syntax; here scalars follow prost's proto3 semantics
//! (absent == default) and nested messages are `Option`al. Repeated numeric
//! fields that ONNX does not declare `packed` are encoded unpacked; decoding
//! accepts either form.

/// Top-level ONNX model container.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ModelProto {
    /// IR version this model conforms to.
    #[prost(int64, tag = "1")]
    pub ir_version: i64,
    /// Operator sets imported by the model.
    #[prost(message, repeated, tag = "8")]
    pub opset_import: Vec<OperatorSetIdProto>,
    /// Name of the tool that produced the model.
    #[prost(string, tag = "2")]
    pub producer_name: String,
    /// Version of the producing tool.
    #[prost(string, tag = "3")]
    pub producer_version: String,
    /// Reverse-DNS domain of the model.
    #[prost(string, tag = "4")]
    pub domain: String,
    /// Version of the model itself.
    #[prost(int64, tag = "5")]
    pub model_version: i64,
    /// Human-readable documentation.
    #[prost(string, tag = "6")]
    pub doc_string: String,
    /// The main computation graph.
    #[prost(message, optional, tag = "7")]
    pub graph: Option<GraphProto>,
    /// Named metadata key/value pairs.
    #[prost(message, repeated, tag = "14")]
    pub metadata_props: Vec<StringStringEntryProto>,
    /// Training information (IR v7+).
    #[prost(message, repeated, tag = "20")]
    pub training_info: Vec<TrainingInfoProto>,
    /// Model-local function definitions.
    #[prost(message, repeated, tag = "25")]
    pub functions: Vec<FunctionProto>,
}

/// An imported operator set: domain plus version.
#[derive(Clone, PartialEq, prost::Message)]
pub struct OperatorSetIdProto {
    /// Operator set domain; empty means the default `ai.onnx` domain.
    #[prost(string, tag = "1")]
    pub domain: String,
    /// Operator set version.
    #[prost(int64, tag = "2")]
    pub version: i64,
}

/// A string key/value pair.
#[derive(Clone, PartialEq, prost::Message)]
pub struct StringStringEntryProto {
    /// Entry key.
    #[prost(string, tag = "1")]
    pub key: String,
    /// Entry value.
    #[prost(string, tag = "2")]
    pub value: String,
}

/// Quantization annotation for a tensor in a graph.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TensorAnnotation {
    /// Name of the annotated tensor.
    #[prost(string, tag = "1")]
    pub tensor_name: String,
    /// Map from quantization parameter keys to tensor names.
    #[prost(message, repeated, tag = "2")]
    pub quant_parameter_tensor_names: Vec<StringStringEntryProto>,
}

/// Training information attached to a model.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TrainingInfoProto {
    /// Graph run once to initialize training state.
    #[prost(message, optional, tag = "1")]
    pub initialization: Option<GraphProto>,
    /// Graph describing one training step.
    #[prost(message, optional, tag = "2")]
    pub algorithm: Option<GraphProto>,
    /// Bindings from initialization outputs to initializers.
    #[prost(message, repeated, tag = "3")]
    pub initialization_binding: Vec<StringStringEntryProto>,
    /// Bindings from algorithm outputs to initializers.
    #[prost(message, repeated, tag = "4")]
    pub update_binding: Vec<StringStringEntryProto>,
}

/// A computation graph: nodes, initializers, inputs and outputs.
#[derive(Clone, PartialEq, prost::Message)]
pub struct GraphProto {
    /// Nodes in topological order.
    #[prost(message, repeated, tag = "1")]
    pub node: Vec<NodeProto>,
    /// Graph name.
    #[prost(string, tag = "2")]
    pub name: String,
    /// Constant tensors (weights).
    #[prost(message, repeated, tag = "5")]
    pub initializer: Vec<TensorProto>,
    /// Sparse constant tensors.
    #[prost(message, repeated, tag = "15")]
    pub sparse_initializer: Vec<SparseTensorProto>,
    /// Human-readable documentation.
    #[prost(string, tag = "10")]
    pub doc_string: String,
    /// Graph inputs.
    #[prost(message, repeated, tag = "11")]
    pub input: Vec<ValueInfoProto>,
    /// Graph outputs.
    #[prost(message, repeated, tag = "12")]
    pub output: Vec<ValueInfoProto>,
    /// Type/shape information for intermediate values.
    #[prost(message, repeated, tag = "13")]
    pub value_info: Vec<ValueInfoProto>,
    /// Quantization annotations.
    #[prost(message, repeated, tag = "14")]
    pub quantization_annotation: Vec<TensorAnnotation>,
    /// Named metadata key/value pairs.
    #[prost(message, repeated, tag = "16")]
    pub metadata_props: Vec<StringStringEntryProto>,
}

/// A single operator invocation in a graph.
#[derive(Clone, PartialEq, prost::Message)]
pub struct NodeProto {
    /// Input value names (empty string = omitted optional input).
    #[prost(string, repeated, tag = "1")]
    pub input: Vec<String>,
    /// Output value names.
    #[prost(string, repeated, tag = "2")]
    pub output: Vec<String>,
    /// Node name.
    #[prost(string, tag = "3")]
    pub name: String,
    /// Operator type, e.g. `Conv`.
    #[prost(string, tag = "4")]
    pub op_type: String,
    /// Operator domain; empty means `ai.onnx`.
    #[prost(string, tag = "7")]
    pub domain: String,
    /// Overload identifier for function-based operators.
    #[prost(string, tag = "8")]
    pub overload: String,
    /// Operator attributes.
    #[prost(message, repeated, tag = "5")]
    pub attribute: Vec<AttributeProto>,
    /// Human-readable documentation.
    #[prost(string, tag = "6")]
    pub doc_string: String,
    /// Named metadata key/value pairs.
    #[prost(message, repeated, tag = "9")]
    pub metadata_props: Vec<StringStringEntryProto>,
}

/// A named attribute value attached to a node or function.
#[derive(Clone, PartialEq, prost::Message)]
pub struct AttributeProto {
    /// Attribute name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Name of the parent function attribute this one refers to.
    #[prost(string, tag = "21")]
    pub ref_attr_name: String,
    /// Human-readable documentation.
    #[prost(string, tag = "13")]
    pub doc_string: String,
    /// Attribute type code; see [`attribute_proto::attribute_type`].
    #[prost(int32, tag = "20")]
    pub r#type: i32,
    /// Float value.
    #[prost(float, tag = "2")]
    pub f: f32,
    /// Integer value.
    #[prost(int64, tag = "3")]
    pub i: i64,
    /// Bytes/string value.
    #[prost(bytes = "vec", tag = "4")]
    pub s: Vec<u8>,
    /// Tensor value.
    #[prost(message, optional, tag = "5")]
    pub t: Option<TensorProto>,
    /// Graph value.
    #[prost(message, optional, tag = "6")]
    pub g: Option<GraphProto>,
    /// Sparse tensor value.
    #[prost(message, optional, tag = "22")]
    pub sparse_tensor: Option<SparseTensorProto>,
    /// Type value.
    #[prost(message, optional, tag = "14")]
    pub tp: Option<TypeProto>,
    /// List of floats.
    #[prost(float, repeated, packed = "false", tag = "7")]
    pub floats: Vec<f32>,
    /// List of integers.
    #[prost(int64, repeated, packed = "false", tag = "8")]
    pub ints: Vec<i64>,
    /// List of byte strings.
    #[prost(bytes = "vec", repeated, tag = "9")]
    pub strings: Vec<Vec<u8>>,
    /// List of tensors.
    #[prost(message, repeated, tag = "10")]
    pub tensors: Vec<TensorProto>,
    /// List of graphs.
    #[prost(message, repeated, tag = "11")]
    pub graphs: Vec<GraphProto>,
    /// List of sparse tensors.
    #[prost(message, repeated, tag = "23")]
    pub sparse_tensors: Vec<SparseTensorProto>,
    /// List of types.
    #[prost(message, repeated, tag = "15")]
    pub type_protos: Vec<TypeProto>,
}

/// Constants belonging to [`AttributeProto`].
pub mod attribute_proto {
    /// `AttributeProto.AttributeType` codes.
    pub mod attribute_type {
        /// Unset type.
        pub const UNDEFINED: i32 = 0;
        /// Single float (`f`).
        pub const FLOAT: i32 = 1;
        /// Single integer (`i`).
        pub const INT: i32 = 2;
        /// Single string (`s`).
        pub const STRING: i32 = 3;
        /// Single tensor (`t`).
        pub const TENSOR: i32 = 4;
        /// Single graph (`g`).
        pub const GRAPH: i32 = 5;
        /// Single sparse tensor (`sparse_tensor`).
        pub const SPARSE_TENSOR: i32 = 11;
        /// Single type (`tp`).
        pub const TYPE_PROTO: i32 = 13;
        /// Float list (`floats`).
        pub const FLOATS: i32 = 6;
        /// Integer list (`ints`).
        pub const INTS: i32 = 7;
        /// String list (`strings`).
        pub const STRINGS: i32 = 8;
        /// Tensor list (`tensors`).
        pub const TENSORS: i32 = 9;
        /// Graph list (`graphs`).
        pub const GRAPHS: i32 = 10;
        /// Sparse tensor list (`sparse_tensors`).
        pub const SPARSE_TENSORS: i32 = 12;
        /// Type list (`type_protos`).
        pub const TYPE_PROTOS: i32 = 14;
    }
}

/// `AttributeProto.AttributeType` as a Rust enum.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum AttributeType {
    /// Unset type.
    Undefined = 0,
    /// Single float.
    Float = 1,
    /// Single integer.
    Int = 2,
    /// Single string.
    String = 3,
    /// Single tensor.
    Tensor = 4,
    /// Single graph.
    Graph = 5,
    /// Float list.
    Floats = 6,
    /// Integer list.
    Ints = 7,
    /// String list.
    Strings = 8,
    /// Tensor list.
    Tensors = 9,
    /// Graph list.
    Graphs = 10,
    /// Single sparse tensor.
    SparseTensor = 11,
    /// Sparse tensor list.
    SparseTensors = 12,
    /// Single type.
    TypeProto = 13,
    /// Type list.
    TypeProtos = 14,
}

impl AttributeType {
    /// Converts a raw code to an [`AttributeType`], if known.
    pub fn from_i32(code: i32) -> Option<Self> {
        use AttributeType::*;
        Some(match code {
            0 => Undefined,
            1 => Float,
            2 => Int,
            3 => String,
            4 => Tensor,
            5 => Graph,
            6 => Floats,
            7 => Ints,
            8 => Strings,
            9 => Tensors,
            10 => Graphs,
            11 => SparseTensor,
            12 => SparseTensors,
            13 => TypeProto,
            14 => TypeProtos,
            _ => return None,
        })
    }
}

/// Name, type and documentation of a graph value.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ValueInfoProto {
    /// Value name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Value type.
    #[prost(message, optional, tag = "2")]
    pub r#type: Option<TypeProto>,
    /// Human-readable documentation.
    #[prost(string, tag = "3")]
    pub doc_string: String,
    /// Named metadata key/value pairs.
    #[prost(message, repeated, tag = "4")]
    pub metadata_props: Vec<StringStringEntryProto>,
}

/// Type of a value: tensor, sequence, map, optional or sparse tensor.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TypeProto {
    /// Type-specific payload.
    #[prost(oneof = "type_proto::Value", tags = "1, 4, 5, 9, 8")]
    pub value: Option<type_proto::Value>,
    /// Optional type denotation.
    #[prost(string, tag = "6")]
    pub denotation: String,
}

/// Nested messages of [`TypeProto`].
pub mod type_proto {
    use super::{TensorShapeProto, TypeProto};

    /// Dense tensor type.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Tensor {
        /// Element data type code; see [`super::tensor_proto::data_type`].
        #[prost(int32, tag = "1")]
        pub elem_type: i32,
        /// Tensor shape, if known.
        #[prost(message, optional, tag = "2")]
        pub shape: Option<TensorShapeProto>,
    }

    /// Sequence type.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Sequence {
        /// Type of the sequence elements.
        #[prost(message, optional, boxed, tag = "1")]
        pub elem_type: Option<Box<TypeProto>>,
    }

    /// Map type.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Map {
        /// Key data type code (an integral type or string).
        #[prost(int32, tag = "1")]
        pub key_type: i32,
        /// Type of the map values.
        #[prost(message, optional, boxed, tag = "2")]
        pub value_type: Option<Box<TypeProto>>,
    }

    /// Optional type.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Optional {
        /// Type of the wrapped element.
        #[prost(message, optional, boxed, tag = "1")]
        pub elem_type: Option<Box<TypeProto>>,
    }

    /// Sparse tensor type.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct SparseTensor {
        /// Element data type code; see [`super::tensor_proto::data_type`].
        #[prost(int32, tag = "1")]
        pub elem_type: i32,
        /// Tensor shape, if known.
        #[prost(message, optional, tag = "2")]
        pub shape: Option<TensorShapeProto>,
    }

    /// The `TypeProto.value` oneof.
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Value {
        /// Dense tensor type.
        #[prost(message, tag = "1")]
        TensorType(Tensor),
        /// Sequence type.
        #[prost(message, tag = "4")]
        SequenceType(Sequence),
        /// Map type.
        #[prost(message, tag = "5")]
        MapType(Map),
        /// Optional type.
        #[prost(message, tag = "9")]
        OptionalType(Optional),
        /// Sparse tensor type.
        #[prost(message, tag = "8")]
        SparseTensorType(SparseTensor),
    }
}

/// Tensor shape: a list of (possibly symbolic) dimensions.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TensorShapeProto {
    /// Dimensions, outermost first.
    #[prost(message, repeated, tag = "1")]
    pub dim: Vec<tensor_shape_proto::Dimension>,
}

/// Nested messages of [`TensorShapeProto`].
pub mod tensor_shape_proto {
    /// A single dimension: concrete size, symbolic name, or unknown.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Dimension {
        /// Dimension value; `None` means unknown.
        #[prost(oneof = "dimension::Value", tags = "1, 2")]
        pub value: Option<dimension::Value>,
        /// Optional dimension denotation.
        #[prost(string, tag = "3")]
        pub denotation: String,
    }

    /// Nested types of [`Dimension`].
    pub mod dimension {
        /// The `Dimension.value` oneof.
        #[derive(Clone, PartialEq, Eq, Hash, prost::Oneof)]
        pub enum Value {
            /// Concrete dimension size.
            #[prost(int64, tag = "1")]
            DimValue(i64),
            /// Symbolic dimension name.
            #[prost(string, tag = "2")]
            DimParam(String),
        }
    }
}

/// A serialized tensor value.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TensorProto {
    /// Tensor shape.
    #[prost(int64, repeated, packed = "false", tag = "1")]
    pub dims: Vec<i64>,
    /// Element data type code; see [`tensor_proto::data_type`].
    #[prost(int32, tag = "2")]
    pub data_type: i32,
    /// Segment information for chunked tensors.
    #[prost(message, optional, tag = "3")]
    pub segment: Option<tensor_proto::Segment>,
    /// Float data (FLOAT, COMPLEX64).
    #[prost(float, repeated, tag = "4")]
    pub float_data: Vec<f32>,
    /// Int32 data (INT32 and narrower / 16-bit float types).
    #[prost(int32, repeated, tag = "5")]
    pub int32_data: Vec<i32>,
    /// String data (STRING).
    #[prost(bytes = "vec", repeated, tag = "6")]
    pub string_data: Vec<Vec<u8>>,
    /// Int64 data (INT64).
    #[prost(int64, repeated, tag = "7")]
    pub int64_data: Vec<i64>,
    /// Tensor name.
    #[prost(string, tag = "8")]
    pub name: String,
    /// Human-readable documentation.
    #[prost(string, tag = "12")]
    pub doc_string: String,
    /// Raw little-endian element bytes.
    #[prost(bytes = "vec", tag = "9")]
    pub raw_data: Vec<u8>,
    /// External data location key/value pairs (`location`, `offset`, `length`, ...).
    #[prost(message, repeated, tag = "13")]
    pub external_data: Vec<StringStringEntryProto>,
    /// Data location code; see [`tensor_proto::data_location`].
    #[prost(int32, tag = "14")]
    pub data_location: i32,
    /// Double data (DOUBLE, COMPLEX128).
    #[prost(double, repeated, tag = "10")]
    pub double_data: Vec<f64>,
    /// Uint64 data (UINT32, UINT64).
    #[prost(uint64, repeated, tag = "11")]
    pub uint64_data: Vec<u64>,
    /// Named metadata key/value pairs.
    #[prost(message, repeated, tag = "16")]
    pub metadata_props: Vec<StringStringEntryProto>,
}

/// Nested messages and constants of [`TensorProto`].
pub mod tensor_proto {
    /// A segment `[begin, end)` of a chunked tensor.
    #[derive(Clone, Copy, PartialEq, Eq, Hash, prost::Message)]
    pub struct Segment {
        /// Segment start index.
        #[prost(int64, tag = "1")]
        pub begin: i64,
        /// Segment end index (exclusive).
        #[prost(int64, tag = "2")]
        pub end: i64,
    }

    /// `TensorProto.DataType` codes.
    pub mod data_type {
        /// Unset type.
        pub const UNDEFINED: i32 = 0;
        /// 32-bit float.
        pub const FLOAT: i32 = 1;
        /// Unsigned 8-bit integer.
        pub const UINT8: i32 = 2;
        /// Signed 8-bit integer.
        pub const INT8: i32 = 3;
        /// Unsigned 16-bit integer.
        pub const UINT16: i32 = 4;
        /// Signed 16-bit integer.
        pub const INT16: i32 = 5;
        /// Signed 32-bit integer.
        pub const INT32: i32 = 6;
        /// Signed 64-bit integer.
        pub const INT64: i32 = 7;
        /// Byte string.
        pub const STRING: i32 = 8;
        /// Boolean.
        pub const BOOL: i32 = 9;
        /// IEEE 754 half precision float.
        pub const FLOAT16: i32 = 10;
        /// 64-bit float.
        pub const DOUBLE: i32 = 11;
        /// Unsigned 32-bit integer.
        pub const UINT32: i32 = 12;
        /// Unsigned 64-bit integer.
        pub const UINT64: i32 = 13;
        /// Complex with 32-bit float parts.
        pub const COMPLEX64: i32 = 14;
        /// Complex with 64-bit float parts.
        pub const COMPLEX128: i32 = 15;
        /// Brain float 16.
        pub const BFLOAT16: i32 = 16;
        /// 8-bit float E4M3 (finite only).
        pub const FLOAT8E4M3FN: i32 = 17;
        /// 8-bit float E4M3 (finite only, no negative zero).
        pub const FLOAT8E4M3FNUZ: i32 = 18;
        /// 8-bit float E5M2.
        pub const FLOAT8E5M2: i32 = 19;
        /// 8-bit float E5M2 (finite only, no negative zero).
        pub const FLOAT8E5M2FNUZ: i32 = 20;
        /// Unsigned 4-bit integer.
        pub const UINT4: i32 = 21;
        /// Signed 4-bit integer.
        pub const INT4: i32 = 22;
        /// 4-bit float E2M1.
        pub const FLOAT4E2M1: i32 = 23;
        /// 8-bit float E8M0 (exponent only).
        pub const FLOAT8E8M0: i32 = 24;
        /// Unsigned 2-bit integer.
        pub const UINT2: i32 = 25;
        /// Signed 2-bit integer.
        pub const INT2: i32 = 26;
    }

    /// `TensorProto.DataLocation` codes.
    pub mod data_location {
        /// Data stored inline in the tensor message.
        pub const DEFAULT: i32 = 0;
        /// Data stored in an external file (see `external_data`).
        pub const EXTERNAL: i32 = 1;
    }
}

/// `TensorProto.DataType` as a Rust enum.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum DataType {
    /// Unset type.
    Undefined = 0,
    /// 32-bit float.
    Float = 1,
    /// Unsigned 8-bit integer.
    Uint8 = 2,
    /// Signed 8-bit integer.
    Int8 = 3,
    /// Unsigned 16-bit integer.
    Uint16 = 4,
    /// Signed 16-bit integer.
    Int16 = 5,
    /// Signed 32-bit integer.
    Int32 = 6,
    /// Signed 64-bit integer.
    Int64 = 7,
    /// Byte string.
    String = 8,
    /// Boolean.
    Bool = 9,
    /// IEEE 754 half precision float.
    Float16 = 10,
    /// 64-bit float.
    Double = 11,
    /// Unsigned 32-bit integer.
    Uint32 = 12,
    /// Unsigned 64-bit integer.
    Uint64 = 13,
    /// Complex with 32-bit float parts.
    Complex64 = 14,
    /// Complex with 64-bit float parts.
    Complex128 = 15,
    /// Brain float 16.
    Bfloat16 = 16,
    /// 8-bit float E4M3 (finite only).
    Float8e4m3fn = 17,
    /// 8-bit float E4M3 (finite only, no negative zero).
    Float8e4m3fnuz = 18,
    /// 8-bit float E5M2.
    Float8e5m2 = 19,
    /// 8-bit float E5M2 (finite only, no negative zero).
    Float8e5m2fnuz = 20,
    /// Unsigned 4-bit integer.
    Uint4 = 21,
    /// Signed 4-bit integer.
    Int4 = 22,
    /// 4-bit float E2M1.
    Float4e2m1 = 23,
    /// 8-bit float E8M0 (exponent only).
    Float8e8m0 = 24,
    /// Unsigned 2-bit integer.
    Uint2 = 25,
    /// Signed 2-bit integer.
    Int2 = 26,
}

impl DataType {
    /// Converts a raw code to a [`DataType`], if known.
    pub fn from_i32(code: i32) -> Option<Self> {
        use DataType::*;
        Some(match code {
            0 => Undefined,
            1 => Float,
            2 => Uint8,
            3 => Int8,
            4 => Uint16,
            5 => Int16,
            6 => Int32,
            7 => Int64,
            8 => String,
            9 => Bool,
            10 => Float16,
            11 => Double,
            12 => Uint32,
            13 => Uint64,
            14 => Complex64,
            15 => Complex128,
            16 => Bfloat16,
            17 => Float8e4m3fn,
            18 => Float8e4m3fnuz,
            19 => Float8e5m2,
            20 => Float8e5m2fnuz,
            21 => Uint4,
            22 => Int4,
            23 => Float4e2m1,
            24 => Float8e8m0,
            25 => Uint2,
            26 => Int2,
            _ => return None,
        })
    }

    /// The ONNX spelling of this type, e.g. `"FLOAT"`.
    pub fn name(self) -> &'static str {
        use DataType::*;
        match self {
            Undefined => "UNDEFINED",
            Float => "FLOAT",
            Uint8 => "UINT8",
            Int8 => "INT8",
            Uint16 => "UINT16",
            Int16 => "INT16",
            Int32 => "INT32",
            Int64 => "INT64",
            String => "STRING",
            Bool => "BOOL",
            Float16 => "FLOAT16",
            Double => "DOUBLE",
            Uint32 => "UINT32",
            Uint64 => "UINT64",
            Complex64 => "COMPLEX64",
            Complex128 => "COMPLEX128",
            Bfloat16 => "BFLOAT16",
            Float8e4m3fn => "FLOAT8E4M3FN",
            Float8e4m3fnuz => "FLOAT8E4M3FNUZ",
            Float8e5m2 => "FLOAT8E5M2",
            Float8e5m2fnuz => "FLOAT8E5M2FNUZ",
            Uint4 => "UINT4",
            Int4 => "INT4",
            Float4e2m1 => "FLOAT4E2M1",
            Float8e8m0 => "FLOAT8E8M0",
            Uint2 => "UINT2",
            Int2 => "INT2",
        }
    }
}

/// A sparse tensor in COO format.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SparseTensorProto {
    /// Non-default values (1-D tensor of length NNZ); also carries the name.
    #[prost(message, optional, tag = "1")]
    pub values: Option<TensorProto>,
    /// INT64 indices, shape `[NNZ, rank]` or linearized `[NNZ]`.
    #[prost(message, optional, tag = "2")]
    pub indices: Option<TensorProto>,
    /// Dense shape of the tensor.
    #[prost(int64, repeated, packed = "false", tag = "3")]
    pub dims: Vec<i64>,
}

/// A serialized sequence value (used by test data and sequence ops).
#[derive(Clone, PartialEq, prost::Message)]
pub struct SequenceProto {
    /// Value name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Element kind code; see [`sequence_proto::data_type`].
    #[prost(int32, tag = "2")]
    pub elem_type: i32,
    /// Tensor elements.
    #[prost(message, repeated, tag = "3")]
    pub tensor_values: Vec<TensorProto>,
    /// Sparse tensor elements.
    #[prost(message, repeated, tag = "4")]
    pub sparse_tensor_values: Vec<SparseTensorProto>,
    /// Sequence elements.
    #[prost(message, repeated, tag = "5")]
    pub sequence_values: Vec<SequenceProto>,
    /// Map elements.
    #[prost(message, repeated, tag = "6")]
    pub map_values: Vec<MapProto>,
    /// Optional elements.
    #[prost(message, repeated, tag = "7")]
    pub optional_values: Vec<OptionalProto>,
}

/// Constants belonging to [`SequenceProto`].
pub mod sequence_proto {
    /// `SequenceProto.DataType` element kind codes.
    pub mod data_type {
        /// Unset kind.
        pub const UNDEFINED: i32 = 0;
        /// Elements are tensors.
        pub const TENSOR: i32 = 1;
        /// Elements are sparse tensors.
        pub const SPARSE_TENSOR: i32 = 2;
        /// Elements are sequences.
        pub const SEQUENCE: i32 = 3;
        /// Elements are maps.
        pub const MAP: i32 = 4;
        /// Elements are optionals.
        pub const OPTIONAL: i32 = 5;
    }
}

/// A serialized map value.
#[derive(Clone, PartialEq, prost::Message)]
pub struct MapProto {
    /// Value name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Key data type code; see [`tensor_proto::data_type`].
    #[prost(int32, tag = "2")]
    pub key_type: i32,
    /// Integral keys.
    #[prost(int64, repeated, packed = "false", tag = "3")]
    pub keys: Vec<i64>,
    /// String keys.
    #[prost(bytes = "vec", repeated, tag = "4")]
    pub string_keys: Vec<Vec<u8>>,
    /// Values, in key order.
    #[prost(message, optional, tag = "5")]
    pub values: Option<SequenceProto>,
}

/// A serialized optional value.
#[derive(Clone, PartialEq, prost::Message)]
pub struct OptionalProto {
    /// Value name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Element kind code; see [`optional_proto::data_type`].
    #[prost(int32, tag = "2")]
    pub elem_type: i32,
    /// Tensor payload.
    #[prost(message, optional, tag = "3")]
    pub tensor_value: Option<TensorProto>,
    /// Sparse tensor payload.
    #[prost(message, optional, tag = "4")]
    pub sparse_tensor_value: Option<SparseTensorProto>,
    /// Sequence payload.
    #[prost(message, optional, tag = "5")]
    pub sequence_value: Option<SequenceProto>,
    /// Map payload.
    #[prost(message, optional, tag = "6")]
    pub map_value: Option<MapProto>,
    /// Nested optional payload.
    #[prost(message, optional, boxed, tag = "7")]
    pub optional_value: Option<Box<OptionalProto>>,
}

/// Constants belonging to [`OptionalProto`].
pub mod optional_proto {
    /// `OptionalProto.DataType` element kind codes.
    pub mod data_type {
        /// Unset kind (an empty optional).
        pub const UNDEFINED: i32 = 0;
        /// Payload is a tensor.
        pub const TENSOR: i32 = 1;
        /// Payload is a sparse tensor.
        pub const SPARSE_TENSOR: i32 = 2;
        /// Payload is a sequence.
        pub const SEQUENCE: i32 = 3;
        /// Payload is a map.
        pub const MAP: i32 = 4;
        /// Payload is an optional.
        pub const OPTIONAL: i32 = 5;
    }
}

/// A model-local function definition.
#[derive(Clone, PartialEq, prost::Message)]
pub struct FunctionProto {
    /// Function name (operator type it defines).
    #[prost(string, tag = "1")]
    pub name: String,
    /// Formal input names.
    #[prost(string, repeated, tag = "4")]
    pub input: Vec<String>,
    /// Formal output names.
    #[prost(string, repeated, tag = "5")]
    pub output: Vec<String>,
    /// Attribute names without defaults.
    #[prost(string, repeated, tag = "6")]
    pub attribute: Vec<String>,
    /// Attributes with default values.
    #[prost(message, repeated, tag = "11")]
    pub attribute_proto: Vec<AttributeProto>,
    /// Function body nodes.
    #[prost(message, repeated, tag = "7")]
    pub node: Vec<NodeProto>,
    /// Human-readable documentation.
    #[prost(string, tag = "8")]
    pub doc_string: String,
    /// Operator sets used by the body.
    #[prost(message, repeated, tag = "9")]
    pub opset_import: Vec<OperatorSetIdProto>,
    /// Function domain.
    #[prost(string, tag = "10")]
    pub domain: String,
    /// Overload identifier.
    #[prost(string, tag = "13")]
    pub overload: String,
    /// Type/shape information for values in the body.
    #[prost(message, repeated, tag = "12")]
    pub value_info: Vec<ValueInfoProto>,
    /// Named metadata key/value pairs.
    #[prost(message, repeated, tag = "14")]
    pub metadata_props: Vec<StringStringEntryProto>,
}
