//! Exercises for chapter 12. Fill in each `todo!()`, then run `cargo xtask exercises ch12`.
#![allow(unused_variables)]
