//! Exercises for chapter 6 (placeholder until they are written).
