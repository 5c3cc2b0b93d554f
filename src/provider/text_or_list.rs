//! A JSON value that is a string or an array of items — a message's content,
//! in Chat Completions and in Messages alike — read by hand rather than as an
//! `untagged` enum, so that an error inside an item keeps its path
//! (`messages[2].content[0].image_url: missing field `url``).

use std::fmt;
use std::marker::PhantomData;

use serde::Deserialize;
use serde::de::{self, Deserializer, SeqAccess, Visitor};

/// Reads a string as `text(string)`, an array as `list(items)`; anything else
/// is an error that says it expected `expecting`.
pub(crate) fn deserialize<'de, D, T, C>(
    deserializer: D,
    expecting: &'static str,
    text: fn(String) -> C,
    list: fn(Vec<T>) -> C,
) -> Result<C, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    deserializer.deserialize_any(TextOrList {
        expecting,
        text,
        list,
        items: PhantomData,
    })
}

struct TextOrList<T, C> {
    expecting: &'static str,
    text: fn(String) -> C,
    list: fn(Vec<T>) -> C,
    items: PhantomData<T>,
}

impl<'de, T: Deserialize<'de>, C> Visitor<'de> for TextOrList<T, C> {
    type Value = C;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.expecting)
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<C, E> {
        Ok((self.text)(text.to_owned()))
    }

    fn visit_string<E: de::Error>(self, text: String) -> Result<C, E> {
        Ok((self.text)(text))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<C, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok((self.list)(items))
    }
}
