//! Exercises for chapter 8 (see the book's "Exercises" section of the chapter).
