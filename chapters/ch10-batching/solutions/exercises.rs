//! Exercises for chapter 10.
