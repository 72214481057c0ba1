//! `Option<Option<T>>` for fields where `null` means "clear" and absence means "keep".

use serde::{Deserialize, Deserializer};

/// Deserializes a present field (even `null`) as `Some(..)`; use with `#[serde(default)]`.
pub fn double_option<'de, T, D>(de: D) -> Result<Option<Option<T>>, D::Error>
where
    T: Deserialize<'de>,
    D: Deserializer<'de>,
{
    Deserialize::deserialize(de).map(Some)
}
