//! Exercises for chapter 7 (to come).
