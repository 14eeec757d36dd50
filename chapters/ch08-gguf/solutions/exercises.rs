//! Solutions to chapter 8's exercises.
