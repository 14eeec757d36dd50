//! The model's hyperparameters: chapter 3's validated `config.json` parser, which this
//! chapter uses for the whole model (see `ch03_attention::config`).

pub use ch03_attention::config::{Config, MAX_CONFIG_BYTES};
