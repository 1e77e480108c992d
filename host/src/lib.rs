//! moe4
