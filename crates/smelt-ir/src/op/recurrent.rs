//! The `RecurrentOp` family: recurrent layers: RNN, GRU, LSTM.

crate::op_family! {
    /// Recurrent layers: RNN, GRU, LSTM.
    pub enum RecurrentOp {
        /// See the ONNX operator of the same name.
        Rnn,
    }
}
