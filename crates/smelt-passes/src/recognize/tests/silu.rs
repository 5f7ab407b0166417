use super::{check, unchanged};

#[test]
fn x_times_sigmoid_becomes_swish() {
    check(
        r#"graph "g" {
  input %0 "x": f32[1,4,2,2]
  %1 "s" = elementwise.Sigmoid (%0) # "/act/Sigmoid"
  %2 "y" = elementwise.Mul (%0, %1) # "/act/Mul"
  %3 "t" = elementwise.Sigmoid (%0) # "sig_b"
  %4 "z" = elementwise.Mul (%3, %0) # "swapped"
  output %2, %4
}"#,
        r#"graph "g" {
  input %0 "x": f32[1,4,2,2]
  %2 "y" = elementwise.Swish {"alpha":1.0} (%0) # "/act/Mul"
  %4 "z" = elementwise.Swish {"alpha":1.0} (%0) # "swapped"
  output %2, %4
}"#,
    );
}

#[test]
fn sigmoid_read_elsewhere_or_of_another_value_is_left_alone() {
    unchanged(
        r#"graph "g" {
  input %0 "x": f32[4]
  input %1 "w": f32[4]
  %2 "s" = elementwise.Sigmoid (%0) # "sig"
  %3 "y" = elementwise.Mul (%0, %2) # "mul"
  %4 "t" = elementwise.Sigmoid (%1) # "sig_w"
  %5 "z" = elementwise.Mul (%0, %4) # "gate"
  output %3, %2, %5
}"#,
    );
}
